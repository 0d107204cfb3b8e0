"""Command-line options and construction of the stores a service needs (SQLite or Cassandra)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from trustgraph_base.store.cassandra.connection import CassandraConfig


def add_store_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", choices=["sqlite", "cassandra"], default=os.environ.get("TG_STORE", "sqlite"),
                        help="storage backend (env TG_STORE; default sqlite)")
    parser.add_argument("--data-dir", default=os.environ.get("TG_HOME", ""),
                        help="SQLite data directory (env TG_HOME; default ~/.trustgraph)")
    parser.add_argument("--cassandra-host", default=os.environ.get("CASSANDRA_HOST", "127.0.0.1"),
                        help="Cassandra contact points, comma-separated (env CASSANDRA_HOST)")
    parser.add_argument("--cassandra-port", type=int, default=int(os.environ.get("CASSANDRA_PORT", "9042")))
    parser.add_argument("--cassandra-replication-factor", type=int,
                        default=int(os.environ.get("CASSANDRA_REPLICATION_FACTOR", "1")))
    parser.add_argument("--cassandra-consistency", default=os.environ.get("CASSANDRA_CONSISTENCY", "LOCAL_ONE"))


def store_params(args: argparse.Namespace) -> dict[str, Any]:
    """Constructor parameters (``store``, ``store_options``) from parsed options."""
    if args.store == "cassandra":
        config = CassandraConfig(hosts=tuple(h.strip() for h in args.cassandra_host.split(",") if h.strip()),
                                 port=args.cassandra_port, replication_factor=args.cassandra_replication_factor,
                                 consistency=args.cassandra_consistency)
        return {"store": "cassandra", "store_options": {"config": config}}
    options = {"home": Path(args.data_dir)} if args.data_dir else {}
    return {"store": "sqlite", "store_options": options}


def store_options_from(store: str, options: dict[str, Any] | None) -> dict[str, Any]:
    """Normalise options given in a group config (plain values) to store constructor options."""
    options = dict(options or {})
    if store == "cassandra" and "config" not in options:
        fields = {k: options.pop(k) for k in list(options) if k in CassandraConfig.__dataclass_fields__}
        if "hosts" in fields and isinstance(fields["hosts"], str):
            fields["hosts"] = tuple(h.strip() for h in fields["hosts"].split(","))
        options["config"] = CassandraConfig(**fields)
    if store == "sqlite" and "home" in options and options["home"] is not None:
        options["home"] = Path(options["home"])
    return options


class StoreBackedProcessor:
    """Mixin for processors that use stores: store options, opening (or being handed) stores,
    closing the ones they opened on stop.  Use as ``class X(StoreBackedProcessor, Processor)``.

    ``self.use_store(given, opener, **kw)`` returns ``given`` when a shared store object was passed
    in (the embedded stack shares one per kind), else opens one with ``opener(store, **options)``
    and remembers to close it.
    """

    def __init__(self, *, store: str = "sqlite", store_options: dict | None = None, **params):
        super().__init__(**params)
        self.store_backend = store
        self.store_options = store_options_from(store, store_options)
        self._owned_stores: list = []

    def use_store(self, given, opener, **kw):
        if given is not None:
            return given
        opened = opener(self.store_backend, **kw, **self.store_options)
        self._owned_stores.append(opened)
        return opened

    async def on_stop(self) -> None:
        for s in self._owned_stores:
            s.close()
        self._owned_stores.clear()

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        add_store_args(parser)

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        return store_params(args)
