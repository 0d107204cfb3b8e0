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
from trustgraph_base.processor.metrics import STORE_LOOKUPS
from trustgraph_base.provenance.namespaces import RDF_TYPE
from trustgraph_base.rdf.terms import serialize_term
from trustgraph_base.schema import (
    IRI,
    Term,
    TraceListRequest,
    TraceListResponse,
    TriplePattern,
    TriplesQueryRequest,
    TriplesQueryResponse,
)

from ...common.services import request_spec
from ...common.stores import StoreBackedProcessor

log = logging.getLogger(__name__)

MAX_FOLLOW_DEPTH = 8
MAX_PATTERNS = 10_000
#: Rows read per node in one subject slice of a chain walk (see ``TriplesQueryService._walk``).
NODE_SLICE = 64


def _key(t) -> tuple:
    return (serialize_term(t.s), serialize_term(t.p), serialize_term(t.o), t.g)


class TriplesQueryService(StoreBackedProcessor, Processor):
    """Answers TriplesQueryRequest and TraceListRequest from the triple store."""

    default_id = "triples-query"

    def __init__(self, *, triples_store=None, **params):
        super().__init__(**params)
        self.store = self.use_store(triples_store, "triples")
        self.add(request_spec("triples", self.flow, self.on_query))
        self.add(request_spec("trace-list", self.flow, self.on_trace_list, name="trace-list"))
        self._lookups = STORE_LOOKUPS.labels(self.id)

    def _look_up(self, req: TriplesQueryRequest, patterns: list) -> list:
        """``store.query_many`` for ``req``'s user and collection, counted in ``tg_store_pattern_lookups_total``."""
        self._lookups.inc(len(patterns))
        return self.store.query_many(req.user, req.collection, patterns)

    def run_query(self, req: TriplesQueryRequest) -> list:
        """Execute one request against the store (runs in a worker thread)."""
        patterns = list(req.patterns) or [TriplePattern(req.s, req.p, req.o, req.g, req.limit)]
        if len(patterns) > MAX_PATTERNS:
            raise ValueError(f"too many patterns in one request ({len(patterns)} > {MAX_PATTERNS})")
        if not 0 <= req.follow_depth <= MAX_FOLLOW_DEPTH:
            raise ValueError(f"follow_depth must be between 0 and {MAX_FOLLOW_DEPTH}")
        results = self._look_up(req, patterns)
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
            self._walk(req, patterns, results, take)
        return out

    def _walk(self, req: TriplesQueryRequest, patterns: list, results: list, take) -> None:
        """Follow ``req.follow`` links from the subjects found, ``follow_depth`` levels, describing each node.

        Each level is one ``query_many``.  Level 0 (the subjects the patterns found, e.g. subgraphs
        holding many ``tg:contains`` triples) is read predicate by predicate; nodes reached by
        following a link (chunk, page, document) carry a handful of triples, so one subject slice
        of at most :data:`NODE_SLICE` rows returns them all for a third of the look-ups; a node
        with more rows than that is read predicate by predicate in one extra round.
        """
        follow = set(req.follow)
        types = set(req.describe_types)
        frontier: dict[str | None, set[str]] = {}
        for pat, res in zip(patterns, results, strict=True):
            frontier.setdefault(pat.g, set()).update(t.s.value for t in res if t.s.type == IRI)
        visited: set[tuple] = set()
        for level in range(req.follow_depth + 1):
            preds = list(dict.fromkeys(list(req.describe) + (list(req.follow) if level < req.follow_depth else [])))
            nodes = [(g, node) for g, group in frontier.items() for node in sorted(group) if (g, node) not in visited]
            visited.update(nodes)
            if not nodes:
                break
            if level > 0 and len(preds) > 1:
                wanted = set(preds)
                slices = self._look_up(req, [
                    TriplePattern(s=Term(IRI, node), g=g, limit=NODE_SLICE) for g, node in nodes])
                found = [(n, [t for t in res if t.p.value in wanted])
                         for n, res in zip(nodes, slices, strict=True) if len(res) < NODE_SLICE]
                overflow = [n for n, res in zip(nodes, slices, strict=True) if len(res) >= NODE_SLICE]
                found += self._by_predicate(req, overflow, preds)
            else:
                found = self._by_predicate(req, nodes, preds)
            frontier = {}
            for (g, _node), res in found:
                if types:  # only the rdf:type rows the caller asked for
                    res = [t for t in res if t.p.value != RDF_TYPE or t.o.value in types]
                take(res)
                frontier.setdefault(g, set()).update(t.o.value for t in res if t.o.type == IRI and t.p.value in follow)

    def _by_predicate(self, req: TriplesQueryRequest, nodes: list, preds: list) -> list:
        """``((graph, node), triples)`` for every node and predicate, from one ``query_many``."""
        if not nodes or not preds:
            return []
        keys = [(g, node) for g, node in nodes for _p in preds]
        found = self._look_up(req, [
            TriplePattern(s=Term(IRI, node), p=Term(IRI, p), g=g, limit=100) for g, node in nodes for p in preds])
        return list(zip(keys, found, strict=True))

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
