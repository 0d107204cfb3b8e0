"""HTML: the page's main content, without navigation, headers, footers and other boilerplate.

readability-lxml finds the main content (the algorithm of Firefox's reader view); Beautiful
Soup turns it into paragraph-like blocks, and each ``h1``/``h2`` starts a section page
(:mod:`.sections`).  When readability finds nothing, the whole ``<body>`` less its
``nav``/``header``/``footer``/``aside`` elements, scripts and styles is used instead.
"""

from __future__ import annotations

import logging

from ..decoding import BrokenDocument, DecodedPage, EmptyDocument
from .sections import Block, pages_from_blocks
from .text import text_of

#: Elements inside a sentence: their text joins the text around them (every other element is a block).
INLINE_TAGS = frozenset({"a", "abbr", "acronym", "b", "bdi", "bdo", "big", "cite", "code", "data", "del", "dfn", "em",
                         "font", "i", "ins", "kbd", "label", "mark", "q", "s", "samp", "small", "span", "strike",
                         "strong", "sub", "sup", "time", "tt", "u", "var", "wbr", "img"})
#: Headings that start a new section page.
TOP_HEADINGS = frozenset({"h1", "h2"})
#: Never content.
DROPPED_TAGS = ("script", "style", "noscript", "template", "svg", "iframe", "object", "head")
BOILERPLATE_TAGS = ("nav", "header", "footer", "aside", "form")

# readability logs every candidate it scores at INFO/DEBUG
logging.getLogger("readability.readability").setLevel(logging.WARNING)


def decode_html(content: bytes, name: str, encoding: str | None = None) -> list[DecodedPage]:
    """Sections of the page's main content (see the module docstring)."""
    html = text_of(content, name, encoding)
    pages = pages_from_blocks(html_blocks(main_content(html, name)))
    if not pages:
        raise EmptyDocument(f"{name} is an HTML page without text")
    return pages


def main_content(html: str, name: str) -> str:
    """The markup of the main content (readability), or of the whole page when it finds none."""
    from lxml.etree import LxmlError
    from readability import Document
    from readability.readability import Unparseable

    try:
        summary = Document(html).summary(html_partial=True)
    except (Unparseable, LxmlError, ValueError) as exc:
        if not html.strip():
            raise EmptyDocument(f"{name} is an empty HTML page") from None
        raise BrokenDocument(f"{name} is an HTML page that cannot be parsed: {exc}") from None
    if html_blocks(summary):
        return summary
    return _without_boilerplate(html)


def _without_boilerplate(html: str) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "lxml")
    for tag in soup.find_all([*DROPPED_TAGS, *BOILERPLATE_TAGS]):
        tag.decompose()
    return str(soup.body or soup)


def html_blocks(markup: str | bytes) -> list[Block]:
    """Paragraph-like blocks of ``markup`` in document order; ``h1``/``h2`` are section headings.

    Text directly inside a block element is one block (inline markup such as links and
    emphasis stays inside its sentence); nested block elements make blocks of their own.
    """
    from bs4 import BeautifulSoup, NavigableString, Tag
    from bs4.element import Comment, Declaration, Doctype, ProcessingInstruction

    soup = BeautifulSoup(markup, "lxml")
    for tag in soup.find_all(DROPPED_TAGS):
        tag.decompose()
    blocks: list[Block] = []

    def walk(element: Tag) -> None:
        pending: list[str] = []

        def flush() -> None:
            text = " ".join("".join(pending).split())
            if text:
                blocks.append(Block(text, heading=element.name in TOP_HEADINGS))
            pending.clear()

        for child in element.children:
            if isinstance(child, (Comment, Declaration, Doctype, ProcessingInstruction)):
                continue
            if isinstance(child, NavigableString):
                pending.append(str(child))
            elif isinstance(child, Tag) and child.name == "tr":
                flush()
                row = [" ".join(cell.get_text(" ").split()) for cell in child.find_all(["td", "th"], recursive=False)]
                if any(row):
                    blocks.append(Block(" | ".join(row)))
            elif isinstance(child, Tag) and child.name == "br":
                pending.append("\n")
            elif isinstance(child, Tag) and child.name in INLINE_TAGS:
                pending.append(child.get_text())
            elif isinstance(child, Tag):
                flush()
                walk(child)
        flush()

    walk(soup)
    return blocks
