"""The embedded triple store: one SQLite file per user under ``$TG_HOME/triples/`` (WAL, ``synchronous=NORMAL``).

Why it is laid out this way:

* **Interned terms.**  Each canonical term string (and each graph IRI, as ``<iri>``) is stored
  once in ``terms`` and quads hold small integers, so the B-trees below stay narrow.
  Terms are found through an integer look-up hash (CRC-32 combined with the byte length; the
  stored text decides on a collision) in ``term_hashes`` ``(h, id)``, which keeps that B-tree
  small.  The default graph is id 0.
  Writers remember string -> id in a process cache; ids only enter it after their
  transaction committed, and a ``terms_epoch`` counter (bumped when :meth:`delete_collection`
  garbage-collects terms) makes every writer drop a stale cache at the start of its
  transaction.  Readers never use the cache: bound terms are looked up inside the same
  statement.
* **Three B-trees, one per access order.**  The quads are stored three times, in three
  ``WITHOUT ROWID`` tables with the same columns: ``quads`` keyed ``(c, s, p, o, g)``,
  ``quads_o`` keyed ``(c, o, p, s, g)`` and ``quads_p`` keyed ``(c, p, g, o, s)``.  Every
  pattern with ``s``, ``o`` or ``p`` bound starts with an equality prefix of one of them; the
  remaining bound positions (often the graph) are checked on the rows of that range inside the
  same statement, so the graph filter always applies before ``LIMIT`` and results are exact.
  The ranges are small (one subject's or one object's rows), which is why the embedded store
  does not pay for the six orders a strict prefix for all 15 bound combinations would need.
  (Cassandra does keep the strict single-partition property: there a filter would need
  ``ALLOW FILTERING``.)  Only graph-only and unbound patterns scan the collection.
* **Sorted bulk writes.**  An insert stages its rows in a temporary table and copies them into
  each of the three tables with one ``INSERT ... SELECT ... ORDER BY`` in that table's key
  order, and new terms get their ids in look-up-hash order: every B-tree then takes the batch
  in key order (neighbouring inserts share pages) and the row loop runs inside SQLite.  Three
  tables rather than one table with two indexes, because an index is maintained row by row in
  the table's order, i.e. at random positions (measured in ``bench/README.md``).
* **Write buffers.**  ``quads`` mostly grows at its end (new subjects get new, higher ids), but
  ``quads_o``, ``quads_p`` and ``term_hashes`` take new rows all over their key range: an insert
  of 10,000 triples dirtied nearly every page of them, so the bytes written per insert grew with
  the store (``bench/README.md``).  New rows of those three go to a small buffer table of the
  same key (``quads_o_recent``, ...), and every :data:`RECENT_ROWS_MAX` rows one transaction moves
  the buffers into the main tables in key order.  Reads search both (``UNION ALL``); a row is in
  exactly one of them, because only the rows that ``quads`` takes as new are buffered.
* **Collections** are rows of ``collections`` (``AUTOINCREMENT``: a deleted collection's id is
  never reused); ``c`` leads every key, so one collection never sees another's rows.
* **Trace index**: ``traces`` keyed ``(c, uri)`` with indexes ``(c, ts, uri)`` and
  ``(c, type, ts, uri)``; listing reads one index range backwards, ``O(limit)``.  A trace claim
  looks its URI up and stores its Question in one write transaction.
* **Threads**: services call the store from worker threads; each thread gets its own
  connection per user file (WAL lets readers run beside the one writer), writers take the
  write lock up front (``BEGIN IMMEDIATE``) and wait up to ``busy_timeout``.
  :meth:`iter_query` reads through a connection of its own, so a half-consumed iterator never
  holds a transaction open on a connection the thread writes with.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, overload

from ...schema.primitives import Triple
from ...schema.query import TraceSummary
from ..errors import StoreError, StoreUnavailable
from ..names import check_names, tg_home, user_file
from ..triples import (
    IndexedTrace,
    PatternKey,
    QuadKey,
    TracePage,
    TriplesStoreBase,
    encode_cursor,
    question_type_of,
    term_from_key,
)
from .environment import check_data_dir, environment_failure, make_parent, store_file_exists
from .wal import enable_wal

__all__ = ["SqliteTriplesStore"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = "5"

#: Page size of new files, in bytes (see :meth:`SqliteTriplesStore._open`).
PAGE_SIZE = 16384

#: The three copies of the quads and their key orders.
_TABLES = (("quads", "spog"), ("quads_o", "opsg"), ("quads_p", "pgos"))

#: Each table's key order after the collection, for ``INSERT ... SELECT ... ORDER BY``.
_ORDER_BY = {table: ", ".join(order) for table, order in _TABLES}

#: The quad tables whose new rows land at random positions; each has a write buffer.
_BUFFERED_QUADS = ("quads_o", "quads_p")

#: The B-trees that new rows reach at random positions, each with the write buffer (``<name>_recent``,
#: same key) that takes its new rows until :func:`_merge_recent` moves them over.
_BUFFERED = (*_BUFFERED_QUADS, "term_hashes")

#: Rows (quads and terms) the write buffers take before they are merged into the main tables.
#: Larger: fewer merges, but each insert rewrites more buffer pages; 100k-400k measured alike.
RECENT_ROWS_MAX = 200_000

#: Every table that holds quads.
_QUAD_TABLES = (*(table for table, _order in _TABLES), *(f"{table}_recent" for table in _BUFFERED_QUADS))

_QUADS_DDL = ("CREATE TABLE IF NOT EXISTS {name} (c INTEGER NOT NULL, s INTEGER NOT NULL, p INTEGER NOT NULL, "
              "o INTEGER NOT NULL, g INTEGER NOT NULL, PRIMARY KEY (c, {key})) WITHOUT ROWID;")
_TERM_HASHES_DDL = ("CREATE TABLE IF NOT EXISTS {name} (h INTEGER NOT NULL, id INTEGER NOT NULL, "
                    "PRIMARY KEY (h, id)) WITHOUT ROWID;")

# ``recent_rows`` counts the rows added to the write buffers since the last merge; deletes do
# not lower it (an over-count only merges a little early).
_SCHEMA = "\n".join([
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;",
    "CREATE TABLE IF NOT EXISTS collections (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE);",
    "CREATE TABLE IF NOT EXISTS terms (id INTEGER PRIMARY KEY, h INTEGER NOT NULL, text TEXT NOT NULL);",
    *(_TERM_HASHES_DDL.format(name=name) for name in ("term_hashes", "term_hashes_recent")),
    *(_QUADS_DDL.format(name=name, key=_ORDER_BY[name.removesuffix("_recent")]) for name in _QUAD_TABLES),
    """CREATE TABLE IF NOT EXISTS traces (
    c INTEGER NOT NULL, uri TEXT NOT NULL, type TEXT NOT NULL, question TEXT NOT NULL, time TEXT NOT NULL,
    ts INTEGER NOT NULL, parent TEXT NOT NULL, PRIMARY KEY (c, uri)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS traces_time ON traces (c, ts, uri);
CREATE INDEX IF NOT EXISTS traces_type_time ON traces (c, type, ts, uri);
INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '5'), ('terms_epoch', '0'), ('recent_rows', '0');""",
])


def _best_table(bound: frozenset[str]) -> str:
    """The table whose leading key columns cover most of the bound positions (ties: ``quads``, ``s`` first)."""
    def covered(order: str) -> int:
        n = 0
        while n < len(order) and order[n] in bound:
            n += 1
        return n

    return max(_TABLES, key=lambda item: covered(item[1]))[0]


#: Which table serves each set of bound positions (``s``, ``p``, ``o``, ``g``).
_TABLE_FOR: dict[frozenset[str], str] = {
    frozenset(b): _best_table(frozenset(b))
    for b in ("", "s", "p", "o", "g", "sp", "so", "sg", "po", "pg", "og", "spo", "spg", "sog", "pog", "spog")}

#: Schema 3 (one ``quads`` table with two indexes) -> 4: the indexes become tables of their own.
_MIGRATE_FROM_3 = (
    "INSERT INTO quads_o (c, s, p, o, g) SELECT c, s, p, o, g FROM quads INDEXED BY quads_ops ORDER BY c, o, p, s, g",
    "INSERT INTO quads_p (c, s, p, o, g) SELECT c, s, p, o, g FROM quads INDEXED BY quads_pgo ORDER BY c, p, g, o, s",
    "DROP INDEX quads_ops",
    "DROP INDEX quads_pgo",
    "UPDATE meta SET value = '4' WHERE key = 'schema_version'",
)

#: Schema 4 -> 5: the ``terms_h`` index becomes the ``term_hashes`` table (plus the write buffers,
#: which ``_SCHEMA`` has created empty).
_MIGRATE_FROM_4 = (
    "INSERT INTO term_hashes (h, id) SELECT h, id FROM terms ORDER BY h, id",
    "DROP INDEX terms_h",
    "UPDATE meta SET value = '5' WHERE key = 'schema_version'",
)

_SELECT = ("SELECT ts.text, tp.text, tob.text, tg.text FROM ({rows}) AS q "
           "CROSS JOIN terms AS ts ON ts.id = q.s CROSS JOIN terms AS tp ON tp.id = q.p "
           "CROSS JOIN terms AS tob ON tob.id = q.o LEFT JOIN terms AS tg ON tg.id = q.g")
#: The id of a term, by look-up hash (parameters: hash, hash, text).
_TERM_ID = ("(SELECT t.id FROM terms AS t WHERE t.id IN (SELECT id FROM term_hashes WHERE h = ? "
            "UNION ALL SELECT id FROM term_hashes_recent WHERE h = ?) AND t.text = ?)")
_CHUNK = 500  # bound parameters per IN (...) look-up
_CACHE_MAX = 250_000


class _TermIds:
    """Process-wide string -> id cache of one database file, invalidated by the file's ``terms_epoch``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.epoch = -1
        self.ids: dict[str, int] = {}

    def sync(self, epoch: int) -> None:
        """Called inside a write transaction: drop everything if the file's epoch moved."""
        with self.lock:
            if epoch != self.epoch:
                self.ids = {}
                self.epoch = epoch

    def remember(self, epoch: int, new: dict[str, int]) -> None:
        """Add ids committed under ``epoch`` (ignored if the cache has moved on since)."""
        with self.lock:
            if epoch != self.epoch:
                return
            if len(self.ids) + len(new) > _CACHE_MAX:
                self.ids = {}
            self.ids.update(new)


