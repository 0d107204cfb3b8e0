"""Conformance suite of the librarian store: the same tests on SQLite files and on real Cassandra.

The ``sqlite`` parameter runs everywhere (marked ``service``: real SQLite files, no server);
the ``cassandra`` parameter is marked ``integration`` and needs ``CASSANDRA_HOST``.  Every
test uses fresh user names; their Cassandra keyspaces are dropped afterwards.  Documents
belong to a user and a collection: most tests work in ``COLL``, the isolation tests use two.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import uuid
from functools import partial

import pytest

from trustgraph_base.schema import DocumentMetadata
from trustgraph_base.schema.primitives import Triple, iri, literal
from trustgraph_base.store.errors import InvalidQuery, NotFound, StoreError
from trustgraph_base.store.librarian import (
    DEFAULT_PART_SIZE,
    ContentCorrupt,
    DocumentExists,
    LibrarianStore,
    open_librarian_store,
)
from trustgraph_base.store.names import storage_name, user_file

BACKENDS = [
    pytest.param("sqlite", marks=pytest.mark.service, id="sqlite"),
    pytest.param("cassandra", marks=pytest.mark.integration, id="cassandra"),
]

#: The collection most tests work in.
COLL = "docs"

#: Tables of each backend, by what they hold (every one has a ``collection`` column).
TABLES = {
    "sqlite": {"documents": "library_documents", "parts": "library_parts"},
    "cassandra": {"documents": "library_documents", "parts": "library_parts", "objects": "library_objects",
                  "by_type": "library_by_type", "children": "library_children"},
}


class Harness:
    """A store of one backend, fresh user names, and backend-level inspection for the checks."""

    def __init__(self, backend: str, store: LibrarianStore, home=None, session=None):
        self.backend = backend
        self.store = store
        self.home = home
        self.session = session
        self.users: list[str] = []

    def user(self) -> str:
        name = f"lib-{uuid.uuid4().hex[:10]}"
        self.users.append(name)
        return name

    def _rows(self, user: str, table: str, columns: str) -> list[tuple]:
        """Every row of one table of ``user`` (read straight from the database), as tuples."""
        if self.backend == "sqlite":
            with sqlite3.connect(user_file("librarian", user, home=self.home)) as conn:
                return conn.execute(f"SELECT {columns} FROM {table}").fetchall()
        ks = storage_name("tg", user)
        return [tuple(r) for r in self.session.execute(f"SELECT {columns} FROM {ks}.{table}", timeout=60)]

    def part_sizes(self, user: str, collection: str | None = None) -> list[int]:
        """Sizes of the stored content parts of ``user`` (of one collection, or of all)."""
        rows = self._rows(user, "library_parts", "collection, data")
        return [len(data) for coll, data in rows if collection is None or coll == collection]

    def row_counts(self, user: str, collection: str) -> dict[str, int]:
        """Rows each of the backend's tables holds for ``collection`` (index and registry tables included)."""
        return {kind: sum(1 for (c,) in self._rows(user, table, "collection") if c == collection)
                for kind, table in TABLES[self.backend].items()}

    def corrupt_first_part(self, user: str) -> None:
        """Injected fault: flip the stored bytes of one part behind the store's back."""
        if self.backend == "sqlite":
            with sqlite3.connect(user_file("librarian", user, home=self.home)) as conn:
                conn.execute("UPDATE library_parts SET data = zeroblob(length(data)) WHERE part = 0")
            return
        ks = storage_name("tg", user)
        row = self.session.execute(f"SELECT collection, object_id, bucket, part, data FROM {ks}.library_parts "
                                   f"WHERE part = 0 ALLOW FILTERING", timeout=60).one()
        self.session.execute(f"UPDATE {ks}.library_parts SET data = %s WHERE collection = %s AND object_id = %s "
                             f"AND bucket = %s AND part = %s",
                             (bytes(len(row.data)), row.collection, row.object_id, row.bucket, row.part), timeout=60)

    def fail_metadata_writes(self, user: str, unknown_outcome: bool = False):
        """Injected fault: make the final metadata write of an add fail; returns an undo callable.

        With ``unknown_outcome`` (Cassandra), every later read of a document row times out too, so
        the store cannot tell whether its write landed and must leave what it wrote behind (as after
        a crash); SQLite's transaction rolls back either way.
        """
        if self.backend == "sqlite":
            path = user_file("librarian", user, home=self.home)
            with sqlite3.connect(path) as conn:
                conn.execute("CREATE TRIGGER fail_add BEFORE INSERT ON library_documents "
                             "BEGIN SELECT RAISE(ABORT, 'injected fault'); END")

            def undo() -> None:
                with sqlite3.connect(path) as conn:
                    conn.execute("DROP TRIGGER fail_add")
            return undo
        from cassandra import OperationTimedOut

        real = self.store._session
        tripped = []

        class FailingSession:
            """The real session, except that the metadata insert (the commit point) times out."""

            def __getattr__(self, name):
                return getattr(real, name)

            def execute(self, statement, *args, **kwargs):
                cql = getattr(getattr(statement, "prepared_statement", statement), "query_string", "")
                if "library_documents" in cql and "IF NOT EXISTS" in cql:
                    tripped.append(cql)
                    raise OperationTimedOut("injected fault")
                if unknown_outcome and tripped and "library_documents" in cql and cql.startswith("SELECT"):
                    raise OperationTimedOut("injected fault: outcome unknown")
                return real.execute(statement, *args, **kwargs)

        self.store._session = FailingSession()

        def undo() -> None:
            self.store._session = real
        return undo

    def stored_part_count(self, user: str, collection: str | None = None) -> int:
        return len(self.part_sizes(user, collection))


