"""Shared fixtures: where the real Pulsar and Cassandra of the integration tier come from.

Order, per service (session-scoped, resolved once):

1. **External servers** named by env vars: ``PULSAR_URL`` (+ ``PULSAR_ADMIN_URL``) and
   ``CASSANDRA_HOST`` (+ ``CASSANDRA_PORT``), e.g. the ones ``scripts/servers.sh`` starts
   (``eval "$(scripts/servers.sh env)"``). They are probed briefly; a failing probe with the
   variable set is an ERROR, never a skip: the user asked for that server.
2. **Testcontainers**, when a Docker engine answers: ``apachepulsar/pulsar`` and ``cassandra``.
3. **Skip**, unless ``CI=true`` or ``REQUIRE_INTEGRATION=1``: then a missing server FAILS, so a
   CI run can never turn green with the integration tier silently skipped.

Tier-specific fixtures belong in ``tests/<tier>/conftest.py``; this file stays generic.
"""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pytest

PULSAR_IMAGE = os.environ.get("TG_TEST_PULSAR_IMAGE", "apachepulsar/pulsar:4.0.8")
CASSANDRA_IMAGE = os.environ.get("TG_TEST_CASSANDRA_IMAGE", "cassandra:5.0")
#: namespaces of the ``tg`` tenant that TrustGraph-style services use
TG_NAMESPACES = ("flow", "request", "response", "notify")
EXTERNAL_PROBE_SECONDS = 10.0
CONTAINER_START_SECONDS = 240.0

_INTEGRATION_IDS = pytest.StashKey[set]()


@dataclass(frozen=True)
class PulsarService:
    """Addresses of a reachable Pulsar broker.

    :param url: binary protocol URL, ``pulsar://host:port``
    :param admin_url: admin REST base URL, ``http://host:port``
    :param source: ``"external"`` or ``"testcontainers"``
    :param listener_name: advertised listener a client must ask for (``PULSAR_LISTENER_NAME``;
        ``"external"`` for the docker-compose broker seen from the host), else None.
        Code that makes its own ``pulsar.Client`` passes ``listener_name=`` this value.
    """

    url: str
    admin_url: str
    source: str
    listener_name: str | None = None

    def __getitem__(self, key: str) -> Any:
        """Dict-style access (``service["url"]``) for code written against a plain dict."""
        return getattr(self, key)


@dataclass(frozen=True)
class CassandraService:
    """Address of a reachable Cassandra node.

    :param host: contact point
    :param port: CQL native transport port
    :param source: ``"external"`` or ``"testcontainers"``
    """

    host: str
    port: int
    source: str

    def __getitem__(self, key: str) -> Any:
        """Dict-style access (``service["host"]``) for code written against a plain dict."""
        return getattr(self, key)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def integration_required() -> bool:
    """True when a missing server must fail the run instead of skipping (CI)."""
    return _truthy(os.environ.get("CI")) or _truthy(os.environ.get("REQUIRE_INTEGRATION"))


def _unavailable(reason: str) -> None:
    """Skip, or fail when integration tests are required."""
    if integration_required():
        pytest.fail(
            f"{reason}; CI=true / REQUIRE_INTEGRATION=1 make a missing server a failure "
            "(start them with scripts/servers.sh, see docs/servers.md)",
            pytrace=False,
        )
    pytest.skip(reason)


# ----------------------------------------------------------------------------- Pulsar