class SqliteTriplesStore(TriplesStoreBase[sqlite3.Connection]):
    """:class:`~trustgraph_base.store.triples.TriplesStore` on one SQLite file per user.

    :param home: data directory (default :func:`~trustgraph_base.store.names.tg_home`); files go
        to ``home/triples/``.
    :param busy_timeout: seconds a writer waits for another process's write lock.
    :param cache_mb: SQLite page cache per connection, in MiB.
    :raises StoreEnvironmentError: ``home`` is not a directory, or cannot be created or written.
    """

    backend = "sqlite"

    def __init__(self, home: Path | str | None = None, *, busy_timeout: float = 30.0, cache_mb: int = 64) -> None:
        self.home = Path(home) if home is not None else tg_home()
        check_data_dir(self.home)
        self._busy_timeout = float(busy_timeout)
        self._cache_kib = int(cache_mb) * 1024
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._initialised: set[Path] = set()
        self._term_ids: dict[Path, _TermIds] = {}
        self._closed = False

    # ------------------------------------------------------------ connections

    def path(self, user: str) -> Path:
        """The SQLite file of ``user`` (validated name)."""
        check_names(user)
        return user_file("triples", user, home=self.home)

    def _open(self, path: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=self._busy_timeout)
        try:
            self._prepare(conn, path)
        except BaseException:
            conn.close()  # a file that could not be set up (full disk, read-only) leaves no connection behind
            raise
        return conn

    def _prepare(self, conn: sqlite3.Connection, path: Path) -> None:
        """Configure a new connection, create or migrate the schema (once per file) and register the connection."""
        # 16 KiB pages (only a new, empty file takes this): a bulk load dirties fewer, fuller
        # pages per commit, so it inserts faster (bench/README.md).
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        enable_wal(conn, self._busy_timeout)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA cache_size=-{self._cache_kib}")
        # Checkpoint every ~40 MiB of WAL instead of 4 MiB: bulk loads rewrite the same index
        # pages in consecutive transactions, and each checkpoint copies (and syncs) them again.
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute(f"PRAGMA wal_autocheckpoint={(40 << 20) // page_size}")
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("CREATE TEMP TABLE staged_quads (s INTEGER, p INTEGER, o INTEGER, g INTEGER)")
        with self._lock:
            if path not in self._initialised:
                conn.execute("BEGIN IMMEDIATE")
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
                if version == "3":
                    log.info("%s: converting the triple store from schema 3 to 4 (one table per key order)", path)
                    for statement in _MIGRATE_FROM_3:
                        conn.execute(statement)
                    version = "4"
                if version == "4":
                    log.info("%s: converting the triple store from schema 4 to 5 (write buffers)", path)
                    for statement in _MIGRATE_FROM_4:
                        conn.execute(statement)
                    version = "5"
                conn.execute("COMMIT")
                if version != SCHEMA_VERSION:
                    raise StoreError(f"{path} has triple-store schema version {version}, "
                                     f"this code reads version {SCHEMA_VERSION}")
                self._initialised.add(path)
                self._term_ids.setdefault(path, _TermIds())
            self._connections.append(conn)

    def _space(self, user: str) -> sqlite3.Connection | None:
        return self._conn(user, create=False)

    @overload
    def _conn(self, user: str, create: Literal[True] = True) -> sqlite3.Connection: ...

    @overload
    def _conn(self, user: str, create: bool) -> sqlite3.Connection | None: ...

    def _conn(self, user: str, create: bool = True) -> sqlite3.Connection | None:
        """This thread's connection to ``user``'s file; ``None`` if the file does not exist and ``create`` is false."""
        if self._closed:
            raise StoreError("the triple store is closed")
        conns = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        conn: sqlite3.Connection | None = conns.get(user)
        if conn is not None:
            return conn
        path = self.path(user)
        if not store_file_exists(path):
            if not create:
                return None
            make_parent(path)
        with _errors(path):
            conn = conns[user] = self._open(path)
        return conn

    @contextmanager
    def _write(self, user: str) -> Iterator[sqlite3.Connection]:
        """A write transaction on this thread's connection (``BEGIN IMMEDIATE`` ... ``COMMIT``)."""
        conn = self._conn(user)
        path = self.path(user)
        with _errors(path):
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @staticmethod
    def _collection_id(conn: sqlite3.Connection, collection: str) -> int | None:
        row = conn.execute("SELECT id FROM collections WHERE name = ?", (collection,)).fetchone()
        return row[0] if row else None

    # ------------------------------------------------------------ writes

    def _insert(self, user: str, collection: str, quads: list[QuadKey], traces: list[IndexedTrace]) -> None:
        """One write transaction; a file locked longer than ``busy_timeout`` is :class:`StoreUnavailable`."""
        self._store(user, collection, quads, traces)

    def _claim(self, user: str, collection: str, quads: list[QuadKey], question: IndexedTrace) -> bool:
        """The look-up and the insert share one ``BEGIN IMMEDIATE`` transaction, so concurrent claims of
        one URI, from any thread or process, are serialised and exactly one of them wins."""
        return self._store(user, collection, quads, [question], unless_indexed=question.summary.uri)

    def _store(self, user: str, collection: str, quads: list[QuadKey], traces: Sequence[IndexedTrace],
               unless_indexed: str = "") -> bool:
        """Write ``quads`` and index ``traces`` in one transaction; with ``unless_indexed``, only if that
        Question is not in the trace index (returns whether anything was written)."""
        path = self.path(user)
        with self._write(user) as conn:
            cache = self._term_ids[path]
            epoch = int(conn.execute("SELECT value FROM meta WHERE key = 'terms_epoch'").fetchone()[0])
            cache.sync(epoch)
            conn.execute("INSERT OR IGNORE INTO collections (name) VALUES (?)", (collection,))
            cid = self._collection_id(conn, collection)
            if cid is None:
                raise StoreError(f"collection {collection!r} was not registered")
            if unless_indexed and conn.execute("SELECT 1 FROM traces WHERE c = ? AND uri = ?",
                                               (cid, unless_indexed)).fetchone():
                return False
            ids, new, created = _intern(conn, cache.ids, quads)
            graph_ids = {g: ids[f"<{g}>"] if g else 0 for g in {q[3] for q in quads}}
            added = _insert_quads(conn, cid, [(ids[s], ids[p], ids[o], graph_ids[g]) for s, p, o, g in quads])
            if traces:
                _index_traces(conn, cid, traces)
            _count_recent(conn, added + created)
        cache.remember(epoch, new)
        return True

    def _delete(self, space: sqlite3.Connection, user: str, collection: str, quads: list[QuadKey]) -> int:
        with self._write(user) as conn:
            cid = self._collection_id(conn, collection)
            if cid is None:
                return 0
            ids = _lookup(conn, quads)
            graph_ids = {g: (ids.get(f"<{g}>") if g else 0) for g in {q[3] for q in quads}}
            rows = [(cid, ids.get(s), ids.get(p), ids.get(o), graph_ids[g]) for s, p, o, g in quads]
            rows = [r for r in rows if None not in r]  # a quad with an unknown term is not stored
            removed = 0
            for table in _QUAD_TABLES:
                before = conn.total_changes
                conn.executemany(f"DELETE FROM {table} WHERE c = ? AND s = ? AND p = ? AND o = ? AND g = ?", rows)
                if table == "quads":
                    removed = conn.total_changes - before
            questions = [(cid, q[0][1:-1]) for q in quads if question_type_of(q)]
            if questions:
                conn.executemany("DELETE FROM traces WHERE c = ? AND uri = ?", questions)
            if removed:  # the terms of the removed quads that nothing uses any more (graph names stay)
                conn.execute("CREATE TEMP TABLE IF NOT EXISTS gc_terms (id INTEGER PRIMARY KEY)")
                conn.execute("DELETE FROM gc_terms")
                conn.executemany("INSERT OR IGNORE INTO gc_terms (id) VALUES (?)",
                                 ((i,) for i in {i for r in rows for i in r[1:4]}))
                if _drop_unused_terms(conn, with_graphs=False):
                    conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'terms_epoch'")
        return removed

    def _delete_collection(self, space: sqlite3.Connection, user: str, collection: str) -> int:
        """Its triples, its trace index and the terms nothing else uses (0 for an unknown collection)."""
        with self._write(user) as conn:
            cid = self._collection_id(conn, collection)
            if cid is None:
                return 0
            count: int = conn.execute("SELECT count(*) FROM quads WHERE c = ?", (cid,)).fetchone()[0]
            others = conn.execute("SELECT count(*) FROM collections WHERE id != ?", (cid,)).fetchone()[0]
            if others:  # the terms this collection used, then those no other collection uses
                conn.execute("CREATE TEMP TABLE IF NOT EXISTS gc_terms (id INTEGER PRIMARY KEY)")
                conn.execute("DELETE FROM gc_terms")
                conn.execute("INSERT OR IGNORE INTO gc_terms SELECT s FROM quads WHERE c = ?1 UNION "
                             "SELECT p FROM quads WHERE c = ?1 UNION SELECT o FROM quads WHERE c = ?1 UNION "
                             "SELECT g FROM quads WHERE c = ?1 AND g != 0", (cid,))
            for table in _QUAD_TABLES:
                conn.execute(f"DELETE FROM {table} WHERE c = ?", (cid,))
            conn.execute("DELETE FROM traces WHERE c = ?", (cid,))
            conn.execute("DELETE FROM collections WHERE id = ?", (cid,))
            if others:
                _drop_unused_terms(conn, with_graphs=True)
            else:
                for table in ("terms", "term_hashes", "term_hashes_recent"):
                    conn.execute(f"DELETE FROM {table}")
            conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'terms_epoch'")
        return count

    # ------------------------------------------------------------ reads

    def _where(self, cid: int, pk: PatternKey) -> tuple[str, str, list[Any]]:
        """``(table, WHERE clause, parameters)`` for a validated pattern."""
        clauses = ["q.c = ?"]
        params: list[Any] = [cid]
        bound = set()
        for col, key in (("s", pk.s), ("p", pk.p), ("o", pk.o)):
            if key is not None:
                clauses.append(f"q.{col} = {_TERM_ID}")
                h = _hash(key)
                params += (h, h, key)
                bound.add(col)
        if pk.g is not None:
            bound.add("g")
            if pk.g == "":
                clauses.append("q.g = 0")
            else:
                clauses.append(f"q.g = {_TERM_ID}")
                h = _hash(f"<{pk.g}>")
                params += (h, h, f"<{pk.g}>")
        return _TABLE_FOR[frozenset(bound)], " AND ".join(clauses), params

    def _select(self, conn: sqlite3.Connection, collection: str, pk: PatternKey,
                limit: int | None) -> sqlite3.Cursor | None:
        """A cursor over the matching rows, or ``None`` if the collection does not exist."""
        cid = self._collection_id(conn, collection)
        if cid is None:
            return None
        table, where, params = self._where(cid, pk)
        rows, params = _matching_rows("SELECT q.s, q.p, q.o, q.g", table, where, params)
        sql = _SELECT.format(rows=rows)
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return conn.execute(sql, params)

    def _query(self, conn: sqlite3.Connection, user: str, collection: str, pk: PatternKey) -> list[Triple]:
        with _errors(self.path(user)):
            cur = self._select(conn, collection, pk, pk.limit)
            return [] if cur is None else [_triple(row) for row in cur]

    def _query_many(self, conn: sqlite3.Connection, user: str, collection: str,
                    keys: list[PatternKey]) -> list[list[Triple]]:
        """Read in one transaction (a consistent snapshot)."""
        out: list[list[Triple]] = []
        with _errors(self.path(user)):
            conn.execute("BEGIN")
            try:
                for pk in keys:
                    cur = self._select(conn, collection, pk, pk.limit)
                    out.append([] if cur is None else [_triple(row) for row in cur])
            finally:
                conn.execute("COMMIT")
        return out

    def _iter_query(self, conn: sqlite3.Connection, user: str, collection: str, pk: PatternKey,
                    page_size: int) -> Iterator[list[Triple]]:
        """The pages come from one snapshot, read through a connection of the iterator's own."""
        return self._pages(self.path(user), collection, pk, page_size)

    def _pages(self, path: Path, collection: str, pk: PatternKey, page_size: int) -> Iterator[list[Triple]]:
        with _errors(path):
            conn = sqlite3.connect(path, isolation_level=None, timeout=self._busy_timeout)
        try:
            with _errors(path):
                conn.execute("BEGIN")
                cur = self._select(conn, collection, pk, None if pk.unlimited else pk.limit)
            if cur is None:
                return
            while True:
                with _errors(path):
                    rows = cur.fetchmany(page_size)
                if not rows:
                    return
                yield [_triple(row) for row in rows]
        finally:
            conn.close()

    def _count(self, conn: sqlite3.Connection, user: str, collection: str, pk: PatternKey) -> int:
        with _errors(self.path(user)):
            cid = self._collection_id(conn, collection)
            if cid is None:
                return 0
            table, where, params = self._where(cid, pk)
            rows, params = _matching_rows("SELECT count(*)", table, where, params)
            return sum(n for n, in conn.execute(rows, params))

    def _list_collections(self, conn: sqlite3.Connection, user: str) -> list[str]:
        with _errors(self.path(user)):
            return [r[0] for r in conn.execute("SELECT name FROM collections ORDER BY name")]

    # ------------------------------------------------------------ trace index

    def _list_traces(self, conn: sqlite3.Connection, user: str, collection: str, type: str, limit: int,
                     after: tuple[int, str] | None) -> TracePage:
        with _errors(self.path(user)):
            cid = self._collection_id(conn, collection)
            if cid is None:
                return TracePage()
            clauses = ["c = ?"]
            params: list[Any] = [cid]
            if type:
                clauses.append("type = ?")
                params.append(type)
            if after is not None:
                clauses.append("(ts, uri) < (?, ?)")
                params.extend(after)
            index = "traces_type_time" if type else "traces_time"
            rows = conn.execute(
                f"SELECT ts, uri, type, question, time, parent FROM traces INDEXED BY {index} "
                f"WHERE {' AND '.join(clauses)} ORDER BY ts DESC, uri DESC LIMIT ?", (*params, limit + 1)).fetchall()
        page = [TraceSummary(uri=r[1], type=r[2], question=r[3], time=r[4], parent=r[5]) for r in rows[:limit]]
        next_cursor = encode_cursor(rows[limit - 1][0], rows[limit - 1][1]) if len(rows) > limit else ""
        return TracePage(page, next_cursor)

    def _get_trace(self, conn: sqlite3.Connection, user: str, collection: str,
                   question_uri: str) -> TraceSummary | None:
        with _errors(self.path(user)):
            row = conn.execute(
                "SELECT t.uri, t.type, t.question, t.time, t.parent FROM traces AS t JOIN collections AS k "
                "ON k.id = t.c WHERE k.name = ? AND t.uri = ?", (collection, question_uri)).fetchone()
        return TraceSummary(*row) if row else None

    def _remove_trace(self, conn: sqlite3.Connection, user: str, collection: str, question_uri: str) -> None:
        with self._write(user) as conn:
            conn.execute("DELETE FROM traces WHERE c = (SELECT id FROM collections WHERE name = ?) AND uri = ?",
                         (collection, question_uri))

    def close(self) -> None:
        """Close every connection this store opened."""
        with self._lock:
            self._closed = True
            for conn in self._connections:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._connections.clear()


