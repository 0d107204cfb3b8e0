"""Spreadsheets and delimited text: XLSX (one page per worksheet, with openpyxl), CSV and TSV (one page).

Each row becomes one line, its non-empty cells separated by `` | ``, so a row reads as one
statement to the extractor and a chunk never cuts a row in two unless the row is longer than
a chunk.  Formulas give their cached values; dates are ISO 8601; whole numbers drop ``.0``.
"""

from __future__ import annotations

import csv
import datetime
import io
from collections.abc import Iterable

from ..decoding import KIND_NAMES, XLSX, BrokenDocument, DecodedPage, EmptyDocument
from .containers import open_zip
from .text import text_of

#: Separator of the cells of a row.
CELL_SEPARATOR = " | "


def decode_xlsx(content: bytes, name: str, encoding: str | None = None) -> list[DecodedPage]:
    """One page per worksheet, labelled ``Sheet: <name>``."""
    from openpyxl import load_workbook
    from openpyxl.utils.exceptions import InvalidFileException

    open_zip(content, name, f"{KIND_NAMES[XLSX]} file").close()
    try:
        workbook = load_workbook(io.BytesIO(content), read_only=True, data_only=True)
        try:
            pages = [DecodedPage(number, "\n".join(rows_text(sheet.iter_rows(values_only=True))),
                                 f"Sheet: {sheet.title}")
                     for number, sheet in enumerate(workbook.worksheets, 1)]
        finally:
            workbook.close()
    except (InvalidFileException, KeyError, ValueError, AttributeError, TypeError, IndexError, OSError) as exc:
        raise BrokenDocument(f"{name} is a damaged {KIND_NAMES[XLSX]} file: {type(exc).__name__}: {exc}") from None
    if not pages:
        raise BrokenDocument(f"{name} is a workbook without worksheets")
    return pages


def decode_csv(content: bytes, name: str, encoding: str | None = None) -> list[DecodedPage]:
    """The rows of a CSV file (its delimiter sniffed: comma, semicolon, tab or pipe)."""
    return _delimited(content, name, encoding, None)


def decode_tsv(content: bytes, name: str, encoding: str | None = None) -> list[DecodedPage]:
    """The rows of a tab-separated file."""
    return _delimited(content, name, encoding, "\t")


def sniff_delimiter(sample: str) -> str | None:
    """The delimiter :class:`csv.Sniffer` finds among ``, ; \\t |``, or ``None``."""
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return None


def _delimited(content: bytes, name: str, encoding: str | None, delimiter: str | None) -> list[DecodedPage]:
    text = text_of(content, name, encoding)
    delimiter = delimiter or sniff_delimiter(text[:64 * 1024]) or ","
    try:
        lines = rows_text(csv.reader(io.StringIO(text), delimiter=delimiter))
    except csv.Error as exc:
        raise BrokenDocument(f"{name} is not readable as delimited text: {exc}") from None
    if not lines:
        raise EmptyDocument(f"{name} holds no rows with text")
    return [DecodedPage(1, "\n".join(lines))]


def rows_text(rows: Iterable[Iterable]) -> list[str]:
    """One line per row with any text; cells with text joined by :data:`CELL_SEPARATOR`."""
    lines = []
    for row in rows:
        cells = [_cell_text(v) for v in row]
        cells = [c for c in cells if c]
        if cells:
            lines.append(CELL_SEPARATOR.join(cells))
    return lines


def _cell_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    return " ".join(str(value).split())
