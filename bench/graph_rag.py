"""GraphRAG benchmark: issue 8 figures and the DESIGN.md section 7 anchors, on a synthetic graph.

Runs the real processors (graph-rag, prompt, text-completion, embeddings, vector and triple
query, librarian, triples-write) on the embedded stack (in-process bus, SQLite) and, when
``PULSAR_URL`` and ``CASSANDRA_HOST`` are set, on the distributed one (Apache Pulsar,
Apache Cassandra; the storage services in processes of their own, :data:`OWN_PROCESSES`),
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

This module also holds the plumbing the other service benchmarks share: where a stack
runs (:class:`Deployment`), the LLM endpoint process (:class:`LlmEndpoint`), request
recording (:class:`RecordingPorts`, :class:`CountingStore`) and interleaved measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from .common import Figure, Results, percentile, spread
from .synthetic import Question, SyntheticGraph, insert_graph

LLM_LATENCY_MS = 50.0
#: Processors a GraphRAG query uses.
QUERY_PROCESSORS = ("triples-write", "triples-query", "graph-embeddings-query", "document-embeddings-query",
                    "embeddings", "prompt", "text-completion", "librarian", "graph-rag")
#: Handlers per consumer, so 16 concurrent clients are not serialised by one handler.
CONCURRENCY = {"graph-rag": 16, "document-rag": 16, "agent-manager-react": 16, "prompt": 32,
               "text-completion": 32, "triples-query": 4, "graph-embeddings-query": 4,
               "document-embeddings-query": 4, "embeddings": 2, "librarian": 4}
FIRST_EXPLAIN_TARGET_MS = {"embedded": 20.0, "distributed": 50.0}
#: Services the distributed stack runs as processes of their own, as deployed (README, *Distributed set-up*):
#: the stores' side of a query and of its trace.  The query path stays in this process, where its requests
#: are recorded.  Run here too, their CPU (reading source chains, writing traces) would hold this process's
#: GIL while the query path waits for it, a cost no deployment of separate services pays.
OWN_PROCESSES = ("triples-write", "triples-query", "librarian")


def load_note() -> str:
    """The machine's load average: wall-clock figures on a busy 2-core machine measure the neighbours too."""
    try:
        return f"load {os.getloadavg()[0]:.1f}/{os.cpu_count()} cores"
    except OSError:  # pragma: no cover
        return ""


# ================================================================== where a stack runs
@dataclass(frozen=True)
class Servers:
    """Addresses of the distributed stack's servers (from the environment by default)."""

    pulsar_url: str | None = None
    pulsar_admin_url: str = ""
    cassandra_host: str | None = None
    cassandra_port: int = 9042

    @classmethod
    def from_env(cls) -> "Servers":
        return cls(os.environ.get("PULSAR_URL") or None, os.environ.get("PULSAR_ADMIN_URL", ""),
                   os.environ.get("CASSANDRA_HOST") or None, int(os.environ.get("CASSANDRA_PORT", "9042")))

    @property
    def distributed(self) -> bool:
        return bool(self.pulsar_url and self.cassandra_host)

    def stacks(self) -> list[str]:
        """``embedded``, plus ``distributed`` when both Pulsar and Cassandra are configured."""
        return ["embedded"] + (["distributed"] if self.distributed else [])

    def cassandra_config(self):
        from trustgraph_base.store.cassandra.connection import CassandraConfig

        return CassandraConfig(hosts=tuple(h.strip() for h in (self.cassandra_host or "").split(",") if h.strip()),
                               port=self.cassandra_port)


