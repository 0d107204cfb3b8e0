"""Triple-store and vector-index query messages."""

from __future__ import annotations

from dataclasses import dataclass, field

from .primitives import Error, Term, Triple


@dataclass
class TriplePattern:
    """One pattern of a batched query: unbound positions are ``None``.

    ``g`` selects graphs: ``None`` = all graphs, ``""`` = default graph, an IRI = that graph.
    """

    s: Term | None = None
    p: Term | None = None
    o: Term | None = None
    g: str | None = None
    limit: int = 0


@dataclass
class TriplesQueryRequest:
    """Query the triple store of one user and collection.

    Either a single pattern (``s``/``p``/``o``/``g``/``limit``) or, when ``patterns`` is
    non-empty, a batch answered in one round trip (results are the de-duplicated union).

    Chain walking, so a provenance chain costs one request: with ``follow_depth`` N > 0 the
    service takes the IRI subjects of the matches, then N times fetches their ``follow``
    predicates (in the same graph as each pattern) and moves on to the IRI objects found; for
    every node reached it also returns its ``describe`` predicates (e.g. ``rdfs:label``,
    ``rdf:type``).  All those triples are part of the response.  ``describe_types``, when
    non-empty, keeps only the ``rdf:type`` triples of described nodes whose class it lists (a
    source chain needs Subgraph/Chunk/Page/Document, not the ``prov:Entity`` every node also has).
    """

    user: str = "trustgraph"
    collection: str = "default"
    s: Term | None = None
    p: Term | None = None
    o: Term | None = None
    g: str | None = None
    limit: int = 0
    patterns: list[TriplePattern] = field(default_factory=list)
    follow: list[str] = field(default_factory=list)
    follow_depth: int = 0
    describe: list[str] = field(default_factory=list)
    describe_types: list[str] = field(default_factory=list)
    streaming: bool = False
    batch_size: int = 0


@dataclass
class TriplesQueryResponse:
    """Matching triples (one message, or several when streaming; ``is_final`` on the last)."""

    error: Error | None = None
    triples: list[Triple] = field(default_factory=list)
    is_final: bool = True


@dataclass
class EntityMatch:
    """A knowledge-graph entity found by vector similarity."""

    entity: Term | None = None
    label: str = ""
    score: float = 0.0


@dataclass
class GraphEmbeddingsRequest:
    """Nearest entities to a vector in one user's collection.

    ``model`` names the embedding model that made ``vector``; an index built with another
    model refuses the query instead of comparing vectors from different spaces.
    """

    user: str = "trustgraph"
    collection: str = "default"
    vector: list[float] = field(default_factory=list)
    limit: int = 10
    model: str = ""


@dataclass
class GraphEmbeddingsResponse:
    error: Error | None = None
    entities: list[EntityMatch] = field(default_factory=list)


@dataclass
class ChunkMatch:
    """A document chunk found by vector similarity."""

    chunk_id: str = ""
    document_id: str = ""
    score: float = 0.0


@dataclass
class DocumentEmbeddingsRequest:
    """Nearest chunks to a vector in one user's collection (``model`` as for entities)."""

    user: str = "trustgraph"
    collection: str = "default"
    vector: list[float] = field(default_factory=list)
    limit: int = 10
    model: str = ""


@dataclass
class DocumentEmbeddingsResponse:
    error: Error | None = None
    chunks: list[ChunkMatch] = field(default_factory=list)


@dataclass
class TraceSummary:
    """One row of the trace index: a stored Question, newest first."""

    uri: str = ""
    type: str = ""
    question: str = ""
    time: str = ""
    parent: str = ""


@dataclass
class TraceListRequest:
    """List stored traces of one user and collection, newest first, paged by ``cursor``."""

    user: str = "trustgraph"
    collection: str = "default"
    type: str = ""
    limit: int = 50
    cursor: str = ""


@dataclass
class TraceListResponse:
    error: Error | None = None
    traces: list[TraceSummary] = field(default_factory=list)
    next_cursor: str = ""


@dataclass
class TraceClaimRequest:
    """Store a trace's Question (``triples``: one Question and its properties) unless the collection already
    holds a trace with that Question's URI: the atomic start of a run whose URI the client chose (an agent's
    session id), so two runs can never share one trace."""

    user: str = "trustgraph"
    collection: str = "default"
    triples: list[Triple] = field(default_factory=list)


@dataclass
class TraceClaimResponse:
    """``claimed``: the Question is stored and the trace is this run's; false: another run holds the URI."""

    error: Error | None = None
    claimed: bool = False


@dataclass
class TraceAdminRequest:
    """Retention of stored traces: ``delete`` one trace (``uri``), or ``prune`` every trace of a
    user and collection older than ``older_than_seconds``.  ``dry_run`` only reports.

    A trace that has not reached its final stage yet and started less than ``grace_seconds``
    ago is still being written: ``delete`` refuses it, ``prune`` skips it (``skipped``).
    """

    operation: str = ""
    user: str = "trustgraph"
    collection: str = "default"
    uri: str = ""
    older_than_seconds: float = 0.0
    dry_run: bool = False
    grace_seconds: float = 3600.0


@dataclass
class TraceAdminResponse:
    """What was (or, with ``dry_run``, would be) deleted; ``skipped``: traces left alone as still being
    written; ``skipped_documents``: documents a trace points at that are not its own answers, left alone."""

    error: Error | None = None
    traces: list[str] = field(default_factory=list)
    triples: int = 0
    documents: int = 0
    skipped: int = 0
    skipped_documents: int = 0
