"""SQLite stores on a data directory that cannot be used: refused with one line naming the path, never
answered as an empty store, never a generic error that a service would dead-letter or retry blindly.

Real SQLite files throughout; the faults are real too: a file where a directory belongs, a
read-only or full tmpfs mounted by the test (:mod:`storage_faults`), and files that may not
grow (``PRAGMA max_page_count``: SQLite reports "database or disk is full" itself).
"""

from __future__ import annotations

import errno
import os

import pytest
from storage_faults import fill, sqlite_full, tmpfs

from trustgraph_base.schema import DocumentMetadata, Triple, TriplePattern, iri, literal
from trustgraph_base.store.errors import StoreEnvironmentError, StoreUnavailable
from trustgraph_base.store.librarian import open_librarian_store
from trustgraph_base.store.triples import open_triples_store
from trustgraph_base.store.vectors import VectorItem, open_vector_index

OPENERS = {
    "triples": lambda home: open_triples_store("sqlite", home=home),
    "librarian": lambda home: open_librarian_store("sqlite", home=home),
    "vectors": lambda home: open_vector_index("sqlite", kind="graph", home=home),
}


def _triples(n: int = 1, size: int = 10) -> list[Triple]:
    return [Triple(iri(f"urn:x:s{i}"), iri("urn:x:p"), literal("x" * size + str(i))) for i in range(n)]


def _write(kind: str, store, n: int = 1, size: int = 10) -> None:
    """One write of ``kind``'s store for user ``u``, collection ``c``."""
    if kind == "triples":
        store.insert("u", "c", _triples(n, size))
    elif kind == "librarian":
        store.add_document("u", "c", DocumentMetadata(id=f"urn:x:d{os.urandom(4).hex()}", kind="text/plain",
                                                      title="t"), b"y" * (n * size))
    else:
        store.upsert("u", "c", "m", [VectorItem(f"urn:x:e{os.urandom(4).hex()}{i}", [1.0, 0.5, float(i)])
                                     for i in range(n)])


def _reads(kind: str, store) -> list:
    """Every read of ``kind``'s store that answers "nothing" for a user without data."""
    if kind == "triples":
        return [lambda: store.query("u", "c", TriplePattern()), lambda: store.list_traces("u", "c"),
                lambda: store.count("u", "c", TriplePattern()), lambda: store.list_collections("u"),
                lambda: list(store.iter_query("u", "c", TriplePattern())),
                lambda: store.query_many("u", "c", [TriplePattern()])]
    if kind == "librarian":
        return [lambda: store.list_documents("u", "c")]
    return [lambda: store.search("u", "c", "m", [1.0, 0.0, 0.0]), lambda: store.index_info("u", "c")]


@pytest.mark.parametrize("kind", OPENERS)
def test_a_data_directory_that_is_a_file_is_refused(kind, tmp_path):
    home = tmp_path / "home"
    home.write_text("not a directory")
    with pytest.raises(StoreEnvironmentError) as caught:
        OPENERS[kind](home)
    assert str(caught.value) == f"cannot use {home} as data directory: not a directory"
    assert caught.value.error_type == "store-environment"


@pytest.mark.parametrize("kind", OPENERS)
def test_a_data_directory_below_a_file_is_refused(kind, tmp_path):
    (tmp_path / "file").write_text("")
    home = tmp_path / "file" / "home"
    with pytest.raises(StoreEnvironmentError) as caught:
        OPENERS[kind](home)
    assert str(caught.value) == f"cannot use {home} as data directory: {tmp_path / 'file'} is not a directory"


@pytest.mark.parametrize("kind", OPENERS)
def test_a_read_only_data_directory_is_refused(kind, tmp_path):
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        with pytest.raises(StoreEnvironmentError) as caught:
            OPENERS[kind](ro)
        assert str(caught.value) == f"cannot use {ro} as data directory: read-only file system"
        with pytest.raises(StoreEnvironmentError, match="is on a read-only file system"):
            OPENERS[kind](ro / "not-yet")


