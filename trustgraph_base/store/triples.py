"""The triple-store contract (:class:`TriplesStore`), its registry of backends, and what every backend shares.

A store keeps RDF quads ``(s, p, o, g)`` per user and collection.  Backends are chosen by
name (``sqlite`` embedded, ``cassandra`` distributed) and imported lazily, the way rdflib
plugins are, so the embedded deployment never imports the Cassandra driver.

Everything here that is not the protocol is shared *semantics*, so both backends behave
identically and pass one conformance suite:

* **Terms are keyed by their canonical string** (:func:`~trustgraph_base.rdf.terms.serialize_term`):
  the same term always gives the same bytes, so datatypes, language tags and (nested)
  triple terms survive and match exactly.  :func:`term_from_key` parses them back through a
  small bounded cache and hands out copies, never shared mutable objects.
* **Validation before writing**: :func:`prepare_triples` checks every triple and returns
  canonical keys, so a bad term anywhere in a batch writes nothing.  Bad names and terms
  raise :class:`~trustgraph_base.store.errors.InvalidQuery` with the validator's message.
* **Graph selection**: ``None`` = all graphs, ``""`` = the default graph, an IRI = that graph.
* **Trace index feeding**: :func:`extract_traces` finds the Questions of a batch
  (``?q rdf:type`` GraphRAG/DocRAG/Agent question **in** ``urn:graph:retrieval``, ``?q`` a Question
  URI of the trace URI scheme, :func:`~trustgraph_base.provenance.uris.trace_root_of`) with their
  query text, start time and parent, so listing traces is a read of an index, never a scan of
  ``tg:query`` triples.  A Question typed in any other graph (a knowledge or TriG load) is
  not a trace, and deleting such a triple leaves the index alone.
* **Trace claims**: :meth:`TriplesStore.claim_trace` stores a Question only if the index does not hold
  its URI yet, atomically (SQLite: one write transaction; Cassandra: a lightweight transaction on
  the index row), so a client-chosen Question URI (an agent's session id) names one run.
* **Trace cursors** are opaque (base64 of ``ts|uri``) and ordered newest first: by start time
  (microseconds since the epoch) descending, then by URI descending.  A Question is indexed
  once (the first batch that types it wins; re-inserts are no-ops) with at most
  :data:`TRACE_QUESTION_CHARS` of its text.
* **Counts**: ``insert`` returns the number of distinct triples in the batch (all stored
  afterwards, whether new or not); ``delete`` the number of given triples that were stored.
"""

from __future__ import annotations

import base64
import binascii
import builtins
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from threading import Lock
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from ..provenance import namespaces as ns
from ..provenance.uris import trace_root_of
from ..rdf.terms import (
    MAX_TRIPLE_DEPTH,
    TermError,
    parse_term,
    quoted,
    serialize_term,
    spo,
    validate_iri,
    validate_term,
)
from ..schema.primitives import IRI, TRIPLE, Term, Triple
from ..schema.query import TraceSummary, TriplePattern
from .errors import InvalidQuery
from .gc_pause import gc_paused
from .names import check_names
from .registry import TRIPLE_STORES

#: What a backend opens for a user: SQLite's connection, Cassandra's prepared statements.
Space = TypeVar("Space")

__all__ = [
    "TriplesStore", "TracePage", "TriplesStoreBase", "open_triples_store",
    "DEFAULT_LIMIT", "MAX_LIMIT", "MAX_PAGE_SIZE", "DEFAULT_TRACE_LIMIT", "MAX_TRACE_LIMIT", "TRACE_TYPES",
    "TRACE_QUESTION_CHARS",
    "QuadKey", "PatternKey", "IndexedTrace",
    "check_names", "check_pattern", "check_page_size", "prepare_triples", "term_from_key",
    "extract_traces", "claimed_question", "question_type_of", "timestamp_micros", "check_trace_query",
    "check_question_uri", "check_limit", "encode_cursor", "decode_cursor",
]

