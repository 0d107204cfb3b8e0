"""Where a benchmark's stack runs and how to know it is idle: deployments, servers, services in processes of their own.

A benchmark runs the real processors on the embedded stack (in-process bus, SQLite under a
temporary ``$TG_HOME``) or on the distributed one (Apache Pulsar, Apache Cassandra, under a
fresh user whose keyspace is dropped at the end).  This module owns that choice, the
command lines and metrics of services started as their own processes, and :func:`settle`,
which waits until no processor handles a message so one request's background writes do not
land in the next one's latency.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trustgraph_flow.manifest import PROCESSORS

#: Handlers per consumer, so 16 concurrent clients are not serialised by one handler.
CONCURRENCY = {"graph-rag": 16, "document-rag": 16, "agent-manager-react": 16, "prompt": 32,
               "text-completion": 32, "triples-query": 4, "graph-embeddings-query": 4,
               "document-embeddings-query": 4, "embeddings": 2, "librarian": 4}


@dataclass(frozen=True)
class Servers:
    """Addresses of the distributed stack's servers (from the environment by default)."""

    pulsar_url: str | None = None
    pulsar_admin_url: str = ""
    cassandra_host: str | None = None
    cassandra_port: int = 9042

    @classmethod
    def from_env(cls) -> Servers:
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


#: Services that hold a store (the service manifest's): on the distributed stack they take the Cassandra options.
STORE_SERVICES = tuple(pid for pid, e in PROCESSORS.items() if e.stores)


def pulsar_service_argv(name: str, servers: Servers, flow: str) -> list[str]:
    """The command line of service ``name`` (its console script) on ``servers``' Pulsar (and Cassandra), in ``flow``."""
    from ..cli import command

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

    :param services: console-script names, e.g. :data:`.graph_target.OWN_PROCESSES`.
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
