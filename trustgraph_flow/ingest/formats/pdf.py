"""PDF: one page per PDF page, extracted with pypdf; blank pages are kept so numbering matches the PDF.

A PDF encrypted with an empty user password is opened; any other encrypted PDF is refused.
pypdf repairs what it can of a damaged file and logs what it repaired; those messages are
collected so that a file from which no text could be read says why.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pypdf
from pypdf.errors import PyPdfError

from ..decoding import BrokenPdf, DecodedPage, DecodeError, EmptyDocument, EncryptedPdf, PageStream

log = logging.getLogger(__name__)

_READ_ERRORS = (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, OSError,
                AssertionError, ZeroDivisionError)


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


def decode_pdf(content: bytes, name: str, encoding: str | None = None) -> list[DecodedPage]:
    """One page per PDF page (``encoding`` does not apply to PDFs)."""
    return list(stream_pdf(content, name))


def stream_pdf(content: bytes, name: str, encoding: str | None = None) -> PageStream:
    """The PDF's pages, each extracted as it is iterated; the page count is read from the page tree first.

    Iterating holds one page's text and parsed objects at a time: pypdf caches every object it parses
    (fonts, content streams) for the life of its reader, so the cache is emptied after each page.
    """
    if not content.lstrip()[:5] == b"%PDF-":
        raise BrokenPdf(f"{name} is not a PDF: it does not start with %PDF-")
    if b"%%EOF" not in content[-2048:]:
        raise BrokenPdf(f"{name} is a truncated or broken PDF: there is no %%EOF marker at its end")
    collector = _CollectWarnings()
    with _collecting(collector):
        reader, page_count = _open_pdf(content, name)
    return PageStream(page_count, _pdf_pages(reader, page_count, name, collector))


@contextmanager
def _collecting(collector: _CollectWarnings) -> Iterator[None]:
    _PYPDF_LOG.addHandler(collector)
    try:
        yield
    finally:
        _PYPDF_LOG.removeHandler(collector)


def _open_pdf(content: bytes, name: str) -> tuple[pypdf.PdfReader, int]:
    try:
        reader = pypdf.PdfReader(io.BytesIO(content), strict=False)
        if reader.is_encrypted:
            _open_encrypted(reader, name)
        page_count = len(reader.pages)
    except DecodeError:
        raise
    except _READ_ERRORS as exc:
        raise BrokenPdf(f"{name} is a broken PDF: {type(exc).__name__}: {exc}") from None
    if page_count == 0:
        raise BrokenPdf(f"{name} is a PDF without pages")
    return reader, page_count


def _pdf_pages(reader: pypdf.PdfReader, page_count: int, name: str,
               collector: _CollectWarnings) -> Iterator[DecodedPage]:
    """Each page in turn; after the last, a document from which no text could be read raises."""
    any_text = False
    for number in range(1, page_count + 1):
        with _collecting(collector):
            try:
                text = reader.pages[number - 1].extract_text() or ""
            except _READ_ERRORS as exc:
                raise BrokenPdf(f"{name}: page {number} of {page_count} cannot be read: "
                                f"{type(exc).__name__}: {exc}") from None
            finally:
                _forget_parsed_objects(reader)
        any_text = any_text or bool(text.strip())
        yield DecodedPage(number, text, f"Page {number}")
    if not any_text:
        if collector.messages:
            raise BrokenPdf(f"{name} is a broken PDF: no text could be read "
                            f"({'; '.join(collector.messages[:3])})")
        raise EmptyDocument(f"{name} has {page_count} page(s) but no extractable text "
                            f"(a scanned PDF? OCR is not supported)")
    if collector.messages:
        log.warning("%s: pypdf repaired problems while reading: %s", name, "; ".join(collector.messages[:3]))


def _forget_parsed_objects(reader: pypdf.PdfReader) -> None:
    """Empty pypdf's cache of parsed objects (it re-reads from the file what a later page needs again)."""
    cache = getattr(reader, "resolved_objects", None)
    if isinstance(cache, dict):
        cache.clear()


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
