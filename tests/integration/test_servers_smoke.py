"""Smoke tests: the real Pulsar and Cassandra answer from Python the way the services need.

Pulsar: message properties survive a round trip on the project's persistent (tg/flow) and
non-persistent (tg/request) namespaces, and a shared subscription hands each message to exactly
one of two consumers (how processors scale out). Cassandra: keyspace/table lifecycle and an SAI
vector index answering an ANN query (the distributed vector store relies on it).
Every test uses names of its own and removes what it created: the servers are shared.
"""
from __future__ import annotations

import json
import urllib.request

import pytest

pytestmark = pytest.mark.integration

RECEIVE_TIMEOUT_MS = 10_000


def _delete_topic(admin_url: str, topic: str) -> None:
    """Remove a persistent test topic (force: closes producers/consumers still attached)."""
    path = topic.replace("persistent://", "persistent/")
    request = urllib.request.Request(f"{admin_url}/admin/v2/{path}?force=true", method="DELETE")
    urllib.request.urlopen(request, timeout=10).close()


def _tenant_namespaces(admin_url: str) -> list[str]:
    with urllib.request.urlopen(f"{admin_url}/admin/v2/namespaces/tg", timeout=10) as response:
        return json.loads(response.read())


# ------------------------------------------------------------------------------ Pulsar

def test_tg_tenant_has_the_service_namespaces(pulsar_service):
    namespaces = set(_tenant_namespaces(pulsar_service.admin_url))
    assert {"tg/flow", "tg/request", "tg/response", "tg/notify"} <= namespaces


