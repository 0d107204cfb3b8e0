"""Librarian messages: documents, their children (pages, chunks) and stored answers."""

from __future__ import annotations

from dataclasses import dataclass, field

from .primitives import Error, Triple

#: ``document_type`` values.
SOURCE = "source"
PAGE = "page"
CHUNK = "chunk"
ANSWER = "answer"
DOCUMENT_TYPES = (SOURCE, PAGE, CHUNK, ANSWER)


@dataclass
class DocumentMetadata:
    """What the librarian knows about a document (content is stored separately, chunked)."""

    id: str = ""
    time: float = 0.0
    kind: str = "text/plain"
    title: str = ""
    comments: str = ""
    metadata: list[Triple] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    parent_id: str = ""
    document_type: str = SOURCE
    size: int = 0
    sha256: str = ""


@dataclass
class LibrarianRequest:
    """One librarian operation.

    ``operation`` is one of ``add-document``, ``add-child-document``, ``get-document-metadata``,
    ``get-document-content``, ``stream-document``, ``list-documents``, ``list-children``,
    ``remove-document``, ``process-document``, ``list-library`` (source documents with their page and chunk
    counts), ``find-document`` (which of the user's collections hold ``document_id``; ``collection`` is
    not used), ``ingest-status`` (how far ingestion got with the source documents ``document_ids``, read
    from the stores).
    """

    operation: str = ""
    user: str = "trustgraph"
    collection: str = "default"
    document_id: str = ""
    document_metadata: DocumentMetadata | None = None
    content: bytes = b""
    document_type: str = ""
    include_children: bool = True
    chunk_size: int = 0
    limit: int = 0
    document_ids: list[str] = field(default_factory=list)


@dataclass
class DocumentRemoval:
    """What removing a source document removed (``remove-document``), and the extracted edges it left because
    another document supports them."""

    documents: int = 0
    pages: int = 0
    chunks: int = 0
    knowledge_triples: int = 0
    kept_triples: int = 0
    provenance_triples: int = 0
    chunk_vectors: int = 0
    entity_vectors: int = 0


@dataclass
class DocumentSummary:
    """A source document as ``list-library`` lists it: its metadata and how many pages and chunks it has."""

    metadata: DocumentMetadata | None = None
    pages: int = 0
    chunks: int = 0


@dataclass
class IngestStatus:
    """How far ingestion got with one source document, read from the stores (``ingest-status``).

    A loader confirms completion from it when progress events were lost: ``complete`` says that the
    document's pages were chunked and every chunk's extraction, chunk vector and entity vectors are
    stored.  The counts change while the pipeline still writes.
    """

    document_id: str = ""
    #: The librarian holds it as a source document.
    found: bool = False
    #: Pages the decoder recorded (0: not decoded yet).
    pages: int = 0
    #: Pages whose chunks are recorded, and those chunks.
    pages_chunked: int = 0
    chunks: int = 0
    #: Chunks whose extraction (its Subgraph) is stored, and the edges those Subgraphs contain.
    extracted: int = 0
    extracted_triples: int = 0
    #: Chunks with a vector in the document index; chunks each of whose entities has a vector.
    chunk_vectors: int = 0
    entities_embedded: int = 0
    complete: bool = False


@dataclass
class LibrarianResponse:
    error: Error | None = None
    document_metadata: DocumentMetadata | None = None
    document_metadatas: list[DocumentMetadata] = field(default_factory=list)
    content: bytes = b""
    chunk_index: int = 0
    total_chunks: int = 0
    removed: int = 0
    is_final: bool = True
    collections: list[str] = field(default_factory=list)
    removal: DocumentRemoval | None = None
    summaries: list[DocumentSummary] = field(default_factory=list)
    statuses: list[IngestStatus] = field(default_factory=list)


@dataclass
class StoredAnswer:
    """An answer of a RAG service for the librarian, sent on the ``answer-store`` flow queue.

    A flow message, not a request: the query waits only for the broker to accept it, not for
    the store.  ``explain_id`` / ``explain_triples`` are the explain stage that points at the
    answer (the Synthesis); the librarian stores them in the same user and collection, and only
    after the answer, so on any bus a stored trace never claims an answer the librarian does
    not have.
    """

    user: str = "trustgraph"
    collection: str = "default"
    metadata: DocumentMetadata | None = None
    content: bytes = b""
    explain_id: str = ""
    explain_triples: list[Triple] = field(default_factory=list)
