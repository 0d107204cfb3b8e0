"""DocumentRAG benchmark (issue 9): latency with explainability on vs off, fixed-latency LLM.

The real document-rag service answers questions over the sample corpus (chunk vector search,
chunk texts from the librarian, one ``document-prompt`` answer from the project's LLM server:
extractive answers, a fixed 50 ms each).  Explainability on records the Question,
Exploration (the chunks used) and Synthesis, and stores the answer in the librarian; off
(``explainable=False``) does none of that.  Both variants and both stacks run interleaved,
several repetitions, so the ratio is measured over the same minutes.  Target: explainability
adds < 5 % latency.

    python -m bench.document_rag [--quick] [--json out.json]
"""

from __future__ import annotations

import statistics

from .common import Figure, Results, percentile
from .harness import (
    LLM_LATENCY_MS,
    Suite,
    Variants,
    bench_parser,
    interleaved_order,
    on_off_figures,
    report,
    run_on_suite,
    settle,
    stack_settings,
    stream_request,
)
from .ingest import ensure_corpus

PROCESSORS = ("triples-write", "triples-query", "document-embeddings-query", "embeddings", "prompt",
              "text-completion", "librarian", "document-rag")


def questions() -> list[str]:
    """The corpus questions (DocumentRAG ones first, then the others: any question has passages)."""
    from trustgraph_flow.ingest.sample_corpus import sample_questions

    qs = sample_questions()
    return [q.question for q in qs if q.kind == "document"] + [q.question for q in qs if q.kind != "document"]


async def bench(suite: Suite) -> Results:
    from trustgraph_base.schema import DocumentRagQuery
    from trustgraph_cli.connection import Connection

    reps = 3 if suite.quick else 8
    qs = questions()[: 2 if suite.quick else 6]
    running, clients, conns = {}, {}, []
    try:
        for s in suite.stacks:
            collection = await ensure_corpus(suite, s)
            running[s] = await suite.deployment(s).start(PROCESSORS, settings=stack_settings(suite.llm))
            conn = await Connection.attach(running[s], timeout=120).__aenter__()
            conns.append(conn)
            clients[s] = (await conn.client("document-rag"), suite.deployment(s).user, collection)

        async def ask(s: str, q: str, explain: bool):
            client, user, collection = clients[s]
            answer = await stream_request(client, DocumentRagQuery(query=q, user=user, collection=collection,
                                                                   doc_limit=10, streaming=True,
                                                                   explainable=explain))
            if not answer.text.strip():
                raise AssertionError(f"document-rag gave an empty answer to {q!r} on {s}")
            await settle(running[s])
            return answer

        for s in suite.stacks:  # warm-up
            await ask(s, qs[0], True)
        v = Variants()
        first: dict[str, list[float]] = {s: [] for s in suite.stacks}
        keys = [(s, var) for s in suite.stacks for var in ("on", "off")]
        for rep in range(reps):
            v.new_rep(keys)
            for qi, q in enumerate(qs):
                for s, var in interleaved_order(keys, rep + qi):
                    answer = await ask(s, q, var == "on")
                    v.add(s, var, answer.latency * 1000)
                    if var == "on":
                        first[s].append(answer.first_explain * 1000)
    finally:
        for conn in conns:
            await conn.__aexit__(None, None, None)
        for r in running.values():
            await r.stop()
    results = Results()
    for s in suite.stacks:
        results.add(*on_off_figures(v, s, "DocumentRAG", reps,
                                    unit_note=f", doc_limit 10, LLM {LLM_LATENCY_MS:g} ms per answer"))
        results.add(Figure("DocumentRAG time to first explain event p50", percentile(first[s], 50), "ms", stack=s,
                           note=f"p95 {percentile(first[s], 95):.1f} ms"))
    if len(suite.stacks) > 1:
        a, b = suite.stacks[1], suite.stacks[0]
        ratio, per_rep = v.ratio((a, "on"), (b, "on"))
        from .common import spread

        results.add(Figure(f"DocumentRAG latency {a} / {b}", ratio, "x", stack="both", spread=spread(per_rep),
                           note=f"explainability on, {reps} interleaved reps; "
                                f"p50 {statistics.median(v.all(a, 'on')):.0f} vs "
                                f"{statistics.median(v.all(b, 'on')):.0f} ms"))
    return results


def run(quick: bool = False, suite: Suite | None = None) -> Results:
    return run_on_suite(quick, suite, lambda s: bench(s))


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "2 questions x 3 repetitions")
    args = parser.parse_args(argv)
    return report(run(args.quick), "DocumentRAG", args.json)


if __name__ == "__main__":
    main()
