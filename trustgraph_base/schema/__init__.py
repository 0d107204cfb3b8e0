"""Message schemas (dataclasses) shared by all services; encoded with :mod:`trustgraph_base.codec`."""

from .agent import AgentRequest, AgentResponse, AgentStep
from .ingest import Chunk, DocumentRef, EntityContext, EntityContexts, IngestProgress, TextPage
from .library import (
    DocumentMetadata,
    DocumentRemoval,
    DocumentSummary,
    IngestStatus,
    LibrarianRequest,
    LibrarianResponse,
    StoredAnswer,
)
from .models import (
    EmbeddingsRequest,
    EmbeddingsResponse,
    PromptRequest,
    PromptResponse,
    TextCompletionRequest,
    TextCompletionResponse,
)
from .primitives import (
    BLANK,
    DEFAULT_GRAPH,
    IRI,
    LITERAL,
    TERM_TYPES,
    TRIPLE,
    Error,
    Metadata,
    Term,
    Triple,
    Triples,
    blank,
    iri,
    literal,
    triple_term,
)
from .query import (
    ChunkMatch,
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    EntityMatch,
    GraphEmbeddingsRequest,
    GraphEmbeddingsResponse,
    TraceAdminRequest,
    TraceAdminResponse,
    TraceClaimRequest,
    TraceClaimResponse,
    TraceListRequest,
    TraceListResponse,
    TraceSummary,
    TriplePattern,
    TriplesQueryRequest,
    TriplesQueryResponse,
)
from .retrieval import (
    DocumentRagQuery,
    DocumentRagResponse,
    EdgeSource,
    GraphRagQuery,
    GraphRagResponse,
    Source,
    SourceChainLink,
)

__all__ = [name for name in dir() if not name.startswith("_")]
