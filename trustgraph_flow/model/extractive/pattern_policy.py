"""Deterministic answers to the agent-pattern templates, for the extractive backend (no LLM).

A question is split into clauses: at each ``?`` or ``;`` that ends a sub-question, and at ``and`` / ``then``
before a question word (``Who discovered polonium and where was Marie Curie born?`` is two clauses).  A clause
introduced by ``then`` depends on the one before it.  The router picks ``react`` for one clause,
``plan-then-execute`` when a clause depends on another, ``supervisor`` for independent clauses; a plan has one
step per clause (tool: the best match, as the ReAct policy ranks tools), a decomposition one goal per clause, and
the synthesis lists every result, naming what is missing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .react_policy import rank_tools

_WH = r"(?:who|whom|whose|what|when|where|why|how|which|is|are|was|were|did|does|do)\b"
_SPLIT = re.compile(rf"\s*(?:[?;]\s*|,?\s+\b(and|then|and then)\s+(?={_WH}))", re.IGNORECASE)
_THEN = re.compile(r"^(?:then|and then)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Clause:
    """One sub-question; ``after_previous``: introduced by ``then`` (it needs the clause before it)."""

    text: str
    after_previous: bool = False


def clauses(question: str) -> list[Clause]:
    """The sub-questions of ``question`` in order (the whole question when it has one)."""
    out: list[Clause] = []
    position, joiner = 0, ""
    for match in _SPLIT.finditer(question):
        text = question[position:match.start()].strip(" ,")
        if text:
            out.append(Clause(_sentence(text), bool(_THEN.match(joiner))))
        position, joiner = match.end(), (match.group(1) or "")
    tail = question[position:].strip(" ,?;")
    if tail:
        out.append(Clause(_sentence(tail), bool(_THEN.match(joiner))))
    return out or [Clause(question.strip())]


def _sentence(text: str) -> str:
    text = text.strip(" ,?;")
    return text[:1].upper() + text[1:] + "?"


def select_pattern(question: str) -> str:
    """The reply to ``agent-pattern-select``: ``{"pattern", "reason"}`` as one JSON line."""
    parts = clauses(question)
    if len(parts) == 1:
        pattern, reason = "react", "the question is one clause: a single line of reasoning answers it"
    elif any(c.after_previous for c in parts):
        pattern, reason = "plan-then-execute", (
            f"the question has {len(parts)} clauses and a later one ('then') needs an earlier one's result")
    else:
        pattern, reason = "supervisor", f"the question has {len(parts)} independent clauses, researched in parallel"
    return json.dumps({"pattern": pattern, "reason": reason})


def plan(question: str, tools: Sequence[Mapping[str, Any]], *, embedder: Any = None) -> str:
    """The reply to ``agent-plan``: one step per clause, the best-matching tool, ``then`` as a dependency."""
    lines = []
    for n, clause in enumerate(clauses(question), 1):
        ranked = rank_tools(clause.text, tools, embedder=embedder)
        tool = ranked[0].name if ranked else ""
        lines.append(json.dumps({"goal": clause.text, "tool": tool,
                                 "depends_on": [n - 1] if clause.after_previous and n > 1 else []}))
    return "\n".join(lines)


def decompose(question: str) -> str:
    """The reply to ``agent-decompose``: one goal per clause."""
    return "\n".join(json.dumps({"goal": clause.text}) for clause in clauses(question))


def synthesise(question: str, results: Sequence[Mapping[str, str]]) -> str:
    """The reply to ``agent-synthesise``: every result, then what is missing and why."""
    found = [r["result"].strip() for r in results if not r["error"] and r["result"].strip()]
    missing = [f"{r['goal']} ({r['error']})" for r in results if r["error"]]
    text = " ".join(found) if found else "No part of the question could be answered."
    if missing:
        text += " Missing: " + "; ".join(missing) + "."
    return text


__all__ = ["Clause", "clauses", "select_pattern", "plan", "decompose", "synthesise"]
