"""Turning the LLM's edge-selection output into edge selections with the original terms.

The prompt layer has already parsed the JSONL (dropping fences, blank and malformed lines);
here each ``{"id", "reasoning", "score", "concept"}`` object is checked against the label graph:
unknown ids and repeats are skipped and counted — never fatal — and the selection is capped at
``limit``.  ``score`` (a finite number) and ``concept`` (text) are optional: a selector that gives
none, or gives them malformed, still selects the edge, which then has no score or concept.

A reasoning that says nothing of its edge is flagged unusable (:func:`flag_unusable_reasoning`): one
that copies the prompt's example, and one text given for many edges (the same normalised text for
:data:`REPEAT_LIMIT` or more edges, or for every edge of a selection of two or more).  Small models do
both.  The edge stays selected; the trace records why its reasoning is unusable and how many are.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trustgraph_base.provenance.triples import EdgeSelection, LlmUsage
from trustgraph_base.schema import Triple

__all__ = ["REPEAT_LIMIT", "SelectionResult", "flag_unusable_reasoning", "resolve_selection"]

#: A reasoning given for this many selected edges or more says nothing of any one of them.
REPEAT_LIMIT = 3
COPIES_EXAMPLE = "copies the example reasoning of the edge-selection prompt"
_NOT_WORD = re.compile(r"[\W_]+")


@dataclass
class SelectionResult:
    selections: list[EdgeSelection] = field(default_factory=list)
    dropped: int = 0
    reasons: list[str] = field(default_factory=list)
    #: the selection's model call (none when there was nothing to select from)
    usage: LlmUsage | None = None

    @property
    def unusable(self) -> int:
        """How many selections have a reasoning flagged unusable."""
        return sum(1 for sel in self.selections if sel.unusable)


def normalise_reasoning(text: str) -> str:
    """A reasoning compared without case, punctuation or spacing."""
    return " ".join(_NOT_WORD.sub(" ", text.casefold()).split())


def flag_unusable_reasoning(selections: Sequence[EdgeSelection], example_reasonings: Iterable[str]) -> int:
    """Flag (``EdgeSelection.unusable``) the reasonings that say nothing of their edge; return how many.

    :param selections: the resolved selections (changed in place; none is removed).
    :param example_reasonings: the reasonings of the prompt's examples.
    """
    examples = {normalise_reasoning(text) for text in example_reasonings} - {""}
    texts = [normalise_reasoning(sel.reasoning) for sel in selections]
    counts = Counter(t for t in texts if t)
    for sel, text in zip(selections, texts, strict=True):
        if not text:
            continue
        if text in examples:
            sel.unusable = COPIES_EXAMPLE
        elif counts[text] >= REPEAT_LIMIT or (counts[text] == len(selections) > 1):
            sel.unusable = f"the same reasoning was given for {counts[text]} of {len(selections)} selected edges"
    return sum(1 for sel in selections if sel.unusable)


def _score(value: Any) -> float | None:
    """A selector's score: a finite number, else none."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def resolve_selection(objects: Sequence[Any], uri_map: Mapping[str, Triple], limit: int = 0, *,
                      parser_dropped: int = 0, parser_reasons: Sequence[str] = ()) -> SelectionResult:
    """Map selected ids to original edges.

    :param objects: parsed JSONL objects (``{"id": str, "reasoning": str, "score"?: number, "concept"?: str}``).
    :param uri_map: id → original edge, from :func:`~.labels.get_labelgraph`.
    :param limit: keep at most this many selections (0 = no cap).
    :param parser_dropped: lines the JSONL parser already dropped (added to the count).
    """
    result = SelectionResult(dropped=parser_dropped, reasons=list(parser_reasons))
    seen: set[str] = set()
    for obj in objects:
        if not isinstance(obj, dict):
            result.dropped += 1
            result.reasons.append("selection is not an object")
            continue
        eid = obj.get("id")
        if not isinstance(eid, str) or not eid.strip():
            result.dropped += 1
            result.reasons.append("selection without an id")
            continue
        eid = eid.strip()
        edge = uri_map.get(eid)
        if edge is None:
            result.dropped += 1
            result.reasons.append(f"unknown edge id {eid[:40]!r}")
            continue
        if eid in seen:
            result.dropped += 1
            result.reasons.append(f"edge {eid} selected twice")
            continue
        if limit and len(result.selections) >= limit:
            result.dropped += 1
            result.reasons.append(f"more than {limit} edges selected")
            continue
        seen.add(eid)
        reasoning, concept = obj.get("reasoning"), obj.get("concept")
        result.selections.append(EdgeSelection(edge=edge, reasoning=reasoning if isinstance(reasoning, str) else "",
                                               edge_id=eid, score=_score(obj.get("score")),
                                               concept=concept.strip() if isinstance(concept, str) else ""))
    return result
