"""The stores a service keeps: its command-line options, and opening them from the backend registries.

Which stores a service needs is declared in the service manifest (:mod:`trustgraph_flow.manifest`);
each store kind (``triples``, ``vectors``, ``librarian``) has a registry of backends by name
(:mod:`trustgraph_base.store.registry`).  ``--store`` (env ``TG_STORE``) picks the backend of
every kind at once; ``--triples-store``, ``--vector-store`` and ``--librarian-store`` pick one
kind's, defaulting to ``--store``.  A service offers the flags of the kinds it keeps.

On Pulsar a service that needs a store and was given no backend for it refuses to start
(:class:`~trustgraph_base.processor.launcher.ConfigurationError`, one line naming ``--store``
and ``TG_STORE``): each process falling back to a SQLite file of its own would split one
deployment's data between processes.  On the in-process bus the default is ``sqlite``.
"""

from __future__ import annotations

import argparse
import importlib
import os
from pathlib import Path
from typing import Any

from trustgraph_base.processor.launcher import ConfigurationError
from trustgraph_base.pubsub import Backend
from trustgraph_base.store.cassandra.connection import DEFAULT_CONSISTENCY, CassandraConfig, replication_from_env
from trustgraph_base.store.registry import REGISTRIES, backend_names

__all__ = ["STORE_FLAGS", "add_store_args", "store_params", "store_options_for", "open_store",
           "StoreBackedProcessor"]

#: Store kind -> the option that picks its backend.
STORE_FLAGS = {"triples": "--triples-store", "vectors": "--vector-store", "librarian": "--librarian-store"}

#: Store kind -> its opener (imported when a store of that kind is opened).
_OPENERS = {
    "triples": "trustgraph_base.store.triples:open_triples_store",
    "vectors": "trustgraph_base.store.vectors:open_vector_index",
    "librarian": "trustgraph_base.store.librarian:open_librarian_store",
}

#: The backend a store falls back to when none is chosen, on a bus that is not durable (in-process).
EMBEDDED_BACKEND = "sqlite"


def add_store_args(parser: argparse.ArgumentParser, kinds: tuple[str, ...] = tuple(STORE_FLAGS)) -> None:
    """``--store``, the per-kind flags of ``kinds``, and the SQLite and Cassandra options."""
    parser.add_argument("--store", choices=backend_names(), default=os.environ.get("TG_STORE") or None,
                        help="backend of every store this service keeps (env TG_STORE); required on Pulsar, "
                             f"{EMBEDDED_BACKEND} on the in-process bus")
    for kind in kinds:
        parser.add_argument(STORE_FLAGS[kind], dest=f"{kind}_backend", choices=REGISTRIES[kind].names(),
                            default=None, help=f"backend of the {kind} store (default: --store)")
    parser.add_argument("--data-dir", default=os.environ.get("TG_HOME", ""),
                        help="SQLite data directory (env TG_HOME; default ~/.trustgraph)")
    parser.add_argument("--cassandra-host", default=os.environ.get("CASSANDRA_HOST", "127.0.0.1"),
                        help="Cassandra contact points, comma-separated (env CASSANDRA_HOST)")
    parser.add_argument("--cassandra-port", type=int, default=int(os.environ.get("CASSANDRA_PORT", "9042")))
    parser.add_argument("--cassandra-replication-factor", type=int, default=replication_from_env(),
                        help="replicas per datacenter of new keyspaces (env CASSANDRA_REPLICATION_FACTOR; "
                             "default 3, or fewer where a datacenter has fewer nodes)")
    parser.add_argument("--cassandra-consistency",
                        default=os.environ.get("CASSANDRA_CONSISTENCY") or DEFAULT_CONSISTENCY,
                        help=f"consistency of reads and writes (env CASSANDRA_CONSISTENCY; "
                             f"default {DEFAULT_CONSISTENCY})")


