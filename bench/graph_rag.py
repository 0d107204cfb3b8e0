"""GraphRAG benchmark: issue 8 figures and the graph-rag anchors (bench/README.md), on a synthetic graph.

Runs the real processors (graph-rag, prompt, text-completion, embeddings, vector and triple
query, librarian, triples-write) on the embedded stack (in-process bus, SQLite) and, when
``PULSAR_URL`` and ``CASSANDRA_HOST`` are set, on the distributed one (Apache Pulsar,
Apache Cassandra; the storage services in processes of their own, :data:`bench.harness.OWN_PROCESSES`),
both measured **interleaved**, so ratios
between stacks and between explainability on and off come from the same minutes of the
same machine.  The LLM is the project's OpenAI-compatible server (extractive answers, a
fixed 50 ms per answer) in a separate process, spoken to by the real ``openai`` client.

Figures (per stack): latency with explainability on and off and their ratio (target:
explainability adds < 5 %), time to the first explain event (< 20 ms embedded, < 50 ms on
Pulsar), triple-store requests and store-level pattern look-ups per query (aim <= 50
requests), dependent rounds of calls (aim <= 6), requests at path length 1, 2, 3 and at
several subgraph sizes (they should grow with hops, not edges), queries/s with 16
concurrent clients; and, store and LLM excluded, the CPU time of the GraphRAG Python per
query (aim <= 8 ms), replayed from a recorded query with the ports answered from memory.

    python -m bench.graph_rag [--quick] [--entities N] [--edges N] [--json out.json]

The plumbing it shares with the other service benchmarks (stacks, the LLM endpoint, request
recording, interleaved measurement, the running GraphRAG target) is in :mod:`bench.harness`.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from .common import Figure, Results, percentile, spread
from .harness import (
    DEFAULT_CPU_WHAT,
    LLM_LATENCY_MS,
    GraphRagTarget,
    QueryRecord,
    Suite,
    ask_on_off,
    bench_parser,
    close_target,
    dependent_rounds,
    graph_for,
    load_graph,
    load_note,
    on_off_figures,
    open_target,
    report,
    run_on_suite,
    settle,
)
from .synthetic import Question, SyntheticGraph

FIRST_EXPLAIN_TARGET_MS = {"embedded": 20.0, "distributed": 50.0}


# ================================================================== latency, round trips, clients
async def latency_on_off(targets: Sequence[GraphRagTarget], questions: Sequence[Question], reps: int) -> list[Figure]:
    """Explainability on vs off (and stack vs stack), interleaved; plus request counts and rounds."""
    v, cpu, on = await ask_on_off(targets, questions, reps)
    by_name = {t.name: t for t in targets}
    out = []
    for t in targets:
        s, recs = t.name, on[t.name]
        first = [r.answer.first_explain * 1000 for r in recs if r.answer.first_explain is not None]
        if len(first) != len(recs):
            raise AssertionError(f"a GraphRAG query with explainability on sent no explain event ({s})")
        apart = by_name[s].processes
        cpu_what = "services + bus + client + the services in their own processes" if apart else DEFAULT_CPU_WHAT
        out += on_off_figures(v, s, "GraphRAG", reps, cpu=cpu,
                              unit_note=f", LLM {LLM_LATENCY_MS:g} ms per answer (2 answers per query)"
                                        + (f"; {', '.join(apart.procs)} in processes of their own" if apart else ""),
                              cpu_what=cpu_what)
        out += [
            Figure("time to first explain event p50", percentile(first, 50), "ms", FIRST_EXPLAIN_TARGET_MS[s],
                   stack=s, note=f"p95 {percentile(first, 95):.1f} ms, from sending the request"),
            Figure("triple-store requests per query (with source chains)",
                   statistics.mean(r.requests("triples") for r in recs), "requests", 50, stack=s,
                   note=f"TrustGraph 2.11.1: ~1,160; {statistics.mean(r.edges_explored for r in recs):.0f} "
                        f"edges explored"),
            Figure("store-level pattern look-ups per query", statistics.mean(r.lookups for r in recs), "look-ups",
                   stack=s, note="the patterns inside those batched requests"),
            Figure("dependent rounds of calls per query", statistics.mean(dependent_rounds(r.calls) for r in recs),
                   "rounds", 6, stack=s,
                   note=f"all services: {recs[0].chain()}; triple store alone "
                        f"{statistics.mean(dependent_rounds(r.calls, 'triples') for r in recs):.0f}; "
                        f"TrustGraph 2.11.1: ~16 with sources"),
        ]
    if len(targets) > 1:
        a, b = targets[1].name, targets[0].name
        ratio, per_rep = v.ratio((a, "on"), (b, "on"))
        out.append(Figure(f"GraphRAG latency {a} / {b}", ratio, "x", stack="both", spread=spread(per_rep),
                          note=f"explainability on, {reps} interleaved reps"))
    return out


async def round_trips_by_shape(targets: Sequence[GraphRagTarget], question: Question,
                               sizes: Sequence[int]) -> list[Figure]:
    """Triple-store requests at path length 1, 2, 3 and at several subgraph sizes (3 seeds, wide limits)."""
    out = []
    shapes = [(hops, max(sizes)) for hops in (1, 2, 3)] + [(3, size) for size in sizes[:-1]]
    for t in targets:
        for hops, size in shapes:
            r = await t.ask(question.text, entity_limit=3, triple_limit=30, max_subgraph_size=size,
                            max_path_length=hops)
            out.append(Figure(f"triple-store requests, path length {hops}, subgraph <= {size:,}",
                              r.requests("triples"), "requests", hops + 2, stack=t.name,
                              note=f"{r.edges_explored:,} edges, {r.lookups:,} store look-ups, "
                                   f"{dependent_rounds(r.calls)} rounds, {r.answer.latency * 1000:.0f} ms; "
                                   f"target: hops + labels + sources"))
    return out


async def concurrent_clients(t: GraphRagTarget, questions: Sequence[Question], clients: int,
                             per_client: int) -> list[Figure]:
    """Queries/s with ``clients`` concurrent clients, explainability on."""
    latencies: list[float] = []

    async def client_loop(k: int) -> None:
        for i in range(per_client):
            q = questions[(k + i) % len(questions)]
            r = await t.ask(q.text, settle_after=False)
            latencies.append(r.answer.latency * 1000)

    await settle(t.stack, processes=t.processes)
    t0, c0 = time.perf_counter(), t.cpu_seconds()
    await asyncio.gather(*(client_loop(k) for k in range(clients)))
    await settle(t.stack, processes=t.processes)
    elapsed, cpu = time.perf_counter() - t0, t.cpu_seconds() - c0
    n = clients * per_client
    return [Figure(f"GraphRAG queries/s, {clients} concurrent clients", n / elapsed, "queries/s", better="higher",
                   stack=t.name, note=f"{n} queries, p50 {percentile(latencies, 50):.0f} ms, p95 "
                                      f"{percentile(latencies, 95):.0f} ms, {1000 * cpu / n:.0f} ms CPU/query "
                                      f"({'with the services apart' if t.processes else 'this process'}); "
                                      f"{load_note()}")]


# ================================================================== our own CPU per query
class ReplayPorts:
    """Ports that answer from a recording, in order: the GraphRAG Python runs with store and LLM excluded."""

    def __init__(self, results: dict[str, list]):
        self.results = results
        self.pos: dict[str, int] = defaultdict(int)

    def reset(self) -> None:
        self.pos.clear()

    def _next(self, name: str):
        i = self.pos[name]
        self.pos[name] = i + 1
        return self.results[name][i]

    async def embed(self, text):
        return self._next("embed")

    async def find_entities(self, user, collection, vector, limit):
        return self._next("find_entities")

    async def query(self, user, collection, patterns, **kw):
        return self._next("query")

    async def prompt(self, template, terms):
        return self._next("prompt")

    async def prompt_stream(self, template, terms):
        for item in self._next("prompt_stream"):
            yield item

    async def store_answer(self, user, collection, document_id, text, stage_uri, stage_triples):
        return None

    async def store_explain(self, user, collection, stage_uri, triples):
        return None


async def record_query(t: GraphRagTarget, question: str) -> tuple[dict[str, list], QueryRecord]:
    """One real query with every port result kept, for the replay."""
    t.ports.keep_results = True
    try:
        r = await t.ask(question)
        return dict(t.ports.results), r
    finally:
        t.ports.keep_results = False
        t.ports.reset()


def cpu_per_query(results: dict[str, list], question: str, expected_edges: int, loops: int) -> list[Figure]:
    """CPU time of ``GraphRag.query`` per query: orchestration, label graph, selection, builders, messages.

    The ports answer from a recording of a real query (store, vector search, embeddings and
    LLM excluded); the replayed query must select the same edges as the recorded one.
    """
    import cProfile
    import gc
    import pstats

    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.schema import GraphRagQuery
    from trustgraph_flow.retrieval.graph_rag.rag import GraphRag

    ports = ReplayPorts(results)
    rag = GraphRag(ports)
    sent: list = []

    async def emit(msg) -> None:
        sent.append(msg)

    async def once() -> None:
        ports.reset()
        sent.clear()
        await rag.query(GraphRagQuery(query=question, user="bench", collection="synthetic", streaming=True), emit)

    async def measure() -> list[float]:
        await once()
        selected = sum(1 for m in sent if m.message_type == "explain" for t in m.explain_triples
                       if t.p.value == ns.TG_SELECTED_EDGE)
        if sent[-1].error is not None or selected != expected_edges:
            raise AssertionError(f"the replayed query differs from the recorded one: {selected} vs "
                                 f"{expected_edges} edges, error {sent[-1].error}")
        samples = []
        for _ in range(5):
            gc.collect()
            c0 = time.process_time()
            for _ in range(loops):
                await once()
            samples.append((time.process_time() - c0) / loops * 1000)
        return samples

    samples = asyncio.run(measure())
    triples = sum(len(m.explain_triples) for m in sent if m.message_type == "explain")
    prof = cProfile.Profile()

    async def profiled() -> None:
        for _ in range(max(5, loops // 4)):
            await once()

    prof.enable()
    asyncio.run(profiled())
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]  # the raw table, which typeshed leaves out
    ours = {k: v for k, v in stats.items() if "trustgraph" in k[0]}
    total = sum(v[2] for v in stats.values())
    top = sorted(((v[3], f"{Path(k[0]).stem}.{k[2]}") for k, v in ours.items()
                  if k[2] not in ("query", "execute", "once")), reverse=True)[:3]
    hot = ", ".join(f"{name} {100 * cum / total:.0f}%" for cum, name in top)
    return [Figure("CPU of our GraphRAG Python per query (ports answered from memory)", statistics.median(samples),
                   "ms", 8.0, stack="any", spread=spread(samples),
                   note=f"TrustGraph 2.11.1: ~16 ms; {triples} explain triples built and sent; "
                        f"cumulative: {hot}")]


# ================================================================== the whole benchmark
async def bench(suite: Suite, graph: SyntheticGraph | None = None, embed_all: bool | None = None) -> Results:
    """Every GraphRAG figure, on every stack of ``suite`` (the graph stays loaded for later benchmarks)."""
    results = Results()
    quick = suite.quick
    graph = graph or graph_for(quick)
    embed_all = (not quick) if embed_all is None else embed_all
    questions = graph.questions(2 if quick else 6)
    real = None if embed_all else {i for q in graph.questions(6) for i in q.entities}
    collection = f"synthetic-{graph.entities}-{graph.edges}"
    for stack in suite.stacks:
        if (stack, collection) not in suite.graphs:
            print(f"  graph-rag: loading {graph.entities:,} entities / {graph.edges:,} edges ({stack}) ...",
                  flush=True)
            results.add(await load_graph(suite, stack, graph, collection, real))
            suite.graphs.add((stack, collection))
    targets: list[GraphRagTarget] = []
    try:
        for stack in suite.stacks:
            targets.append(await open_target(suite, stack, collection))
        for t in targets:  # warm-up: connections, prepared statements, caches
            for q in questions[:2]:
                await t.ask(q.text)
        print("  graph-rag: latency with explainability on / off, interleaved ...", flush=True)
        results.add(*await latency_on_off(targets, questions, 3 if quick else 8))
        print("  graph-rag: requests by path length and subgraph size ...", flush=True)
        results.add(*await round_trips_by_shape(targets, questions[0], (50, 300, 3000) if quick
                                                else (50, 150, 600, 3000)))
        print("  graph-rag: 16 concurrent clients ...", flush=True)
        for t in targets:
            results.add(*await concurrent_clients(t, questions, 16, 2 if quick else 6))
        recorded, record = await record_query(targets[0], questions[0].text)
    finally:
        for t in targets:
            await close_target(t)
    from trustgraph_base.provenance import namespaces as ns

    expected = len(record.answer.explain_triples(ns.TG_SELECTED_EDGE))
    results.add(*await asyncio.to_thread(cpu_per_query, recorded, questions[0].text, expected, 20 if quick else 100))
    return results


def run(quick: bool = False, suite: Suite | None = None, entities: int | None = None, edges: int | None = None,
        embed_all: bool | None = None) -> Results:
    """Run the GraphRAG benchmark on every configured stack.

    :param suite: shared stacks and LLM endpoint (default: a new one, closed afterwards).
    :param embed_all: embed every entity label for real (default: in full mode only).
    """
    return run_on_suite(quick, suite, lambda s: bench(s, graph_for(s.quick, entities, edges), embed_all))


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "1,000 entities / 5,000 edges, fewer repetitions")
    parser.add_argument("--entities", type=int, help="entities of the synthetic graph (default 10,000)")
    parser.add_argument("--edges", type=int, help="edges (default 5 per entity)")
    parser.add_argument("--embed-all", action="store_true", default=None,
                        help="embed every label for real (default in full mode)")
    args = parser.parse_args(argv)
    return report(run(args.quick, entities=args.entities, edges=args.edges, embed_all=args.embed_all),
                  "GraphRAG", args.json)


if __name__ == "__main__":
    main()
