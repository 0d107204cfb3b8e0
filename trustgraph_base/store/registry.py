"""The store backends, one registry per store kind: ``triples``, ``vectors`` and ``librarian``.

Each registry maps a backend name (``sqlite`` embedded, ``cassandra`` distributed) to the
import path of the class that implements the kind's protocol.  Classes are imported on first
use, the way rdflib plugins are, so the embedded deployment never imports the Cassandra
driver and this module imports nothing heavy: the services' ``--store``,
``--triples-store``, ``--vector-store`` and ``--librarian-store`` choices are read from here.

Adding a backend: write the class (it passes the kind's conformance suite in
``tests/integration/test_{triples_store,vector_index,librarian_store}.py``) and add one line to
the kind's table below (or call :meth:`BackendRegistry.register` from a plugin).  The openers
:func:`~trustgraph_base.store.triples.open_triples_store`,
:func:`~trustgraph_base.store.vectors.open_vector_index` and
:func:`~trustgraph_base.store.librarian.open_librarian_store` build from these registries.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import InvalidQuery

__all__ = ["BackendRegistry", "TRIPLE_STORES", "VECTOR_INDEXES", "LIBRARIAN_STORES", "REGISTRIES", "backend_names"]


class BackendRegistry:
    """Backends of one store kind by name; each target is ``"package.module:ClassName"``, imported when opened."""

    def __init__(self, kind: str, what: str, targets: dict[str, str]) -> None:
        self.kind = kind
        self.what = what
        self._targets: dict[str, str] = {}
        for name, target in targets.items():
            self.register(name, target)

    def register(self, name: str, target: str) -> None:
        """Make :meth:`open` build ``target`` for backend ``name``."""
        if ":" not in target:
            raise ValueError(f"backend target {target!r} must look like 'package.module:ClassName'")
        self._targets[name] = target

    def names(self) -> list[str]:
        """The registered backend names, sorted."""
        return sorted(self._targets)

    def open(self, backend: str, **options: Any) -> Any:
        """A new store of backend ``backend``, built with ``options``.

        :raises InvalidQuery: for an unknown backend name (a ``ValueError``).
        """
        target = self._targets.get(backend)
        if target is None:
            raise InvalidQuery(f"unknown {self.what} backend {backend!r}; known: {', '.join(self.names())}")
        module_name, _, class_name = target.partition(":")
        return getattr(importlib.import_module(module_name), class_name)(**options)


TRIPLE_STORES = BackendRegistry("triples", "triple-store", {
    "sqlite": "trustgraph_base.store.sqlite.triples:SqliteTriplesStore",
    "cassandra": "trustgraph_base.store.cassandra.triples:CassandraTriplesStore",
})
VECTOR_INDEXES = BackendRegistry("vectors", "vector-index", {
    "sqlite": "trustgraph_base.store.sqlite.vectors:SqliteVectorIndex",
    "cassandra": "trustgraph_base.store.cassandra.vectors:CassandraVectorIndex",
})
LIBRARIAN_STORES = BackendRegistry("librarian", "librarian", {
    "sqlite": "trustgraph_base.store.sqlite.librarian:SqliteLibrarianStore",
    "cassandra": "trustgraph_base.store.cassandra.librarian:CassandraLibrarianStore",
})

#: Store kind -> its registry.
REGISTRIES: dict[str, BackendRegistry] = {r.kind: r for r in (TRIPLE_STORES, VECTOR_INDEXES, LIBRARIAN_STORES)}


def backend_names() -> list[str]:
    """Every backend name some kind has (the choices of ``--store``, which sets all kinds at once)."""
    return sorted({name for r in REGISTRIES.values() for name in r.names()})
