"""Cassandra vector index: ``vector<float, n>`` columns with a Storage-Attached Index, ANN queries.

Tables in the user's keyspace (``storage_name("tg", user)``, shared with the triple store):

* ``vector_index_info ((kind, collection))`` — model id, dimension and shard count, recorded by
  the first write with a lightweight transaction so concurrent first writers agree on one model.
* ``graph_embeddings_{n}`` / ``document_embeddings_{n}`` — one table per kind and dimension,
  ``PRIMARY KEY ((collection, shard), id)``, with each vector's label, document id and source mark;
  SAI indexes on ``vector`` (COSINE) and ``document_id``.  A table made before vectors kept their source
  mark gets the ``source`` column when a process first uses it (``ALTER TABLE ... ADD IF NOT EXISTS``).
  A search is ``WHERE collection = ? AND shard = ? ORDER BY vector ANN OF ? LIMIT ?`` per shard,
  run concurrently and merged.

Why partitions per collection: an ANN query restricted to one partition is about ten times
faster than the same query restricted by an SAI-indexed ``collection`` column over id-keyed
rows, because SAI materialises every row of the collection before ordering (figures in
``bench/README.md``).  ANN
accepts neither ``IN`` on the partition key nor a restriction on part of it, hence one query
per shard.  ``shards`` (default 1, fixed per index at its first write) bounds partition size
for very large collections — about 1.6 KB per 384-dimension vector — at the cost of one more
concurrent query per shard.  Deleting a collection is a partition delete per shard.

Cassandra's ``similarity_cosine`` is ``(1 + cos) / 2``; hits are converted back to cosine.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import StoreUnavailable
from ..names import check_names, storage_name
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
from .connection import CassandraConfig, Session, cassandra_errors, connect, ensure_keyspace
from .librarian import DDL_TIMEOUT

__all__ = ["CassandraVectorIndex", "shard_of", "MAX_SHARDS"]

#: Write requests one call keeps in flight.  Cassandra 5.0.8 (and 5.0.9) fail vector inserts once
#: more than a few run at once into one table's in-memory SAI graph (CASSANDRA-21644: jvector's
#: "number of outstanding pooled objects has gone beyond the limit of 3"), and the failed
#: mutation leaves that server thread unable to apply later writes to any table until a
#: restart.  So vector writes go as unlogged batches of one partition's rows (one mutation
#: each, applied by one thread), at most two at a time.
CONCURRENCY = 2
#: Rows of one partition per unlogged batch (a 384-dimension row is ~1.6 KB; Cassandra refuses
#: batches over 50 KB by default).
BATCH_ROWS = 16
#: Rounds of retrying the writes that timed out (they are idempotent).
WRITE_RETRIES = 4
#: How long a search trusts its cached copy of the model record (writes always read it fresh).
INFO_CACHE_SECONDS = 5.0

#: Fewest neighbours an ANN query asks Cassandra for (the best ``limit`` are kept): the graph
#: search's beam follows the query's LIMIT, and with a LIMIT of 1-5 it missed the true nearest
#: vector now and then (300 random 32-dimension vectors, LIMIT 5).
MIN_ANN_FETCH = 10

#: Most shards one collection's index may be spread over.
MAX_SHARDS = 64

_INFO_TABLE = """CREATE TABLE IF NOT EXISTS {ks}.vector_index_info (
    kind text, collection text, model_id text, dimension int, shards int, PRIMARY KEY ((kind, collection)))"""
_DATA_TABLE = """CREATE TABLE IF NOT EXISTS {ks}.{table} (
    collection text, shard int, id text, vector vector<float, {dim}>, label text, document_id text, source blob,
    PRIMARY KEY ((collection, shard), id))"""
_SOURCE_COLUMN = "ALTER TABLE {ks}.{table} ADD IF NOT EXISTS source blob"
_DATA_INDEXES = (
    "CREATE CUSTOM INDEX IF NOT EXISTS {table}_vector ON {ks}.{table} (vector) USING 'StorageAttachedIndex' "
    "WITH OPTIONS = {{'similarity_function': 'COSINE'}}",
    "CREATE CUSTOM INDEX IF NOT EXISTS {table}_document ON {ks}.{table} (document_id) USING 'StorageAttachedIndex'",
)


def shard_of(item_id: str, shards: int) -> int:
    """The shard an id lives in (stable across processes and versions: CRC-32 of its UTF-8 bytes)."""
    return zlib.crc32(item_id.encode("utf-8")) % shards if shards > 1 else 0


class _Table:
    """Prepared statements of one (keyspace, kind, dimension) table."""

    def __init__(self, session: Session, ks: str, table: str):
        p = session.prepare
        where = "WHERE collection = ? AND shard = ?"
        self.insert = p(f"INSERT INTO {ks}.{table} (collection, shard, id, vector, label, document_id, source) "
                        f"VALUES (?, ?, ?, ?, ?, ?, ?)")
        self.search = p(f"SELECT id, label, document_id, similarity_cosine(vector, ?) AS score FROM {ks}.{table} "
                        f"{where} ORDER BY vector ANN OF ? LIMIT ?")
        self.existing = p(f"SELECT id, source FROM {ks}.{table} {where} AND id IN ?")
        self.by_document = p(f"SELECT id FROM {ks}.{table} {where} AND document_id = ?")
        self.count = p(f"SELECT count(*) FROM {ks}.{table} {where}")
        self.delete = p(f"DELETE FROM {ks}.{table} {where} AND id = ?")
        self.delete_shard = p(f"DELETE FROM {ks}.{table} {where}")
        for stmt in (self.insert, self.search, self.existing, self.by_document, self.count, self.delete,
                     self.delete_shard):
            stmt.is_idempotent = True


class _Keyspace:
    """Prepared statements of one user's model records."""

    def __init__(self, session: Session, ks: str):
        p = session.prepare
        self.name = ks
        self.get_info = p(f"SELECT model_id, dimension, shards FROM {ks}.vector_index_info "
                          f"WHERE kind = ? AND collection = ?")
        self.create_info = p(f"INSERT INTO {ks}.vector_index_info (kind, collection, model_id, dimension, shards) "
                             f"VALUES (?, ?, ?, ?, ?) IF NOT EXISTS")
        self.delete_info = p(f"DELETE FROM {ks}.vector_index_info WHERE kind = ? AND collection = ?")
        self.get_info.is_idempotent = True