#: Rows returned when a pattern says ``limit=0``.
DEFAULT_LIMIT = 10_000
#: The largest ``limit`` a query may ask for; more is an :class:`InvalidQuery`.
MAX_LIMIT = 1_000_000
#: The largest page :meth:`TriplesStore.iter_query` hands out at once.
MAX_PAGE_SIZE = 100_000
#: Traces per page when ``list_traces`` is called with ``limit=0``.
DEFAULT_TRACE_LIMIT = 50
#: The largest trace page.
MAX_TRACE_LIMIT = 1_000

#: Characters of a Question's text kept in the trace index (the full text stays in its triples).
TRACE_QUESTION_CHARS = 2_000

#: Question classes that make a subject a trace, and the short type name each is listed under.
TRACE_TYPES: dict[str, str] = {
    ns.TG_GRAPH_RAG_QUESTION: "graphrag",
    ns.TG_DOC_RAG_QUESTION: "docrag",
    ns.TG_AGENT_QUESTION: "agent",
}
_TRACE_TYPE_NAMES = frozenset(TRACE_TYPES.values())

#: ``(s, p, o, g)``: canonical term strings of a stored triple, ``g`` the graph IRI (``""`` = default).
QuadKey = tuple[str, str, str, str]


@dataclass(frozen=True, slots=True)
class PatternKey:
    """A validated pattern: canonical strings of the bound positions (``None`` = unbound) and the limit.

    ``limit`` is the number of rows to return (``DEFAULT_LIMIT`` when the pattern said 0);
    ``unlimited`` is true when the caller said 0, which :meth:`TriplesStore.iter_query` reads as
    "everything".
    """

    s: str | None
    p: str | None
    o: str | None
    g: str | None
    limit: int
    unlimited: bool


@dataclass
class TracePage:
    """One page of :meth:`TriplesStore.list_traces`: newest first; ``next_cursor`` is ``""`` on the last page."""

    traces: list[TraceSummary] = field(default_factory=list)
    next_cursor: str = ""


@dataclass(frozen=True, slots=True)
class IndexedTrace:
    """A trace-index row: the summary plus its sort key (start time in microseconds since the epoch)."""

    ts: int
    summary: TraceSummary


@runtime_checkable
class TriplesStore(Protocol):
    """Quads per user and collection, with exact term matching, named graphs and a trace index."""

    backend: str

    def insert(self, user: str, collection: str, triples: Sequence[Triple]) -> int:
        """Store ``triples`` (validated first; idempotent); returns how many distinct triples the batch held."""

    def query(self, user: str, collection: str, pattern: TriplePattern) -> list[Triple]:
        """Triples matching ``pattern`` (``limit`` 0 = :data:`DEFAULT_LIMIT`)."""

    def query_many(self, user: str, collection: str, patterns: Sequence[TriplePattern]) -> list[list[Triple]]:
        """One result list per pattern, in order."""

    def iter_query(self, user: str, collection: str, pattern: TriplePattern,
                   page_size: int = 1000) -> Iterator[list[Triple]]:
        """Matching triples in pages of at most ``page_size`` (``limit`` 0 = all of them)."""

    def count(self, user: str, collection: str, pattern: TriplePattern) -> int:
        """How many triples match ``pattern`` (its ``limit`` is ignored)."""

    def delete(self, user: str, collection: str, triples: Sequence[Triple]) -> int:
        """Remove exactly these triples; returns how many of them were stored."""

    def delete_collection(self, user: str, collection: str) -> int:
        """Remove a collection with its trace index; returns how many triples it held."""

    def list_collections(self, user: str) -> list[str]:
        """Names of the user's collections, sorted."""

    def claim_trace(self, user: str, collection: str, triples: Sequence[Triple]) -> bool:
        """Store ``triples`` (one Question, :func:`claimed_question`) unless the trace index holds that Question.

        Atomic: of any number of concurrent claims of one Question URI, in any processes, exactly one
        returns ``True``; the others (and every later one) return ``False`` and write nothing.
        """

    def list_traces(self, user: str, collection: str, type: str = "", limit: int = DEFAULT_TRACE_LIMIT,
                    cursor: str = "") -> TracePage:
        """Stored Questions, newest first, optionally of one type, paged by ``cursor``."""

    def get_trace(self, user: str, collection: str, question_uri: str) -> TraceSummary | None:
        """The index row of one Question, or ``None``."""

    def remove_trace(self, user: str, collection: str, question_uri: str) -> None:
        """Drop a Question from the trace index (its triples stay)."""

    def close(self) -> None:
        """Release connections; the store is unusable afterwards."""


