"""Memory benchmark: peak resident memory of the embedded quickstart and of each service process.

* ``tg-quickstart`` in a fresh ``$TG_HOME``: loads the sample corpus through the whole
  pipeline and answers a question with its trace, all in one process (the embedded
  deployment).  Peak RSS sampled every 20 ms together with the kernel's high-water mark
  (``VmHWM``); the time it took beside it.
* The distributed deployment as separate OS processes, one per service, started with their
  console scripts (``graph-rag --pubsub pulsar ...``, ``triples-query --store cassandra ...``),
  serving GraphRAG queries on the synthetic graph: sequential queries (explainability on and
  off interleaved, which also gives the explainability ratio of this real multi-process
  deployment), then 8 concurrent clients.  RSS of every process is sampled (psutil and
  ``VmHWM``, every 50 ms); the figure is each process's peak, with its RSS once started and
  idle beside it.  Needs ``PULSAR_URL`` and ``CASSANDRA_HOST``.

    python -m bench.memory [--quick] [--json out.json]
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psutil

from .cli import clean_env, command, run_command
from .common import Figure, Results, spread
from .harness import (
    Suite,
    Variants,
    bench_parser,
    graph_for,
    interleaved_order,
    load_graph,
    load_note,
    pulsar_service_argv,
    report,
    run_on_suite,
    stream_request,
)

MB = 1024 * 1024


def high_water_mark(pid: int) -> int:
    """The kernel's peak RSS of a live process since its exec (``VmHWM``), in bytes; 0 if unreadable.

    (``ru_maxrss`` of a child is no good here: on Linux it includes the parent's RSS at fork.)
    """
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssSampler:
    """Samples the RSS (and the kernel's high-water mark) of processes in a background thread.

    ``peak`` is the largest of the sampled RSS and the last ``VmHWM`` read before each process ended.
    """

    def __init__(self, procs: dict[str, int], interval: float = 0.05):
        self.procs = {name: psutil.Process(pid) for name, pid in procs.items()}
        self.peak = {name: 0 for name in procs}
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def sample(self) -> dict[str, int]:
        now = {}
        for name, p in self.procs.items():
            try:
                now[name] = p.memory_info().rss
            except psutil.Error:
                continue
            self.peak[name] = max(self.peak[name], now[name], high_water_mark(p.pid))
        return now

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def quickstart_figures() -> list[Figure]:
    """Peak RSS of ``tg-quickstart`` in a fresh home (corpus load + one explained answer)."""
    home = Path(tempfile.mkdtemp(prefix="tg-bench-quickstart-"))
    samplers: list[RssSampler] = []

    def sample(pid: int) -> None:
        samplers.append(RssSampler({"quickstart": pid}, interval=0.02).__enter__())

    try:
        t = run_command([command("tg-quickstart"), "-U", "bench"], clean_env(TG_HOME=str(home)), timeout=900,
                        on_start=sample)
        if "[synthesis]" not in t.output:
            raise RuntimeError(f"tg-quickstart printed no complete trace:\n{t.output[-1500:]}")
    finally:
        for s in samplers:
            s.__exit__(None, None, None)
        shutil.rmtree(home, ignore_errors=True)
    return [Figure("tg-quickstart peak RSS (embedded, one process)", samplers[0].peak["quickstart"] / MB, "MB",
                   stack="embedded", note=f"loads the 5-document corpus, answers with -x: {t.total:.0f} s, CPU "
                                          f"{t.cpu:.1f} s; {load_note()}")]


SERVICES = ("triples-write", "triples-query", "graph-embeddings-query", "embeddings", "prompt", "text-completion",
            "librarian", "graph-rag")
def service_argv(name: str, suite: Suite, flow: str) -> list[str]:
    """:func:`pulsar_service_argv`, plus the LLM endpoint and the handler concurrency of the query path."""
    argv = pulsar_service_argv(name, suite.servers, flow)
    if name == "prompt":
        argv += ["--llm", "openai", "--concurrency", "8"]
    if name == "text-completion":
        argv += ["--base-url", suite.llm.base_url, "--api-key", "bench", "--model", "bench", "--concurrency", "8"]
    if name == "graph-rag":
        argv += ["--concurrency", "8"]
    return argv


async def service_figures(suite: Suite, queries: int, reps: int) -> list[Figure]:
    """Each service in its own process on Pulsar + Cassandra, under GraphRAG load; peak RSS per process."""
    from trustgraph_base.processor import RequestResponseClient
    from trustgraph_base.pubsub import open_backend, request_queue, response_queue
    from trustgraph_base.schema import GraphRagQuery, GraphRagResponse

    graph = graph_for(suite.quick)  # the graph-rag benchmark's graph, if it is still loaded
    collection = f"synthetic-{graph.entities}-{graph.edges}"
    if ("distributed", collection) not in suite.graphs:
        print("  memory: loading the synthetic graph (distributed) ...", flush=True)
        await load_graph(suite, "distributed", graph, collection, {i for q in graph.questions(6) for i in q.entities})
        suite.graphs.add(("distributed", collection))
    flow = f"bench{uuid.uuid4().hex[:8]}"
    user = suite.deployment("distributed").user
    env = clean_env(PYTHONUNBUFFERED="1")
    procs: dict[str, subprocess.Popen] = {}
    logs = Path(tempfile.mkdtemp(prefix="tg-bench-services-"))
    backend = open_backend("pulsar", url=suite.servers.pulsar_url, admin_url=suite.servers.pulsar_admin_url)
    client = None
    try:
        for name in SERVICES:
            procs[name] = subprocess.Popen(service_argv(name, suite, flow), stdout=subprocess.DEVNULL,
                                           stderr=open(logs / f"{name}.log", "w"), env=env)
        client = await RequestResponseClient(backend, "graph-rag", request_queue("graph-rag", flow),
                                             response_queue("graph-rag", flow), GraphRagQuery, GraphRagResponse,
                                             timeout=60).start()
        questions = graph.questions(6)

        async def ask(q: str, timeout: float = 60.0, explainable: bool = True):
            answer = await stream_request(client, GraphRagQuery(query=q, user=user, collection=collection,
                                                                streaming=True, explainable=explainable),
                                          timeout=timeout)
            if not answer.text:
                raise AssertionError("graph-rag (separate processes) gave an empty answer")
            return answer

        t0 = time.perf_counter()
        while True:  # ready when a query goes all the way through
            dead = [n for n, p in procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"service process(es) {', '.join(dead)} exited: "
                                   f"{(logs / (dead[0] + '.log')).read_text()[-800:]}")
            try:  # a request sent before graph-rag subscribed is dropped (non-persistent): ask again soon
                await ask(questions[0].text, timeout=5.0)
                break
            except Exception:
                if time.perf_counter() - t0 > 300:
                    raise
                await asyncio.sleep(1)
        ready = time.perf_counter() - t0
        with RssSampler({n: p.pid for n, p in procs.items()}) as sampler:
            idle = sampler.sample()
            # Sequential queries, explainability on and off interleaved: the same ratio as graph-rag's,
            # but with every service in its own process (the writer's CPU is not in graph-rag's process).
            v = Variants()
            for rep in range(reps):
                v.new_rep([("distributed", "on"), ("distributed", "off")])
                for i in range(queries // reps):
                    for var in interleaved_order(["on", "off"], rep + i):
                        answer = await ask(questions[i % len(questions)].text, explainable=(var == "on"))
                        v.add("distributed", var, answer.latency * 1000)
                        await asyncio.sleep(0.3)  # let triples-write store the trace (another process)
            # Load for the RSS peaks.  Request/response is at most once (non-persistent topics): a
            # reply Pulsar drops ends that query with its client's time-out.  Counted and reported,
            # not fatal, unless every query failed.
            loaded = await asyncio.gather(*(ask(questions[(k + i) % len(questions)].text) for k in range(8)
                                            for i in range(max(1, queries // 8))), return_exceptions=True)
            failed = [r for r in loaded if isinstance(r, BaseException)]
            if len(failed) == len(loaded):
                raise failed[0]
    finally:
        if client is not None:
            await client.stop()
        await backend.close()
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
        for p in procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(logs, ignore_errors=True)
    out = [Figure(f"{name} process peak RSS", sampler.peak[name] / MB, "MB", stack="distributed",
                  note=f"{idle.get(name, 0) / MB:.0f} MB once started")
           for name in SERVICES]
    total = sum(sampler.peak.values())
    out.append(Figure("all service processes, sum of peaks", total / MB, "MB", stack="distributed",
                      note=f"{len(SERVICES)} processes, {2 * (queries // reps) * reps} sequential queries + 8 "
                           f"concurrent clients ({len(failed)} of {len(loaded)} failed"
                           f"{': ' + str(failed[0])[:80] if failed else ''}); first answer {ready:.0f} s after "
                           f"start; {load_note()}"))
    ratio, per_rep = v.ratio(("distributed", "on"), ("distributed", "off"))
    out.append(Figure("GraphRAG, one process per service: explainability cost, latency on / off", ratio, "x", 1.05,
                      stack="distributed", spread=spread(per_rep),
                      note=f"p50 {statistics.median(v.all('distributed', 'on')):.0f} vs "
                           f"{statistics.median(v.all('distributed', 'off')):.0f} ms, {reps} interleaved reps"))
    return out


async def bench(suite: Suite) -> Results:
    results = Results()
    print("  memory: tg-quickstart ...", flush=True)
    results.add(*await asyncio.to_thread(quickstart_figures))
    if "distributed" in suite.stacks:
        print("  memory: services as separate processes ...", flush=True)
        results.add(*await service_figures(suite, 12 if suite.quick else 48, 3 if suite.quick else 8))
    else:
        print("  memory: services as processes skipped (set PULSAR_URL and CASSANDRA_HOST)", flush=True)
    return results


def run(quick: bool = False, suite: Suite | None = None) -> Results:
    return run_on_suite(quick, suite, lambda s: bench(s))


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "fewer queries")
    args = parser.parse_args(argv)
    return report(run(args.quick), "memory", args.json)


if __name__ == "__main__":
    main()
