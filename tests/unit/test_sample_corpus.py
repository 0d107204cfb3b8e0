"""The shipped sample corpus: documents decode, the PDF is real and deterministic, questions are answerable."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from trustgraph_flow.ingest import decode_document, detect_kind
from trustgraph_flow.ingest.sample_corpus import (
    DOC_BASE,
    QUESTION_KINDS,
    QUICKSTART_QUESTION,
    render_pdf,
    sample_documents,
    sample_questions,
    source_text,
)

pytestmark = pytest.mark.unit


def decoded_text(document) -> str:
    return "\n".join(page.text for page in decode_document(document.content, document.kind, document.filename))


def words(text: str) -> list[str]:
    return re.findall(r"\w+(?:[-']\w+)*", text)


def test_five_documents_with_iri_ids_and_all_three_kinds():
    documents = sample_documents()
    assert len(documents) == 5
    assert len({d.id for d in documents}) == 5
    assert all(re.fullmatch(re.escape(DOC_BASE) + r"[a-z0-9-]+", d.id) for d in documents)
    assert {d.kind for d in documents} == {"text/plain", "text/markdown", "application/pdf"}
    assert all(d.title and d.filename for d in documents)


def test_each_filename_and_content_detect_as_the_declared_kind():
    for document in sample_documents():
        assert detect_kind(document.filename, document.content) == document.kind


def test_every_document_decodes_and_is_a_few_pages_long():
    for document in sample_documents():
        text = decoded_text(document)
        assert 800 <= len(words(text)) <= 1500, (document.id, len(words(text)))


def test_the_pdf_has_several_pages_with_text_on_each():
    pdf = next(d for d in sample_documents() if d.kind == "application/pdf")
    assert pdf.content.startswith(b"%PDF-")
    pages = decode_document(pdf.content, pdf.kind, pdf.filename)
    assert len(pages) >= 3
    assert [p.page_number for p in pages] == list(range(1, len(pages) + 1))
    assert all(p.text.strip() for p in pages)


def test_the_pdf_holds_exactly_the_words_of_its_source_text():
    pdf = next(d for d in sample_documents() if d.kind == "application/pdf")
    slug = pdf.id.removeprefix(DOC_BASE)
    assert words(decoded_text(pdf)) == words(source_text(slug))


def test_the_pdf_is_generated_deterministically():
    pdf = next(d for d in sample_documents() if d.kind == "application/pdf")
    slug = pdf.id.removeprefix(DOC_BASE)
    assert render_pdf(pdf.title, source_text(slug)) == pdf.content
    assert render_pdf(pdf.title, source_text(slug)) == render_pdf(pdf.title, source_text(slug))


def test_no_binary_pdf_is_shipped():
    package = resources.files("trustgraph_flow.ingest.sample_corpus")
    assert not [entry.name for entry in package.iterdir() if entry.name.lower().endswith(".pdf")]


def test_text_documents_are_their_source_files():
    for document in sample_documents():
        if document.kind != "application/pdf":
            assert document.content.decode("utf-8") == source_text(document.id.removeprefix(DOC_BASE))


def test_questions_are_well_formed():
    questions = sample_questions()
    assert 10 <= len(questions) <= 20
    assert {q.kind for q in questions} == set(QUESTION_KINDS)
    assert len({q.question for q in questions}) == len(questions)
    assert all(q.question.endswith("?") and q.expected for q in questions)


def test_every_expected_answer_appears_in_the_corpus_text():
    corpus = "\n".join(decoded_text(d) for d in sample_documents()).casefold()
    for question in sample_questions():
        for expected in question.expected:
            assert expected.casefold() in corpus, (question.question, expected)


def test_quickstart_question_is_a_graph_question_of_the_list():
    matches = [q for q in sample_questions() if q.question == QUICKSTART_QUESTION]
    assert len(matches) == 1 and matches[0].kind == "graph"


def test_unknown_slug():
    with pytest.raises(KeyError):
        source_text("no-such-document")
