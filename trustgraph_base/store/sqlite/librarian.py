"""SQLite librarian store: one WAL-mode file per user, content in bounded blob parts.

The collection is the first column of every primary key and index, so each collection of the
user is a separate key range of the same file: reads of one never see another's rows, and
:meth:`SqliteLibrarianStore.delete_collection` is two range deletes.

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
from typing import Any, Literal, overload

from ...schema.library import SOURCE, DocumentMetadata
from ..errors import InvalidQuery, StoreUnavailable
from ..librarian import (
    DEFAULT_PART_SIZE,
    ContentCorrupt,
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
    sha256_hex,
    split_parts,
)
from ..names import check_names, tg_home, user_file
from .environment import check_data_dir, make_parent, store_file_exists, unavailable
from .wal import open_database

__all__ = ["SqliteLibrarianStore"]

# Table names differ from those of the user-scoped schema without collections (``librarian_*``),
# so a file in that layout is never read with the wrong key layout.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS library_documents (
    collection    TEXT NOT NULL,
    id            TEXT NOT NULL,
    parent_id     TEXT NOT NULL,
    document_type TEXT NOT NULL,
    time          REAL NOT NULL,
    size          INTEGER NOT NULL,
    sha256        TEXT NOT NULL,
    n_parts       INTEGER NOT NULL,
    metadata      BLOB NOT NULL,
    PRIMARY KEY (collection, id)
);
CREATE INDEX IF NOT EXISTS library_documents_by_type ON library_documents (collection, document_type, time DESC, id);
CREATE INDEX IF NOT EXISTS library_documents_by_parent ON library_documents (collection, parent_id, id);
CREATE INDEX IF NOT EXISTS library_documents_by_id ON library_documents (id);
CREATE TABLE IF NOT EXISTS library_parts (
    collection  TEXT NOT NULL,
    document_id TEXT NOT NULL,
    part        INTEGER NOT NULL,
    data        BLOB NOT NULL,
    PRIMARY KEY (collection, document_id, part)
) WITHOUT ROWID;
"""


class _UserDb:
    """One user's open file: a connection shared by threads under ``lock``."""

    def __init__(self, path: Path):
        make_parent(path)
        self.path = path
        self.lock = threading.RLock()
        self.conn = open_database(path, _SCHEMA)

    def close(self) -> None:
        with self.lock:
            self.conn.close()


