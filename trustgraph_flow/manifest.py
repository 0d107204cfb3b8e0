"""The service manifest: every processor of the suite, declared once.

A :class:`ProcessorEntry` says what a processor is and how it talks on the bus:

* ``id``: its processor id, the name of the console script that runs it alone, its default ``--id``;
* ``cls``: its class as ``"module:Class"`` (a string, so nothing is imported until it runs);
* ``runner``: the function of that module its console script calls (``pyproject.toml``);
* ``stores``: the stores it needs, constructor parameter -> store (:data:`STORES`);
* ``serves`` / ``calls``: the request/response services it answers / is a client of;
* ``consumes`` / ``feeds``: the flow (work) queues it reads / writes while handling messages;
* ``hears``: the broadcasts it subscribes to, every instance with a subscription of its own (the agent hears
  ``agent-cancel``: stop these sub-agents);
* ``starts``: flows it writes only when a request asks for it (the librarian's
  ``process-document`` starts ``document-load``); a closure follows them only when named;
* ``needs_llm``: it runs only where an LLM endpoint is configured;
* ``env``: environment variables a deployment gives it beyond the bus and store ones;
* ``profile``: the docker-compose profile it is in (``""``: started by ``docker compose up``);
* ``embedded``: it is part of the embedded stack (the gateway runs beside it, in ``tg-gateway``).

The contracts of the request/response services named here (schemas, timeouts, error replies,
idempotency) and the messages of the flows are in :mod:`trustgraph_flow.common.services`.

Derived from this table: the embedded stack (:mod:`trustgraph_flow.embedded`), the processors
a ``tg-*`` command starts embedded (:func:`closure` of the services and flows it uses), the
store options of each console script (:mod:`trustgraph_flow.common.stores`) and
``tg-processor-group`` entries named by ``service``.  Checked against it by tests
(``tests/unit/test_manifest.py``, ``tests/e2e/test_deployment_files.py``,
``tests/e2e/test_readme_distributed.py``): pyproject.toml's entry points, docker-compose.yml,
README's distributed set-up, and the consumers, producers and clients each processor really adds.

Adding a service: its module (a :class:`~trustgraph_base.processor.Processor` subclass and a
``run()`` that calls :func:`~trustgraph_base.processor.launch`), one entry here, and its
console script in ``pyproject.toml`` (a test fails until the three agree; docker-compose.yml
and README's distributed set-up too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["ProcessorEntry", "PROCESSORS", "STORES", "FLOW_NAMES", "closure", "entry", "store_kind",
           "processor_class", "group_main"]

#: The stores a processor may need: name -> (store kind of ``trustgraph_base.store.registry``, open options).
STORES: dict[str, tuple[str, dict[str, str]]] = {
    "triples": ("triples", {}),
    "librarian": ("librarian", {}),
    "graph-vectors": ("vectors", {"kind": "graph"}),
    "document-vectors": ("vectors", {"kind": "document"}),
}

#: The flow (work) queues (their messages: ``trustgraph_flow.common.services.FLOWS``).
FLOW_NAMES = ("triples-store", "document-load", "text-pages", "chunks", "entity-contexts", "answer-store")

#: The settings of every LLM call (``trustgraph_flow.model.llm_settings``); the timeout also sets the reply
#: deadlines of every client of a service that calls the LLM.
LLM_CALL_ENV = ("TG_LLM_TIMEOUT", "TG_LLM_MAX_RETRIES", "TG_LLM_MAX_TOKENS")
#: The LLM endpoint's settings (``trustgraph_flow.model.llm``, ``text-completion``) and the call settings.
LLM_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", *LLM_CALL_ENV)


@dataclass(frozen=True)
class ProcessorEntry:
    """One processor; see the module docstring for the fields."""

    id: str
    cls: str
    runner: str = "run"
    stores: dict[str, str] = field(default_factory=dict)
    serves: tuple[str, ...] = ()
    calls: tuple[str, ...] = ()
    consumes: tuple[str, ...] = ()
    feeds: tuple[str, ...] = ()
    #: flows written only when a request asks for it (followed by :func:`closure` only when named)
    starts: tuple[str, ...] = ()
    #: broadcasts every instance subscribes to on its own
    hears: tuple[str, ...] = ()
    needs_llm: bool = False
    env: tuple[str, ...] = ()
    #: the docker-compose profile (``""``: started by ``docker compose up``)
    profile: str = ""
    embedded: bool = True

    @property
    def entry_point(self) -> str:
        """Its console script's target in ``pyproject.toml``."""
        return f"{self.cls.partition(':')[0]}:{self.runner}"

    @property
    def store_kinds(self) -> tuple[str, ...]:
        """The store kinds it opens (``triples``, ``vectors``, ``librarian``), in that order."""
        kinds = {STORES[s][0] for s in self.stores.values()}
        return tuple(k for k in ("triples", "vectors", "librarian") if k in kinds)


