"""Vector indexes: entity vectors (``graph``) and chunk vectors (``document``), per user and collection.

One protocol, two backends: ``sqlite`` (vectors in SQLite, searched with an in-memory HNSW
graph from ``usearch``, exact cosine re-scoring) and ``cassandra`` (``vector<float, n>``
columns with a Storage-Attached Index, ``ORDER BY vector ANN OF``).

Every (user, collection, kind) index records the embedding model id and the dimension of
its first write.  Writing or searching it later with another model id or dimension raises
:class:`ModelMismatch`, so vectors of different models are never mixed or compared;
``delete_collection`` forgets the model, after which another one may be used.

Scores are cosine similarities in ``[-1, 1]``, best first, on both backends.

### Usage example

>>> index = open_vector_index("sqlite", kind="graph", home=tmp_path)          # doctest: +SKIP
>>> index.upsert("alice", "default", "all-MiniLM-L6-v2",
...              [VectorItem("http://ex.org/cat", [0.1] * 384, label="cat")])   # doctest: +SKIP
>>> index.search("alice", "default", "all-MiniLM-L6-v2", [0.1] * 384, limit=5)  # doctest: +SKIP
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import InvalidQuery, NotFound, StoreError, StoreUnavailable
from .names import check_names
from .registry import VECTOR_INDEXES

__all__ = [
    "VectorIndex", "VectorItem", "VectorHit", "IndexInfo", "ModelMismatch", "open_vector_index",
    "KINDS", "MAX_DIMENSION", "MAX_SEARCH_LIMIT", "MAX_MODEL_ID_LENGTH",
    "MAX_SOURCE_LENGTH", "check_kind", "check_model_id", "check_item_id", "check_limit", "normalise",
    "prepare_items", "require_model", "unique_ids",
    "InvalidQuery", "NotFound", "StoreError", "StoreUnavailable",
]

#: ``graph``: entity vectors (key = entity IRI); ``document``: chunk vectors (key = chunk URI).
KINDS = ("graph", "document")
#: Largest vector dimension accepted (Cassandra's SAI handles up to 8192 float dimensions).
MAX_DIMENSION = 8192
#: Largest ``limit`` of one search.
MAX_SEARCH_LIMIT = 10_000
#: Longest model id (characters).
MAX_MODEL_ID_LENGTH = 256
#: Longest item or document id (characters); ids are often IRIs.
MAX_ID_LENGTH = 1024
#: Longest label kept with a vector (characters).
MAX_LABEL_LENGTH = 64 * 1024
#: Longest source mark kept with a vector (bytes).
MAX_SOURCE_LENGTH = 64

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


class ModelMismatch(InvalidQuery):
    """The index was built with another embedding model id or dimension than this request uses."""


@dataclass(frozen=True, slots=True)
class VectorItem:
    """One vector to store: ``id`` is the entity IRI (graph) or chunk URI (document).

    ``source`` is what the vector was made from, as its writer marks it (a few bytes, stored with the
    vector; empty: not known), so a writer in another process can tell whether it would store the same.
    """

    id: str
    vector: Sequence[float]
    label: str = ""
    document_id: str = ""
    source: bytes = b""


@dataclass(frozen=True, slots=True)
class VectorHit:
    """One search result; ``score`` is the cosine similarity to the query."""

    id: str
    score: float
    label: str = ""
    document_id: str = ""


@dataclass(frozen=True, slots=True)
class IndexInfo:
    """What one (user, collection, kind) index holds."""

    model_id: str
    dimension: int
    count: int


@runtime_checkable
class VectorIndex(Protocol):
    """Per-user, per-collection vector index of one kind; see the module docstring."""

    backend: str
    kind: str

    def upsert(self, user: str, collection: str, model_id: str, items: Sequence[VectorItem]) -> int:
        """Insert or replace vectors by id; returns how many items were written."""
        ...

    def search(self, user: str, collection: str, model_id: str, vector: Sequence[float],
               limit: int = 10) -> list[VectorHit]:
        """Nearest vectors by cosine similarity, best first."""
        ...

    def existing_ids(self, user: str, collection: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` have a vector (a loader confirms from it that a document's vectors are stored)."""
        ...

    def stored_sources(self, user: str, collection: str, ids: Sequence[str]) -> dict[str, bytes]:
        """The source mark stored with each of ``ids`` that has a vector (``b""`` where none was given)."""
        ...

    def delete_ids(self, user: str, collection: str, ids: Sequence[str]) -> int:
        """Remove vectors by id; returns how many existed."""
        ...

    def delete_document(self, user: str, collection: str, document_id: str) -> int:
        """Remove every vector of one source document; returns how many."""
        ...

    def delete_collection(self, user: str, collection: str) -> int:
        """Remove the whole index of a collection (and its model record); returns how many vectors."""
        ...

    def index_info(self, user: str, collection: str) -> IndexInfo | None:
        """Model id, dimension and vector count, or ``None`` when nothing was written."""
        ...

    def close(self) -> None:
        """Release connections, files and memory."""
        ...


