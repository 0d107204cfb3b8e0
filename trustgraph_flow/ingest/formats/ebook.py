"""EPUB: one page per chapter (document of the reading order) with EbookLib, labelled ``Chapter 2: <heading>``.

The chapter's XHTML is read like a web page's main content (:func:`.webpage.html_blocks`),
and its first heading names it.  Documents of the reading order without text (a cover
image, the table of contents) are left out, so chapters are numbered as a reader sees them.
"""

from __future__ import annotations

import io
import warnings

from ..decoding import EPUB, KIND_NAMES, BrokenDocument, DecodedPage, EmptyDocument
from .containers import open_zip
from .sections import clean, heading_label
from .webpage import html_blocks


def decode_epub(content: bytes, name: str, encoding: str | None = None) -> list[DecodedPage]:
    """One page per chapter with text."""
    import ebooklib
    from ebooklib import epub
    from lxml.etree import LxmlError

    open_zip(content, name, f"{KIND_NAMES[EPUB]} file").close()
    pages: list[DecodedPage] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # EbookLib warns about options it is about to change
            book = epub.read_epub(io.BytesIO(content), {"ignore_ncx": True})
        for idref, *_linear in book.spine:
            item = book.get_item_with_id(idref)
            if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT or isinstance(item, epub.EpubNav):
                continue
            blocks = html_blocks(item.get_content())
            texts = [clean(b.text) for b in blocks if clean(b.text)]
            if not texts:
                continue
            heading = next((clean(b.text) for b in blocks if b.heading and clean(b.text)), "")
            number = len(pages) + 1
            pages.append(DecodedPage(number, "\n\n".join(texts), heading_label("Chapter", number, heading)))
    except (epub.EpubException, LxmlError, KeyError, ValueError, AttributeError, TypeError, IndexError,
            OSError) as exc:
        raise BrokenDocument(f"{name} is a damaged {KIND_NAMES[EPUB]} file: {type(exc).__name__}: {exc}") from None
    if not pages:
        raise EmptyDocument(f"{name} is an e-book without text")
    return pages
