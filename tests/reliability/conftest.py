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

import os

import pytest
from fault_servers import ServerPair, missing_prerequisites
from fault_stack import FaultStack, serving, start_llm
from private_servers import required, running, unavailable


def _requested() -> bool:
    return (required() or os.environ.get("TG_RELIABILITY", "").strip().lower() in {"1", "true", "yes", "on"}
            or bool(os.environ.get("PULSAR_URL")) or bool(os.environ.get("CASSANDRA_HOST")))


@pytest.fixture(scope="session")
def server_pair(tmp_path_factory) -> ServerPair:
    """This session's own Pulsar + Cassandra on 127.0.0.1 (non-default ports), stopped at the end."""
    if not _requested():
        pytest.skip("distributed reliability tests run with the integration tier "
                    "(CI=true, PULSAR_URL/CASSANDRA_HOST set, or TG_RELIABILITY=1)")
    problem = missing_prerequisites()
    if problem:
        unavailable("the reliability tier cannot start its own Pulsar + Cassandra", problem)
    pair = ServerPair.create(tmp_path_factory.mktemp("fault-servers"))
    with running(pair, "the private Pulsar + Cassandra pair"):
        yield pair


@pytest.fixture(scope="session")
def fault_stack(server_pair, tmp_path_factory) -> FaultStack:
    """The services under test as OS processes on the private pair, with the sample corpus loaded."""
    try:
        with serving(FaultStack(server_pair, tmp_path_factory.mktemp("fault-stack"), start_llm())) as stack:
            yield stack
    finally:
        print("\n[reliability] " + "; ".join(server_pair.events))


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
