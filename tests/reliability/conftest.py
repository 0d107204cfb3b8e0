"""Fixtures of the reliability tier: a private Pulsar + Cassandra pair and the services as OS processes.

Fault and load tests only ever talk to servers they started themselves on 127.0.0.1: the
session starts its own pair with ``scripts/servers.sh`` (free non-default ports, its own
``IT_HOME`` whose server folders link to the already fetched ones), and stops it at the end,
even when tests fail.  A watchdog process stops the pair too if this pytest process dies
without running its teardown.

When it runs: the distributed part of this tier runs with the integration tier, i.e. when
``CI=true`` / ``REQUIRE_INTEGRATION=1`` or the integration servers are named
(``PULSAR_URL`` / ``CASSANDRA_HOST``), or with ``TG_RELIABILITY=1``.  Otherwise it is skipped
(it needs JDK 17, the fetched jars and ~3 GB of memory).  Under ``CI=true`` a pair that cannot
start is a failure, never a skip.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from fault_servers import ServerPair, ServersUnavailable, missing_prerequisites
from fault_stack import FaultStack, start_llm


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _required() -> bool:
    return _truthy("CI") or _truthy("REQUIRE_INTEGRATION")


def _requested() -> bool:
    return (_required() or _truthy("TG_RELIABILITY") or bool(os.environ.get("PULSAR_URL"))
            or bool(os.environ.get("CASSANDRA_HOST")))


def _unavailable(reason: str) -> None:
    if _required():
        pytest.fail(f"the reliability tier cannot start its own Pulsar + Cassandra: {reason} "
                    "(CI=true makes this a failure; see docs/servers.md)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def server_pair(tmp_path_factory) -> ServerPair:
    """This session's own Pulsar + Cassandra on 127.0.0.1 (non-default ports), stopped at the end."""
    if not _requested():
        pytest.skip("distributed reliability tests run with the integration tier "
                    "(CI=true, PULSAR_URL/CASSANDRA_HOST set, or TG_RELIABILITY=1)")
    problem = missing_prerequisites()
    if problem:
        _unavailable(problem)
    pair = ServerPair.create(tmp_path_factory.mktemp("fault-servers"))
    pair.guard(os.getpid())
    try:
        try:
            pair.start()
        except ServersUnavailable as e:
            pytest.fail(f"could not start the private Pulsar + Cassandra pair: {e}", pytrace=False)
        yield pair
    finally:
        pair.stop()


@pytest.fixture(scope="session")
def fault_stack(server_pair, tmp_path_factory) -> FaultStack:
    """The services under test as OS processes on the private pair, with the sample corpus loaded."""
    llm = start_llm()
    stack = FaultStack(server_pair, tmp_path_factory.mktemp("fault-stack"), llm)
    try:
        asyncio.run(stack.ingest_sample_corpus())
        stack.start()
        yield stack
    finally:
        problems = stack.stop()
        llm.stop()
        print("\n[reliability] " + "; ".join(server_pair.events))
    assert not problems, "services died during the tests:\n" + "\n".join(problems)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """The fault matrix of the crash tests, and how many fuzz cases ran (per kind and in total)."""
    from fuzz_inputs import CASES
    from trace_audit import FAULT_MATRIX

    if FAULT_MATRIX:
        terminalreporter.write_sep("-", "fault matrix (client outcome x stored trace) and load")
        for line in FAULT_MATRIX:
            terminalreporter.write_line(line)
    if not CASES:
        return
    terminalreporter.write_sep("-", "fuzz cases run")
    for name, n in sorted(CASES.items()):
        terminalreporter.write_line(f"{n:6d}  {name}")
    terminalreporter.write_line(f"{sum(CASES.values()):6d}  total")
