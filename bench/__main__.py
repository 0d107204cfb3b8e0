"""The benchmark suite: every benchmark, each figure next to its target, one table and one JSON file.

    python -m bench [--quick] [--json PATH] [--only NAMES] [--list]

Runs on the embedded stack and, when ``PULSAR_URL`` and ``CASSANDRA_HOST`` (+ ``CASSANDRA_PORT``,
``PULSAR_ADMIN_URL``) are set, on the distributed one too.  ``--quick`` is a smoke run of a few
minutes with small data; the default (full) mode uses the sizes of the issues (10,000-entity
graph, 100,000 traces and vectors, 1M triples).  Slow figures never fail the run: the exit
status is non-zero only if a benchmark crashed (or none ran), so CI can use ``--quick`` as a
smoke test.  See bench/README.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, fields
from typing import Any

from .common import Figure, Results
from .harness import Suite


def results_from_json(data: dict) -> Results:
    """Figures back from a benchmark's ``--json`` output (derived keys such as ``ratio`` dropped)."""
    names = {f.name for f in fields(Figure)}
    return Results([Figure(**{k: v for k, v in f.items() if k in names}) for f in data.get("figures", [])])


def call_benchmark(module: Any, argv: list[str], **kwargs: Any) -> Results:
    """Call ``module.run(**kwargs)`` with the keyword arguments it accepts; else ``module.main(argv)`` via JSON.

    The store and vector benchmarks are maintained separately; this adapts to their
    ``run()`` signatures instead of assuming them.
    """
    run = getattr(module, "run", None)
    if run is not None:
        params = inspect.signature(run).parameters
        accepted = {k: v for k, v in kwargs.items() if k in params}
        required = [p.name for p in params.values() if p.default is p.empty and p.name not in accepted
                    and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if not required:
            result = run(**accepted)
            if isinstance(result, Results):
                return result
            if isinstance(result, dict):
                return results_from_json(result)
    fd, path = tempfile.mkstemp(prefix="tg-bench-", suffix=".json")
    os.close(fd)
    try:
        module.main([*argv, "--json", path])
        with open(path) as f:
            return results_from_json(json.load(f))
    finally:
        os.unlink(path)


# ------------------------------------------------------------------ the benchmarks, in running order
def _codec(suite: Suite) -> Results:
    from . import codec

    return call_benchmark(codec, ["--quick"] if suite.quick else [], quick=suite.quick)


def _bus(suite: Suite) -> Results:
    from . import bus

    url = suite.servers.pulsar_url
    return call_benchmark(bus, (["--quick"] if suite.quick else []) + (["--pulsar-url", url] if url else []),
                          quick=suite.quick, pulsar_url=url)


def _models(suite: Suite) -> Results:
    from . import models

    return call_benchmark(models, ["--quick"] if suite.quick else [], quick=suite.quick)


def _backends(suite: Suite) -> tuple[str, ...]:
    return ("sqlite", "cassandra") if suite.servers.cassandra_host else ("sqlite",)


def _stores(suite: Suite) -> Results:
    from . import stores

    backends = _backends(suite)
    return call_benchmark(stores, (["--quick"] if suite.quick else []) + ["--backends", ",".join(backends)],
                          quick=suite.quick, backends=backends, cassandra_host=suite.servers.cassandra_host)


def _vectors(suite: Suite) -> Results:
    from . import vectors

    backends = _backends(suite)
    # quick: a smoke run (Cassandra's vector inserts and SAI builds are slow); full: 100,000 vectors
    sizes = {"vectors": 2_000, "queries": 100, "docs": 3} if suite.quick else \
        {"vectors": None, "queries": None, "docs": None}
    argv = ["--backends", ",".join(backends)] + (["--quick", "--vectors", "2000", "--queries", "100", "--docs", "3"]
                                                 if suite.quick else [])
    return call_benchmark(vectors, argv, quick=suite.quick, dim=384, data_kind="clustered", backends=backends,
                          cassandra_host=suite.servers.cassandra_host, **sizes)


def _load(suite: Suite) -> Results:
    from . import load

    # embedded only: over Pulsar it drives services someone started on a flow of their choosing
    return call_benchmark(load, ["--quick"] if suite.quick else [], quick=suite.quick)


def _ours(name: str) -> Callable[[Suite], Results]:
    def run(suite: Suite) -> Results:
        import importlib

        return importlib.import_module(f".{name}", __package__).run(suite.quick, suite=suite)
    return run


BENCHMARKS: dict[str, tuple[Callable[[Suite], Results], str]] = {
    "codec": (_codec, "provenance builders, trace build+encode+decode, codec rates (issue 3)"),
    "bus": (_bus, "bus round trip and consumer throughput (issue 4)"),
    "models": (_models, "embedder load and throughput, extractive edge selection (issue 6)"),
    "stores": (_stores, "triple store insert, look-ups, trace listing at scale (issue 5)"),
    "vectors": (_vectors, "ANN top-10 over 100k vectors, librarian (issue 7)"),
    "ingest": (_ours("ingest"), "pipeline throughput, pages/s and chunks/s (issue 7)"),
    "removal": (_ours("removal"), "removing one document of 1,000; cost by document and collection size"),
    "document-rag": (_ours("document_rag"), "DocumentRAG latency, explainability on/off (issue 9)"),
    "agent": (_ours("agent"), "agent provenance cost per iteration (issue 9)"),
    "agent-patterns": (_ours("agent_patterns"), "supervisor vs its slowest sub-agent; provenance on/off per agent "
                                                "pattern (issue 37)"),
    "selection-quality": (_ours("selection_quality"), "edge-selection precision/recall on a labelled set, answer "
                                                       "correctness, prompt tokens per GraphRAG query, budget vs none "
                                                       "(issue 33)"),
    "graph-rag": (_ours("graph_rag"), "GraphRAG latency, first explain event, round trips, q/s; graph-rag anchors "
                                      "(issue 8)"),
    "otel": (_ours("otel"), "OpenTelemetry tracing: GraphRAG latency on / off / not installed, interleaved"),
    "cli": (_ours("cli"), "tg-invoke-graph-rag -x first line, trace list/show at 100k traces (issue 10)"),
    "memory": (_ours("memory"), "peak RSS: quickstart, each service process (issue 11)"),
    "scaling": (_ours("scaling"), "GraphRAG and store latency at 10k, 100k, 1M triples (issue 11)"),
    "gateway": (_ours("gateway"), "api-gateway: GraphRAG through the gateway vs over the bus, first explain frame, "
                                  "500 sockets at once"),
    "explorer": (_ours("explorer"), "trace explorer pages in headless Chromium: 50/150-edge trace page, list of "
                                    "100k traces"),
    "cluster": (_ours("cluster"), "three-node Cassandra (RF 3, LOCAL_QUORUM) vs one node, on/off; 2 graph-rag "
                                  "replicas vs 1 at 16 clients, CPU per query (needs CLUSTER_CASSANDRA_HOST)"),
    "capacity": (_ours("capacity"), "per query / per chunk CPU, storage per trace and triple, list/show at scale, "
                                    "on the cluster (needs CLUSTER_CASSANDRA_HOST; docs/capacity.md)"),
    "storage-load": (_ours("storage_load"), "a real DocumentRAG trace cloned to a million, storage per trace "
                                            "compacted at checkpoints (needs CLUSTER_CASSANDRA_HOST; "
                                            "docs/capacity.md)"),
    "real-model": (_ours("real_model"), "GraphRAG, DocumentRAG and agent latency and tokens per query on a real "
                                        "model (llama.cpp; needs TG_REAL_LLM_URL, else skipped)"),
}
if importlib.util.find_spec(f"{__package__}.load") is not None:  # the load generator, maintained separately
    BENCHMARKS["load"] = (_load, "N concurrent explainable GraphRAG queries for a fixed time, embedded")


def main(argv: list[str] | None = None) -> int:
    """Run the selected benchmarks; returns the exit status (1 if any benchmark crashed).

    :param argv: command-line arguments (default: ``sys.argv[1:]``).
    """
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small data, few repetitions: a smoke run")
    parser.add_argument("--json", help="write every figure, per benchmark, to this JSON file")
    parser.add_argument("--only", help=f"comma-separated benchmarks to run: {', '.join(BENCHMARKS)}")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, (_fn, what) in BENCHMARKS.items():
            print(f"{name:14s} {what}")
        return 0
    selected = list(BENCHMARKS)
    if args.only:
        selected = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in selected if n not in BENCHMARKS]
        if unknown:
            parser.error(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
        # Always in the suite's running order: later benchmarks reuse what earlier ones loaded
        # (e.g. ingest must load the sample corpus before document-rag finds it already there).
        selected = [n for n in BENCHMARKS if n in selected]
    suite = Suite(args.quick)
    mode = "quick" if args.quick else "full"
    print(f"[bench] {mode} mode, stacks: {', '.join(suite.stacks)}"
          + ("" if suite.servers.distributed else " (set PULSAR_URL and CASSANDRA_HOST for the distributed one)"),
          flush=True)
    started = time.perf_counter()
    report: dict[str, dict] = {}
    combined = Results()
    try:
        for name in selected:
            fn, what = BENCHMARKS[name]
            print(f"\n[bench] === {name}: {what}", flush=True)
            t0 = time.perf_counter()
            try:
                results, error = fn(suite), ""
            except Exception as e:  # noqa: BLE001 - one crash must not hide the other benchmarks' figures
                traceback.print_exc()
                results, error = Results(), f"{type(e).__name__}: {e}"
            seconds = time.perf_counter() - t0
            if results.figures:
                results.print_table(f"{name} ({seconds:.0f} s)")
            if error:
                print(f"[bench] {name} CRASHED after {seconds:.0f} s: {error}", flush=True)
            report[name] = {"status": "crashed" if error else "ok", "seconds": round(seconds, 1), "error": error,
                            "figures": results.to_json()["figures"]}
            for f in results.figures:
                combined.add(Figure(**{**asdict(f), "name": f"{name}: {f.name}"}))
    finally:
        suite.close()
    total = time.perf_counter() - started
    combined.print_table(f"all figures ({mode} mode, {total / 60:.1f} min)")
    crashed = [n for n, r in report.items() if r["status"] != "ok"]
    for name, r in report.items():
        print(f"[bench] {name:14s} {r['status']:8s} {r['seconds']:7.1f} s  {len(r['figures'])} figures")
    missed = [f for f in combined.figures if f.meets is False]
    print(f"[bench] {mode} mode: {len(selected)} benchmarks in {total:.0f} s; {len(missed)} figure(s) miss their "
          f"target; {'crashed: ' + ', '.join(crashed) if crashed else 'none crashed'}")
    if args.json:
        from pathlib import Path

        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({
            "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()},
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "mode": mode, "stacks": suite.stacks,
            "seconds": round(total, 1), "benchmarks": report}, indent=2))
    return 1 if crashed or not report else 0


if __name__ == "__main__":
    sys.exit(main())
