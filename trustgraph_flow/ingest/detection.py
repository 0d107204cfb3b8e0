"""What a document is, told by its content; the file name's extension is only a hint.

In order:

1. **Magic bytes.**  ``%PDF-`` is a PDF whatever its name.  A ZIP archive is opened and told
   by its members (``word/document.xml`` → DOCX, ``ppt/presentation.xml`` → PPTX,
   ``xl/workbook.xml`` → XLSX, ``mimetype`` ``application/epub+zip`` → EPUB).  Images,
   archives, executables, legacy Office and OpenDocument files are refused by name.
2. **Text sniffing.**  Bytes without NUL and with few control characters, in UTF-8 (a BOM
   allowed) or in an encoding charset-normalizer detects, are text.  Which text:
   HTML when it starts like an HTML document or declares ``<html>``/``<head>``/``<body>``;
   else the extension's kind when it names a text kind (``.md``, ``.csv``, ``.tsv``,
   ``.html``, ``.txt``); else Markdown when its structure says so (ATX headings, fenced
   code, or several kinds of Markdown markup); else CSV or TSV when at least five rows share
   one delimiter and two or more fields; else plain text.
3. Anything else is refused with what was detected (binary data of an unknown format).
   Text that is damaged UTF-8, or in no encoding that fits, is detected as text without an
   encoding; decoding it then fails naming the first bad byte.

A file whose extension names one kind and whose content is another (a ``.txt`` that is a
PDF, a ``.pdf`` that is text, a ``.docx`` that is HTML) is taken for what its content is.
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass

from .decoding import (
    APPLICATION_PDF,
    TEXT_CSV,
    TEXT_HTML,
    TEXT_MARKDOWN,
    TEXT_PLAIN,
    TEXT_TSV,
    UnknownKind,
    supported_text,
)

__all__ = ["Detection", "detect", "text_kind", "looks_like_markdown", "table_kind"]

#: Bytes of the head looked at for magic numbers and structure.
HEAD_BYTES = 64 * 1024
#: Rows that must share a delimiter for extension-less text to be taken for CSV/TSV.
MIN_TABLE_ROWS = 5

#: Magic bytes of common formats that are not decoded, so the error can name what was sent.
FOREIGN_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"RIFF", "a RIFF file (WebP image, WAV audio or AVI video)"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"BZh", "a bzip2 archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"\x28\xb5\x2f\xfd", "a zstd archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "a legacy Microsoft Office file (.doc/.xls/.ppt); save it as DOCX, "
                                          "XLSX or PPTX to load it"),
    (b"\x7fELF", "an ELF executable"),
    (b"MZ", "a Windows executable"),
    (b"{\\rtf", "an RTF document; save it as DOCX to load it"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"OggS", "an Ogg audio or video file"),
    (b"fLaC", "FLAC audio"),
    (b"ID3", "MP3 audio"),
)
_ISO_MEDIA = (b"ftypisom", b"ftypmp4", b"ftypM4A", b"ftypqt", b"ftypheic", b"ftypavif")
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")

_EXTENSION_HINTS = {
    ".txt": TEXT_PLAIN, ".text": TEXT_PLAIN, ".md": TEXT_MARKDOWN, ".markdown": TEXT_MARKDOWN,
    ".html": TEXT_HTML, ".htm": TEXT_HTML, ".xhtml": TEXT_HTML, ".csv": TEXT_CSV, ".tsv": TEXT_TSV,
    ".tab": TEXT_TSV,
}

_HTML_START = re.compile(r"\A(?:\s|<!--.*?-->|<\?xml[^>]*>)*<(?:!doctype\s+html|html)[\s>]", re.I | re.S)
_HTML_TAGS = re.compile(r"<(?:html|head|body)[\s>]", re.I)
_MD_HEADING = re.compile(r"^#{1,6}[ \t]+\S", re.M)
_MD_FENCE = re.compile(r"^(?:```|~~~)", re.M)
_MD_MARKUP = {
    "list": re.compile(r"^[ \t]{0,3}(?:[-*+]|\d{1,9}[.)])[ \t]+\S", re.M),
    "link": re.compile(r"!?\[[^\]\n]+\]\([^)\s]+(?:\s+\"[^\"]*\")?\)"),
    "quote": re.compile(r"^[ \t]{0,3}>[ \t]?\S", re.M),
    "emphasis": re.compile(r"(\*\*|__)[^\s*_](?:[^\n]*?[^\s*_])?\1"),
    "code": re.compile(r"`[^`\n]+`"),
    "setext": re.compile(r"^\S[^\n]*\n(?:=+|-{3,})[ \t]*$", re.M),
}


@dataclass(frozen=True, slots=True)
class Detection:
    """The kind of a document and, for text, the encoding its bytes are in (``None`` otherwise)."""

    kind: str
    encoding: str | None = None


def detect(filename: str, content: bytes) -> Detection:
    """What ``content`` is (see the module docstring).

    :param filename: the file's name; its extension is a hint for text kinds and names it in errors.
    :param content: the document's bytes (not empty).
    :raises UnknownKind: naming what was detected, when it cannot be ingested.
    """
    from .formats.containers import zip_kind
    from .formats.text import bom_encoding, control_ratio, detect_encoding

    name = filename or "the document"
    head = content[:HEAD_BYTES]
    if head.lstrip()[:5] == b"%PDF-":
        return Detection(APPLICATION_PDF)
    if head.startswith(_ZIP_MAGIC):
        kind, what = zip_kind(content)
        if kind is None:
            raise _unsupported(name, what)
        return Detection(kind)
    for magic, what in FOREIGN_MAGIC:
        if head.startswith(magic):
            raise _unsupported(name, what)
    if head[4:12].startswith(_ISO_MEDIA):
        raise _unsupported(name, "an MP4/QuickTime/HEIF media file")
    encoding = bom_encoding(content)
    if encoding is None:
        if b"\x00" in head or control_ratio(head) > 0.05:
            raise _unsupported(name, "binary data of an unknown format (not text: it holds NUL or control bytes)")
        # None: damaged UTF-8 or no encoding fits; decoding the text then names the bad byte
        encoding = detect_encoding(content)
    text = content[:HEAD_BYTES].decode(encoding or "utf-8", errors="ignore")
    return Detection(text_kind(text, os.path.splitext(filename or "")[1].lower()), encoding)


def text_kind(text: str, extension: str = "") -> str:
    """The kind of a text (the head of it will do): HTML, the extension's text kind, Markdown, CSV/TSV or plain."""
    if _HTML_START.match(text) or (extension not in (".md", ".markdown", ".txt", ".text", ".csv", ".tsv")
                                   and _HTML_TAGS.search(text[:4096])):
        return TEXT_HTML
    hinted = _EXTENSION_HINTS.get(extension)
    if hinted is not None and hinted != TEXT_HTML:
        return hinted
    if hinted == TEXT_HTML and text.lstrip().startswith("<"):
        return TEXT_HTML
    if looks_like_markdown(text):
        return TEXT_MARKDOWN
    table = table_kind(text)
    return table or TEXT_PLAIN


