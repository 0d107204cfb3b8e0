"""triples-query: answer pattern queries (single, batched, chain-walking) and list stored traces.

One request can carry many patterns (answered in one store round trip: ``query_many``) and
ask the service to walk a provenance chain server-side (``follow`` / ``describe``), so a
GraphRAG query needs a handful of bus round trips however many edges it touches.
Streaming requests get results in batches of ``batch_size`` with ``is_final`` on the last.
"""

from __future__ import annotations

import asyncio
import logging

from trustgraph_base.processor import Processor, launch
from trustgraph_base.rdf.terms import serialize_term
from trustgraph_base.schema import (
    IRI, Term, TraceListRequest, TraceListResponse, TriplePattern, TriplesQueryRequest, TriplesQueryResponse,
)
from trustgraph_base.store.triples import open_triples_store

from ...common.services import request_spec
from ...common.stores import StoreBackedProcessor

log = logging.getLogger(__name__)

MAX_FOLLOW_DEPTH = 8
MAX_PATTERNS = 10_000


def _key(t) -> tuple:
    return (serialize_term(t.s), serialize_term(t.p), serialize_term(t.o), t.g)


class TriplesQueryService(StoreBackedProcessor, Processor):
    """Answers TriplesQueryRequest and TraceListRequest from the triple store."""

    default_id = "triples-query"

    def __init__(self, *, triples_store=None, **params):
        super().__init__(**params)
        self.store = self.use_store(triples_store, open_triples_store)
        self.add(request_spec("triples", self.flow, self.on_query))
        self.add(request_spec("trace-list", self.flow, self.on_trace_list, name="trace-list"))

    def run_query(self, req: TriplesQueryRequest) -> list:
        """Execute one request against the store (runs in a worker thread)."""
        patterns = list(req.patterns) or [TriplePattern(req.s, req.p, req.o, req.g, req.limit)]
        if len(patterns) > MAX_PATTERNS:
            raise ValueError(f"too many patterns in one request ({len(patterns)} > {MAX_PATTERNS})")
        if not 0 <= req.follow_depth <= MAX_FOLLOW_DEPTH:
            raise ValueError(f"follow_depth must be between 0 and {MAX_FOLLOW_DEPTH}")
        results = self.store.query_many(req.user, req.collection, patterns)
        out, seen = [], set()

        def take(triples):
            for t in triples:
                k = _key(t)
                if k not in seen:
                    seen.add(k)
                    out.append(t)

        for r in results:
            take(r)
        if req.follow_depth and (req.follow or req.describe):
            # Walk per graph selection of the originating pattern.
            frontier: dict[str | None, set[str]] = {}
            for pat, res in zip(patterns, results):
                frontier.setdefault(pat.g, set()).update(t.s.value for t in res if t.s.type == IRI)
            visited: set[tuple] = set()
            for level in range(req.follow_depth + 1):
                batch, owners = [], []
                for g, nodes in frontier.items():
                    for node in sorted(nodes):
                        if (g, node) in visited:
                            continue
                        visited.add((g, node))
                        s = Term(IRI, node)
                        preds = list(req.describe) + (list(req.follow) if level < req.follow_depth else [])
                        for p in preds:
                            batch.append(TriplePattern(s=s, p=Term(IRI, p), g=g, limit=100))
                            owners.append(g)
                if not batch:
                    break
                found = self.store.query_many(req.user, req.collection, batch)
                frontier = {}
                for pat, g, res in zip(batch, owners, found):
                    take(res)
                    if pat.p.value in req.follow:
                        frontier.setdefault(g, set()).update(t.o.value for t in res if t.o.type == IRI)
        return out

    async def on_query(self, req: TriplesQueryRequest, ctx) -> None:
        triples = await asyncio.to_thread(self.run_query, req)
        if not req.streaming:
            await ctx.respond(TriplesQueryResponse(triples=triples, is_final=True))
            return
        size = req.batch_size if req.batch_size > 0 else 500
        for i in range(0, max(len(triples), 1), size):
            part = triples[i:i + size]
            await ctx.respond(TriplesQueryResponse(triples=part, is_final=i + size >= len(triples)))

    async def on_trace_list(self, req: TraceListRequest, ctx) -> None:
        page = await asyncio.to_thread(self.store.list_traces, req.user, req.collection, req.type, req.limit,
                                       req.cursor)
        await ctx.respond(TraceListResponse(traces=page.traces, next_cursor=page.next_cursor))


def run() -> None:
    launch(TriplesQueryService)