class Deployment:
    """Where one benchmark's data lives and its processors run.

    ``embedded``: the in-process bus over SQLite files in a fresh temporary ``$TG_HOME``.
    ``distributed``: Apache Pulsar over Apache Cassandra, under a fresh user whose keyspace is
    dropped by :meth:`close`; flows are unique, so nothing collides with other users of the servers.

    :param stack: ``embedded`` or ``distributed``.
    :param servers: server addresses (needed for ``distributed``).
    """

    def __init__(self, stack: str, servers: Servers | None = None, user: str | None = None):
        if stack not in ("embedded", "distributed"):
            raise ValueError(f"unknown stack {stack!r}")
        self.stack = stack
        self.servers = servers or Servers.from_env()
        if stack == "distributed" and not self.servers.distributed:
            raise ValueError("the distributed stack needs PULSAR_URL and CASSANDRA_HOST")
        self.user = user or f"bench{uuid.uuid4().hex[:8]}"
        self.home = Path(tempfile.mkdtemp(prefix="tg-bench-"))

    def backend(self):
        from trustgraph_base.pubsub import open_backend

        if self.stack == "embedded":
            return open_backend("memory")
        return open_backend("pulsar", url=self.servers.pulsar_url, admin_url=self.servers.pulsar_admin_url)

    def store_kwargs(self) -> dict:
        """Keyword arguments of ``start_embedded`` that choose the stores."""
        if self.stack == "embedded":
            return {"home": self.home}
        return {"store": "cassandra", "store_options": {"config": self.servers.cassandra_config()}}

    def open_stores(self) -> tuple[Any, Any, Any]:
        """(triple store, graph vector index, librarian store) opened directly, for loading data fast."""
        from trustgraph_base.store.librarian import open_librarian_store
        from trustgraph_base.store.triples import open_triples_store
        from trustgraph_base.store.vectors import open_vector_index

        backend, options = ("sqlite", {"home": self.home}) if self.stack == "embedded" else \
            ("cassandra", {"config": self.servers.cassandra_config()})
        return (open_triples_store(backend, **options), open_vector_index(backend, kind="graph", **options),
                open_librarian_store(backend, **options))

    async def start(self, only: Sequence[str], *, llm: str = "openai", settings: dict | None = None,
                    flow: str | None = None):
        """Start the processors ``only`` for this deployment (see :func:`trustgraph_flow.embedded.start_embedded`)."""
        from trustgraph_flow.embedded import start_embedded

        return await start_embedded(only=tuple(only), llm=llm, settings=settings, backend=self.backend(),
                                    flow=flow or f"bench{uuid.uuid4().hex[:8]}", **self.store_kwargs())

    async def start_with_processes(self, only: Sequence[str], own: Sequence[str], *, settings: dict | None = None):
        """:meth:`start`, with the services in ``own`` (on the distributed stack) as processes of their own.

        :return: the running in-process part and the :class:`ServiceProcesses` (``None`` when nothing runs apart).
        """
        own = [p for p in own if p in only] if self.stack == "distributed" else []
        if not own:
            return await self.start(only, settings=settings), None
        flow = f"bench{uuid.uuid4().hex[:8]}"
        processes = ServiceProcesses(own, flow, self.servers, self.home)
        try:
            await processes.wait_started()
            running = await self.start([p for p in only if p not in own], settings=settings, flow=flow)
        except BaseException:
            processes.stop()
            raise
        return running, processes

    def close(self) -> None:
        """Remove everything this deployment stored."""
        shutil.rmtree(self.home, ignore_errors=True)
        if self.stack != "distributed":
            return
        from trustgraph_base.store.cassandra.connection import connect
        from trustgraph_base.store.names import storage_name

        try:
            session = connect(self.servers.cassandra_config())
            for prefix in ("tg", "tgv"):
                session.execute(f"DROP KEYSPACE IF EXISTS {storage_name(prefix, self.user)}", timeout=300)
        except Exception as e:  # noqa: BLE001 - cleanup must not hide the figures
            print(f"  warning: could not drop the keyspace of {self.user}: {e}", flush=True)


#: Services that hold a store: on the distributed stack they take the Cassandra options.
STORE_SERVICES = ("triples-write", "triples-query", "graph-embeddings-query", "librarian")


