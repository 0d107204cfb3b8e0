"""Ingestion's pure stages: decoding documents, chunking text, extracting knowledge-graph triples.

The bus services (librarian → decoder → chunker → extraction → triples-write) call these
functions; nothing here touches the bus or a store.
"""

from .chunking import TextChunk, check_chunk_options, chunk_text
from .decoding import (
    APPLICATION_PDF,
    DEFAULT_MAX,
    SUPPORTED_KINDS,
    TEXT_MARKDOWN,
    TEXT_PLAIN,
    BinaryContent,
    BrokenPdf,
    DecodedPage,
    DecodeError,
    DocumentTooLarge,
    EmptyDocument,
    EncryptedPdf,
    InvalidEncoding,
    UnknownKind,
    decode_document,
    detect_kind,
    normalize_kind,
)

__all__ = [
    "APPLICATION_PDF", "DEFAULT_MAX", "SUPPORTED_KINDS", "TEXT_MARKDOWN", "TEXT_PLAIN", "BinaryContent", "BrokenPdf",
    "DecodeError", "DecodedPage", "DocumentTooLarge", "EmptyDocument", "EncryptedPdf", "InvalidEncoding",
    "TextChunk", "UnknownKind", "check_chunk_options", "chunk_text", "decode_document", "detect_kind",
    "normalize_kind",
]
