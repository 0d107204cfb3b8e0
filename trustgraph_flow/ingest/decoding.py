"""Turn the bytes of a source document into page texts, or fail with a clear reason.

The decoder is the first stage of ingestion, so it is where bad input must be caught:
an empty file, binary garbage sent as text, an encrypted or broken PDF, text that is not
valid UTF-8, an unsupported file type or a document over the size limit each raise a
:class:`DecodeError` subclass naming the problem.  Decoding is all-or-nothing: on error no
page is returned, so nothing half-decoded can be stored.

Kinds: ``text/plain`` and ``text/markdown`` give one page holding the whole text (Markdown
is kept verbatim: headings stay as lines); ``application/pdf`` gives one page per PDF page,
extracted with pypdf, empty pages kept with empty text so numbering matches the PDF.
"""

from __future__ import annotations

import io
import logging
import os
from dataclasses import dataclass

import pypdf
from pypdf.errors import PyPdfError

TEXT_PLAIN = "text/plain"
TEXT_MARKDOWN = "text/markdown"
APPLICATION_PDF = "application/pdf"
SUPPORTED_KINDS = (TEXT_PLAIN, TEXT_MARKDOWN, APPLICATION_PDF)

#: Default size limit of one document: 10 MiB.
DEFAULT_MAX = 10 * 1024 * 1024

#: Share of control characters above which "text" is taken to be binary data.
MAX_CONTROL_RATIO = 0.05

_KIND_ALIASES = {
    "text/x-markdown": TEXT_MARKDOWN,
    "text/md": TEXT_MARKDOWN,
    "application/x-pdf": APPLICATION_PDF,
}
_EXTENSIONS = {
    ".txt": TEXT_PLAIN,
    ".text": TEXT_PLAIN,
    ".md": TEXT_MARKDOWN,
    ".markdown": TEXT_MARKDOWN,
    ".pdf": APPLICATION_PDF,
}
#: Magic bytes of common formats we do not decode, so the error can name what was sent.
_FOREIGN_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"PK\x03\x04", "a ZIP archive (or a DOCX/XLSX/ODT office file)"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "a legacy Microsoft Office file"),
    (b"\x7fELF", "an ELF executable"),
    (b"{\\rtf", "an RTF document"),
)
# Control bytes that never occur in ordinary text (tab, LF, FF, CR are fine).
_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 12, 13)) + b"\x7f"
_CONTROL_CHARS = {b: None for b in _CONTROL_BYTES}

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DecodedPage:
    """One page of decoded text; ``page_number`` counts from 1."""

    page_number: int
    text: str


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


def normalize_kind(kind: str) -> str:
    """Canonical MIME kind for ``kind`` (lower case, parameters dropped, aliases mapped).

    :param kind: a MIME type such as ``"text/markdown; charset=utf-8"``.
    :returns: one of :data:`SUPPORTED_KINDS`.
    :raises UnknownKind: for anything else.
    """
    base = (kind or "").split(";", 1)[0].strip().lower()
    base = _KIND_ALIASES.get(base, base)
    if base not in SUPPORTED_KINDS:
        raise UnknownKind(
            f"unsupported document kind {kind!r}; supported kinds are {', '.join(SUPPORTED_KINDS)}"
        )
    return base


def detect_kind(filename: str, content: bytes) -> str:
    """Guess a document's kind from its magic bytes, then its file extension.

    A PDF is recognised by ``%PDF-`` whatever its name; known binary formats (images,
    archives, office files) are refused by name; ``.txt``/``.md``/``.pdf`` map to their
    kinds; a file without an extension is plain text when its bytes look like text.

    :param filename: the file's name (only its extension is used).
    :param content: the file's bytes.
    :returns: one of :data:`SUPPORTED_KINDS`.
    :raises UnknownKind: when the type is unsupported or cannot be told.
    """
    head = content[:1024]
    if head.lstrip()[:5] == b"%PDF-":
        return APPLICATION_PDF
    for magic, what in _FOREIGN_MAGIC:
        if head.startswith(magic):
            raise UnknownKind(f"{filename or 'the document'} is {what}, which cannot be ingested; "
                              f"supported kinds are {', '.join(SUPPORTED_KINDS)}")
    extension = os.path.splitext(filename or "")[1].lower()
    if extension in _EXTENSIONS:
        return _EXTENSIONS[extension]
    if extension:
        raise UnknownKind(f"unsupported file type {extension!r} ({filename}); "
                          f"supported extensions are {', '.join(sorted(_EXTENSIONS))}")
    if content and b"\x00" not in head and _control_ratio(head) <= MAX_CONTROL_RATIO:
        return TEXT_PLAIN
    raise UnknownKind(f"cannot tell the type of {filename or 'the document'}: no known extension "
                      f"and the content does not look like text")


def decode_document(content: bytes, kind: str, filename: str = "", max_bytes: int = DEFAULT_MAX,
                    *, encoding: str | None = None) -> list[DecodedPage]:
    """Decode a whole document into pages, all or nothing.

    :param content: the document's bytes.
    :param kind: its MIME kind (see :data:`SUPPORTED_KINDS`); ``""`` means detect it with
        :func:`detect_kind`.
    :param filename: the file's name, used in messages and for detection.
    :param max_bytes: size limit; larger documents are refused before any parsing.
    :param encoding: text encoding override for text kinds (default: strict UTF-8, a BOM
        allowed).
    :returns: the pages, numbered from 1.
    :raises DecodeError: (a subclass naming the problem) when the document cannot be decoded.
    """
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
    if kind == APPLICATION_PDF:
        return _decode_pdf(content, name)
    return [DecodedPage(1, _decode_text(content, name, encoding))]


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