# ---------------------------------------------------------------- helpers

def _keys_of(quads: Sequence[QuadKey]) -> set[str]:
    """Every term and graph (as ``<iri>``) that ``quads`` use."""
    keys = {q[0] for q in quads}
    keys.update([q[1] for q in quads])
    keys.update([q[2] for q in quads])
    keys.update([f"<{g}>" for g in {q[3] for q in quads} if g])
    return keys


def _matching_rows(select: str, table: str, where: str, params: list[Any]) -> tuple[str, list[Any]]:
    """``select`` over the rows of ``table`` (alias ``q``) matching ``where``, and its parameters.

    A buffered table is read together with its write buffer (``UNION ALL``: a row is in exactly
    one of them).
    """
    sql = f"{select} FROM {table} AS q WHERE {where}"
    if table not in _BUFFERED:
        return sql, params
    return f"{sql} UNION ALL {select} FROM {table}_recent AS q WHERE {where}", params + params


def _find_terms(conn: sqlite3.Connection, wanted: dict[str, int]) -> dict[str, int]:
    """Ids of the stored terms among ``wanted`` (term string -> look-up hash); absent ones are left out."""
    found: dict[str, int] = {}
    hashes = list(set(wanted.values()))
    for i in range(0, len(hashes), _CHUNK):
        part = hashes[i:i + _CHUNK]
        marks = ",".join("?" * len(part))
        for id_, text in conn.execute(
                f"SELECT t.id, t.text FROM term_hashes AS x CROSS JOIN terms AS t ON t.id = x.id "
                f"WHERE x.h IN ({marks}) UNION ALL SELECT t.id, t.text FROM term_hashes_recent AS x "
                f"CROSS JOIN terms AS t ON t.id = x.id WHERE x.h IN ({marks})", part + part):
            if text in wanted:
                found[text] = id_
    return found