class SqliteLibrarianStore(LibrarianStoreBase):
    """Librarian store on SQLite files under ``home/librarian/`` (``$TG_HOME`` by default).

    :param home: data directory (default :func:`~trustgraph_base.store.names.tg_home`).
    :param part_size: bytes per stored content part (default 256 KiB).
    :raises StoreEnvironmentError: the data directory is not a directory, or cannot be created or written.
    """

    backend = "sqlite"

    def __init__(self, home: str | Path | None = None, part_size: int = DEFAULT_PART_SIZE):
        self.home = Path(home) if home is not None else None
        check_data_dir(self.home if self.home is not None else tg_home())
        self.part_size = check_part_size(part_size)
        self._dbs: dict[str, _UserDb] = {}
        self._lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------ connections

    @overload
    def _db(self, user: str, create: Literal[True]) -> _UserDb: ...

    @overload
    def _db(self, user: str, create: bool) -> _UserDb | None: ...

    def _db(self, user: str, create: bool) -> _UserDb | None:
        """The (already validated) user's open database; ``None`` when it does not exist and ``create`` is false."""
        with self._lock:
            if self._closed:
                raise StoreUnavailable("librarian store is closed")
            db = self._dbs.get(user)
            if db is not None:
                return db
            path = user_file("librarian", user, home=self.home)
            if not store_file_exists(path) and not create:
                return None
            try:
                db = _UserDb(path)
            except sqlite3.Error as e:
                raise unavailable(e, path, f"cannot open librarian file {path}: {e}") from e
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

    def _add(self, user: str, collection: str, meta: DocumentMetadata, content: bytes) -> DocumentMetadata:
        db = self._db(user, create=True)
        parts = split_parts(content, self.part_size)
        blob = metadata_to_json(meta)
        with db.lock:
            conn = db.conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    row = conn.execute("SELECT metadata FROM library_documents WHERE collection = ? AND id = ?",
                                       (collection, meta.id)).fetchone()
                    if row is not None:
                        existing = metadata_from_json(row[0])
                        conn.execute("ROLLBACK")
                        if same_document(existing, meta):
                            return existing
                        raise DocumentExists(exists_message(existing, meta))
                    if meta.parent_id and conn.execute(
                            "SELECT 1 FROM library_documents WHERE collection = ? AND id = ?",
                            (collection, meta.parent_id)).fetchone() is None:
                        conn.execute("ROLLBACK")
                        raise not_found(meta.parent_id, user, collection, "parent document")
                    conn.executemany("INSERT INTO library_parts (collection, document_id, part, data) "
                                     "VALUES (?, ?, ?, ?)",
                                     ((collection, meta.id, i, part) for i, part in enumerate(parts)))
                    conn.execute(
                        "INSERT INTO library_documents (collection, id, parent_id, document_type, time, size, sha256, "
                        "n_parts, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (collection, meta.id, meta.parent_id, meta.document_type, meta.time, meta.size, meta.sha256,
                         len(parts), blob))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise unavailable(e, db.path, f"librarian write failed for user {user!r}, collection {collection!r}: "
                                               f"{e}") from e
        return meta

    def remove_document(self, user: str, collection: str, document_id: str, include_children: bool = True) -> int:
        """Remove a document and, with ``include_children``, all its descendants.

        :param user: owner of the document.
        :param collection: its collection; documents of other collections are never touched.
        :param document_id: the document to remove.
        :param include_children: remove its pages, chunks and other descendants too.
        :returns: the number of documents removed.
        :raises NotFound: the document does not exist in this collection.
        :raises InvalidQuery: ``include_children`` is false and the document has children
            (removing it alone would orphan them).
        """
        check_names(user, collection)
        check_document_id(document_id)
        db = self._db(user, create=False)
        if db is None:
            raise not_found(document_id, user, collection)
        with db.lock:
            conn = db.conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    ids = [r[0] for r in conn.execute(
                        "WITH RECURSIVE tree(id) AS ("
                        "SELECT id FROM library_documents WHERE collection = ?1 AND id = ?2 "
                        "UNION SELECT d.id FROM library_documents d JOIN tree "
                        "ON d.collection = ?1 AND d.parent_id = tree.id) "
                        "SELECT id FROM tree", (collection, document_id))]
                    if not ids:
                        conn.execute("ROLLBACK")
                        raise not_found(document_id, user, collection)
                    if len(ids) > 1 and not include_children:
                        conn.execute("ROLLBACK")
                        raise InvalidQuery(f"document {document_id[:200]!r} has {len(ids) - 1} descendant(s); "
                                           f"remove them too with include_children=True")
                    # metadata rows first: the documents disappear at once, parts follow in the same transaction
                    conn.executemany("DELETE FROM library_documents WHERE collection = ? AND id = ?",
                                     ((collection, i) for i in ids))
                    conn.executemany("DELETE FROM library_parts WHERE collection = ? AND document_id = ?",
                                     ((collection, i) for i in ids))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise unavailable(e, db.path, f"librarian remove failed for user {user!r}, collection "
                                               f"{collection!r}: {e}") from e
        return len(ids)

    def delete_collection(self, user: str, collection: str) -> int:
        """Remove every document and part of one collection in one transaction; other collections stay.

        :param user: owner of the collection.
        :param collection: the collection to empty.
        :returns: how many documents (of every type) it held; 0 for an unknown user or collection.
        """
        check_names(user, collection)
        db = self._db(user, create=False)
        if db is None:
            return 0
        with db.lock:
            conn = db.conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    removed = conn.execute("DELETE FROM library_documents WHERE collection = ?",
                                           (collection,)).rowcount
                    conn.execute("DELETE FROM library_parts WHERE collection = ?", (collection,))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise unavailable(e, db.path, f"librarian delete of collection {collection!r} failed for user "
                                               f"{user!r}: {e}") from e
        return removed

    # ------------------------------------------------------------------ reads

    def _row(self, db: _UserDb | None, user: str, collection: str, document_id: str) -> tuple[DocumentMetadata, int]:
        if db is None:
            raise not_found(document_id, user, collection)
        with db.lock:
            row = self._query(db, "SELECT metadata, n_parts FROM library_documents WHERE collection = ? AND id = ?",
                              (collection, document_id)).fetchone()
        if row is None:
            raise not_found(document_id, user, collection)
        return metadata_from_json(row[0]), row[1]

    def _document_db(self, user: str, collection: str, document_id: str) -> _UserDb:
        """The user's database, which must exist: it holds ``document_id`` (:class:`NotFound` otherwise)."""
        db = self._db(user, create=False)
        if db is None:
            raise not_found(document_id, user, collection)
        return db

    @staticmethod
    def _query(db: _UserDb, sql: str, args: tuple[Any, ...]) -> sqlite3.Cursor:
        try:
            return db.conn.execute(sql, args)
        except sqlite3.Error as e:
            raise unavailable(e, db.path, f"librarian read failed: {e}") from e

    def get_metadata(self, user: str, collection: str, document_id: str) -> DocumentMetadata:
        """Metadata of one document.

        :param user: owner of the document.
        :param collection: its collection.
        :param document_id: the document.
        :raises NotFound: the document does not exist in this collection.
        """
        check_names(user, collection)
        check_document_id(document_id)
        return self._row(self._db(user, create=False), user, collection, document_id)[0]

    def get_content(self, user: str, collection: str, document_id: str) -> bytes:
        """The whole content, verified against the stored sha256.

        :param user: owner of the document.
        :param collection: its collection.
        :param document_id: the document.
        :raises NotFound: the document does not exist in this collection.
        :raises ContentCorrupt: the stored bytes do not match their sha256.
        """
        check_names(user, collection)
        check_document_id(document_id)
        db = self._document_db(user, collection, document_id)
        meta, n_parts = self._row(db, user, collection, document_id)
        with db.lock:
            parts = [r[0] for r in self._query(
                db, "SELECT data FROM library_parts WHERE collection = ? AND document_id = ? ORDER BY part",
                (collection, document_id))]
        content = b"".join(parts)
        if len(parts) != n_parts or len(content) != meta.size or sha256_hex(content) != meta.sha256:
            raise ContentCorrupt(f"content of document {document_id[:80]!r} is corrupt: {len(parts)} of {n_parts} "
                                 f"parts, {len(content)} of {meta.size} bytes")
        return content

    def stream_content(self, user: str, collection: str, document_id: str,
                       chunk_size: int = 1 << 20) -> Iterator[bytes]:
        """Yield the content in ``chunk_size`` chunks (at least one, possibly empty), reading one part at a time.

        The document is looked up before the first chunk is requested, so an unknown id
        raises :class:`NotFound` from this call itself.

        :param user: owner of the document.
        :param collection: its collection.
        :param document_id: the document.
        :param chunk_size: bytes per yielded chunk (1 byte to 64 MiB).
        :raises ContentCorrupt: (while iterating) the parts do not match the stored sha256.
        """
        check_names(user, collection)
        check_document_id(document_id)
        check_chunk_size(chunk_size)
        db = self._document_db(user, collection, document_id)
        meta, n_parts = self._row(db, user, collection, document_id)

        def parts() -> Iterator[bytes]:
            for i in range(n_parts):
                with db.lock:
                    row = self._query(db, "SELECT data FROM library_parts WHERE collection = ? AND document_id = ? "
                                          "AND part = ?", (collection, document_id, i)).fetchone()
                if row is None:
                    raise ContentCorrupt(f"part {i} of document {document_id[:80]!r} is missing "
                                         f"(removed while streaming?)")
                yield row[0]

        return rechunk(parts(), chunk_size, meta.sha256, meta.size, document_id)

    def list_documents(self, user: str, collection: str, document_type: str = SOURCE,
                       limit: int = 1000) -> list[DocumentMetadata]:
        """Documents of one type in one collection, newest first.

        :param user: owner of the documents.
        :param collection: the collection to list.
        :param document_type: ``source``, ``page``, ``chunk`` or ``answer``.
        :param limit: at most this many (1 to 100,000).
        """
        check_names(user, collection)
        check_document_type(document_type)
        check_limit(limit)
        db = self._db(user, create=False)
        if db is None:
            return []
        with db.lock:
            rows = self._query(db, "SELECT metadata FROM library_documents WHERE collection = ? AND document_type = ? "
                                   "ORDER BY time DESC, id LIMIT ?", (collection, document_type, limit)).fetchall()
        return [metadata_from_json(r[0]) for r in rows]

    def count_descendants(self, user: str, collection: str, document_ids: list[str]) -> dict[str, tuple[int, int]]:
        """``id → (children, grandchildren)`` of each document (0, 0 for an unknown one), through the parent index.

        :param user: owner of the documents.
        :param collection: their collection.
        :param document_ids: the documents to count for.
        """
        check_names(user, collection)
        for document_id in document_ids:
            check_document_id(document_id)
        db = self._db(user, create=False)
        if db is None:
            return {d: (0, 0) for d in document_ids}
        out = {}
        with db.lock:
            for document_id in document_ids:
                out[document_id] = tuple(self._query(
                    db, "SELECT (SELECT count(*) FROM library_documents WHERE collection = ?1 AND parent_id = ?2), "
                        "(SELECT count(*) FROM library_documents AS c JOIN library_documents AS p "
                        "ON c.collection = ?1 AND c.parent_id = p.id WHERE p.collection = ?1 AND p.parent_id = ?2)",
                    (collection, document_id)).fetchone())
        return out

    def list_children(self, user: str, collection: str, parent_id: str) -> list[DocumentMetadata]:
        """Direct children of a document, ordered by id.

        :param user: owner of the document.
        :param collection: its collection.
        :param parent_id: the parent document.
        :raises NotFound: the parent does not exist in this collection.
        """
        check_names(user, collection)
        check_document_id(parent_id, "parent id")
        db = self._document_db(user, collection, parent_id)
        self._row(db, user, collection, parent_id)
        with db.lock:
            rows = self._query(db, "SELECT metadata FROM library_documents WHERE collection = ? AND parent_id = ? "
                                   "ORDER BY id", (collection, parent_id)).fetchall()
        return [metadata_from_json(r[0]) for r in rows]

    def find_document(self, user: str, document_id: str) -> list[str]:
        """The user's collections that hold a document with this id, sorted.

        :param user: owner of the documents.
        :param document_id: the document.
        """
        check_names(user)
        check_document_id(document_id)
        db = self._db(user, create=False)
        if db is None:
            return []
        with db.lock:
            rows = self._query(db, "SELECT collection FROM library_documents WHERE id = ? ORDER BY collection",
                               (document_id,)).fetchall()
        return [r[0] for r in rows]
