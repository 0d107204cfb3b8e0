"""The whole stored contents of one user, table by table, on either stack, for before/after comparisons.

SQLite: every table of the user's three files (triples, librarian, vectors).  Cassandra: every
table of the user's keyspace.  Rows are compared as multisets.  Left out is only what records
*when* or *how* data was written, not what is stored: the triple store's write-buffer
bookkeeping (``meta.recent_rows``, ``meta.terms_epoch``; a buffer table is merged with its main
table, as a merge moves rows between them), a vector row's integer key (an upsert gives it a new
one) and an index's write stamp (``generation``, ``version``).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

#: SQLite columns that record how rows were written, per table.
_SQLITE_SKIPPED = {"vectors": {"key"}, "vector_index": {"generation", "version"}}
_SQLITE_BOOKKEEPING = {("meta", "recent_rows"), ("meta", "terms_epoch")}


def _hashable(value):
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(_hashable(v) for v in value))
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def sqlite_snapshot(home: Path, user: str) -> dict[str, Counter]:
    """``"<kind>.<table>" → Counter of rows`` of the user's SQLite files under ``home``."""
    from trustgraph_base.store.names import user_file

    out: dict[str, Counter] = {}
    for kind in ("triples", "librarian", "vectors"):
        path = user_file(kind, user, home=home)
        if not path.exists():
            continue
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
            for table in tables:
                columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
                kept = [c for c in columns if c not in _SQLITE_SKIPPED.get(table, set())]
                rows = [tuple(_hashable(v) for v in row)
                        for row in conn.execute(f"SELECT {', '.join(kept)} FROM {table}")]
                if table == "meta":
                    rows = [r for r in rows if (table, r[0]) not in _SQLITE_BOOKKEEPING]
                out.setdefault(f"{kind}.{table.removesuffix('_recent')}", Counter()).update(rows)
        finally:
            conn.close()
    return out


def cassandra_snapshot(session, user: str) -> dict[str, Counter]:
    """``"<keyspace>.<table>" → Counter of rows`` of the user's keyspaces."""
    from trustgraph_base.store.names import storage_name

    out: dict[str, Counter] = {}
    for prefix in ("tg", "tgv"):
        ks = storage_name(prefix, user)
        tables = [r.table_name for r in session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (ks,))]
        for table in tables:
            rows = session.execute(f"SELECT * FROM {ks}.{table}", timeout=120)
            out[f"{prefix}.{table}"] = Counter(tuple(_hashable(v) for v in row) for row in rows)
    return out


def snapshot(deployment) -> dict[str, Counter]:
    """The user's whole stored contents on the deployment's stack (``tests/service/conftest.py``)."""
    if deployment.kind == "embedded":
        return sqlite_snapshot(deployment.home, deployment.user)
    from trustgraph_base.store.cassandra.connection import CassandraConfig, connect

    session = connect(CassandraConfig(hosts=(deployment.cassandra.host,), port=int(deployment.cassandra.port)))
    return cassandra_snapshot(session, deployment.user)


def difference(before: dict[str, Counter], after: dict[str, Counter]) -> dict[str, tuple[list, list]]:
    """Per table, the rows only before and the rows only after (tables that agree are left out)."""
    out = {}
    for table in sorted(set(before) | set(after)):
        b, a = before.get(table, Counter()), after.get(table, Counter())
        if a != b:
            out[table] = (sorted(map(repr, (b - a).elements()))[:20], sorted(map(repr, (a - b).elements()))[:20])
    return out