@pytest.mark.parametrize("kind", OPENERS)
def test_a_missing_data_directory_is_an_empty_store_and_is_created_by_the_first_write(kind, tmp_path):
    home = tmp_path / "not" / "yet"
    store = OPENERS[kind](home)
    try:
        for read in _reads(kind, store):
            result = read()
            assert getattr(result, "traces", result) in ([], [[]], None, 0), result
        assert not home.exists()  # reading creates nothing
        _write(kind, store)
        assert home.is_dir()
    finally:
        store.close()


@pytest.mark.parametrize("kind", OPENERS)
def test_reads_of_a_store_that_cannot_exist_fail_instead_of_answering_empty(kind, tmp_path):
    store = OPENERS[kind](tmp_path)
    (tmp_path / kind).write_text("a file where the store's directory belongs")
    try:
        for read in _reads(kind, store):
            with pytest.raises(StoreEnvironmentError, match=f"{tmp_path / kind} is not a directory"):
                read()
        with pytest.raises(StoreEnvironmentError, match=f"{tmp_path / kind} is not a directory"):
            _write(kind, store)
    finally:
        store.close()


@pytest.mark.parametrize("kind", OPENERS)
def test_a_store_that_may_not_grow_reports_no_space_with_its_path(kind, tmp_path):
    """Injected: ``PRAGMA max_page_count`` makes SQLite itself report "database or disk is full"."""
    store = OPENERS[kind](tmp_path)
    try:
        _write(kind, store)  # the file exists and holds data
    finally:
        store.close()
    store = OPENERS[kind](tmp_path)
    try:
        with sqlite_full(tmp_path):
            with pytest.raises(StoreEnvironmentError) as caught:
                for _ in range(200):
                    _write(kind, store, n=50, size=2000)
        path = next((tmp_path / ("vectors" if kind == "vectors" else kind)).glob("*.sqlite"))
        assert str(caught.value) == f"no space left on {path}"
        assert caught.value.path == str(path)
        assert not isinstance(caught.value, StoreUnavailable)
    finally:
        store.close()


@pytest.mark.parametrize("kind", OPENERS)
def test_a_full_file_system_reports_no_space_with_its_path(kind, tmp_path):
    with tmpfs(tmp_path / "small", "2m") as small:
        store = OPENERS[kind](small)
        try:
            _write(kind, store)
            filler = fill(small)
            with pytest.raises(StoreEnvironmentError) as caught:
                for _ in range(50):
                    _write(kind, store, n=50, size=2000)
            assert str(caught.value).startswith(f"no space left on {small / kind}")
            filler.unlink()  # space again: the same store object writes again
            _write(kind, store)
        finally:
            store.close()


def test_a_full_file_system_is_reported_even_where_sqlite_says_only_disk_io_error(tmp_path):
    """Opening a WAL file needs its shared-memory file; on a full disk SQLite says "disk I/O error"."""
    with tmpfs(tmp_path / "small", "2m") as small:
        store = OPENERS["triples"](small)
        _write("triples", store)
        store.close()
        for leftover in (small / "triples").glob("*-*"):
            leftover.unlink()
        fill(small)
        store = OPENERS["triples"](small)
        try:
            with pytest.raises(StoreEnvironmentError, match=f"^no space left on {small}/triples/"):
                store.query("u", "c", TriplePattern())
        finally:
            store.close()


def test_cli_exit_codes_tell_the_data_directory_from_a_server():
    from trustgraph_base.processor import RequestTimeout, ServiceError
    from trustgraph_base.pubsub import BackendUnavailable
    from trustgraph_cli.common import EXIT_FAILED, EXIT_UNREACHABLE, exit_code_for

    assert exit_code_for(StoreEnvironmentError("no space left on /x", "/x")) == EXIT_FAILED
    assert exit_code_for(ServiceError("librarian", "store-environment", "no space left on /x")) == EXIT_FAILED
    assert exit_code_for(OSError(errno.ENOSPC, "No space left on device")) == EXIT_FAILED
    assert exit_code_for(PermissionError(errno.EACCES, "Permission denied", "/x")) == EXIT_FAILED
    for unreachable in (BackendUnavailable("cannot reach Pulsar"), StoreUnavailable("Cassandra down"),
                        RequestTimeout("graph-rag did not answer"), ConnectionRefusedError()):
        assert exit_code_for(unreachable) == EXIT_UNREACHABLE
