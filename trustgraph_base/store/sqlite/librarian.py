"""SQLite librarian store: one WAL-mode file per user, content in bounded blob parts.

Each add runs in one ``BEGIN IMMEDIATE`` transaction (parts first, metadata row last), so a
failure half-way leaves nothing behind and concurrent adds of the same id are serialised by
SQLite itself.  A connection per user file is shared by threads under a lock (the services
call the store through ``asyncio.to_thread``); other processes may open the same file.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from ...schema.library import SOURCE, DocumentMetadata
from ..errors import InvalidQuery, NotFound, StoreUnavailable
from ..librarian import (
    CHILD_TYPES, DEFAULT_PART_SIZE, TOP_LEVEL_TYPES, ContentCorrupt, DocumentExists, check_chunk_size,
    check_document_id, check_document_type, check_limit, check_part_size, exists_message, metadata_from_json, metadata_to_json,
    prepare_metadata, rechunk, same_document, sha256_hex, split_parts,
)
from ..names import InvalidName, check_user, user_file

__all__ = ["SqliteLibrarianStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS librarian_documents (
    id            TEXT PRIMARY KEY,
    parent_id     TEXT NOT NULL,
    document_type TEXT NOT NULL,
    time          REAL NOT NULL,
    size          INTEGER NOT NULL,
    sha256        TEXT NOT NULL,
    n_parts       INTEGER NOT NULL,
    metadata      BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS librarian_documents_by_type ON librarian_documents (document_type, time DESC, id);
CREATE INDEX IF NOT EXISTS librarian_documents_by_parent ON librarian_documents (parent_id, id);
CREATE TABLE IF NOT EXISTS librarian_parts (
    document_id TEXT NOT NULL,
    part        INTEGER NOT NULL,
    data        BLOB NOT NULL,
    PRIMARY KEY (document_id, part)
) WITHOUT ROWID;
"""