def pulsar_service_argv(name: str, servers: Servers, flow: str) -> list[str]:
    """The command line of service ``name`` (its console script) on ``servers``' Pulsar (and Cassandra), in ``flow``."""
    from .cli import command

    argv = [command(name), "--pubsub", "pulsar", "--pulsar-url", servers.pulsar_url or "", "--flow", flow,
            "--log-level", "WARNING"]
    if servers.pulsar_admin_url:
        argv += ["--pulsar-admin-url", servers.pulsar_admin_url]
    if name in STORE_SERVICES:
        argv += ["--store", "cassandra", "--cassandra-host", servers.cassandra_host or "", "--cassandra-port",
                 str(servers.cassandra_port)]
    return argv


class ServiceProcesses:
    """Services started as their own processes (console scripts) on Pulsar + Cassandra, watched through their metrics.

    Each serves Prometheus metrics on a free 127.0.0.1 port: ``tg_processors_started`` says when it is
    subscribed, ``tg_in_flight_messages`` when it is busy (for :func:`settle`), and triples-query's
    ``tg_store_pattern_lookups_total`` counts store look-ups.  CPU time is read from ``/proc``.

    :param services: console-script names, e.g. :data:`OWN_PROCESSES`.
    :param flow: the flow of the in-process part of the stack.
    :param servers: Pulsar and Cassandra addresses.
    :param logs: directory for each process's log.
    """

    def __init__(self, services: Sequence[str], flow: str, servers: Servers, logs: Path):
        import socket

        self.procs: dict[str, subprocess.Popen] = {}
        self.ports: dict[str, int] = {}
        self.logs = logs
        for name in services:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                self.ports[name] = sock.getsockname()[1]
            cmd = pulsar_service_argv(name, servers, flow) + ["--metrics-port", str(self.ports[name])]
            if name in CONCURRENCY:
                cmd += ["--concurrency", str(CONCURRENCY[name])]
            with open(logs / f"{name}.log", "wb") as log:
                self.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def _metric(self, name: str, metric: str) -> float:
        """Sum of ``metric`` (all label sets) on ``name``'s metrics page; NaN while the page is not served yet."""
        import urllib.request

        from prometheus_client.parser import text_string_to_metric_families

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports[name]}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return float("nan")
        return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
                   if sample.name == metric)

    async def wait_started(self, timeout: float = 120.0) -> None:
        """Until every process says it is subscribed; a process that exits fails with its log."""
        deadline = time.monotonic() + timeout
        waiting = set(self.procs)
        while waiting:
            for name in list(waiting):
                if self.procs[name].poll() is not None:
                    log = (self.logs / f"{name}.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{name} exited with {self.procs[name].returncode}: {log}")
                if await asyncio.to_thread(self._metric, name, "tg_processors_started") >= 1:
                    waiting.discard(name)
            if time.monotonic() > deadline:
                raise RuntimeError(f"not started within {timeout:g} s: {', '.join(sorted(waiting))}")
            await asyncio.sleep(0.2)

    def busy(self) -> bool:
        """True while any of the processes handles a message (or cannot say)."""
        return any(self._metric(name, "tg_in_flight_messages") != 0 for name in self.procs)  # NaN: busy

    def lookups(self) -> float:
        """Store pattern look-ups of triples-query so far (0 when it does not run here)."""
        return self._metric("triples-query", "tg_store_pattern_lookups_total") if "triples-query" in self.procs else 0

    def cpu_seconds(self) -> float:
        """User + system CPU time of the processes so far."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for p in self.procs.values():
            try:
                fields = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / tick
        return total

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def stores_of(stack) -> tuple[Any, Any, Any]:
    """(triple store, graph vector index, document vector index) of a running stack (None when not opened)."""
    triples = next((s for s in stack.stores if hasattr(s, "list_traces")), None)
    graph = next((s for s in stack.stores if getattr(s, "kind", "") == "graph"), None)
    document = next((s for s in stack.stores if getattr(s, "kind", "") == "document"), None)
    return triples, graph, document


# ================================================================== the LLM endpoint
class LlmEndpoint:
    """The project's OpenAI-compatible server in its own process (so its CPU is not ours).

    :param mode: ``extractive`` (deterministic answers) or ``scripted`` (``script``: a list, or
        replies per template id, see :mod:`trustgraph_flow.model.testserver`).
    :param latency_ms: fixed delay of every answer.
    """

    def __init__(self, mode: str = "extractive", latency_ms: float = LLM_LATENCY_MS, script: Any = None):
        import json

        self._script_file = None
        cmd = [sys.executable, "-m", "trustgraph_flow.model.testserver", "--mode", mode,
               "--latency-ms", str(latency_ms), "--log-level", "WARNING"]
        if script is not None:
            fd, self._script_file = tempfile.mkstemp(prefix="tg-bench-script-", suffix=".json")
            with os.fdopen(fd, "w") as f:
                json.dump(script, f)
            cmd += ["--script", self._script_file]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http://127.0.0.1:"):
            self.proc.kill()
            raise RuntimeError(f"the LLM test server did not start (said {line!r})")
        self.base_url = line
        self.latency_ms = latency_ms

    def settings(self, **extra: dict) -> dict[str, dict]:
        """Processor settings: text-completion pointed at this endpoint, plus ``extra`` per processor."""
        out = {"text-completion": {"base_url": self.base_url, "api_key": "bench", "model": "bench",
                                   "max_retries": 1, "timeout": 60.0}}
        for pid, params in extra.items():
            out.setdefault(pid, {}).update(params)
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self._script_file:
            os.unlink(self._script_file)

    def __enter__(self) -> "LlmEndpoint":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@lru_cache(maxsize=1)
def shared_embedder():
    """One loaded local embedder for every stack of this process, cache off (repeated questions are embedded again)."""
    from trustgraph_flow.model.embeddings import LocalEmbedder

    embedder = LocalEmbedder(cache_size=0)
    embedder.load()
    return embedder


def stack_settings(llm: LlmEndpoint, concurrency: bool = True, **extra: dict) -> dict[str, dict]:
    """Settings for a benchmark stack: the LLM endpoint, the shared embedder, handler concurrency."""
    settings = llm.settings(embeddings={"embedder": shared_embedder()})
    if concurrency:
        for pid, n in CONCURRENCY.items():
            settings.setdefault(pid, {})["concurrency"] = n
    for pid, params in extra.items():
        settings.setdefault(pid, {}).update(params)
    return settings


class Suite:
    """What the benchmarks of one run share: the stacks, one deployment (user) per stack, the LLM endpoint.

    One deployment per stack keeps Cassandra schema work (a keyspace and its tables) to one per run;
    benchmarks use their own collections in it.  ``corpus`` and ``graphs`` say what is loaded where,
    so a later benchmark reuses what an earlier one loaded.

    :param quick: smaller data and fewer repetitions.
    :param servers: where the distributed stack's servers are (default: from the environment).
    """

    def __init__(self, quick: bool = False, servers: Servers | None = None):
        self.quick = quick
        self.servers = servers or Servers.from_env()
        self._llm: LlmEndpoint | None = None
        self.deployments: dict[str, Deployment] = {}
        self.corpus: dict[str, str] = {}          # stack -> collection holding the sample corpus
        self.graphs: set[tuple[str, str]] = set()  # (stack, collection) holding a synthetic graph

    @property
    def stacks(self) -> list[str]:
        return self.servers.stacks()

    @property
    def llm(self) -> LlmEndpoint:
        """The extractive LLM endpoint with a fixed 50 ms latency (started on first use)."""
        if self._llm is None:
            self._llm = LlmEndpoint()
        return self._llm

    def deployment(self, stack: str) -> Deployment:
        if stack not in self.deployments:
            self.deployments[stack] = Deployment(stack, self.servers)
        return self.deployments[stack]

    def close(self) -> None:
        if self._llm is not None:
            self._llm.stop()
            self._llm = None
        for d in self.deployments.values():
            d.close()
        self.deployments.clear()

    def __enter__(self) -> "Suite":
        return self

    def __exit__(self, *exc) -> None:
        self.close()



def run_on_suite(quick: bool, suite: Suite | None, bench: Any) -> Results:
    """``asyncio.run(bench(suite))`` on ``suite``, or on a new one that is closed afterwards.

    :param bench: ``suite -> coroutine`` returning the benchmark's :class:`Results`.
    """
    own = suite is None
    suite = suite or Suite(quick)
    try:
        return asyncio.run(bench(suite))
    finally:
        if own:
            suite.close()


def bench_parser(doc: str, quick_help: str) -> argparse.ArgumentParser:
    """The command line every benchmark module shares: ``--quick`` and ``--json`` (add your own)."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--json", help="write the figures to this JSON file")
    return parser