def _drop_unused_terms(conn: sqlite3.Connection, *, with_graphs: bool) -> int:
    """Delete the terms listed in the temporary table ``gc_terms`` that no quad of any collection uses; returns
    how many were deleted and empties ``gc_terms``.

    Subject, predicate and object uses are index look-ups.  A graph name has no index of its own:
    with ``with_graphs`` each term is looked for in the ``g`` column (a scan, as a collection delete
    can afford), else the graph names in use are listed first (:func:`_graph_ids`) and kept.
    """
    if not with_graphs:
        conn.executemany("DELETE FROM gc_terms WHERE id = ?", ((g,) for g in _graph_ids(conn)))
    graph_check = " OR EXISTS (SELECT 1 FROM quads AS q WHERE q.c = k.id AND q.g = gc_terms.id)" if with_graphs else ""
    conn.execute(
        "DELETE FROM gc_terms WHERE EXISTS (SELECT 1 FROM collections AS k WHERE"
        " EXISTS (SELECT 1 FROM quads AS q WHERE q.c = k.id AND q.s = gc_terms.id) OR"
        " EXISTS (SELECT 1 FROM quads_o AS q WHERE q.c = k.id AND q.o = gc_terms.id) OR"
        " EXISTS (SELECT 1 FROM quads_o_recent AS q WHERE q.c = k.id AND q.o = gc_terms.id) OR"
        " EXISTS (SELECT 1 FROM quads_p AS q WHERE q.c = k.id AND q.p = gc_terms.id) OR"
        " EXISTS (SELECT 1 FROM quads_p_recent AS q WHERE q.c = k.id AND q.p = gc_terms.id)" + graph_check + ")")
    for table in ("term_hashes", "term_hashes_recent"):
        conn.execute(f"DELETE FROM {table} WHERE (h, id) IN "
                     "(SELECT t.h, t.id FROM terms AS t JOIN gc_terms AS x ON x.id = t.id)")
    dropped = conn.execute("DELETE FROM terms WHERE id IN (SELECT id FROM gc_terms)").rowcount
    conn.execute("DELETE FROM gc_terms")
    return dropped