@pytest.fixture(params=BACKENDS)
def lib(request, tmp_path):
    """A :class:`Harness` around a fresh store of the parametrised backend."""
    if request.param == "sqlite":
        store = open_librarian_store("sqlite", home=tmp_path)
        harness = Harness("sqlite", store, home=tmp_path)
        yield harness
        store.close()
        return
    service = request.getfixturevalue("cassandra_service")
    session = request.getfixturevalue("cassandra_session")
    from trustgraph_base.store.cassandra.connection import CassandraConfig

    store = open_librarian_store("cassandra", config=CassandraConfig(hosts=(service.host,), port=service.port))
    harness = Harness("cassandra", store, session=session)
    yield harness
    store.close()
    for user in harness.users:
        session.execute(f"DROP KEYSPACE IF EXISTS {storage_name('tg', user)}", timeout=300)


def meta(doc_id: str, **kw) -> DocumentMetadata:
    return DocumentMetadata(id=doc_id, **kw)


# ----------------------------------------------------------------------------- round trips

def test_add_get_metadata_and_content(lib):
    user = lib.user()
    triples = [Triple(iri("urn:doc:1"), iri("http://purl.org/dc/terms/title"), literal("Report", language="en"))]
    stored = lib.store.add_document(user, COLL, meta("urn:doc:1", title="Report", kind="application/pdf",
                                               tags=["a", "b"], metadata=triples), b"hello world")
    assert stored.size == 11
    assert stored.sha256 == hashlib.sha256(b"hello world").hexdigest()
    assert stored.time > 0 and stored.parent_id == "" and stored.document_type == "source"
    got = lib.store.get_metadata(user, COLL, "urn:doc:1")
    assert got == stored
    assert got.metadata == triples and got.tags == ["a", "b"] and got.kind == "application/pdf"
    assert lib.store.get_content(user, COLL, "urn:doc:1") == b"hello world"
    assert [d.id for d in lib.store.list_documents(user, COLL)] == ["urn:doc:1"]