_F = "trustgraph_flow."

#: Every processor, servers before their clients (the embedded stack starts them in this order
#: and stops them in reverse).
PROCESSORS: dict[str, ProcessorEntry] = {e.id: e for e in [
    ProcessorEntry("triples-write", _F + "storage.triples.service:TriplesWriteService",
                   stores={"triples_store": "triples"}, serves=("trace-claim",), consumes=("triples-store",)),
    ProcessorEntry("triples-query", _F + "query.triples.service:TriplesQueryService",
                   stores={"triples_store": "triples"}, serves=("triples", "trace-list")),
    ProcessorEntry("graph-embeddings-query", _F + "query.vectors.service:GraphEmbeddingsQuery",
                   runner="run_graph_embeddings", stores={"vector_index": "graph-vectors"},
                   serves=("graph-embeddings",)),
    ProcessorEntry("document-embeddings-query", _F + "query.vectors.service:DocumentEmbeddingsQuery",
                   runner="run_document_embeddings", stores={"vector_index": "document-vectors"},
                   serves=("document-embeddings",)),
    ProcessorEntry("embeddings", _F + "model.services:EmbeddingsService", runner="run_embeddings",
                   serves=("embeddings",)),
    ProcessorEntry("text-completion", _F + "model.services:TextCompletionService", runner="run_text_completion",
                   serves=("text-completion",), needs_llm=True, env=LLM_ENV, profile="llm"),
    ProcessorEntry("prompt", _F + "model.services:PromptService", runner="run_prompt",
                   serves=("prompt",), calls=("text-completion",), env=LLM_ENV),
    ProcessorEntry("librarian", _F + "librarian.service:LibrarianService",
                   stores={"librarian_store": "librarian", "triples_store": "triples",
                           "document_index": "document-vectors", "graph_index": "graph-vectors"},
                   serves=("librarian",), consumes=("answer-store",), feeds=("triples-store",),
                   starts=("document-load",)),
    ProcessorEntry("trace-admin", _F + "storage.traces.service:TraceAdminService",
                   stores={"triples_store": "triples"}, serves=("trace-admin",), calls=("librarian",)),
    ProcessorEntry("graph-embeddings-write", _F + "storage.vectors.service:GraphEmbeddingsWriter",
                   runner="run_graph_embeddings", stores={"vector_index": "graph-vectors"},
                   calls=("embeddings",), consumes=("entity-contexts",)),
    ProcessorEntry("document-embeddings-write", _F + "storage.vectors.service:DocumentEmbeddingsWriter",
                   runner="run_document_embeddings", stores={"vector_index": "document-vectors"},
                   calls=("embeddings",), consumes=("chunks",)),
    ProcessorEntry("decoder", _F + "ingest.services:DecoderService", runner="run_decoder",
                   calls=("librarian",), consumes=("document-load",), feeds=("text-pages", "triples-store")),
    ProcessorEntry("chunker", _F + "ingest.services:ChunkerService", runner="run_chunker",
                   calls=("librarian",), consumes=("text-pages",), feeds=("chunks", "triples-store")),
    ProcessorEntry("kg-extract", _F + "ingest.services:KgExtractService", runner="run_kg_extract",
                   calls=("librarian", "prompt"), consumes=("chunks",), feeds=("entity-contexts", "triples-store"),
                   env=LLM_ENV),
    ProcessorEntry("graph-rag", _F + "retrieval.graph_rag.service:GraphRagService",
                   serves=("graph-rag",), calls=("embeddings", "graph-embeddings", "triples", "prompt"),
                   feeds=("triples-store", "answer-store"), env=("TG_LLM_TIMEOUT",)),
    ProcessorEntry("document-rag", _F + "retrieval.document_rag.service:DocumentRagService",
                   serves=("document-rag",), calls=("embeddings", "document-embeddings", "prompt", "librarian"),
                   feeds=("triples-store", "answer-store"), env=("TG_LLM_TIMEOUT",)),
    ProcessorEntry("agent-manager-react", _F + "agent.react.service:AgentService",
                   serves=("agent",),
                   calls=("prompt", "trace-claim", "graph-rag", "document-rag", "text-completion", "agent"),
                   feeds=("triples-store", "answer-store"), hears=("agent-cancel",), env=LLM_ENV),
    ProcessorEntry("api-gateway", _F + "gateway.service:ApiGateway",
                   calls=("graph-rag", "document-rag", "agent", "triples", "librarian", "trace-list", "trace-admin"),
                   feeds=("triples-store", "entity-contexts"),
                   env=("TG_GATEWAY_HOST", "TG_GATEWAY_TOKEN", "TG_LLM_TIMEOUT"), profile="gateway", embedded=False),
]}


