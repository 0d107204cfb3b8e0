"""Conformance suite of the vector indexes: the same tests on SQLite (+ usearch) and on real Cassandra 5 SAI.

The ``sqlite`` parameter runs everywhere (marked ``service``: real SQLite files, no server);
the ``cassandra`` parameter is marked ``integration`` and needs ``CASSANDRA_HOST``.  Every
test uses fresh user names; their Cassandra keyspaces are dropped afterwards.  Vector counts
stay small because Cassandra builds its ANN graph on every write.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from trustgraph_base.store.errors import InvalidQuery
from trustgraph_base.store.names import storage_name, user_file
from trustgraph_base.store.vectors import IndexInfo, ModelMismatch, VectorItem, open_vector_index

BACKENDS = [
    pytest.param("sqlite", marks=pytest.mark.service, id="sqlite"),
    pytest.param("cassandra", marks=pytest.mark.integration, id="cassandra"),
]
MODEL = "all-MiniLM-L6-v2"


class Harness:
    """Opens indexes of one backend and hands out fresh user names."""

    def __init__(self, backend: str, options: dict):
        self.backend = backend
        self.options = options
        self.users: list[str] = []
        self.opened = []

    def open(self, kind: str = "graph"):
        index = open_vector_index(self.backend, kind=kind, **self.options)
        self.opened.append(index)
        return index

    def user(self) -> str:
        name = f"vec-{uuid.uuid4().hex[:10]}"
        self.users.append(name)
        return name


@pytest.fixture(params=BACKENDS)
def vec(request, tmp_path):
    """A :class:`Harness` of the parametrised backend."""
    if request.param == "sqlite":
        harness = Harness("sqlite", {"home": tmp_path})
        yield harness
        for index in harness.opened:
            index.close()
        return
    service = request.getfixturevalue("cassandra_service")
    session = request.getfixturevalue("cassandra_session")
    from trustgraph_base.store.cassandra.connection import CassandraConfig

    harness = Harness("cassandra", {"config": CassandraConfig(hosts=(service.host,), port=service.port)})
    yield harness
    for index in harness.opened:
        index.close()
    for user in harness.users:
        session.execute(f"DROP KEYSPACE IF EXISTS {storage_name('tg', user)}", timeout=300)


def unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def items(vectors: np.ndarray, prefix: str = "urn:e:", document_of=lambda i: f"doc{i % 4}") -> list[VectorItem]:
    return [VectorItem(f"{prefix}{i}", v.tolist(), label=f"label {i}", document_id=document_of(i))
            for i, v in enumerate(vectors)]


# ----------------------------------------------------------------------------- search

def test_nearest_vector_is_found_with_exact_cosine_scores(vec):
    index, user = vec.open(), vec.user()
    data = unit_rows(300, 32, seed=1)
    assert index.upsert(user, "default", MODEL, items(data)) == 300
    queries = unit_rows(15, 32, seed=2)
    for q in queries:
        exact = data @ q
        best = np.argsort(-exact)[:5]
        hits = index.search(user, "default", MODEL, q.tolist(), limit=5)
        assert hits[0].id == f"urn:e:{best[0]}"  # the nearest vector is found
        assert len({h.id for h in hits} & {f"urn:e:{i}" for i in best}) >= 4
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        for h in hits:
            assert h.score == pytest.approx(exact[int(h.id.rsplit(":", 1)[1])], abs=1e-4)
    top = index.search(user, "default", MODEL, data[42].tolist(), limit=1)[0]
    assert (top.id, top.label, top.document_id) == ("urn:e:42", "label 42", "doc2")
    assert top.score == pytest.approx(1.0, abs=1e-5)


def test_search_of_unwritten_index_is_empty(vec):
    index, user = vec.open(), vec.user()
    assert index.search(user, "default", MODEL, [1.0, 0.0, 0.0]) == []
    assert index.index_info(user, "default") is None
    assert index.delete_ids(user, "default", ["x"]) == 0
    assert index.delete_document(user, "default", "d") == 0
    assert index.delete_collection(user, "default") == 0


def test_upsert_is_idempotent_by_id(vec):
    index, user = vec.open(), vec.user()
    a, b = [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]
    index.upsert(user, "c", MODEL, [VectorItem("urn:x", a, label="old", document_id="d1"),
                                    VectorItem("urn:y", [0.0, 0.0, 1.0, 0.0])])
    index.upsert(user, "c", MODEL, [VectorItem("urn:x", a, label="old", document_id="d1")])
    assert index.index_info(user, "c") == IndexInfo(MODEL, 4, 2)
    index.upsert(user, "c", MODEL, [VectorItem("urn:x", b, label="new", document_id="d2")])
    assert index.index_info(user, "c").count == 2
    hit = index.search(user, "c", MODEL, b, limit=1)[0]
    assert (hit.id, hit.label, hit.document_id) == ("urn:x", "new", "d2")
    assert hit.score == pytest.approx(1.0, abs=1e-5)
    assert all(h.id != "urn:x" or h.score < 0.5 for h in index.search(user, "c", MODEL, a, limit=2))
    # a repeated id inside one batch: the last one wins
    assert index.upsert(user, "c", MODEL, [VectorItem("urn:z", a, label="first"),
                                           VectorItem("urn:z", a, label="second")]) == 1
    assert index.search(user, "c", MODEL, a, limit=1)[0].label == "second"


# ----------------------------------------------------------------------------- isolation

def test_users_collections_and_kinds_are_isolated(vec):
    graph, docs = vec.open("graph"), vec.open("document")
    alice, bob = vec.user(), vec.user()
    data = unit_rows(4, 8, seed=3)
    graph.upsert(alice, "c1", MODEL, [VectorItem("urn:same", data[0].tolist(), label="alice c1")])
    graph.upsert(alice, "c2", MODEL, [VectorItem("urn:same", data[1].tolist(), label="alice c2")])
    graph.upsert(bob, "c1", "other-model", [VectorItem("urn:same", data[2].tolist(), label="bob c1")])
    docs.upsert(alice, "c1", "doc-model", [VectorItem("urn:chunk", data[3].tolist(), label="alice chunk")])

    assert [h.label for h in graph.search(alice, "c1", MODEL, data[1].tolist(), limit=5)] == ["alice c1"]
    assert [h.label for h in graph.search(alice, "c2", MODEL, data[0].tolist(), limit=5)] == ["alice c2"]
    assert [h.label for h in graph.search(bob, "c1", "other-model", data[0].tolist(), limit=5)] == ["bob c1"]
    assert graph.search(bob, "c2", MODEL, data[0].tolist()) == []
    assert [h.label for h in docs.search(alice, "c1", "doc-model", data[0].tolist(), limit=5)] == ["alice chunk"]
    assert docs.index_info(alice, "c2") is None
    assert graph.index_info(alice, "c1") == IndexInfo(MODEL, 8, 1)
    assert docs.index_info(alice, "c1") == IndexInfo("doc-model", 8, 1)

    assert graph.delete_collection(alice, "c1") == 1
    assert [h.label for h in graph.search(alice, "c2", MODEL, data[0].tolist())] == ["alice c2"]
    assert [h.label for h in graph.search(bob, "c1", "other-model", data[0].tolist())] == ["bob c1"]
    assert docs.index_info(alice, "c1").count == 1


# ----------------------------------------------------------------------------- models

def test_model_mismatch_is_refused_until_the_collection_is_deleted(vec):
    index, user = vec.open(), vec.user()
    v384 = unit_rows(3, 384, seed=4)
    index.upsert(user, "c", MODEL, items(v384))
    with pytest.raises(ModelMismatch, match="built with model 'all-MiniLM-L6-v2'.*'bge-small'"):
        index.upsert(user, "c", "bge-small", items(v384))
    with pytest.raises(ModelMismatch, match="384 dimensions.*768 dimensions"):
        index.upsert(user, "c", MODEL, items(unit_rows(2, 768, seed=5)))
    with pytest.raises(ModelMismatch):
        index.search(user, "c", "bge-small", v384[0].tolist())
    with pytest.raises(ModelMismatch, match="768"):
        index.search(user, "c", MODEL, unit_rows(1, 768, seed=6)[0].tolist())
    assert issubclass(ModelMismatch, InvalidQuery)
    assert index.index_info(user, "c") == IndexInfo(MODEL, 384, 3)  # nothing was mixed in

    assert index.delete_collection(user, "c") == 3
    v768 = unit_rows(2, 768, seed=7)
    assert index.upsert(user, "c", "bge-base", items(v768)) == 2
    assert index.index_info(user, "c") == IndexInfo("bge-base", 768, 2)
    assert index.search(user, "c", "bge-base", v768[1].tolist(), limit=1)[0].id == "urn:e:1"


# ----------------------------------------------------------------------------- deletes

def test_delete_document_removes_only_its_vectors(vec):
    index, user = vec.open("document"), vec.user()
    data = unit_rows(40, 16, seed=8)
    index.upsert(user, "c", MODEL, items(data, prefix="urn:chunk:"))
    assert index.delete_document(user, "c", "doc1") == 10
    assert index.delete_document(user, "c", "doc1") == 0
    assert index.index_info(user, "c").count == 30
    for i in (1, 5, 9):
        hits = index.search(user, "c", MODEL, data[i].tolist(), limit=40)
        assert all(h.document_id != "doc1" for h in hits)
        assert len(hits) == 30
    assert index.search(user, "c", MODEL, data[2].tolist(), limit=1)[0].id == "urn:chunk:2"


def test_delete_ids_counts_existing_ones(vec):
    index, user = vec.open(), vec.user()
    data = unit_rows(10, 8, seed=9)
    index.upsert(user, "c", MODEL, items(data))
    assert index.delete_ids(user, "c", ["urn:e:1", "urn:e:2", "urn:e:2", "urn:missing"]) == 2
    assert index.index_info(user, "c").count == 8
    assert index.search(user, "c", MODEL, data[1].tolist(), limit=1)[0].id != "urn:e:1"
    assert index.delete_ids(user, "c", []) == 0


def test_existing_ids_names_the_ids_that_have_a_vector(vec):
    index, user = vec.open(), vec.user()
    assert index.existing_ids(user, "c", ["urn:e:1"]) == set()  # nothing written yet
    index.upsert(user, "c", MODEL, items(unit_rows(150, 8, seed=11)))
    asked = [f"urn:e:{i}" for i in range(0, 300, 2)] + ["urn:e:4"]  # more than one look-up's worth, a repeat
    assert index.existing_ids(user, "c", asked) == {f"urn:e:{i}" for i in range(0, 150, 2)}
    assert index.existing_ids(user, "other", ["urn:e:2"]) == set()
    index.delete_ids(user, "c", ["urn:e:2"])
    assert index.existing_ids(user, "c", ["urn:e:2", "urn:e:4"]) == {"urn:e:4"}
    assert index.existing_ids(user, "c", []) == set()


def test_each_vector_keeps_the_source_mark_its_writer_gave(vec):
    """A writer in another process reads what a stored vector was made from (empty: not given)."""
    index, user = vec.open(), vec.user()
    assert index.stored_sources(user, "c", ["urn:e:0"]) == {}  # nothing written yet
    data = unit_rows(3, 8, seed=12)
    index.upsert(user, "c", MODEL, [VectorItem("urn:e:0", data[0], source=b"\x00mark-0"),
                                    VectorItem("urn:e:1", data[1], source=b"m" * 64),
                                    VectorItem("urn:e:2", data[2])])
    assert index.stored_sources(user, "c", ["urn:e:0", "urn:e:1", "urn:e:2", "urn:e:3", "urn:e:0"]) == {
        "urn:e:0": b"\x00mark-0", "urn:e:1": b"m" * 64, "urn:e:2": b""}
    index.upsert(user, "c", MODEL, [VectorItem("urn:e:0", data[1], source=b"another")])
    assert index.stored_sources(user, "c", "urn:e:0") == {"urn:e:0": b"another"}
    assert index.stored_sources(user, "other", ["urn:e:0"]) == {}
    index.delete_ids(user, "c", ["urn:e:1"])
    assert index.stored_sources(user, "c", ["urn:e:1", "urn:e:2"]) == {"urn:e:2": b""}
    for bad, message in (("text", "source must be bytes"), (b"x" * 65, "at most 64")):
        with pytest.raises(InvalidQuery, match=message):
            index.upsert(user, "c", MODEL, [VectorItem("urn:e:5", data[0], source=bad)])  # type: ignore[arg-type]
    assert index.stored_sources(user, "c", ["urn:e:5"]) == {}


def test_an_index_made_before_vectors_kept_their_source_gains_the_column(vec, request):
    """A file or table written by an earlier version (no ``source`` column) gets the column on first use: its
    vectors read as having no mark, are still found, and new writes keep theirs."""
    index, user = vec.open(), vec.user()
    data = unit_rows(2, 8, seed=13)
    index.upsert(user, "c", MODEL, [VectorItem("urn:e:0", data[0], source=b"old")])
    index.close()
    if vec.backend == "sqlite":
        conn = sqlite3.connect(user_file("vectors", user, home=vec.options["home"]))
        try:
            conn.execute("ALTER TABLE vectors DROP COLUMN source")
        finally:
            conn.close()
    else:
        session = request.getfixturevalue("cassandra_session")
        session.execute(f"ALTER TABLE {storage_name('tg', user)}.graph_embeddings_8 DROP source", timeout=120)
    reopened = vec.open()
    assert reopened.stored_sources(user, "c", ["urn:e:0"]) == {"urn:e:0": b""}
    assert reopened.search(user, "c", MODEL, data[0].tolist(), limit=1)[0].id == "urn:e:0"
    reopened.upsert(user, "c", MODEL, [VectorItem("urn:e:1", data[1], source=b"new")])
    assert reopened.stored_sources(user, "c", ["urn:e:0", "urn:e:1"]) == {"urn:e:0": b"", "urn:e:1": b"new"}


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("bad_vector, message", [
    ([0.0, 0.0, 0.0], "all zeros"),
    ([1.0, float("nan"), 0.0], "NaN"),
    ([1.0, float("inf"), 0.0], "NaN or infinite"),
    ([[1.0, 0.0], [0.0, 1.0]], "flat"),
    ("abc", "sequence of numbers"),
    ([], "1 to"),
])
def test_bad_vectors_are_refused(vec, bad_vector, message):
    index, user = vec.open(), vec.user()
    with pytest.raises(InvalidQuery, match=message):
        index.upsert(user, "c", MODEL, [VectorItem("urn:x", bad_vector)])
    with pytest.raises(InvalidQuery, match=message):
        index.search(user, "c", MODEL, bad_vector)
    assert index.index_info(user, "c") is None


def test_bad_requests_are_refused(vec):
    index, user = vec.open(), vec.user()
    with pytest.raises(InvalidQuery, match="one dimension"):
        index.upsert(user, "c", MODEL, [VectorItem("a", [1.0, 0.0]), VectorItem("b", [1.0, 0.0, 0.0])])
    for bad_collection in ("", "a b", "x" * 65, "c'; DROP TABLE x; --"):
        with pytest.raises(InvalidQuery, match="collection"):
            index.upsert(user, bad_collection, MODEL, [VectorItem("a", [1.0])])
    with pytest.raises(InvalidQuery, match="user"):
        index.search("../../etc", "c", MODEL, [1.0])
    with pytest.raises(InvalidQuery, match="model id"):
        index.upsert(user, "c", "", [VectorItem("a", [1.0])])
    with pytest.raises(InvalidQuery, match="id"):
        index.upsert(user, "c", MODEL, [VectorItem("bad\nid", [1.0])])
    with pytest.raises(InvalidQuery, match="limit"):
        index.search(user, "c", MODEL, [1.0], limit=0)
    with pytest.raises(InvalidQuery, match="kind"):
        open_vector_index(vec.backend, kind="triples", **vec.options)
    assert index.index_info(user, "c") is None


# ----------------------------------------------------------------------------- sqlite specifics

_WRITER = """
import sys
from trustgraph_base.store.vectors import VectorItem, open_vector_index
index = open_vector_index("sqlite", kind="graph", home=sys.argv[1])
index.upsert(sys.argv[2], "c", "m", [VectorItem("urn:from-other-process", [0.0, 0.0, 1.0], label="other")])
index.close()
"""


@pytest.mark.service
def test_sqlite_graph_follows_other_processes_and_survives_restart(tmp_path):
    index = open_vector_index("sqlite", kind="graph", home=tmp_path)
    user = "vec-sqlite-restart"
    index.upsert(user, "c", "m", [VectorItem("urn:a", [1.0, 0.0, 0.0]), VectorItem("urn:b", [0.0, 1.0, 0.0])])
    assert index.search(user, "c", "m", [0.0, 0.1, 1.0], limit=1)[0].id == "urn:b"
    # another process writes to the same file: this process's graph must notice and catch up
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    subprocess.run([sys.executable, "-c", _WRITER, str(tmp_path), user], check=True, env=env, timeout=60)
    assert index.search(user, "c", "m", [0.0, 0.1, 1.0], limit=1)[0].id == "urn:from-other-process"
    index.close()
    snapshots = list((tmp_path / "vectors").glob("*.usearch"))
    assert len(snapshots) == 1  # the graph was saved beside the file on close, stamped with the data's version
    stamp = json.loads(snapshots[0].with_suffix(".json").read_text())
    with sqlite3.connect(user_file("vectors", user, home=tmp_path)) as conn:
        assert conn.execute("SELECT generation, version FROM vector_index").fetchone() == \
            (stamp["generation"], stamp["version"])
    reopened = open_vector_index("sqlite", kind="graph", home=tmp_path)
    try:
        assert [h.id for h in reopened.search(user, "c", "m", [1.0, 0.1, 0.0], limit=3)] == \
            ["urn:a", "urn:b", "urn:from-other-process"]
    finally:
        reopened.close()


@pytest.mark.service
def test_sqlite_small_index_is_searched_exactly_and_a_large_one_through_the_graph(tmp_path, monkeypatch):
    import trustgraph_base.store.sqlite.vectors as sqlite_vectors

    index = open_vector_index("sqlite", kind="graph", home=tmp_path)
    try:
        data = unit_rows(2_000, 32, seed=3)  # 64,000 numbers: under EXACT_SEARCH_MAX_VALUES
        index.upsert("vec-exact", "c", MODEL, items(data))
        queries = unit_rows(200, 32, seed=4)

        def found(q) -> list[str]:
            return [h.id for h in index.search("vec-exact", "c", MODEL, q.tolist(), limit=10)]

        def exact(q) -> list[str]:
            return [f"urn:e:{i}" for i in np.argsort(-(data @ q))[:10]]

        assert all(found(q) == exact(q) for q in queries)  # every query: the exact top 10, in order
        monkeypatch.setattr(sqlite_vectors, "EXACT_SEARCH_MAX_VALUES", 0)  # now the HNSW graph answers
        recall = sum(len(set(found(q)) & set(exact(q))) for q in queries) / (10 * len(queries))
        assert 0.9 <= recall <= 1.0
        for q in queries[:20]:  # graph hits still come back in exact-score order
            hits = found(q)
            assert hits == sorted(hits, key=lambda i: -float(data[int(i.rsplit(":", 1)[1])] @ q))
    finally:
        index.close()


# ----------------------------------------------------------------------------- cassandra specifics

@pytest.mark.integration
def test_cassandra_sharded_index_searches_and_deletes_across_shards(cassandra_service, cassandra_session):
    from trustgraph_base.store.cassandra.connection import CassandraConfig
    from trustgraph_base.store.cassandra.vectors import shard_of

    config = CassandraConfig(hosts=(cassandra_service.host,), port=cassandra_service.port)
    index = open_vector_index("cassandra", kind="document", config=config, shards=3)
    user = f"vec-{uuid.uuid4().hex[:10]}"
    try:
        data = unit_rows(90, 16, seed=11)
        index.upsert(user, "c", MODEL, items(data, prefix="urn:chunk:"))
        assert {shard_of(f"urn:chunk:{i}", 3) for i in range(90)} == {0, 1, 2}
        assert index.index_info(user, "c") == IndexInfo(MODEL, 16, 90)
        for i in (0, 31, 77):
            hits = index.search(user, "c", MODEL, data[i].tolist(), limit=5)
            assert hits[0].id == f"urn:chunk:{i}" and len(hits) == 5
        assert index.delete_ids(user, "c", ["urn:chunk:0", "urn:chunk:1", "urn:chunk:2"]) == 3
        assert index.delete_document(user, "c", "doc3") == 22  # ids 3, 7, ..., 87
        assert index.index_info(user, "c").count == 65
        # an index keeps the shard count it was created with, whatever a later writer asks for
        other = open_vector_index("cassandra", kind="document", config=config, shards=1)
        other.upsert(user, "c", MODEL, [VectorItem("urn:late", data[5].tolist())])
        assert index.search(user, "c", MODEL, data[5].tolist(), limit=2)[0].id in {"urn:late", "urn:chunk:5"}
        assert index.delete_collection(user, "c") == 66
        assert index.index_info(user, "c") is None
        other.close()
    finally:
        index.close()
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {storage_name('tg', user)}", timeout=300)
