"""OpenTelemetry tracing cost (docs/observability.md): GraphRAG latency, tracing on vs off, and off vs not installed.

The real GraphRAG query path (graph-rag, prompt, text-completion, embeddings, vector and triple query,
librarian, triples-write; all in this process, so every hop is traced) answers questions over the synthetic
graph of the GraphRAG benchmark with explainability on, the LLM being the project's server (50 ms per
answer).  Three variants run **interleaved**, query by query, over the same minutes:

- ``on``: the SDK set up as by ``OTEL_EXPORTER_OTLP_ENDPOINT``, spans exported over OTLP/HTTP by the batch
  processor to a receiver in a process of its own (a minimal OTLP sink that answers 200);
- ``off``: the default, the ``[otel]`` extra installed and no endpoint configured;
- ``absent``: as if the extra were not installed (its import fails).

One tracer provider serves every ``on`` query, so its exports overlap the queries that follow, as in a
running service.  Targets: on / off <= 1.03; off / absent: no measurable difference (1.00 within spread).

    python -m bench.otel [--quick] [--json out.json]
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator

from .common import Figure, Results, spread
from .harness import (
    LLM_LATENCY_MS,
    GraphRagTarget,
    Suite,
    Variants,
    bench_parser,
    close_target,
    graph_for,
    interleaved_order,
    load_graph,
    load_note,
    open_target,
    report,
    run_on_suite,
)

#: The receiver: accepts OTLP/HTTP posts and drops them (what a collector's cost to the sender is).
SINK = """
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
"""


@contextlib.contextmanager
def otlp_sink() -> Iterator[str]:
    """An OTLP/HTTP endpoint in a process of its own; yields its traces URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", SINK, str(port)])
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the OTLP sink did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1/traces"
    finally:
        proc.terminate()
        proc.wait(10)


def span_counter():
    """An SDK span processor that counts the spans ended (spans per query)."""
    from opentelemetry.sdk.trace import SpanProcessor

    class SpanCounter(SpanProcessor):
        ended = 0

        def on_end(self, span) -> None:
            self.ended += 1

    return SpanCounter()


def hop_cpu_us(states: TracingStates, variant: str, hops: int) -> float:
    """CPU microseconds of the tracing work of one service hop: a client span, its context injected into the
    request's properties, the service's span extracted from them, both ended and exported (process CPU, all
    threads; ``hops`` stays under the batch processor's queue of 2,048 spans, so none is dropped)."""
    from trustgraph_base import telemetry

    states.use(variant)
    t0 = time.process_time()
    for i in range(hops):
        call = telemetry.start_span("call embeddings", kind="client", attributes={telemetry.SERVICE: "graph-rag"})
        props = {"id": str(i), "reply-to": "response:tg:embeddings:default:r-0"}
        if call is not None:
            telemetry.inject(props, telemetry.span_context(call))
        with telemetry.consumer_span("embeddings request", props, kind="server",
                                     attributes={telemetry.SERVICE: "embeddings"}):
            pass
        telemetry.end_span(call)
    telemetry.flush()  # their export too: encoding and posting them is CPU of this process
    return (time.process_time() - t0) / hops * 1e6


class TracingStates:
    """The three variants as states of :mod:`trustgraph_base.telemetry.tracing`, switched between queries."""

    def __init__(self, endpoint: str):
        from trustgraph_base.telemetry import tracing

        self.tracing = tracing
        assert tracing.install_state("bench-otel", endpoint=endpoint)
        self.on = tracing._state
        self.spans = span_counter()
        if self.on is not None and self.on.provider is not None:
            self.on.provider.add_span_processor(self.spans)
        tracing._state = None
        tracing.install_state()  # no endpoint: off, with the API importable
        self.off = tracing._state
        blocked = sys.modules.get("opentelemetry", ...)
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # import fails: as if not installed
        try:
            tracing._state = None
            tracing.install_state()
            self.absent = tracing._state
        finally:
            if blocked is ...:
                del sys.modules["opentelemetry"]
            else:
                sys.modules["opentelemetry"] = blocked
        if self.on is None or self.on.tracer is None or self.off is None or self.absent is None:
            raise RuntimeError("could not set up the tracing variants")

    def use(self, variant: str) -> None:
        self.tracing._state = {"on": self.on, "off": self.off, "absent": self.absent}[variant]

    def close(self) -> None:
        self.tracing._state = self.on
        self.tracing.shutdown()