def _http(method: str, url: str, body: dict | None = None, timeout: float = 5.0) -> tuple[int, str]:
    """One HTTP request; returns (status, body). Raises OSError when unreachable."""
    data = None if body is None else json.dumps(body).encode()
    headers = {} if body is None else {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def _pulsar_health_error(service: PulsarService) -> str | None:
    """None when the admin API reports healthy and the binary port answers a lookup."""
    try:
        status, body = _http("GET", f"{service.admin_url}/admin/v2/brokers/health")
    except OSError as exc:
        return f"admin API {service.admin_url} unreachable: {exc}"
    if status != 200 or body.strip() != "ok":
        return f"admin health {service.admin_url} answered {status} {body[:200]!r}"
    import pulsar

    client = pulsar.Client(
        service.url,
        operation_timeout_seconds=5,
        connection_timeout_ms=3000,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        listener_name=service.listener_name,
    )
    try:
        client.get_topic_partitions("persistent://public/default/tg-test-probe")
    except Exception as exc:  # noqa: BLE001 - any client error means "no usable broker"
        return f"broker {service.url} does not answer a topic lookup: {exc}"
    finally:
        client.close()
    return None


def ensure_tg_namespaces(admin_url: str) -> None:
    """Create tenant ``tg`` and its namespaces if missing (idempotent; 409 means it exists).

    :param admin_url: admin REST base URL
    :raises RuntimeError: on any other answer
    """
    status, body = _http("GET", f"{admin_url}/admin/v2/clusters")
    clusters = json.loads(body) if status == 200 else ["standalone"]
    steps: list[tuple[str, dict]] = [("tenants/tg", {"allowedClusters": clusters, "adminRoles": []})]
    steps += [(f"namespaces/tg/{ns}", {}) for ns in TG_NAMESPACES]
    for path, payload in steps:
        status, body = _http("PUT", f"{admin_url}/admin/v2/{path}", payload, timeout=10)
        if status not in (200, 204, 409):
            raise RuntimeError(f"PUT {admin_url}/admin/v2/{path} -> {status} {body[:200]}")


def _default_admin_url(service_url: str) -> str:
    host = urllib.parse.urlsplit(service_url).hostname or "127.0.0.1"
    return f"http://{host}:8080"


# -------------------------------------------------------------------------- Cassandra

def _cassandra_cluster(host: str, port: int, request_timeout: float = 30.0):
    """A driver Cluster configured through an ExecutionProfile (no deprecated arguments)."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy

    profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy(), request_timeout=request_timeout)
    return Cluster([host], port=port, connect_timeout=5, execution_profiles={EXEC_PROFILE_DEFAULT: profile})


def _cassandra_error(host: str, port: int) -> str | None:
    """None when a real CQL query succeeds."""
    cluster = _cassandra_cluster(host, port, request_timeout=5)
    try:
        cluster.connect().execute("SELECT release_version FROM system.local").one()
    except Exception as exc:  # noqa: BLE001 - NoHostAvailable, OperationTimedOut, server errors: no usable node
        return f"CQL query on {host}:{port} failed: {exc}"
    finally:
        cluster.shutdown()
    return None


# ---------------------------------------------------------------------- testcontainers

@lru_cache(maxsize=1)
def docker_available() -> bool:
    """True when testcontainers is installed and a Docker engine answers within 3 s."""
    try:
        import docker
        import testcontainers.core.container  # noqa: F401 - imported only to see that it is installed
    except ImportError:
        return False
    try:
        docker.from_env(timeout=3).ping()
    except (docker.errors.DockerException, OSError):  # no socket, connection refused, no answer in time
        return False
    return True


def _wait_until(check, timeout: float, what: str) -> None:
    """Poll ``check()`` (returns an error string or None) until None or timeout."""
    deadline = time.monotonic() + timeout
    error = "never probed"
    while time.monotonic() < deadline:
        error = check()
        if error is None:
            return
        time.sleep(2)
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s: {error}")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pulsar_container() -> tuple[Any, PulsarService]:
    """A standalone broker whose binary port is the same number inside and outside.

    Clients reconnect to the *advertised* broker address after a topic lookup; with a random
    mapped port that address would be wrong, so the broker listens on a free host port P and
    advertises ``<docker host>:P``.
    """
    from testcontainers.core.container import DockerContainer

    port = _free_port()
    container = DockerContainer(PULSAR_IMAGE)
    host = container.get_docker_client().host()
    container = (
        container.with_command(
            'sh -c "bin/apply-config-from-env.py conf/standalone.conf && exec bin/pulsar standalone -nfw -nss"'
        )
        .with_env("PULSAR_MEM", "-Xms512m -Xmx1g -XX:MaxDirectMemorySize=1g")
        .with_env("PULSAR_PREFIX_brokerServicePort", str(port))
        .with_env("PULSAR_PREFIX_advertisedAddress", host)
        .with_env("PULSAR_PREFIX_brokerDeleteInactiveTopicsEnabled", "false")
        .with_bind_ports(port, port)
        .with_exposed_ports(8080)
    )
    container.start()
    try:
        service = PulsarService(
            url=f"pulsar://{host}:{port}",
            admin_url=f"http://{container.get_container_host_ip()}:{container.get_exposed_port(8080)}",
            source="testcontainers",
        )
        _wait_until(lambda: _pulsar_health_error(service), CONTAINER_START_SECONDS, "Pulsar container")
    except Exception:
        container.stop()
        raise
    return container, service


def _cassandra_container() -> tuple[Any, CassandraService]:
    from testcontainers.core.container import DockerContainer

    container = (
        DockerContainer(CASSANDRA_IMAGE)
        # both or neither: with one alone cassandra-env.sh refuses to start
        .with_env("MAX_HEAP_SIZE", "1G")
        .with_env("HEAP_NEWSIZE", "256M")
        .with_exposed_ports(9042)
    )
    container.start()
    try:
        host = container.get_container_host_ip()
        port = int(container.get_exposed_port(9042))
        _wait_until(lambda: _cassandra_error(host, port), CONTAINER_START_SECONDS, "Cassandra container")
    except Exception:
        container.stop()
        raise
    return container, CassandraService(host=host, port=port, source="testcontainers")


# ---------------------------------------------------------------------------- fixtures

def _attempt(action) -> str | None:
    """Run ``action()``; return its error as text (so pytest.fail runs outside the except)."""
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - probes and container starts raise many types; all are reported
        return str(exc) if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {exc}"
    return None


@pytest.fixture(scope="session")
def pulsar_service() -> Iterator[PulsarService]:
    """A reachable Pulsar with tenant ``tg`` and namespaces flow/request/response/notify."""
    url = os.environ.get("PULSAR_URL", "").strip()
    if url:
        service = PulsarService(
            url=url,
            admin_url=(os.environ.get("PULSAR_ADMIN_URL") or _default_admin_url(url)).rstrip("/"),
            source="external",
            listener_name=os.environ.get("PULSAR_LISTENER_NAME") or None,
        )

        def probe_and_prepare() -> None:
            _wait_until(lambda: _pulsar_health_error(service), EXTERNAL_PROBE_SECONDS, "Pulsar")
            ensure_tg_namespaces(service.admin_url)

        problem = _attempt(probe_and_prepare)
        if problem:
            pytest.fail(f"PULSAR_URL={url} is set but that server is not usable: {problem}", pytrace=False)
        yield service
        return
    if docker_available():
        started: list = []
        problem = _attempt(lambda: started.extend(_pulsar_container()))
        if problem:
            pytest.fail(f"Docker answers but the Pulsar container did not come up: {problem}", pytrace=False)
        container, service = started
        try:
            ensure_tg_namespaces(service.admin_url)
            yield service
        finally:
            container.stop()
        return
    _unavailable("no PULSAR_URL set and no Docker engine answers")


@pytest.fixture(scope="session")
def cassandra_service() -> Iterator[CassandraService]:
    """A reachable Cassandra node."""
    host = os.environ.get("CASSANDRA_HOST", "").strip()
    if host:
        raw_port = os.environ.get("CASSANDRA_PORT", "9042").strip()
        if not raw_port.isdigit():
            pytest.fail(f"CASSANDRA_PORT={raw_port!r} is not a port number", pytrace=False)
        service = CassandraService(host=host, port=int(raw_port), source="external")
        problem = _attempt(
            lambda: _wait_until(lambda: _cassandra_error(service.host, service.port), EXTERNAL_PROBE_SECONDS,
                                "Cassandra")
        )
        if problem:
            pytest.fail(f"CASSANDRA_HOST={host} is set but that server is not usable: {problem}", pytrace=False)
        yield service
        return
    if docker_available():
        started: list = []
        problem = _attempt(lambda: started.extend(_cassandra_container()))
        if problem:
            pytest.fail(f"Docker answers but the Cassandra container did not come up: {problem}", pytrace=False)
        container, service = started
        try:
            yield service
        finally:
            container.stop()
        return
    _unavailable("no CASSANDRA_HOST set and no Docker engine answers")


@pytest.fixture(scope="session")
def pulsar_client(pulsar_service: PulsarService) -> Iterator[Any]:
    """One ``pulsar.Client`` for the session (each connect costs 0.1-1 s), quiet logger."""
    import pulsar

    client = pulsar.Client(
        pulsar_service.url,
        operation_timeout_seconds=30,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
        listener_name=pulsar_service.listener_name,
    )
    yield client
    client.close()


@pytest.fixture(scope="session")
def cassandra_session(cassandra_service: CassandraService) -> Iterator[Any]:
    """One driver ``Session`` for the session; tests create and drop their own keyspaces."""
    cluster = _cassandra_cluster(cassandra_service.host, cassandra_service.port)
    session = cluster.connect()
    yield session
    cluster.shutdown()


@pytest.fixture
def unique_name() -> str:
    """A fresh suffix for topic, subscription and keyspace names (lowercase, starts with a letter)."""
    return "u" + uuid.uuid4().hex[:12]


# ------------------------------------------------------------------------------- hooks

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Remember which selected tests are integration tests (after -m/-k deselection)."""
    config.stash[_INTEGRATION_IDS] = {
        item.nodeid for item in items if item.get_closest_marker("integration") is not None
    }


def _integration_outcomes(terminalreporter, ids: set[str]) -> dict[str, int]:
    """Count each integration test once: failed/error beats skipped beats passed."""
    worst: dict[str, str] = {}
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    for key, outcome in (("passed", "passed"), ("skipped", "skipped"), ("failed", "failed"),
                         ("error", "failed"), ("xfailed", "skipped"), ("xpassed", "passed")):
        for report in terminalreporter.stats.get(key, []):
            nodeid = getattr(report, "nodeid", None)
            if nodeid in ids and rank[outcome] >= rank.get(worst.get(nodeid, "passed"), 0):
                worst[nodeid] = outcome
    counts = {"passed": 0, "skipped": 0, "failed": 0}
    for outcome in worst.values():
        counts[outcome] += 1
    return counts


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """In CI, say how many integration tests really ran against real servers."""
    if not integration_required():
        return
    ids = config.stash.get(_INTEGRATION_IDS, set())
    counts = _integration_outcomes(terminalreporter, ids)
    where = ", ".join(
        f"{name}={os.environ[name]}"
        for name in ("PULSAR_URL", "PULSAR_ADMIN_URL", "CASSANDRA_HOST", "CASSANDRA_PORT")
        if os.environ.get(name)
    ) or "no server env vars"
    terminalreporter.write_sep("-", "integration tier (CI)")
    terminalreporter.write_line(
        f"integration: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped "
        f"(of {len(ids)} selected; {where})"
    )
    if ids and counts["passed"] == 0:
        terminalreporter.write_line("integration: NONE passed - the run fails (CI=true)", red=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In CI, selected integration tests that all skipped make the run fail."""
    if not integration_required() or int(exitstatus) != 0:
        return
    ids = session.config.stash.get(_INTEGRATION_IDS, set())
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if ids and reporter is not None and _integration_outcomes(reporter, ids)["passed"] == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def chromium() -> str:
    """The system Chromium's path for browser tests (tests/service/browser.py); missing: skip, a failure in CI."""
    from browser import CHROMIUM, chromium_missing

    reason = chromium_missing()
    if reason:
        _unavailable(reason)
    return CHROMIUM