def _graph_ids(conn: sqlite3.Connection) -> set[int]:
    """Ids of the graph names in use, by seeking through ``quads_p`` (key ``c, p, g, …``) one distinct
    (collection, predicate, graph) at a time: the cost follows the number of predicates, not of quads."""
    found: set[int] = set()
    for table in ("quads_p", "quads_p_recent"):
        for (cid,) in conn.execute("SELECT id FROM collections").fetchall():
            row = conn.execute(f"SELECT p, g FROM {table} WHERE c = ? ORDER BY p, g LIMIT 1", (cid,)).fetchone()
            while row is not None:
                p, g = row
                found.add(g)
                row = conn.execute(f"SELECT p, g FROM {table} WHERE c = ? AND p = ? AND g > ? ORDER BY g LIMIT 1",
                                   (cid, p, g)).fetchone()
                if row is None:
                    row = conn.execute(f"SELECT p, g FROM {table} WHERE c = ? AND p > ? ORDER BY p, g LIMIT 1",
                                       (cid, p)).fetchone()
    return found


def _lookup(conn: sqlite3.Connection, quads: Sequence[QuadKey]) -> dict[str, int]:
    """Ids of the stored terms and graphs of ``quads`` (nothing is inserted)."""
    return _find_terms(conn, _hashes(_keys_of(quads)))


