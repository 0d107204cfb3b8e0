"""Answers composed only from what retrieval selected: graph edges or document chunks.

The graph answer groups the selected edges by subject into plain sentences; the document
answer quotes the best-matching sentences of the retrieved chunks with their ids. Neither
adds a fact that is not in its input: only connective words ("and", ";") and a lead-in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import content_terms, cosine, idf, idf_table

NO_GRAPH_ANSWER = "No relevant information was found in the knowledge graph."
NO_DOCUMENT_ANSWER = "No relevant information was found in the documents."
NO_MATCHING_SENTENCE = "The retrieved documents contain no sentence that matches the question."

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s+[\"'(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset("dr mr mrs ms prof st mt jr sr vs etc fig no vol ed eds approx ca cf".split())


def humanise_predicate(label: str) -> str:
    """Readable relation phrase: ``married_to`` / ``marriedTo`` / ``married-to`` -> ``married to``.

    Labels that already contain spaces are kept as they are.

    :param label: a predicate label.
    """
    text = label.strip()
    if " " in text:
        return " ".join(text.split())
    text = _CAMEL.sub(" ", text).replace("_", " ").replace("-", " ")
    return " ".join(text.split()).lower()


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def compose_graph_answer(query: str, knowledge: Sequence[Mapping[str, str]]) -> str:
    """An answer built only from the selected edges, grouped by subject in selection order.

    :param query: the question (not echoed; kept for interface symmetry and future use).
    :param knowledge: selected edges ``{"s", "p", "o", ...}`` with labels, most relevant first.
    :returns: e.g. "According to the knowledge graph: Marie Curie discovered polonium and
        radium; married to Pierre Curie. Pierre Curie worked at University of Paris."
    """
    del query
    subjects: dict[str, dict[str, list[str]]] = {}
    for edge in knowledge:
        subject, predicate, obj = edge["s"].strip(), humanise_predicate(edge["p"]), edge["o"].strip()
        if not subject or not obj:
            continue
        objects = subjects.setdefault(subject, {}).setdefault(predicate, [])
        if obj not in objects:
            objects.append(obj)
    if not subjects:
        return NO_GRAPH_ANSWER
    sentences = []
    for subject, predicates in subjects.items():
        clauses = [f"{predicate} {_join(objects)}".strip() for predicate, objects in predicates.items()]
        sentences.append(f"{subject} {'; '.join(clauses)}.")
    return "According to the knowledge graph: " + " ".join(sentences)


@dataclass(frozen=True)
class QuotedSentence:
    """A sentence chosen for the document answer, with where it came from and why."""

    text: str
    document_id: str
    score: float


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (paragraph breaks and sentence punctuation), whitespace-normalised.

    A full stop after a common abbreviation ("Dr.", "St.") or a single initial ("M.") does
    not end a sentence.

    :param text: a chunk of prose.
    """
    sentences = []
    for paragraph in re.split(r"\n\s*\n|\n(?=\s*[-*#])", text):
        start = 0
        for match in _SENTENCE_END.finditer(paragraph):
            before = paragraph[start : match.start()].split()
            last = before[-1].lower().strip("(\"'") if before else ""
            if paragraph[match.start()] == "." and (last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())):
                continue
            sentences.append(paragraph[start : match.end()])
            start = match.end()
        sentences.append(paragraph[start:])
    return [" ".join(s.split()) for s in sentences if s.strip()]


_ANAPHORS = frozenset("he him his she her hers it its they them their theirs this these that those".split())


def _has_anaphor(sentence: str, first_words: int | None = None) -> bool:
    tokens = [t.strip(".,;:!?\"'()[]").lower() for t in sentence.split()]
    return any(t in _ANAPHORS for t in tokens[:first_words])


@dataclass(frozen=True)
class _Candidate:
    doc_index: int
    sentence_index: int
    paragraph: int
    text: str
    doc_id: str
    stems: frozenset[str]
    chunk_weight: float


@dataclass(slots=True)
class _Ranked:
    score: float
    lexical: float
    candidate: _Candidate

    def order(self) -> tuple[float, int, int]:
        """Best score first; ties in document order, then sentence order."""
        return -self.score, self.candidate.doc_index, self.candidate.sentence_index


def _candidates(documents: Sequence[Mapping[str, Any]]) -> list[_Candidate]:
    scores = [float(d.get("score") or 0.0) for d in documents]
    best_chunk = max(scores, default=0.0) or 1.0
    found = []
    for d_index, doc in enumerate(documents):
        doc_id = str(doc.get("id") or f"doc-{d_index}")
        s_index = 0
        for p_index, paragraph in enumerate(re.split(r"\n\s*\n|\n(?=\s*[-*#])", doc["text"])):
            if paragraph.lstrip().startswith("#"):
                continue  # a heading is not a statement
            for sentence in split_sentences(paragraph):
                stems = frozenset(t for _, t in content_terms(sentence))
                found.append(_Candidate(d_index, s_index, p_index, sentence, doc_id, stems,
                                        scores[d_index] / best_chunk))
                s_index += 1
    return found


