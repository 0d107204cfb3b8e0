"""Switching a SQLite file to WAL mode when other connections may be opening it at the same moment.

``PRAGMA journal_mode=WAL`` needs a lock no other connection holds and, unlike ordinary
statements, can fail with "database is locked" without waiting for ``busy_timeout`` (seen when
four threads opened a new file at once).  WAL mode is stored in the file, so a retry that
finds it already set is a no-op.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

__all__ = ["enable_wal", "open_database"]


def enable_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put ``conn``'s database in WAL mode, retrying for up to ``timeout`` seconds while it is locked."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def open_database(path: Path, schema: str, timeout: float = 30.0) -> sqlite3.Connection:
    """A connection to the file at ``path`` (shared by threads), in WAL mode, with ``schema`` applied.

    A file that cannot be set up (full disk, read-only) leaves no connection behind.
    """
    conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        enable_wal(conn, timeout)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(schema)
    except BaseException:
        conn.close()
        raise
    return conn