def open_vector_index(backend: str = "sqlite", kind: str = "graph", **options: Any) -> VectorIndex:
    """Open a vector index by backend name (:data:`~trustgraph_base.store.registry.VECTOR_INDEXES`).

    :param backend: ``"sqlite"`` (options: ``home``) or ``"cassandra"`` (options: ``config``,
        ``keyspace_prefix``).
    :param kind: ``"graph"`` (entity vectors) or ``"document"`` (chunk vectors).
    :raises InvalidQuery: for an unknown backend or kind.
    """
    check_kind(kind)
    index: VectorIndex = VECTOR_INDEXES.open(backend, kind=kind, **options)
    return index


# ------------------------------------------------------------------ validation shared by backends

def check_kind(kind: str) -> str:
    """Return ``kind`` if it is ``graph`` or ``document``."""
    if kind not in KINDS:
        raise InvalidQuery(f"unknown vector index kind {str(kind)[:40]!r}: use 'graph' or 'document'")
    return kind


def _check_text(value: str, what: str, max_length: int, allow_empty: bool = False) -> str:
    if type(value) is not str or (not value and not allow_empty):
        raise InvalidQuery(f"{what} is empty or not a string")
    if len(value) > max_length:
        raise InvalidQuery(f"{what} is longer than {max_length} characters")
    bad = _CONTROL.search(value)
    if bad:
        raise InvalidQuery(f"{what} {value[:80]!r} contains a control character (U+{ord(bad.group()):04X})")
    return value


def check_model_id(model_id: str) -> str:
    """Return ``model_id`` if it is a non-empty string of at most 256 characters without control characters."""
    return _check_text(model_id, "embedding model id", MAX_MODEL_ID_LENGTH)


def check_item_id(item_id: str, what: str = "vector id") -> str:
    """Return ``item_id`` if it is a non-empty string of at most 1024 characters without control characters."""
    return _check_text(item_id, what, MAX_ID_LENGTH)


def unique_ids(ids: Sequence[str]) -> list[str]:
    """The distinct ids of ``ids``, each checked with :func:`check_item_id`, in order (one string is one id)."""
    if isinstance(ids, (str, bytes)):
        ids = [ids]
    return list(dict.fromkeys(check_item_id(i) for i in ids))


def check_limit(limit: int) -> int:
    """Return ``limit`` if it is an int from 1 to :data:`MAX_SEARCH_LIMIT`."""
    if type(limit) is not int or not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise InvalidQuery(f"limit must be an integer from 1 to {MAX_SEARCH_LIMIT}, got {limit!r}")
    return limit


