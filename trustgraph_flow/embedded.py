"""The embedded deployment: every processor in one process, on the in-process bus, over SQLite.

The CLI runs this when no ``--pulsar-url`` is given; tests and benchmarks use it too.  The
stores are opened once and shared by the processors that need them (one SQLite file per
user and kind under ``$TG_HOME``).  The same processors, unchanged, run as separate
processes over Pulsar in the distributed set-up.

A data directory that cannot be used (not a directory, read-only, no permission) stops the
stack from starting.  One that fails later (the disk fills up) fails the stack: on the
in-process bus a message lives only in memory, so retrying it until the machine is fixed would
make the command wait for ever.  The first processor to meet such a failure records it
(:attr:`EmbeddedStack.failure`), every processor stops taking messages (nothing written after
the failed write, so a trace stays a prefix of its stages), and :meth:`EmbeddedStack.wait_idle`
and the stack's watchers (:meth:`EmbeddedStack.watch`, the CLI's connection) raise it.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from trustgraph_base.processor import Processor
from trustgraph_base.pubsub import open_backend

__all__ = ["EmbeddedStack", "start_embedded"]


def _llm_configured() -> bool:
    backend = os.environ.get("LLM_BACKEND", "").lower()
    if backend:
        return backend == "openai"
    return bool(os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"))


@dataclass
class EmbeddedStack:
    """A running embedded deployment; ``backend`` is the in-process bus clients talk to."""

    backend: Any
    processors: list[Processor] = field(default_factory=list)
    stores: list[Any] = field(default_factory=list)
    flow: str = "default"
    #: The first environment failure a processor met (in-process bus only): the stack halted on it.
    failure: BaseException | None = None
    _watchers: list[Callable[[BaseException], None]] = field(default_factory=list, repr=False)

    def watch(self, callback: Callable[[BaseException], None]) -> Callable[[], None]:
        """Call ``callback(failure)`` when the stack fails; returns the function that stops watching."""
        self._watchers.append(callback)
        return lambda: self._watchers.remove(callback) if callback in self._watchers else None

    def fail(self, failure: BaseException) -> None:
        """A processor met an environment failure: halt every processor, then tell the watchers (once)."""
        if self.failure is not None:
            return
        self.failure = failure
        for p in self.processors:
            p.halt()
        for callback in list(self._watchers):
            callback(failure)

    def get(self, processor_id: str) -> Processor:
        for p in self.processors:
            if p.id == processor_id:
                return p
        raise KeyError(processor_id)

    async def wait_idle(self, settle: float = 0.05, timeout: float = 600.0) -> None:
        """Wait until no processor is handling a message and the bus is quiet for ``settle`` seconds.

        :raises StoreEnvironmentError: the stack failed (:attr:`failure`), before or while waiting.
        """
        import asyncio

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        quiet_since = None
        pending = getattr(self.backend, "pending", None)
        if pending is None:  # a real broker: no queue depth to read, so wait for a longer quiet period
            settle = max(settle, 1.0)
        while loop.time() < deadline:
            if self.failure is not None:
                raise self.failure
            busy = any(p.in_flight for p in self.processors) or (pending is not None and pending() > 0)
            now = loop.time()
            if busy:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = now
            elif now - quiet_since >= settle:
                return
            await asyncio.sleep(0.01)
        raise TimeoutError("the embedded pipeline did not become idle")

    async def stop(self) -> None:
        """Stop every processor (in-flight handlers finish first), close the stores and the bus.

        After a store failure the halted processors' in-flight handlers can only wait for
        services that no longer answer, so they get :data:`HALTED_STOP_SECONDS`, not the usual 30 s.
        """
        for p in reversed(self.processors):
            if self.failure is not None:
                await p.stop(timeout=HALTED_STOP_SECONDS)
            else:
                await p.stop()
        for s in self.stores:
            s.close()
        await self.backend.close()


#: How long a halted stack's processors may take to finish their in-flight handlers on stop.
HALTED_STOP_SECONDS = 0.2

#: Processor groups by purpose, so a command starts only what it needs.
STORAGE = ("triples-write", "triples-query")
QUERY = STORAGE + ("graph-embeddings-query", "document-embeddings-query", "embeddings", "prompt", "librarian",
                   "text-completion")
INGEST = ("librarian", "decoder", "chunker", "kg-extract", "graph-embeddings-write", "document-embeddings-write",
          "embeddings", "prompt", "text-completion") + STORAGE
SERVICES = QUERY + ("graph-rag", "document-rag", "agent-manager-react", "trace-admin")
ALL = tuple(dict.fromkeys(SERVICES + INGEST))


async def start_embedded(home: Path | None = None, *, flow: str = "default", only: tuple[str, ...] = ALL,
                         llm: str = "auto", settings: dict[str, dict] | None = None,
                         backend=None, store: str = "sqlite", store_options: dict | None = None) -> EmbeddedStack:
    """Start the processors named in ``only`` in this process and return the running stack.

    The default is the embedded deployment (in-process bus, SQLite).  Tests and benchmarks
    also run the very same processors over Pulsar (``backend``) and Cassandra (``store``).

    :param home: SQLite data directory (default ``$TG_HOME`` or ``~/.trustgraph``).
    :param only: processor ids to run (see :data:`ALL`); a command needing only trace listing
        starts just the triples services.
    :param llm: ``auto`` | ``extractive`` | ``openai`` for the prompt service.
    :param settings: extra constructor parameters per processor id (they override the defaults).
    :param backend: a pub/sub backend (default: a new in-process one).
    :param store: ``sqlite`` or ``cassandra``; ``store_options`` are passed to the store openers.
    """
    from .common.stores import store_options_from

    if store == "sqlite":
        options = {"home": Path(home)} if home else {}
        options.update(store_options or {})
    else:
        options = store_options_from(store, store_options)
    stores: dict[str, Any] = {}

    def shared(kind: str):
        """One store object per kind, shared by every processor that needs it."""
        if kind not in stores:
            if kind == "triples":
                from trustgraph_base.store.triples import open_triples_store

                stores[kind] = open_triples_store(store, **options)
            elif kind == "librarian":
                from trustgraph_base.store.librarian import open_librarian_store

                stores[kind] = open_librarian_store(store, **options)
            else:
                from trustgraph_base.store.vectors import open_vector_index

                stores[kind] = open_vector_index(store, kind=kind, **options)
        return stores[kind]

    backend = backend or open_backend("memory")
    extra = settings or {}
    use_llm = llm == "openai" or (llm == "auto" and _llm_configured())
    # processor id -> (class path, constructor arguments); classes are imported only when run,
    # so a command that lists traces does not pay for PDF parsing or the embedder.
    factories = {
        "triples-write": lambda: ("storage.triples.service:TriplesWriteService", {"triples_store": shared("triples")}),
        "triples-query": lambda: ("query.triples.service:TriplesQueryService", {"triples_store": shared("triples")}),
        "graph-embeddings-query": lambda: ("query.vectors.service:GraphEmbeddingsQuery",
                                           {"vector_index": shared("graph")}),
        "document-embeddings-query": lambda: ("query.vectors.service:DocumentEmbeddingsQuery",
                                              {"vector_index": shared("document")}),
        "embeddings": lambda: ("model.services:EmbeddingsService", {}),
        "prompt": lambda: ("model.services:PromptService", {"llm": "openai" if use_llm else "extractive"}),
        "text-completion": lambda: ("model.services:TextCompletionService", {}) if use_llm else None,
        "librarian": lambda: ("librarian.service:LibrarianService", {
            "librarian_store": shared("librarian"), "triples_store": shared("triples"),
            "document_index": shared("document"), "graph_index": shared("graph")}),
        "decoder": lambda: ("ingest.services:DecoderService", {}),
        "chunker": lambda: ("ingest.services:ChunkerService", {}),
        "kg-extract": lambda: ("ingest.services:KgExtractService", {"extractor": "llm" if use_llm else "pattern"}),
        "graph-embeddings-write": lambda: ("storage.vectors.service:GraphEmbeddingsWriter",
                                           {"vector_index": shared("graph")}),
        "document-embeddings-write": lambda: ("storage.vectors.service:DocumentEmbeddingsWriter",
                                              {"vector_index": shared("document")}),
        "graph-rag": lambda: ("retrieval.graph_rag.service:GraphRagService", {}),
        "document-rag": lambda: ("retrieval.document_rag.service:DocumentRagService", {}),
        "agent-manager-react": lambda: ("agent.react.service:AgentService", {}),
        "trace-admin": lambda: ("storage.traces.service:TraceAdminService", {"triples_store": shared("triples")}),
    }
    unknown = set(only) - set(factories)
    if unknown:
        raise ValueError(f"unknown embedded processors: {', '.join(sorted(unknown))}")
    procs = []
    for pid in dict.fromkeys(only):
        made = factories[pid]()
        if made is None:
            continue
        path, kw = made
        module, _, name = path.partition(":")
        cls = getattr(importlib.import_module(f"{__package__}.{module}"), name)
        procs.append(cls(backend=backend, flow=flow, **{**kw, **extra.get(pid, {})}))
    stack = EmbeddedStack(backend, [], list(stores.values()), flow)
    if not backend.durable:  # on a broker the messages wait for the machine to be fixed: an outage
        for p in procs:
            p.on_environment_failure = stack.fail
    try:
        for p in procs:
            await p.start()
            stack.processors.append(p)
    except BaseException:
        await stack.stop()
        raise
    return stack
