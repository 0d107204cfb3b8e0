"""Cassandra librarian store: one keyspace per user, content in bounded blob parts in Cassandra itself.

Tables in the user's keyspace (``storage_name("tg", user)``, shared with the triple store,
distinct table names).  The collection is part of every partition key, bound as a parameter,
so one collection's reads never reach another's rows:

* ``library_documents ((collection, id), …, object_id, n_parts, metadata)`` — the commit point:
  a document is visible exactly when this row exists.  It is written last, with a lightweight
  transaction (``IF NOT EXISTS``) so two concurrent adds of one id cannot both win.
* ``library_objects ((collection), object_id, document_id, n_parts)`` — every content object a
  write started, recorded *before* its parts: :meth:`CassandraLibrarianStore.delete_collection`
  finds all parts through it, even those of an add or remove that was interrupted.
* ``library_parts ((collection, object_id, bucket), part)`` — content parts (256 KiB by default);
  a fresh ``object_id`` per write keeps a losing or interrupted write from touching the winner's
  parts; ``bucket = part // 64`` caps a partition at 64 parts (16 MiB by default).
* ``library_by_type ((collection, document_type), time DESC, id)`` and
  ``library_children ((collection, parent_id), id)`` — listing indexes, written *before* the
  metadata row; readers keep only entries whose document row exists and agrees, so an
  interrupted add never shows up in a listing.

Listing is one partition read plus concurrent single-row reads, O(page).  Reads of a user
who never wrote anything create no keyspace.  Tables named ``librarian_*`` (a user-scoped
layout without collections) are never read, so no row is read with the wrong key layout.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from itertools import islice
from typing import Any, Literal, overload

from ...schema.library import DOCUMENT_TYPES, SOURCE, DocumentMetadata
from ..errors import InvalidQuery, NotFound, StoreUnavailable
from ..librarian import (
    DEFAULT_PART_SIZE,
    DocumentExists,
    LibrarianStoreBase,
    check_chunk_size,
    check_document_id,
    check_document_type,
    check_limit,
    check_part_size,
    exists_message,
    metadata_from_json,
    metadata_to_json,
    not_found,
    rechunk,
    same_document,
    split_parts,
)
from ..names import check_names, storage_name
from .connection import CassandraConfig, Session, cassandra_errors, connect, ensure_keyspace, lwt_applied

__all__ = ["CassandraLibrarianStore", "PARTS_PER_BUCKET"]

#: A prepared statement and its parameters.
_Call = tuple[Any, tuple[Any, ...]]

#: Parts per ``library_parts`` partition.
PARTS_PER_BUCKET = 64
#: Concurrent requests one operation keeps in flight.
CONCURRENCY = 16
#: Seconds a schema change may take (they wait for schema agreement and are slow on a busy node).
DDL_TIMEOUT = 120.0
#: Rows of ``library_objects`` per page of :meth:`CassandraLibrarianStore.delete_collection`.
DELETE_PAGE = 1000

_TABLES = (
    """CREATE TABLE IF NOT EXISTS {ks}.library_documents (
        collection text, id text, parent_id text, document_type text, time double, size bigint, sha256 text,
        object_id uuid, n_parts int, part_size int, metadata blob, PRIMARY KEY ((collection, id)))""",
    """CREATE TABLE IF NOT EXISTS {ks}.library_objects (
        collection text, object_id uuid, document_id text, n_parts int, PRIMARY KEY ((collection), object_id))""",
    """CREATE TABLE IF NOT EXISTS {ks}.library_parts (
        collection text, object_id uuid, bucket int, part int, data blob,
        PRIMARY KEY ((collection, object_id, bucket), part))""",
    """CREATE TABLE IF NOT EXISTS {ks}.library_by_type (
        collection text, document_type text, time double, id text,
        PRIMARY KEY ((collection, document_type), time, id))
        WITH CLUSTERING ORDER BY (time DESC, id ASC)""",
    """CREATE TABLE IF NOT EXISTS {ks}.library_children (
        collection text, parent_id text, id text, PRIMARY KEY ((collection, parent_id), id))""",
)
_TABLE_NAMES = frozenset(ddl.split("{ks}.")[1].split(" ")[0] for ddl in _TABLES)


class _Keyspace:
    """Prepared statements of one user's keyspace; every one binds the collection first."""

    def __init__(self, session: Session, ks: str):
        p = session.prepare
        self.name = ks
        self.get_doc = p(f"SELECT metadata, object_id, n_parts, part_size, time, document_type, parent_id "
                         f"FROM {ks}.library_documents WHERE collection = ? AND id = ?")
        self.insert_doc = p(f"INSERT INTO {ks}.library_documents (collection, id, parent_id, document_type, time, "
                            f"size, sha256, object_id, n_parts, part_size, metadata) "
                            f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS")
        self.delete_doc = p(f"DELETE FROM {ks}.library_documents WHERE collection = ? AND id = ?")
        self.insert_object = p(f"INSERT INTO {ks}.library_objects (collection, object_id, document_id, n_parts) "
                               f"VALUES (?, ?, ?, ?)")
        self.delete_object = p(f"DELETE FROM {ks}.library_objects WHERE collection = ? AND object_id = ?")
        self.list_objects = p(f"SELECT object_id, document_id, n_parts FROM {ks}.library_objects "
                              f"WHERE collection = ?")
        self.insert_part = p(f"INSERT INTO {ks}.library_parts (collection, object_id, bucket, part, data) "
                             f"VALUES (?, ?, ?, ?, ?)")
        self.get_parts = p(f"SELECT part, data FROM {ks}.library_parts "
                           f"WHERE collection = ? AND object_id = ? AND bucket = ?")
        self.delete_bucket = p(f"DELETE FROM {ks}.library_parts WHERE collection = ? AND object_id = ? AND bucket = ?")
        self.insert_by_type = p(f"INSERT INTO {ks}.library_by_type (collection, document_type, time, id) "
                                f"VALUES (?, ?, ?, ?)")
        self.delete_by_type = p(f"DELETE FROM {ks}.library_by_type "
                                f"WHERE collection = ? AND document_type = ? AND time = ? AND id = ?")
        self.delete_type_partition = p(f"DELETE FROM {ks}.library_by_type WHERE collection = ? AND document_type = ?")
        self.list_by_type = p(f"SELECT time, id FROM {ks}.library_by_type WHERE collection = ? AND document_type = ?")
        self.insert_child = p(f"INSERT INTO {ks}.library_children (collection, parent_id, id) VALUES (?, ?, ?)")
        self.delete_child = p(f"DELETE FROM {ks}.library_children WHERE collection = ? AND parent_id = ? AND id = ?")
        self.delete_children = p(f"DELETE FROM {ks}.library_children WHERE collection = ? AND parent_id = ?")
        self.list_children = p(f"SELECT id FROM {ks}.library_children WHERE collection = ? AND parent_id = ?")
        self.list_collections = p(f"SELECT DISTINCT collection, document_type FROM {ks}.library_by_type")
        for stmt in (self.get_doc, self.get_parts, self.list_by_type, self.list_children, self.list_objects,
                     self.delete_doc, self.delete_object, self.delete_bucket, self.delete_by_type,
                     self.delete_type_partition, self.delete_child, self.delete_children, self.insert_object,
                     self.insert_part, self.insert_by_type, self.insert_child):
            stmt.is_idempotent = True  # safe for the driver to retry


class _Stored:
    """A document row: metadata plus where its parts are."""

    __slots__ = ("meta", "object_id", "n_parts", "part_size")

    def __init__(self, row: Any):
        self.meta = metadata_from_json(row.metadata)
        self.object_id = row.object_id
        self.n_parts = row.n_parts
        self.part_size = row.part_size


class CassandraLibrarianStore(LibrarianStoreBase):
    """Librarian store on Cassandra; one keyspace per user, the collection in every partition key.

    :param config: where Cassandra is (default: from the environment).
    :param part_size: bytes per stored content part (default 256 KiB, at most 1 MiB).
    :param keyspace_prefix: keyspaces are ``storage_name(prefix, user)``; ``"tg"`` shares the
        triple store's keyspace.
    """

    backend = "cassandra"

    def __init__(self, config: CassandraConfig | None = None, part_size: int = DEFAULT_PART_SIZE,
                 keyspace_prefix: str = "tg"):
        self.config = config or CassandraConfig()
        self.part_size = check_part_size(part_size)
        if not keyspace_prefix.isalnum() or not keyspace_prefix.islower():
            raise ValueError(f"keyspace_prefix must be lower-case letters/digits, got {keyspace_prefix!r}")
        self.keyspace_prefix = keyspace_prefix
        self._session = connect(self.config)
        self._keyspaces: dict[str, _Keyspace] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Forget prepared statements; the shared session stays open for other stores of the process."""
        with self._lock:
            self._keyspaces.clear()

    # ------------------------------------------------------------------ plumbing

    @overload
    def _ks(self, user: str, create: Literal[True] = True) -> _Keyspace: ...

    @overload
    def _ks(self, user: str, create: bool) -> _Keyspace | None: ...

    def _ks(self, user: str, create: bool = True) -> _Keyspace | None:
        """Statements of the (already validated) user's keyspace, creating keyspace and tables on first write.

        With ``create`` false, returns ``None`` when the librarian tables do not exist yet
        (reads and removals never create a keyspace for a user who stored nothing).
        """
        ks_name = storage_name(self.keyspace_prefix, user)
        with self._lock:
            ks = self._keyspaces.get(ks_name)
        if ks is not None:
            return ks
        with cassandra_errors(f"librarian schema set-up for user {user!r}"):
            if not create:
                found = {r.table_name for r in self._session.execute(
                    "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (ks_name,))}
                if "library_documents" not in found:  # created first: no document can exist without it
                    return None
                create = not _TABLE_NAMES <= found
            if create:
                ensure_keyspace(self._session, ks_name, self.config.replication_factor)
                pending = [self._session.execute_async(ddl.format(ks=ks_name), timeout=DDL_TIMEOUT)
                           for ddl in _TABLES]
                for future in pending:
                    future.result()
            ks = _Keyspace(self._session, ks_name)
        with self._lock:
            self._keyspaces[ks_name] = ks
        return ks

    def _concurrent(self, statement: Any, params: list[tuple[Any, ...]]) -> list[Any]:
        """Run one prepared statement over many parameter tuples (see :meth:`_run`)."""
        return self._run([(statement, p) for p in params])

    def _run(self, statements: list[_Call]) -> list[Any]:
        """Run ``(statement, params)`` pairs, ``CONCURRENCY`` at a time; raise the first error."""
        from cassandra.concurrent import execute_concurrent

        if not statements:
            return []
        results = execute_concurrent(self._session, statements, concurrency=CONCURRENCY, raise_on_first_error=True,
                                     results_generator=False)
        return [r.result_or_exc for r in results]

    def _stored(self, ks: _Keyspace, collection: str, document_id: str) -> _Stored | None:
        row = self._session.execute(ks.get_doc, (collection, document_id)).one()
        return _Stored(row) if row is not None else None

    def _document_ks(self, user: str, collection: str, document_id: str) -> _Keyspace:
        """The user's keyspace, which must exist: it holds ``document_id`` (:class:`NotFound` otherwise)."""
        ks = self._ks(user, create=False)
        if ks is None:
            raise not_found(document_id, user, collection)
        return ks

    def _require(self, ks: _Keyspace | None, user: str, collection: str, document_id: str) -> _Stored:
        stored = self._stored(ks, collection, document_id) if ks is not None else None
        if stored is None:
            raise not_found(document_id, user, collection)
        return stored

    def _fetch_many(self, ks: _Keyspace, collection: str, ids: list[str]) -> list[_Stored | None]:
        """Document rows of ``ids`` (``None`` for missing), by concurrent single-partition reads."""
        rows = self._concurrent(ks.get_doc, [(collection, i) for i in ids])
        return [_Stored(r.one()) if r.one() is not None else None for r in rows]

    # ------------------------------------------------------------------ writes

    @staticmethod
    def _index_statements(ks: _Keyspace, collection: str, meta: DocumentMetadata) -> list[_Call]:
        """The listing index rows of ``meta``, as ``(statement, params)`` pairs."""
        out: list[_Call] = [(ks.insert_by_type, (collection, meta.document_type, meta.time, meta.id))]
        if meta.parent_id:
            out.append((ks.insert_child, (collection, meta.parent_id, meta.id)))
        return out

    def _index_rows(self, ks: _Keyspace, collection: str, meta: DocumentMetadata) -> None:
        self._run(self._index_statements(ks, collection, meta))

    def _add(self, user: str, collection: str, meta: DocumentMetadata, content: bytes) -> DocumentMetadata:
        """Write a document in three round trips (answers are stored while a client waits for its
        ``end_of_session``, so each one counts):

        1. the look-ups (is the id stored? does the parent exist?) together with the object's
           registry row, which must exist before any part;
        2. the parts and the listing index rows together, all before the metadata row;
        3. the metadata row, a lightweight transaction: the commit point.

        A re-add or a missing parent found in step 1 removes the registry row it wrote.
        """
        ks = self._ks(user)
        what = f"librarian add of {meta.id[:120]!r} to collection {collection!r} of user {user!r}"
        from cassandra import ConsistencyLevel

        object_id = uuid.uuid4()
        parts = split_parts(content, self.part_size)
        try:
            with cassandra_errors(what):
                lookups: list[_Call] = [(ks.get_doc, (collection, meta.id))]
                if meta.parent_id:
                    lookups.append((ks.get_doc, (collection, meta.parent_id)))
                found = [r.one() for r in self._run(
                    lookups + [(ks.insert_object, (collection, object_id, meta.id, len(parts)))])]
                existing = _Stored(found[0]) if found[0] is not None else None
                parent_missing = bool(meta.parent_id) and found[1] is None
                if existing is not None or parent_missing:
                    self._session.execute(ks.delete_object, (collection, object_id))
                    if existing is not None:
                        return self._readd(ks, collection, existing.meta, meta)
                    raise not_found(meta.parent_id, user, collection, "parent document")
                self._run([(ks.insert_part, (collection, object_id, i // PARTS_PER_BUCKET, i, part))
                           for i, part in enumerate(parts)] + self._index_statements(ks, collection, meta))
                insert = ks.insert_doc.bind((collection, meta.id, meta.parent_id, meta.document_type, meta.time,
                                             meta.size, meta.sha256, object_id, len(parts), self.part_size,
                                             metadata_to_json(meta)))
                insert.serial_consistency_level = ConsistencyLevel.LOCAL_SERIAL
                try:
                    result = self._session.execute(insert)
                except Exception:
                    # an LWT timeout is ambiguous: look whether our row made it
                    stored = self._stored(ks, collection, meta.id)
                    if stored is not None and stored.object_id == object_id:
                        return meta
                    raise
        except (NotFound, DocumentExists):
            raise
        except BaseException:
            self._cleanup_failed_add(ks, collection, meta, object_id, len(parts))
            raise
        if lwt_applied(result):
            return meta
        with cassandra_errors(what):  # lost a race against a concurrent add of the same id
            winner = self._stored(ks, collection, meta.id)
            self._discard(ks, collection, meta, object_id, len(parts), winner.meta if winner else None)
            if winner is None:
                raise StoreUnavailable(f"{what}: the document changed concurrently; retry")
            return self._readd(ks, collection, winner.meta, meta)

    def _readd(self, ks: _Keyspace, collection: str, existing: DocumentMetadata,
               new: DocumentMetadata) -> DocumentMetadata:
        """Idempotent re-add (re-writing the index rows heals an earlier interrupted add) or :class:`DocumentExists`."""
        if not same_document(existing, new):
            raise DocumentExists(exists_message(existing, new))
        self._index_rows(ks, collection, existing)
        return existing

    def _cleanup_failed_add(self, ks: _Keyspace, collection: str, meta: DocumentMetadata, object_id: uuid.UUID,
                            n_parts: int) -> None:
        """After a failed add, remove what it wrote unless its metadata row did land (or the state is unknown)."""
        try:
            current = self._stored(ks, collection, meta.id)
        except Exception:  # noqa: BLE001 - state unknown: leave everything; readers skip leftovers
            return
        if current is None or current.object_id != object_id:
            self._discard(ks, collection, meta, object_id, n_parts, current.meta if current else None)

    def _discard(self, ks: _Keyspace, collection: str, meta: DocumentMetadata, object_id: uuid.UUID, n_parts: int,
                 winner: DocumentMetadata | None) -> None:
        """Best-effort removal of what a failed or losing add wrote, never the index rows ``winner`` owns.

        ``winner`` is the document now stored under the id (``None`` if none); index rows keyed
        like the winner's are shared with it and stay.  The object's registry row goes last, so
        whatever this leaves behind :meth:`delete_collection` still finds.
        """
        try:
            self._concurrent(ks.delete_bucket, [(collection, object_id, b) for b in range(_buckets(n_parts))])
            if winner is None or (winner.document_type, winner.time) != (meta.document_type, meta.time):
                self._session.execute(ks.delete_by_type, (collection, meta.document_type, meta.time, meta.id))
            if meta.parent_id and (winner is None or winner.parent_id != meta.parent_id):
                self._session.execute(ks.delete_child, (collection, meta.parent_id, meta.id))
            self._session.execute(ks.delete_object, (collection, object_id))
        except Exception:  # noqa: BLE001 - readers ignore leftovers; the original error matters more
            pass

    def remove_document(self, user: str, collection: str, document_id: str, include_children: bool = True) -> int:
        """Remove a document and, with ``include_children``, all its descendants (deepest first).

        :param user: owner of the document.
        :param collection: its collection; documents of other collections are never touched.
        :param document_id: the document to remove.
        :param include_children: remove its pages, chunks and other descendants too.
        :returns: the number of documents removed.
        :raises NotFound: the document does not exist in this collection.
        :raises InvalidQuery: ``include_children`` is false and the document has children.
        """
        check_names(user, collection)
        check_document_id(document_id)
        ks = self._document_ks(user, collection, document_id)
        with cassandra_errors(f"librarian remove of {document_id[:120]!r} from collection {collection!r} "
                              f"of user {user!r}"):
            root = self._require(ks, user, collection, document_id)
            order = [root]  # breadth-first; removed in reverse so a parent never goes before its children
            i = 0
            while i < len(order):
                order.extend(self._children(ks, collection, order[i].meta.id))
                i += 1
                if len(order) > 1 and not include_children:
                    raise InvalidQuery(f"document {document_id[:200]!r} has children; remove them too with "
                                       f"include_children=True")
            for stored in reversed(order):
                self._remove_one(ks, collection, stored)
        return len(order)

    def _remove_one(self, ks: _Keyspace, collection: str, stored: _Stored) -> None:
        from cassandra.query import BatchStatement, BatchType

        meta = stored.meta
        batch = BatchStatement(batch_type=BatchType.LOGGED)  # row and its index entries vanish together
        batch.add(ks.delete_doc, (collection, meta.id))
        batch.add(ks.delete_by_type, (collection, meta.document_type, meta.time, meta.id))
        if meta.parent_id:
            batch.add(ks.delete_child, (collection, meta.parent_id, meta.id))
        self._session.execute(batch)
        self._concurrent(ks.delete_bucket, [(collection, stored.object_id, b) for b in range(_buckets(stored.n_parts))])
        self._session.execute(ks.delete_object, (collection, stored.object_id))

    def delete_collection(self, user: str, collection: str) -> int:
        """Remove every document and part of one collection; other collections are untouched.

        Walks the collection's object registry a page at a time: document rows go first (the
        documents vanish), then their child indexes, parts and registry rows; the type listings
        last.  An interrupted delete is finished by calling it again.  Documents added to the
        collection while it is being deleted may survive.

        :param user: owner of the collection.
        :param collection: the collection to empty.
        :returns: how many documents (of every type) it held; 0 for an unknown user or collection.
        """
        check_names(user, collection)
        ks = self._ks(user, create=False)
        if ks is None:
            return 0
        removed = 0
        with cassandra_errors(f"librarian delete of collection {collection!r} of user {user!r}"):
            # one paged query: rows deleted behind the paging cursor are never scanned again
            statement = ks.list_objects.bind((collection,))
            statement.fetch_size = DELETE_PAGE
            result = self._session.execute(statement)
            while True:
                objects = list(result.current_rows)
                if objects:
                    removed += self._delete_objects(ks, collection, objects)
                if not result.has_more_pages:
                    break
                result.fetch_next_page()
            self._concurrent(ks.delete_type_partition, [(collection, t) for t in DOCUMENT_TYPES])
        return removed

    def _delete_objects(self, ks: _Keyspace, collection: str, objects: list[Any]) -> int:
        """Delete one page of registry rows with their documents, child indexes and parts; returns documents."""
        ids = list(dict.fromkeys(o.document_id for o in objects))
        # every row counted is deleted just below, so a later page never counts it again
        removed = sum(1 for stored in self._fetch_many(ks, collection, ids) if stored is not None)
        self._concurrent(ks.delete_doc, [(collection, i) for i in ids])
        self._concurrent(ks.delete_children, [(collection, i) for i in ids])
        self._concurrent(ks.delete_bucket, [(collection, o.object_id, b) for o in objects
                                            for b in range(_buckets(o.n_parts))])
        self._concurrent(ks.delete_object, [(collection, o.object_id) for o in objects])
        return removed

    # ------------------------------------------------------------------ reads

    def get_metadata(self, user: str, collection: str, document_id: str) -> DocumentMetadata:
        """Metadata of one document.

        :param user: owner of the document.
        :param collection: its collection.
        :param document_id: the document.
        :raises NotFound: the document does not exist in this collection.
        """
        return self._lookup(user, collection, document_id)[0].meta

    def get_content(self, user: str, collection: str, document_id: str) -> bytes:
        """The whole content, verified against the stored sha256.

        :param user: owner of the document.
        :param collection: its collection.
        :param document_id: the document.
        :raises NotFound: the document does not exist in this collection.
        :raises ContentCorrupt: the stored bytes do not match their sha256.
        """
        stored, ks, collection = self._lookup(user, collection, document_id)
        what = f"librarian read of {document_id[:120]!r} in collection {collection!r} of user {user!r}"
        with cassandra_errors(what):
            pages = self._concurrent(ks.get_parts, [(collection, stored.object_id, b)
                                                    for b in range(_buckets(stored.n_parts))])
            parts = [row.data for page in pages for row in page]
        return b"".join(rechunk(iter(parts), max(1, stored.meta.size), stored.meta.sha256, stored.meta.size,
                                document_id))

    def _lookup(self, user: str, collection: str, document_id: str) -> tuple[_Stored, _Keyspace, str]:
        """The document row, the keyspace and the validated collection; :class:`NotFound` if absent."""
        check_names(user, collection)
        check_document_id(document_id)
        ks = self._document_ks(user, collection, document_id)
        with cassandra_errors(f"librarian read of {document_id[:120]!r} in collection {collection!r} "
                              f"of user {user!r}"):
            return self._require(ks, user, collection, document_id), ks, collection

    def stream_content(self, user: str, collection: str, document_id: str,
                       chunk_size: int = 1 << 20) -> Iterator[bytes]:
        """Yield the content in ``chunk_size`` chunks (at least one, possibly empty), reading a few parts at a time.

        The document is looked up before the first chunk is requested, so an unknown id
        raises :class:`NotFound` from this call itself.

        :param user: owner of the document.
        :param collection: its collection.
        :param document_id: the document.
        :param chunk_size: bytes per yielded chunk (1 byte to 64 MiB).
        """
        check_chunk_size(chunk_size)
        stored, ks, collection = self._lookup(user, collection, document_id)
        what = f"librarian stream of {document_id[:120]!r} in collection {collection!r} of user {user!r}"
        # about 1 MiB of parts per page keeps native-protocol frames small
        fetch = max(1, (1 << 20) // stored.part_size)

        def parts() -> Iterator[bytes]:
            for bucket in range(_buckets(stored.n_parts)):
                with cassandra_errors(what):
                    statement = ks.get_parts.bind((collection, stored.object_id, bucket))
                    statement.fetch_size = fetch
                    rows = iter(self._session.execute(statement))
                while True:
                    with cassandra_errors(what):
                        row = next(rows, None)
                    if row is None:
                        break
                    yield row.data

        return rechunk(parts(), chunk_size, stored.meta.sha256, stored.meta.size, document_id)

    def _children(self, ks: _Keyspace, collection: str, parent_id: str) -> list[_Stored]:
        ids = [r.id for r in self._session.execute(ks.list_children, (collection, parent_id))]
        return [s for s in self._fetch_many(ks, collection, ids) if s is not None and s.meta.parent_id == parent_id]

    def list_documents(self, user: str, collection: str, document_type: str = SOURCE,
                       limit: int = 1000) -> list[DocumentMetadata]:
        """Documents of one type in one collection, newest first (one partition read plus concurrent row reads).

        :param user: owner of the documents.
        :param collection: the collection to list.
        :param document_type: ``source``, ``page``, ``chunk`` or ``answer``.
        :param limit: at most this many (1 to 100,000).
        """
        check_names(user, collection)
        check_document_type(document_type)
        check_limit(limit)
        ks = self._ks(user, create=False)
        if ks is None:
            return []
        out: list[DocumentMetadata] = []
        with cassandra_errors(f"librarian listing of collection {collection!r} of user {user!r}"):
            statement = ks.list_by_type.bind((collection, document_type))
            statement.fetch_size = min(limit, 5000)
            entries = iter(self._session.execute(statement))
            while len(out) < limit:
                batch = list(islice(entries, min(limit - len(out), 5000)))
                if not batch:
                    break
                for entry, stored in zip(batch, self._fetch_many(ks, collection, [e.id for e in batch]), strict=True):
                    # skip leftovers of interrupted adds/removes: the document row is the truth
                    if stored is not None and stored.meta.document_type == document_type \
                            and stored.meta.time == entry.time:
                        out.append(stored.meta)
        return out

    def count_descendants(self, user: str, collection: str, document_ids: list[str]) -> dict[str, tuple[int, int]]:
        """``id → (children, grandchildren)`` of each document, from the child index: one partition read per
        document and one per child (concurrent), never a scan of the collection.

        :param user: owner of the documents.
        :param collection: their collection.
        :param document_ids: the documents to count for.
        """
        check_names(user, collection)
        for document_id in document_ids:
            check_document_id(document_id)
        ks = self._ks(user, create=False)
        if ks is None:
            return {d: (0, 0) for d in document_ids}
        with cassandra_errors(f"librarian counts in collection {collection!r} of user {user!r}"):
            children = [[r.id for r in rows] for rows in self._concurrent(
                ks.list_children, [(collection, d) for d in document_ids])]
            flat = [c for ids in children for c in ids]
            grand = iter(len(list(rows)) for rows in self._concurrent(ks.list_children,
                                                                     [(collection, c) for c in flat]))
        return {d: (len(ids), sum(next(grand) for _ in ids)) for d, ids in zip(document_ids, children, strict=True)}

    def list_children(self, user: str, collection: str, parent_id: str) -> list[DocumentMetadata]:
        """Direct children of a document, ordered by id.

        :param user: owner of the document.
        :param collection: its collection.
        :param parent_id: the parent document.
        :raises NotFound: the parent does not exist in this collection.
        """
        check_names(user, collection)
        check_document_id(parent_id, "parent id")
        ks = self._document_ks(user, collection, parent_id)
        with cassandra_errors(f"librarian listing of children of {parent_id[:120]!r} in collection {collection!r} "
                              f"of user {user!r}"):
            self._require(ks, user, collection, parent_id)
            return [s.meta for s in self._children(ks, collection, parent_id)]

    def find_document(self, user: str, document_id: str) -> list[str]:
        """The user's collections that hold a document with this id, sorted.

        Reads the user's collection names from the type listings (a scan of that keyspace's
        partition keys only), then looks the id up in each collection.

        :param user: owner of the documents.
        :param document_id: the document.
        """
        check_names(user)
        check_document_id(document_id)
        ks = self._ks(user, create=False)
        if ks is None:
            return []
        with cassandra_errors(f"librarian look-up of {document_id[:120]!r} for user {user!r}"):
            collections = sorted({r.collection for r in self._session.execute(ks.list_collections)})
            rows = self._concurrent(ks.get_doc, [(c, document_id) for c in collections])
        return [c for c, r in zip(collections, rows, strict=True) if r.one() is not None]


def _buckets(n_parts: int) -> int:
    """How many part partitions ``n_parts`` parts occupy."""
    return (n_parts + PARTS_PER_BUCKET - 1) // PARTS_PER_BUCKET
