"""Deterministic GraphRAG edge selection with a reasoning that states the real basis.

Each candidate edge is scored from evidence that can be named:

* semantic: the cosine of the edge's subject or object entity to the question, as found by
  GraphRAG's entity vector search (``entity_scores``); edges are never embedded at query
  time, which keeps scoring cheap (``bench/README.md``);
* lexical: IDF-weighted share of the question's content words (casefolded, lightly stemmed,
  stop words removed, words of matched anchor names left out) found in the edge's labels;
* anchor: the edge touches an entity whose label appears in the question (a bonus);
* connection: when the question names entities, an edge one hop away from them (through
  an entity, not a date or number) keeps 0.6 of its score, so two-step questions ("Where
  did Marie Curie's husband work?") can still reach the second edge, and an edge connected
  to none of them keeps 0.4;
* predicate (optional, with an embedder): cosine of the predicate label to the question.

Edges above an absolute and a relative threshold are kept, best first, ties by id; the
reasoning lists the numbers, e.g. "cosine 0.71 to the question (via 'Marie Curie');
shares 'discovered'; touches anchor 'Marie Curie'; score 0.78".  The score and the concept the
edge was reached from (the anchor it touches, else the anchor one hop away, else the entity its
cosine came through) are also returned as data, for the trace's ``tg:score`` and ``tg:concept``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import content_terms, cosine, idf, idf_table, words

#: Weights of the evidence kinds in the score.
W_SEMANTIC = 0.35
W_LEXICAL = 0.45
W_ANCHOR = 0.15
W_PREDICATE = 0.15
#: When the question names entities: factor for edges one hop away from them ...
BRIDGE_FACTOR = 0.6
#: ... and for edges connected to none of them.
OFF_ANCHOR_FACTOR = 0.4
DEFAULT_LIMIT = 10
DEFAULT_THRESHOLD = 0.12
DEFAULT_RELATIVE = 0.5


@dataclass(frozen=True)
class SelectedEdge:
    """An edge chosen for synthesis: its id (from the input), score, stated basis and the concept (an anchor of
    the question, or a seed entity) it was reached from (``""``: it matched by its words alone)."""

    id: str
    score: float
    reasoning: str
    concept: str = ""

    def as_object(self) -> dict:
        """The JSONL object the kg-edge-selection prompt answers with."""
        out = {"id": self.id, "reasoning": self.reasoning, "score": self.score}
        if self.concept:
            out["concept"] = self.concept
        return out


def _find_anchors(question_words: str, labels: set[str]) -> set[str]:
    """Entity labels that occur in the question as whole words (at least 3 characters)."""
    anchors = set()
    for label in labels:
        needle = " ".join(words(label))
        if len(needle) >= 3 and f" {needle} " in question_words:
            anchors.add(label)
    return anchors


@dataclass(frozen=True)
class ScoredEdge:
    """One candidate edge with the evidence the selector found for it (score 0: none)."""

    id: str
    score: float
    reasoning: str
    concept: str = ""


def score_edges(
    query: str,
    edges: Sequence[Mapping[str, str]],
    entity_scores: Mapping[str, float] | None = None,
    *,
    embedder: Any = None,
    embed_predicates: bool = False,
) -> list[ScoredEdge]:
    """Score every candidate edge for ``query``, best first, ties broken by id (edges with no evidence last).

    :param query: the user's question.
    :param edges: candidates ``{"id", "s", "p", "o"}`` with labels (ids are returned verbatim).
    :param entity_scores: ``{entity label: cosine to the question}`` from the entity vector search.
    :param embedder: optional Embedder, used only when ``embed_predicates`` is set.
    :param embed_predicates: also score the cosine of each distinct predicate label to the question.
    """
    if not edges:
        return []
    scores = {str(k).casefold(): float(v) for k, v in (entity_scores or {}).items()}

    # Question terms and label terms (labels repeat a lot: tokenise each once).
    question_terms = content_terms(query)
    question_stems: dict[str, str] = {}
    for word, term in question_terms:
        question_stems.setdefault(term, word)
    label_cache: dict[str, set[str]] = {}

    def label_stems(label: str) -> set[str]:
        cached = label_cache.get(label)
        if cached is None:
            cached = label_cache[label] = {t for _, t in content_terms(label)}
        return cached

    question_words = f" {' '.join(words(query))} "
    entities = {e["s"] for e in edges} | {e["o"] for e in edges}
    anchors = _find_anchors(question_words, entities)
    # Words that only name an anchor are already counted by the anchor bonus.
    for anchor in anchors:
        for term in label_stems(anchor):
            question_stems.pop(term, None)

    edge_stems = [label_stems(e["s"]) | label_stems(e["p"]) | label_stems(e["o"]) for e in edges]
    frequencies, count = idf_table(edge_stems)
    weights = {term: idf(term, frequencies, count) for term in question_stems}
    total_weight = sum(weights.values())
    neighbours: dict[str, str] = {}  # neighbour label -> the anchor it is next to
    for edge in sorted(edges, key=lambda e: e["id"]):
        for here, there in ((edge["s"], edge["o"]), (edge["o"], edge["s"])):
            # Dates and numbers are values, not entities to walk through.
            if here in anchors and there not in anchors and not any(ch.isdigit() for ch in there):
                neighbours.setdefault(there, here)

    predicate_cos: dict[str, float] = {}
    if embed_predicates and embedder is not None:
        predicates = sorted({e["p"] for e in edges})
        vectors = embedder.embed([query, *predicates])
        predicate_cos = {p: cosine(vectors[0], v) for p, v in zip(predicates, vectors[1:], strict=True)}

    scored: list[ScoredEdge] = []
    for edge, stems in zip(edges, edge_stems, strict=True):
        parts = []
        score = 0.0
        semantic_via = None
        semantic = 0.0
        for label in (edge["s"], edge["o"]):
            value = scores.get(label.casefold())
            if value is not None and value > semantic:
                semantic, semantic_via = value, label
        if semantic_via is not None and semantic > 0:
            score += W_SEMANTIC * semantic
            parts.append(f"cosine {semantic:.2f} to the question (via '{semantic_via}')")
        shared = [term for term in question_stems if term in stems]
        if shared and total_weight:
            lexical = sum(weights[t] for t in shared) / total_weight
            score += W_LEXICAL * lexical
            parts.append("shares " + ", ".join(f"'{question_stems[t]}'" for t in shared))
        if edge["p"] in predicate_cos:
            value = predicate_cos[edge["p"]]
            if value > 0:
                score += W_PREDICATE * value
                parts.append(f"predicate '{edge['p']}' has cosine {value:.2f} to the question")
        touched = sorted(label for label in (edge["s"], edge["o"]) if label in anchors)
        via = [] if touched else sorted(label for label in (edge["s"], edge["o"]) if label in neighbours)
        concept = semantic_via or ""
        if touched:
            score += W_ANCHOR
            parts.append("touches anchor " + ", ".join(f"'{a}'" for a in touched))
            concept = touched[0]
        elif via:
            score *= BRIDGE_FACTOR
            parts.append(f"one hop from anchor '{neighbours[via[0]]}' via '{via[0]}' (x{BRIDGE_FACTOR:g})")
            concept = neighbours[via[0]]
        elif anchors:
            score *= OFF_ANCHOR_FACTOR
            parts.append(f"not connected to the entities named in the question (x{OFF_ANCHOR_FACTOR:g})")
        score = round(max(score, 0.0), 6)
        reasoning = "; ".join(parts) + f"; score {score:.2f}" if score > 0 else ""
        scored.append(ScoredEdge(id=edge["id"], score=score, reasoning=reasoning, concept=concept))
    scored.sort(key=lambda item: (-item.score, item.id))
    return scored


def select_edges(
    query: str,
    edges: Sequence[Mapping[str, str]],
    entity_scores: Mapping[str, float] | None = None,
    limit: int | None = None,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    relative: float = DEFAULT_RELATIVE,
    embedder: Any = None,
    embed_predicates: bool = False,
) -> list[SelectedEdge]:
    """Select the candidate edges relevant to ``query``.

    :param query: the user's question.
    :param edges: candidates ``{"id", "s", "p", "o"}`` with labels (ids are returned verbatim).
    :param entity_scores: ``{entity label: cosine to the question}`` from the entity vector search.
    :param limit: maximum number of edges kept (default 10).
    :param threshold: minimum absolute score.
    :param relative: minimum score as a fraction of the best edge's score.
    :param embedder: optional Embedder, used only when ``embed_predicates`` is set.
    :param embed_predicates: also score the cosine of each distinct predicate label to the
        question (costs one embedding per distinct predicate; deterministic).
    :returns: selected edges, best first, ties broken by id.
    """
    limit = DEFAULT_LIMIT if limit is None else limit
    if not edges or limit < 1:
        return []
    scored = [item for item in score_edges(query, edges, entity_scores, embedder=embedder,
                                           embed_predicates=embed_predicates) if item.score > 0]
    if not scored:
        return []
    floor = max(threshold, relative * scored[0].score)
    return [SelectedEdge(id=item.id, score=item.score, reasoning=item.reasoning, concept=item.concept)
            for item in scored if item.score >= floor][:limit]