def store_params(args: argparse.Namespace) -> dict[str, Any]:
    """Constructor parameters (``store``, ``store_backends``, ``store_options``) from parsed options."""
    backends = {kind: getattr(args, f"{kind}_backend") for kind in STORE_FLAGS
                if getattr(args, f"{kind}_backend", None)}
    options: dict[str, Any] = {}
    if args.data_dir:
        options["home"] = Path(args.data_dir)
    if "cassandra" in (args.store, *backends.values()):
        options["config"] = CassandraConfig(
            hosts=tuple(h.strip() for h in args.cassandra_host.split(",") if h.strip()), port=args.cassandra_port,
            replication_factor=args.cassandra_replication_factor, consistency=args.cassandra_consistency)
    return {"store": args.store, "store_backends": backends, "store_options": options}


def store_options_for(backend: str, options: dict[str, Any] | None) -> dict[str, Any]:
    """The constructor options of a ``backend`` store from options that may serve several backends.

    ``options`` are plain values (a group config's ``store_options``) or already built ones:
    Cassandra gets ``config`` (a :class:`CassandraConfig`, built from ``hosts``, ``port``... when
    not given), SQLite ``home``; any other key goes to both.
    """
    options = dict(options or {})
    fields = {k: options.pop(k) for k in list(options) if k in CassandraConfig.__dataclass_fields__}
    config = options.pop("config", None)
    home = options.pop("home", None)
    if backend == "cassandra":
        if config is None:
            if isinstance(fields.get("hosts"), str):
                fields["hosts"] = tuple(h.strip() for h in fields["hosts"].split(","))
            config = CassandraConfig(**fields)
        options["config"] = config
    elif backend == "sqlite" and home is not None:
        options["home"] = Path(home)
    return options


def open_store(store_kind: str, backend: str, options: dict[str, Any] | None = None, **kw: Any) -> Any:
    """A new store of ``store_kind`` (``triples``, ``vectors``, ``librarian``) on ``backend``.

    ``kw`` go to its opener.
    """
    module, _, name = _OPENERS[store_kind].partition(":")
    opener = getattr(importlib.import_module(module), name)
    return opener(backend, **kw, **store_options_for(backend, options))


class StoreBackedProcessor:
    """Mixin for processors that keep stores: store options, opening (or being handed) stores,
    closing the ones they opened on stop.  Use as ``class X(StoreBackedProcessor, Processor)``.

    ``self.use_store(given, store_kind, **kw)`` returns ``given`` when a shared store object was passed
    in (the embedded stack shares one per store), else opens a ``store_kind`` store on the backend
    chosen for that kind and remembers to close it.

    :param store: backend of every kind (``None``: none chosen; see the module docstring).
    :param store_backends: per-kind backends (``{"vectors": "sqlite"}``) that override ``store``.
    :param store_options: options of the backends (see :func:`store_options_for`).
    """

    # provided by the Processor this is mixed into
    backend: Backend
    id: str

    def __init__(self, *, store: str | None = None, store_backends: dict[str, str] | None = None,
                 store_options: dict[str, Any] | None = None, **params: Any):
        super().__init__(**params)
        self.store_backend = store
        self.store_backends = dict(store_backends or {})
        self.store_options = dict(store_options or {})
        self._owned_stores: list = []

    def backend_for(self, kind: str) -> str:
        """The backend of the ``kind`` store.

        :raises ConfigurationError: on a durable bus when none was chosen.
        """
        chosen = self.store_backends.get(kind) or self.store_backend
        if chosen:
            return chosen
        if self.backend.durable:
            raise ConfigurationError(
                f"{self.id}: no {kind} store given: pass --store (env TG_STORE) or {STORE_FLAGS[kind]}, e.g. "
                f"--store cassandra; a service on Pulsar never falls back to a SQLite file of its own")
        return EMBEDDED_BACKEND

    def use_store(self, given, store_kind: str, **kw):
        if given is not None:
            return given
        opened = open_store(store_kind, self.backend_for(store_kind), self.store_options, **kw)
        self._owned_stores.append(opened)
        return opened

    async def on_stop(self) -> None:
        for s in self._owned_stores:
            s.close()
        self._owned_stores.clear()

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        from ..manifest import PROCESSORS

        kinds = next((e.store_kinds for e in PROCESSORS.values() if e.cls.endswith(f":{cls.__name__}")
                      and e.cls.partition(":")[0] == cls.__module__), tuple(STORE_FLAGS))
        add_store_args(parser, kinds)

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        return store_params(args)
