"""Fixtures of the cluster tier: a private three-node Cassandra cluster and the services, with replicas, on it.

The tier runs on its own, not with the README test command: ``TG_CLUSTER=short`` runs its short
form (the cluster, one node killed under load, the audit; what ``.ci/run`` runs),
``TG_CLUSTER=full`` adds the tests marked ``cluster_full`` (a replica killed mid-load, two nodes
lost).  Without ``TG_CLUSTER`` its tests are deselected, so ``pytest`` alone never starts three
more JVMs.  It needs the integration tier's Pulsar (``PULSAR_URL``, ``PULSAR_ADMIN_URL``; the
services use a flow and a user of their own) and the fetched Cassandra jars; the cluster itself
is this session's own, on free ports, stopped at the end even when tests fail (a watchdog stops it
if this process dies).  Under ``CI=true`` anything missing is a failure, never a skip.

    TG_CLUSTER=short CI=true .venv/bin/python -m pytest tests/cluster
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from private_servers import OptInTier, running, unavailable

# the reliability tier's stack and audit (fault_stack, trace_audit), imported by this tier's modules
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))

HERE = Path(__file__).resolve().parent
#: Heap of each node: three fit beside the shared servers and a test run on the 24 GiB machine.
NODE_HEAP = os.environ.get("TG_CLUSTER_HEAP", "1g")


TIER = OptInTier("TG_CLUSTER", "cluster", "the cluster tier", HERE)


def tier() -> str:
    """``short``, ``full`` or ``""`` (the tier does not run)."""
    return TIER.form()


def pytest_configure(config) -> None:
    TIER.configure(config)


def pytest_collection_modifyitems(config, items) -> None:
    TIER.select(config, items)


def _unavailable(reason: str) -> None:
    unavailable("the cluster tier cannot run", reason)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """This session's own three-node Cassandra cluster on 127.0.0.1-3, stopped at the end."""
    from cluster_servers import TestCluster, missing_prerequisites

    problem = missing_prerequisites()
    if problem:
        _unavailable(problem)
    c = TestCluster.create(tmp_path_factory.mktemp("cassandra-cluster"), heap=NODE_HEAP)
    try:
        with running(c, "the Cassandra cluster"):
            yield c
    finally:
        print("\n[cluster] " + "; ".join(c.events))


@pytest.fixture(scope="session")
def cluster_stack(cluster, tmp_path_factory):
    """The services on the cluster, two replicas each of graph-rag, triples-write and triples-query;
    the sample corpus loaded."""
    from cluster_stack import ClusterServers, ClusterStack
    from fault_stack import serving, start_llm

    url, admin = os.environ.get("PULSAR_URL"), os.environ.get("PULSAR_ADMIN_URL")
    if not url or not admin:
        _unavailable("the cluster tier needs the integration tier's Pulsar: set PULSAR_URL and PULSAR_ADMIN_URL "
                     "(eval \"$(scripts/servers.sh env)\")")
    servers = ClusterServers(url, admin, cluster)
    with serving(ClusterStack(servers, tmp_path_factory.mktemp("cluster-stack"), start_llm())) as stack:
        yield stack
