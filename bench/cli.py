"""CLI benchmark (issue 10): the tg-* commands as a user runs them, process start-up included.

* ``tg-invoke-graph-rag -x``, embedded, as a subprocess: time from starting the command to
  its first explain line (``[question] ...``), and to its end.  Target: first line within
  1.5 s.  The command starts its own embedded stack over the SQLite files of the sample
  corpus; the LLM is the embedded default (extractive, in process).
* ``tg-list-explain-traces`` and ``tg-show-explain-trace`` wall time with 100,000 stored
  traces (quick: 2,000).  Target: < 1 s each.  The traces are made by the provenance
  builders and inserted straight into the triple store (not by running 100,000 queries):
  every trace has its Question (what listing reads); every 100th is complete (Exploration,
  Focus with two selected edges and their reasons, Synthesis, the answer in the librarian),
  and the newest one, which is the one shown, is complete.  Embedded always; on Pulsar +
  Cassandra when configured, the commands talk (``--pulsar-url``) to triples-query,
  triples-write and librarian started by this benchmark on flow ``default`` (the commands
  have no flow option), unless another process already consumes that flow, which is then
  reported instead of measured.

Each figure is the median of several runs; the CPU time the command itself used (from its
rusage) is shown beside the wall time, because on a busy machine wall time also measures
the neighbours.

    python -m bench.cli [--quick] [--traces N] [--json out.json]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from .common import Figure, Results, spread
from .harness import Suite, bench_parser, load_note, report, run_on_suite
from .ingest import ensure_corpus

TRACE_COLLECTION = "traces"
FULL_EVERY = 100
QUESTION = "Who discovered polonium?"


def command(name: str) -> str:
    """Path of a console script of this environment."""
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    if not found:
        raise FileNotFoundError(f"console script {name} not found next to {sys.executable}")
    return found


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a command: no LLM endpoint configured (the embedded default), plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "LLM_BACKEND", "PULSAR_URL", "TG_HOME"))}
    env.update(extra)
    return env


@dataclass
class Timed:
    """One command run: wall seconds to the first matching line and to exit, CPU seconds it used."""

    first: float | None
    total: float
    cpu: float
    output: str


def run_command(argv: list[str], env: dict[str, str], first_prefix: str | None = None, timeout: float = 300.0,
                on_start: Callable[[int], None] | None = None) -> Timed:
    """Run ``argv``; time the first stdout line starting with ``first_prefix`` and the exit; fail on non-zero exit.

    :param on_start: called with the child's pid once it runs (e.g. to sample its memory).
    """
    import tempfile

    with tempfile.TemporaryFile("w+") as errors:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, env=env, text=True)
        watchdog = threading.Timer(timeout, proc.kill)  # a hung command must not hang the suite
        watchdog.start()
        if on_start is not None:
            on_start(proc.pid)
        first, lines = None, []
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                if first is None and first_prefix is not None and line.startswith(first_prefix):
                    first = time.perf_counter() - t0
                lines.append(line)
            # wait4, not wait: the CPU time of this very child
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            watchdog.cancel()
        total = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            errors.seek(0)
            raise RuntimeError(f"{' '.join(argv[:2])} failed (exit {proc.returncode}): {errors.read().strip()[-500:]}")
    return Timed(first, total, usage.ru_utime + usage.ru_stime, "".join(lines))


def interpreter_start() -> float:
    """Wall seconds of a bare ``python -c pass`` on this machine now (the floor of any command)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t0


# ------------------------------------------------------------------ generated traces
def trace_session(i: int) -> str:
    return str(uuid.UUID(int=(0xB3 << 120) | i))