def _intern(conn: sqlite3.Connection, cached: dict[str, int],
            quads: Sequence[QuadKey]) -> tuple[dict[str, int], dict[str, int], int]:
    """Ids of every term and graph (as ``<iri>``) of ``quads``: ``(all ids, ids not in the cache,
    how many terms were new to the file)``.

    Unknown terms are inserted, numbered in look-up-hash order so that ``term_hashes_recent``
    takes them in key order.  Runs inside the write transaction, so the ids it assigns cannot
    race another writer.
    """
    keys = _keys_of(quads)
    missing = keys.difference(cached)
    ids = {k: cached[k] for k in keys} if not missing else {k: cached[k] for k in keys.difference(missing)}
    new: dict[str, int] = {}
    created = 0
    if missing:
        wanted = _hashes(missing)
        new = _find_terms(conn, wanted)
        unknown = sorted((h, text) for text, h in wanted.items() if text not in new)
        if unknown:
            start = (conn.execute("SELECT max(id) FROM terms").fetchone()[0] or 0) + 1
            numbers = range(start, start + len(unknown))
            conn.executemany("INSERT INTO terms (id, h, text) VALUES (?, ?, ?)",
                             [(id_, h, text) for id_, (h, text) in zip(numbers, unknown, strict=True)])
            # numbered in hash order, so the id range is in the buffer's key order too
            conn.execute("INSERT INTO term_hashes_recent (h, id) SELECT h, id FROM terms WHERE id >= ?", (start,))
            new.update(zip([text for _, text in unknown], numbers, strict=True))
            created = len(unknown)
        ids.update(new)
    return ids, new, created