def rank_sentences(
    query: str,
    documents: Sequence[Mapping[str, Any]],
    *,
    embedder: Any = None,
    rerank: int = 8,
) -> list[QuotedSentence]:
    """Sentences of the documents ranked by IDF-weighted overlap with the question plus chunk score.

    With an embedder, the ``rerank`` best candidates are re-scored with their cosine to
    the question. Only sentences sharing a content word with the question (or, with an
    embedder, having cosine >= 0.35) are returned; near-duplicates (the same sentence in
    two overlapping chunks) are kept once. Ties: document order, then sentence order.

    :param query: the question.
    :param documents: chunks ``{"id", "text", "score"}``.
    :param embedder: optional Embedder for re-ranking.
    :param rerank: number of candidates re-scored by embedding.
    """
    question: dict[str, str] = {}
    for word, term in content_terms(query):
        question.setdefault(term, word)
    candidates = _candidates(documents)
    if not candidates:
        return []
    frequencies, count = idf_table(c.stems for c in candidates)
    weights = {t: idf(t, frequencies, count) for t in question}
    total = sum(weights.values()) or 1.0
    ranked = []
    for c in candidates:
        lexical = sum(w for t, w in weights.items() if t in c.stems) / total
        ranked.append(_Ranked(0.7 * lexical + 0.3 * c.chunk_weight, lexical, c))
    ranked.sort(key=_Ranked.order)
    if embedder is not None:
        head = ranked[:rerank]
        vectors = embedder.embed([query] + [r.candidate.text for r in head])
        for row, vector in zip(head, vectors[1:], strict=True):
            similarity = cosine(vectors[0], vector)
            row.score = 0.5 * row.score + 0.5 * similarity
            row.lexical = max(row.lexical, similarity if similarity >= 0.35 else 0.0)
        ranked = sorted(head, key=_Ranked.order) + ranked[rerank:]
    quoted: list[QuotedSentence] = []
    for r in ranked:
        c = r.candidate
        if r.lexical <= 0:
            continue
        if any(c.text in q.text or q.text in c.text for q in quoted):
            continue
        quoted.append(QuotedSentence(text=c.text, document_id=c.doc_id, score=round(r.score, 6)))
    return quoted


def _in_context(quote: QuotedSentence, documents: Sequence[Mapping[str, Any]]) -> str:
    """The quote, preceded or followed by its neighbour sentence when a pronoun links them."""
    by_doc = [c for c in _candidates(documents) if c.doc_id == quote.document_id]
    for index, c in enumerate(by_doc):
        if c.text != quote.text:
            continue
        text = c.text
        previous = by_doc[index - 1] if index > 0 else None
        following = by_doc[index + 1] if index + 1 < len(by_doc) else None
        if previous is not None and previous.paragraph == c.paragraph and _has_anaphor(c.text, 5):
            text = f"{previous.text} {text}"
        if following is not None and following.paragraph == c.paragraph and _has_anaphor(following.text):
            text = f"{text} {following.text}"
        return text
    return quote.text


def compose_document_answer(
    query: str,
    documents: Sequence[Mapping[str, Any]],
    *,
    embedder: Any = None,
    max_sentences: int = 3,
) -> str:
    """Quote the sentences of the retrieved chunks that best match the question, with chunk ids.

    A quoted sentence comes with its neighbour in the same paragraph when a pronoun ties
    them ("A horse-drawn wagon struck him ..."); everything quoted is verbatim text of
    the chunk named after it.

    :param query: the question.
    :param documents: chunks ``{"id", "text", "score"}``.
    :param embedder: optional Embedder to re-rank the best candidate sentences.
    :param max_sentences: number of sentences chosen (each possibly with one neighbour).
    :returns: e.g. 'According to the documents:\n- "Marie Curie discovered polonium in 1898." [chunk-2]'
    """
    if not any(str(doc.get("text", "")).strip() for doc in documents):
        return NO_DOCUMENT_ANSWER
    quoted = rank_sentences(query, documents, embedder=embedder)[:max_sentences]
    if not quoted:
        return NO_MATCHING_SENTENCE
    passages: list[tuple[str, str]] = []
    for quote in quoted:
        passage = _in_context(quote, documents)
        if any(passage in text for text, _ in passages):
            continue
        passages = [(t, d) for t, d in passages if t not in passage]
        passages.append((passage, quote.document_id))
    lines = [f'- "{text}" [{doc_id}]' for text, doc_id in passages]
    return "According to the documents:\n" + "\n".join(lines)
