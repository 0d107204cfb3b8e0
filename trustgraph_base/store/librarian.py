"""The librarian store: documents, their children (pages, chunks) and stored answers, per user and collection.

One protocol, two backends: ``sqlite`` (one file per user under ``$TG_HOME/librarian``) and
``cassandra`` (one keyspace per user).  Content of any size is kept in the database itself,
split into bounded parts (default 256 KiB) so no cell or row grows without limit and no
object store is needed.

Documents belong to a user AND a collection: every method takes ``user, collection`` first,
and the collection is part of every key, so a document added in collection A is invisible
from collection B of the same user (get, list, stream and remove all answer "not found" or
nothing), and the same document id may exist independently in two collections.  A child
lives in its parent's collection.  :meth:`LibrarianStore.delete_collection` removes one
collection whole, like the triple store's and vector indexes' methods of that name.

Rules every backend follows (the conformance suite checks them):

* ``add_document`` / ``add_child`` are all-or-nothing: parts are written first, the metadata
  row that makes the document visible last; a failure leaves no visible document.
* Re-adding an id with byte-identical content (same sha256, same parent) is idempotent and
  returns the stored metadata; any other re-add raises :class:`DocumentExists`.
* Reads verify the sha256 recorded at write time (:class:`ContentCorrupt` otherwise).
* Users and collections are validated (:func:`~trustgraph_base.store.names.check_names`), ids too
  (:func:`check_document_id`); all are bound as parameters, never formatted into SQL/CQL or paths.

### Usage example

>>> store = open_librarian_store("sqlite", home=tmp_path)            # doctest: +SKIP
>>> store.add_document("alice", "papers", DocumentMetadata(id="doc:1", title="Report"), b"...")  # doctest: +SKIP
>>> b"".join(store.stream_content("alice", "papers", "doc:1"))     # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from ..codec import CodecError, decode, encode
from ..schema.library import ANSWER, CHUNK, DOCUMENT_TYPES, PAGE, SOURCE, DocumentMetadata
from .errors import InvalidQuery, NotFound, StoreError, StoreUnavailable
from .names import check_names
from .registry import LIBRARIAN_STORES

__all__ = [
    "LibrarianStore", "open_librarian_store", "DocumentExists", "ContentCorrupt",
    "NotFound", "InvalidQuery", "StoreError", "StoreUnavailable",
    "check_document_id", "check_chunk_size", "check_limit", "check_document_type", "check_part_size",
    "prepare_metadata", "same_document", "exists_message", "sha256_hex", "split_parts",
    "rechunk", "metadata_to_json", "metadata_from_json",
    "DEFAULT_PART_SIZE", "MAX_PART_SIZE", "MAX_DOCUMENT_ID_LENGTH", "MAX_LIST_LIMIT",
    "TOP_LEVEL_TYPES", "CHILD_TYPES",
]

#: Size of the stored content parts (bytes); Cassandra handles cells well below 1 MB.
DEFAULT_PART_SIZE = 256 * 1024
#: Largest part size a backend may be configured with.
MAX_PART_SIZE = 1024 * 1024
#: Longest document id accepted (characters); ids are often IRIs.
MAX_DOCUMENT_ID_LENGTH = 1024
#: Largest ``limit`` of one listing.
MAX_LIST_LIMIT = 100_000
#: Largest ``chunk_size`` of a stream.
MAX_STREAM_CHUNK = 64 * 1024 * 1024

#: Types ``add_document`` accepts (answers are stored top-level by the RAG services and agents).
TOP_LEVEL_TYPES = (SOURCE, ANSWER)
#: Types ``add_child`` accepts.
CHILD_TYPES = (PAGE, CHUNK, ANSWER)

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


class DocumentExists(StoreError):
    """A document with this id already exists with different content (or another parent)."""


class ContentCorrupt(StoreError):
    """Stored content does not match the sha256 recorded when it was written."""


@runtime_checkable
class LibrarianStore(Protocol):
    """Per-user, per-collection document store; see the module docstring for the rules every backend follows."""

    backend: str

    def add_document(self, user: str, collection: str, meta: DocumentMetadata, content: bytes) -> DocumentMetadata:
        """Store a top-level document (``source`` or ``answer``); returns the stored metadata."""
        ...

    def add_child(self, user: str, collection: str, parent_id: str, meta: DocumentMetadata,
                  content: bytes) -> DocumentMetadata:
        """Store a child (``page``, ``chunk`` or ``answer``) of an existing document of the same collection."""
        ...

    def get_metadata(self, user: str, collection: str, document_id: str) -> DocumentMetadata:
        """Metadata of one document; :class:`NotFound` if absent."""
        ...

    def get_content(self, user: str, collection: str, document_id: str) -> bytes:
        """Whole content, sha256-verified; :class:`NotFound` if absent."""
        ...

    def stream_content(self, user: str, collection: str, document_id: str,
                       chunk_size: int = 1 << 20) -> Iterator[bytes]:
        """Content in chunks of ``chunk_size`` bytes; at least one (possibly empty) chunk."""
        ...

    def list_documents(self, user: str, collection: str, document_type: str = SOURCE,
                       limit: int = 1000) -> list[DocumentMetadata]:
        """Documents of one type, newest first, at most ``limit``."""
        ...

    def list_children(self, user: str, collection: str, parent_id: str) -> list[DocumentMetadata]:
        """Direct children of a document, ordered by id."""
        ...

    def remove_document(self, user: str, collection: str, document_id: str, include_children: bool = True) -> int:
        """Remove a document (and all its descendants); returns how many documents were removed."""
        ...

    def count_descendants(self, user: str, collection: str, document_ids: list[str]) -> dict[str, tuple[int, int]]:
        """``id → (children, grandchildren)`` of each document (a source's pages and chunks), read from the
        parent index: one look-up per document and child, never a scan of the collection."""
        ...

    def delete_collection(self, user: str, collection: str) -> int:
        """Remove every document and part of one collection (others untouched); returns how many documents."""
        ...

    def find_document(self, user: str, document_id: str) -> list[str]:
        """The user's collections that hold a document with this id, sorted (``[]`` when none does).

        For clients whose document requests name no collection (TrustGraph's librarian
        protocol); it reads only this user's documents.
        """
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


def open_librarian_store(backend: str = "sqlite", **options: Any) -> LibrarianStore:
    """Open a librarian store by backend name (:data:`~trustgraph_base.store.registry.LIBRARIAN_STORES`).

    :param backend: ``"sqlite"`` (options: ``home``, ``part_size``) or ``"cassandra"``
        (options: ``config`` a :class:`~.cassandra.connection.CassandraConfig`, ``part_size``,
        ``keyspace_prefix``).
    :raises InvalidQuery: for an unknown backend name.
    """
    store: LibrarianStore = LIBRARIAN_STORES.open(backend, **options)
    return store


# ------------------------------------------------------------------ validation shared by backends

def check_document_id(document_id: str, what: str = "document id") -> str:
    """Return ``document_id`` if usable: a non-empty str of at most 1024 characters without control characters.

    :param document_id: the id to check (often an IRI such as ``urn:trustgraph:answer:…``).
    :param what: how to name it in the error message.
    :raises InvalidQuery: with a message saying what is wrong.
    """
    if type(document_id) is not str or not document_id:
        raise InvalidQuery(f"{what} is empty or not a string")
    if len(document_id) > MAX_DOCUMENT_ID_LENGTH:
        raise InvalidQuery(f"{what} is longer than {MAX_DOCUMENT_ID_LENGTH} characters")
    bad = _CONTROL.search(document_id)
    if bad:
        raise InvalidQuery(f"{what} {document_id[:80]!r} contains a control character "
                           f"(U+{ord(bad.group()):04X} at {bad.start()})")
    return document_id


def check_chunk_size(chunk_size: int) -> int:
    """Return ``chunk_size`` if it is an int between 1 byte and 64 MiB, else raise :class:`InvalidQuery`."""
    if type(chunk_size) is not int or not 1 <= chunk_size <= MAX_STREAM_CHUNK:
        raise InvalidQuery(f"chunk_size must be an integer from 1 to {MAX_STREAM_CHUNK}, got {chunk_size!r}")
    return chunk_size


def check_limit(limit: int) -> int:
    """Return ``limit`` if it is an int between 1 and :data:`MAX_LIST_LIMIT`, else raise :class:`InvalidQuery`."""
    if type(limit) is not int or not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidQuery(f"limit must be an integer from 1 to {MAX_LIST_LIMIT}, got {limit!r}")
    return limit


def check_document_type(document_type: str) -> str:
    """Return ``document_type`` if it is one of ``source``, ``page``, ``chunk``, ``answer``."""
    if document_type not in DOCUMENT_TYPES:
        raise InvalidQuery(f"unknown document_type {str(document_type)[:40]!r}: use one of {', '.join(DOCUMENT_TYPES)}")
    return document_type


def check_part_size(part_size: int) -> int:
    """Return ``part_size`` if it is an int from 1 KiB to :data:`MAX_PART_SIZE`."""
    if type(part_size) is not int or not 1024 <= part_size <= MAX_PART_SIZE:
        raise ValueError(f"part_size must be an integer from 1024 to {MAX_PART_SIZE}, got {part_size!r}")
    return part_size


def sha256_hex(content: bytes) -> str:
    """Hex sha256 of ``content``."""
    return hashlib.sha256(content).hexdigest()


def prepare_metadata(meta: DocumentMetadata, content: bytes, parent_id: str = "",
                     allowed_types: tuple[str, ...] = TOP_LEVEL_TYPES) -> DocumentMetadata:
    """Validate a document to be added and return a copy with ``size``, ``sha256``, ``time`` and ``parent_id`` set.

    :param meta: caller's metadata; ``id`` is required, ``document_type`` must be in ``allowed_types``.
    :param content: the document's bytes.
    :param parent_id: the parent's id for a child ("" for a top-level document).
    :param allowed_types: document types valid here.
    :raises InvalidQuery: on a missing/invalid id, a wrong type, non-bytes content or metadata the codec rejects.
    """
    if not isinstance(meta, DocumentMetadata):
        raise InvalidQuery(f"expected DocumentMetadata, got {type(meta).__name__}")
    check_document_id(meta.id)
    if not isinstance(content, (bytes, bytearray, memoryview)):
        raise InvalidQuery(f"content must be bytes, got {type(content).__name__}")
    check_document_type(meta.document_type)
    if meta.document_type not in allowed_types:
        if parent_id:
            hint = "a child document must be a page, chunk or answer"
        else:
            hint = "pages and chunks need a parent: add them with add_child"
        raise InvalidQuery(f"document_type {meta.document_type!r} is not allowed here: {hint}")
    if parent_id:
        check_document_id(parent_id, "parent id")
        if parent_id == meta.id:
            raise InvalidQuery(f"document {meta.id[:80]!r} cannot be its own parent")
        if meta.parent_id and meta.parent_id != parent_id:
            raise InvalidQuery(f"metadata names parent {meta.parent_id[:80]!r} but the child is added under "
                               f"{parent_id[:80]!r}")
    elif meta.parent_id:
        raise InvalidQuery("parent_id is set on a top-level document: use add_child to add a child")
    stamp = meta.time
    if not isinstance(stamp, (int, float)) or isinstance(stamp, bool) or not math.isfinite(stamp) or stamp < 0:
        raise InvalidQuery(f"time must be a non-negative number of seconds, got {stamp!r}")
    prepared = replace(meta, parent_id=parent_id, size=len(content), sha256=sha256_hex(bytes(content)),
                       time=float(stamp) if stamp else time.time(),
                       metadata=list(meta.metadata), tags=list(meta.tags))
    metadata_to_json(prepared)  # reject what the codec cannot store, before anything is written
    return prepared


def same_document(existing: DocumentMetadata, new: DocumentMetadata) -> bool:
    """True when a re-add of ``new`` is the same document as ``existing`` (identical bytes and parent)."""
    return existing.sha256 == new.sha256 and existing.parent_id == new.parent_id


def exists_message(existing: DocumentMetadata, new: DocumentMetadata) -> str:
    """Why a re-add of ``new`` was refused, for :class:`DocumentExists`."""
    if existing.parent_id != new.parent_id:
        where = f"under parent {existing.parent_id[:120]!r}" if existing.parent_id else "as a top-level document"
        return f"document {new.id[:200]!r} already exists {where}"
    return (f"document {new.id[:200]!r} already exists with different content "
            f"(sha256 {existing.sha256[:12]}…, {existing.size} bytes); remove it first to replace it")


def split_parts(content: bytes, part_size: int) -> list[bytes]:
    """Split ``content`` into parts of ``part_size`` bytes (no parts for empty content)."""
    view = memoryview(content)
    return [bytes(view[i:i + part_size]) for i in range(0, len(view), part_size)]


def rechunk(parts: Iterator[bytes], chunk_size: int, expected_sha256: str, expected_size: int,
            document_id: str) -> Iterator[bytes]:
    """Re-cut stored parts into ``chunk_size`` chunks, verifying size and sha256 before the last chunk is yielded.

    Always yields at least one chunk (``b""`` for an empty document), so a streaming reply
    to a zero-byte document still carries a final message.

    :raises ContentCorrupt: if the parts do not add up to the recorded size and sha256.
    """
    digest = hashlib.sha256()
    total = 0
    buffer = bytearray()
    pending: bytes | None = None  # held back until we know whether it is the last chunk
    for part in parts:
        digest.update(part)
        total += len(part)
        buffer += part
        while len(buffer) >= chunk_size:
            if pending is not None:
                yield pending
            pending = bytes(buffer[:chunk_size])
            del buffer[:chunk_size]
    if total != expected_size or digest.hexdigest() != expected_sha256:
        raise ContentCorrupt(f"content of document {document_id[:80]!r} is corrupt: read {total} bytes with sha256 "
                             f"{digest.hexdigest()[:16]}…, expected {expected_size} bytes with {expected_sha256[:16]}…")
    if buffer:
        if pending is not None:
            yield pending
        yield bytes(buffer)
    else:
        yield pending if pending is not None else b""


def metadata_to_json(meta: DocumentMetadata) -> bytes:
    """Serialise metadata for storage with the project codec; :class:`InvalidQuery` if it cannot be stored."""
    try:
        return encode(meta)
    except CodecError as e:
        raise InvalidQuery(f"document metadata cannot be stored: {e}") from None


def metadata_from_json(data: bytes | str) -> DocumentMetadata:
    """Read metadata stored by :func:`metadata_to_json`."""
    try:
        return decode(DocumentMetadata, data)
    except CodecError as e:
        raise StoreError(f"stored document metadata is unreadable: {e}") from None


def not_found(document_id: str, user: str, collection: str, what: str = "document") -> NotFound:
    """The :class:`NotFound` of a document (or ``what``) missing from ``user``'s ``collection``."""
    return NotFound(f"{what} {document_id[:200]!r} not found in collection {collection!r} of user {user!r}")


class LibrarianStoreBase:
    """The adds of :class:`LibrarianStore`: names and metadata checked and prepared first, then the backend's
    :meth:`_add`, which every backend implements."""

    def add_document(self, user: str, collection: str, meta: DocumentMetadata, content: bytes) -> DocumentMetadata:
        """Store a top-level ``source`` or ``answer`` document; idempotent for identical content.

        :param user: owner of the document.
        :param collection: the user's collection it belongs to.
        :param meta: metadata; ``id`` is required.
        :param content: the bytes, stored in parts of ``part_size``.
        :returns: the stored metadata (with ``size``, ``sha256`` and ``time`` set).
        :raises DocumentExists: the id exists in this collection with other content.
        """
        check_names(user, collection)
        prepared = prepare_metadata(meta, content, "", TOP_LEVEL_TYPES)
        return self._add(user, collection, prepared, bytes(content))

    def add_child(self, user: str, collection: str, parent_id: str, meta: DocumentMetadata,
                  content: bytes) -> DocumentMetadata:
        """Store a ``page``, ``chunk`` or ``answer`` child of an existing document of the same collection.

        :param user: owner of the document.
        :param collection: the collection of the parent (and so of the child).
        :param parent_id: id of the parent document.
        :param meta: metadata of the child; ``id`` is required.
        :param content: the child's bytes.
        :raises NotFound: the parent does not exist in this collection.
        :raises DocumentExists: the id exists with other content or another parent.
        """
        check_names(user, collection)
        prepared = prepare_metadata(meta, content, parent_id, CHILD_TYPES)
        return self._add(user, collection, prepared, bytes(content))

    def _add(self, user: str, collection: str, meta: DocumentMetadata, content: bytes) -> DocumentMetadata:
        """Store checked names and :func:`prepare_metadata`'s ``meta`` with its ``content``."""
        raise NotImplementedError
