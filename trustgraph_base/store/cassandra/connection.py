"""One shared cassandra-driver Cluster/Session per (hosts, port), keyspace creation with a configurable RF,
and the one mapping of driver errors to store errors.

Every Cassandra-backed store uses :func:`connect` so a process opens one connection pool,
:func:`ensure_keyspace` so the replication factor is honoured (TrustGraph's writers
ignore it), and :func:`cassandra_errors` around every request, so the three stores answer a
driver failure alike.
"""

from __future__ import annotations

import os
import socket
import threading
from collections import namedtuple
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..errors import StoreError, StoreUnavailable

__all__ = ["CassandraConfig", "DDL_TIMEOUT", "batch_bytes", "cassandra_errors", "connect", "ensure_keyspace",
           "parse_size", "queueing_connection_class", "shutdown_all"]


@dataclass(frozen=True)
class CassandraConfig:
    """Where Cassandra is and how to write to it.

    :param hosts: contact points (env ``CASSANDRA_HOST``, comma-separated; default 127.0.0.1).
    :param port: CQL port (env ``CASSANDRA_PORT``; default 9042).
    :param replication_factor: for keyspaces this process creates (env ``CASSANDRA_REPLICATION_FACTOR``).
    :param consistency: ``ONE``, ``LOCAL_QUORUM``, ``QUORUM``... (env ``CASSANDRA_CONSISTENCY``).
    """

    hosts: tuple[str, ...] = field(default_factory=lambda: tuple(
        h.strip() for h in os.environ.get("CASSANDRA_HOST", "127.0.0.1").split(",") if h.strip()))
    port: int = field(default_factory=lambda: int(os.environ.get("CASSANDRA_PORT", "9042")))
    replication_factor: int = field(default_factory=lambda: int(os.environ.get("CASSANDRA_REPLICATION_FACTOR", "1")))
    consistency: str = field(default_factory=lambda: os.environ.get("CASSANDRA_CONSISTENCY", "LOCAL_ONE"))
    username: str = field(default_factory=lambda: os.environ.get("CASSANDRA_USERNAME", ""))
    password: str = field(default_factory=lambda: os.environ.get("CASSANDRA_PASSWORD", ""))
    connect_timeout: float = 10.0
    request_timeout: float = 15.0


#: A ``cassandra.cluster.Session`` (the driver ships no type information).
Session = Any

_LOCK = threading.Lock()
_SESSIONS: dict[tuple[tuple[str, ...], int, str, str], Session] = {}
_KEYSPACES: set[tuple[int, str]] = set()


