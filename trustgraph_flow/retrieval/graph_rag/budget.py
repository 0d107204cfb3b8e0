"""The token budget of the edge-selection prompt: which candidate edges the model is shown.

A model pays for every prompt token (time on a local model, money on a hosted one), and 150
candidate edges make a prompt of about 4,800 tokens (docs/trace-model.md).  Before the selection
call the candidates are ranked with the extractive selector's scorer
(:func:`~trustgraph_flow.model.extractive.edge_selection.score_edges`: the entity vector search's
cosine, shared question words, anchors named in the question, one-hop closure from them), and
the longest best-first prefix whose prompt as a model is sent it (system and user text, without
the terms block only the test server reads) fits the budget is sent.  At least one edge is sent
whatever the budget, so a tiny budget never turns a query into "nothing explored".

Tokens are estimated, not counted by a tokenizer: :func:`estimate_tokens` is one token per
:data:`BYTES_PER_TOKEN` UTF-8 bytes, rounded up.  This prompt (hex ids, brackets, JSON) tokenizes
densely: a 150-candidate prompt with the terms block was estimated at about 10,900 tokens, and Qwen2.5's
tokenizer counted about 10,700 for it (one measurement, docs/trace-model.md), so the estimate errs on the side of a
smaller prompt.  llama.cpp's Python server has a tokenize endpoint
(``/extras/tokenize/count``), but in llama-cpp-python 0.3.36 it takes the same model lock as a
completion: it waits for another query's generation, and with the server's default
``interrupt_requests`` its arrival ends that query's streamed answer early.  So the estimate, which
costs no request and downloads no vocabulary, is what is used.  A budget of 0 sends every candidate.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ...model.extractive.edge_selection import score_edges
from ...model.prompts.templates import render

__all__ = ["BUDGET_ENV", "BYTES_PER_TOKEN", "DEFAULT_SELECTION_TOKEN_BUDGET", "SelectionCut", "configured_budget",
           "cut_candidates", "estimate_tokens"]

#: Default budget of the whole edge-selection prompt (system and user text), in tokens.
DEFAULT_SELECTION_TOKEN_BUDGET = 3000
#: UTF-8 bytes per token of the conservative estimate (Qwen2.5 averages about 2.5 on this prompt).
BYTES_PER_TOKEN = 2.4
TEMPLATE = "kg-edge-selection"
#: The environment variable that sets the budget of the graph-rag service and tg-invoke-graph-rag.
BUDGET_ENV = "TG_SELECTION_TOKEN_BUDGET"


def configured_budget() -> int:
    """The budget :data:`BUDGET_ENV` sets, else :data:`DEFAULT_SELECTION_TOKEN_BUDGET`.

    :raises ValueError: the variable is not a whole number >= 0.
    """
    text = os.environ.get(BUDGET_ENV, "").strip()
    if not text:
        return DEFAULT_SELECTION_TOKEN_BUDGET
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{BUDGET_ENV}={text!r} is not a whole number of tokens") from None
    if value < 0:
        raise ValueError(f"{BUDGET_ENV}={value} must be >= 0 (0: no cut)")
    return value


def estimate_tokens(text: str) -> int:
    """A conservative token count of ``text``: one token per :data:`BYTES_PER_TOKEN` UTF-8 bytes, rounded up.

    :param text: any text.
    """
    return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN)


@dataclass
class SelectionCut:
    """What the edge-selection prompt was given: the terms, and how the candidates were cut to fit."""

    terms: dict
    candidates: int
    sent_ids: list[str] = field(default_factory=list)
    #: the budget applied (0: none, every candidate sent)
    budget: int = 0
    #: estimated tokens of the prompt as sent
    prompt_tokens: int = 0

    @property
    def sent(self) -> int:
        return len(self.sent_ids)


def _prompt_tokens(terms: dict, count: Callable[[str], int]) -> int:
    """Tokens of the prompt as a model is sent it: without the terms block only the test server reads (not
    rendered at all: every step of the search below would serialise up to every candidate for nothing)."""
    prompt = render(TEMPLATE, terms, terms_block=False)
    return count(prompt.system) + count(prompt.user)


def _terms(base: dict, knowledge: list) -> dict:
    """The prompt's terms for ``knowledge``: the entity scores of the entities its edges name, no others (a
    selector scores an edge by its own subject and object; the scores travel in the terms block only)."""
    named = {k["s"] for k in knowledge} | {k["o"] for k in knowledge}
    scores = {label: score for label, score in base["entity_scores"].items() if label in named}
    return {**base, "entity_scores": scores, "knowledge": knowledge}


def cut_candidates(query: str, knowledge: Sequence[Mapping[str, str]], entity_scores: Mapping[str, float],
                   limit: int, budget: int, *, count: Callable[[str], int] = estimate_tokens) -> SelectionCut:
    """Rank ``knowledge`` and keep the best-first prefix whose selection prompt fits ``budget`` tokens.

    :param query: the question.
    :param knowledge: candidate edges ``{"id", "s", "p", "o"}`` (labels).
    :param entity_scores: seed entity label -> cosine to the question (from the entity vector search); the
        prompt carries those of the entities its edges name.
    :param limit: most edges the selector may select (the prompt says so).
    :param budget: most prompt tokens (0: no cut; every candidate is sent in its original order).
    :param count: token counter of one text (default: :func:`estimate_tokens`).
    :raises ValueError: a negative budget.
    """
    if budget < 0:
        raise ValueError(f"the selection token budget must be >= 0 tokens, got {budget}")
    base = {"query": query, "entity_scores": dict(entity_scores), "limit": limit}
    candidates = list(knowledge)
    if budget == 0 or not candidates:
        terms = _terms(base, candidates)
        return SelectionCut(terms, len(candidates), [k["id"] for k in candidates], 0, _prompt_tokens(terms, count))
    by_id = {k["id"]: k for k in candidates}
    ranked = [by_id[item.id] for item in score_edges(query, candidates, entity_scores)]

    def terms_of(n: int) -> dict:
        return _terms(base, ranked[:n])

    # The longest prefix within the budget (the prompt grows with every edge): binary search, at least one edge.
    low, high = 1, len(ranked)
    if _prompt_tokens(terms_of(high), count) <= budget:
        low = high
    else:
        while low < high - 1:
            middle = (low + high) // 2
            if _prompt_tokens(terms_of(middle), count) <= budget:
                low = middle
            else:
                high = middle
    terms = terms_of(low)
    return SelectionCut(terms, len(candidates), [k["id"] for k in ranked[:low]], budget, _prompt_tokens(terms, count))
