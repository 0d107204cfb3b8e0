"""Turn the bytes of a source document into page texts, or fail with a clear reason.

The decoder is the first stage of ingestion, so it is where bad input must be caught:
an empty file, binary garbage sent as text, an encrypted or broken PDF, a damaged office
file, text whose encoding cannot be told, an unsupported file type or a document over the
size limit each raise a :class:`DecodeError` subclass naming the problem.
:func:`decode_document` is all-or-nothing: on error no page is returned, so nothing half-decoded
can be stored.  :func:`stream_document` decodes a page at a time, so a long PDF is never held as
pages all at once; the librarian checks a whole document that way (:func:`check_document`) before
it stores it, and the decoder service then stores and passes on each page as it is decoded.

What a document is, is told by its content (:mod:`.detection`); the file name's extension
is only a hint.  Each kind keeps its natural page unit, which becomes the Page of the
extraction provenance (its ``label``), so a ``Source:`` line says where an edge came from:

=============================  =======================================================
kind                           pages
=============================  =======================================================
``text/plain``, ``text/markdown``  one page holding the whole text (Markdown verbatim)
``application/pdf``            one per PDF page (``Page 3``), blank pages kept
``text/html``                  the main content (boilerplate dropped), one per section
                               starting at an ``h1``/``h2`` heading (``Section 2: Radium``)
DOCX                           one per section starting at a Title / Heading 1 / Heading 2
PPTX                           one per slide (``Slide 4: Results``), notes included
XLSX                           one per worksheet (``Sheet: Elements``), a row per line
``text/csv``, TSV              one page, a row per line
EPUB                           one per chapter of the reading order (``Chapter 2: …``)
=============================  =======================================================

The converters are maintained libraries (pypdf, readability-lxml with Beautiful Soup,
python-docx, python-pptx, openpyxl, EbookLib), imported only when a document of their kind
is decoded (see :mod:`.formats`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

TEXT_PLAIN = "text/plain"
TEXT_MARKDOWN = "text/markdown"
APPLICATION_PDF = "application/pdf"
TEXT_HTML = "text/html"
TEXT_CSV = "text/csv"
TEXT_TSV = "text/tab-separated-values"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
EPUB = "application/epub+zip"
SUPPORTED_KINDS = (TEXT_PLAIN, TEXT_MARKDOWN, APPLICATION_PDF, TEXT_HTML, TEXT_CSV, TEXT_TSV, DOCX, PPTX, XLSX,
                   EPUB)
#: Kinds whose content is text (stored as UTF-8 by ``tg-load-document``).
TEXT_KINDS = (TEXT_PLAIN, TEXT_MARKDOWN, TEXT_HTML, TEXT_CSV, TEXT_TSV)
#: How messages name each kind.
KIND_NAMES = {
    TEXT_PLAIN: "text", TEXT_MARKDOWN: "Markdown", APPLICATION_PDF: "PDF", TEXT_HTML: "HTML", TEXT_CSV: "CSV",
    TEXT_TSV: "TSV", DOCX: "Word (DOCX)", PPTX: "PowerPoint (PPTX)", XLSX: "Excel (XLSX)", EPUB: "EPUB",
}
#: What ``--kind`` and the librarian accept besides the MIME types: short names and common aliases.
_KIND_ALIASES = {
    "text": TEXT_PLAIN, "txt": TEXT_PLAIN, "markdown": TEXT_MARKDOWN, "md": TEXT_MARKDOWN,
    "text/x-markdown": TEXT_MARKDOWN, "text/md": TEXT_MARKDOWN, "pdf": APPLICATION_PDF,
    "application/x-pdf": APPLICATION_PDF, "html": TEXT_HTML, "htm": TEXT_HTML, "application/xhtml+xml": TEXT_HTML,
    "csv": TEXT_CSV, "tsv": TEXT_TSV, "text/tsv": TEXT_TSV, "docx": DOCX, "pptx": PPTX, "xlsx": XLSX, "epub": EPUB,
}

#: Default size limit of one document: 10 MiB.
DEFAULT_MAX = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class DecodedPage:
    """One page of decoded text; ``page_number`` counts from 1; ``label`` names the unit
    (``Slide 3: Results``; empty means ``Page <number>``)."""

    page_number: int
    text: str
    label: str = ""


@dataclass(frozen=True, slots=True)
class PageStream:
    """A document's pages, decoded one at a time as they are iterated (once), with their ``count`` known
    before the first: a long PDF is stored and passed on page by page while only one page is in memory.

    Iterating raises :class:`DecodeError` where decoding fails, after the pages before it.
    """

    count: int
    pages: Iterator[DecodedPage]

    def __iter__(self) -> Iterator[DecodedPage]:
        return self.pages


class DecodeError(ValueError):
    """A document could not be decoded; ``reason`` is a short machine-readable code."""

    reason = "decode-error"


class EmptyDocument(DecodeError):
    reason = "empty"


class DocumentTooLarge(DecodeError):
    reason = "too-large"


class UnknownKind(DecodeError):
    reason = "unknown-kind"


class BinaryContent(DecodeError):
    reason = "binary"


class InvalidEncoding(DecodeError):
    reason = "invalid-encoding"


class EncryptedPdf(DecodeError):
    reason = "encrypted-pdf"


class BrokenPdf(DecodeError):
    reason = "broken-pdf"


class BrokenDocument(DecodeError):
    """An office file, e-book, web page or table that its converter cannot read."""

    reason = "broken-document"


def supported_text() -> str:
    """The supported kinds as messages list them."""
    return ", ".join(KIND_NAMES[k] for k in SUPPORTED_KINDS)


def normalize_kind(kind: str) -> str:
    """Canonical MIME kind for ``kind`` (lower case, parameters dropped, aliases and short names mapped).

    :param kind: a MIME type such as ``"text/markdown; charset=utf-8"``, or a short name (``docx``).
    :returns: one of :data:`SUPPORTED_KINDS`.
    :raises UnknownKind: for anything else.
    """
    base = (kind or "").split(";", 1)[0].strip().lower()
    base = _KIND_ALIASES.get(base, base)
    if base not in SUPPORTED_KINDS:
        raise UnknownKind(f"unsupported document kind {kind!r}; supported kinds are {', '.join(SUPPORTED_KINDS)} "
                          f"(or the short names {', '.join(sorted(a for a in _KIND_ALIASES if '/' not in a))})")
    return base


def detect_kind(filename: str, content: bytes) -> str:
    """A document's kind, told by its content (the extension of ``filename`` is only a hint).

    :raises UnknownKind: naming what the content is when that is not supported.
    """
    from .detection import detect

    return detect(filename, content).kind


def decode_document(content: bytes, kind: str, filename: str = "", max_bytes: int = DEFAULT_MAX,
                    *, encoding: str | None = None) -> list[DecodedPage]:
    """Decode a whole document into pages, all or nothing.

    :param content: the document's bytes.
    :param kind: its MIME kind (see :data:`SUPPORTED_KINDS`); ``""`` means detect it with
        :func:`detect_kind`.
    :param filename: the file's name, used in messages and as a detection hint.
    :param max_bytes: size limit; larger documents are refused before any parsing.
    :param encoding: text encoding override for text kinds (default: UTF-8, a BOM allowed,
        else the encoding detected from the bytes).
    :returns: the pages, numbered from 1.
    :raises DecodeError: (a subclass naming the problem) when the document cannot be decoded.
    """
    return list(stream_document(content, kind, filename, max_bytes, encoding=encoding))


def check_document(content: bytes, kind: str, filename: str = "", max_bytes: int = DEFAULT_MAX,
                   *, encoding: str | None = None) -> int:
    """Decode every page and keep none (in the memory of one page): what the librarian checks before it stores.

    :returns: the page count.
    :raises DecodeError: as :func:`decode_document`.
    """
    stream = stream_document(content, kind, filename, max_bytes, encoding=encoding)
    for _page in stream:
        pass
    return stream.count


def stream_document(content: bytes, kind: str, filename: str = "", max_bytes: int = DEFAULT_MAX,
                    *, encoding: str | None = None) -> PageStream:
    """A document's pages, decoded as they are iterated (the arguments as for :func:`decode_document`).

    Size, kind and the structure a page count needs are checked here; a page that cannot be decoded, or
    a document with no text in any page, raises while iterating.
    """
    from .formats import streamer_for

    if not isinstance(content, (bytes, bytearray, memoryview)):
        raise DecodeError(f"document content must be bytes, not {type(content).__name__}")
    content = bytes(content)
    name = filename or "the document"
    if max_bytes <= 0:
        raise ValueError("max_bytes must be positive")
    if len(content) > max_bytes:
        raise DocumentTooLarge(f"{name} is {len(content):,} bytes ({_mib(len(content))}); "
                               f"the limit is {max_bytes:,} bytes ({_mib(max_bytes)})")
    if not content:
        raise EmptyDocument(f"{name} is empty (0 bytes)")
    kind = detect_kind(filename, content) if not kind else normalize_kind(kind)
    stream = streamer_for(kind)(content, name, encoding)
    return PageStream(stream.count, _with_text(stream, name, kind))


def _with_text(stream: PageStream, name: str, kind: str) -> Iterator[DecodedPage]:
    """The pages of ``stream``; after the last, a document without text in any page raises."""
    any_text = False
    for page in stream:
        any_text = any_text or bool(page.text.strip())
        yield page
    if not any_text:
        raise EmptyDocument(f"{name} holds no text ({KIND_NAMES[kind]}, {stream.count} page(s) without any)")


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"