def trace_batches(n: int, batch: int = 2000):
    """Builder-made traces: every Question, every 100th trace (and the newest) complete.

    Yields ``(triples, answers)``: answers are ``(document uri, text)`` for the librarian.
    """
    from trustgraph_base.provenance import EdgeSelection, uris
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.provenance.triples import (
        LlmUsage,
        exploration_triples,
        focus_triples,
        grounding_triples,
        question_triples,
        synthesis_triples,
    )
    from trustgraph_base.schema import Triple, iri, literal

    base = datetime(2025, 1, 1, tzinfo=UTC)
    ents = [iri(f"http://bench.trustgraph.ai/trace/e/{k}") for k in range(4)]
    rel = iri("http://bench.trustgraph.ai/trace/p/discovered")
    label = iri(ns.RDFS_LABEL)
    labels = [Triple(e, label, literal(name)) for e, name in
              zip(ents, ("Marie Curie", "polonium", "Pierre Curie", "radium"), strict=True)] + \
             [Triple(rel, label, literal("discovered"))]
    edges = [Triple(ents[0], rel, ents[1]), Triple(ents[2], rel, ents[3])]
    out, answers = list(labels), []
    for i in range(n):
        session = trace_session(i)
        q = uris.question_uri(session)
        out += question_triples(q, f"Benchmark question number {i}: who discovered polonium?",
                                base + timedelta(seconds=i))
        if i % FULL_EVERY == 0 or i == n - 1:
            g, e, f, s = (uris.grounding_uri(session), uris.exploration_uri(session), uris.focus_uri(session),
                          uris.synthesis_uri(session))
            doc = uris.answer_document_uri(session)
            out += grounding_triples(g, q, ["Marie Curie", "polonium"])
            out += exploration_triples(e, q, 150, [ents[0], ents[1]], grounding_uri=g)
            out += focus_triples(f, e, [EdgeSelection(edges[0], "names the discoverer of polonium", score=0.8,
                                                      concept="polonium"),
                                        EdgeSelection(edges[1], "the same laboratory's other discovery", score=0.4,
                                                      concept="Marie Curie")], session,
                                 usage=LlmUsage(900, 40, "bench"))
            out += synthesis_triples(s, f, doc, usage=LlmUsage(300, 20, "bench"))
            answers.append((doc, f"Marie Curie discovered polonium (trace {i})."))
        if len(out) >= batch:
            yield out, answers
            out, answers = [], []
    if out or answers:
        yield out, answers


def insert_traces(triples_store, librarian, user: str, n: int) -> tuple[int, float]:
    """Insert ``n`` generated traces; returns (triples inserted, seconds)."""
    from trustgraph_base.schema import DocumentMetadata
    from trustgraph_base.schema.library import ANSWER

    t0, count = time.perf_counter(), 0
    for triples, answers in trace_batches(n):
        count += triples_store.insert(user, TRACE_COLLECTION, triples)
        for doc, text in answers:
            librarian.add_document(user, TRACE_COLLECTION, DocumentMetadata(
                id=doc, time=time.time(), kind="text/plain", title="Answer", document_type=ANSWER), text.encode())
    return count, time.perf_counter() - t0


