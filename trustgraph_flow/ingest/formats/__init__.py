"""One decoder per document kind, each a thin layer over a maintained converter library.

A decoder takes ``(content, name, encoding)`` and returns the document's pages
(:class:`~..decoding.DecodedPage`) or raises a :class:`~..decoding.DecodeError`; a streamer returns
them as a :class:`~..decoding.PageStream`, decoded as they are iterated (PDF, whose documents run long).  Modules are
imported on first use, so a command that decodes nothing never imports a converter.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ..decoding import (
    APPLICATION_PDF,
    DOCX,
    EPUB,
    PPTX,
    TEXT_CSV,
    TEXT_HTML,
    TEXT_MARKDOWN,
    TEXT_PLAIN,
    TEXT_TSV,
    XLSX,
    DecodedPage,
    PageStream,
    UnknownKind,
)

Decoder = Callable[[bytes, str, "str | None"], list[DecodedPage]]
Streamer = Callable[[bytes, str, "str | None"], PageStream]

_DECODERS = {
    TEXT_PLAIN: "text:decode_text",
    TEXT_MARKDOWN: "text:decode_text",
    APPLICATION_PDF: "pdf:decode_pdf",
    TEXT_HTML: "webpage:decode_html",
    TEXT_CSV: "tables:decode_csv",
    TEXT_TSV: "tables:decode_tsv",
    XLSX: "tables:decode_xlsx",
    DOCX: "word:decode_docx",
    PPTX: "slides:decode_pptx",
    EPUB: "ebook:decode_epub",
}
#: Kinds whose pages are decoded one at a time (the others are small enough to decode whole).
_STREAMERS = {
    APPLICATION_PDF: "pdf:stream_pdf",
}


def decoder_for(kind: str) -> Decoder:
    """The decoder of a normalised kind."""
    target = _DECODERS.get(kind)
    if target is None:
        raise UnknownKind(f"no decoder for {kind!r}")
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


def streamer_for(kind: str) -> Streamer:
    """The page-at-a-time decoder of a normalised kind (a whole-document decoder's pages, for most kinds)."""
    target = _STREAMERS.get(kind)
    if target is not None:
        module, _, function = target.partition(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), function)
    decode = decoder_for(kind)

    def stream(content: bytes, name: str, encoding: str | None) -> PageStream:
        pages = decode(content, name, encoding)
        return PageStream(len(pages), iter(pages))

    return stream