class _UserDb:
    """One user's open file: a connection shared by threads under ``lock``."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self.conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(_SCHEMA)

    def close(self) -> None:
        with self.lock:
            self.conn.close()


def _user(user: str) -> str:
    try:
        return check_user(user)
    except InvalidName as e:
        raise InvalidQuery(str(e)) from None


class SqliteLibrarianStore:
    """Librarian store on SQLite files under ``home/librarian/`` (``$TG_HOME`` by default).

    :param home: data directory (default :func:`~trustgraph_base.store.names.tg_home`).
    :param part_size: bytes per stored content part (default 256 KiB).
    """

    backend = "sqlite"

    def __init__(self, home: str | Path | None = None, part_size: int = DEFAULT_PART_SIZE):
        self.home = Path(home) if home is not None else None
        self.part_size = check_part_size(part_size)
        self._dbs: dict[str, _UserDb] = {}
        self._lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------ connections

    def _db(self, user: str, create: bool) -> _UserDb | None:
        """The user's open database; ``None`` when it does not exist and ``create`` is false."""
        user = _user(user)
        with self._lock:
            if self._closed:
                raise StoreUnavailable("librarian store is closed")
            db = self._dbs.get(user)
            if db is not None:
                return db
            path = user_file("librarian", user, home=self.home)
            if not create and not path.exists():
                return None
            try:
                db = _UserDb(path)
            except sqlite3.Error as e:
                raise StoreUnavailable(f"cannot open librarian file {path}: {e}") from e
            self._dbs[user] = db
            return db

    def close(self) -> None:
        """Close every open file."""
        with self._lock:
            self._closed = True
            dbs, self._dbs = list(self._dbs.values()), {}
        for db in dbs:
            db.close()

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

    def _add(self, user: str, meta: DocumentMetadata, content: bytes) -> DocumentMetadata:
        db = self._db(user, create=True)
        parts = split_parts(content, self.part_size)
        blob = metadata_to_json(meta)
        with db.lock:
            conn = db.conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    row = conn.execute("SELECT metadata FROM librarian_documents WHERE id = ?", (meta.id,)).fetchone()
                    if row is not None:
                        existing = metadata_from_json(row[0])
                        conn.execute("ROLLBACK")
                        if same_document(existing, meta):
                            return existing
                        raise DocumentExists(exists_message(existing, meta))
                    if meta.parent_id and conn.execute("SELECT 1 FROM librarian_documents WHERE id = ?",
                                                       (meta.parent_id,)).fetchone() is None:
                        conn.execute("ROLLBACK")
                        raise NotFound(f"parent document {meta.parent_id[:200]!r} not found for user {user!r}")
                    conn.executemany("INSERT INTO librarian_parts (document_id, part, data) VALUES (?, ?, ?)",
                                     ((meta.id, i, part) for i, part in enumerate(parts)))
                    conn.execute(
                        "INSERT INTO librarian_documents (id, parent_id, document_type, time, size, sha256, n_parts, "
                        "metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (meta.id, meta.parent_id, meta.document_type, meta.time, meta.size, meta.sha256,
                         len(parts), blob))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise StoreUnavailable(f"librarian write failed for user {user!r}: {e}") from e
        return meta

    def remove_document(self, user: str, document_id: str, include_children: bool = True) -> int:
        """Remove a document and, with ``include_children``, all its descendants.

        :returns: the number of documents removed.
        :raises NotFound: the document does not exist.
        :raises InvalidQuery: ``include_children`` is false and the document has children
            (removing it alone would orphan them).
        """
        check_document_id(document_id)
        db = self._db(user, create=False)
        if db is None:
            raise NotFound(f"document {document_id[:200]!r} not found for user {user!r}")
        with db.lock:
            conn = db.conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    ids = [r[0] for r in conn.execute(
                        "WITH RECURSIVE tree(id) AS (SELECT id FROM librarian_documents WHERE id = ? "
                        "UNION SELECT d.id FROM librarian_documents d JOIN tree ON d.parent_id = tree.id) "
                        "SELECT id FROM tree", (document_id,))]
                    if not ids:
                        conn.execute("ROLLBACK")
                        raise NotFound(f"document {document_id[:200]!r} not found for user {user!r}")
                    if len(ids) > 1 and not include_children:
                        conn.execute("ROLLBACK")
                        raise InvalidQuery(f"document {document_id[:200]!r} has {len(ids) - 1} descendant(s); "
                                           f"remove them too with include_children=True")
                    # metadata rows first: the documents disappear at once, parts follow in the same transaction
                    conn.executemany("DELETE FROM librarian_documents WHERE id = ?", ((i,) for i in ids))
                    conn.executemany("DELETE FROM librarian_parts WHERE document_id = ?", ((i,) for i in ids))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise StoreUnavailable(f"librarian remove failed for user {user!r}: {e}") from e
        return len(ids)

    # ------------------------------------------------------------------ reads

    def _row(self, db: _UserDb | None, user: str, document_id: str) -> tuple[DocumentMetadata, int]:
        if db is None:
            raise NotFound(f"document {document_id[:200]!r} not found for user {user!r}")
        with db.lock:
            row = self._query(db, "SELECT metadata, n_parts FROM librarian_documents WHERE id = ?",
                              (document_id,)).fetchone()
        if row is None:
            raise NotFound(f"document {document_id[:200]!r} not found for user {user!r}")
        return metadata_from_json(row[0]), row[1]

    @staticmethod
    def _query(db: _UserDb, sql: str, args: tuple):
        try:
            return db.conn.execute(sql, args)
        except sqlite3.Error as e:
            raise StoreUnavailable(f"librarian read failed: {e}") from e

    def get_metadata(self, user: str, document_id: str) -> DocumentMetadata:
        """Metadata of one document.

        :raises NotFound: the document does not exist.
        """
        check_document_id(document_id)
        return self._row(self._db(user, create=False), user, document_id)[0]

    def get_content(self, user: str, document_id: str) -> bytes:
        """The whole content, verified against the stored sha256.

        :raises NotFound: the document does not exist.
        :raises ContentCorrupt: the stored bytes do not match their sha256.
        """
        check_document_id(document_id)
        db = self._db(user, create=False)
        meta, n_parts = self._row(db, user, document_id)
        with db.lock:
            parts = [r[0] for r in self._query(
                db, "SELECT data FROM librarian_parts WHERE document_id = ? ORDER BY part", (document_id,))]
        content = b"".join(parts)
        if len(parts) != n_parts or len(content) != meta.size or sha256_hex(content) != meta.sha256:
            raise ContentCorrupt(f"content of document {document_id[:80]!r} is corrupt: {len(parts)} of {n_parts} "
                                 f"parts, {len(content)} of {meta.size} bytes")
        return content

    def stream_content(self, user: str, document_id: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        """Yield the content in ``chunk_size`` chunks (at least one, possibly empty), reading one part at a time.

        The document is looked up before the first chunk is requested, so an unknown id
        raises :class:`NotFound` from this call itself.

        :raises ContentCorrupt: (while iterating) the parts do not match the stored sha256.
        """
        check_document_id(document_id)
        check_chunk_size(chunk_size)
        db = self._db(user, create=False)
        meta, n_parts = self._row(db, user, document_id)

        def parts() -> Iterator[bytes]:
            for i in range(n_parts):
                with db.lock:
                    row = self._query(db, "SELECT data FROM librarian_parts WHERE document_id = ? AND part = ?",
                                      (document_id, i)).fetchone()
                if row is None:
                    raise ContentCorrupt(f"part {i} of document {document_id[:80]!r} is missing "
                                         f"(removed while streaming?)")
                yield row[0]

        return rechunk(parts(), chunk_size, meta.sha256, meta.size, document_id)

    def list_documents(self, user: str, document_type: str = SOURCE, limit: int = 1000) -> list[DocumentMetadata]:
        """Documents of one type, newest first.

        :param document_type: ``source``, ``page``, ``chunk`` or ``answer``.
        :param limit: at most this many (1 to 100,000).
        """
        check_document_type(document_type)
        check_limit(limit)
        db = self._db(user, create=False)
        if db is None:
            return []
        with db.lock:
            rows = self._query(db, "SELECT metadata FROM librarian_documents WHERE document_type = ? "
                                   "ORDER BY time DESC, id LIMIT ?", (document_type, limit)).fetchall()
        return [metadata_from_json(r[0]) for r in rows]

    def list_children(self, user: str, parent_id: str) -> list[DocumentMetadata]:
        """Direct children of a document, ordered by id.

        :raises NotFound: the parent does not exist.
        """
        check_document_id(parent_id, "parent id")
        db = self._db(user, create=False)
        self._row(db, user, parent_id)
        with db.lock:
            rows = self._query(db, "SELECT metadata FROM librarian_documents WHERE parent_id = ? ORDER BY id",
                               (parent_id,)).fetchall()
        return [metadata_from_json(r[0]) for r in rows]