def normalise(vector: Sequence[float], what: str = "vector") -> np.ndarray:
    """The unit-length float32 copy of ``vector``.

    :raises InvalidQuery: not a flat sequence of finite numbers, more than :data:`MAX_DIMENSION`
        values, or all zeros (cosine is undefined for it).
    """
    if isinstance(vector, (str, bytes)):
        raise InvalidQuery(f"{what} must be a sequence of numbers, not {type(vector).__name__}")
    try:
        array = np.asarray(vector, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidQuery(f"{what} must be a flat sequence of numbers") from None
    if array.ndim != 1 or not 1 <= array.shape[0] <= MAX_DIMENSION:
        raise InvalidQuery(f"{what} must be a flat sequence of 1 to {MAX_DIMENSION} numbers, "
                           f"got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise InvalidQuery(f"{what} contains NaN or infinite values")
    norm = math.sqrt(float(array @ array))
    if norm == 0.0:
        raise InvalidQuery(f"{what} is all zeros: cosine similarity is undefined for it")
    return (array / norm).astype(np.float32)


def prepare_items(items: Sequence[VectorItem]) -> tuple[list[VectorItem], np.ndarray]:
    """Validate an upsert batch; returns the items (last one wins for a repeated id) and their unit vectors.

    :raises InvalidQuery: a bad id, label, document id or vector, or vectors of different dimensions.
    """
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise InvalidQuery("items must be a sequence of VectorItem")
    latest: dict[str, int] = {}
    for i, item in enumerate(items):
        if not isinstance(item, VectorItem):
            raise InvalidQuery(f"items[{i}] is a {type(item).__name__}, not a VectorItem")
        check_item_id(item.id, f"items[{i}].id")
        _check_text(item.label, f"items[{i}].label", MAX_LABEL_LENGTH, allow_empty=True)
        _check_text(item.document_id, f"items[{i}].document_id", MAX_ID_LENGTH, allow_empty=True)
        if type(item.source) is not bytes or len(item.source) > MAX_SOURCE_LENGTH:
            raise InvalidQuery(f"items[{i}].source must be bytes, at most {MAX_SOURCE_LENGTH} of them")
        latest[item.id] = i
    chosen = [items[i] for i in sorted(latest.values())]
    if not chosen:
        return [], np.zeros((0, 0), dtype=np.float32)
    vectors = [normalise(item.vector, f"vector of {item.id[:80]!r}") for item in chosen]
    dims = {v.shape[0] for v in vectors}
    if len(dims) != 1:
        raise InvalidQuery(f"vectors of one upsert must share one dimension, got {sorted(dims)}")
    return chosen, np.stack(vectors)


def require_model(kind: str, user: str, collection: str, stored_model: str, stored_dimension: int,
                  model_id: str, dimension: int) -> None:
    """Raise :class:`ModelMismatch` unless (``model_id``, ``dimension``) is what the index was built with."""
    if stored_model != model_id or stored_dimension != dimension:
        raise ModelMismatch(
            f"the {kind} vector index of user {user!r}, collection {collection!r} was built with model "
            f"{stored_model!r} ({stored_dimension} dimensions); this request uses {model_id!r} ({dimension} "
            f"dimensions). Vectors of different models cannot be mixed: use the same model, or delete the "
            f"collection's vectors to rebuild it with the new one.")


class VectorIndexBase:
    """The writes and searches of :class:`VectorIndex`: names, model id, vectors and limit checked (and the
    vectors normalised) first, then the backend's :meth:`_upsert` or :meth:`_search`."""

    def upsert(self, user: str, collection: str, model_id: str, items: Sequence[VectorItem]) -> int:
        """Insert or replace vectors by id, recording the model on the first write.

        :param user: owner.
        :param collection: collection of the index.
        :param model_id: embedding model the vectors come from.
        :param items: vectors to write (a repeated id: the last one wins).
        :returns: the number of distinct ids written.
        :raises ModelMismatch: the index was built with another model id or dimension.
        """
        check_names(user, collection)
        check_model_id(model_id)
        chosen, vectors = prepare_items(items)
        if not chosen:
            return 0
        return self._upsert(user, collection, model_id, chosen, vectors)

    def _upsert(self, user: str, collection: str, model_id: str, chosen: list[VectorItem],
                vectors: np.ndarray) -> int:
        """Write the checked ``chosen`` items with their normalised ``vectors`` (one row each, in order)."""
        raise NotImplementedError

    def existing_ids(self, user: str, collection: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` have a vector."""
        return set(self.stored_sources(user, collection, ids))

    def stored_sources(self, user: str, collection: str, ids: Sequence[str]) -> dict[str, bytes]:
        """The source mark stored with each of ``ids`` that has a vector (``b""`` where none was given).

        :param ids: ids to look up (a single string counts as one id).
        """
        check_names(user, collection)
        unique = unique_ids(ids)
        return self._stored_sources(user, collection, unique) if unique else {}

    def _stored_sources(self, user: str, collection: str, ids: list[str]) -> dict[str, bytes]:
        """:meth:`stored_sources` of the checked, distinct, non-empty ``ids``."""
        raise NotImplementedError

    def search(self, user: str, collection: str, model_id: str, vector: Sequence[float],
               limit: int = 10) -> list[VectorHit]:
        """The ``limit`` nearest vectors by cosine similarity, best first (``[]`` when nothing was written).

        :raises ModelMismatch: the index was built with another model id or dimension.
        """
        check_names(user, collection)
        check_model_id(model_id)
        check_limit(limit)
        query = normalise(vector, "query vector")
        return self._search(user, collection, model_id, query, limit)

    def _search(self, user: str, collection: str, model_id: str, query: np.ndarray, limit: int) -> list[VectorHit]:
        """The ``limit`` nearest vectors to the normalised ``query``, best first."""
        raise NotImplementedError
