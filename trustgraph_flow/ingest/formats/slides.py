"""PowerPoint (PPTX): one page per slide with python-pptx, labelled ``Slide 3: <its title>``.

A slide's text is its title, then the text of every shape in reading order (groups
included, tables as ``cell | cell`` rows), then its speaker notes.  Slides without text keep
their page (with no text), so page numbers are slide numbers.
"""

from __future__ import annotations

import io

from ..decoding import KIND_NAMES, PPTX, BrokenDocument, DecodedPage
from .containers import open_zip
from .sections import clean, heading_label
from .word import table_rows


def decode_pptx(content: bytes, name: str, encoding: str | None = None) -> list[DecodedPage]:
    """One page per slide."""
    from pptx import Presentation
    from pptx.exc import PythonPptxError

    open_zip(content, name, f"{KIND_NAMES[PPTX]} file").close()
    try:
        deck = Presentation(io.BytesIO(content))
        pages = []
        for number, slide in enumerate(deck.slides, 1):
            title_shape = slide.shapes.title
            title = clean(title_shape.text_frame.text) if title_shape is not None and title_shape.has_text_frame \
                else ""
            texts = [title] if title else []
            title_id = title_shape.shape_id if title_shape is not None else None
            for shape in slide.shapes:
                if shape.shape_id != title_id:
                    texts += _shape_texts(shape)
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
                notes = clean(slide.notes_slide.notes_text_frame.text)
                if notes:
                    texts.append(f"Notes: {notes}")
            pages.append(DecodedPage(number, "\n\n".join(t for t in texts if t), heading_label("Slide", number, title)))
    except (PythonPptxError, KeyError, ValueError, AttributeError, TypeError, IndexError, OSError) as exc:
        raise BrokenDocument(f"{name} is a damaged {KIND_NAMES[PPTX]} file: {type(exc).__name__}: {exc}") from None
    if not pages:
        raise BrokenDocument(f"{name} is a presentation without slides")
    return pages


def _shape_texts(shape) -> list[str]:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        return [t for child in shape.shapes for t in _shape_texts(child)]
    if getattr(shape, "has_table", False) and shape.has_table:
        return ["\n".join(table_rows(shape.table))]
    if shape.has_text_frame:
        text = clean(shape.text_frame.text)
        return [text] if text else []
    return []
