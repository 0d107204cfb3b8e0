"""The e2e tier: the installed tg-* console scripts, run as subprocesses, on both deployments.

- **embedded**: a fresh ``TG_HOME`` (SQLite stores); the sample corpus is loaded once per
  session by ``tg-quickstart`` (a subprocess), whose output the quickstart test inspects.
- **distributed**: the services run as separate OS processes (``tg-processor-group -c
  <generated toml>`` with ``pubsub = "pulsar"`` plus three services as their own console
  scripts) against the real Pulsar and Cassandra of ``tests/conftest.py`` (layout:
  ``e2e_support.GROUPS``); a unique user
  (so Cassandra keyspaces never collide) and a unique ``--flow`` (so queues never collide)
  per session; the corpus is loaded by ``tg-quickstart`` over Pulsar.  At the end the
  services get SIGTERM and the fixture checks that no process of theirs is left; the
  user's keyspaces are dropped.

Every test takes ``deployment`` (parametrised over both) and runs commands with
``deployment.run(command, *args)``, which adds ``-U <user>`` and the environment
(``TG_HOME``, or ``PULSAR_URL`` and ``TG_FLOW``).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from e2e_support import (
    AGENT_QUESTION,
    DOC_QUESTION,
    GRAPH_QUESTION,
    GROUPS,
    SINGLE,
    CliResult,
    ServiceProcess,
    base_env,
    group_config,
    run_cli,
    script,
    wait_ready,
)

DEPLOYMENTS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("distributed", marks=pytest.mark.integration, id="distributed"),
]
SERVICE_START_SECONDS = 240.0


@dataclass
class Deployment:
    """One deployment the commands run against, with the sample corpus loaded."""

    kind: str
    user: str
    env: dict[str, str]
    workdir: Path
    quickstart: CliResult | None = None
    services: list[ServiceProcess] = field(default_factory=list)
    flow: str = "default"
    #: other user names commands ran as (their keyspaces, if any, are dropped too)
    extra_users: list[str] = field(default_factory=list)

    @property
    def distributed(self) -> bool:
        return self.kind == "distributed"

    def run(self, command: str, *args: str, user: str | None = None, env: dict[str, str] | None = None,
            timeout: float = 240.0) -> CliResult:
        """Run a tg-* command against this deployment as ``user`` (default: the session's user)."""
        argv = list(args)
        if "-U" not in argv and "--user" not in argv:
            argv = ["-U", user or self.user, *argv]
        if user and user != self.user and user not in self.extra_users:
            self.extra_users.append(user)
        return run_cli(command, *argv, env={**self.env, **(env or {})}, timeout=timeout)

    def ok(self, command: str, *args: str, **kw) -> CliResult:
        """Run and require exit 0."""
        r = self.run(command, *args, **kw)
        assert r.returncode == 0, r.explain()
        return r

    def trace_json(self, uri: str, *args: str, collection: str = "default", complete: bool = True) -> dict:
        """``tg-show-explain-trace --format json``; distributed stores are written asynchronously,
        so wait (briefly) until the trace is complete."""
        deadline = time.monotonic() + (30 if self.distributed else 0)
        while True:
            r = self.run("tg-show-explain-trace", uri, "--format", "json", "-C", collection, *args)
            if r.returncode == 0:
                trace = json.loads(r.stdout)
                if not complete or _complete(trace):
                    return trace
            if time.monotonic() >= deadline:
                assert r.returncode == 0, r.explain()
                return trace
            time.sleep(0.5)


def _complete(trace: dict) -> bool:
    if trace["type"] == "agent":
        return trace.get("conclusion") is not None and all(_complete(s) for a in trace["analyses"]
                                                           for s in a["sub_traces"])
    return trace.get("synthesis") is not None and trace["synthesis"].get("answer") is not None


def _unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def _embedded(tmp: Path) -> Deployment:
    home = tmp / "tg-home"
    d = Deployment("embedded", _unique("e2e"), base_env({"TG_HOME": str(home)}), tmp)
    d.quickstart = d.run("tg-quickstart", timeout=600)
    assert d.quickstart.returncode == 0, d.quickstart.explain()
    return d


def _start_services(d: Deployment, pulsar, cassandra) -> None:
    env = base_env({"PULSAR_ADMIN_URL": pulsar.admin_url, "TG_LOG_LEVEL": "INFO"})
    if pulsar.listener_name:
        env["PULSAR_LISTENER_NAME"] = pulsar.listener_name
    for name in GROUPS:
        config = d.workdir / f"{name}.toml"
        config.write_text(group_config(name, pulsar.url, d.flow, cassandra.host, int(cassandra.port)))
        d.services.append(ServiceProcess(name, [script("tg-processor-group"), "-c", str(config)],
                                         d.workdir / f"{name}.log", GROUPS[name]))
    for name, options in SINGLE.items():
        argv = [script(name), "--pubsub", "pulsar", "--pulsar-url", pulsar.url, "--flow", d.flow, *options]
        d.services.append(ServiceProcess(name, argv, d.workdir / f"{name}.log", [name]))
    for s in d.services:
        s.start(env)
    wait_ready(d.services, SERVICE_START_SECONDS)


def _stop_services(d: Deployment) -> list[str]:
    """Stop every service (all at once), then report any that left a process behind or failed."""
    for s in d.services:
        s.terminate()
    leftovers = []
    for s in d.services:
        left = s.stop()
        if left:
            leftovers.append(f"{s.name}: pids {left} still alive after stop")
        elif s.proc is not None and s.proc.returncode not in (0, -15):
            leftovers.append(f"{s.name}: exited with {s.proc.returncode}:\n{s.log_text()[-2000:]}")
    return leftovers


#: How long teardown waits for DROP KEYSPACE; a busy shared node can take minutes, and the
#: coordinator finishes a schema change whether or not the client still waits for it.
DROP_WAIT_SECONDS = 20.0


def _drop_keyspaces(users: list[str], cassandra) -> None:
    """Drop the session's keyspaces (own driver connection: shared sessions belong to other tests)."""
    import warnings

    from cassandra.cluster import Cluster

    from trustgraph_base.store.names import storage_name

    cluster = Cluster([cassandra.host], port=int(cassandra.port), connect_timeout=10)
    try:
        session = cluster.connect()
        done: dict[str, threading.Event] = {}
        errors: dict[str, BaseException] = {}
        for user in users:
            event = done[user] = threading.Event()
            future = session.execute_async(f"DROP KEYSPACE IF EXISTS {storage_name('tg', user)}", timeout=600)
            future.add_callbacks(lambda _rows, e=event: e.set(),
                                 lambda exc, u=user, e=event: (errors.__setitem__(u, exc), e.set()))
        deadline = time.monotonic() + DROP_WAIT_SECONDS
        for user, event in done.items():
            if not event.wait(max(0.0, deadline - time.monotonic())) or user in errors:
                # a slow drop on a busy node must not fail the tests
                warnings.warn(f"DROP KEYSPACE of e2e user {user} not confirmed within {DROP_WAIT_SECONDS:g} s "
                              f"(Cassandra completes it on its own): {errors.get(user)!r}", stacklevel=2)
    finally:
        cluster.shutdown()


@pytest.fixture(scope="session")
def embedded_deployment(tmp_path_factory) -> Deployment:
    return _embedded(tmp_path_factory.mktemp("e2e-embedded"))


@pytest.fixture(scope="session")
def distributed_deployment(request, tmp_path_factory):
    pulsar = request.getfixturevalue("pulsar_service")
    cassandra = request.getfixturevalue("cassandra_service")
    workdir = tmp_path_factory.mktemp("e2e-distributed")
    flow = _unique("e2e")
    d = Deployment("distributed", _unique("e2e"), {}, workdir, flow=flow)
    d.env = base_env({"PULSAR_URL": pulsar.url, "PULSAR_ADMIN_URL": pulsar.admin_url, "TG_FLOW": flow})
    if pulsar.listener_name:
        d.env["PULSAR_LISTENER_NAME"] = pulsar.listener_name
    try:
        _start_services(d, pulsar, cassandra)
        d.quickstart = d.run("tg-quickstart", timeout=600)
        assert d.quickstart.returncode == 0, d.quickstart.explain()
        yield d
    finally:
        problems = _stop_services(d)
        _drop_keyspaces([d.user, *d.extra_users], cassandra)
        assert not problems, "services did not stop cleanly:\n" + "\n".join(problems)


@pytest.fixture(scope="session", params=DEPLOYMENTS)
def deployment(request) -> Deployment:
    """The embedded or the distributed deployment, the sample corpus loaded."""
    return request.getfixturevalue(f"{request.param}_deployment")


@dataclass
class Asked:
    """One GraphRAG, one DocumentRAG and one agent question, asked with ``-x`` on a deployment."""

    deployment: Deployment
    graph_rag: CliResult
    document_rag: CliResult
    agent: CliResult


@pytest.fixture(scope="session")
def asked(deployment) -> Asked:
    """The three questions, asked once per deployment; several tests read their output and traces."""
    return Asked(deployment,
                 deployment.ok("tg-invoke-graph-rag", "-x", "-q", GRAPH_QUESTION),
                 deployment.ok("tg-invoke-document-rag", "-x", "-q", DOC_QUESTION),
                 deployment.ok("tg-invoke-agent", "-x", "-v", "-q", AGENT_QUESTION))
