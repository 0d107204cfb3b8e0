"""Cassandra librarian store: one keyspace per user, content in bounded blob parts in Cassandra itself.

Tables in the user's keyspace (``storage_name("tg", user)``, shared with the triple store,
distinct table names):

* ``librarian_documents (id PRIMARY KEY, …, object_id, n_parts, metadata)`` — the commit point:
  a document is visible exactly when this row exists.  It is written last, with a lightweight
  transaction (``IF NOT EXISTS``) so two concurrent adds of one id cannot both win.
* ``librarian_parts ((object_id, bucket), part)`` — content parts (256 KiB by default); a fresh
  ``object_id`` per write keeps a losing or interrupted write from touching the winner's parts;
  ``bucket = part // 64`` caps a partition at 64 parts (16 MiB by default) for huge documents.
* ``librarian_by_type ((document_type), time DESC, id)`` and ``librarian_children ((parent_id), id)``
  — listing indexes, written *before* the metadata row; readers keep only entries whose
  document row exists and agrees, so an interrupted add never shows up in a listing.

Listing is one partition read plus concurrent single-row reads, O(page).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from ...schema.library import SOURCE, DocumentMetadata
from ..errors import InvalidQuery, NotFound, StoreError, StoreUnavailable
from ..librarian import (
    CHILD_TYPES, DEFAULT_PART_SIZE, TOP_LEVEL_TYPES, DocumentExists, check_chunk_size, check_document_id,
    check_document_type, check_limit, check_part_size, exists_message, metadata_from_json, metadata_to_json,
    prepare_metadata, rechunk, same_document, split_parts,
)
from ..names import InvalidName, check_user, storage_name
from .connection import CassandraConfig, connect, ensure_keyspace

__all__ = ["CassandraLibrarianStore", "cassandra_errors", "PARTS_PER_BUCKET"]

#: Parts per ``librarian_parts`` partition.
PARTS_PER_BUCKET = 64
#: Concurrent requests one operation keeps in flight.
CONCURRENCY = 16
#: Seconds a schema change may take (they wait for schema agreement and are slow on a busy node).
DDL_TIMEOUT = 120.0

_TABLES = (
    """CREATE TABLE IF NOT EXISTS {ks}.librarian_documents (
        id text PRIMARY KEY, parent_id text, document_type text, time double, size bigint, sha256 text,
        object_id uuid, n_parts int, part_size int, metadata blob)""",
    """CREATE TABLE IF NOT EXISTS {ks}.librarian_parts (
        object_id uuid, bucket int, part int, data blob, PRIMARY KEY ((object_id, bucket), part))""",
    """CREATE TABLE IF NOT EXISTS {ks}.librarian_by_type (
        document_type text, time double, id text, PRIMARY KEY ((document_type), time, id))
        WITH CLUSTERING ORDER BY (time DESC, id ASC)""",
    """CREATE TABLE IF NOT EXISTS {ks}.librarian_children (
        parent_id text, id text, PRIMARY KEY ((parent_id), id))""",
)


@contextmanager
def cassandra_errors(what: str):
    """Map driver errors to store errors: timeouts and unreachable nodes to :class:`StoreUnavailable`.

    :param what: the operation, for the message (``"librarian write for user 'alice'"``).
    """
    from cassandra import (
        CoordinationFailure, DriverException, InvalidRequest, OperationTimedOut, RequestExecutionException,
    )
    from cassandra.cluster import NoHostAvailable

    try:
        yield
    except (StoreError, ValueError, KeyError):
        raise
    except (OperationTimedOut, NoHostAvailable, RequestExecutionException, CoordinationFailure, OSError) as e:
        raise StoreUnavailable(f"{what} failed, Cassandra unavailable: {e}") from e
    except InvalidRequest as e:
        raise StoreError(f"{what} was rejected by Cassandra: {e}") from e
    except DriverException as e:
        raise StoreUnavailable(f"{what} failed: {e}") from e


def _user(user: str) -> str:
    try:
        return check_user(user)
    except InvalidName as e:
        raise InvalidQuery(str(e)) from None


class _Keyspace:
    """Prepared statements of one user's keyspace."""

    def __init__(self, session, ks: str):
        p = session.prepare
        self.name = ks
        self.get_doc = p(f"SELECT metadata, object_id, n_parts, part_size, time, document_type, parent_id "
                         f"FROM {ks}.librarian_documents WHERE id = ?")
        self.insert_doc = p(f"INSERT INTO {ks}.librarian_documents (id, parent_id, document_type, time, size, sha256, "
                            f"object_id, n_parts, part_size, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                            f"IF NOT EXISTS")
        self.delete_doc = p(f"DELETE FROM {ks}.librarian_documents WHERE id = ?")
        self.insert_part = p(f"INSERT INTO {ks}.librarian_parts (object_id, bucket, part, data) VALUES (?, ?, ?, ?)")
        self.get_parts = p(f"SELECT part, data FROM {ks}.librarian_parts WHERE object_id = ? AND bucket = ?")
        self.delete_bucket = p(f"DELETE FROM {ks}.librarian_parts WHERE object_id = ? AND bucket = ?")
        self.insert_by_type = p(f"INSERT INTO {ks}.librarian_by_type (document_type, time, id) VALUES (?, ?, ?)")
        self.delete_by_type = p(f"DELETE FROM {ks}.librarian_by_type WHERE document_type = ? AND time = ? AND id = ?")
        self.list_by_type = p(f"SELECT time, id FROM {ks}.librarian_by_type WHERE document_type = ?")
        self.insert_child = p(f"INSERT INTO {ks}.librarian_children (parent_id, id) VALUES (?, ?)")
        self.delete_child = p(f"DELETE FROM {ks}.librarian_children WHERE parent_id = ? AND id = ?")
        self.list_children = p(f"SELECT id FROM {ks}.librarian_children WHERE parent_id = ?")
        for stmt in (self.get_doc, self.get_parts, self.list_by_type, self.list_children, self.delete_doc,
                     self.delete_bucket, self.delete_by_type, self.delete_child, self.insert_part,
                     self.insert_by_type, self.insert_child):
            stmt.is_idempotent = True  # safe for the driver to retry


class _Stored:
    """A document row: metadata plus where its parts are."""

    __slots__ = ("meta", "object_id", "n_parts", "part_size")

    def __init__(self, row):
        self.meta = metadata_from_json(row.metadata)
        self.object_id = row.object_id
        self.n_parts = row.n_parts
        self.part_size = row.part_size


class CassandraLibrarianStore:
    """Librarian store on Cassandra; one keyspace per user.

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

    def _ks(self, user: str) -> _Keyspace:
        user = _user(user)
        ks_name = storage_name(self.keyspace_prefix, user)
        with self._lock:
            ks = self._keyspaces.get(ks_name)
        if ks is not None:
            return ks
        with cassandra_errors(f"librarian schema set-up for user {user!r}"):
            ensure_keyspace(self._session, ks_name, self.config.replication_factor)
            for ddl in _TABLES:
                self._session.execute(ddl.format(ks=ks_name), timeout=DDL_TIMEOUT)
            ks = _Keyspace(self._session, ks_name)
        with self._lock:
            self._keyspaces[ks_name] = ks
        return ks

    def _concurrent(self, statement, params: list[tuple]) -> list:
        """Run one prepared statement over many parameter tuples, ``CONCURRENCY`` at a time; raise the first error."""
        from cassandra.concurrent import execute_concurrent_with_args

        if not params:
            return []
        results = execute_concurrent_with_args(self._session, statement, params, concurrency=CONCURRENCY,
                                               raise_on_first_error=True)
        return [r.result_or_exc for r in results]

    def _stored(self, ks: _Keyspace, document_id: str) -> _Stored | None:
        row = self._session.execute(ks.get_doc, (document_id,)).one()
        return _Stored(row) if row is not None else None

    def _require(self, ks: _Keyspace, user: str, document_id: str) -> _Stored:
        stored = self._stored(ks, document_id)
        if stored is None:
            raise NotFound(f"document {document_id[:200]!r} not found for user {user!r}")
        return stored

    def _fetch_many(self, ks: _Keyspace, ids: list[str]) -> list[_Stored | None]:
        """Document rows of ``ids`` (``None`` for missing), by concurrent single-partition reads."""
        rows = self._concurrent(ks.get_doc, [(i,) for i in ids])
        return [_Stored(r.one()) if r.one() is not None else None for r in rows]

    # ------------------------------------------------------------------ writes

    def add_document(self, user: str, meta: DocumentMetadata, content: bytes) -> DocumentMetadata:
        """Store a top-level ``source`` or ``answer`` document; idempotent for identical content.

        :param user: owner of the document.
        :param meta: metadata; ``id`` is required.
        :param content: the bytes, stored in parts of ``part_size``.
        :returns: the stored metadata (with ``size``, ``sha256`` and ``time`` set).
        :raises DocumentExists: the id exists with other content.
        """
        prepared = prepare_metadata(meta, content, "", TOP_LEVEL_TYPES)
        return self._add(user, prepared, bytes(content))

    def add_child(self, user: str, parent_id: str, meta: DocumentMetadata, content: bytes) -> DocumentMetadata:
        """Store a ``page``, ``chunk`` or ``answer`` child of an existing document.

        :raises NotFound: the parent does not exist.
        :raises DocumentExists: the id exists with other content or another parent.
        """
        prepared = prepare_metadata(meta, content, parent_id, CHILD_TYPES)
        return self._add(user, prepared, bytes(content))

    def _index_rows(self, ks: _Keyspace, meta: DocumentMetadata) -> None:
        self._session.execute(ks.insert_by_type, (meta.document_type, meta.time, meta.id))
        if meta.parent_id:
            self._session.execute(ks.insert_child, (meta.parent_id, meta.id))

    def _add(self, user: str, meta: DocumentMetadata, content: bytes) -> DocumentMetadata:
        ks = self._ks(user)
        what = f"librarian add of {meta.id[:120]!r} for user {user!r}"
        with cassandra_errors(what):
            existing = self._stored(ks, meta.id)
            if existing is not None:
                return self._readd(ks, existing.meta, meta)
            if meta.parent_id and self._stored(ks, meta.parent_id) is None:
                raise NotFound(f"parent document {meta.parent_id[:200]!r} not found for user {user!r}")
        from cassandra import ConsistencyLevel

        object_id = uuid.uuid4()
        parts = split_parts(content, self.part_size)
        try:
            with cassandra_errors(what):
                self._concurrent(ks.insert_part, [(object_id, i // PARTS_PER_BUCKET, i, part)
                                                  for i, part in enumerate(parts)])
                self._index_rows(ks, meta)
                insert = ks.insert_doc.bind((meta.id, meta.parent_id, meta.document_type, meta.time, meta.size,
                                             meta.sha256, object_id, len(parts), self.part_size,
                                             metadata_to_json(meta)))
                insert.serial_consistency_level = ConsistencyLevel.LOCAL_SERIAL
                try:
                    result = self._session.execute(insert)
                except Exception:
                    # an LWT timeout is ambiguous: look whether our row made it
                    stored = self._stored(ks, meta.id)
                    if stored is not None and stored.object_id == object_id:
                        return meta
                    raise
        except BaseException:
            self._cleanup_failed_add(ks, meta, object_id, len(parts))
            raise
        if result.was_applied:
            return meta
        with cassandra_errors(what):  # lost a race against a concurrent add of the same id
            winner = self._stored(ks, meta.id)
            self._discard(ks, meta, object_id, len(parts), winner.meta if winner else None)
            if winner is None:
                raise StoreUnavailable(f"{what}: the document changed concurrently; retry")
            return self._readd(ks, winner.meta, meta)

    def _readd(self, ks: _Keyspace, existing: DocumentMetadata, new: DocumentMetadata) -> DocumentMetadata:
        """Idempotent re-add (re-writing the index rows heals an earlier interrupted add) or :class:`DocumentExists`."""
        if not same_document(existing, new):
            raise DocumentExists(exists_message(existing, new))
        self._index_rows(ks, existing)
        return existing

    def _cleanup_failed_add(self, ks: _Keyspace, meta: DocumentMetadata, object_id: uuid.UUID, n_parts: int) -> None:
        """After a failed add, remove what it wrote unless its metadata row did land (or the state is unknown)."""
        try:
            current = self._stored(ks, meta.id)
        except Exception:  # noqa: BLE001 - state unknown: leave everything; readers skip leftovers
            return
        if current is None or current.object_id != object_id:
            self._discard(ks, meta, object_id, n_parts, current.meta if current else None)

    def _discard(self, ks: _Keyspace, meta: DocumentMetadata, object_id: uuid.UUID, n_parts: int,
                 winner: DocumentMetadata | None) -> None:
        """Best-effort removal of what a failed or losing add wrote, never the index rows ``winner`` owns.

        ``winner`` is the document now stored under the id (``None`` if none); index rows keyed
        like the winner's are shared with it and stay.
        """
        try:
            self._concurrent(ks.delete_bucket, [(object_id, b) for b in range(_buckets(n_parts))])
            if winner is None or (winner.document_type, winner.time) != (meta.document_type, meta.time):
                self._session.execute(ks.delete_by_type, (meta.document_type, meta.time, meta.id))
            if meta.parent_id and (winner is None or winner.parent_id != meta.parent_id):
                self._session.execute(ks.delete_child, (meta.parent_id, meta.id))
        except Exception:  # noqa: BLE001 - readers ignore leftovers; the original error matters more
            pass

    def remove_document(self, user: str, document_id: str, include_children: bool = True) -> int:
        """Remove a document and, with ``include_children``, all its descendants (deepest first).

        :returns: the number of documents removed.
        :raises NotFound: the document does not exist.
        :raises InvalidQuery: ``include_children`` is false and the document has children.
        """
        check_document_id(document_id)
        ks = self._ks(user)
        with cassandra_errors(f"librarian remove of {document_id[:120]!r} for user {user!r}"):
            root = self._require(ks, user, document_id)
            order = [root]  # breadth-first; removed in reverse so a parent never goes before its children
            i = 0
            while i < len(order):
                order.extend(self._children(ks, order[i].meta.id))
                i += 1
                if len(order) > 1 and not include_children:
                    raise InvalidQuery(f"document {document_id[:200]!r} has children; remove them too with "
                                       f"include_children=True")
            for stored in reversed(order):
                self._remove_one(ks, stored)
        return len(order)

    def _remove_one(self, ks: _Keyspace, stored: _Stored) -> None:
        from cassandra.query import BatchStatement, BatchType

        meta = stored.meta
        batch = BatchStatement(batch_type=BatchType.LOGGED)  # row and its index entries vanish together
        batch.add(ks.delete_doc, (meta.id,))
        batch.add(ks.delete_by_type, (meta.document_type, meta.time, meta.id))
        if meta.parent_id:
            batch.add(ks.delete_child, (meta.parent_id, meta.id))
        self._session.execute(batch)
        self._concurrent(ks.delete_bucket, [(stored.object_id, b) for b in range(_buckets(stored.n_parts))])

    # ------------------------------------------------------------------ reads

    def get_metadata(self, user: str, document_id: str) -> DocumentMetadata:
        """Metadata of one document.

        :raises NotFound: the document does not exist.
        """
        check_document_id(document_id)
        ks = self._ks(user)
        with cassandra_errors(f"librarian read of {document_id[:120]!r} for user {user!r}"):
            return self._require(ks, user, document_id).meta

    def get_content(self, user: str, document_id: str) -> bytes:
        """The whole content, verified against the stored sha256.

        :raises NotFound: the document does not exist.
        :raises ContentCorrupt: the stored bytes do not match their sha256.
        """
        stored, ks = self._lookup(user, document_id)
        what = f"librarian read of {document_id[:120]!r} for user {user!r}"
        with cassandra_errors(what):
            pages = self._concurrent(ks.get_parts, [(stored.object_id, b) for b in range(_buckets(stored.n_parts))])
            parts = [row.data for page in pages for row in page]
        return b"".join(rechunk(iter(parts), max(1, stored.meta.size), stored.meta.sha256, stored.meta.size,
                                document_id))

    def _lookup(self, user: str, document_id: str) -> tuple[_Stored, _Keyspace]:
        check_document_id(document_id)
        ks = self._ks(user)
        with cassandra_errors(f"librarian read of {document_id[:120]!r} for user {user!r}"):
            return self._require(ks, user, document_id), ks

    def stream_content(self, user: str, document_id: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        """Yield the content in ``chunk_size`` chunks (at least one, possibly empty), reading a few parts at a time.

        The document is looked up before the first chunk is requested, so an unknown id
        raises :class:`NotFound` from this call itself.
        """
        check_chunk_size(chunk_size)
        stored, ks = self._lookup(user, document_id)
        what = f"librarian stream of {document_id[:120]!r} for user {user!r}"
        # about 1 MiB of parts per page keeps native-protocol frames small
        fetch = max(1, (1 << 20) // stored.part_size)

        def parts() -> Iterator[bytes]:
            for bucket in range(_buckets(stored.n_parts)):
                with cassandra_errors(what):
                    statement = ks.get_parts.bind((stored.object_id, bucket))
                    statement.fetch_size = fetch
                    rows = iter(self._session.execute(statement))
                while True:
                    with cassandra_errors(what):
                        row = next(rows, None)
                    if row is None:
                        break
                    yield row.data

        return rechunk(parts(), chunk_size, stored.meta.sha256, stored.meta.size, document_id)

    def _children(self, ks: _Keyspace, parent_id: str) -> list[_Stored]:
        ids = [r.id for r in self._session.execute(ks.list_children, (parent_id,))]
        return [s for s in self._fetch_many(ks, ids) if s is not None and s.meta.parent_id == parent_id]

    def list_documents(self, user: str, document_type: str = SOURCE, limit: int = 1000) -> list[DocumentMetadata]:
        """Documents of one type, newest first (one partition read plus concurrent row reads).

        :param document_type: ``source``, ``page``, ``chunk`` or ``answer``.
        :param limit: at most this many (1 to 100,000).
        """
        check_document_type(document_type)
        check_limit(limit)
        ks = self._ks(user)
        out: list[DocumentMetadata] = []
        with cassandra_errors(f"librarian listing for user {user!r}"):
            statement = ks.list_by_type.bind((document_type,))
            statement.fetch_size = min(limit, 5000)
            entries = iter(self._session.execute(statement))
            while len(out) < limit:
                batch = [e for _, e in zip(range(min(limit - len(out), 5000)), entries)]
                if not batch:
                    break
                for entry, stored in zip(batch, self._fetch_many(ks, [e.id for e in batch])):
                    # skip leftovers of interrupted adds/removes: the document row is the truth
                    if stored is not None and stored.meta.document_type == document_type \
                            and stored.meta.time == entry.time:
                        out.append(stored.meta)
        return out

    def list_children(self, user: str, parent_id: str) -> list[DocumentMetadata]:
        """Direct children of a document, ordered by id.

        :raises NotFound: the parent does not exist.
        """
        check_document_id(parent_id, "parent id")
        ks = self._ks(user)
        with cassandra_errors(f"librarian listing of children of {parent_id[:120]!r} for user {user!r}"):
            self._require(ks, user, parent_id)
            return [s.meta for s in self._children(ks, parent_id)]


def _buckets(n_parts: int) -> int:
    """How many part partitions ``n_parts`` parts occupy."""
    return (n_parts + PARTS_PER_BUCKET - 1) // PARTS_PER_BUCKET