# ---------------------------------------------------------------- opening

def open_triples_store(backend: str = "sqlite", **options: Any) -> TriplesStore:
    """Open a triple store by backend name (:data:`~trustgraph_base.store.registry.TRIPLE_STORES`).

    :param backend: ``"sqlite"`` (options: ``home``: directory, default ``$TG_HOME``) or
        ``"cassandra"`` (options: ``config``: a :class:`~trustgraph_base.store.cassandra.connection.CassandraConfig`).
    :param options: passed to the backend's constructor.
    :raises InvalidQuery: for an unknown backend name (a ``ValueError``).
    """
    store: TriplesStore = TRIPLE_STORES.open(backend, **options)
    return store


# ---------------------------------------------------------------- names, patterns, terms

# Validating an IRI costs a few regex searches; the same IRIs (predicates, classes, hubs)
# recur in almost every triple, so remember the ones already found valid.
_IRI_KEYS: dict[str, str] = {}
_IRI_KEYS_MAX = 200_000


def _iri_key(value: str) -> str:
    key = _IRI_KEYS.get(value)
    if key is None:
        validate_iri(value)
        if len(_IRI_KEYS) >= _IRI_KEYS_MAX:
            _IRI_KEYS.clear()
        key = _IRI_KEYS[value] = f"<{value}>"
    return key


def _triple_key(term: Term, depth: int) -> str:
    """Validate a triple term like :func:`validate_term` does (with the IRI cache on the way down) and
    return its canonical string in the same walk."""
    if depth >= MAX_TRIPLE_DEPTH:
        raise TermError(f"triple terms nested deeper than {MAX_TRIPLE_DEPTH}")
    t = term.triple
    if not isinstance(t, Triple):
        raise TermError("triple term without a triple")
    keys = []
    for position in (t.s, t.p, t.o):
        if position is not None and position.type == IRI and type(position.value) is str:
            keys.append(_iri_key(position.value))
        elif position is not None and position.type == TRIPLE:
            keys.append(_triple_key(position, depth + 1))
        else:
            keys.append(serialize_term(validate_term(position, depth + 1)))
    if t.p is None or t.p.type != IRI:
        raise TermError("predicate must be an IRI")
    return f"<<( {keys[0]} {keys[1]} {keys[2]} )>>"


def _term_key(term: Term | None) -> str:
    """Validate one term and return its canonical string."""
    if term is not None:
        kind = term.type
        if kind == IRI and type(term.value) is str:
            return _iri_key(term.value)
        if kind == TRIPLE:
            return _triple_key(term, 0)
    return serialize_term(validate_term(term))


def _graph_key(g: str | None) -> str:
    if g is None or g == "":
        return ""
    if type(g) is not str:
        raise TermError(f"graph must be an IRI string, got {type(g).__name__}")
    try:
        return validate_iri(g)
    except TermError as e:
        raise TermError(f"invalid graph: {e}") from None


def prepare_triples(triples: Sequence[Triple]) -> list[QuadKey]:
    """Validate every triple and return the distinct canonical quads, in first-seen order.

    ``g`` of ``None`` is read as the default graph.  Raises :class:`InvalidQuery` naming the
    first bad triple; nothing is written by a caller before this returns.
    """
    if isinstance(triples, (str, bytes)) or not hasattr(triples, "__iter__"):
        raise InvalidQuery("triples must be a sequence of Triple")
    out: dict[QuadKey, None] = {}
    iri_keys, graphs = _IRI_KEYS, {"": ""}
    for i, t in enumerate(triples):
        try:
            # fast path: IRIs already validated and graphs already seen (a dict hit each)
            s, p, o = t.s, t.p, t.o
            sk = iri_keys.get(s.value) if s.__class__ is Term and s.type == IRI else None
            pk = iri_keys.get(p.value) if p.__class__ is Term and p.type == IRI else None
            ok = iri_keys.get(o.value) if o.__class__ is Term and o.type == IRI else None
            g = graphs.get(t.g) if t.g.__class__ is str else None
            key = (sk or _term_key(s), pk or _term_key(p), ok or _term_key(o),
                   g if g is not None else _graph_key(t.g))
            if p is None or p.type != IRI:
                raise TermError("predicate must be an IRI")
            if g is None:
                graphs[t.g or ""] = key[3]
        except TermError as e:
            raise InvalidQuery(f"triple {i}: {e}") from None
        except (AttributeError, TypeError):   # not a Triple of Terms: the careful path names the problem
            key = _checked_key(i, t)
        out[key] = None
    return list(out)