def looks_like_markdown(text: str) -> bool:
    """Markdown by its structure: a heading on the first line, two headings, fenced code, or two kinds of markup."""
    first = text.lstrip("\ufeff \t\n").split("\n", 1)[0]
    if _MD_HEADING.match(first) or len(_MD_HEADING.findall(text, 0, HEAD_BYTES)) >= 2 or _MD_FENCE.search(text):
        return True
    kinds = sum(1 for pattern in _MD_MARKUP.values() if pattern.search(text, 0, HEAD_BYTES))
    return kinds + bool(_MD_HEADING.search(text)) >= 2


def table_kind(text: str) -> str | None:
    """CSV or TSV when the first rows (at least :data:`MIN_TABLE_ROWS`) share a delimiter and 2+ fields each."""
    from .formats.tables import sniff_delimiter

    lines = [line for line in text.splitlines()[:50] if line.strip()]
    if len(lines) < MIN_TABLE_ROWS:
        return None
    sample = "\n".join(lines[:-1] if len(text) >= HEAD_BYTES else lines)  # the last line may be cut
    delimiter = sniff_delimiter(sample)
    if delimiter is None:
        return None
    try:
        widths = {len(row) for row in csv.reader(io.StringIO(sample), delimiter=delimiter)}
    except csv.Error:
        return None
    if len(widths) != 1 or widths.pop() < 2:
        return None
    return TEXT_TSV if delimiter == "\t" else TEXT_CSV


def _unsupported(name: str, what: str) -> UnknownKind:
    return UnknownKind(f"unsupported file type: {name} is {what}, detected from its content; "
                       f"supported are {supported_text()}")