def connect(config: CassandraConfig | None = None) -> Session:
    """Return a shared ``cassandra.cluster.Session`` for ``config`` (connecting on first use).

    Raises :class:`StoreUnavailable` with the contact points when Cassandra cannot be reached.
    """
    config = config or CassandraConfig()
    key = (config.hosts, config.port, config.consistency, config.username)
    with _LOCK:
        session = _SESSIONS.get(key)
        if session is not None and not session.is_shutdown:
            return session
        from cassandra import ConsistencyLevel
        from cassandra.auth import PlainTextAuthProvider
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
        from cassandra.policies import RoundRobinPolicy

        try:
            level = ConsistencyLevel.name_to_value[config.consistency.upper()]
        except KeyError:
            raise ValueError(f"unknown Cassandra consistency level {config.consistency!r}") from None
        profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy(), request_timeout=config.request_timeout,
                                   consistency_level=level, row_factory=named_rows)
        auth = PlainTextAuthProvider(config.username, config.password) if config.username else None
        cluster = Cluster(list(config.hosts), port=config.port, connect_timeout=config.connect_timeout,
                          execution_profiles={EXEC_PROFILE_DEFAULT: profile}, auth_provider=auth,
                          protocol_version=5, connection_class=queueing_connection_class(),
                          # Without TCP_NODELAY a small request written in two segments waits for
                          # the server's delayed ACK (Nagle; figures in bench/README.md).
                          sockopts=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        try:
            session = cluster.connect()
        except (NoHostAvailable, OSError) as e:
            cluster.shutdown()
            raise StoreUnavailable(f"cannot reach Cassandra at {','.join(config.hosts)}:{config.port}: {e}") from e
        _SESSIONS[key] = session
        return session


#: Driver exceptions (by class name, anywhere in the exception's class hierarchy) that mean "Cassandra is not
#: there, or too slow, right now": the same request may succeed later.
UNAVAILABLE_ERRORS = frozenset({
    "NoHostAvailable", "OperationTimedOut", "Unavailable", "Timeout", "ReadTimeout", "WriteTimeout",
    "CoordinationFailure", "ReadFailure", "WriteFailure", "ConnectionException", "ConnectionShutdown",
    "ConnectionBusy", "OverloadedErrorMessage", "IsBootstrappingErrorMessage", "OSError",
})


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says Cassandra is unreachable, overloaded or timed out (retrying may succeed).

    Classes are matched by name, so this module never imports the driver to classify an error.
    """
    return any(cls.__name__ in UNAVAILABLE_ERRORS for cls in type(exc).__mro__)


@contextmanager
def cassandra_errors(what: str) -> Iterator[None]:
    """Map driver failures inside the block to store errors; a :class:`StoreError` raised inside passes as is.

    Unreachable, overloaded or timed out (:func:`is_unavailable`) becomes :class:`StoreUnavailable`
    (the service nacks and redelivery retries); anything else (a rejected request, a failed
    function) becomes :class:`StoreError` (an error reply).  None is swallowed.

    :param what: the operation, for the message (``"insert"``, ``"librarian read of 'doc:1'"``).
    """
    try:
        yield
    except StoreError:
        raise
    except Exception as e:
        if is_unavailable(e):
            raise StoreUnavailable(f"Cassandra unavailable during {what}: {e}") from e
        raise StoreError(f"Cassandra error during {what}: {type(e).__name__}: {e}") from e


@lru_cache(maxsize=1)
def queueing_connection_class() -> type | None:
    """The libev connection class, made to queue a request while its socket's send buffer is full.

    The stock libev connection marks itself "not writable" whenever a send would block, and
    meanwhile refuses every new request with ``ConnectionBusy``.  The driver then gives up on
    the request (``NoHostAvailable`` at once on a one-node cluster) and leaks the stream id it
    had reserved: measured, 416 of 840 writes refused and 416 ids leaked after four threads
    wrote 21 parts of 256 KiB each ten times; once the 32,768 ids of a connection are gone,
    every request fails.  The asyncore and asyncio connections never refuse: they queue the
    request until the socket drains.  This class does the same with libev, by keeping the
    flag true; the flag is read nowhere else.  Every store bounds its requests in flight, so
    the queue stays bounded.  ``None`` where libev is not available (the driver then uses
    asyncore, which queues anyway).
    """
    try:
        from cassandra.io.libevreactor import LibevConnection
    except ImportError:
        return None

    class QueueingLibevConnection(LibevConnection):  # type: ignore[misc]  # the driver's classes are untyped
        @property
        def _socket_writable(self) -> bool:
            return True

        @_socket_writable.setter
        def _socket_writable(self, value: bool) -> None:
            """Ignored: a full send buffer delays a request, it does not refuse it."""

    return QueueingLibevConnection


@lru_cache(maxsize=512)
def _row_class(colnames: tuple[str, ...]) -> type:
    from cassandra.query import _clean_column_name

    return namedtuple("Row", [_clean_column_name(c) for c in colnames], rename=True)


def named_rows(colnames: Iterable[str], rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """The driver's default row factory (rows as named tuples), with one class per column list.

    The default builds a new ``namedtuple`` class for every result set; a GraphRAG query reads
    hundreds of them, and that class creation was the largest Python cost of a look-up.
    """
    row = _row_class(tuple(colnames))
    return [row(*r) for r in rows]


def lwt_applied(result: Any) -> bool:
    """Whether a lightweight transaction was applied.

    ``ResultSet.was_applied`` only accepts the driver's own row factories, so the first column
    (``[applied]``) is read here.
    """
    row = result.one()
    if row is None:
        raise RuntimeError("a lightweight transaction returned no row")
    return bool(row[0])


#: Seconds a schema change may take: DDL waits for schema agreement and is slow on a busy node.
DDL_TIMEOUT = 120.0


def ensure_keyspace(session: Session, keyspace: str, replication_factor: int, timeout: float = DDL_TIMEOUT) -> None:
    """Create ``keyspace`` (an already-validated storage name) once per process."""
    key = (id(session), keyspace)
    if key in _KEYSPACES:
        return
    if not keyspace.replace("_", "").isalnum() or not keyspace.islower():
        raise ValueError(f"unsafe keyspace name {keyspace!r}")
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = "
        f"{{'class': 'SimpleStrategy', 'replication_factor': {int(replication_factor)}}}", timeout=timeout)
    _KEYSPACES.add(key)


#: Cassandra's defaults: a warning in the server log for every batch above 5 KiB; refused above 50 KiB.
DEFAULT_BATCH_WARN = 5 * 1024
DEFAULT_BATCH_FAIL = 50 * 1024
_UNITS = {"": 1024, "B": 1, "KIB": 1024, "MIB": 1024 * 1024}  # a bare number is a *_in_kb value


def parse_size(value: str) -> int | None:
    """Bytes of a Cassandra size setting (``5KiB``, ``1MiB``, ``512B``; a bare number counts KiB).

    ``None`` if unreadable.
    """
    text = str(value).strip().upper()
    number = text.rstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    unit = text[len(number):]
    if not number.isdigit() or unit not in _UNITS:
        return None
    return int(number) * _UNITS[unit]


def batch_bytes(session: Session) -> int:
    """The byte budget of one unlogged batch this client sends: 80 % of the server's
    ``batch_size_warn_threshold`` and at most half its ``batch_size_fail_threshold``.

    Each batch is one request, and per-request work is what limits a Python writer: with
    Cassandra's default thresholds (5 KiB warn) batches stay at 4 KiB and nothing is logged; a
    server configured for bulk loading (as ``scripts/servers.sh`` configures its node: 40 KiB
    warn, 100 KiB fail) gets batches of 32 KiB, which insert faster at less client CPU
    (``bench/README.md``).  The thresholds are read from ``system_views.settings``
    (Cassandra 4.0+); where that cannot be read, the defaults apply.  Half the fail threshold
    leaves room for the server's own size accounting, which counts more than the values.
    """
    warn, fail = DEFAULT_BATCH_WARN, DEFAULT_BATCH_FAIL
    try:
        rows = session.execute("SELECT name, value FROM system_views.settings WHERE name IN "
                               "('batch_size_warn_threshold', 'batch_size_fail_threshold')")
        found = {r[0]: parse_size(r[1]) for r in rows}
    except Exception:  # noqa: BLE001 - an older server or no permission: Cassandra's defaults
        found = {}
    warn = found.get("batch_size_warn_threshold") or warn
    fail = found.get("batch_size_fail_threshold") or fail
    return max(1024, min(warn * 4 // 5, fail // 2))


def shutdown_all() -> None:
    """Close every shared session (tests and process exit)."""
    with _LOCK:
        for session in _SESSIONS.values():
            try:
                session.cluster.shutdown()
            except Exception:  # noqa: BLE001 - best effort at shutdown
                pass
        _SESSIONS.clear()
        _KEYSPACES.clear()
