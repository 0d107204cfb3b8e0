"""The distributed triple store on Apache Cassandra: one keyspace per user, every bound pattern one partition read.

Layout (all names are bind parameters; only the keyspace, a validated injective storage name
from :func:`~trustgraph_base.store.names.storage_name`, is ever formatted into CQL):

``quads((collection, k), layout, c1, c2, c3)``
    Six rows per quad, one per *layout*: the partition key ``k`` is one position and
    ``c1..c3`` are the other three in the layout's order::

        1  s | p o g      2  s | o g p      3  s | g p o
        4  o | p g s      5  o | g p s      6  p | g o s

    Every non-empty set of bound positions except ``{g}`` is the partition key plus a
    clustering *prefix* of exactly one layout (checked at import: ``_LAYOUT_FOR``), so each
    pattern - ``s``, ``p``, ``o``, ``sp``, ``so``, ``po``, ``spo``, and each of them with a
    graph - is one single-partition slice: no ``ALLOW FILTERING``, the graph filter is part of
    the slice, and ``LIMIT`` counts only matching rows.  Six is the minimum: each of the six
    two-position combinations needs a layout of its own.  ``s`` or ``o`` is the partition
    wherever one of them is bound; ``p`` only for ``p`` and ``pg``, which are served by that
    (wide, but correctly paged) partition.  The layout is a clustering column, not part of the
    partition key, so one table holds all six layouts and a subject's three rows (and an
    object's two) land in one partition, i.e. one mutation per batch.
``quads_scan((collection, bucket), g, s, p, o)``
    One more row per quad, in one of :data:`SCAN_BUCKETS` partitions chosen by a hash of the
    subject: serves graph-only and fully unbound patterns (bucket by bucket) and is how
    :meth:`CassandraTriplesStore.delete_collection` finds every partition to delete.
``long_terms((collection, h), part, value)``
    Cassandra keys are limited to 64 KiB and big mutations are rejected, so a term whose
    canonical string is longer than :data:`KEY_MAX_BYTES` is keyed everywhere by
    ``#`` + its SHA-256 (no canonical term starts with ``#``) and its text is stored here once,
    in parts.  Reads resolve such keys with one extra look-up per distinct long term.
``collections(collection)``
    The collection registry.
``trace_list((collection, kind, day), ts DESC, uri DESC)``, ``trace_days((collection, kind), day DESC)``
    The trace listing: one row per Question in the ``all`` kind and one in its type's, newest
    first, in a partition per UTC day of its start time (:data:`TRACE_DAY_MICROS`), so no
    partition grows with the number of traces a collection keeps; ``trace_days`` names the days
    that have rows, so a page is the newest days' slices of ``limit`` rows whatever the number
    of traces.
``trace_keys((collection, bucket), uri)``
    A Question by URI, in one of :data:`TRACE_KEY_BUCKETS` partitions chosen by a hash of the
    URI; a trace claim is a lightweight transaction on its row.  Keyspaces written before the
    trace index was bucketed (tables ``traces`` and ``trace_uris``, one partition per collection)
    are moved over on first use (:meth:`CassandraTriplesStore._migrate_trace_index`).

Reads: :meth:`CassandraTriplesStore.query_many` sends patterns that differ only in their
partition key (a source-chain walk over many nodes, an exploration hop over many entities) as
one ``k IN (...)`` request with ``PER PARTITION LIMIT``, which reads each partition's slice
exactly as its own query would.

Writes are idempotent upserts (a redelivered batch rewrites the same rows), prepared, grouped
into unlogged batches by replica set (sized to stay under the server's batch-size warning
threshold, :func:`~.connection.batch_bytes`), and sent with at most ``concurrency`` requests in
flight.  Batching is what makes a Python writer fast enough (rates by batch size in
``bench/README.md``); values are encoded once per quad and shared by its seven rows instead
of being bound row by row through the driver.
Long terms are written before the rows that reference them and trace rows after the triples,
so an interrupted insert leaves nothing a retry would not complete.  Driver errors meaning
"Cassandra is not there or too slow" become :class:`~trustgraph_base.store.errors.StoreUnavailable`
(the service nacks; redelivery retries).
"""

from __future__ import annotations

import hashlib
import logging
import struct
import threading
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal, TypeVar, overload

from ...schema.primitives import Triple
from ...schema.query import TraceSummary
from ..errors import StoreError
from ..names import check_names, storage_name
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
from .connection import (
    CassandraConfig,
    Session,
    batch_bytes,
    cassandra_errors,
    connect,
    ensure_keyspace,
    lwt_applied,
)

T = TypeVar("T")
#: A row to write: (query id, encoded values, size in bytes).
_Row = tuple[bytes, list[bytes], int]
#: A partition's key components and its rows.
_Partition = tuple[tuple[bytes, ...], list[_Row]]

__all__ = ["CassandraTriplesStore", "SCAN_BUCKETS", "KEY_MAX_BYTES"]

#: Partitions of ``quads_scan`` per collection (fixed: changing it orphans stored rows).
SCAN_BUCKETS = 16
#: Partitions of ``trace_keys`` per collection (a URI's is a hash of it): 10M traces make ~156k rows each.
TRACE_KEY_BUCKETS = 64
#: The span of one ``trace_list`` partition: a UTC day of start times, in microseconds.
TRACE_DAY_MICROS = 86_400_000_000
#: Longest canonical term (UTF-8 bytes) used as a key as is; longer ones are keyed by hash.
KEY_MAX_BYTES = 1024
#: Characters per ``long_terms`` row (keeps each mutation far below the commit-log limit).
LONG_PART_CHARS = 256 * 1024
#: Rows in one batch at most, per KiB of the batch byte budget (:func:`.connection.batch_bytes`).
BATCH_ROWS_PER_KIB = 16
#: Quads turned into statements at once by :meth:`CassandraTriplesStore.insert`.
INSERT_CHUNK = 5000

log = logging.getLogger(__name__)

_ALL = "all"
_TRACE_KINDS = (_ALL, "graphrag", "docrag", "agent")
_NO_LIMIT = 2_147_483_647