def test_five_megabyte_content_round_trip_in_bounded_parts(lib):
    user = lib.user()
    content = os.urandom(5 * 1024 * 1024 + 123)
    lib.store.add_document(user, COLL, meta("big"), content)
    sizes = lib.part_sizes(user)
    assert len(sizes) == -(-len(content) // DEFAULT_PART_SIZE) == 21
    assert max(sizes) <= DEFAULT_PART_SIZE and sum(sizes) == len(content)
    assert lib.store.get_content(user, COLL, "big") == content
    chunks = list(lib.store.stream_content(user, COLL, "big", chunk_size=1 << 20))
    assert [len(c) for c in chunks] == [1 << 20] * 5 + [123]
    assert b"".join(chunks) == content


def test_stream_of_zero_byte_document_yields_one_empty_chunk(lib):
    user = lib.user()
    stored = lib.store.add_document(user, COLL, meta("empty"), b"")
    assert stored.size == 0 and stored.sha256 == hashlib.sha256(b"").hexdigest()
    assert list(lib.store.stream_content(user, COLL, "empty")) == [b""]
    assert lib.store.get_content(user, COLL, "empty") == b""


def test_stream_rechunks_parts_at_any_chunk_size(lib):
    user = lib.user()
    content = os.urandom(3 * DEFAULT_PART_SIZE + 7)
    lib.store.add_document(user, COLL, meta("odd"), content)
    chunks = list(lib.store.stream_content(user, COLL, "odd", chunk_size=100_003))
    assert all(len(c) == 100_003 for c in chunks[:-1]) and 0 < len(chunks[-1]) <= 100_003
    assert b"".join(chunks) == content
    with pytest.raises(InvalidQuery, match="chunk_size"):
        lib.store.stream_content(user, COLL, "odd", chunk_size=0)


# ----------------------------------------------------------------------------- isolation

def test_users_are_isolated(lib):
    alice, bob = lib.user(), lib.user()
    lib.store.add_document(alice, COLL, meta("shared-id", title="alice's"), b"alice")
    with pytest.raises(NotFound):
        lib.store.get_metadata(bob, COLL, "shared-id")
    with pytest.raises(NotFound):
        lib.store.get_content(bob, COLL, "shared-id")
    assert lib.store.list_documents(bob, COLL) == []
    lib.store.add_document(bob, COLL, meta("shared-id", title="bob's"), b"bob")  # same id, other user: no conflict
    assert lib.store.get_content(alice, COLL, "shared-id") == b"alice"
    assert lib.store.get_content(bob, COLL, "shared-id") == b"bob"
    assert lib.store.remove_document(bob, COLL, "shared-id") == 1
    assert lib.store.get_metadata(alice, COLL, "shared-id").title == "alice's"


def add_tree(lib, user: str, collection: str, tag: str = "") -> None:
    """A source with a page, two chunks and an answer child, plus a top-level answer, in ``collection``."""
    lib.store.add_document(user, collection, meta("doc", title=f"source{tag}"), f"the document{tag}".encode())
    lib.store.add_child(user, collection, "doc", meta("doc/p1", document_type="page"), f"page{tag}".encode())
    lib.store.add_child(user, collection, "doc/p1", meta("doc/p1/c1", document_type="chunk"), f"c1{tag}".encode())
    lib.store.add_child(user, collection, "doc/p1", meta("doc/p1/c2", document_type="chunk"),
                        os.urandom(DEFAULT_PART_SIZE + 3))
    lib.store.add_document(user, collection, meta("urn:answer:1", document_type="answer"), f"answer{tag}".encode())


TREE_IDS = ("doc", "doc/p1", "doc/p1/c1", "doc/p1/c2", "urn:answer:1")


def test_collections_of_one_user_are_isolated(lib):
    user = lib.user()
    add_tree(lib, user, "a")
    lib.store.add_document(user, "b", meta("only-in-b"), b"b's own")
    for doc_id in TREE_IDS:  # nothing of collection a is reachable from collection b
        for call in (partial(lib.store.get_metadata, user, "b", doc_id),
                     partial(lib.store.get_content, user, "b", doc_id),
                     partial(lib.store.stream_content, user, "b", doc_id),
                     partial(lib.store.list_children, user, "b", doc_id),
                     partial(lib.store.remove_document, user, "b", doc_id)):
            with pytest.raises(NotFound, match="collection 'b'"):
                call()
    for document_type in ("source", "page", "chunk", "answer"):
        listed_b = {d.id for d in lib.store.list_documents(user, "b", document_type)}
        assert listed_b == ({"only-in-b"} if document_type == "source" else set())
    assert lib.store.list_documents(user, "never-used") == []
    # ... and b's document is not reachable from a
    with pytest.raises(NotFound):
        lib.store.get_content(user, "a", "only-in-b")
    assert [d.id for d in lib.store.list_documents(user, "a")] == ["doc"]
    # a child cannot be hung under a parent of another collection
    with pytest.raises(NotFound, match="parent"):
        lib.store.add_child(user, "b", "doc", meta("doc/p9", document_type="page"), b"x")
    # the failed lookups and removals from b changed nothing in a
    assert [c.id for c in lib.store.list_children(user, "a", "doc/p1")] == ["doc/p1/c1", "doc/p1/c2"]
    assert lib.store.get_content(user, "a", "doc/p1/c1") == b"c1"
    assert {d.id for d in lib.store.list_documents(user, "a", "chunk")} == {"doc/p1/c1", "doc/p1/c2"}


def test_same_document_id_lives_independently_in_two_collections(lib):
    user = lib.user()
    add_tree(lib, user, "a", tag="-a")
    add_tree(lib, user, "b", tag="-b")  # same ids, other bytes: no DocumentExists across collections
    for coll in ("a", "b"):
        assert lib.store.get_content(user, coll, "doc") == f"the document-{coll}".encode()
        assert lib.store.get_metadata(user, coll, "doc").title == f"source-{coll}"
        assert b"".join(lib.store.stream_content(user, coll, "doc/p1", chunk_size=3)) == f"page-{coll}".encode()
        assert [d.id for d in lib.store.list_documents(user, coll, "answer")] == ["urn:answer:1"]
        assert [c.id for c in lib.store.list_children(user, coll, "doc")] == ["doc/p1"]
    # idempotent re-add and conflict detection are per collection too
    assert lib.store.add_document(user, "a", meta("doc"), b"the document-a").title == "source-a"
    with pytest.raises(DocumentExists):
        lib.store.add_document(user, "a", meta("doc"), b"the document-b")
    # removing the tree from b leaves a's copy whole
    assert lib.store.remove_document(user, "b", "doc") == 4
    assert lib.store.remove_document(user, "b", "urn:answer:1") == 1
    for doc_id in TREE_IDS:
        with pytest.raises(NotFound):
            lib.store.get_metadata(user, "b", doc_id)
        assert lib.store.get_metadata(user, "a", doc_id).id == doc_id
    assert lib.store.get_content(user, "a", "doc/p1/c1") == b"c1-a"
    assert lib.stored_part_count(user, "b") == 0
    assert lib.stored_part_count(user, "a") == 6  # five documents, one of them two parts long


def test_delete_collection_removes_everything_of_it_and_only_that(lib):
    user, other_user = lib.user(), lib.user()
    add_tree(lib, user, "gone")
    add_tree(lib, user, "kept", tag="-kept")
    add_tree(lib, other_user, "gone", tag="-other")  # same collection name, another user
    assert lib.row_counts(user, "gone")["documents"] == 5

    assert lib.store.delete_collection(user, "gone") == 5
    for doc_id in TREE_IDS:
        with pytest.raises(NotFound):
            lib.store.get_metadata(user, "gone", doc_id)
        with pytest.raises(NotFound):
            lib.store.stream_content(user, "gone", doc_id)
    for document_type in ("source", "page", "chunk", "answer"):
        assert lib.store.list_documents(user, "gone", document_type) == []
    # every row of the collection is gone, index and registry tables included
    assert set(lib.row_counts(user, "gone").values()) == {0}
    # the other collection and the other user's same-named collection are untouched
    assert lib.store.get_content(user, "kept", "doc/p1/c1") == b"c1-kept"
    assert lib.store.get_content(other_user, "gone", "doc") == b"the document-other"
    assert len(lib.store.list_documents(other_user, "gone", "chunk")) == 2
    assert lib.row_counts(user, "kept")["documents"] == 5
    assert lib.stored_part_count(user, "kept") == 6
    # again, and for names that never held anything: nothing to remove
    assert lib.store.delete_collection(user, "gone") == 0
    assert lib.store.delete_collection(user, "never-used") == 0
    assert lib.store.delete_collection(lib.user(), "gone") == 0
    # the emptied collection is usable again, with new content under the old ids
    lib.store.add_document(user, "gone", meta("doc"), b"fresh")
    assert lib.store.get_content(user, "gone", "doc") == b"fresh"
    assert [d.id for d in lib.store.list_documents(user, "gone")] == ["doc"]


def test_delete_collection_removes_what_an_interrupted_add_left(lib):
    user = lib.user()
    lib.store.add_document(user, "c", meta("kept"), b"k")
    undo = lib.fail_metadata_writes(user, unknown_outcome=True)
    try:
        with pytest.raises(StoreError):
            lib.store.add_document(user, "c", meta("half"), os.urandom(DEFAULT_PART_SIZE * 2 + 5))
    finally:
        undo()
    with pytest.raises(NotFound):
        lib.store.get_metadata(user, "c", "half")
    assert [d.id for d in lib.store.list_documents(user, "c")] == ["kept"]
    if lib.backend == "cassandra":  # the store could not know the outcome, so it left its parts behind
        assert lib.stored_part_count(user, "c") == 1 + 3
    assert lib.store.delete_collection(user, "c") == 1
    assert set(lib.row_counts(user, "c").values()) == {0}


def test_invalid_collections_are_refused(lib):
    user = lib.user()
    lib.store.add_document(user, COLL, meta("doc"), b"x")
    for bad in ("", "../etc", "a b", "x" * 65, "c'); DROP TABLE library_documents;--", None):
        for call in (partial(lib.store.add_document, user, bad, meta("doc"), b"x"),
                     partial(lib.store.add_child, user, bad, "doc", meta("c", document_type="chunk"), b"x"),
                     partial(lib.store.get_metadata, user, bad, "doc"),
                     partial(lib.store.get_content, user, bad, "doc"),
                     partial(lib.store.stream_content, user, bad, "doc"),
                     partial(lib.store.list_documents, user, bad),
                     partial(lib.store.list_children, user, bad, "doc"),
                     partial(lib.store.remove_document, user, bad, "doc"),
                     partial(lib.store.delete_collection, user, bad)):
            with pytest.raises(InvalidQuery, match="invalid collection name"):
                call()
    assert lib.store.get_content(user, COLL, "doc") == b"x"  # nothing was touched


# ----------------------------------------------------------------------------- children and removal

def test_children_listed_and_removed_with_their_parent(lib):
    user = lib.user()
    lib.store.add_document(user, COLL, meta("doc"), b"the document")
    page = lib.store.add_child(user, COLL, "doc", meta("doc/p1", document_type="page"), b"page one")
    assert page.parent_id == "doc" and page.document_type == "page"
    lib.store.add_child(user, COLL, "doc", meta("doc/p2", document_type="page"), b"page two")
    lib.store.add_child(user, COLL, "doc/p1", meta("doc/p1/c1", document_type="chunk"), b"chunk")
    lib.store.add_child(user, COLL, "doc/p1", meta("doc/p1/c2", document_type="chunk"), b"chunk 2")
    assert [c.id for c in lib.store.list_children(user, COLL, "doc")] == ["doc/p1", "doc/p2"]
    assert [c.id for c in lib.store.list_children(user, COLL, "doc/p1")] == ["doc/p1/c1", "doc/p1/c2"]
    assert {d.id for d in lib.store.list_documents(user, COLL, "chunk")} == {"doc/p1/c1", "doc/p1/c2"}
    assert [d.id for d in lib.store.list_documents(user, COLL, "source")] == ["doc"]

    with pytest.raises(InvalidQuery, match="include_children"):
        lib.store.remove_document(user, COLL, "doc", include_children=False)
    assert lib.store.get_content(user, COLL, "doc/p1/c2") == b"chunk 2"  # refused removal removed nothing

    assert lib.store.remove_document(user, COLL, "doc/p1/c2", include_children=False) == 1
    assert lib.store.remove_document(user, COLL, "doc") == 4
    for doc_id in ("doc", "doc/p1", "doc/p2", "doc/p1/c1", "doc/p1/c2"):
        with pytest.raises(NotFound):
            lib.store.get_metadata(user, COLL, doc_id)
    assert lib.store.list_documents(user, COLL, "page") == [] and lib.store.list_documents(user, COLL, "chunk") == []
    assert lib.stored_part_count(user) == 0
    with pytest.raises(NotFound):
        lib.store.list_children(user, COLL, "doc")
    with pytest.raises(NotFound):
        lib.store.remove_document(user, COLL, "doc")


def test_child_of_missing_parent_is_refused(lib):
    user = lib.user()
    with pytest.raises(NotFound, match="parent"):
        lib.store.add_child(user, COLL, "nope", meta("orphan", document_type="chunk"), b"x")
    with pytest.raises(NotFound):
        lib.store.get_metadata(user, COLL, "orphan")
    assert lib.store.list_documents(user, COLL, "chunk") == []
    # the refused add wrote nothing that stays (Cassandra records an object before it knows)
    assert set(lib.row_counts(user, COLL).values()) == {0}


def test_document_types_are_checked(lib):
    user = lib.user()
    with pytest.raises(InvalidQuery, match="add_child"):
        lib.store.add_document(user, COLL, meta("p", document_type="page"), b"x")
    lib.store.add_document(user, COLL, meta("doc"), b"x")
    with pytest.raises(InvalidQuery, match="child"):
        lib.store.add_child(user, COLL, "doc", meta("s", document_type="source"), b"x")
    with pytest.raises(InvalidQuery, match="document_type"):
        lib.store.add_document(user, COLL, meta("w", document_type="weird"), b"x")
    with pytest.raises(InvalidQuery, match="document_type"):
        lib.store.list_documents(user, COLL, "weird")


# ----------------------------------------------------------------------------- answers

def test_answers_are_stored_as_document_type_answer(lib):
    user = lib.user()
    answer_id = "urn:trustgraph:answer:7b4f0c1e-8d1c-4a53-9f1a-2f6f3d0f2a10"
    text = b"Cats are mammals."
    stored = lib.store.add_document(user, COLL, meta(answer_id, document_type="answer", title="GraphRAG Answer: cats?"),
                                    text)
    assert stored.document_type == "answer"
    assert lib.store.get_content(user, COLL, answer_id) == text
    assert [d.id for d in lib.store.list_documents(user, COLL, "answer")] == [answer_id]
    assert lib.store.list_documents(user, COLL, "source") == []
    lib.store.add_document(user, COLL, meta("urn:agent:s1"), b"session")
    child = lib.store.add_child(user, COLL, "urn:agent:s1", meta("urn:agent:s1/i1/thought", document_type="answer"),
                                b"I should look it up")
    assert child.document_type == "answer" and child.parent_id == "urn:agent:s1"
    assert {d.id for d in lib.store.list_documents(user, COLL, "answer")} == {answer_id, "urn:agent:s1/i1/thought"}


# ----------------------------------------------------------------------------- re-adds

def test_identical_re_add_is_idempotent_and_conflicting_re_add_is_refused(lib):
    user = lib.user()
    first = lib.store.add_document(user, COLL, meta("doc", title="first"), b"same bytes")
    again = lib.store.add_document(user, COLL, meta("doc", title="a retry with another title"), b"same bytes")
    assert again == first  # the stored metadata, unchanged
    with pytest.raises(DocumentExists, match="different content"):
        lib.store.add_document(user, COLL, meta("doc"), b"other bytes")
    assert lib.store.get_content(user, COLL, "doc") == b"same bytes"
    assert len(lib.store.list_documents(user, COLL)) == 1

    lib.store.add_document(user, COLL, meta("other"), b"y")
    lib.store.add_child(user, COLL, "doc", meta("c", document_type="chunk"), b"chunk")
    assert lib.store.add_child(user, COLL, "doc", meta("c", document_type="chunk"), b"chunk").parent_id == "doc"
    with pytest.raises(DocumentExists, match="parent"):
        lib.store.add_child(user, COLL, "other", meta("c", document_type="chunk"), b"chunk")
    assert [c.id for c in lib.store.list_children(user, COLL, "doc")] == ["c"]
    assert lib.store.list_children(user, COLL, "other") == []
    # re-adds and refused adds leave no content object behind: one per stored document
    counts = lib.row_counts(user, COLL)
    assert counts["documents"] == 3
    if "objects" in counts:
        assert counts["objects"] == 3


def test_concurrent_adds_from_threads(lib):
    user = lib.user()
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(4):
                lib.store.add_document(user, COLL, meta(f"t{n}-{i}"), f"{n}:{i}".encode())
            lib.store.add_document(user, COLL, meta("same"), b"everyone writes this")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    listed = {d.id for d in lib.store.list_documents(user, COLL)}
    assert listed == {f"t{n}-{i}" for n in range(6) for i in range(4)} | {"same"}
    assert lib.store.get_content(user, COLL, "t3-2") == b"3:2"
    assert lib.store.get_content(user, COLL, "same") == b"everyone writes this"


# ----------------------------------------------------------------------------- listing

def test_list_documents_newest_first_with_limit(lib):
    user = lib.user()
    for i in range(5):
        lib.store.add_document(user, COLL, meta(f"d{i}", time=1_700_000_000.0 + i), b"x")
    assert [d.id for d in lib.store.list_documents(user, COLL)] == ["d4", "d3", "d2", "d1", "d0"]
    assert [d.id for d in lib.store.list_documents(user, COLL, limit=2)] == ["d4", "d3"]
    with pytest.raises(InvalidQuery, match="limit"):
        lib.store.list_documents(user, COLL, limit=0)


# ----------------------------------------------------------------------------- failures

def test_unknown_documents_raise_not_found(lib):
    user = lib.user()
    for call in (lambda: lib.store.get_metadata(user, COLL, "missing"),
                 lambda: lib.store.get_content(user, COLL, "missing"),
                 lambda: lib.store.stream_content(user, COLL, "missing"),
                 lambda: lib.store.remove_document(user, COLL, "missing"),
                 lambda: lib.store.list_children(user, COLL, "missing")):
        with pytest.raises(NotFound, match="missing"):
            call()


@pytest.mark.parametrize("bad_id", ["", "a\x00b", "line\nbreak", "x" * 1025])
def test_invalid_document_ids_are_refused(lib, bad_id):
    user = lib.user()
    with pytest.raises(InvalidQuery):
        lib.store.add_document(user, COLL, meta(bad_id), b"x")
    with pytest.raises(InvalidQuery):
        lib.store.get_metadata(user, COLL, bad_id)
    assert lib.store.list_documents(user, COLL) == []


def test_invalid_users_are_refused(lib):
    for bad_user in ("", "../etc", "a b", "x" * 65, "robert'); DROP KEYSPACE x;--"):
        with pytest.raises(InvalidQuery, match="user"):
            lib.store.add_document(bad_user, COLL, meta("doc"), b"x")
        with pytest.raises(InvalidQuery, match="user"):
            lib.store.list_documents(bad_user, COLL)


def test_iri_document_ids_and_unicode_are_kept_exactly(lib):
    user = lib.user()
    doc_id = "https://example.org/docs/Ünïcode?q=1&r=ä#frag"
    lib.store.add_document(user, COLL, meta(doc_id, title="Ünïcode ✓"), "text ✓".encode())
    assert lib.store.get_metadata(user, COLL, doc_id).title == "Ünïcode ✓"
    assert lib.store.get_content(user, COLL, doc_id).decode() == "text ✓"


def test_corrupt_content_is_detected(lib):
    user = lib.user()
    content = os.urandom(2 * DEFAULT_PART_SIZE)
    lib.store.add_document(user, COLL, meta("doc"), content)
    lib.corrupt_first_part(user)
    with pytest.raises(ContentCorrupt):
        lib.store.get_content(user, COLL, "doc")
    with pytest.raises(ContentCorrupt):
        b"".join(lib.store.stream_content(user, COLL, "doc", chunk_size=DEFAULT_PART_SIZE))
    assert issubclass(ContentCorrupt, StoreError)


def test_failed_add_leaves_no_document_visible(lib):
    user = lib.user()
    lib.store.add_document(user, COLL, meta("parent"), b"p")
    parts_before = lib.stored_part_count(user)
    undo = lib.fail_metadata_writes(user)
    try:
        with pytest.raises(StoreError):
            lib.store.add_document(user, COLL, meta("doc"), os.urandom(DEFAULT_PART_SIZE * 2 + 5))
        with pytest.raises(StoreError):
            lib.store.add_child(user, COLL, "parent", meta("child", document_type="chunk"), b"c")
    finally:
        undo()
    for doc_id in ("doc", "child"):
        with pytest.raises(NotFound):
            lib.store.get_metadata(user, COLL, doc_id)
    assert [d.id for d in lib.store.list_documents(user, COLL)] == ["parent"]
    assert lib.store.list_documents(user, COLL, "chunk") == []
    assert lib.store.list_children(user, COLL, "parent") == []
    assert lib.stored_part_count(user) == parts_before  # the failed writes' parts are gone too
    # once the fault is gone the same add succeeds
    assert lib.store.add_document(user, COLL, meta("doc"), b"now it works").size == 12
