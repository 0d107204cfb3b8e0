"""Pages from a sequence of text blocks: a new page at each top-level heading.

Web pages, Word documents and e-book chapters have no fixed pages; their natural unit is
the section.  A section starts at a top-level heading (``h1``/``h2``, Title / Heading 1 /
Heading 2) and holds the blocks up to the next one; text before the first heading is a
section of its own.  The label names the section by its heading, so a source chain reads
``Chunk 0 → Section 2: Radium → …``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..decoding import DecodedPage

#: Characters of a heading kept in a page label.
LABEL_CHARS = 80

_SPACE = re.compile(r"[ \t\r\f\v\u00a0]+")


@dataclass(frozen=True, slots=True)
class Block:
    """A paragraph-like piece of text; ``heading`` marks a top-level heading that starts a section."""

    text: str
    heading: bool = False


def clean(text: str) -> str:
    """Runs of spaces (and non-breaking spaces) as one space, each line stripped."""
    return "\n".join(_SPACE.sub(" ", line).strip() for line in text.splitlines()).strip()


def heading_label(unit: str, number: int, heading: str) -> str:
    """``Section 2: Radium`` (the heading cut to :data:`LABEL_CHARS`), or ``Section 2`` without one."""
    heading = " ".join(heading.split())
    if len(heading) > LABEL_CHARS:
        heading = heading[:LABEL_CHARS - 1].rstrip() + "…"
    return f"{unit} {number}: {heading}" if heading else f"{unit} {number}"


def pages_from_blocks(blocks: Iterable[Block], unit: str = "Section") -> list[DecodedPage]:
    """Group blocks into sections (see the module docstring); sections without text are left out."""
    sections: list[tuple[str, list[str]]] = []
    for block in blocks:
        text = clean(block.text)
        if block.heading and text:
            sections.append((text, [text]))
        elif text:
            if not sections:
                sections.append(("", []))
            sections[-1][1].append(text)
    pages: list[DecodedPage] = []
    for heading, texts in sections:
        if texts:
            number = len(pages) + 1
            pages.append(DecodedPage(number, "\n\n".join(texts), heading_label(unit, number, heading)))
    return pages