# ------------------------------------------------------------------ the figures
def median_timed(runs: list[Timed], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def first_line_figures(home: Path, user: str, collection: str, runs: int) -> list[Figure]:
    argv = [command("tg-invoke-graph-rag"), "-x", "-q", QUESTION, "-U", user, "-C", collection]
    env = clean_env(TG_HOME=str(home))
    timed = []
    for _ in range(runs):
        t = run_command(argv, env, "[question]")
        if t.first is None or "[focus]" not in t.output or "[synthesis]" not in t.output:
            raise AssertionError(f"tg-invoke-graph-rag -x printed no complete trace:\n{t.output[:2000]}")
        timed.append(t)
    firsts = [t.first for t in timed if t.first is not None]  # every run printed it (checked above)
    return [
        Figure("tg-invoke-graph-rag -x: first explain line", statistics.median(firsts), "s", 1.5, stack="embedded",
               spread=spread(firsts), note=f"{runs} runs from process start; bare python start "
                                           f"{interpreter_start():.2f} s; {load_note()}"),
        Figure("tg-invoke-graph-rag -x: whole command", median_timed(timed, "total"), "s", stack="embedded",
               note=f"CPU {median_timed(timed, 'cpu'):.2f} s (starts the embedded stack, loads the embedder, "
                    f"answers, waits for the trace to be stored)"),
    ]


def trace_command_figures(stack: str, user: str, base_args: list[str], env: dict[str, str], n: int,
                          runs: int) -> list[Figure]:
    newest = f"urn:trustgraph:question:{trace_session(n - 1)}"
    listing = [command("tg-list-explain-traces"), "-U", user, "-C", TRACE_COLLECTION, *base_args]
    showing = [command("tg-show-explain-trace"), newest, "-U", user, "-C", TRACE_COLLECTION, *base_args]
    lists, shows = [], []
    for _ in range(runs):
        t = run_command(listing, env)
        if newest not in t.output:
            raise AssertionError(f"tg-list-explain-traces did not list the newest trace first:\n{t.output[:1500]}")
        lists.append(t)
        t = run_command(showing, env)
        if "Selected 2 edge(s)" not in t.output or "Marie Curie discovered polonium" not in t.output:
            raise AssertionError(f"tg-show-explain-trace printed an incomplete trace:\n{t.output[:1500]}")
        shows.append(t)
    figures = []
    for name, timed in (("tg-list-explain-traces", lists), ("tg-show-explain-trace", shows)):
        walls = [t.total for t in timed]
        figures.append(Figure(f"{name}, {n:,} stored traces", statistics.median(walls), "s", 1.0, stack=stack,
                              spread=spread(walls), note=f"CPU {median_timed(timed, 'cpu'):.2f} s, {runs} runs; "
                                                         f"{load_note()}"))
    return figures


def foreign_consumers(admin_url: str, services: tuple[str, ...]) -> list[str]:
    """Subscriptions other processes hold on the ``default`` flow's request topics of ``services``."""
    import json
    import urllib.error
    import urllib.request

    found = []
    for service in services:
        url = f"{admin_url.rstrip('/')}/admin/v2/non-persistent/tg/request/{service}:default/stats"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                stats = json.load(r)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                continue
            raise
        found += [f"{service}:{name}" for name in stats.get("subscriptions", {})]
    return found


async def distributed_trace_commands(suite: Suite, n: int, runs: int) -> list[Figure]:
    """The trace commands over Pulsar against services this benchmark runs on flow ``default``."""
    servers = suite.servers
    busy = foreign_consumers(servers.pulsar_admin_url or "http://127.0.0.1:8080",
                             ("trace-list", "triples", "librarian"))
    if busy:
        return [Figure("tg-list-explain-traces / tg-show-explain-trace over Pulsar", 0, "s", stack="distributed",
                       note=f"not measured: flow 'default' is served by other processes ({', '.join(busy[:3])})")]
    running = await suite.deployment("distributed").start(("triples-query", "triples-write", "librarian"),
                                                          flow="default")
    try:
        env = clean_env(PULSAR_URL=servers.pulsar_url or "", PULSAR_ADMIN_URL=servers.pulsar_admin_url)
        return await asyncio.to_thread(trace_command_figures, "distributed", suite.deployment("distributed").user,
                                       ["--pulsar-url", servers.pulsar_url or ""], env, n, runs)
    finally:
        await running.stop()


async def bench(suite: Suite, traces: int | None = None) -> Results:
    results = Results()
    runs = 2 if suite.quick else 5
    n = traces or (2_000 if suite.quick else 100_000)
    embedded = suite.deployment("embedded")
    collection = await ensure_corpus(suite, "embedded")
    print("  cli: tg-invoke-graph-rag -x ...", flush=True)
    results.add(*await asyncio.to_thread(first_line_figures, embedded.home, embedded.user, collection, runs))
    for stack in suite.stacks:
        d = suite.deployment(stack)
        print(f"  cli: inserting {n:,} traces ({stack}) ...", flush=True)
        triples_store, index, librarian = await asyncio.to_thread(d.open_stores)
        try:
            count, seconds = await asyncio.to_thread(insert_traces, triples_store, librarian, d.user, n)
        finally:
            for s in (triples_store, index, librarian):
                s.close()
        results.add(Figure(f"insert {n:,} builder-made traces ({count:,} triples)", seconds, "s", stack=stack,
                           note=f"{count / seconds:,.0f} triples/s, straight into the store"))
        print(f"  cli: tg-list-explain-traces / tg-show-explain-trace ({stack}) ...", flush=True)
        if stack == "embedded":
            results.add(*await asyncio.to_thread(trace_command_figures, stack, d.user, [],
                                                 clean_env(TG_HOME=str(d.home)), n, runs))
        else:
            results.add(*await distributed_trace_commands(suite, n, runs))
    return results


def run(quick: bool = False, suite: Suite | None = None, traces: int | None = None) -> Results:
    return run_on_suite(quick, suite, lambda s: bench(s, traces))


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "2,000 traces, 2 runs per command")
    parser.add_argument("--traces", type=int, help="stored traces (default 100,000)")
    args = parser.parse_args(argv)
    return report(run(args.quick, traces=args.traces), "CLI", args.json)


if __name__ == "__main__":
    main()
