"""Conformance suite of the librarian store: the same tests on SQLite files and on real Cassandra.

The ``sqlite`` parameter runs everywhere (marked ``service``: real SQLite files, no server);
the ``cassandra`` parameter is marked ``integration`` and needs ``CASSANDRA_HOST``.  Every
test uses fresh user names; their Cassandra keyspaces are dropped afterwards.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import uuid

import pytest

from trustgraph_base.schema import DocumentMetadata
from trustgraph_base.schema.primitives import Triple, iri, literal
from trustgraph_base.store.errors import InvalidQuery, NotFound, StoreError
from trustgraph_base.store.librarian import (
    DEFAULT_PART_SIZE, ContentCorrupt, DocumentExists, LibrarianStore, open_librarian_store,
)
from trustgraph_base.store.names import storage_name, user_file

BACKENDS = [
    pytest.param("sqlite", marks=pytest.mark.service, id="sqlite"),
    pytest.param("cassandra", marks=pytest.mark.integration, id="cassandra"),
]


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

    def part_sizes(self, user: str) -> list[int]:
        """Sizes of every stored content part of ``user`` (read straight from the database)."""
        if self.backend == "sqlite":
            with sqlite3.connect(user_file("librarian", user, home=self.home)) as conn:
                return [r[0] for r in conn.execute("SELECT length(data) FROM librarian_parts")]
        ks = storage_name("tg", user)
        return [len(r.data) for r in self.session.execute(f"SELECT data FROM {ks}.librarian_parts", timeout=60)]

    def corrupt_first_part(self, user: str) -> None:
        """Injected fault: flip the stored bytes of one part behind the store's back."""
        if self.backend == "sqlite":
            with sqlite3.connect(user_file("librarian", user, home=self.home)) as conn:
                conn.execute("UPDATE librarian_parts SET data = zeroblob(length(data)) WHERE part = 0")
            return
        ks = storage_name("tg", user)
        row = self.session.execute(f"SELECT object_id, bucket, part, data FROM {ks}.librarian_parts "
                                   f"WHERE part = 0 ALLOW FILTERING", timeout=60).one()
        self.session.execute(f"UPDATE {ks}.librarian_parts SET data = %s WHERE object_id = %s AND bucket = %s "
                             f"AND part = %s", (bytes(len(row.data)), row.object_id, row.bucket, row.part), timeout=60)

    def fail_metadata_writes(self, user: str):
        """Injected fault: make the final metadata write of an add fail; returns an undo callable."""
        if self.backend == "sqlite":
            path = user_file("librarian", user, home=self.home)
            with sqlite3.connect(path) as conn:
                conn.execute("CREATE TRIGGER fail_add BEFORE INSERT ON librarian_documents "
                             "BEGIN SELECT RAISE(ABORT, 'injected fault'); END")

            def undo() -> None:
                with sqlite3.connect(path) as conn:
                    conn.execute("DROP TRIGGER fail_add")
            return undo
        from cassandra import OperationTimedOut

        real = self.store._session

        class FailingSession:
            """The real session, except that the metadata insert (the commit point) times out."""

            def __getattr__(self, name):
                return getattr(real, name)

            def execute(self, statement, *args, **kwargs):
                cql = getattr(getattr(statement, "prepared_statement", statement), "query_string", "")
                if "librarian_documents" in cql and "IF NOT EXISTS" in cql:
                    raise OperationTimedOut("injected fault")
                return real.execute(statement, *args, **kwargs)

        self.store._session = FailingSession()

        def undo() -> None:
            self.store._session = real
        return undo

    def stored_part_count(self, user: str) -> int:
        return len(self.part_sizes(user))


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
    stored = lib.store.add_document(user, meta("urn:doc:1", title="Report", kind="application/pdf",
                                               tags=["a", "b"], metadata=triples), b"hello world")
    assert stored.size == 11
    assert stored.sha256 == hashlib.sha256(b"hello world").hexdigest()
    assert stored.time > 0 and stored.parent_id == "" and stored.document_type == "source"
    got = lib.store.get_metadata(user, "urn:doc:1")
    assert got == stored
    assert got.metadata == triples and got.tags == ["a", "b"] and got.kind == "application/pdf"
    assert lib.store.get_content(user, "urn:doc:1") == b"hello world"
    assert [d.id for d in lib.store.list_documents(user)] == ["urn:doc:1"]


