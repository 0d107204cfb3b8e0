"""One GraphRAG query, end to end, against abstract ports (so it runs on any bus and store).

Stages and what the client sees, in order (DESIGN.md 4)::

    explain(question) -> explain(exploration) -> explain(focus) -> chunk... -> explain(synthesis) -> final

Each explain message is emitted the moment its stage is done (queued, not waited for: see
``common/response_stream``; the Exploration just after the edge-selection request has left, see
:func:`_started`), and the same triples go to the explainability store.  The answer
and the Synthesis that points at it go to the librarian in one queued message; the librarian stores the answer first and then passes the Synthesis on
to the triple store, so a stored trace never names an answer that is not stored.  No request
waits for either: ``end_of_session`` means the broker has accepted every stage.  Round trips
per query: question embedding, entity search, one batched request per hop, one for labels,
the edge selection, and the source chains (run alongside synthesis).
On failure the trace ends with an Error entity derived from the last completed stage, and the
client gets an error message with ``end_of_session=True``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Protocol, Sequence

from trustgraph_base.provenance import uris
from trustgraph_base.provenance.namespaces import GRAPH_RETRIEVAL
from trustgraph_base.store.errors import InvalidQuery
from trustgraph_base.store.triples import check_names
from trustgraph_base.provenance.triples import (
    error_triples, exploration_triples, focus_triples, question_triples, synthesis_triples,
)
from trustgraph_base.schema import (
    EdgeSource, EntityMatch, Error, GraphRagQuery, GraphRagResponse, Term, Triple, TriplePattern,
)

from ...common.background_writes import BackgroundWrites, stage_write
from ...common.response_stream import ResponseStream
from .labels import get_labelgraph, term_label
from .selection import SelectionResult, resolve_selection
from .sources import (
    build_source_chains, source_documents, source_patterns, source_walk,
)
from .subgraph import Subgraph, exploration_patterns, label_patterns

log = logging.getLogger(__name__)

NO_KNOWLEDGE_ANSWER = "I found no relevant information in the knowledge graph to answer this question."
#: Longest question accepted (characters).  A question, not a document: far below the 4 MiB literal
#: limit and Pulsar's 5 MB messages (the question travels in explain events and prompts), so an
#: oversized one gets the same clear refusal on both stacks, before anything is stored.
MAX_QUERY_CHARS = 100_000
#: The failure of a query whose model answered with nothing (or only whitespace): an empty answer is no answer.
NO_ANSWER_ERROR = "the model returned no answer"
NO_SELECTION_ANSWER = ("None of the knowledge-graph edges that were explored was judged relevant to this question, "
                       "so I cannot answer it from the graph.")


def query_size_error(query: str) -> str:
    """Why ``query`` is refused for its size (``""``: it is not); the one wording of every query service."""
    if len(query) > MAX_QUERY_CHARS:
        return f"the query is {len(query):,} characters long; at most {MAX_QUERY_CHARS:,} are accepted"
    return ""


@dataclass
class PromptOutcome:
    """What a prompt call returned (parsed objects for JSONL templates, text otherwise)."""

    objects: list[Any] = field(default_factory=list)
    text: str = ""
    dropped: int = 0
    reasons: list[str] = field(default_factory=list)
    model: str = ""
    in_token: int = 0
    out_token: int = 0


class GraphRagPorts(Protocol):
    """Everything a query needs from the outside world."""

    async def embed(self, text: str) -> list[float]: ...

    async def find_entities(self, user: str, collection: str, vector: list[float], limit: int) -> list[EntityMatch]: ...

    async def query(self, user: str, collection: str, patterns: Sequence[TriplePattern], *,
                    follow: Sequence[str] = (), follow_depth: int = 0, describe: Sequence[str] = (),
                    describe_types: Sequence[str] = ()) -> list[Triple]: ...

    async def prompt(self, template: str, terms: dict[str, Any]) -> PromptOutcome: ...

    def prompt_stream(self, template: str, terms: dict[str, Any]) -> AsyncIterator[str | PromptOutcome]:
        """Yield text pieces, then one final :class:`PromptOutcome` with usage and model."""
        ...

    async def store_answer(self, user: str, collection: str, document_id: str, text: str, stage_uri: str,
                           stage_triples: list[Triple]) -> None:
        """Queue ``text`` for the librarian; the stage that points at it is stored only after it."""
        ...

    async def store_explain(self, user: str, collection: str, stage_uri: str, triples: list[Triple]) -> None: ...


@dataclass
class GraphRagSettings:
    """Service defaults (comparable to TrustGraph's); a request's non-zero limits override them."""

    entity_limit: int = 50
    triple_limit: int = 30
    max_subgraph_size: int = 150
    max_path_length: int = 2
    edge_limit: int = 25
    explain_collection: str = ""


Emit = Callable[[GraphRagResponse], Awaitable[None]]


class GraphRagError(RuntimeError):
    """A failure inside a stage; ``stage`` names how far the query got."""

    def __init__(self, stage: str, message: str):
        self.stage = stage
        super().__init__(message)


class GraphRag:
    """Runs GraphRAG queries with explainability.

    :param ports: the outside world (embeddings, entity search, triples, prompts, librarian, explain store).
    :param settings: defaults for limits and where explain triples go.
    """

    def __init__(self, ports: GraphRagPorts, settings: GraphRagSettings | None = None):
        self.ports = ports
        self.settings = settings or GraphRagSettings()

    async def query(self, req: GraphRagQuery, emit: Emit) -> None:
        """Answer ``req``, emitting every response message through ``emit``; never raises for query errors."""
        run = _Run(self, req, emit)
        await run.execute()


async def _started(coro: Awaitable[Any]) -> asyncio.Task:
    """Run ``coro`` as a task and let it go as far as its first wait before the caller goes on.

    A model request then leaves before the explain work the caller does next (building and
    sending a stage, walking source chains): that work needs nothing from the request, but it
    would compete with the request's way to the model for the CPU.
    """
    task = asyncio.ensure_future(coro)
    await asyncio.sleep(0)
    return task


class _Run:
    """State of one query."""

    def __init__(self, rag: GraphRag, req: GraphRagQuery, emit: Emit):
        s = rag.settings
        self.ports = rag.ports
        self.req = req
        self.stream = ResponseStream(emit)  # explain events are queued, other messages follow them
        self.explain = req.explainable
        self.collection = req.explain_collection or s.explain_collection or req.collection
        self.entity_limit = req.entity_limit or s.entity_limit
        self.triple_limit = req.triple_limit or s.triple_limit
        self.max_size = req.max_subgraph_size or s.max_subgraph_size
        self.max_hops = req.max_path_length or s.max_path_length
        self.edge_limit = req.edge_limit or s.edge_limit
        self.session = uris.new_id()
        self.q_uri = uris.question_uri(self.session)
        self.stage = "question"
        self.in_token = 0
        self.out_token = 0
        self.model = ""
        self.writes = BackgroundWrites()  # explain triples on their way to storage

    # ------------------------------------------------------------ explain plumbing
    async def _explain(self, uri: str, triples: list[Triple], *, answer: tuple[str, str] | None = None,
                       **extra: Any) -> None:
        """Send a stage to the client and to storage; ``answer`` = (document URI, text) it points at."""
        if not self.explain:
            return
        self._store_stage(uri, triples, answer)
        self._show_stage(uri, triples, **extra)

    def _store_stage(self, uri: str, triples: list[Triple], answer: tuple[str, str] | None = None) -> None:
        """Start storing a stage (not awaited here: the final message waits for every stage's write)."""
        self.writes.start(uri, stage_write(self.ports, self.req.user, self.collection, uri, triples, answer))

    def _show_stage(self, uri: str, triples: list[Triple], **extra: Any) -> None:
        """Queue a stage's explain event for the client."""
        self.stream.send_soon(GraphRagResponse(message_type="explain", explain_id=uri,
                                               explain_collection=self.collection, explain_graph=GRAPH_RETRIEVAL,
                                               explain_triples=triples, **extra))

    def _usage(self, outcome: PromptOutcome) -> None:
        self.in_token += outcome.in_token
        self.out_token += outcome.out_token
        self.model = outcome.model or self.model

    # ------------------------------------------------------------ the query
    async def execute(self) -> None:
        req = self.req
        try:
            if not req.query.strip():
                raise GraphRagError("question", "the query is empty")
            if query_size_error(req.query):
                raise GraphRagError("question", query_size_error(req.query))
            try:  # before anything is stored: a hostile name never reaches a store or an explain event
                check_names(req.user, req.collection)
            except InvalidQuery as e:
                raise GraphRagError("question", str(e)) from None
            await self._explain(self.q_uri, question_triples(self.q_uri, req.query, parent_uri=req.parent_uri))
            self.stage = "exploration"
            subgraph, seeds = await self._explore()
            self.stage = "focus"
            graph = get_labelgraph(subgraph.edges, subgraph.labels)
            selecting = await _started(self._select(graph, seeds, subgraph))
            try:  # the Exploration is built and sent while the model selects edges
                exp_uri = uris.exploration_uri(self.session)
                await self._explain(exp_uri, exploration_triples(exp_uri, self.q_uri, len(subgraph.edges),
                                                                 [m.entity for m in seeds if m.entity is not None]))
            except BaseException:
                selecting.cancel()
                raise
            selection = await selecting
            self.stage = "synthesis"
            await self._focus_and_synthesise(graph, selection, subgraph)
        except Exception as e:  # noqa: BLE001 - every failure ends the session with an error
            await self._fail(e)

    async def _explore(self) -> tuple[Subgraph, list[EntityMatch]]:
        req = self.req
        vector = await self.ports.embed(req.query)
        seeds = await self.ports.find_entities(req.user, req.collection, vector, self.entity_limit)
        subgraph = Subgraph(self.max_size)
        frontier: list[Term] = [m.entity for m in seeds if m.entity is not None]
        for m in seeds:
            if m.label and m.entity is not None:
                subgraph.labels.setdefault(m.entity.value, m.label)
        subgraph.mark_visited(frontier)
        for _hop in range(self.max_hops):
            if not frontier or subgraph.full:
                break
            results = await self.ports.query(req.user, req.collection,
                                             exploration_patterns(frontier, self.triple_limit))
            frontier = subgraph.add([results])
            subgraph.mark_visited(frontier)
        missing = subgraph.unlabelled()
        if missing:
            subgraph.add([await self.ports.query(req.user, req.collection, label_patterns(missing))])
        return subgraph, seeds

    async def _select(self, graph, seeds: list[EntityMatch], subgraph: Subgraph) -> SelectionResult:
        if not graph.ids:
            return SelectionResult()
        scores = {}
        for m in seeds:
            if m.entity is not None:
                scores[term_label(m.entity, subgraph.labels)] = round(float(m.score), 4)
        outcome = await self.ports.prompt("kg-edge-selection", {
            "query": self.req.query, "knowledge": graph.knowledge(), "entity_scores": scores,
            "limit": self.edge_limit})
        self._usage(outcome)
        result = resolve_selection(outcome.objects, graph.uri_map, self.edge_limit,
                                   parser_dropped=outcome.dropped, parser_reasons=outcome.reasons)
        if result.dropped:
            log.info("edge selection for %s: %d unusable line(s): %s", self.q_uri, result.dropped,
                     "; ".join(result.reasons[:5]))
        return result

    async def _focus_and_synthesise(self, graph, selection: SelectionResult, subgraph: Subgraph) -> None:
        req = self.req
        edges = [s.edge for s in selection.selections]
        knowledge = [{"s": s, "p": p, "o": o, "reasoning": sel.reasoning}
                     for sel in selection.selections for (s, p, o) in [graph.label_map[sel.edge_id]]]
        # Synthesis starts now; its text is held back until the focus event has gone out.
        pieces: asyncio.Queue = asyncio.Queue()
        synth = await _started(self._synthesise(knowledge, bool(graph.ids), pieces))
        try:
            edge_sources: list[EdgeSource] = []
            if self.explain and edges:
                found = await self.ports.query(req.user, req.collection, source_patterns(edges), **source_walk())
                edge_sources = build_source_chains(edges, found)
            focus_uri = uris.focus_uri(self.session)
            await self._explain(focus_uri, focus_triples(focus_uri, uris.exploration_uri(self.session),
                                                         selection.selections, self.session,
                                                         dropped=selection.dropped),
                                edge_sources=edge_sources)
            answer, leading = [], ""  # leading: whitespace before the first text, sent with it, never alone
            while True:
                item = await pieces.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                answer.append(item)
                if req.streaming:
                    if leading is not None and not item.strip():
                        leading += item  # only whitespace so far: not an answer yet
                        continue
                    await self.stream.send(GraphRagResponse(message_type="chunk", response=(leading or "") + item))
                    leading = None
            await synth
        except BaseException:
            synth.cancel()
            raise
        text = "".join(answer)
        if not text.strip():  # an empty answer is a failed synthesis, never an answer
            raise GraphRagError("synthesis", NO_ANSWER_ERROR)
        syn_uri, syn_triples = uris.synthesis_uri(self.session), []
        if self.explain:  # stored first: the broker's acknowledgement overlaps the last chunk's send
            doc_uri = uris.answer_document_uri(self.session)
            syn_triples = synthesis_triples(syn_uri, uris.focus_uri(self.session), doc_uri, llm_model=self.model)
            self._store_stage(syn_uri, syn_triples, answer=(doc_uri, text))
        if not req.streaming:
            await self.stream.send(GraphRagResponse(message_type="chunk", response=text, end_of_stream=True))
        else:
            await self.stream.send(GraphRagResponse(message_type="chunk", response="", end_of_stream=True))
        if self.explain:
            self._show_stage(syn_uri, syn_triples)  # the client sees it after the answer's last chunk
            await self.writes.wait()  # end_of_session means: the whole trace is on its way to storage
        await self.stream.send(GraphRagResponse(message_type="chunk", end_of_session=True, in_token=self.in_token,
                                                out_token=self.out_token, model=self.model,
                                                sources=source_documents(edge_sources)))

    async def _synthesise(self, knowledge: list[dict], explored: bool, out: asyncio.Queue) -> None:
        """Put answer pieces on ``out``, then ``None``; an exception is put on ``out`` too."""
        try:
            if not knowledge:
                out.put_nowait(NO_SELECTION_ANSWER if explored else NO_KNOWLEDGE_ANSWER)
            else:
                async for item in self.ports.prompt_stream("kg-synthesis",
                                                           {"query": self.req.query, "knowledge": knowledge}):
                    if isinstance(item, PromptOutcome):
                        self._usage(item)
                    elif item:
                        out.put_nowait(item)
            out.put_nowait(None)
        except Exception as e:  # noqa: BLE001 - handed to the consumer of the queue
            out.put_nowait(e)

    async def _fail(self, e: BaseException) -> None:
        stage = getattr(e, "stage", self.stage)
        message = str(e) or type(e).__name__
        log.warning("graph-rag query %s failed at %s: %s", self.q_uri, stage, message)
        await self.writes.settle()
        stored = self.writes.last_written  # the Error follows the last stage that reached storage
        if self.explain and stored:
            err_uri = uris.error_uri(self.session)
            try:
                await self._explain(err_uri, error_triples(err_uri, stored, message, stage))
            except Exception as e2:  # noqa: BLE001 - the client still gets its error below
                log.error("could not record the error of %s: %s", self.q_uri, e2)
            await self.writes.settle()
        await self.stream.settle()  # the queued explain events first; one that failed is logged
        await self.stream.send(GraphRagResponse(message_type="chunk", error=Error("graph-rag-error", message),
                                                end_of_stream=True, end_of_session=True,
                                                explain_id=self.q_uri if stored else "",
                                                explain_collection=self.collection if stored else "",
                                                explain_graph=GRAPH_RETRIEVAL if stored else ""))