async def latency(targets: list[GraphRagTarget], states: TracingStates, questions, reps: int,
                  ) -> tuple[Variants, dict[str, list[int]]]:
    """Latency per variant, interleaved; and the spans each ``on`` query ended, per stack."""
    v = Variants()
    spans: dict[str, list[int]] = {t.name: [] for t in targets}
    keys = [(t.name, var) for t in targets for var in ("on", "off", "absent")]
    by_name = {t.name: t for t in targets}
    for rep in range(reps):
        v.new_rep(keys)
        for qi, q in enumerate(questions):
            for name, var in interleaved_order(keys, rep + qi):
                states.use(var)
                before = states.spans.ended
                r = await by_name[name].ask(q.text)  # the query and the storage of its trace (settled)
                v.add(name, var, r.answer.latency * 1000)
                if var == "on":
                    spans[name].append(states.spans.ended - before)
    return v, spans


def hop_figures(states: TracingStates, spans_per_query: float, off_ms: float, stack: str) -> list[Figure]:
    """The tracing CPU of one query estimated from its spans and the measured CPU per hop (steady under load)."""
    hops = 500
    hop_cpu_us(states, "on", 100)  # warm-up
    on = statistics.median(hop_cpu_us(states, "on", hops) for _ in range(5))
    off = statistics.median(hop_cpu_us(states, "off", hops) for _ in range(5))
    per_query_ms = spans_per_query / 2 * (on - off) / 1000  # a hop is two spans
    return [
        Figure("spans per GraphRAG query", spans_per_query, "spans", stack=stack,
               note="client calls, service handlers, model and embedding calls, trace writes"),
        Figure("tracing CPU per service hop, on", on, "us", stack=stack,
               note=f"off: {off:.2f} us (client span, inject, extract, server span, their export)"),
        Figure("GraphRAG: tracing cost from CPU, (off + spans x hop cost) / off", 1 + per_query_ms / off_ms, "x", 1.03,
               stack=stack, note=f"{per_query_ms:.2f} ms of tracing CPU per query over a {off_ms:.0f} ms p50 query; "
                                 "export runs on the batch processor's thread"),
    ]


def figures(v: Variants, stack: str, reps: int, requests: int) -> list[Figure]:
    on, off, absent = (v.all(stack, var) for var in ("on", "off", "absent"))
    on_off, per_rep = v.ratio((stack, "on"), (stack, "off"))
    off_absent, per_rep_absent = v.ratio((stack, "off"), (stack, "absent"))
    note = f"{requests} requests, explainability on, LLM {LLM_LATENCY_MS:g} ms per answer; {load_note()}"
    return [
        Figure("GraphRAG latency p50, tracing on (OTLP/HTTP, batch)", statistics.median(on), "ms", stack=stack,
               spread=spread(on), note=note),
        Figure("GraphRAG latency p50, tracing off", statistics.median(off), "ms", stack=stack, spread=spread(off)),
        Figure("GraphRAG latency p50, OpenTelemetry not installed", statistics.median(absent), "ms", stack=stack,
               spread=spread(absent)),
        Figure("GraphRAG: tracing cost, latency on / off", on_off, "x", 1.03, stack=stack, spread=spread(per_rep),
               note=f"{reps} interleaved reps; target: adds <= 3 %"),
        Figure("GraphRAG: tracing off / not installed", off_absent, "x", stack=stack, spread=spread(per_rep_absent),
               note="aim: 1.00 within the spread (no measurable difference)"),
    ]


async def bench(suite: Suite) -> Results:
    results = Results()
    graph = graph_for(True)  # the quick GraphRAG graph: the cost of tracing is per hop, not per edge
    questions = graph.questions(2 if suite.quick else 6)
    collection = f"synthetic-{graph.entities}-{graph.edges}"
    real = {i for q in graph.questions(6) for i in q.entities}
    for stack in suite.stacks:
        if (stack, collection) not in suite.graphs:
            results.add(await load_graph(suite, stack, graph, collection, real))
            suite.graphs.add((stack, collection))
    reps = 3 if suite.quick else 10
    targets: list[GraphRagTarget] = []
    with otlp_sink() as endpoint:
        states = TracingStates(endpoint)
        try:
            for stack in suite.stacks:
                targets.append(await open_target(suite, stack, collection, own=()))
            for t in targets:  # warm-up, each variant once
                for var in ("on", "off", "absent"):
                    states.use(var)
                    await t.ask(questions[0].text)
            print("  otel: GraphRAG latency, tracing on / off / not installed, interleaved ...", flush=True)
            v, spans = await latency(targets, states, questions, reps)
            for stack in suite.stacks:
                results.add(*figures(v, stack, reps, reps * len(questions)))
            first = suite.stacks[0]
            results.add(*hop_figures(states, statistics.median(spans[first]), statistics.median(v.all(first, "off")),
                                     first))
        finally:
            for t in targets:
                await close_target(t)
            states.close()
    return results


def run(quick: bool = False, suite: Suite | None = None) -> Results:
    return run_on_suite(quick, suite, bench)


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "2 questions x 3 repetitions")
    args = parser.parse_args(argv)
    return report(run(args.quick), "OpenTelemetry tracing", args.json)


if __name__ == "__main__":
    main()
