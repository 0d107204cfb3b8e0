"""SQLite vector index: vectors stored in the user's SQLite file, searched through an in-memory HNSW graph.

Why a graph and not a numpy scan: an exact scan reads every vector on every query, so it is
bound by memory bandwidth and slows down when other processes compete for it (numpy float16
is slower still: its conversions are not vectorised).  A ``usearch`` HNSW graph (f16 storage,
M=16) answers an order of magnitude faster with recall ≈ 0.999 (figures in
``bench/README.md``), at the price of graph insertion on write; that is the trade-off
Cassandra's SAI makes as well, so both backends behave alike.

* SQLite holds the truth: unit-length float32 blobs keyed by an integer ``key`` (the graph's
  key), the model record and a ``(generation, version)`` stamp bumped by every write.
* The graph of one (file, kind, collection) lives once per process (shared by every
  :class:`SqliteVectorIndex` on the file), is updated in place by this process's writes and
  rebuilt from SQLite when the stamp shows another process wrote.  ``close()`` saves it
  beside the file with its stamp, so a restart reloads it instead of rebuilding.
* Small graphs (up to :data:`EXACT_SEARCH_MAX_VALUES` stored numbers) are searched
  exhaustively: exact ranking costs under a millisecond there, while HNSW can miss a true
  nearest neighbour (seen in CI: 300 random 32-dimension vectors, ef 64).
* Hits are re-scored exactly (float64 cosine of the stored float32 vectors), from at least
  :data:`RESCORE_CANDIDATES` candidates, so float16 rounding cannot reorder near-ties.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np

from ..errors import StoreUnavailable
from ..names import check_names, tg_home, user_file
from ..vectors import (
    IndexInfo,
    VectorHit,
    VectorIndexBase,
    VectorItem,
    check_item_id,
    check_kind,
    require_model,
    unique_ids,
)
from .environment import check_data_dir, make_parent, store_file_exists, unavailable
from .wal import open_database

__all__ = ["SqliteVectorIndex", "HNSW_CONNECTIVITY", "HNSW_EXPANSION_ADD", "HNSW_EXPANSION_SEARCH",
           "EXACT_SEARCH_MAX_VALUES", "RESCORE_CANDIDATES"]

#: Graph degree (M).
HNSW_CONNECTIVITY = 16
#: Beam width while inserting (ef_construction).
HNSW_EXPANSION_ADD = 128
#: Beam width while searching (ef); a search asks for at least this many candidates.
HNSW_EXPANSION_SEARCH = 64
#: Graphs holding at most this many numbers (vectors x dimensions) are searched exhaustively:
#: below it an exact search costs about as much as the graph search (``bench/README.md``).
EXACT_SEARCH_MAX_VALUES = 4_000_000
#: Fewest candidates a search takes from the graph before the exact re-scoring keeps ``limit``.
RESCORE_CANDIDATES = 16

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vector_index (
    kind       TEXT NOT NULL,
    collection TEXT NOT NULL,
    model_id   TEXT NOT NULL,
    dimension  INTEGER NOT NULL,
    generation TEXT NOT NULL,
    version    INTEGER NOT NULL,
    PRIMARY KEY (kind, collection)
);
CREATE TABLE IF NOT EXISTS vectors (
    key         INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL,
    collection  TEXT NOT NULL,
    id          TEXT NOT NULL,
    label       TEXT NOT NULL,
    document_id TEXT NOT NULL,
    vector      BLOB NOT NULL,
    source      BLOB NOT NULL DEFAULT x'',
    UNIQUE (kind, collection, id)
);
CREATE INDEX IF NOT EXISTS vectors_by_document ON vectors (kind, collection, document_id);
"""


