"""A small original corpus on the early history of radioactivity, for the quickstart and the tests.

Five documents written for this project (about 1,000 words each): Becquerel's discovery
(plain text), Marie and Pierre Curie (Markdown), Ernest Rutherford (a PDF generated at
load time with fpdf2 from ``rutherford.txt``, so no binary is committed), the Radium
Institute and the Joliot-Curies (Markdown) and the radioactive elements (plain text).
The prose is factual and mostly plain declarative sentences, so the deterministic
``pattern-extractor`` gets many correct edges from it.  ``questions.json`` holds questions
with the words a correct answer must mention.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources

from fpdf import FPDF

DOC_BASE = "https://trustgraph.ai/doc/"

#: A question GraphRAG answers well from the edges the pattern extractor finds in this corpus.
QUICKSTART_QUESTION = "Who discovered polonium?"

QUESTION_KINDS = ("graph", "document", "agent")

# Fixed metadata so the generated PDF is byte-for-byte the same on every load.
_PDF_DATE = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class SampleDocument:
    """One corpus document as the librarian would receive it."""

    id: str
    title: str
    kind: str
    filename: str
    content: bytes


@dataclass(frozen=True, slots=True)
class SampleQuestion:
    """A question, the service that should answer it, and words a correct answer mentions."""

    question: str
    kind: str
    expected: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Source:
    slug: str
    title: str
    kind: str
    source: str      # data file holding the text
    filename: str    # name the document is shipped under


_SOURCES = (
    _Source("becquerel-radioactivity", "Henri Becquerel and the Discovery of Radioactivity", "text/plain",
            "becquerel.txt", "becquerel.txt"),
    _Source("curies-polonium-radium", "Marie and Pierre Curie: Polonium and Radium", "text/markdown",
            "curies.md", "curies.md"),
    _Source("rutherford-nuclear-atom", "Ernest Rutherford and the Nuclear Atom", "application/pdf",
            "rutherford.txt", "rutherford.pdf"),
    _Source("radium-institute", "The Radium Institute and the Joliot-Curies", "text/markdown",
            "radium-institute.md", "radium-institute.md"),
    _Source("radioactive-elements", "The Radioactive Elements and Their Discoverers", "text/plain",
            "elements.txt", "elements.txt"),
)


def _read(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def source_text(slug: str) -> str:
    """The text a document was written as (for the PDF: the text it is rendered from).

    :param slug: the last part of the document id, e.g. ``"rutherford-nuclear-atom"``.
    :raises KeyError: for an unknown slug.
    """
    for src in _SOURCES:
        if src.slug == slug:
            return _read(src.source)
    raise KeyError(f"no sample document {slug!r}")


def render_pdf(title: str, text: str) -> bytes:
    """Render plain text as a deterministic A4 PDF: first line the title, short lines headings.

    :param title: document title, stored in the PDF metadata.
    :param text: paragraphs separated by blank lines; must be Latin-1 (core PDF fonts).
    :returns: the PDF bytes (identical for identical input).
    """
    pdf = FPDF(format="A4", unit="mm")
    pdf.set_creation_date(_PDF_DATE)
    pdf.set_title(title)
    pdf.set_author("TrustGraph sample corpus")
    pdf.set_producer("trustgraph-explain sample corpus")
    pdf.set_auto_page_break(auto=True, margin=20)
    pdf.set_margins(left=22, top=20, right=22)
    pdf.add_page()
    paragraphs = [p.strip() for p in text.strip().split("\n\n") if p.strip()]
    for index, paragraph in enumerate(paragraphs):
        paragraph = " ".join(paragraph.split())
        if index == 0:
            pdf.set_font("Helvetica", "B", 18)
            pdf.multi_cell(0, 9, paragraph, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(4)
        elif len(paragraph) < 70 and not paragraph.endswith("."):
            pdf.ln(2)
            pdf.set_font("Helvetica", "B", 14)
            pdf.multi_cell(0, 8, paragraph, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
        else:
            pdf.set_font("Helvetica", "", 12)
            pdf.multi_cell(0, 6.5, paragraph, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    return bytes(pdf.output())


@lru_cache(maxsize=1)
def _documents() -> tuple[SampleDocument, ...]:
    documents = []
    for src in _SOURCES:
        text = _read(src.source)
        if src.kind == "application/pdf":
            content = render_pdf(src.title, text)
        else:
            content = text.encode("utf-8")
        documents.append(SampleDocument(DOC_BASE + src.slug, src.title, src.kind, src.filename, content))
    return tuple(documents)


def sample_documents() -> list[SampleDocument]:
    """The corpus documents, in a fixed order, with their bytes as a user would upload them."""
    return list(_documents())


def sample_questions() -> list[SampleQuestion]:
    """The questions of ``questions.json``, validated.

    :raises ValueError: when the file has a malformed entry.
    """
    data = json.loads(_read("questions.json"))
    questions = []
    for number, entry in enumerate(data["questions"], 1):
        question, kind, expected = entry.get("question"), entry.get("kind"), entry.get("expected")
        if not isinstance(question, str) or not question.strip() or kind not in QUESTION_KINDS \
                or not isinstance(expected, list) or not expected \
                or not all(isinstance(e, str) and e.strip() for e in expected):
            raise ValueError(f"questions.json entry {number} is malformed: {entry!r}")
        questions.append(SampleQuestion(question, kind, list(expected)))
    return questions


__all__ = [
    "DOC_BASE", "QUESTION_KINDS", "QUICKSTART_QUESTION", "SampleDocument", "SampleQuestion", "render_pdf",
    "sample_documents", "sample_questions", "source_text",
]
