"""The distributed stack under test: services as separate OS processes over a private Pulsar + Cassandra pair.

Each service that a fault test kills runs in its own process, started from its console
script (``triples-write``, ``librarian``) or from ``tg-processor-group`` with a one-processor
config (``graph-rag``, which needs per-client timeouts that have no command-line option), so
``kill -9`` hits exactly one service.  Everything else the queries need (triples-query,
trace-admin, vector query, embeddings, prompt, text-completion) runs in one more group
process.  The LLM is the project's OpenAI-compatible test server (extractive answers with
an adjustable latency), the only test double.

The sample corpus is loaded once, in this process, by the real ingestion processors over
the same Pulsar and Cassandra (on a flow of its own, so its queues never mix with the
services under test).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fault_servers import ServerPair

BIN = Path(sys.executable).parent
START_SECONDS = 240.0

#: Per-client timeouts of graph-rag (s): a killed dependency costs a query this long, not 60-600 s.
GRAPH_RAG_TIMEOUTS = {"triples": 15.0, "embeddings": 15.0, "graph-embeddings": 15.0,
                      "prompt": 30.0}


def script(name: str) -> str:
    """Absolute path of the venv's console script ``name``."""
    path = BIN / name
    if not path.exists():
        raise FileNotFoundError(f"console script {name} is not installed in {BIN}")
    return str(path)


@dataclass
class ServiceProcess:
    """One service OS process: start, wait until its processors log ``<id> started``, kill, restart."""

    name: str
    argv: list[str]
    log_path: Path
    ready_ids: list[str]
    env: dict[str, str]
    proc: subprocess.Popen | None = None
    starts: int = 0
    _offset: int = 0

    def start(self) -> None:
        self._offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=self.env, start_new_session=True)
        self.starts += 1

    def log_text(self, since_start: bool = True) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[self._offset if since_start else 0:].decode(errors="replace")

    def ready(self) -> bool:
        text = self.log_text()
        return all(re.search(rf" {re.escape(pid)} started \(", text) for pid in self.ready_ids)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout: float = START_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_text()[-4000:]}")
            if self.ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready after {timeout:.0f} s:\n{self.log_text()[-4000:]}")

    def kill(self) -> None:
        """``kill -9`` of the service's process group (no graceful stop, no in-flight work finished)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)

    def stop(self, timeout: float = 40.0) -> int | None:
        """Graceful stop (SIGTERM), SIGKILL after ``timeout``; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # nothing of the group may outlive the test
        except ProcessLookupError:
            pass
        return self.proc.returncode


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def group_toml(pulsar_url: str, flow: str, processors: list[tuple[str, dict, int]]) -> str:
    """A ``tg-processor-group`` config: ``processors`` is ``[(class path, params, concurrency)]``."""
    lines = ['pubsub = "pulsar"', f"pulsar_url = {_toml(pulsar_url)}", f"flow = {_toml(flow)}", ""]
    for cls, params, concurrency in processors:
        lines += ["[[processor]]", f"class = {_toml(cls)}", f"concurrency = {concurrency}"]
        if params:
            lines.append("[processor.params]")
            lines += [f"{k} = {_toml(v)}" for k, v in params.items()]
        lines.append("")
    return "\n".join(lines)


