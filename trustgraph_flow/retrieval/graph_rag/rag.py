"""One GraphRAG query, end to end, against abstract ports (so it runs on any bus and store).

Stages and what the client sees, in order (docs/trace-model.md)::

    explain(question) -> explain(grounding) -> explain(exploration) -> explain(focus) -> chunk...
    -> explain(synthesis) -> final

Each explain message is emitted the moment its stage is done, and the same triples go to the
explainability store, neither awaited (:class:`trustgraph_flow.common.query_session.QuerySession`);
the Grounding (the seed entities the question's embedding found) goes as soon as the entity search
answered, the Exploration just after the edge-selection request has left
(:func:`trustgraph_flow.common.query_session.alongside`).  The Focus and the Synthesis record the
token usage and model of their model calls.  The answer and the Synthesis that
points at it go to the librarian in one queued message; the librarian stores the answer first
and then passes the Synthesis on to the triple store, so a stored trace never names an answer
that is not stored.  No request waits for either: ``end_of_session`` means the broker has
accepted every stage.  Round trips per query: question embedding, entity search, one batched
request per hop, one for labels, the edge selection, and the source chains (run alongside
synthesis).
On failure the trace ends with an Error entity derived from the last completed stage, and the
client gets an error message with ``end_of_session=True``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from trustgraph_base import telemetry
from trustgraph_base.provenance import uris
from trustgraph_base.provenance.sources import build_source_chains, source_documents, source_patterns, source_walk
from trustgraph_base.provenance.triples import (
    LlmUsage,
    SelectionCut,
    exploration_triples,
    focus_triples,
    grounding_triples,
    question_triples,
    synthesis_triples,
)
from trustgraph_base.schema import (
    EdgeSource,
    EntityMatch,
    Error,
    GraphRagQuery,
    GraphRagResponse,
    Term,
    Triple,
    TriplePattern,
)
from trustgraph_base.store.triples import check_names

from ...common.ports import PromptOutcome
from ...common.query_session import ExplainStore, QuerySession, TraceFields, alongside, check_question
from ...model.extractive import MODEL_ID as EXTRACTIVE_MODEL_ID
from ...model.prompts.templates import EDGE_SELECTION_EXAMPLE_REASONING
from .budget import DEFAULT_SELECTION_TOKEN_BUDGET, cut_candidates
from .budget import SelectionCut as BudgetCut
from .labels import get_labelgraph, term_label
from .selection import SelectionResult, flag_unusable_reasoning, resolve_selection
from .subgraph import Subgraph, exploration_patterns, label_patterns

log = logging.getLogger(__name__)

NO_KNOWLEDGE_ANSWER = "I found no relevant information in the knowledge graph to answer this question."
NO_SELECTION_ANSWER = ("None of the knowledge-graph edges that were explored was judged relevant to this question, "
                       "so I cannot answer it from the graph.")


class GraphRagPorts(ExplainStore, Protocol):
    """Everything a query needs from the outside world (and where its trace is stored)."""

    async def embed(self, text: str) -> list[float]: ...

    async def find_entities(self, user: str, collection: str, vector: list[float], limit: int) -> list[EntityMatch]: ...

    async def query(self, user: str, collection: str, patterns: Sequence[TriplePattern], *,
                    follow: Sequence[str] = (), follow_depth: int = 0, describe: Sequence[str] = (),
                    describe_types: Sequence[str] = ()) -> list[Triple]: ...

    async def prompt(self, template: str, terms: dict[str, Any]) -> PromptOutcome: ...

    def prompt_stream(self, template: str, terms: dict[str, Any]) -> AsyncIterator[str | PromptOutcome]:
        """Yield text pieces, then one final :class:`PromptOutcome` with usage and model."""
        ...


@dataclass
class GraphRagSettings:
    """Service defaults (comparable to TrustGraph's); a request's non-zero limits override them."""

    entity_limit: int = 50
    triple_limit: int = 30
    max_subgraph_size: int = 150
    max_path_length: int = 2
    edge_limit: int = 25
    explain_collection: str = ""
    #: most tokens of the edge-selection prompt (0: every candidate is sent); a request may override it
    selection_token_budget: int = DEFAULT_SELECTION_TOKEN_BUDGET


Emit = Callable[[GraphRagResponse], Awaitable[None]]


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


def _failed(error: Exception, message: str, trace: TraceFields) -> GraphRagResponse:
    """The last message of a failed query (naming its trace when one was stored)."""
    return GraphRagResponse(message_type="chunk", error=Error("graph-rag-error", message), end_of_stream=True,
                            end_of_session=True, **trace)


class _Run:
    """State of one query."""

    def __init__(self, rag: GraphRag, req: GraphRagQuery, emit: Emit):
        s = rag.settings
        self.ports = rag.ports
        self.req = req
        self.entity_limit = req.entity_limit or s.entity_limit
        self.triple_limit = req.triple_limit or s.triple_limit
        self.max_size = req.max_subgraph_size or s.max_subgraph_size
        self.max_hops = req.max_path_length or s.max_path_length
        self.edge_limit = req.edge_limit or s.edge_limit
        budget = req.selection_token_budget
        self.token_budget = s.selection_token_budget if budget is None else budget
        self.id = uris.new_id()
        self.q_uri = uris.question_uri(self.id)
        self.session = QuerySession(self.ports, emit, response=GraphRagResponse, user=req.user,
                                    collection=req.explain_collection or s.explain_collection or req.collection,
                                    question_uri=self.q_uri, explainable=req.explainable, streaming=req.streaming,
                                    subject=f"graph-rag query {self.q_uri}", failure=_failed)

    async def execute(self) -> None:
        await self.session.run(self._answer)

    async def _answer(self) -> None:
        req, session = self.req, self.session
        check_question(req.query)
        check_names(req.user, req.collection)  # before anything is stored: a hostile name never reaches a store
        if self.token_budget < 0:
            raise ValueError(f"selection_token_budget must be >= 0 tokens (0: no cut), got {self.token_budget}")
        if session.explainable:
            telemetry.set_explain_id(self.q_uri)
        await session.explain(self.q_uri, question_triples(self.q_uri, req.query, parent_uri=req.parent_uri,
                                                           otel_trace_id=telemetry.current_trace_id()))
        session.stage = "grounding"
        seeds = await self._ground()
        session.stage = "exploration"
        subgraph = await self._explore(seeds)
        session.stage = "focus"
        graph = get_labelgraph(subgraph.edges, subgraph.labels)
        cut = self._cut(graph, seeds, subgraph)
        async with alongside(self._select(graph, cut)) as selecting:
            exp_uri = uris.exploration_uri(self.id)  # built and sent while the model selects edges
            recorded = SelectionCut(cut.sent, cut.budget, cut.prompt_tokens) if cut is not None else None
            await session.explain(exp_uri, exploration_triples(exp_uri, self.q_uri, len(subgraph.edges),
                                                               [m.entity for m in seeds if m.entity is not None],
                                                               grounding_uri=uris.grounding_uri(self.id),
                                                               cut=recorded))
        selection = await selecting
        telemetry.set_attributes({"trustgraph.graph_rag.seed_entities": len(seeds),
                                  "trustgraph.graph_rag.edges_explored": len(subgraph.edges),
                                  "trustgraph.graph_rag.edges_sent": cut.sent if cut is not None else 0,
                                  "trustgraph.graph_rag.edges_selected": len(selection.selections)})
        session.stage = "synthesis"
        await self._focus_and_synthesise(graph, selection, subgraph)

    async def _ground(self) -> list[EntityMatch]:
        """The seed entities: the entities whose vectors are nearest the question's; the Grounding names them."""
        req = self.req
        vector = await self.ports.embed(req.query)
        seeds = await self.ports.find_entities(req.user, req.collection, vector, self.entity_limit)
        g_uri = uris.grounding_uri(self.id)
        concepts = [m.label or term_label(m.entity, {}) for m in seeds if m.entity is not None]
        await self.session.explain(g_uri, grounding_triples(g_uri, self.q_uri, concepts))
        return seeds

    async def _explore(self, seeds: list[EntityMatch]) -> Subgraph:
        req = self.req
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
        return subgraph

    def _cut(self, graph, seeds: list[EntityMatch], subgraph: Subgraph) -> BudgetCut | None:
        """The edge-selection prompt's terms: the candidates ranked and cut to the token budget (none: no edges)."""
        if not graph.ids:
            return None
        scores = {}
        for m in seeds:
            if m.entity is not None:
                scores[term_label(m.entity, subgraph.labels)] = round(float(m.score), 4)
        return cut_candidates(self.req.query, graph.knowledge(), scores, self.edge_limit, self.token_budget)

    async def _select(self, graph, cut: BudgetCut | None) -> SelectionResult:
        if cut is None:
            return SelectionResult()
        outcome = await self.ports.prompt("kg-edge-selection", cut.terms)
        self.session.count(outcome)
        # Only the edges the selector was shown can be selected: selected ⊆ sent ⊆ candidates.
        sent = {edge_id: graph.uri_map[edge_id] for edge_id in cut.sent_ids}
        result = resolve_selection(outcome.objects, sent, self.edge_limit,
                                   parser_dropped=outcome.dropped, parser_reasons=outcome.reasons)
        result.usage = LlmUsage(outcome.in_token, outcome.out_token, outcome.model)
        if result.dropped:
            log.info("edge selection for %s: %d unusable line(s): %s", self.q_uri, result.dropped,
                     "; ".join(result.reasons[:5]))
        # The extractive selector's reasonings state computed evidence: equal evidence gives equal text.
        if outcome.model != EXTRACTIVE_MODEL_ID and flag_unusable_reasoning(
                result.selections, [EDGE_SELECTION_EXAMPLE_REASONING]):
            log.info("edge selection for %s: %d unusable reasoning(s)", self.q_uri, result.unusable)
        return result

    async def _focus_and_synthesise(self, graph, selection: SelectionResult, subgraph: Subgraph) -> None:
        req, session = self.req, self.session
        edges = [s.edge for s in selection.selections]
        knowledge = [{"s": s, "p": p, "o": o, "reasoning": sel.reasoning}
                     for sel in selection.selections for (s, p, o) in [graph.label_map[sel.edge_id]]]
        # Synthesis starts now; its text is held back until the focus event has gone out.
        pieces: asyncio.Queue = asyncio.Queue()
        synthesis_usage: list[LlmUsage] = []  # the synthesis model call's, once it has ended
        async with alongside(self._synthesise(knowledge, bool(graph.ids), pieces, synthesis_usage)) as synth:
            edge_sources: list[EdgeSource] = []
            if session.explainable and edges:
                found = await self.ports.query(req.user, req.collection, source_patterns(edges), **source_walk())
                edge_sources = build_source_chains(edges, found)
            focus_uri = uris.focus_uri(self.id)
            await session.explain(focus_uri, focus_triples(focus_uri, uris.exploration_uri(self.id),
                                                           selection.selections, self.id, dropped=selection.dropped,
                                                           usage=selection.usage),
                                  edge_sources=edge_sources)
            while True:
                item = await pieces.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                await session.add_answer(item)
            await synth
        text = session.answer()
        syn_uri, syn_triples = uris.synthesis_uri(self.id), []
        if session.explainable:  # stored first: the broker's acknowledgement overlaps the last chunk's send
            doc_uri = uris.answer_document_uri(self.id)
            syn_triples = synthesis_triples(syn_uri, uris.focus_uri(self.id), doc_uri,
                                            usage=synthesis_usage[0] if synthesis_usage else None)
            session.store(syn_uri, syn_triples, answer=(doc_uri, text))
        await session.end_answer(text)
        await session.show(syn_uri, syn_triples)  # the client sees it after the answer's last chunk
        await session.close(GraphRagResponse(message_type="chunk", end_of_session=True, **session.usage(),
                                             sources=source_documents(edge_sources)))

    async def _synthesise(self, knowledge: list[dict], explored: bool, out: asyncio.Queue,
                          usage: list[LlmUsage]) -> None:
        """Put answer pieces on ``out``, then ``None``; an exception is put on ``out`` too.  The model call's
        usage is appended to ``usage`` (nothing when the answer needs no model)."""
        try:
            if not knowledge:
                out.put_nowait(NO_SELECTION_ANSWER if explored else NO_KNOWLEDGE_ANSWER)
            else:
                async for item in self.ports.prompt_stream("kg-synthesis",
                                                           {"query": self.req.query, "knowledge": knowledge}):
                    if isinstance(item, PromptOutcome):
                        self.session.count(item)
                        usage.append(LlmUsage(item.in_token, item.out_token, item.model))
                    elif item:
                        out.put_nowait(item)
            out.put_nowait(None)
        except Exception as e:  # noqa: BLE001 - handed to the consumer of the queue
            out.put_nowait(e)