def _insert_quads(conn: sqlite3.Connection, cid: int, rows: Sequence[tuple[int, int, int, int]]) -> int:
    """Store ``(s, p, o, g)`` id rows of collection ``cid``; returns how many were new.

    The rows are staged once in a temporary table and copied with one ``INSERT ... SELECT`` per
    table, which SQLite sorts into that table's key order.  ``quads`` decides what is new
    (``OR IGNORE``: a stored row is left as it is); the other two orders take the new rows in
    their write buffers.  When only some rows are new, a row goes to a buffer only if the main
    table lacks it, so a row is never in both.
    """
    conn.execute("DELETE FROM temp.staged_quads")
    conn.executemany("INSERT INTO temp.staged_quads (s, p, o, g) VALUES (?, ?, ?, ?)", rows)
    before = conn.total_changes
    conn.execute(f"INSERT OR IGNORE INTO quads (c, s, p, o, g) SELECT ?, s, p, o, g FROM temp.staged_quads "
                 f"ORDER BY {_ORDER_BY['quads']}", (cid,))
    added = conn.total_changes - before
    if added:
        for table in _BUFFERED_QUADS:
            unless_stored = "" if added == len(rows) else (
                f" WHERE NOT EXISTS (SELECT 1 FROM {table} AS m WHERE m.c = ?1 AND m.s = x.s AND m.p = x.p "
                "AND m.o = x.o AND m.g = x.g)")
            conn.execute(f"INSERT OR IGNORE INTO {table}_recent (c, s, p, o, g) SELECT ?1, s, p, o, g "
                         f"FROM temp.staged_quads AS x{unless_stored} ORDER BY {_ORDER_BY[table]}", (cid,))
    conn.execute("DELETE FROM temp.staged_quads")
    return added