@dataclass
class FaultStack:
    """The services under test, their data (user, collection) and the LLM endpoint."""

    pair: ServerPair
    workdir: Path
    llm: Any
    flow: str = field(default_factory=lambda: f"rel{uuid.uuid4().hex[:8]}")
    user: str = field(default_factory=lambda: f"rel{uuid.uuid4().hex[:8]}")
    collection: str = "default"
    services: dict[str, ServiceProcess] = field(default_factory=dict)
    documents: list = field(default_factory=list)

    # ------------------------------------------------------------------ configuration
    def cassandra_config(self):
        from trustgraph_base.store.cassandra.connection import CassandraConfig

        return CassandraConfig(hosts=(self.pair.cassandra_host,), port=self.pair.cassandra_port)

    def backend(self, nack_delay: float = 0.5, connect_timeout: float = 10.0):
        """A Pulsar backend for this process's clients."""
        from trustgraph_base.pubsub import open_backend

        return open_backend("pulsar", url=self.pair.pulsar_url, admin_url=self.pair.admin_url, nack_delay=nack_delay,
                            connect_timeout=connect_timeout)

    async def client(self, service: str, timeout: float, owner: str):
        """A started request/response client of ``service`` on a backend of its own: ``(backend, client)``."""
        from trustgraph_base.processor.client import RequestResponseClient
        from trustgraph_base.pubsub.topics import request_queue, response_queue
        from trustgraph_flow.common.services import SERVICES

        backend = self.backend()
        s = SERVICES[service]
        client = RequestResponseClient(backend, service, request_queue(service, self.flow),
                                       response_queue(service, self.flow), s.request, s.response,
                                       timeout=timeout, owner=owner)
        await client.start()
        return backend, client

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        for key in ("PULSAR_URL", "TG_HOME", "OPENAI_BASE_URL", "OPENAI_API_KEY", "LLM_BACKEND", "TG_FLOW"):
            env.pop(key, None)
        env.update({"PULSAR_ADMIN_URL": self.pair.admin_url, "PYTHONUNBUFFERED": "1", "TG_LOG_LEVEL": "INFO",
                    "OPENAI_MODEL": "extractive"})
        return env

    def _store(self) -> dict:
        return {"store": "cassandra",
                "store_options": {"hosts": self.pair.cassandra_host, "port": self.pair.cassandra_port}}

    def _group(self, name: str, processors: list[tuple[str, dict, int]], ready: list[str]) -> ServiceProcess:
        config = self.workdir / f"{name}.toml"
        config.write_text(group_toml(self.pair.pulsar_url, self.flow, processors))
        return ServiceProcess(name, [script("tg-processor-group"), "-c", str(config)], self.workdir / f"{name}.log",
                              ready, self._env())

    def _single(self, name: str, *options: str, store: bool = True) -> ServiceProcess:
        argv = [script(name), "--pubsub", "pulsar", "--pulsar-url", self.pair.pulsar_url,
                "--pulsar-admin-url", self.pair.admin_url, "--flow", self.flow, "--concurrency", "4", *options]
        if store:
            argv += ["--store", "cassandra", "--cassandra-host", self.pair.cassandra_host,
                     "--cassandra-port", str(self.pair.cassandra_port)]
        return ServiceProcess(name, argv, self.workdir / f"{name}.log", [name], self._env())

    def cli_env(self) -> dict[str, str]:
        """The environment of a tg-* command that talks to these services."""
        env = self._env()
        env.update({"PULSAR_URL": self.pair.pulsar_url, "TG_FLOW": self.flow, "TG_LOG_LEVEL": "CRITICAL"})
        return env

    def _core(self, triples_query: bool = True) -> ServiceProcess:
        """The group process of the services no fault test kills; without triples-query when that runs apart."""
        store = self._store()
        llm = {"base_url": self.llm.base_url, "api_key": "test-key", "model": "extractive", "timeout": 30.0,
               "max_retries": 1}
        processors = [
            ("trustgraph_flow.storage.traces.service:TraceAdminService", store, 1),
            ("trustgraph_flow.query.vectors.service:GraphEmbeddingsQuery", store, 4),
            ("trustgraph_flow.query.vectors.service:DocumentEmbeddingsQuery", store, 4),
            ("trustgraph_flow.model.services:EmbeddingsService", {}, 2),
            ("trustgraph_flow.model.services:PromptService", {"llm": "openai"}, 8),
            ("trustgraph_flow.model.services:TextCompletionService", llm, 8),
        ]
        ready = ["trace-admin", "graph-embeddings-query", "document-embeddings-query", "embeddings", "prompt",
                 "text-completion"]
        if triples_query:
            processors.insert(0, ("trustgraph_flow.query.triples.service:TriplesQueryService", store, 4))
            ready.insert(0, "triples-query")
        return self._group("core", processors, ready)

    def _graph_rag(self, name: str = "graph-rag") -> ServiceProcess:
        """graph-rag alone in a group process (its per-client timeouts have no command-line option)."""
        return self._group(name, [
            ("trustgraph_flow.retrieval.graph_rag.service:GraphRagService",
             {"client_timeouts": GRAPH_RAG_TIMEOUTS}, 4),
        ], ["graph-rag"])

    def build(self) -> None:
        self.services = {
            "core": self._core(),
            "graph-rag": self._graph_rag(),
            "triples-write": self._single("triples-write"),
            "librarian": self._single("librarian"),
            # one process each: both are prompt clients (one client of a service per process, docs/deployment.md)
            "document-rag": self._single("document-rag", store=False),
            "agent-manager-react": self._single("agent-manager-react", store=False),
        }

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        self.build()
        for s in self.services.values():
            s.start()
        for s in self.services.values():
            s.wait_ready()

    def stop(self) -> list[str]:
        """Stop every service; returns problems (a service that had died, or would not stop)."""
        problems = []
        for s in reversed(list(self.services.values())):
            if s.proc is not None and s.proc.poll() is not None and s.proc.returncode not in (0, -9, -15):
                problems.append(f"{s.name} had exited with {s.proc.returncode}:\n{s.log_text()[-2000:]}")
            s.stop()
        return problems

    def replica(self, name: str, number: int = 2, store: bool = True) -> ServiceProcess:
        """One more process of the single-process service ``name`` (started and stopped by the caller): a replica
        that shares the service's queues through Pulsar's shared subscriptions."""
        process = self._single(name, store=store)
        process.name = f"{name}-{number}"
        process.log_path = self.workdir / f"{process.name}.log"
        return process

    def restart(self, name: str) -> float:
        """``kill -9`` one service and start it again; returns seconds until it was ready again."""
        s = self.services[name]
        t0 = time.monotonic()
        s.kill()
        s.start()
        s.wait_ready()
        return time.monotonic() - t0

    # ------------------------------------------------------------------ data
    async def ingest_sample_corpus(self) -> None:
        """Load the sample corpus into the stack's user and collection."""
        from trustgraph_flow.ingest.sample_corpus import sample_documents

        docs = sample_documents()
        await self.ingest(self.user, self.collection, [(d.id, d.title, d.kind, d.content) for d in docs])
        self.documents = docs

    async def ingest(self, user: str, collection: str, documents: list[tuple[str, str, str, bytes]]) -> None:
        """Load ``(id, title, kind, content)`` documents with the real ingestion processors.

        The stack's service processes are the query side only; ingestion runs in this process,
        over the same Pulsar and Cassandra, on a flow of its own.
        """
        from trustgraph_cli.connection import Connection
        from trustgraph_cli.load import load_documents
        from trustgraph_flow.embedded import INGEST, start_embedded

        # A new flow's first subscriptions create its topics (ledgers); once in CI that took over 10 s
        # on the private pair, with the shared servers and a whole test run on the same 2 cores.
        stack = await start_embedded(only=tuple(dict.fromkeys(INGEST)), llm="extractive",
                                     backend=self.backend(connect_timeout=30.0),
                                     flow=f"ingest{uuid.uuid4().hex[:8]}", store="cassandra",
                                     store_options={"config": self.cassandra_config()})
        try:
            async with Connection.attach(stack, timeout=180) as conn:
                await load_documents(conn, user, collection, documents, idle_timeout=180, show=False)
            await stack.wait_idle()
        finally:
            await stack.stop()

    def triples_store(self):
        from trustgraph_base.store.triples import open_triples_store

        return open_triples_store("cassandra", config=self.cassandra_config())


@contextmanager
def serving(stack: FaultStack) -> Iterator[FaultStack]:
    """``stack`` with the sample corpus loaded and its services started; at the end the services and the LLM
    stopped, and a failure if a service had died."""
    try:
        asyncio.run(stack.ingest_sample_corpus())
        stack.start()
        yield stack
    finally:
        problems = stack.stop()
        stack.llm.stop()
    assert not problems, "services died during the tests:\n" + "\n".join(problems)


def start_llm(latency_ms: float = 0.0):
    """The project's OpenAI-compatible server in extractive mode (the LLM double)."""
    from trustgraph_flow.model.testserver import start_server

    return start_server("extractive", latency_ms=latency_ms)


def run_async(coro):
    """Run a coroutine from synchronous fixture code."""
    return asyncio.run(coro)