#: Layout id -> order of positions (partition key first).
LAYOUTS: dict[int, str] = {1: "spog", 2: "sogp", 3: "sgpo", 4: "opgs", 5: "ogps", 6: "pgos"}
#: Bound-position set -> the layout whose partition key + clustering prefix it is.
_LAYOUT_FOR: dict[frozenset[str], int] = {}
for _id, _order in LAYOUTS.items():
    for _n in range(len(_order), 0, -1):
        _LAYOUT_FOR.setdefault(frozenset(_order[:_n]), _id)
del _id, _order, _n
assert all(frozenset(b) in _LAYOUT_FOR for b in ("s", "p", "o", "sp", "so", "sg", "po", "pg", "og", "spo", "spg",
                                                  "sog", "pog", "spog")), "layouts must cover every bound pattern"

class _ReplicaBatchWarning(logging.Filter):
    """Drops the server's "Unlogged batch covering N partitions" warning, echoed by the driver for every batch.

    This store sends such batches on purpose (grouped by replica set, see ``_batches``);
    every other server warning still gets through.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "Unlogged batch covering" not in record.getMessage()


_DRIVER_WARNINGS = logging.getLogger("cassandra.protocol")
if not any(isinstance(f, _ReplicaBatchWarning) for f in _DRIVER_WARNINGS.filters):
    _DRIVER_WARNINGS.addFilter(_ReplicaBatchWarning())


def _store_key(text: str) -> str:
    """The key a canonical string is stored under: itself, or ``#`` + SHA-256 when too long."""
    if len(text) * 4 <= KEY_MAX_BYTES or len(text.encode("utf-8")) <= KEY_MAX_BYTES:
        return text
    return "#" + hashlib.sha256(text.encode("utf-8")).hexdigest()


#: Partitions read by one multi-partition request (``k IN (...)``).
IN_KEYS = 100

_TINYINT = [struct.pack(">b", i) for i in range(8)]
_INT = [struct.pack(">i", i) for i in range(SCAN_BUCKETS)]


def _routing_key(*components: bytes) -> bytes:
    """The driver's routing key of a composite partition key (each part: length, bytes, 0)."""
    return b"".join(struct.pack(">H", len(c)) + c + b"\x00" for c in components)


def _partition_routing_key(components: tuple[bytes, ...]) -> bytes:
    """The routing key of a partition key given by its components (a single column routes by its value)."""
    return components[0] if len(components) == 1 else _routing_key(*components)


def _bucket(s_key: str) -> int:
    return zlib.crc32(s_key.encode("utf-8")) % SCAN_BUCKETS