def _count_recent(conn: sqlite3.Connection, added: int) -> None:
    """Note ``added`` more rows in the write buffers; merge them once they hold :data:`RECENT_ROWS_MAX`."""
    if not added:
        return
    recent = int(conn.execute("SELECT value FROM meta WHERE key = 'recent_rows'").fetchone()[0]) + added
    if recent >= RECENT_ROWS_MAX:
        _merge_recent(conn)
        recent = 0
    conn.execute("UPDATE meta SET value = ? WHERE key = 'recent_rows'", (str(recent),))


def _merge_recent(conn: sqlite3.Connection) -> None:
    """Move every write buffer's rows into its main table, in key order (one pass over each main B-tree).

    Why buffers: ``quads_o``, ``quads_p`` and ``term_hashes`` take new rows at random positions, so an
    insert of a few thousand rows dirties nearly every page of them, and the pages written per insert
    grew with the store.  The buffers stay small, and the
    main tables are rewritten once per :data:`RECENT_ROWS_MAX` rows instead of once per insert.
    """
    for table in _BUFFERED:
        conn.execute(f"INSERT OR IGNORE INTO {table} SELECT * FROM {table}_recent")
        conn.execute(f"DELETE FROM {table}_recent")


def _hashes(keys: Iterable[str]) -> dict[str, int]:
    """:func:`_hash` of many keys (inlined: a bulk insert hashes most of its terms)."""
    crc32 = zlib.crc32
    return {key: crc32(b := key.encode("utf-8")) | (len(b) << 32) for key in keys}


def _hash(key: str) -> int:
    """The look-up hash of a term string: CRC-32 plus the length (collisions are resolved by the text)."""
    b = key.encode("utf-8")
    return zlib.crc32(b) | (len(b) << 32)


def _index_traces(conn: sqlite3.Connection, cid: int, traces: Sequence[IndexedTrace]) -> None:
    """Add Questions to the trace index; an already indexed Question keeps its row (idempotent)."""
    conn.executemany(
        "INSERT INTO traces (c, uri, type, question, time, ts, parent) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (c, uri) DO NOTHING",
        [(cid, t.summary.uri, t.summary.type, t.summary.question, t.summary.time, t.ts, t.summary.parent)
         for t in traces])


def _triple(row: tuple[str, str, str, str | None]) -> Triple:
    s, p, o, g = row
    return Triple(term_from_key(s), term_from_key(p), term_from_key(o), g[1:-1] if g else "")


@contextmanager
def _errors(path: Path) -> Iterator[None]:
    """Map sqlite3 errors: an unusable file or file system to :class:`StoreEnvironmentError`, lock time-outs
    to :class:`StoreUnavailable`, the rest to :class:`StoreError`."""
    try:
        yield
    except (sqlite3.Error, OSError) as e:
        failure = environment_failure(e, path)
        if failure is not None:
            raise failure from e
        if not isinstance(e, sqlite3.Error):
            raise
        text = str(e)
        if isinstance(e, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
            raise StoreUnavailable(f"triple store {path.name} is busy: {text}") from e
        raise StoreError(f"triple store {path.name}: {text}") from e
