"""``find_document``: which of one user's collections hold a document id, on SQLite and on real Cassandra.

The look-up behind the gateway's librarian requests, which name no collection: it finds the
id in every collection of the user that holds it, and never in another user's documents.
"""

from __future__ import annotations

import uuid

import pytest

from trustgraph_base.schema import DocumentMetadata
from trustgraph_base.schema.library import CHUNK
from trustgraph_base.store.errors import InvalidQuery
from trustgraph_base.store.librarian import open_librarian_store
from trustgraph_base.store.names import storage_name

BACKENDS = [
    pytest.param("sqlite", marks=pytest.mark.service, id="sqlite"),
    pytest.param("cassandra", marks=pytest.mark.integration, id="cassandra"),
]


@pytest.fixture(params=BACKENDS)
def store(request, tmp_path):
    """A fresh store of the parametrised backend; ``store.users`` are dropped afterwards (Cassandra)."""
    if request.param == "sqlite":
        s = open_librarian_store("sqlite", home=tmp_path)
        s.users = []
        yield s
        s.close()
        return
    from trustgraph_base.store.cassandra.connection import CassandraConfig

    service = request.getfixturevalue("cassandra_service")
    s = open_librarian_store("cassandra", config=CassandraConfig(hosts=(service.host,), port=service.port))
    s.users = []
    yield s
    s.close()
    session = request.getfixturevalue("cassandra_session")
    for user in s.users:
        session.execute(f"DROP KEYSPACE IF EXISTS {storage_name('tg', user)}", timeout=300)


def new_user(store) -> str:
    user = f"find-{uuid.uuid4().hex[:10]}"
    store.users.append(user)
    return user


def test_finds_the_collections_of_one_user_holding_an_id(store):
    alice, bob = new_user(store), new_user(store)
    assert store.find_document(alice, "doc:1") == []  # nothing stored yet for this user
    store.add_document(alice, "papers", DocumentMetadata(id="doc:1", title="one"), b"radium")
    store.add_document(alice, "default", DocumentMetadata(id="doc:1", title="one"), b"radium")
    store.add_document(alice, "other", DocumentMetadata(id="doc:2"), b"polonium")
    store.add_child(alice, "other", "doc:2", DocumentMetadata(id="doc:2/c0", document_type=CHUNK, parent_id="doc:2"),
                    b"p")
    store.add_document(bob, "secret", DocumentMetadata(id="doc:1"), b"bob's")
    assert store.find_document(alice, "doc:1") == ["default", "papers"]
    assert store.find_document(alice, "doc:2/c0") == ["other"]
    assert store.find_document(alice, "doc:3") == []
    assert store.find_document(bob, "doc:1") == ["secret"]
    store.remove_document(alice, "papers", "doc:1")
    assert store.find_document(alice, "doc:1") == ["default"]


def test_refuses_bad_names_and_ids(store):
    with pytest.raises(InvalidQuery):
        store.find_document("../x", "doc:1")
    with pytest.raises(InvalidQuery):
        store.find_document(new_user(store), "")