def _control_ratio(data: bytes) -> float:
    if not data:
        return 0.0
    remaining = data.translate(None, _CONTROL_BYTES)
    return (len(data) - len(remaining)) / len(data)


def _decode_text(content: bytes, name: str, encoding: str | None) -> str:
    if content.lstrip()[:5] == b"%PDF-":
        raise BinaryContent(f"{name} was given as text but is a PDF; send it as {APPLICATION_PDF}")
    wide = (encoding or "").lower().replace("-", "").replace("_", "") in _WIDE_ENCODINGS
    if not wide:  # in byte-oriented encodings a NUL or a control byte is a control character
        nul = content.find(b"\x00")
        if nul >= 0:
            raise BinaryContent(f"{name} looks like binary data, not text: it contains a NUL byte at offset {nul}")
        _check_controls(len(content), len(content) - len(content.translate(None, _CONTROL_BYTES)), name)
    if encoding is None:
        text = _decode_utf8(content, name)
    else:
        try:
            text = content.decode(encoding)
        except LookupError:
            raise InvalidEncoding(f"unknown text encoding {encoding!r} for {name}") from None
        except UnicodeDecodeError as exc:
            raise InvalidEncoding(f"{name} is not valid {encoding}: byte 0x{content[exc.start]:02x} at offset "
                                  f"{exc.start} cannot be decoded ({exc.reason})") from None
        if wide:
            _check_controls(len(text), len(text) - len(text.translate(_CONTROL_CHARS)), name)
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise EmptyDocument(f"{name} contains only whitespace")
    return text


def _check_controls(total: int, controls: int, name: str) -> None:
    if total and controls / total > MAX_CONTROL_RATIO:
        raise BinaryContent(f"{name} looks like binary data, not text: {controls:,} of its {total:,} "
                            f"characters are control characters")


_WIDE_ENCODINGS = {"utf16", "utf16le", "utf16be", "utf32", "utf32le", "utf32be"}


def _decode_utf8(content: bytes, name: str) -> str:
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # no remedy named here: each caller names its own (tg-load-document: --encoding)
        raise InvalidEncoding(
            f"{name} is not valid UTF-8: byte 0x{content[exc.start]:02x} at offset {exc.start} ({exc.reason})"
        ) from None


class _CollectWarnings(logging.Handler):
    """Collects what pypdf logs while it repairs a damaged file, so the error can say what was wrong."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


#: pypdf reports the damage it repairs as warnings; they are collected (see :class:`_CollectWarnings`)
#: whatever level the application gives the root logger, and summarised in one warning of ours.
_PYPDF_LOG = logging.getLogger("pypdf")
_PYPDF_LOG.setLevel(logging.WARNING)
_PYPDF_LOG.propagate = False


def _decode_pdf(content: bytes, name: str) -> list[DecodedPage]:
    if not content.lstrip()[:5] == b"%PDF-":
        raise BrokenPdf(f"{name} is not a PDF: it does not start with %PDF-")
    if b"%%EOF" not in content[-2048:]:
        raise BrokenPdf(f"{name} is a truncated or broken PDF: there is no %%EOF marker at its end")
    collector = _CollectWarnings()
    pypdf_log = _PYPDF_LOG
    pypdf_log.addHandler(collector)
    try:
        pages = _read_pdf_pages(content, name)
    finally:
        pypdf_log.removeHandler(collector)
    if not any(page.text.strip() for page in pages):
        if collector.messages:
            raise BrokenPdf(f"{name} is a broken PDF: no text could be read "
                            f"({'; '.join(collector.messages[:3])})")
        raise EmptyDocument(f"{name} has {len(pages)} page(s) but no extractable text "
                            f"(a scanned PDF? OCR is not supported)")
    if collector.messages:
        log.warning("%s: pypdf repaired problems while reading: %s", name, "; ".join(collector.messages[:3]))
    return pages


def _read_pdf_pages(content: bytes, name: str) -> list[DecodedPage]:
    try:
        reader = pypdf.PdfReader(io.BytesIO(content), strict=False)
        if reader.is_encrypted:
            _open_encrypted(reader, name)
        page_count = len(reader.pages)
    except DecodeError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError,
            RecursionError, OSError, AssertionError) as exc:
        raise BrokenPdf(f"{name} is a broken PDF: {type(exc).__name__}: {exc}") from None
    if page_count == 0:
        raise BrokenPdf(f"{name} is a PDF without pages")
    pages = []
    for number in range(1, page_count + 1):
        try:
            text = reader.pages[number - 1].extract_text() or ""
        except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError,
                RecursionError, OSError, AssertionError, ZeroDivisionError) as exc:
            raise BrokenPdf(f"{name}: page {number} of {page_count} cannot be read: "
                            f"{type(exc).__name__}: {exc}") from None
        pages.append(DecodedPage(number, text))
    return pages


def _open_encrypted(reader: pypdf.PdfReader, name: str) -> None:
    """Open a PDF encrypted with an empty user password; refuse any other encrypted PDF."""
    try:
        opened = reader.decrypt("")
    except PyPdfError as exc:  # e.g. AES without a crypto library
        raise EncryptedPdf(f"{name} is an encrypted PDF and cannot be opened ({exc}); "
                           f"decrypt it and load it again") from None
    if not opened:
        raise EncryptedPdf(f"{name} is an encrypted PDF protected by a password; "
                           f"decrypt it and load it again")