def _chunked(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Lists of at most ``size`` of ``rows``, in order (a driver result set pages itself)."""
    part: list[Any] = []
    for row in rows:
        part.append(row)
        if len(part) == size:
            yield part
            part = []
    if part:
        yield part


def _key_bucket(uri: str) -> int:
    """The ``trace_keys`` partition of a Question URI."""
    return zlib.crc32(uri.encode("utf-8")) % TRACE_KEY_BUCKETS


def _day(ts: int) -> int:
    """The ``trace_list`` partition of a start time (microseconds since the epoch)."""
    return ts // TRACE_DAY_MICROS


class _Statements:
    """Prepared statements of one keyspace."""

    def __init__(self, session: Session, ks: str) -> None:
        self.keyspace = ks
        p = session.prepare
        self.insert_quad = p(f"INSERT INTO {ks}.quads (collection, k, layout, c1, c2, c3) VALUES (?, ?, ?, ?, ?, ?)")
        self.insert_scan = p(f"INSERT INTO {ks}.quads_scan (collection, bucket, g, s, p, o) VALUES (?, ?, ?, ?, ?, ?)")
        self.delete_quad = p(f"DELETE FROM {ks}.quads WHERE collection = ? AND k = ? AND layout = ? AND c1 = ? "
                             f"AND c2 = ? AND c3 = ?")
        self.delete_scan = p(f"DELETE FROM {ks}.quads_scan WHERE collection = ? AND bucket = ? AND g = ? AND s = ? "
                             f"AND p = ? AND o = ?")
        self.delete_partition = p(f"DELETE FROM {ks}.quads WHERE collection = ? AND k = ?")
        self.delete_bucket = p(f"DELETE FROM {ks}.quads_scan WHERE collection = ? AND bucket = ?")
        cols = ("c1", "c2", "c3")
        self.select = [
            p(f"SELECT c1, c2, c3 FROM {ks}.quads WHERE collection = ? AND k = ? AND layout = ?"
              + "".join(f" AND {c} = ?" for c in cols[:n]) + " LIMIT ?")
            for n in range(4)]
        # the same slices of several partitions in one request (see CassandraTriplesStore._query_keys)
        self.select_in = [
            p(f"SELECT k, c1, c2, c3 FROM {ks}.quads WHERE collection = ? AND k IN ? AND layout = ?"
              + "".join(f" AND {c} = ?" for c in cols[:n]) + " PER PARTITION LIMIT ?")
            for n in range(4)]
        self.scan = p(f"SELECT g, s, p, o FROM {ks}.quads_scan WHERE collection = ? AND bucket = ? LIMIT ?")
        self.scan_graph = p(f"SELECT g, s, p, o FROM {ks}.quads_scan WHERE collection = ? AND bucket = ? AND g = ? "
                            f"LIMIT ?")
        self.insert_long = p(f"INSERT INTO {ks}.long_terms (collection, h, part, value) VALUES (?, ?, ?, ?)")
        self.select_long = p(f"SELECT part, value FROM {ks}.long_terms WHERE collection = ? AND h = ?")
        self.delete_long = p(f"DELETE FROM {ks}.long_terms WHERE collection = ? AND h = ?")
        self.any_row = p(f"SELECT layout FROM {ks}.quads WHERE collection = ? AND k = ? LIMIT 1")
        self.insert_collection = p(f"INSERT INTO {ks}.collections (collection) VALUES (?)")
        self.delete_collection = p(f"DELETE FROM {ks}.collections WHERE collection = ?")
        self.list_collections = p(f"SELECT collection FROM {ks}.collections")
        self.insert_trace = p(f"INSERT INTO {ks}.trace_list (collection, kind, day, ts, uri, type, question, time, "
                              f"parent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
        self.insert_trace_day = p(f"INSERT INTO {ks}.trace_days (collection, kind, day) VALUES (?, ?, ?)")
        key_cols = "(collection, bucket, uri, ts, type, question, time, parent)"
        self.insert_trace_uri = p(f"INSERT INTO {ks}.trace_keys {key_cols} VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
        self.claim_trace_uri = p(f"INSERT INTO {ks}.trace_keys {key_cols} VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                                 f"IF NOT EXISTS")
        self.get_trace_uri = p(f"SELECT uri, type, question, time, parent, ts FROM {ks}.trace_keys "
                               f"WHERE collection = ? AND bucket = ? AND uri = ?")
        self.delete_trace = p(f"DELETE FROM {ks}.trace_list WHERE collection = ? AND kind = ? AND day = ? AND ts = ? "
                              f"AND uri = ?")
        self.delete_trace_uri = p(f"DELETE FROM {ks}.trace_keys WHERE collection = ? AND bucket = ? AND uri = ?")
        self.delete_trace_day = p(f"DELETE FROM {ks}.trace_list WHERE collection = ? AND kind = ? AND day = ?")
        self.delete_trace_days = p(f"DELETE FROM {ks}.trace_days WHERE collection = ? AND kind = ?")
        self.delete_trace_keys = p(f"DELETE FROM {ks}.trace_keys WHERE collection = ? AND bucket = ?")
        self.list_trace_days = p(f"SELECT day FROM {ks}.trace_days WHERE collection = ? AND kind = ?")
        self.list_trace_days_to = p(f"SELECT day FROM {ks}.trace_days WHERE collection = ? AND kind = ? AND day <= ?")
        trace_cols = "ts, uri, type, question, time, parent"
        self.list_traces = p(f"SELECT {trace_cols} FROM {ks}.trace_list WHERE collection = ? AND kind = ? "
                             f"AND day = ? LIMIT ?")
        self.list_traces_after = p(f"SELECT {trace_cols} FROM {ks}.trace_list WHERE collection = ? AND kind = ? "
                                   f"AND day = ? AND (ts, uri) < (?, ?) LIMIT ?")


_TABLES = (
    "CREATE TABLE IF NOT EXISTS {ks}.quads (collection text, k text, layout tinyint, c1 text, c2 text, c3 text, "
    "PRIMARY KEY ((collection, k), layout, c1, c2, c3))",
    "CREATE TABLE IF NOT EXISTS {ks}.quads_scan (collection text, bucket int, g text, s text, p text, o text, "
    "PRIMARY KEY ((collection, bucket), g, s, p, o))",
    "CREATE TABLE IF NOT EXISTS {ks}.long_terms (collection text, h text, part int, value text, "
    "PRIMARY KEY ((collection, h), part))",
    "CREATE TABLE IF NOT EXISTS {ks}.collections (collection text PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS {ks}.trace_list (collection text, kind text, day bigint, ts bigint, uri text, "
    "type text, question text, time text, parent text, PRIMARY KEY ((collection, kind, day), ts, uri)) "
    "WITH CLUSTERING ORDER BY (ts DESC, uri DESC)",
    "CREATE TABLE IF NOT EXISTS {ks}.trace_days (collection text, kind text, day bigint, "
    "PRIMARY KEY ((collection, kind), day)) WITH CLUSTERING ORDER BY (day DESC)",
    "CREATE TABLE IF NOT EXISTS {ks}.trace_keys (collection text, bucket int, uri text, ts bigint, type text, "
    "question text, time text, parent text, PRIMARY KEY ((collection, bucket), uri))",
)
#: The trace index's tables before it was bucketed (moved over and dropped on first use of a keyspace).
_UNBUCKETED_TRACE_TABLES = ("traces", "trace_uris")


class CassandraTriplesStore(TriplesStoreBase[_Statements]):
    """:class:`~trustgraph_base.store.triples.TriplesStore` on Apache Cassandra.

    :param config: where Cassandra is, replication factor and consistency (default: from the environment).
    :param concurrency: requests in flight per operation.
    :param ddl_timeout: seconds to wait for keyspace/table creation.
    """

    backend = "cassandra"

    def __init__(self, config: CassandraConfig | None = None, *, concurrency: int = 64,
                 ddl_timeout: float = 120.0) -> None:
        self.config = config or CassandraConfig()
        self.concurrency = int(concurrency)
        self._ddl_timeout = float(ddl_timeout)
        with cassandra_errors("connect"):
            self._session = connect(self.config)
            #: byte budget and most rows of one unlogged batch (sized to the server's thresholds)
            self.batch_bytes = batch_bytes(self._session)
            self.batch_rows = self.batch_bytes // 1024 * BATCH_ROWS_PER_KIB
        self._lock = threading.Lock()
        self._statements: dict[str, _Statements] = {}
        self._closed = False

    # ------------------------------------------------------------ schema

    def keyspace(self, user: str) -> str:
        """The keyspace of ``user`` (validated name)."""
        check_names(user)
        return storage_name("tg", user)

    def _space(self, user: str) -> _Statements | None:
        return self._prepared(user, create=False)

    @overload
    def _prepared(self, user: str, create: Literal[True] = True) -> _Statements: ...

    @overload
    def _prepared(self, user: str, create: bool) -> _Statements | None: ...

    def _prepared(self, user: str, create: bool = True) -> _Statements | None:
        """Statements of ``user``'s keyspace, creating keyspace and tables on first write.

        With ``create`` false, returns ``None`` when the keyspace does not exist (reads never create one).
        """
        if self._closed:
            raise StoreError("the triple store is closed")
        ks = self.keyspace(user)
        st = self._statements.get(ks)
        if st is not None:
            return st
        with self._lock:
            st = self._statements.get(ks)
            if st is not None:
                return st
            session = self._session
            with cassandra_errors(f"schema set-up of {ks}"):
                if not create:
                    found = session.execute("SELECT keyspace_name FROM system_schema.keyspaces "
                                            "WHERE keyspace_name = %s", (ks,)).one()
                    if found is None:
                        return None
                self._ensure_keyspace(ks)
                pending = [session.execute_async(ddl.format(ks=ks), timeout=self._ddl_timeout) for ddl in _TABLES]
                for future in pending:
                    future.result()
                st = _Statements(session, ks)
                self._migrate_trace_index(st, ks)
                self._statements[ks] = st
        return st

    def _migrate_trace_index(self, st: _Statements, ks: str, chunk: int = 10_000) -> None:
        """Move a trace index written before it was bucketed (tables ``traces`` and ``trace_uris``, one
        partition per collection) into ``trace_list``, ``trace_days`` and ``trace_keys``, then drop the old
        tables.  The copies are upserts, so a move cut short is done again, whole, on the next first use."""
        session = self._session
        found = {r.table_name for r in session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (ks,))}
        old = [t for t in _UNBUCKETED_TRACE_TABLES if t in found]
        if not old:
            return
        moved = 0
        if "trace_uris" in old:
            rows = session.execute(f"SELECT collection, uri, ts, type, question, time, parent FROM {ks}.trace_uris")
            for part in _chunked(rows, chunk):
                self._run([(st.insert_trace_uri, (r.collection, _key_bucket(r.uri), r.uri, r.ts, r.type, r.question,
                                                  r.time, r.parent)) for r in part], "trace index move")
                moved += len(part)
        if "traces" in old:
            rows = session.execute(f"SELECT collection, kind, ts, uri, type, question, time, parent FROM {ks}.traces")
            for part in _chunked(rows, chunk):
                days = {(r.collection, r.kind, _day(r.ts)) for r in part}
                self._run([(st.insert_trace_day, d) for d in days], "trace index move")
                self._run([(st.insert_trace, (r.collection, r.kind, _day(r.ts), r.ts, r.uri, r.type, r.question,
                                              r.time, r.parent)) for r in part], "trace index move")
        for table in old:
            session.execute(f"DROP TABLE IF EXISTS {ks}.{table}", timeout=self._ddl_timeout)
        log.info("%s: the trace index of %d trace(s) moved to day and URI buckets; dropped %s", ks, moved,
                 ", ".join(old))

    def _ensure_keyspace(self, ks: str, attempts: int = 3) -> None:
        """Create the keyspace; schema changes on a busy node can outlast the request time-out, so a
        time-out is retried (``CREATE KEYSPACE IF NOT EXISTS`` is idempotent) before giving up."""
        for attempt in range(attempts):
            try:
                ensure_keyspace(self._session, ks, self.config.replication_factor)
                return
            except Exception as e:
                if type(e).__name__ != "OperationTimedOut" or attempt == attempts - 1:
                    raise

    # ------------------------------------------------------------ execution helpers

    def _run(self, statements: Iterable[tuple[Any, Any]], what: str) -> list[Any]:
        """Execute ``(statement, params)`` pairs with bounded concurrency; results in order."""
        from cassandra.concurrent import execute_concurrent

        pairs = list(statements)
        if not pairs:
            return []
        with cassandra_errors(what):
            results = execute_concurrent(self._session, pairs, concurrency=self.concurrency,
                                         raise_on_first_error=True, results_generator=False)
        return [r.result_or_exc for r in results]

    def _batches(self, ks: str, partitions: Iterable[_Partition]) -> list[tuple[Any, Any]]:
        """Unlogged batches of pre-encoded rows, grouped by the replica set of their partition.

        ``partitions`` holds ``(partition key components, [(query id, encoded values, size), ...])``.  Rows of
        one partition stay adjacent (Cassandra applies them as one mutation); partitions owned
        by the same replicas share a batch, as dsbulk's ``REPLICA_SET`` batch mode does,
        because per-request overhead, not row count, limits a Python writer.  Each batch stays
        within :attr:`batch_bytes` and :attr:`batch_rows`.
        """
        from cassandra.query import BatchStatement, BatchType

        groups = self._by_replica_set(ks, partitions, lambda partition: _partition_routing_key(partition[0]))
        out = []
        for group in groups:
            routing_key = _partition_routing_key(group[0][0])
            batch, size, count = None, 0, 0
            for query_id, values, row_size in (row for _, rows in group for row in rows):
                if batch is None or size + row_size > self.batch_bytes or count >= self.batch_rows:
                    batch, size, count = BatchStatement(batch_type=BatchType.UNLOGGED), 0, 0
                    batch.keyspace, batch.routing_key = ks, routing_key
                    out.append((batch, ()))
                batch._add_statement_and_params(True, query_id, values)  # values are already encoded
                size += row_size
                count += 1
        return out

    def _resolve_long(self, st: _Statements, collection: str, keys: set[str]) -> dict[str, str]:
        """Texts of hashed long-term keys."""
        if not keys:
            return {}
        ordered = sorted(keys)
        results = self._run(((st.select_long, (collection, h)) for h in ordered), "long-term look-up")
        out = {}
        for h, rows in zip(ordered, results, strict=True):
            parts = sorted(rows, key=lambda r: r.part)
            if not parts:
                raise StoreError(f"stored term {h} has no text (interrupted write?); re-insert the batch")
            out[h] = "".join(r.value for r in parts)
        return out

    def _triples(self, st: _Statements, collection: str, quads: list[tuple[str, str, str, str]]) -> list[Triple]:
        """Triples from stored ``(s, p, o, g)`` keys, resolving long terms."""
        long_keys = {k for q in quads for k in q if k[:1] == "#"}
        if long_keys:
            text = self._resolve_long(st, collection, long_keys)

            def resolved(k: str) -> str:
                return text.get(k, k) if k[:1] == "#" else k

            quads = [(resolved(s), resolved(p), resolved(o), resolved(g)) for s, p, o, g in quads]
        return [Triple(term_from_key(s), term_from_key(p), term_from_key(o), g) for s, p, o, g in quads]

    # ------------------------------------------------------------ writes

    def _insert(self, user: str, collection: str, quads: list[QuadKey], traces: list[IndexedTrace]) -> None:
        """Write ``quads`` (the user's keyspace is created on first use; the collection registered if new)."""
        st = self._prepared(user)
        # the trace index is read (is a Question already indexed?) alongside the last chunk's writes;
        # the collection's registry row travels in the first chunk's batches
        lookups = [(st.get_trace_uri, (collection, _key_bucket(t.summary.uri), t.summary.uri)) for t in traces]
        existing: list[Any] = []
        for i in range(0, max(len(quads), 1), INSERT_CHUNK):
            last = i + INSERT_CHUNK >= len(quads)
            existing = self._insert_chunk(st, collection, quads[i:i + INSERT_CHUNK], lookups if last else [],
                                          register=i == 0)
        if traces:
            self._index_traces(st, collection, traces, existing)

    def _claim(self, user: str, collection: str, quads: list[QuadKey], question: IndexedTrace) -> bool:
        """The claim is a lightweight transaction (``INSERT ... IF NOT EXISTS``, serial consistency
        ``SERIAL``) on the Question's ``trace_keys`` row, so of concurrent claims from any number of
        processes exactly one is applied.  Only the winner then writes the triples and the listing
        rows.  An interrupted claim leaves its ``trace_keys`` row: the URI stays claimed (and
        :meth:`get_trace` finds it) but is not listed; deleting the trace frees it.
        """
        from cassandra import ConsistencyLevel

        st = self._prepared(user)
        s = question.summary
        claim = st.claim_trace_uri.bind((collection, _key_bucket(s.uri), s.uri, question.ts, s.type, s.question, s.time,
                                         s.parent))
        claim.serial_consistency_level = ConsistencyLevel.SERIAL
        with cassandra_errors("trace claim"):
            if not lwt_applied(self._session.execute(claim)):
                return False
        for i in range(0, len(quads), INSERT_CHUNK):
            self._insert_chunk(st, collection, quads[i:i + INSERT_CHUNK], [], register=i == 0)
        self._index_traces(st, collection, [question], [[]], uri_rows=False)
        return True

    def _insert_chunk(self, st: _Statements, collection: str, quads: Sequence[QuadKey], reads: list[tuple[Any, Any]],
                      register: bool = False) -> list[Any]:
        """Write the rows of ``quads`` (and, with ``register``, the collection's registry row);
        ``reads`` run in the same concurrent window (their results are returned)."""
        long_texts: dict[str, str] = {}

        def key(text: str) -> str:
            k = _store_key(text)
            if k is not text:
                long_texts[k] = text
            return k

        # Every value is encoded to its CQL bytes once per chunk and shared by the seven rows
        # of its quad (binding each row through the driver costs more than the request).
        encoded: dict[str, bytes] = {}

        def enc(text: str) -> bytes:
            b = encoded.get(text)
            if b is None:
                b = encoded[text] = text.encode("utf-8")
            return b

        c = enc(collection)
        parts: dict[bytes, list[_Row]] = defaultdict(list)
        scans: dict[int, list[_Row]] = defaultdict(list)
        q, sc = st.insert_quad.query_id, st.insert_scan.query_id
        l1, l2, l3, l4, l5, l6 = _TINYINT[1:7]
        for s, p, o, g in quads:
            if len(s) > 256 or len(o) > 256 or len(p) > 256 or len(g) > 256:
                s, p, o, g = key(s), key(p), key(o), key(g)
            es, ep, eo, eg = enc(s), enc(p), enc(o), enc(g)
            size = 24 + len(c) + len(es) + len(ep) + len(eo) + len(eg)
            rows = parts[es]
            rows.append((q, [c, es, l1, ep, eo, eg], size))
            rows.append((q, [c, es, l2, eo, eg, ep], size))
            rows.append((q, [c, es, l3, eg, ep, eo], size))
            rows = parts[eo]
            rows.append((q, [c, eo, l4, ep, eg, es], size))
            rows.append((q, [c, eo, l5, eg, ep, es], size))
            parts[ep].append((q, [c, ep, l6, eg, eo, es], size))
            b = zlib.crc32(es) % SCAN_BUCKETS
            scans[b].append((sc, [c, _INT[b], eg, es, ep, eo], size))
        if long_texts:
            self._run(((st.insert_long, (collection, h, i // LONG_PART_CHARS, text[i:i + LONG_PART_CHARS]))
                       for h, text in long_texts.items() for i in range(0, len(text), LONG_PART_CHARS)),
                      "insert of long terms")
        partitions: list[_Partition] = [((c, k), rows) for k, rows in parts.items()]
        partitions += [((c, _INT[b]), rows) for b, rows in scans.items()]
        if register:
            partitions.append(((c,), [(st.insert_collection.query_id, [c], 16 + len(c))]))
        writes = self._batches(st.keyspace, partitions)
        return self._run(writes + reads, "insert")[len(writes):]

    def _index_traces(self, st: _Statements, collection: str, traces: Sequence[IndexedTrace],
                      existing: Sequence[Any], uri_rows: bool = True) -> None:
        """Index Questions not indexed yet (``existing``: their ``trace_keys`` rows; the first indexing
        wins, as in SQLite); rows of one partition stay adjacent in the batches.  Without ``uri_rows``
        only the listing rows are written (a claim wrote the ``trace_keys`` row).  The ``trace_days``
        rows go first, so a listed row's day is always known to the listing."""
        groups: dict[tuple[Any, ...], list[tuple[Any, tuple[Any, ...], int]]] = defaultdict(list)
        days: set[tuple[str, int]] = set()
        for t, rows in zip(traces, existing, strict=True):
            if rows:
                continue
            s, day = t.summary, _day(t.ts)
            size = 56 + len(s.uri) + len(s.question) + len(s.time) + len(s.parent)
            for kind in (_ALL, s.type):
                days.add((kind, day))
                groups[(kind, day)].append((st.insert_trace, (collection, kind, day, t.ts, s.uri, s.type, s.question,
                                                              s.time, s.parent), size))
            if uri_rows:
                groups[("", _key_bucket(s.uri))].append((st.insert_trace_uri, (
                    collection, _key_bucket(s.uri), s.uri, t.ts, s.type, s.question, s.time, s.parent), size))
        self._run(self._row_batches([[(st.insert_trace_day, (collection, kind, day), 48)] for kind, day in days]),
                  "trace index")
        # One request for a query's Question: its (at most five) partitions share a batch.
        self._run(self._row_batches(list(groups.values())), "trace index")

    def _row_batches(self, partitions: list[list[tuple[Any, tuple[Any, ...], int]]]) -> list[tuple[Any, Any]]:
        """Unlogged batches of bound rows ``(statement, values, size)``, a partition's rows adjacent."""
        from cassandra.query import BatchStatement, BatchType

        statements: list[tuple[Any, Any]] = []
        batch, used = None, 0
        for stmt, params, size in (row for rows in partitions for row in rows):
            if batch is None or used + size > self.batch_bytes or len(batch) >= self.batch_rows:
                batch, used = BatchStatement(batch_type=BatchType.UNLOGGED), 0
                statements.append((batch, ()))
            batch.add(stmt, params)
            used += size
        return statements

    def _delete(self, st: _Statements, user: str, collection: str, quads: list[QuadKey]) -> int:
        keyed = [tuple(_store_key(x) for x in q) for q in quads]
        found = self._run(((st.select[3], (collection, s, 1, p, o, g, 1)) for s, p, o, g in keyed), "delete")
        present = [(q, k) for q, k, rows in zip(quads, keyed, found, strict=True) if rows]
        # the seven rows of each quad, in unlogged batches by partition as inserts are written (one request
        # per row made removing a document of some hundred edges take seconds)
        c = collection.encode("utf-8")
        qd, sd = st.delete_quad.query_id, st.delete_scan.query_id
        l1, l2, l3, l4, l5, l6 = _TINYINT[1:7]
        parts: dict[bytes, list[tuple[Any, ...]]] = defaultdict(list)
        scans: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
        for _, (s, p, o, g) in present:
            es, ep, eo, eg = s.encode("utf-8"), p.encode("utf-8"), o.encode("utf-8"), g.encode("utf-8")
            size = 24 + len(c) + len(es) + len(ep) + len(eo) + len(eg)
            parts[es] += [(qd, [c, es, l1, ep, eo, eg], size), (qd, [c, es, l2, eo, eg, ep], size),
                          (qd, [c, es, l3, eg, ep, eo], size)]
            parts[eo] += [(qd, [c, eo, l4, ep, eg, es], size), (qd, [c, eo, l5, eg, ep, es], size)]
            parts[ep].append((qd, [c, ep, l6, eg, eo, es], size))
            b = _bucket(s)
            scans[b].append((sd, [c, _INT[b], eg, es, ep, eo], size))
        partitions = [((c, k), rows) for k, rows in parts.items()]
        partitions += [((c, _INT[b]), rows) for b, rows in scans.items()]
        self._run(self._batches(st.keyspace, partitions), "delete")
        for q, _ in present:
            if question_type_of(q):
                self.remove_trace(user, collection, q[0][1:-1])
        # the text of a long term goes with its last quad (a subject, predicate or object key is a partition of
        # ``quads``; a long graph name is not looked for and stays)
        graphs = {k[3] for _, k in present}
        long_keys = sorted({x for _, k in present for x in k[:3] if x.startswith("#") and x not in graphs})
        if long_keys:
            used = self._run(((st.any_row, (collection, h)) for h in long_keys), "delete")
            self._run([(st.delete_long, (collection, h))
                       for h, rows in zip(long_keys, used, strict=True) if not rows], "delete")
        return len(present)

    def _delete_collection(self, st: _Statements, user: str, collection: str) -> int:
        """Every row of every layout, long terms and the trace index.

        Pages through the scan table bucket by bucket and deletes whole partitions; the
        registry row goes last, so an interrupted delete is finished by calling it again.
        """
        count = 0
        deleted: set[str] = set()
        c = collection
        for bucket in range(SCAN_BUCKETS):
            for rows in self._scan_pages(st, c, bucket, None, _NO_LIMIT, 5000):
                count += len(rows)
                fresh = {k for row in rows for k in (row[1], row[2], row[3]) if k not in deleted}
                statements = [(st.delete_partition, (c, k)) for k in fresh]
                statements += [(st.delete_long, (c, k)) for row in rows for k in row if k[:1] == "#"]
                self._run(statements, "collection delete")
                deleted |= fresh
                if len(deleted) > 1_000_000:
                    deleted.clear()
            self._run([(st.delete_bucket, (c, bucket))], "collection delete")
        self._delete_trace_index(st, c)
        self._run([(st.delete_collection, (c,))], "collection delete")
        return count

    # ------------------------------------------------------------ reads

    @staticmethod
    def _layout_query(st: _Statements, collection: str, pk: PatternKey, limit: int) -> tuple[Any, ...]:
        """``(prepared, params, partition key, layout order)`` of the one-partition slice answering ``pk``."""
        bound = {pos: key for pos, key in (("s", pk.s), ("p", pk.p), ("o", pk.o), ("g", pk.g)) if key is not None}
        layout = _LAYOUT_FOR[frozenset(bound)]
        order = LAYOUTS[layout]
        values = [_store_key(bound[pos]) for pos in order[:len(bound)]]
        return st.select[len(values) - 1], (collection, values[0], layout, *values[1:], limit), values[0], order

    @staticmethod
    def _unrotate(rows: Iterable[Any], head: str, order: str) -> list[tuple[str, str, str, str]]:
        """Stored ``(s, p, o, g)`` keys from ``(c1, c2, c3)`` rows of a layout."""
        i_s, i_p, i_o, i_g = (order.index(x) for x in "spog")
        out = []
        for c1, c2, c3 in rows:
            r = (head, c1, c2, c3)
            out.append((r[i_s], r[i_p], r[i_o], r[i_g]))
        return out

    def _layout_pages(self, st: _Statements, collection: str, pk: PatternKey, limit: int,
                      page_size: int) -> Iterator[list[tuple[str, str, str, str]]]:
        """Pages of stored ``(s, p, o, g)`` keys for a pattern with a bound ``s``, ``p`` or ``o``."""
        stmt, params, head, order = self._layout_query(st, collection, pk, limit)
        rs = self._execute(stmt, params, page_size, "query")
        while True:
            if rs.current_rows:
                yield self._unrotate(rs.current_rows, head, order)
            if not rs.has_more_pages:
                return
            with cassandra_errors("query"):
                rs.fetch_next_page()

    def _scan_pages(self, st: _Statements, collection: str, bucket: int, g: str | None, limit: int,
                    page_size: int) -> Iterator[list[tuple[str, str, str, str]]]:
        """Pages of ``(g, s, p, o)`` rows of one scan bucket (optionally one graph)."""
        if g is None:
            rs = self._execute(st.scan, (collection, bucket, limit), page_size, "scan")
        else:
            rs = self._execute(st.scan_graph, (collection, bucket, _store_key(g), limit), page_size, "scan")
        while True:
            if rs.current_rows:
                yield list(rs.current_rows)
            if not rs.has_more_pages:
                return
            with cassandra_errors("scan"):
                rs.fetch_next_page()

    def _execute(self, stmt: Any, params: Any, page_size: int, what: str) -> Any:
        from cassandra.query import BoundStatement

        with cassandra_errors(what):
            bound = BoundStatement(stmt, fetch_size=page_size).bind(params)
            return self._session.execute(bound)

    def _key_pages(self, st: _Statements, collection: str, pk: PatternKey, limit: int,
                   page_size: int) -> Iterator[list[tuple[str, str, str, str]]]:
        """Pages of stored ``(s, p, o, g)`` keys matching ``pk``, at most ``limit`` rows in all."""
        if pk.s is not None or pk.p is not None or pk.o is not None:
            yield from self._layout_pages(st, collection, pk, limit, page_size)
            return
        remaining = limit
        for bucket in range(SCAN_BUCKETS):
            for rows in self._scan_pages(st, collection, bucket, pk.g, remaining, page_size):
                remaining -= len(rows)
                yield [(s, p, o, g) for g, s, p, o in rows]
            if remaining <= 0:
                return

    def _query(self, st: _Statements, user: str, collection: str, pk: PatternKey) -> list[Triple]:
        keys = [q for page in self._key_pages(st, collection, pk, pk.limit, min(pk.limit, 5000)) for q in page]
        return self._triples(st, collection, keys)

    def _query_many(self, st: _Statements, user: str, collection: str, keys: list[PatternKey]) -> list[list[Triple]]:
        """Single-partition patterns run concurrently."""
        return self._query_keys(st, collection, keys)

    def _query_keys(self, st: _Statements, collection: str, keys: Sequence[PatternKey]) -> list[list[Triple]]:
        """Answer ``keys`` with as few requests as exactness allows, ``concurrency`` of them in flight.

        Patterns that differ only in their partition key (the same layout, the same clustering
        values and the same limit: a walk describing many nodes, an exploration hop over many
        entities) are answered by one multi-partition read, ``k IN (...)`` with
        ``PER PARTITION LIMIT``: each partition's slice and limit are exactly those of its own
        single-partition query, and the rows come back tagged with their ``k``.  A request costs
        Cassandra about as much as reading a small partition, so a GraphRAG source-chain walk
        takes a handful of requests instead of one per pattern.  Groups stay within one replica set and
        :data:`IN_KEYS` keys; the other patterns are single-partition reads.
        """
        from cassandra.query import BoundStatement

        groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        layouts: list[Any] = [None] * len(keys)
        for i, pk in enumerate(keys):
            if pk.s is None and pk.p is None and pk.o is None:
                continue                                  # a scan: bucket by bucket below
            layouts[i] = self._layout_query(st, collection, pk, pk.limit)
            params = layouts[i][1]
            groups[(params[2], params[3:-1], pk.limit)].append(i)
        specs: list[Any] = []   # (bound statement, [pattern indexes], head or None (a group), layout order)
        for (layout, clustering, limit), members in groups.items():
            heads = list(dict.fromkeys(layouts[i][2] for i in members))
            if len(heads) == 1:
                for i in members:
                    stmt, params, head, order = layouts[i]
                    specs.append((BoundStatement(stmt, fetch_size=min(limit, 5000)).bind(params), [i], head, order))
                continue
            for part in self._in_groups(st.keyspace, collection, heads):
                wanted = set(part)
                specs.append((BoundStatement(st.select_in[len(clustering)], fetch_size=5000).bind(
                    (collection, part, layout, *clustering, limit)),
                    [i for i in members if layouts[i][2] in wanted], None, LAYOUTS[layout]))
        rows: list[list[Any] | None] = [None] * len(keys)
        for start in range(0, len(specs), self.concurrency):
            window = specs[start:start + self.concurrency]
            with cassandra_errors("query"):
                futures = [self._session.execute_async(bound) for bound, _, _, _ in window]
            for future, (_, members, head, order) in zip(futures, window, strict=True):
                with cassandra_errors("query"):
                    result = list(future.result())   # iterating fetches further pages
                if head is not None:
                    rows[members[0]] = self._unrotate(result, head, order)
                    continue
                by_head: dict[str, list[Any]] = defaultdict(list)
                for k, c1, c2, c3 in result:
                    by_head[k].append((c1, c2, c3))
                for i in members:
                    h = layouts[i][2]
                    rows[i] = self._unrotate(by_head.get(h, ()), h, order)
        out = []
        for pk, found in zip(keys, rows, strict=True):
            if found is None:
                found = [q for page in self._key_pages(st, collection, pk, pk.limit, min(pk.limit, 5000))
                         for q in page]
            out.append(self._triples(st, collection, found))
        return out

    def _by_replica_set(self, ks: str, items: Iterable[T], routing_key_of: Callable[[T], bytes]) -> list[list[T]]:
        """``items`` grouped by the replica set of their partition (``routing_key_of(item)``), in first-seen order.

        A one-node cluster has one replica set: no token is computed (computing them is a visible share
        of the client CPU of a small insert, ``bench/README.md``).
        """
        if self._one_replica_set():
            every = list(items)
            return [every] if every else []
        groups: dict[tuple[str, ...], list[T]] = defaultdict(list)
        for item in items:
            groups[self._replicas(ks, routing_key_of(item))].append(item)
        return list(groups.values())

    def _one_replica_set(self) -> bool:
        return len(self._session.cluster.metadata.all_hosts()) <= 1

    def _replicas(self, ks: str, routing_key: bytes) -> tuple[str, ...]:
        """The replica set of a partition (a sortable tuple of endpoints)."""
        try:
            return tuple(sorted(str(h.endpoint) for h in self._session.cluster.metadata.get_replicas(ks, routing_key)))
        except Exception:  # noqa: BLE001 - no token map (yet): one group is still correct
            return ()

    def _in_groups(self, ks: str, collection: str, heads: list[str]) -> Iterator[list[str]]:
        """``heads`` in groups of at most :data:`IN_KEYS` whose partitions share their replicas."""
        c = collection.encode("utf-8")
        for group in self._by_replica_set(ks, heads, lambda h: _routing_key(c, h.encode("utf-8"))):
            for i in range(0, len(group), IN_KEYS):
                yield group[i:i + IN_KEYS]

    def _iter_query(self, st: _Statements, user: str, collection: str, pk: PatternKey,
                    page_size: int) -> Iterator[list[Triple]]:
        return self._pages(st, collection, pk, page_size)

    def _pages(self, st: _Statements, collection: str, pk: PatternKey, page_size: int) -> Iterator[list[Triple]]:
        limit = _NO_LIMIT if pk.unlimited else pk.limit
        buffer: list[Any] = []
        for rows in self._key_pages(st, collection, pk, limit, page_size):
            buffer.extend(rows)
            while len(buffer) >= page_size:
                yield self._triples(st, collection, buffer[:page_size])
                buffer = buffer[page_size:]
        if buffer:
            yield self._triples(st, collection, buffer)

    def _count(self, st: _Statements, user: str, collection: str, pk: PatternKey) -> int:
        """Pages through the keys."""
        return sum(len(rows) for rows in self._key_pages(st, collection, pk, _NO_LIMIT, 5000))

    def _list_collections(self, st: _Statements, user: str) -> list[str]:
        with cassandra_errors("list collections"):
            return sorted(r.collection for r in self._session.execute(st.list_collections))

    # ------------------------------------------------------------ trace index

    def _delete_trace_index(self, st: _Statements, c: str) -> None:
        """Every row of collection ``c``'s trace index: each day's listing, then the days, then the keys."""
        with cassandra_errors("collection delete"):
            days = {kind: [r.day for r in self._session.execute(st.list_trace_days, (c, kind))]
                    for kind in _TRACE_KINDS}
        self._run([(st.delete_trace_day, (c, kind, day)) for kind, ds in days.items() for day in ds],
                  "collection delete")
        self._run([(st.delete_trace_days, (c, kind)) for kind in _TRACE_KINDS]
                  + [(st.delete_trace_keys, (c, b)) for b in range(TRACE_KEY_BUCKETS)], "collection delete")

    def _list_traces(self, st: _Statements, user: str, collection: str, type: str, limit: int,
                     after: tuple[int, str] | None) -> TracePage:
        """``limit + 1`` rows from the newest days' slices (after the cursor's row, on its day and older ones)."""
        kind = type or _ALL
        rows: list[Any] = []
        with cassandra_errors("list traces"):
            if after is None:
                days = self._session.execute(st.list_trace_days, (collection, kind))
            else:
                days = self._session.execute(st.list_trace_days_to, (collection, kind, _day(after[0])))
            for day in (r.day for r in days):
                wanted = limit + 1 - len(rows)
                if after is not None and day == _day(after[0]):
                    rows += self._session.execute(st.list_traces_after, (collection, kind, day, *after, wanted))
                else:
                    rows += self._session.execute(st.list_traces, (collection, kind, day, wanted))
                if len(rows) > limit:
                    break
        page = [TraceSummary(uri=r.uri, type=r.type, question=r.question, time=r.time, parent=r.parent)
                for r in rows[:limit]]
        next_cursor = encode_cursor(rows[limit - 1].ts, rows[limit - 1].uri) if len(rows) > limit else ""
        return TracePage(page, next_cursor)

    def _get_trace(self, st: _Statements, user: str, collection: str, question_uri: str) -> TraceSummary | None:
        with cassandra_errors("get trace"):
            row = self._session.execute(st.get_trace_uri, (collection, _key_bucket(question_uri), question_uri)).one()
        if row is None:
            return None
        return TraceSummary(uri=row.uri, type=row.type, question=row.question, time=row.time, parent=row.parent)

    def _remove_trace(self, st: _Statements, user: str, collection: str, question_uri: str) -> None:
        bucket = _key_bucket(question_uri)
        with cassandra_errors("remove trace"):
            row = self._session.execute(st.get_trace_uri, (collection, bucket, question_uri)).one()
        if row is None:
            return
        day = _day(row.ts)
        self._run([(st.delete_trace, (collection, _ALL, day, row.ts, row.uri)),
                   (st.delete_trace, (collection, row.type, day, row.ts, row.uri))], "remove trace")
        self._run([(st.delete_trace_uri, (collection, bucket, question_uri))], "remove trace")

    def close(self) -> None:
        """Forget prepared statements; the shared session stays open for other stores of this process."""
        self._closed = True
        self._statements.clear()