def test_five_megabyte_content_round_trip_in_bounded_parts(lib):
    user = lib.user()
    content = os.urandom(5 * 1024 * 1024 + 123)
    lib.store.add_document(user, meta("big"), content)
    sizes = lib.part_sizes(user)
    assert len(sizes) == -(-len(content) // DEFAULT_PART_SIZE) == 21
    assert max(sizes) <= DEFAULT_PART_SIZE and sum(sizes) == len(content)
    assert lib.store.get_content(user, "big") == content
    chunks = list(lib.store.stream_content(user, "big", chunk_size=1 << 20))
    assert [len(c) for c in chunks] == [1 << 20] * 5 + [123]
    assert b"".join(chunks) == content


def test_stream_of_zero_byte_document_yields_one_empty_chunk(lib):
    user = lib.user()
    stored = lib.store.add_document(user, meta("empty"), b"")
    assert stored.size == 0 and stored.sha256 == hashlib.sha256(b"").hexdigest()
    assert list(lib.store.stream_content(user, "empty")) == [b""]
    assert lib.store.get_content(user, "empty") == b""


def test_stream_rechunks_parts_at_any_chunk_size(lib):
    user = lib.user()
    content = os.urandom(3 * DEFAULT_PART_SIZE + 7)
    lib.store.add_document(user, meta("odd"), content)
    chunks = list(lib.store.stream_content(user, "odd", chunk_size=100_003))
    assert all(len(c) == 100_003 for c in chunks[:-1]) and 0 < len(chunks[-1]) <= 100_003
    assert b"".join(chunks) == content
    with pytest.raises(InvalidQuery, match="chunk_size"):
        lib.store.stream_content(user, "odd", chunk_size=0)


# ----------------------------------------------------------------------------- isolation

def test_users_are_isolated(lib):
    alice, bob = lib.user(), lib.user()
    lib.store.add_document(alice, meta("shared-id", title="alice's"), b"alice")
    with pytest.raises(NotFound):
        lib.store.get_metadata(bob, "shared-id")
    with pytest.raises(NotFound):
        lib.store.get_content(bob, "shared-id")
    assert lib.store.list_documents(bob) == []
    lib.store.add_document(bob, meta("shared-id", title="bob's"), b"bob")  # same id, other user: no conflict
    assert lib.store.get_content(alice, "shared-id") == b"alice"
    assert lib.store.get_content(bob, "shared-id") == b"bob"
    assert lib.store.remove_document(bob, "shared-id") == 1
    assert lib.store.get_metadata(alice, "shared-id").title == "alice's"


# ----------------------------------------------------------------------------- children and removal

def test_children_listed_and_removed_with_their_parent(lib):
    user = lib.user()
    lib.store.add_document(user, meta("doc"), b"the document")
    page = lib.store.add_child(user, "doc", meta("doc/p1", document_type="page"), b"page one")
    assert page.parent_id == "doc" and page.document_type == "page"
    lib.store.add_child(user, "doc", meta("doc/p2", document_type="page"), b"page two")
    lib.store.add_child(user, "doc/p1", meta("doc/p1/c1", document_type="chunk"), b"chunk")
    lib.store.add_child(user, "doc/p1", meta("doc/p1/c2", document_type="chunk"), b"chunk 2")
    assert [c.id for c in lib.store.list_children(user, "doc")] == ["doc/p1", "doc/p2"]
    assert [c.id for c in lib.store.list_children(user, "doc/p1")] == ["doc/p1/c1", "doc/p1/c2"]
    assert {d.id for d in lib.store.list_documents(user, "chunk")} == {"doc/p1/c1", "doc/p1/c2"}
    assert [d.id for d in lib.store.list_documents(user, "source")] == ["doc"]

    with pytest.raises(InvalidQuery, match="include_children"):
        lib.store.remove_document(user, "doc", include_children=False)
    assert lib.store.get_content(user, "doc/p1/c2") == b"chunk 2"  # refused removal removed nothing

    assert lib.store.remove_document(user, "doc/p1/c2", include_children=False) == 1
    assert lib.store.remove_document(user, "doc") == 4
    for doc_id in ("doc", "doc/p1", "doc/p2", "doc/p1/c1", "doc/p1/c2"):
        with pytest.raises(NotFound):
            lib.store.get_metadata(user, doc_id)
    assert lib.store.list_documents(user, "page") == [] and lib.store.list_documents(user, "chunk") == []
    assert lib.stored_part_count(user) == 0
    with pytest.raises(NotFound):
        lib.store.list_children(user, "doc")
    with pytest.raises(NotFound):
        lib.store.remove_document(user, "doc")


def test_child_of_missing_parent_is_refused(lib):
    user = lib.user()
    with pytest.raises(NotFound, match="parent"):
        lib.store.add_child(user, "nope", meta("orphan", document_type="chunk"), b"x")
    with pytest.raises(NotFound):
        lib.store.get_metadata(user, "orphan")
    assert lib.store.list_documents(user, "chunk") == []


def test_document_types_are_checked(lib):
    user = lib.user()
    with pytest.raises(InvalidQuery, match="add_child"):
        lib.store.add_document(user, meta("p", document_type="page"), b"x")
    lib.store.add_document(user, meta("doc"), b"x")
    with pytest.raises(InvalidQuery, match="child"):
        lib.store.add_child(user, "doc", meta("s", document_type="source"), b"x")
    with pytest.raises(InvalidQuery, match="document_type"):
        lib.store.add_document(user, meta("w", document_type="weird"), b"x")
    with pytest.raises(InvalidQuery, match="document_type"):
        lib.store.list_documents(user, "weird")


# ----------------------------------------------------------------------------- answers

def test_answers_are_stored_as_document_type_answer(lib):
    user = lib.user()
    answer_id = "urn:trustgraph:answer:7b4f0c1e-8d1c-4a53-9f1a-2f6f3d0f2a10"
    text = "Cats are mammals.".encode()
    stored = lib.store.add_document(user, meta(answer_id, document_type="answer", title="GraphRAG Answer: cats?"),
                                    text)
    assert stored.document_type == "answer"
    assert lib.store.get_content(user, answer_id) == text
    assert [d.id for d in lib.store.list_documents(user, "answer")] == [answer_id]
    assert lib.store.list_documents(user, "source") == []
    lib.store.add_document(user, meta("urn:agent:s1"), b"session")
    child = lib.store.add_child(user, "urn:agent:s1", meta("urn:agent:s1/i1/thought", document_type="answer"),
                                b"I should look it up")
    assert child.document_type == "answer" and child.parent_id == "urn:agent:s1"
    assert {d.id for d in lib.store.list_documents(user, "answer")} == {answer_id, "urn:agent:s1/i1/thought"}


# ----------------------------------------------------------------------------- re-adds

def test_identical_re_add_is_idempotent_and_conflicting_re_add_is_refused(lib):
    user = lib.user()
    first = lib.store.add_document(user, meta("doc", title="first"), b"same bytes")
    again = lib.store.add_document(user, meta("doc", title="a retry with another title"), b"same bytes")
    assert again == first  # the stored metadata, unchanged
    with pytest.raises(DocumentExists, match="different content"):
        lib.store.add_document(user, meta("doc"), b"other bytes")
    assert lib.store.get_content(user, "doc") == b"same bytes"
    assert len(lib.store.list_documents(user)) == 1

    lib.store.add_document(user, meta("other"), b"y")
    lib.store.add_child(user, "doc", meta("c", document_type="chunk"), b"chunk")
    assert lib.store.add_child(user, "doc", meta("c", document_type="chunk"), b"chunk").parent_id == "doc"
    with pytest.raises(DocumentExists, match="parent"):
        lib.store.add_child(user, "other", meta("c", document_type="chunk"), b"chunk")
    assert [c.id for c in lib.store.list_children(user, "doc")] == ["c"]
    assert lib.store.list_children(user, "other") == []


def test_concurrent_adds_from_threads(lib):
    user = lib.user()
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(4):
                lib.store.add_document(user, meta(f"t{n}-{i}"), f"{n}:{i}".encode())
            lib.store.add_document(user, meta("same"), b"everyone writes this")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    listed = {d.id for d in lib.store.list_documents(user)}
    assert listed == {f"t{n}-{i}" for n in range(6) for i in range(4)} | {"same"}
    assert lib.store.get_content(user, "t3-2") == b"3:2"
    assert lib.store.get_content(user, "same") == b"everyone writes this"


# ----------------------------------------------------------------------------- listing

def test_list_documents_newest_first_with_limit(lib):
    user = lib.user()
    for i in range(5):
        lib.store.add_document(user, meta(f"d{i}", time=1_700_000_000.0 + i), b"x")
    assert [d.id for d in lib.store.list_documents(user)] == ["d4", "d3", "d2", "d1", "d0"]
    assert [d.id for d in lib.store.list_documents(user, limit=2)] == ["d4", "d3"]
    with pytest.raises(InvalidQuery, match="limit"):
        lib.store.list_documents(user, limit=0)


# ----------------------------------------------------------------------------- failures

def test_unknown_documents_raise_not_found(lib):
    user = lib.user()
    for call in (lambda: lib.store.get_metadata(user, "missing"),
                 lambda: lib.store.get_content(user, "missing"),
                 lambda: lib.store.stream_content(user, "missing"),
                 lambda: lib.store.remove_document(user, "missing"),
                 lambda: lib.store.list_children(user, "missing")):
        with pytest.raises(NotFound, match="missing"):
            call()


@pytest.mark.parametrize("bad_id", ["", "a\x00b", "line\nbreak", "x" * 1025])
def test_invalid_document_ids_are_refused(lib, bad_id):
    user = lib.user()
    with pytest.raises(InvalidQuery):
        lib.store.add_document(user, meta(bad_id), b"x")
    with pytest.raises(InvalidQuery):
        lib.store.get_metadata(user, bad_id)
    assert lib.store.list_documents(user) == []


def test_invalid_users_are_refused(lib):
    for bad_user in ("", "../etc", "a b", "x" * 65, "robert'); DROP KEYSPACE x;--"):
        with pytest.raises(InvalidQuery, match="user"):
            lib.store.add_document(bad_user, meta("doc"), b"x")
        with pytest.raises(InvalidQuery, match="user"):
            lib.store.list_documents(bad_user)


def test_iri_document_ids_and_unicode_are_kept_exactly(lib):
    user = lib.user()
    doc_id = "https://example.org/docs/Ünïcode?q=1&r=ä#frag"
    lib.store.add_document(user, meta(doc_id, title="Ünïcode ✓"), "text ✓".encode())
    assert lib.store.get_metadata(user, doc_id).title == "Ünïcode ✓"
    assert lib.store.get_content(user, doc_id).decode() == "text ✓"


def test_corrupt_content_is_detected(lib):
    user = lib.user()
    content = os.urandom(2 * DEFAULT_PART_SIZE)
    lib.store.add_document(user, meta("doc"), content)
    lib.corrupt_first_part(user)
    with pytest.raises(ContentCorrupt):
        lib.store.get_content(user, "doc")
    with pytest.raises(ContentCorrupt):
        b"".join(lib.store.stream_content(user, "doc", chunk_size=DEFAULT_PART_SIZE))
    assert issubclass(ContentCorrupt, StoreError)


def test_failed_add_leaves_no_document_visible(lib):
    user = lib.user()
    lib.store.add_document(user, meta("parent"), b"p")
    parts_before = lib.stored_part_count(user)
    undo = lib.fail_metadata_writes(user)
    try:
        with pytest.raises(StoreError):
            lib.store.add_document(user, meta("doc"), os.urandom(DEFAULT_PART_SIZE * 2 + 5))
        with pytest.raises(StoreError):
            lib.store.add_child(user, "parent", meta("child", document_type="chunk"), b"c")
    finally:
        undo()
    for doc_id in ("doc", "child"):
        with pytest.raises(NotFound):
            lib.store.get_metadata(user, doc_id)
    assert [d.id for d in lib.store.list_documents(user)] == ["parent"]
    assert lib.store.list_documents(user, "chunk") == []
    assert lib.store.list_children(user, "parent") == []
    assert lib.stored_part_count(user) == parts_before  # the failed writes' parts are gone too
    # once the fault is gone the same add succeeds
    assert lib.store.add_document(user, meta("doc"), b"now it works").size == 12