@pytest.mark.parametrize(
    "topic_template",
    ["persistent://tg/flow/smoke-{}", "non-persistent://tg/request/smoke-{}"],
    ids=["persistent-flow", "non-persistent-request"],
)
def test_properties_round_trip(pulsar_client, pulsar_service, unique_name, topic_template):
    import pulsar

    topic = topic_template.format(unique_name)
    # subscribe first: a non-persistent topic drops messages nobody is subscribed to
    consumer = pulsar_client.subscribe(
        topic, f"smoke-{unique_name}", consumer_type=pulsar.ConsumerType.Exclusive,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    producer = pulsar_client.create_producer(topic)
    try:
        sent = [
            (f"payload-{i}-é".encode(), {"id": f"{unique_name}-{i}", "user": "alice", "collection": "default"})
            for i in range(3)
        ]
        for payload, properties in sent:
            producer.send(payload, properties=properties)
        received = []
        for _ in sent:
            message = consumer.receive(timeout_millis=RECEIVE_TIMEOUT_MS)
            consumer.acknowledge(message)
            received.append((message.data(), message.properties(), message.topic_name()))
        assert [(data, props) for data, props, _ in received] == sent
        assert all(name == topic for _, _, name in received)
    finally:
        producer.close()
        consumer.unsubscribe()
        consumer.close()
        if topic.startswith("persistent://"):
            _delete_topic(pulsar_service.admin_url, topic)


def test_shared_subscription_delivers_each_message_once(pulsar_client, pulsar_service, unique_name):
    import pulsar

    topic = f"persistent://tg/flow/smoke-shared-{unique_name}"
    subscription = f"workers-{unique_name}"
    consumers = [
        pulsar_client.subscribe(
            topic, subscription, consumer_type=pulsar.ConsumerType.Shared,
            consumer_name=f"worker-{i}", receiver_queue_size=1,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        for i in range(2)
    ]
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    total = 20
    try:
        for i in range(total):
            producer.send(str(i).encode(), properties={"seq": str(i)})
        seen: dict[int, list[str]] = {0: [], 1: []}
        # alternate between the consumers until every message has been taken by one of them
        idle_rounds = 0
        while sum(len(v) for v in seen.values()) < total and idle_rounds < 10:
            progressed = False
            for index, consumer in enumerate(consumers):
                try:
                    message = consumer.receive(timeout_millis=500)
                except pulsar.Timeout:
                    continue
                consumer.acknowledge(message)
                seen[index].append(message.properties()["seq"])
                progressed = True
            idle_rounds = 0 if progressed else idle_rounds + 1
        delivered = seen[0] + seen[1]
        assert sorted(delivered, key=int) == [str(i) for i in range(total)]  # all, none twice
        assert seen[0] and seen[1], f"one consumer got nothing: {seen}"
        for consumer in consumers:  # and nothing is left to be redelivered
            with pytest.raises(pulsar.Timeout):
                consumer.receive(timeout_millis=300)
    finally:
        producer.close()
        for consumer in consumers:
            consumer.close()
        _delete_topic(pulsar_service.admin_url, topic)


# --------------------------------------------------------------------------- Cassandra

@pytest.fixture
def keyspace(cassandra_session, unique_name):
    """A keyspace of this test only, dropped afterwards (RF 1: a single node)."""
    name = f"it_smoke_{unique_name}"
    cassandra_session.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    )
    yield name
    cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {name}")


def test_keyspace_table_write_read_drop(cassandra_session, keyspace):
    session = cassandra_session
    session.execute(
        f"CREATE TABLE {keyspace}.triples (collection text, s text, p text, o text, "
        "PRIMARY KEY ((collection), s, p, o))"
    )
    insert = session.prepare(f"INSERT INTO {keyspace}.triples (collection, s, p, o) VALUES (?, ?, ?, ?)")
    rows = [("c1", "urn:a", "urn:p", "urn:b"), ("c1", "urn:a", "urn:p", "«x»"), ("c2", "urn:z", "urn:p", "urn:y")]
    for row in rows:
        session.execute(insert, row)

    got = session.execute(f"SELECT s, p, o FROM {keyspace}.triples WHERE collection = %s", ("c1",))
    assert sorted(tuple(r) for r in got) == [("urn:a", "urn:p", "urn:b"), ("urn:a", "urn:p", "«x»")]

    # dropping the keyspace drops its table with it (one schema change instead of two: drops are slow)
    session.execute(f"DROP KEYSPACE {keyspace}")
    left = session.execute(
        "SELECT keyspace_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,)
    )
    assert list(left) == []
    keyspaces = session.execute("SELECT keyspace_name FROM system_schema.keyspaces")
    assert keyspace not in {row.keyspace_name for row in keyspaces}


def test_sai_vector_index_answers_ann_query(cassandra_session, keyspace):
    session = cassandra_session
    session.execute(f"CREATE TABLE {keyspace}.chunks (id text PRIMARY KEY, emb vector<float, 3>)")
    session.execute(
        f"CREATE INDEX chunks_emb ON {keyspace}.chunks (emb) USING 'sai' "
        "WITH OPTIONS = {'similarity_function': 'cosine'}"
    )
    insert = session.prepare(f"INSERT INTO {keyspace}.chunks (id, emb) VALUES (?, ?)")
    vectors = {"east": [1.0, 0.0, 0.0], "north": [0.0, 1.0, 0.0], "up": [0.0, 0.0, 1.0], "mostly-east": [0.9, 0.1, 0.0]}
    for name, vector in vectors.items():
        session.execute(insert, (name, vector))

    query = session.prepare(
        f"SELECT id, similarity_cosine(emb, ?) AS score FROM {keyspace}.chunks ORDER BY emb ANN OF ? LIMIT 2"
    )
    probe = [1.0, 0.05, 0.0]
    result = [(row.id, row.score) for row in session.execute(query, (probe, probe))]
    assert [name for name, _ in result] == ["east", "mostly-east"]
    assert result[0][1] >= result[1][1] > 0.9


# ------------------------------------------------------------------------------ scripts/servers.sh

def test_servers_sh_wait_runs_the_python_probes_without_being_told_which_python(pulsar_service):
    """``servers.sh wait`` finds the checkout's venv for its produce/consume probe (README runs it without PYTHON)."""
    import os
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "servers.sh"
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    if subprocess.run(["bash", str(script), "status", "pulsar"], env=env, capture_output=True).returncode != 0:
        pytest.skip("this Pulsar was not started by scripts/servers.sh")
    r = subprocess.run(["bash", str(script), "wait", "pulsar"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "skipped" not in r.stderr and "pulsar ready" in r.stderr, r.stderr