def report(results: Results, title: str, json_path: str | None) -> Results:
    """Print ``results`` as a table and, when asked, write them as JSON."""
    results.print_table(title)
    if json_path:
        results.write_json(json_path)
    return results

# ================================================================== recording requests
@dataclass
class Call:
    """One request a service made: which service, when it started and ended, how many patterns."""

    service: str
    start: float
    end: float
    patterns: int = 0


_PORT_SERVICES = {"embed": "embeddings", "find_entities": "graph-embeddings", "find_chunks": "document-embeddings",
                  "query": "triples", "prompt": "prompt", "prompt_stream": "prompt",
                  "get_content": "librarian", "run_tool": "tool"}


class RecordingPorts:
    """A transparent proxy of a service's ports that records every request (and, optionally, its result).

    Explain triples and answers go out on producers (no reply awaited), so ``store_explain`` and
    ``store_answer`` are not requests.
    """

    def __init__(self, inner: Any, keep_results: bool = False):
        self.inner = inner
        self.keep_results = keep_results
        self.calls: list[Call] = []
        self.results: dict[str, list] = defaultdict(list)

    def reset(self) -> None:
        self.calls = []
        self.results = defaultdict(list)

    def __getattr__(self, name: str):
        attr = getattr(self.inner, name)
        service = _PORT_SERVICES.get(name)
        if service is None:
            return attr
        if name == "prompt_stream":
            async def stream(*args, **kwargs):
                t0, items = time.perf_counter(), []
                try:
                    async for item in attr(*args, **kwargs):
                        if self.keep_results:
                            items.append(copy.deepcopy(item))
                        yield item
                finally:
                    self.calls.append(Call(service, t0, time.perf_counter()))
                    if self.keep_results:
                        self.results[name].append(items)
            return stream

        async def call(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                result = await attr(*args, **kwargs)
            finally:
                patterns = len(args[2]) if name == "query" and len(args) > 2 else 0
                self.calls.append(Call(service, t0, time.perf_counter(), patterns))
            if self.keep_results:
                self.results[name].append(copy.deepcopy(result))
            return result
        return call


def dependent_rounds(calls: Sequence[Call], service: str | None = None) -> int:
    """The longest chain of requests each of which started after the previous one ended.

    That is how many network round trips a query waits for one after another; requests that
    overlap in time (sent together) count once.  Greedy by earliest end is exact for this.
    """
    n, end = 0, float("-inf")
    for c in sorted((c for c in calls if service is None or c.service == service), key=lambda c: c.end):
        if c.start >= end:
            n, end = n + 1, c.end
    return n


class CountingStore:
    """A transparent proxy of a triple store that counts store-level pattern look-ups."""

    def __init__(self, inner: Any):
        import threading

        self.inner = inner
        self.lookups = 0
        self.requests = 0
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self.lookups = self.requests = 0

    def query_many(self, user, collection, patterns):
        with self._lock:
            self.requests += 1
            self.lookups += len(patterns)
        return self.inner.query_many(user, collection, patterns)

    def query(self, user, collection, pattern):
        with self._lock:
            self.requests += 1
            self.lookups += 1
        return self.inner.query(user, collection, pattern)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


class ProcessLookups:
    """:class:`CountingStore`'s ``lookups`` for a triples-query running apart, from its look-up counter."""

    def __init__(self, processes: ServiceProcesses):
        self.processes = processes
        self._base = processes.lookups()

    def reset(self) -> None:
        self._base = self.processes.lookups()

    @property
    def lookups(self) -> int:
        return int(self.processes.lookups() - self._base)


async def settle(stack, quiet: float | None = None, timeout: float = 60.0,
                 processes: ServiceProcesses | None = None) -> None:
    """Wait until no processor of ``stack`` (or of ``processes``) handles a message, and the in-process bus is
    empty, for ``quiet`` s.

    Explain triples are stored in the background; letting that finish keeps one query's
    writes out of the next one's latency.
    """
    pending = getattr(stack.backend, "pending", None)
    quiet = quiet if quiet is not None else (0.005 if pending else 0.05)
    loop = asyncio.get_running_loop()
    deadline, since = loop.time() + timeout, None
    while loop.time() < deadline:
        busy = any(p.in_flight for p in stack.processors) or (pending is not None and pending() > 0)
        if not busy and processes is not None:
            busy = await asyncio.to_thread(processes.busy)
        now = loop.time()
        if busy:
            since = None
        elif since is None:
            since = now
        elif now - since >= quiet:
            return
        await asyncio.sleep(0.002)


# ================================================================== one request
@dataclass
class Answer:
    """What one streamed request cost, as the client saw it."""

    latency: float
    first_explain: float | None
    messages: list = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(getattr(m, "response", "") or "" for m in self.messages if m.message_type == "chunk")

    def explain_triples(self, predicate: str) -> list:
        return [t for m in self.messages if m.message_type == "explain" for t in m.explain_triples
                if t.p.value == predicate]


async def stream_request(client, request, timeout: float = 120.0) -> Answer:
    """Send ``request``, read the stream to its end; an error reply raises (a benchmark must not time failures)."""
    t0 = time.perf_counter()
    first, msgs = None, []
    async for m in client.stream(request, timeout=timeout):
        if first is None and m.message_type == "explain":
            first = time.perf_counter() - t0
        if getattr(m, "error", None) is not None:
            raise RuntimeError(f"{client.service}: {m.error.message}")
        msgs.append(m)
    return Answer(time.perf_counter() - t0, first, msgs)


@dataclass
class QueryRecord:
    """One measured query: the client's view, the requests the service made, store look-ups, CPU time
    (of this process and of the services running apart)."""

    answer: Answer
    calls: list[Call]
    lookups: int
    cpu_ms: float

    def requests(self, service: str) -> int:
        return sum(1 for c in self.calls if c.service == service)

    @property
    def edges_explored(self) -> int:
        from trustgraph_base.provenance import namespaces as ns

        found = self.answer.explain_triples(ns.TG_EDGE_COUNT)
        return int(found[0].o.value) if found else 0

    def chain(self) -> str:
        """The services of the longest chain of dependent requests, in order."""
        out, end = [], float("-inf")
        for c in sorted(self.calls, key=lambda c: c.end):
            if c.start >= end:
                out.append(c.service)
                end = c.end
        return " > ".join(out)


class Variants:
    """Samples per (stack, variant), collected in interleaved repetitions."""

    def __init__(self) -> None:
        self.samples: dict[tuple[str, str], list[list[float]]] = defaultdict(list)

    def new_rep(self, keys: Sequence[tuple[str, str]]) -> None:
        for k in keys:
            self.samples[k].append([])

    def add(self, stack: str, variant: str, value: float) -> None:
        self.samples[(stack, variant)][-1].append(value)

    def all(self, stack: str, variant: str) -> list[float]:
        return [v for rep in self.samples[(stack, variant)] for v in rep]

    def ratio(self, a: tuple[str, str], b: tuple[str, str]) -> tuple[float, list[float]]:
        """median(a) / median(b) over all samples, and the same ratio per repetition (for the spread)."""
        per_rep = [statistics.median(x) / statistics.median(y)
                   for x, y in zip(self.samples[a], self.samples[b], strict=True) if x and y]
        return statistics.median(self.all(*a)) / statistics.median(self.all(*b)), per_rep


def interleaved_order(items: Sequence[Any], rep: int) -> list[Any]:
    """Every rotation of ``items``, then every rotation reversed, so each item runs first and follows each
    other item equally often.

    (Reversing every other rotation, as before, undid the rotation for two items: with ``["on", "off"]``
    "on" always ran first and "off" always right after it.)
    """
    n = len(items)
    k = rep % n
    out = list(items[k:]) + list(items[:k])
    return out if (rep // n) % 2 == 0 else out[::-1]


def on_off_figures(v: Variants, stack: str, what: str, reps: int, target: float = 1.05,
                   cpu: Variants | None = None, unit_note: str = "",
                   cpu_what: str = "services + bus + client (+ SQLite when embedded)") -> list[Figure]:
    """Latency on and off, their ratio (the target) and, if measured, the same for CPU time (of ``cpu_what``)."""
    on, off = v.all(stack, "on"), v.all(stack, "off")
    ratio, per_rep = v.ratio((stack, "on"), (stack, "off"))
    out = [
        Figure(f"{what} latency p50, explainability on", statistics.median(on), "ms", stack=stack, spread=spread(on),
               note=f"{len(on)} requests{unit_note}; {load_note()}"),
        Figure(f"{what} latency p50, explainability off", statistics.median(off), "ms", stack=stack,
               spread=spread(off)),
        Figure(f"{what}: explainability cost, latency on / off", ratio, "x", target, stack=stack,
               spread=spread(per_rep), note=f"{reps} interleaved reps; target: adds < {100 * (target - 1):.0f} %"),
    ]
    if cpu is not None:
        c_ratio, c_rep = cpu.ratio((stack, "on"), (stack, "off"))
        out.append(Figure(f"{what}: CPU per request, on / off", c_ratio, "x", stack=stack,
                          spread=spread(c_rep), note=f"{statistics.median(cpu.all(stack, 'on')):.0f} vs "
                                                     f"{statistics.median(cpu.all(stack, 'off')):.0f} ms; "
                                                     + cpu_what))
    return out


# ================================================================== the GraphRAG bench
@dataclass
class GraphRagTarget:
    """A running stack with the synthetic graph loaded, its client and its instruments."""

    name: str
    deployment: Deployment
    stack: Any
    conn: Any
    client: Any
    ports: RecordingPorts
    store: Any  # CountingStore, or ProcessLookups when triples-query runs apart
    collection: str
    processes: ServiceProcesses | None = None

    def cpu_seconds(self) -> float:
        """CPU time so far of this process and of the services running apart."""
        return time.process_time() + (self.processes.cpu_seconds() if self.processes else 0.0)

    async def ask(self, question: str, explainable: bool = True, settle_after: bool = True,
                  **limits) -> QueryRecord:
        """One query, read to its end; then (by default) wait until its trace is stored."""
        from trustgraph_base.schema import GraphRagQuery

        self.ports.reset()
        self.store.reset()
        req = GraphRagQuery(query=question, user=self.deployment.user, collection=self.collection, streaming=True,
                            explainable=explainable, **limits)
        c0 = self.cpu_seconds()
        answer = await stream_request(self.client, req)
        calls, lookups = list(self.ports.calls), self.store.lookups
        if settle_after:
            await settle(self.stack, processes=self.processes)
        return QueryRecord(answer, calls, lookups, (self.cpu_seconds() - c0) * 1000)


async def load_graph(suite: Suite, stack: str, graph: SyntheticGraph, collection: str, real: set[int] | None,
                     vector_limit: int | None = None) -> Figure:
    """Insert ``graph`` into ``collection`` of the suite's deployment on ``stack`` (straight into the stores)."""
    d = suite.deployment(stack)
    triples, index, librarian = await asyncio.to_thread(d.open_stores)
    try:
        t0 = time.perf_counter()
        load = await asyncio.to_thread(insert_graph, graph, triples, index, d.user, collection, shared_embedder(),
                                       real, vector_limit)
    finally:
        for s in (triples, index, librarian):
            s.close()
    how = "all labels embedded" if real is None else f"{len(real)} labels embedded, the rest random"
    return Figure(f"load synthetic graph: {load['triples']:,} triples, {load['vectors']:,} vectors",
                  time.perf_counter() - t0, "s", stack=stack,
                  note=f"{load['triples'] / load['triple_seconds']:,.0f} triples/s, "
                       f"{load['vectors'] / max(load['vector_seconds'], 1e-9):,.0f} vectors/s ({how})")


async def open_target(suite: Suite, stack: str, collection: str, processors: Sequence[str] = QUERY_PROCESSORS,
                      own: Sequence[str] = OWN_PROCESSES) -> GraphRagTarget:
    """Start the query processors of the suite's deployment on ``stack``, attach instruments and a client.

    :param own: processors that run in processes of their own on the distributed stack (``()``: none).
    """
    from trustgraph_cli.connection import Connection

    d = suite.deployment(stack)
    running, processes = await d.start_with_processes(processors, own, settings=stack_settings(suite.llm))
    try:
        rag = running.get("graph-rag")
        ports = RecordingPorts(rag.rag.ports)
        rag.rag.ports = ports
        if processes is not None and "triples-query" in processes.procs:
            store: Any = ProcessLookups(processes)
        else:
            query = running.get("triples-query")
            store = CountingStore(query.store)
            query.store = store
        conn = await Connection.attach(running, timeout=120).__aenter__()
        client = await conn.client("graph-rag")
    except BaseException:
        await running.stop()
        if processes is not None:
            processes.stop()
        raise
    return GraphRagTarget(stack, d, running, conn, client, ports, store, collection, processes)


async def close_target(t: GraphRagTarget) -> None:
    await t.conn.__aexit__(None, None, None)
    await t.stack.stop()
    if t.processes is not None:
        t.processes.stop()


async def latency_on_off(targets: Sequence[GraphRagTarget], questions: Sequence[Question], reps: int) -> list[Figure]:
    """Explainability on vs off (and stack vs stack), interleaved; plus request counts and rounds."""
    v, cpu = Variants(), Variants()
    on: dict[str, list[QueryRecord]] = defaultdict(list)
    keys = [(t.name, var) for t in targets for var in ("on", "off")]
    by_name = {t.name: t for t in targets}
    for rep in range(reps):
        v.new_rep(keys)
        cpu.new_rep(keys)
        for qi, q in enumerate(questions):
            for name, var in interleaved_order(keys, rep + qi):
                r = await by_name[name].ask(q.text, explainable=(var == "on"))
                v.add(name, var, r.answer.latency * 1000)
                cpu.add(name, var, r.cpu_ms)
                if var == "on":
                    on[name].append(r)
    out = []
    for t in targets:
        s, recs = t.name, on[t.name]
        first = [r.answer.first_explain * 1000 for r in recs]
        apart = by_name[s].processes
        extra = {"cpu_what": "services + bus + client + the services in their own processes"} if apart else {}
        out += on_off_figures(v, s, "GraphRAG", reps, cpu=cpu,
                              unit_note=f", LLM {LLM_LATENCY_MS:g} ms per answer (2 answers per query)"
                                        + (f"; {', '.join(apart.procs)} in processes of their own" if apart else ""),
                              **extra)
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
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
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
def graph_for(quick: bool, entities: int | None = None, edges: int | None = None) -> SyntheticGraph:
    """The anchor graph: 10,000 entities / 50,000 edges (quick: 1,000 / 5,000)."""
    e = entities or (1_000 if quick else 10_000)
    return SyntheticGraph(e, edges or 5 * e)


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
