"""Word (DOCX): paragraphs and tables in document order, with python-docx; a page per section.

A section starts at a paragraph styled Title, Heading 1 or Heading 2 (:mod:`.sections`).
Table rows become lines of cells separated by ``|``.  Headers and footers are boilerplate
and left out.
"""

from __future__ import annotations

import io

from ..decoding import DOCX, KIND_NAMES, BrokenDocument, DecodedPage, EmptyDocument
from .containers import open_zip
from .sections import Block, pages_from_blocks

#: Paragraph styles that start a section.
SECTION_STYLES = frozenset({"title", "heading 1", "heading 2"})


def decode_docx(content: bytes, name: str, encoding: str | None = None) -> list[DecodedPage]:
    """Sections of a Word document."""
    import docx
    from docx.opc.exceptions import OpcError
    from docx.table import Table

    open_zip(content, name, f"{KIND_NAMES[DOCX]} file").close()
    try:
        document = docx.Document(io.BytesIO(content))
        blocks = []
        for item in document.iter_inner_content():
            if isinstance(item, Table):
                blocks += [Block(row) for row in table_rows(item)]
            else:
                style = (item.style.name if item.style is not None else "").lower()
                blocks.append(Block(item.text, heading=style in SECTION_STYLES))
    except (OpcError, KeyError, ValueError, AttributeError, TypeError, IndexError, OSError) as exc:
        raise BrokenDocument(f"{name} is a damaged {KIND_NAMES[DOCX]} file: {type(exc).__name__}: {exc}") from None
    pages = pages_from_blocks(blocks)
    if not pages:
        raise EmptyDocument(f"{name} is a Word document without text")
    return pages


def table_rows(table) -> list[str]:
    """Each row of a python-docx or python-pptx table as ``cell | cell | …`` (empty rows left out)."""
    rows = []
    for row in table.rows:
        cells = [" ".join(cell.text.split()) for cell in row.cells]
        # merged cells repeat their text in every grid cell they span
        cells = [c for i, c in enumerate(cells) if i == 0 or c != cells[i - 1]]
        if any(cells):
            rows.append(" | ".join(cells))
    return rows

