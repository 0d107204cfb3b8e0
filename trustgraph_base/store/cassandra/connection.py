"""One shared cassandra-driver Cluster/Session per (hosts, port), keyspace creation with a configurable RF,
and the one mapping of driver errors to store errors.

Every Cassandra-backed store uses :func:`connect` so a process opens one connection pool,
:func:`ensure_keyspace` so the replication factor is honoured (TrustGraph's writers
ignore it), and :func:`cassandra_errors` around every request, so the three stores answer a
driver failure alike.

The same code serves one node and a cluster (docs/servers.md, "A three-node cluster"): the
driver gets every contact point and routes each request to a replica of its partition in the
local datacenter (token-aware over DC-aware round robin); requests run at ``LOCAL_QUORUM``
unless configured otherwise, and keyspaces are created with ``NetworkTopologyStrategy`` and, by
default, three replicas per datacenter (fewer where it has fewer nodes), so losing one node of
three loses neither reads nor writes (docs/guarantees.md, "Replicas and node loss").
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

__all__ = ["CassandraConfig", "DDL_TIMEOUT", "DEFAULT_CONSISTENCY", "batch_bytes", "cassandra_errors", "connect",
           "ensure_keyspace", "load_balancing_policy", "parse_size", "queueing_connection_class", "replication",
           "shutdown_all"]


#: Consistency of every read and write unless configured: a majority of the local datacenter's replicas.
DEFAULT_CONSISTENCY = "LOCAL_QUORUM"
#: Replicas per datacenter unless configured (fewer in a datacenter with fewer nodes).
DEFAULT_REPLICAS = 3


def replication_from_env() -> int | None:
    """``CASSANDRA_REPLICATION_FACTOR`` as a positive number, ``None`` when unset or empty (automatic)."""
    value = os.environ.get("CASSANDRA_REPLICATION_FACTOR", "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"CASSANDRA_REPLICATION_FACTOR={value!r} is not a positive number")
    return int(value)


@dataclass(frozen=True)
class CassandraConfig:
    """Where Cassandra is and how to write to it.

    :param hosts: contact points (env ``CASSANDRA_HOST``, comma-separated; default 127.0.0.1): give every
        node of a cluster, so the driver finds it whichever nodes are down.
    :param port: CQL port (env ``CASSANDRA_PORT``; default 9042).
    :param replication_factor: replicas per datacenter of the keyspaces this process creates (env
        ``CASSANDRA_REPLICATION_FACTOR``); ``None`` (the default): 3, or the datacenter's node count if smaller.
    :param consistency: ``LOCAL_QUORUM`` (default), ``ONE``, ``QUORUM``... (env ``CASSANDRA_CONSISTENCY``).
    :param local_dc: the datacenter whose nodes serve this process (env ``CASSANDRA_LOCAL_DC``); empty: the
        datacenter of the first contact point that answers.
    """

    hosts: tuple[str, ...] = field(default_factory=lambda: tuple(
        h.strip() for h in os.environ.get("CASSANDRA_HOST", "127.0.0.1").split(",") if h.strip()))
    port: int = field(default_factory=lambda: int(os.environ.get("CASSANDRA_PORT", "9042")))
    replication_factor: int | None = field(default_factory=lambda: replication_from_env())
    consistency: str = field(default_factory=lambda: os.environ.get("CASSANDRA_CONSISTENCY") or DEFAULT_CONSISTENCY)
    local_dc: str = field(default_factory=lambda: os.environ.get("CASSANDRA_LOCAL_DC", ""))
    username: str = field(default_factory=lambda: os.environ.get("CASSANDRA_USERNAME", ""))
    password: str = field(default_factory=lambda: os.environ.get("CASSANDRA_PASSWORD", ""))
    connect_timeout: float = 10.0
    request_timeout: float = 15.0


#: A ``cassandra.cluster.Session`` (the driver ships no type information).
Session = Any

_LOCK = threading.Lock()
_SESSIONS: dict[tuple[tuple[str, ...], int, str, str, str], Session] = {}
_KEYSPACES: set[tuple[int, str]] = set()


def connect(config: CassandraConfig | None = None) -> Session:
    """Return a shared ``cassandra.cluster.Session`` for ``config`` (connecting on first use).

    Raises :class:`StoreUnavailable` with the contact points when Cassandra cannot be reached.
    """
    config = config or CassandraConfig()
    key = (config.hosts, config.port, config.consistency, config.username, config.local_dc)
    with _LOCK:
        session = _SESSIONS.get(key)
        if session is not None and not session.is_shutdown:
            return session
        from cassandra import ConsistencyLevel
        from cassandra.auth import PlainTextAuthProvider
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable

        try:
            level = ConsistencyLevel.name_to_value[config.consistency.upper()]
        except KeyError:
            raise ValueError(f"unknown Cassandra consistency level {config.consistency!r}") from None
        profile = ExecutionProfile(load_balancing_policy=load_balancing_policy(config.local_dc),
                                   request_timeout=config.request_timeout, consistency_level=level,
                                   row_factory=named_rows)
        auth = PlainTextAuthProvider(config.username, config.password) if config.username else None
        cluster = Cluster(list(config.hosts), port=config.port, connect_timeout=config.connect_timeout,
                          execution_profiles={EXEC_PROFILE_DEFAULT: profile}, auth_provider=auth,
                          # a schema change waits until every live node has it: slower on a busy cluster
                          max_schema_agreement_wait=SCHEMA_AGREEMENT_SECONDS,
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


#: Seconds the driver waits after a schema change until every live node reports the same schema.
SCHEMA_AGREEMENT_SECONDS = 60


def load_balancing_policy(local_dc: str = "") -> Any:
    """Each request to a replica of its partition (token-aware), among the nodes of the local datacenter.

    Token awareness saves the coordinator a hop to a replica; the DC-aware child keeps requests
    out of remote datacenters and, once the replicas are tried, spreads requests round robin.
    ``local_dc`` empty: the datacenter of the first contact point that answers.
    """
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

    return TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=local_dc or None))


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


def replication(session: Session, replication_factor: int | None) -> dict[str, int]:
    """Replicas per datacenter for a new keyspace: ``replication_factor`` in each datacenter the driver
    knows of, or (``None``) :data:`DEFAULT_REPLICAS`, capped at each datacenter's node count.

    Nodes that are down still count: a keyspace created while one of three nodes is down still
    gets three replicas.
    """
    nodes: dict[str, int] = {}
    for host in session.cluster.metadata.all_hosts():
        nodes[host.datacenter or "datacenter1"] = nodes.get(host.datacenter or "datacenter1", 0) + 1
    if replication_factor is not None and int(replication_factor) < 1:
        raise ValueError(f"replication factor {replication_factor!r} is not a positive number")
    return {dc: int(replication_factor) if replication_factor is not None else min(DEFAULT_REPLICAS, n)
            for dc, n in sorted(nodes.items())}


def ensure_keyspace(session: Session, keyspace: str, replication_factor: int | None,
                    timeout: float = DDL_TIMEOUT) -> None:
    """Create ``keyspace`` (an already-validated storage name) once per process, with
    ``NetworkTopologyStrategy`` and :func:`replication` replicas per datacenter; an existing keyspace is left as it is.
    """
    key = (id(session), keyspace)
    if key in _KEYSPACES:
        return
    if not keyspace.replace("_", "").isalnum() or not keyspace.islower():
        raise ValueError(f"unsafe keyspace name {keyspace!r}")
    # datacenter names come from the cluster itself; quoted as CQL string literals all the same
    datacenters = ", ".join(f"'{dc.replace(chr(39), chr(39) * 2)}': {n}"
                            for dc, n in replication(session, replication_factor).items())
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = "
        f"{{'class': 'NetworkTopologyStrategy', {datacenters}}}", timeout=timeout)
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