def entry(processor_id: str) -> ProcessorEntry:
    """The manifest entry of ``processor_id``; ``KeyError`` naming the known ids otherwise."""
    try:
        return PROCESSORS[processor_id]
    except KeyError:
        raise KeyError(f"unknown processor {processor_id!r}; known: {', '.join(PROCESSORS)}") from None


def store_kind(store: str) -> str:
    """``triples``, ``vectors`` or ``librarian``: the registry a store of :data:`STORES` is opened from."""
    return STORES[store][0]


def closure(*uses: str) -> tuple[str, ...]:
    """The processors that must run for something that uses ``uses``, in manifest order.

    ``uses`` names request/response services (``graph-rag``, ``triples``...) a command calls and
    flows it writes or starts (``document-load``...).  The closure adds the processors that
    serve those services or consume those flows, then, for each of them, the services it
    calls and the flows it feeds, until nothing new comes in.  ``starts`` flows are followed
    only when named in ``uses``.

    :raises ValueError: a name that is neither a service nor a flow of the manifest.
    """
    known = {n for e in PROCESSORS.values() for n in (*e.serves, *e.calls)} | set(FLOW_NAMES)
    unknown = [u for u in uses if u not in known]
    if unknown:
        raise ValueError(f"unknown services or flows: {', '.join(unknown)}")
    chosen: set[str] = set()
    pending = list(uses)
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for e in PROCESSORS.values():
            if e.id in chosen or (name not in e.serves and name not in e.consumes):
                continue
            chosen.add(e.id)
            pending.extend((*e.calls, *e.feeds))
    return tuple(pid for pid in PROCESSORS if pid in chosen)


def processor_class(name: str) -> type:
    """A processor class from a manifest id (``"triples-write"``) or a class path (``"module:Class"``)."""
    from trustgraph_base.processor.launcher import ConfigurationError, load_class

    if ":" in name:
        return load_class(name)
    try:
        return load_class(entry(name).cls)
    except KeyError as e:
        raise ConfigurationError(str(e.args[0])) from None


def group_main(argv: Sequence[str] | None = None) -> None:
    """``tg-processor-group -c group.toml``: processors named by ``service`` (a manifest id) or ``class``."""
    from trustgraph_base.processor.launcher import group_main as run_group

    run_group(argv, resolve=processor_class)


def _check() -> None:
    """Import-time sanity of the table itself (a typo here would silently shrink a closure)."""
    for e in PROCESSORS.values():
        bad = [s for s in e.stores.values() if s not in STORES]
        bad += [f for f in (*e.consumes, *e.feeds, *e.starts) if f not in FLOW_NAMES]
        if bad:
            raise ValueError(f"manifest entry {e.id}: unknown stores or flows {bad}")


_check()
