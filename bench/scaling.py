"""Scaling benchmark: GraphRAG latency and triple-store query latency at 10k, 100k and 1M triples.

For each size a synthetic graph of that many triples (the anchor graph's density: 5 edges
per entity, extraction provenance for every edge; see :mod:`bench.synthetic`) is loaded into
its own collection, then on every stack:

* store look-ups, straight on the store: an entity's outgoing edges (s-bound), a label
  (s+p bound), the source look-up ``?sg tg:contains <<( s p o )>>`` and one GraphRAG hop
  (a batch of 100 patterns: 50 nodes, outgoing and incoming), p50 and p99;
* GraphRAG queries through the real services (explainability on, LLM 50 ms per answer):
  latency p50, and how much of it was spent waiting for the triple store.

The vector index is kept at the same size at every scale (the entities the questions are
about, embedded for real, plus deterministic random vectors for the first 5,000 entities),
so what grows is the triple store.  Quick mode: 10k only.  See bench/README.md for what
grows and why.

    python -m bench.scaling [--quick] [--sizes 10000,100000,1000000] [--json out.json]
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time

from .common import Figure, Results, percentile
from .harness import (
    Suite,
    bench_parser,
    close_target,
    interleaved_order,
    load_graph,
    load_note,
    open_target,
    report,
    run_on_suite,
)
from .synthetic import SyntheticGraph, graph_for_triples

VECTOR_LIMIT = 5_000


def store_latencies(store, user: str, collection: str, graph: SyntheticGraph, samples: int) -> dict[str, list[float]]:
    """Milliseconds per look-up kind, each checked to return what it must."""
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.schema import TriplePattern, iri, triple_term

    label, contains = iri(ns.RDFS_LABEL), iri(ns.TG_CONTAINS)

    def s_bound(i: int, edge, nodes) -> None:
        store.query(user, collection, TriplePattern(s=graph.entity(i), g="", limit=30))

    def lab(i: int, edge, nodes) -> None:
        got = store.query(user, collection, TriplePattern(s=graph.entity(i), p=label, g=""))
        assert [t.o.value for t in got] == [graph.label(i)], got

    def source(i: int, edge, nodes) -> None:
        got = store.query(user, collection, TriplePattern(p=contains, o=triple_term(edge.s, edge.p, edge.o),
                                                          g=ns.GRAPH_SOURCE))
        assert len(got) == 1, got

    def hop(i: int, edge, nodes) -> None:
        store.query_many(user, collection, [p for n in nodes for p in (TriplePattern(s=n, g="", limit=30),
                                                                        TriplePattern(o=n, g="", limit=30))])

    kinds = {"s-bound": s_bound, "label": lab, "tg:contains": source, "hop (100 patterns)": hop}
    out: dict[str, list[float]] = {k: [] for k in kinds}
    rnd = random.Random(5)
    for _ in range(samples + 20):
        i, edge = rnd.randrange(graph.entities), graph.edge(rnd.randrange(graph.edges))
        nodes = [graph.entity(rnd.randrange(graph.entities)) for _ in range(50)]
        for kind, fn in kinds.items():
            t0 = time.perf_counter()
            fn(i, edge, nodes)
            out[kind].append((time.perf_counter() - t0) * 1000)
    return {k: v[20:] for k, v in out.items()}  # the first 20 warm caches and prepared statements


async def bench(suite: Suite, sizes: list[int] | None = None) -> Results:
    results = Results()
    sizes = sizes or ([10_000] if suite.quick else [10_000, 100_000, 1_000_000])
    samples = 200 if suite.quick else 500
    reps = 3 if suite.quick else 6
    for n in sizes:
        graph = graph_for_triples(n)
        collection = f"scale-{n}"
        questions = graph.questions(4)
        real = {i for q in questions for i in q.entities}
        for stack in suite.stacks:
            print(f"  scaling: loading {n:,} triples ({stack}) ...", flush=True)
            fig = await load_graph(suite, stack, graph, collection, real, VECTOR_LIMIT)
            fig.name = f"{n:,} triples: {fig.name}"
            results.add(fig)
        targets = []
        try:
            for stack in suite.stacks:
                # every service in this process: the store latencies below are read from triples-query's store
                targets.append(await open_target(suite, stack, collection, own=()))
            by_stack = {t.name: t for t in targets}
            for t in targets:
                store = t.store.inner
                lat = await asyncio.to_thread(store_latencies, store, t.deployment.user, collection, graph, samples)
                for kind, ms in lat.items():
                    results.add(Figure(f"{n:,} triples: store {kind} p50", percentile(ms, 50), "ms", stack=t.name,
                                       note=f"p99 {percentile(ms, 99):.2f} ms, {len(ms)} look-ups"))
                await t.ask(questions[0].text)  # warm-up
            latency: dict[str, list[float]] = {s: [] for s in by_stack}
            store_ms: dict[str, list[float]] = {s: [] for s in by_stack}
            for rep in range(reps):
                for qi, q in enumerate(questions):
                    for s in interleaved_order(list(by_stack), rep + qi):
                        r = await by_stack[s].ask(q.text)
                        latency[s].append(r.answer.latency * 1000)
                        store_ms[s].append(sum((c.end - c.start) * 1000 for c in r.calls if c.service == "triples"))
            for s in by_stack:
                results.add(Figure(f"{n:,} triples: GraphRAG latency p50", statistics.median(latency[s]), "ms",
                                   stack=s, note=f"of which waiting for the triple store "
                                                 f"{statistics.median(store_ms[s]):.0f} ms; {len(latency[s])} "
                                                 f"queries; {load_note()}"))
        finally:
            for t in targets:
                await close_target(t)
    return results


def run(quick: bool = False, suite: Suite | None = None, sizes: list[int] | None = None) -> Results:
    return run_on_suite(quick, suite, lambda s: bench(s, sizes))


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "10,000 triples only")
    parser.add_argument("--sizes", help="comma-separated triple counts (default 10000,100000,1000000)")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else None
    return report(run(args.quick, sizes=sizes), "scaling", args.json)


if __name__ == "__main__":
    main()