def _checked_key(i: int, t: object) -> QuadKey:
    """The quad of triple number ``i`` through full validation, with a precise error."""
    if not isinstance(t, Triple):
        raise InvalidQuery(f"triple {i}: expected a Triple, got {type(t).__name__}")
    try:
        for position in (t.s, t.p, t.o):
            if position is not None and not isinstance(position, Term):
                raise TermError(f"expected a Term, got {type(position).__name__}")
        key = (_term_key(t.s), _term_key(t.p), _term_key(t.o), _graph_key(t.g))
        if t.p is None or t.p.type != IRI:
            raise TermError("predicate must be an IRI")
    except TermError as e:
        raise InvalidQuery(f"triple {i}: {e}") from None
    except (AttributeError, TypeError) as e:
        raise InvalidQuery(f"triple {i}: malformed term ({e})") from None
    return key


def check_limit(limit: int, what: str = "limit") -> int:
    """Return ``limit`` if it is an int in ``0..MAX_LIMIT``."""
    if type(limit) is not int or limit < 0 or limit > MAX_LIMIT:
        raise InvalidQuery(f"{what} must be an integer from 0 to {MAX_LIMIT}, got {limit!r}")
    return limit


def check_page_size(page_size: int) -> int:
    """Return ``page_size`` if it is an int in ``1..MAX_PAGE_SIZE``."""
    if type(page_size) is not int or page_size < 1 or page_size > MAX_PAGE_SIZE:
        raise InvalidQuery(f"page_size must be an integer from 1 to {MAX_PAGE_SIZE}, got {page_size!r}")
    return page_size


def check_pattern(pattern: TriplePattern) -> PatternKey:
    """Validate a pattern and turn its bound positions into canonical strings."""
    if not isinstance(pattern, TriplePattern):
        raise InvalidQuery(f"expected a TriplePattern, got {type(pattern).__name__}")
    limit = check_limit(pattern.limit)
    try:
        s = None if pattern.s is None else _term_key(pattern.s)
        p = None if pattern.p is None else _term_key(pattern.p)
        o = None if pattern.o is None else _term_key(pattern.o)
        g = None if pattern.g is None else _graph_key(pattern.g)
    except TermError as e:
        raise InvalidQuery(f"invalid pattern: {e}") from None
    return PatternKey(s, p, o, g, limit or DEFAULT_LIMIT, limit == 0)


# Parsed terms are cached by their canonical string (labels, predicates and hubs recur in
# almost every result; oldest entries go first); callers get copies so mutating a result
# never corrupts the cache.
_PARSED: OrderedDict[str, Term] = OrderedDict()
_PARSED_MAX = 65_536
_PARSED_LOCK = Lock()


def _copy(term: Term) -> Term:
    if term.type == TRIPLE:
        t = quoted(term)
        s, p, o = spo(t)
        return Term(TRIPLE, term.value, term.datatype, term.language, Triple(_copy(s), _copy(p), _copy(o), t.g))
    return Term(term.type, term.value, term.datatype, term.language)


def term_from_key(key: str) -> Term:
    """Parse a stored canonical term string (cached); raises :class:`~trustgraph_base.rdf.terms.TermError`."""
    term = _PARSED.get(key)
    if term is None:
        term = parse_term(key)
        if len(key) <= 1024:
            with _PARSED_LOCK:
                _PARSED[key] = term
                if len(_PARSED) > _PARSED_MAX:
                    _PARSED.popitem(last=False)
    return _copy(term)


