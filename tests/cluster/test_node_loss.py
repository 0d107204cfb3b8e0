"""The cluster tier's short form: three Cassandra nodes, two replicas of the query and trace services, one node
killed with ``-9`` under a GraphRAG and ingestion load and brought back.

With replication factor 3 and ``LOCAL_QUORUM``, two of three replicas answer every read and
write, so losing one node must cost no query and no data: every query sent while the node is
down is answered, every answered query's stored trace is complete, SHACL-valid and equal to what
its client was streamed, the ingestion that ran through the outage stores exactly what the same
documents stored before it, and no triple is duplicated.  The audit reads at consistency ``ALL``
after the node is back and every hint the others kept for it is replayed, so each replica must
hold the data (docs/guarantees.md, "Replicas and node loss").
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from cluster_load import (
    CLIENT_TIMEOUT,
    audit_at_all,
    documents_at_all,
    graph_rag_client,
    keep_asking,
    outcomes,
    quads_at_all,
    window,
)
from trace_audit import FAULT_MATRIX, QueryStream

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

#: Seconds the node stays down before it is relaunched (it then takes a while to rejoin, queries going on).
DOWN_SECONDS = 20.0


def test_the_driver_knows_every_node_and_routes_to_replicas_at_local_quorum(cluster_stack):
    """The stores' session: every node a contact point and up, token-aware over DC-aware routing,
    LOCAL_QUORUM, and the user's keyspaces replicated three times in the cluster's datacenter."""
    from cassandra import ConsistencyLevel
    from cassandra.cluster import EXEC_PROFILE_DEFAULT
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

    from trustgraph_base.store.cassandra.connection import connect
    from trustgraph_base.store.names import storage_name

    session = connect(cluster_stack.cassandra_config())
    hosts = session.cluster.metadata.all_hosts()
    assert sorted(h.address for h in hosts) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert all(h.is_up for h in hosts)
    assert {(h.datacenter, h.rack) for h in hosts} == {("dc1", "rack1"), ("dc1", "rack2"), ("dc1", "rack3")}
    profile = session.cluster.profile_manager.profiles[EXEC_PROFILE_DEFAULT]
    assert profile.consistency_level == ConsistencyLevel.LOCAL_QUORUM
    policy = profile.load_balancing_policy
    assert isinstance(policy, TokenAwarePolicy) and isinstance(policy._child_policy, DCAwareRoundRobinPolicy)
    assert policy._child_policy.local_dc == "dc1"
    ks = storage_name("tg", cluster_stack.user)  # triples, vectors and librarian of the user
    row = session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (ks,)).one()
    assert row is not None, f"keyspace {ks} was not created"
    assert dict(row.replication) == {"class": "org.apache.cassandra.locator.NetworkTopologyStrategy",
                                     "dc1": "3"}, row.replication


@pytest.mark.parametrize("victim", [3, pytest.param(1, marks=pytest.mark.cluster_full, id="the-seed")])
async def test_one_node_killed_under_load_costs_no_query_and_no_data(cluster_stack, victim):
    """Node 3 in the short form; the full form kills the seed too (node 1: the driver's first contact point,
    the node every other one gossips with first)."""
    stack, cluster = cluster_stack, cluster_stack.cluster
    tag = uuid.uuid4().hex[:6]
    explain_collection, ingest_collection = f"nodeloss-{tag}", f"ingest-{tag}"
    docs = [(d.id, d.title, d.kind, d.content) for d in stack.documents]
    work_before = stack.work_by_replica()
    backend, client = await graph_rag_client(stack)
    stream = QueryStream(client, stack.user, stack.collection, explain_collection=explain_collection,
                         timeout=CLIENT_TIMEOUT)
    stop = asyncio.Event()
    try:
        warmup = await stream.until_answered(60)
        load = asyncio.create_task(keep_asking(stream, stop))
        ingestion = asyncio.create_task(stack.ingest(stack.user, ingest_collection, docs))
        await asyncio.sleep(2.0)
        launch = await asyncio.to_thread(cluster.kill, victim)
        down_at = time.monotonic()
        await asyncio.sleep(DOWN_SECONDS)
        back_in = await asyncio.to_thread(cluster.revive, victim, launch)
        up_at = time.monotonic()
        await ingestion
        await asyncio.sleep(3.0)
        stop.set()
        await load
    finally:
        stop.set()
        await client.stop()
        await backend.close()
    hints = await asyncio.to_thread(cluster.wait_hints_replayed)
    result = await audit_at_all(stack, stream.records, explain_collection)
    during = window(stream.records, down_at, up_at)
    line = (f"[cluster] node {victim} killed -9 for {up_at - down_at:.0f} s (relaunched after {DOWN_SECONDS:.0f} s, "
            f"up {back_in:.0f} s later), hints replayed {hints:.0f} s after; {len(stream.records)} queries "
            f"({outcomes(stream.records)}), {len(during)} of them while it was down; matrix: {result.summary()}")
    FAULT_MATRIX.append(line)
    print("\n" + line)

    assert warmup.outcome == "answered"
    assert during, "no query ran while the node was down"
    assert all(r.outcome == "answered" for r in stream.records), \
        [(r.index, r.outcome, r.error[:200]) for r in stream.records if r.outcome != "answered"]
    assert not result.problems, "\n".join(result.problems)
    assert not result.foreign

    # the ingestion that ran through the outage stored what the same documents stored before it
    reference, reference_rows = await asyncio.to_thread(quads_at_all, stack, stack.collection)
    loaded, loaded_rows = await asyncio.to_thread(quads_at_all, stack, ingest_collection)
    assert reference and reference_rows == len(reference)
    assert loaded_rows == len(loaded), f"{loaded_rows - len(loaded)} duplicated quads"
    assert loaded == reference, (f"{len(reference - loaded)} quads lost, {len(loaded - reference)} unexpected: "
                                 f"{sorted(reference - loaded)[:3]} {sorted(loaded - reference)[:3]}")
    assert await asyncio.to_thread(documents_at_all, stack, ingest_collection) == {d[0] for d in docs}

    # both replicas of each replicated service took part in the load
    work = stack.work_by_replica()
    idle = [name for name, n in work.items() if not n > work_before.get(name, 0)]
    assert not idle, f"replicas that handled nothing: {idle} ({work})"
