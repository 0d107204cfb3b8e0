"""Ingestion pipeline messages: librarian -> decoder -> chunker -> extraction/embeddings."""

from __future__ import annotations

from dataclasses import dataclass, field

from .primitives import Metadata, Term


@dataclass
class DocumentRef:
    """A source document ready for decoding (its content lives in the librarian)."""

    metadata: Metadata = field(default_factory=Metadata)
    document_id: str = ""
    kind: str = ""
    title: str = ""


@dataclass
class TextPage:
    """One decoded page of a document (PDF page, or the whole text of a text file)."""

    metadata: Metadata = field(default_factory=Metadata)
    document_id: str = ""
    page_id: str = ""
    page_number: int = 1
    page_count: int = 1
    text: str = ""


@dataclass
class Chunk:
    """One chunk of a page, with character offsets into the page text."""

    metadata: Metadata = field(default_factory=Metadata)
    document_id: str = ""
    page_id: str = ""
    chunk_id: str = ""
    chunk_index: int = 0
    char_offset: int = 0
    char_length: int = 0
    text: str = ""


@dataclass
class EntityContext:
    """An extracted entity and the text to embed for it."""

    entity: Term | None = None
    label: str = ""
    context: str = ""


@dataclass
class EntityContexts:
    metadata: Metadata = field(default_factory=Metadata)
    chunk_id: str = ""
    entities: list[EntityContext] = field(default_factory=list)


@dataclass
class IngestProgress:
    """Progress of one document through one pipeline stage (for load progress bars)."""

    user: str = "trustgraph"
    collection: str = "default"
    document_id: str = ""
    stage: str = ""
    item_id: str = ""
    total: int = 0
    error: str = ""