# ---------------------------------------------------------------- trace index

def question_type_of(quad: QuadKey) -> str:
    """The trace type (``graphrag``/``docrag``/``agent``) if ``quad`` is ``?q rdf:type <Question class>``
    in ``urn:graph:retrieval``, else ``""``."""
    s, p, o, g = quad
    if p != _RDF_TYPE_KEY or g != ns.GRAPH_RETRIEVAL or s[0] != "<" or s.startswith("<<("):
        return ""
    return _TRACE_TYPE_BY_KEY.get(o, "")


_RDF_TYPE_KEY = f"<{ns.RDF_TYPE}>"
_TRACE_TYPE_BY_KEY = {f"<{iri}>": name for iri, name in TRACE_TYPES.items()}
_QUERY_KEY = f"<{ns.TG_QUERY}>"
_STARTED_KEY = f"<{ns.PROV_STARTED_AT_TIME}>"
_PARENT_KEY = f"<{ns.PROV_WAS_DERIVED_FROM}>"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def timestamp_micros(text: str) -> int | None:
    """Microseconds since the epoch of an ``xsd:dateTime`` lexical form (no zone = UTC), or ``None``."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return _micros(when)


def _micros(when: datetime) -> int:
    """Microseconds since the epoch (a naive ``when`` is UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def extract_traces(quads: Sequence[QuadKey], now: datetime | None = None) -> list[IndexedTrace]:
    """The Questions (URIs of the trace scheme) typed in ``urn:graph:retrieval`` in ``quads``, with their query
    text, start time and parent (from the same batch, same graph).

    A Question without a parseable ``prov:startedAtTime`` is indexed at ``now`` (insert time),
    so it still lists, as the newest.
    """
    questions: dict[str, str] = {}
    types, retrieval = _TRACE_TYPE_BY_KEY, ns.GRAPH_RETRIEVAL
    for s, p, o, g in quads:
        if p == _RDF_TYPE_KEY and o in types and g == retrieval and s[0] == "<" and not s.startswith("<<(") \
                and trace_root_of(s[1:-1]) == s[1:-1]:
            questions.setdefault(s, types[o])
    if not questions:
        return []
    text: dict[str, str] = {}
    started: dict[str, str] = {}
    parent: dict[str, str] = {}
    for s, p, o, g in quads:
        if s not in questions or g != retrieval:
            continue
        if p == _QUERY_KEY and o.startswith('"'):
            text.setdefault(s, term_from_key(o).value)
        elif p == _STARTED_KEY and o.startswith('"'):
            started.setdefault(s, term_from_key(o).value)
        elif p == _PARENT_KEY and o.startswith("<") and not o.startswith("<<("):
            parent.setdefault(s, o[1:-1])
    fallback = _micros(now or datetime.now(UTC))
    out = []
    for s, kind in questions.items():
        time_text = started.get(s, "")
        ts = timestamp_micros(time_text) if time_text else None
        out.append(IndexedTrace(ts if ts is not None else fallback,
                                TraceSummary(uri=s[1:-1], type=kind, question=text.get(s, "")[:TRACE_QUESTION_CHARS],
                                             time=time_text, parent=parent.get(s, ""))))
    return out


def claimed_question(quads: Sequence[QuadKey]) -> IndexedTrace:
    """The one Question a :meth:`TriplesStore.claim_trace` batch types; any other batch is an :class:`InvalidQuery`."""
    traces = extract_traces(quads)
    if len(traces) != 1:
        raise InvalidQuery(f"a trace claim holds exactly one Question, this one holds {len(traces)}")
    return traces[0]


def check_trace_query(user: str, collection: str, type: str, limit: int,
                      cursor: str) -> tuple[int, tuple[int, str] | None]:
    """Validate ``list_traces`` arguments; returns ``(limit, decoded cursor or None)``."""
    check_names(user, collection)
    if type not in ("", *_TRACE_TYPE_NAMES):
        raise InvalidQuery(f"unknown trace type {type!r}; use '', {', '.join(sorted(_TRACE_TYPE_NAMES))}")
    if builtins.type(limit) is not int or limit < 0 or limit > MAX_TRACE_LIMIT:
        raise InvalidQuery(f"trace limit must be an integer from 0 to {MAX_TRACE_LIMIT}, got {limit!r}")
    return (limit or DEFAULT_TRACE_LIMIT), (decode_cursor(cursor) if cursor else None)


def check_question_uri(uri: str) -> str:
    """Validate a Question URI argument."""
    try:
        return validate_iri(uri)
    except TermError as e:
        raise InvalidQuery(f"invalid question URI: {e}") from None


def encode_cursor(ts: int, uri: str) -> str:
    """An opaque cursor meaning "after the trace ``(ts, uri)``"."""
    return base64.urlsafe_b64encode(f"{ts}|{uri}".encode()).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """Read a cursor made by :func:`encode_cursor`; anything else is an :class:`InvalidQuery`."""
    try:
        if not isinstance(cursor, str) or len(cursor) > 16_384:
            raise ValueError
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
        ts_text, sep, uri = raw.partition("|")
        if not sep or not uri:
            raise ValueError
        validate_iri(uri)
        return int(ts_text), uri
    except (ValueError, binascii.Error, UnicodeDecodeError, TermError):
        raise InvalidQuery(f"invalid trace cursor {str(cursor)[:40]!r}") from None


# ---------------------------------------------------------------- the backends' shared front

class TriplesStoreBase(Generic[Space]):
    """The public methods of :class:`TriplesStore`: argument checks first, then the backend's step.

    Every method validates what it is given (names, triples, patterns, page sizes, trace
    arguments) before anything is read or written; reads and deletes then open the user's
    storage without creating it, and a user with none yet gets the empty answer.  A backend
    implements :meth:`_space` and the ``_``-prefixed steps, which receive the opened storage
    (``space``: SQLite's connection, Cassandra's prepared statements) and checked arguments.
    """

    backend: str

    def _space(self, user: str) -> Space | None:
        """The user's storage if it exists, else ``None`` (never creates it)."""
        raise NotImplementedError

    # writes (they create the user's storage themselves)

    @gc_paused()
    def insert(self, user: str, collection: str, triples: Sequence[Triple]) -> int:
        """Store ``triples`` in ``user``'s ``collection`` (all validated first; re-inserting is a no-op).

        :returns: the number of distinct triples in the batch (all of them stored afterwards).
        :raises InvalidQuery: a bad name or term (nothing written).
        :raises StoreUnavailable: the storage could not be reached in time (retry the same batch).
        """
        check_names(user, collection)
        quads = prepare_triples(triples)
        self._insert(user, collection, quads, extract_traces(quads))
        return len(quads)

    def claim_trace(self, user: str, collection: str, triples: Sequence[Triple]) -> bool:
        """Store ``triples`` (one Question) unless the trace index holds that Question; ``False``: nothing written."""
        check_names(user, collection)
        quads = prepare_triples(triples)
        return self._claim(user, collection, quads, claimed_question(quads))

    def delete(self, user: str, collection: str, triples: Sequence[Triple]) -> int:
        """Remove exactly ``triples`` (matching graph included); a removed ``?q rdf:type <Question class>``
        also removes ``q`` from the trace index.  Returns how many of them were stored."""
        check_names(user, collection)
        quads = prepare_triples(triples)
        space = self._space(user)
        return 0 if space is None or not quads else self._delete(space, user, collection, quads)

    def delete_collection(self, user: str, collection: str) -> int:
        """Remove ``collection`` entirely with its trace index; returns how many triples it held."""
        check_names(user, collection)
        space = self._space(user)
        return 0 if space is None else self._delete_collection(space, user, collection)

    # reads

    def query(self, user: str, collection: str, pattern: TriplePattern) -> list[Triple]:
        """Triples matching ``pattern``: bound ``s``/``p``/``o`` terms (``None`` = any), ``g`` (``None`` = all
        graphs, ``""`` = default graph, an IRI = that graph), ``limit`` (0 = 10,000; at most 1,000,000)."""
        check_names(user, collection)
        pk = check_pattern(pattern)
        space = self._space(user)
        return [] if space is None else self._query(space, user, collection, pk)

    def query_many(self, user: str, collection: str, patterns: Sequence[TriplePattern]) -> list[list[Triple]]:
        """One result list per pattern, in order."""
        check_names(user, collection)
        keys = [check_pattern(p) for p in patterns]
        space = self._space(user)
        return [[] for _ in keys] if space is None else self._query_many(space, user, collection, keys)

    def iter_query(self, user: str, collection: str, pattern: TriplePattern,
                   page_size: int = 1000) -> Iterator[list[Triple]]:
        """Matching triples in pages of at most ``page_size``; ``pattern.limit`` 0 means all of them."""
        check_names(user, collection)
        pk = check_pattern(pattern)
        check_page_size(page_size)
        space = self._space(user)
        return iter(()) if space is None else self._iter_query(space, user, collection, pk, page_size)

    def count(self, user: str, collection: str, pattern: TriplePattern) -> int:
        """How many triples match ``pattern`` (its ``limit`` is ignored)."""
        check_names(user, collection)
        pk = check_pattern(pattern)
        space = self._space(user)
        return 0 if space is None else self._count(space, user, collection, pk)

    def list_collections(self, user: str) -> list[str]:
        """Names of ``user``'s collections, sorted."""
        check_names(user)
        space = self._space(user)
        return [] if space is None else self._list_collections(space, user)

    # trace index

    def list_traces(self, user: str, collection: str, type: str = "", limit: int = DEFAULT_TRACE_LIMIT,
                    cursor: str = "") -> TracePage:
        """Stored Questions, newest first: ``type`` ``""`` (all), ``graphrag``, ``docrag`` or ``agent``;
        ``limit`` 1-1000 (0 = 50); ``cursor`` the ``next_cursor`` of the previous page (``""`` = first page)."""
        limit, after = check_trace_query(user, collection, type, limit, cursor)
        space = self._space(user)
        return TracePage() if space is None else self._list_traces(space, user, collection, type, limit, after)

    def get_trace(self, user: str, collection: str, question_uri: str) -> TraceSummary | None:
        """The trace-index row of ``question_uri``, or ``None``."""
        check_names(user, collection)
        check_question_uri(question_uri)
        space = self._space(user)
        return None if space is None else self._get_trace(space, user, collection, question_uri)

    def remove_trace(self, user: str, collection: str, question_uri: str) -> None:
        """Drop ``question_uri`` from the trace index (its triples stay)."""
        check_names(user, collection)
        check_question_uri(question_uri)
        space = self._space(user)
        if space is not None:
            self._remove_trace(space, user, collection, question_uri)

    # the backend's steps

    def _insert(self, user: str, collection: str, quads: list[QuadKey], traces: list[IndexedTrace]) -> None:
        raise NotImplementedError

    def _claim(self, user: str, collection: str, quads: list[QuadKey], question: IndexedTrace) -> bool:
        raise NotImplementedError

    def _delete(self, space: Space, user: str, collection: str, quads: list[QuadKey]) -> int:
        raise NotImplementedError

    def _delete_collection(self, space: Space, user: str, collection: str) -> int:
        raise NotImplementedError

    def _query(self, space: Space, user: str, collection: str, pk: PatternKey) -> list[Triple]:
        raise NotImplementedError

    def _query_many(self, space: Space, user: str, collection: str, keys: list[PatternKey]) -> list[list[Triple]]:
        raise NotImplementedError

    def _iter_query(self, space: Space, user: str, collection: str, pk: PatternKey,
                    page_size: int) -> Iterator[list[Triple]]:
        raise NotImplementedError

    def _count(self, space: Space, user: str, collection: str, pk: PatternKey) -> int:
        raise NotImplementedError

    def _list_collections(self, space: Space, user: str) -> list[str]:
        raise NotImplementedError

    def _list_traces(self, space: Space, user: str, collection: str, type: str, limit: int,
                     after: tuple[int, str] | None) -> TracePage:
        raise NotImplementedError

    def _get_trace(self, space: Space, user: str, collection: str, question_uri: str) -> TraceSummary | None:
        raise NotImplementedError

    def _remove_trace(self, space: Space, user: str, collection: str, question_uri: str) -> None:
        raise NotImplementedError