class CassandraVectorIndex(VectorIndexBase):
    """Vector index of one kind on Cassandra 5 SAI; one keyspace per user.

    :param kind: ``"graph"`` or ``"document"``.
    :param config: where Cassandra is (default: from the environment).
    :param keyspace_prefix: keyspaces are ``storage_name(prefix, user)``; ``"tg"`` shares the
        triple store's keyspace.
    :param shards: partitions per collection for indexes this object creates (1-64; an existing
        index keeps the count it was created with).
    """

    backend = "cassandra"

    def __init__(self, kind: str = "graph", config: CassandraConfig | None = None, keyspace_prefix: str = "tg",
                 shards: int = 1):
        self.kind = check_kind(kind)
        if type(shards) is not int or not 1 <= shards <= MAX_SHARDS:
            raise ValueError(f"shards must be an integer from 1 to {MAX_SHARDS}, got {shards!r}")
        self.shards = shards
        self.config = config or CassandraConfig()
        if not keyspace_prefix.isalnum() or not keyspace_prefix.islower():
            raise ValueError(f"keyspace_prefix must be lower-case letters/digits, got {keyspace_prefix!r}")
        self.keyspace_prefix = keyspace_prefix
        self._session = connect(self.config)
        self._keyspaces: dict[str, _Keyspace] = {}
        self._tables: dict[tuple[str, str, int], _Table] = {}
        self._info_cache: dict[tuple[str, str], tuple[float, tuple[str, int, int] | None]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Forget prepared statements and cached model records; the shared session stays open."""
        with self._lock:
            self._keyspaces.clear()
            self._tables.clear()
            self._info_cache.clear()

    # ------------------------------------------------------------------ plumbing

    def _ks(self, user: str) -> _Keyspace:
        name = storage_name(self.keyspace_prefix, user)
        with self._lock:
            ks = self._keyspaces.get(name)
        if ks is None:
            with cassandra_errors(f"vector index set-up for user {user!r}"):
                ensure_keyspace(self._session, name, self.config.replication_factor)
                self._session.execute(_INFO_TABLE.format(ks=name), timeout=DDL_TIMEOUT)
                ks = _Keyspace(self._session, name)
            with self._lock:
                self._keyspaces[name] = ks
        return ks

    def _table(self, ks: _Keyspace, dimension: int, create: bool) -> _Table:
        key = (ks.name, self.kind, dimension)
        with self._lock:
            table = self._tables.get(key)
        if table is None:
            name = f"{self.kind}_embeddings_{int(dimension)}"
            if create:
                self._session.execute(_DATA_TABLE.format(ks=ks.name, table=name, dim=int(dimension)),
                                      timeout=DDL_TIMEOUT)
                for ddl in _DATA_INDEXES:
                    self._session.execute(ddl.format(ks=ks.name, table=name), timeout=DDL_TIMEOUT)
            self._add_source_column(ks.name, name)
            table = _Table(self._session, ks.name, name)
            with self._lock:
                self._tables[key] = table
        return table

    def _add_source_column(self, ks: str, table: str) -> None:
        """Give a table made before vectors kept their source mark the ``source`` column (read first: DDL is slow)."""
        columns = self._session.execute("SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s "
                                        "AND table_name = %s", (ks, table))
        names = {row.column_name for row in columns}
        if names and "source" not in names:
            self._session.execute(_SOURCE_COLUMN.format(ks=ks, table=table), timeout=DDL_TIMEOUT)

    def _info(self, ks: _Keyspace, collection: str, fresh: bool) -> tuple[str, int, int] | None:
        """(model_id, dimension, shards) of the collection's index, or ``None``."""
        key = (ks.name, collection)
        now = time.monotonic()
        if not fresh:
            with self._lock:
                cached = self._info_cache.get(key)
            if cached is not None and cached[0] > now:
                return cached[1]
        row = self._session.execute(ks.get_info, (self.kind, collection)).one()
        info = (row.model_id, row.dimension, row.shards or 1) if row is not None else None
        with self._lock:
            self._info_cache[key] = (now + INFO_CACHE_SECONDS, info)
        return info

    def _forget_info(self, ks: _Keyspace, collection: str) -> None:
        with self._lock:
            self._info_cache.pop((ks.name, collection), None)

    def _run_all(self, statement: Any, params: list[tuple[Any, ...]], what: str) -> list[Any]:
        """Execute ``statement`` for every parameter tuple, retrying timed-out ones; results in order."""
        return self._run_statements([(statement, p) for p in params], what)

    def _write_rows(self, statement: Any, params: list[tuple[Any, ...]], what: str) -> None:
        """Write rows (``params[i][:2]`` is the partition key) as unlogged single-partition batches."""
        from cassandra.query import BatchStatement, BatchType

        by_partition: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for p in params:
            by_partition.setdefault(p[:2], []).append(p)
        batches = []
        for rows in by_partition.values():
            for i in range(0, len(rows), BATCH_ROWS):
                batch = BatchStatement(batch_type=BatchType.UNLOGGED)
                for p in rows[i:i + BATCH_ROWS]:
                    batch.add(statement, p)
                batches.append((batch, ()))
        self._run_statements(batches, what)

    def _run_statements(self, statements: list[tuple[Any, Any]], what: str) -> list[Any]:
        """Execute ``(statement, params)`` pairs, at most :data:`CONCURRENCY` at once, retrying failed ones."""
        from cassandra.concurrent import execute_concurrent

        results: list[Any] = [None] * len(statements)
        pending = list(range(len(statements)))
        error: Exception | None = None
        for attempt in range(WRITE_RETRIES + 1):
            if not pending:
                return results
            if attempt:
                time.sleep(0.2 * 2 ** attempt)
            outcomes = execute_concurrent(self._session, [statements[i] for i in pending], concurrency=CONCURRENCY,
                                          raise_on_first_error=False)
            failed = []
            for i, (ok, value) in zip(pending, outcomes, strict=True):
                if ok:
                    results[i] = value
                else:
                    failed.append(i)
                    error = value
            pending = failed
        if pending:
            with cassandra_errors(what):
                raise error  # type: ignore[misc]  # mapped to StoreUnavailable / StoreError
        return results

    # ------------------------------------------------------------------ writes

    def _upsert(self, user: str, collection: str, model_id: str, chosen: list[VectorItem],
                vectors: np.ndarray) -> int:
        dimension = int(vectors.shape[1])
        ks = self._ks(user)
        what = f"vector upsert for user {user!r}, collection {collection!r}"
        with cassandra_errors(what):
            info = self._info(ks, collection, fresh=True)
            if info is None:
                from cassandra import ConsistencyLevel

                create = ks.create_info.bind((self.kind, collection, model_id, dimension, self.shards))
                create.serial_consistency_level = ConsistencyLevel.LOCAL_SERIAL
                self._session.execute(create)
                info = self._info(ks, collection, fresh=True)  # ours, or a concurrent first writer's
                if info is None:
                    raise StoreUnavailable(f"{what}: the model record vanished concurrently; retry")
            require_model(self.kind, user, collection, info[0], info[1], model_id, dimension)
            table = self._table(ks, dimension, create=True)
        shards = info[2]
        self._write_rows(table.insert, [(collection, shard_of(item.id, shards), item.id, vector, item.label,
                                         item.document_id, item.source)
                                        for item, vector in zip(chosen, vectors.tolist(), strict=True)], what)
        return len(chosen)

    def _delete_rows(self, table: _Table, collection: str, shards: int, ids: list[str], what: str) -> int:
        self._write_rows(table.delete, [(collection, shard_of(i, shards), i) for i in ids], what)
        return len(ids)

    def _existing(self, ks: _Keyspace, collection: str, unique: list[str],
                  what: str) -> tuple[_Table | None, int, dict[str, bytes]]:
        """``(table, shards, {id: source mark} of the ids of ``unique`` (distinct, checked) that have a row)``;
        ``(None, 0, {})`` when nothing was written."""
        info = self._info(ks, collection, fresh=True)
        if info is None or not unique:
            return None, 0, {}
        table = self._table(ks, info[1], create=False)
        shards = info[2]
        by_shard: dict[int, list[str]] = {}
        for i in unique:
            by_shard.setdefault(shard_of(i, shards), []).append(i)
        pages = self._run_all(table.existing, [(collection, shard, ids[i:i + 100])
                                               for shard, ids in by_shard.items()
                                               for i in range(0, len(ids), 100)], what)
        return table, shards, {row.id: bytes(row.source or b"") for page in pages for row in page}

    def _stored_sources(self, user: str, collection: str, ids: list[str]) -> dict[str, bytes]:
        ks = self._ks(user)
        with cassandra_errors(f"vector look-up for user {user!r}, collection {collection!r}"):
            return self._existing(ks, collection, ids, f"vector look-up for user {user!r}")[2]

    def delete_ids(self, user: str, collection: str, ids: Sequence[str]) -> int:
        """Remove vectors by id.

        :returns: how many of ``ids`` existed.
        """
        check_names(user, collection)
        unique = unique_ids(ids)
        ks = self._ks(user)
        what = f"vector delete for user {user!r}, collection {collection!r}"
        with cassandra_errors(what):
            table, shards, found = self._existing(ks, collection, unique, what)
            if table is None:
                return 0
        return self._delete_rows(table, collection, shards, list(found), what)

    def delete_document(self, user: str, collection: str, document_id: str) -> int:
        """Remove every vector whose ``document_id`` is ``document_id``.

        :returns: how many were removed.
        """
        check_names(user, collection)
        check_item_id(document_id, "document id")
        ks = self._ks(user)
        what = f"vector delete of document {document_id[:120]!r} for user {user!r}"
        with cassandra_errors(what):
            info = self._info(ks, collection, fresh=True)
            if info is None:
                return 0
            table = self._table(ks, info[1], create=False)
            pages = self._run_all(table.by_document, [(collection, shard, document_id)
                                                      for shard in range(info[2])], what)
            found = [row.id for page in pages for row in page]
        return self._delete_rows(table, collection, info[2], found, what)

    def delete_collection(self, user: str, collection: str) -> int:
        """Remove the collection's vectors, then its model record (a new model may be used afterwards).

        :returns: how many vectors were removed.
        """
        check_names(user, collection)
        ks = self._ks(user)
        what = f"vector delete of collection {collection!r} for user {user!r}"
        with cassandra_errors(what):
            info = self._info(ks, collection, fresh=True)
            if info is None:
                return 0
            table = self._table(ks, info[1], create=False)
            removed = self._count(table, collection, info[2], what)
        self._run_all(table.delete_shard, [(collection, shard) for shard in range(info[2])], what)
        with cassandra_errors(what):
            self._session.execute(ks.delete_info, (self.kind, collection))
        self._forget_info(ks, collection)
        return removed

    # ------------------------------------------------------------------ reads

    def _search(self, user: str, collection: str, model_id: str, query: np.ndarray, limit: int) -> list[VectorHit]:
        ks = self._ks(user)
        with cassandra_errors(f"vector search for user {user!r}, collection {collection!r}"):
            info = self._info(ks, collection, fresh=False)
            if info is None:
                return []
            require_model(self.kind, user, collection, info[0], info[1], model_id, int(query.shape[0]))
            table = self._table(ks, info[1], create=False)
            q = query.tolist()
            fetch = max(limit, MIN_ANN_FETCH)
            if info[2] == 1:
                rows = list(self._session.execute(table.search, (q, collection, 0, q, fetch)))
            else:
                futures = [self._session.execute_async(table.search, (q, collection, shard, q, fetch))
                           for shard in range(info[2])]
                rows = [row for future in futures for row in future.result()]
        hits = [VectorHit(r.id, 2.0 * r.score - 1.0, r.label or "", r.document_id or "") for r in rows]
        hits.sort(key=lambda h: -h.score)
        return hits[:limit]

    def _count(self, table: _Table, collection: str, shards: int, what: str) -> int:
        pages = self._run_all(table.count, [(collection, shard) for shard in range(shards)], what)
        return sum(int(page.one()[0]) for page in pages)

    def index_info(self, user: str, collection: str) -> IndexInfo | None:
        """Model id, dimension and number of vectors of the collection's index, or ``None``."""
        check_names(user, collection)
        ks = self._ks(user)
        with cassandra_errors(f"vector index info for user {user!r}, collection {collection!r}"):
            info = self._info(ks, collection, fresh=True)
            if info is None:
                return None
            table = self._table(ks, info[1], create=False)
            count = self._count(table, collection, info[2], f"vector count for user {user!r}")
        return IndexInfo(info[0], info[1], count)