class _Graph:
    """The in-memory HNSW graph of one (file, kind, collection) and the stamp of the data it reflects."""

    def __init__(self, dimension: int, generation: str):
        from usearch.index import Index

        self.index = Index(ndim=dimension, metric="cos", dtype="f16", connectivity=HNSW_CONNECTIVITY,
                           expansion_add=HNSW_EXPANSION_ADD, expansion_search=HNSW_EXPANSION_SEARCH)
        self.dimension = dimension
        self.generation = generation
        self.version = -1
        self.dirty = False

    def add(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        """Insert vectors under ``keys``, replacing those already present."""
        if len(keys):
            self.remove(keys)
            self.index.add(keys, vectors, threads=os.cpu_count() or 1)

    def remove(self, keys: Sequence[int] | np.ndarray) -> None:
        """Remove the present ones of ``keys``."""
        if len(self.index) == 0:
            return
        keys = np.asarray(keys, dtype=np.uint64)
        present = keys[np.asarray(self.index.contains(keys), dtype=bool)]
        if len(present):
            self.index.remove(present)


# Graphs are shared by every index object of the process: (file, kind, collection) -> graph.
_GRAPHS: dict[tuple[str, str, str], _Graph] = {}
# One lock per (file, kind, collection) serialises writers and graph (re)loads.
_LOCKS: dict[tuple[str, str, str], threading.Lock] = {}
_REGISTRY_LOCK = threading.Lock()


def _graph_lock(key: tuple[str, str, str]) -> threading.Lock:
    with _REGISTRY_LOCK:
        return _LOCKS.setdefault(key, threading.Lock())


def _add_source_column(conn: sqlite3.Connection) -> None:
    """Give a file written before vectors kept their source mark the ``source`` column (empty marks)."""
    def has_it() -> bool:
        return any(row[1] == "source" for row in conn.execute("PRAGMA table_info(vectors)"))

    if not has_it():
        try:
            conn.execute("ALTER TABLE vectors ADD COLUMN source BLOB NOT NULL DEFAULT x''")
        except sqlite3.OperationalError:
            if not has_it():  # else another process added it first
                raise


class _UserDb:
    """One user's open vectors file: a connection shared by threads under ``lock``."""

    def __init__(self, path: Path):
        make_parent(path)
        self.path = path
        self.lock = threading.RLock()
        self.conn = open_database(path, _SCHEMA)
        try:
            _add_source_column(self.conn)
        except BaseException:
            self.conn.close()
            raise

    def close(self) -> None:
        with self.lock:
            self.conn.close()


class SqliteVectorIndex(VectorIndexBase):
    """Vector index of one kind on SQLite files under ``home/vectors/`` (``$TG_HOME`` by default).

    :param kind: ``"graph"`` or ``"document"``.
    :param home: data directory (default :func:`~trustgraph_base.store.names.tg_home`).
    :raises StoreEnvironmentError: the data directory is not a directory, or cannot be created or written.
    """

    backend = "sqlite"

    def __init__(self, kind: str = "graph", home: str | Path | None = None):
        self.kind = check_kind(kind)
        self.home = Path(home) if home is not None else None
        check_data_dir(self.home if self.home is not None else tg_home())
        self._dbs: dict[str, _UserDb] = {}
        self._lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------ plumbing

    @overload
    def _db(self, user: str, create: Literal[True]) -> _UserDb: ...

    @overload
    def _db(self, user: str, create: bool) -> _UserDb | None: ...

    def _db(self, user: str, create: bool) -> _UserDb | None:
        with self._lock:
            if self._closed:
                raise StoreUnavailable("vector index is closed")
            db = self._dbs.get(user)
            if db is not None:
                return db
            path = user_file("vectors", user, home=self.home)
            if not store_file_exists(path) and not create:
                return None
            try:
                db = _UserDb(path)
            except sqlite3.Error as e:
                raise unavailable(e, path, f"cannot open vectors file {path}: {e}") from e
            self._dbs[user] = db
            return db

    def _key(self, db: _UserDb, collection: str) -> tuple[str, str, str]:
        return str(db.path), self.kind, collection

    def _snapshot_path(self, db: _UserDb, collection: str) -> Path:
        digest = hashlib.sha256(collection.encode()).hexdigest()[:16]
        return db.path.with_name(f"{db.path.stem}.{self.kind}.{digest}.usearch")

    def _info_row(self, db: _UserDb, collection: str) -> Any:
        with db.lock:
            return self._sql(db, "SELECT model_id, dimension, generation, version FROM vector_index "
                                 "WHERE kind = ? AND collection = ?", (self.kind, collection)).fetchone()

    @staticmethod
    def _sql(db: _UserDb, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        try:
            return db.conn.execute(sql, args)
        except sqlite3.Error as e:
            raise unavailable(e, db.path, f"vectors file {db.path.name}: {e}") from e

    def _graph(self, db: _UserDb, collection: str, dimension: int, generation: str, version: int) -> _Graph:
        """The collection's graph brought up to (generation, version); caller holds the collection lock."""
        key = self._key(db, collection)
        graph = _GRAPHS.get(key)
        if graph is not None and graph.generation == generation and graph.version >= version:
            return graph
        graph = self._load_snapshot(db, collection, dimension, generation, version)
        if graph is None:
            graph = _Graph(dimension, generation)
            with db.lock:
                own = not db.conn.in_transaction  # rows and version must come from one snapshot of the file
                if own:
                    self._sql(db, "BEGIN")
                try:
                    rows = self._sql(db, "SELECT key, vector FROM vectors WHERE kind = ? AND collection = ?",
                                     (self.kind, collection)).fetchall()
                    current = self._sql(db, "SELECT version FROM vector_index WHERE kind = ? AND collection = ?",
                                        (self.kind, collection)).fetchone()
                finally:
                    if own:
                        self._sql(db, "COMMIT")
            if rows:
                keys = np.fromiter((r[0] for r in rows), dtype=np.uint64, count=len(rows))
                matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), dimension)
                graph.add(keys, matrix)
            graph.version = current[0] if current else version
            graph.dirty = True
        _GRAPHS[key] = graph
        return graph

    def _load_snapshot(self, db: _UserDb, collection: str, dimension: int, generation: str,
                       version: int) -> _Graph | None:
        path = self._snapshot_path(db, collection)
        try:
            stamp = json.loads(path.with_suffix(".json").read_text())
            if stamp != {"generation": generation, "version": version, "dimension": dimension}:
                return None
            graph = _Graph(dimension, generation)
            graph.index.load(str(path))
        except (OSError, ValueError, RuntimeError):
            return None
        graph.version = version
        return graph

    def _save_snapshot(self, db: _UserDb, collection: str, graph: _Graph) -> None:
        path = self._snapshot_path(db, collection)
        stamp = path.with_suffix(".json")
        try:
            stamp.unlink(missing_ok=True)  # never leave a stamp that vouches for an older graph
            tmp = path.with_suffix(".tmp")
            graph.index.save(str(tmp))
            os.replace(tmp, path)
            stamp.write_text(json.dumps({"generation": graph.generation, "version": graph.version,
                                         "dimension": graph.dimension}))
            graph.dirty = False
        except (OSError, RuntimeError):
            pass  # a missing snapshot only costs a rebuild on the next start

    def close(self) -> None:
        """Save changed graphs beside their files (so a restart reloads them), drop them from memory, close the files.

        Other index objects of the process that still use a dropped graph reload it from
        the snapshot on their next call.
        """
        with self._lock:
            self._closed = True
            dbs, self._dbs = list(self._dbs.values()), {}
        for db in dbs:
            with _REGISTRY_LOCK:
                graphs = [(k, g) for k, g in _GRAPHS.items() if k[0] == str(db.path) and k[1] == self.kind]
            for key, graph in graphs:
                with _graph_lock(key):
                    if _GRAPHS.get(key) is graph:
                        if graph.dirty:
                            self._save_snapshot(db, key[2], graph)
                        del _GRAPHS[key]  # free the memory; the next user reloads the snapshot
            db.close()

    # ------------------------------------------------------------------ writes

    def _upsert(self, user: str, collection: str, model_id: str, chosen: list[VectorItem],
                vectors: np.ndarray) -> int:
        dimension = vectors.shape[1]
        db = self._db(user, create=True)
        with _graph_lock(self._key(db, collection)):
            with db.lock:
                conn = db.conn
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        info = conn.execute("SELECT model_id, dimension, generation, version FROM vector_index "
                                            "WHERE kind = ? AND collection = ?", (self.kind, collection)).fetchone()
                        if info is None:
                            info = (model_id, dimension, uuid.uuid4().hex, 0)
                            conn.execute("INSERT INTO vector_index (kind, collection, model_id, dimension, generation, "
                                         "version) VALUES (?, ?, ?, ?, ?, ?)", (self.kind, collection) + info)
                        require_model(self.kind, user, collection, info[0], info[1], model_id, dimension)
                        graph = self._graph(db, collection, info[1], info[2], info[3])
                        keys = np.empty(len(chosen), dtype=np.uint64)
                        for i, (item, vector) in enumerate(zip(chosen, vectors, strict=True)):
                            keys[i] = conn.execute(
                                "INSERT INTO vectors (kind, collection, id, label, document_id, vector, source) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kind, collection, id) DO UPDATE SET "
                                "label = excluded.label, document_id = excluded.document_id, vector = excluded.vector, "
                                "source = excluded.source RETURNING key",
                                (self.kind, collection, item.id, item.label, item.document_id,
                                 vector.tobytes(), item.source)).fetchone()[0]
                        version = info[3] + 1
                        conn.execute("UPDATE vector_index SET version = ? WHERE kind = ? AND collection = ?",
                                     (version, self.kind, collection))
                        conn.execute("COMMIT")
                    except BaseException:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise
                except sqlite3.Error as e:
                    raise unavailable(e, db.path, f"vector upsert failed for user {user!r}: {e}") from e
            graph.add(keys, vectors)
            graph.version = version
            graph.dirty = True
        return len(chosen)

    def _delete_where(self, user: str, collection: str, where: str, args_of: list[tuple[Any, ...]]) -> int:
        """Delete the rows matching ``where`` for each argument tuple; returns how many went."""
        check_names(user, collection)
        db = self._db(user, create=False)
        if db is None:
            return 0
        with _graph_lock(self._key(db, collection)):
            with db.lock:
                conn = db.conn
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        info = conn.execute("SELECT version FROM vector_index WHERE kind = ? AND collection = ?",
                                            (self.kind, collection)).fetchone()
                        keys: list[int] = []
                        if info is not None:
                            for args in args_of:
                                keys += [r[0] for r in conn.execute(
                                    f"DELETE FROM vectors WHERE kind = ? AND collection = ? AND {where} RETURNING key",
                                    (self.kind, collection) + args)]
                        if keys:
                            conn.execute("UPDATE vector_index SET version = version + 1 WHERE kind = ? AND "
                                         "collection = ?", (self.kind, collection))
                        conn.execute("COMMIT")
                    except BaseException:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise
                except sqlite3.Error as e:
                    raise unavailable(e, db.path, f"vector delete failed for user {user!r}: {e}") from e
            graph = _GRAPHS.get(self._key(db, collection))
            if keys and graph is not None:
                if graph.version == info[0]:
                    graph.remove(keys)
                    graph.version = info[0] + 1
                    graph.dirty = True
                else:  # it was behind another process already: let the next search rebuild it
                    _GRAPHS.pop(self._key(db, collection), None)
        return len(keys)

    def delete_ids(self, user: str, collection: str, ids: Sequence[str]) -> int:
        """Remove vectors by id.

        :returns: how many of ``ids`` existed.
        """
        return self._delete_where(user, collection, "id = ?", [(i,) for i in unique_ids(ids)])

    def delete_document(self, user: str, collection: str, document_id: str) -> int:
        """Remove every vector whose ``document_id`` is ``document_id``.

        :returns: how many were removed.
        """
        check_item_id(document_id, "document id")
        return self._delete_where(user, collection, "document_id = ?", [(document_id,)])

    def delete_collection(self, user: str, collection: str) -> int:
        """Remove the collection's vectors and its model record (a new model may be used afterwards).

        :returns: how many vectors were removed.
        """
        check_names(user, collection)
        db = self._db(user, create=False)
        if db is None:
            return 0
        key = self._key(db, collection)
        with _graph_lock(key):
            with db.lock:
                conn = db.conn
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        count = conn.execute("DELETE FROM vectors WHERE kind = ? AND collection = ?",
                                             (self.kind, collection)).rowcount
                        conn.execute("DELETE FROM vector_index WHERE kind = ? AND collection = ?",
                                     (self.kind, collection))
                        conn.execute("COMMIT")
                    except BaseException:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise
                except sqlite3.Error as e:
                    raise unavailable(e, db.path, f"vector delete failed for user {user!r}: {e}") from e
            _GRAPHS.pop(key, None)
            path = self._snapshot_path(db, collection)
            for stale in (path.with_suffix(".json"), path):
                stale.unlink(missing_ok=True)
        return count

    # ------------------------------------------------------------------ reads

    def _stored_sources(self, user: str, collection: str, ids: list[str]) -> dict[str, bytes]:
        db = self._db(user, create=False)
        if db is None:
            return {}
        found: dict[str, bytes] = {}
        with db.lock:
            for i in range(0, len(ids), 500):
                part = ids[i:i + 500]
                marks = ",".join("?" * len(part))
                found.update((r[0], bytes(r[1])) for r in self._sql(
                    db, f"SELECT id, source FROM vectors WHERE kind = ? AND collection = ? AND id IN ({marks})",
                    (self.kind, collection, *part)).fetchall())
        return found

    def _search(self, user: str, collection: str, model_id: str, query: np.ndarray, limit: int) -> list[VectorHit]:
        db = self._db(user, create=False)
        if db is None:
            return []
        info = self._info_row(db, collection)
        if info is None:
            return []
        require_model(self.kind, user, collection, info[0], info[1], model_id, query.shape[0])
        with _graph_lock(self._key(db, collection)):
            graph = self._graph(db, collection, info[1], info[2], info[3])
            exact = len(graph.index) * info[1] <= EXACT_SEARCH_MAX_VALUES
            matches = graph.index.search(query, max(limit, RESCORE_CANDIDATES), exact=exact, threads=1)
            keys = [int(k) for k in matches.keys]
        if not keys:
            return []
        with db.lock:
            rows = self._sql(db, f"SELECT id, label, document_id, vector FROM vectors WHERE key IN "
                                 f"({','.join('?' * len(keys))})", tuple(keys)).fetchall()
        if not rows:
            return []
        matrix = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        scores = matrix.astype(np.float64) @ query.astype(np.float64)
        order = np.argsort(-scores, kind="stable")[:limit]
        return [VectorHit(rows[i][0], float(scores[i]), rows[i][1], rows[i][2]) for i in order]

    def index_info(self, user: str, collection: str) -> IndexInfo | None:
        """Model id, dimension and number of vectors of the collection's index, or ``None``."""
        check_names(user, collection)
        db = self._db(user, create=False)
        if db is None:
            return None
        with db.lock:
            row = self._sql(db, "SELECT model_id, dimension FROM vector_index WHERE kind = ? AND collection = ?",
                            (self.kind, collection)).fetchone()
            if row is None:
                return None
            count = self._sql(db, "SELECT count(*) FROM vectors WHERE kind = ? AND collection = ?",
                              (self.kind, collection)).fetchone()[0]
        return IndexInfo(row[0], row[1], count)
