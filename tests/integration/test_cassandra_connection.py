"""The shared Cassandra connection on a real node: a full socket send buffer delays requests, never refuses them.

The driver's stock libev connection refuses every request while a send would block
(``ConnectionBusy``, surfacing as ``NoHostAvailable`` on a one-node cluster) and leaks the
stream id it reserved for it.  CI saw a librarian add of a 5 MB document fail that way.
``connection.queueing_connection_class`` queues instead; these tests hold it to that.
"""

from __future__ import annotations

import os
import threading
import uuid

import pytest

from trustgraph_base.store.cassandra.connection import CassandraConfig, connect, queueing_connection_class

pytestmark = pytest.mark.integration

PART = 256 * 1024


@pytest.fixture
def session(cassandra_service):
    """The stores' shared session."""
    return connect(CassandraConfig(hosts=(cassandra_service.host,), port=cassandra_service.port))


@pytest.fixture
def ks(cassandra_session):
    """A fresh keyspace with a table of blob parts (dropped afterwards)."""
    ks = f"conn_{uuid.uuid4().hex[:10]}"
    cassandra_session.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                              "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=120)
    cassandra_session.execute(f"CREATE TABLE {ks}.parts (k uuid, i int, d blob, PRIMARY KEY (k, i))", timeout=120)
    yield ks
    cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=300)


def _connections(session) -> list:
    return [pool._connection for pool in session._pools.values()]


def test_stores_connect_through_the_queueing_connection(session):
    expected = queueing_connection_class()
    assert expected is not None, "the driver's libev extension is expected in this environment"
    connections = _connections(session)
    assert connections and all(isinstance(c, expected) for c in connections)


def test_request_sent_while_the_send_buffer_is_full_is_delayed_not_refused(session, ks):
    """Injected fault: the connection is told its socket would block, as libev tells it under a burst."""
    insert = session.prepare(f"INSERT INTO {ks}.parts (k, i, d) VALUES (?, ?, ?)")
    key = uuid.uuid4()
    for conn in _connections(session):
        conn._socket_writable = False
    session.execute(insert, (key, 0, b"x"))
    rows = list(session.execute(f"SELECT i, d FROM {ks}.parts WHERE k = %s", (key,)))
    assert [(r.i, r.d) for r in rows] == [(0, b"x")]


def test_concurrent_bursts_of_large_writes_all_land_and_leak_no_stream_ids(session, ks):
    """Four writers, each sending 21 parts of 256 KiB sixteen at a time, as librarian adds of 5 MB do.

    With the stock connection this refused about half the writes on this machine, and left
    as many stream ids reserved for ever.
    """
    from cassandra.concurrent import execute_concurrent

    insert = session.prepare(f"INSERT INTO {ks}.parts (k, i, d) VALUES (?, ?, ?)")
    blob = os.urandom(PART)
    keys: list[uuid.UUID] = []
    failures: list[BaseException] = []

    def writer() -> None:
        for _ in range(5):
            key = uuid.uuid4()
            keys.append(key)
            outcomes = execute_concurrent(session, [(insert, (key, i, blob)) for i in range(21)], concurrency=16,
                                          raise_on_first_error=False)
            failures.extend(value for ok, value in outcomes if not ok)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    for key in keys:
        rows = list(session.execute(f"SELECT i, d FROM {ks}.parts WHERE k = %s", (key,), timeout=60))
        assert [r.i for r in rows] == list(range(21)) and all(r.d == blob for r in rows)
    assert [c.in_flight for c in _connections(session)] == [0]


# ------------------------------------------------------------------ one node and a cluster alike
def test_requests_are_routed_to_replicas_at_local_quorum_by_default(cassandra_service, monkeypatch):
    """Token-aware over DC-aware routing and LOCAL_QUORUM, unless CASSANDRA_CONSISTENCY says otherwise; on one
    node as on a cluster (tests/cluster checks the same on three nodes)."""
    from cassandra import ConsistencyLevel
    from cassandra.cluster import EXEC_PROFILE_DEFAULT
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

    monkeypatch.delenv("CASSANDRA_CONSISTENCY", raising=False)
    config = CassandraConfig(hosts=(cassandra_service.host,), port=cassandra_service.port)
    assert config.consistency == "LOCAL_QUORUM"
    profile = connect(config).cluster.profile_manager.profiles[EXEC_PROFILE_DEFAULT]
    assert profile.consistency_level == ConsistencyLevel.LOCAL_QUORUM
    policy = profile.load_balancing_policy
    assert isinstance(policy, TokenAwarePolicy) and isinstance(policy._child_policy, DCAwareRoundRobinPolicy)
    monkeypatch.setenv("CASSANDRA_CONSISTENCY", "ONE")
    assert CassandraConfig().consistency == "ONE"


def test_a_store_creates_its_keyspace_with_network_topology_and_at_most_three_replicas(cassandra_service,
                                                                                      cassandra_session, monkeypatch):
    """NetworkTopologyStrategy in every datacenter the driver knows, 3 replicas capped at the datacenter's nodes
    (one here); CASSANDRA_REPLICATION_FACTOR overrides it, and a bad value is refused with its name."""
    from trustgraph_base.schema import Triple, iri, literal
    from trustgraph_base.store.cassandra.connection import replication
    from trustgraph_base.store.cassandra.triples import CassandraTriplesStore
    from trustgraph_base.store.names import storage_name

    monkeypatch.delenv("CASSANDRA_REPLICATION_FACTOR", raising=False)
    config = CassandraConfig(hosts=(cassandra_service.host,), port=cassandra_service.port)
    assert config.replication_factor is None
    session = connect(config)
    datacenters = {h.datacenter for h in session.cluster.metadata.all_hosts()}
    assert replication(session, None) == {dc: 1 for dc in datacenters}
    assert replication(session, 3) == {dc: 3 for dc in datacenters}
    user = f"rf{uuid.uuid4().hex[:8]}"
    store = CassandraTriplesStore(config)
    ks = storage_name("tg", user)
    try:
        store.insert(user, "default", [Triple(iri("http://example.org/a"), iri("http://example.org/p"),
                                              literal("x"))])
        row = cassandra_session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                                        (ks,)).one()
        assert dict(row.replication) == {"class": "org.apache.cassandra.locator.NetworkTopologyStrategy",
                                         **{dc: "1" for dc in datacenters}}
    finally:
        store.close()
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=300)
    monkeypatch.setenv("CASSANDRA_REPLICATION_FACTOR", "2")
    assert CassandraConfig().replication_factor == 2
    monkeypatch.setenv("CASSANDRA_REPLICATION_FACTOR", "three")
    with pytest.raises(ValueError, match="CASSANDRA_REPLICATION_FACTOR"):
        CassandraConfig()
