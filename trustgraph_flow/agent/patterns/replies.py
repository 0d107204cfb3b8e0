"""Parsers of the model's replies to the agent-pattern templates (model/prompts/agent_pattern_templates.py).

A reply that cannot be used raises :class:`PatternReplyError` with what was wrong, so a run fails with a clear
error rather than executing half a plan.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

PATTERNS = ("react", "plan-then-execute", "supervisor")
MAX_STEPS = 12
MAX_GOALS = 8


class PatternReplyError(ValueError):
    """The model's plan, decomposition or pattern choice is unusable."""


@dataclass(frozen=True)
class PlanStep:
    """Step ``number`` (from 1): its goal, the tool that runs it and the earlier steps it needs."""

    number: int
    goal: str
    tool: str
    depends_on: tuple[int, ...] = field(default_factory=tuple)


def _objects(text: str, what: str) -> list[dict]:
    """The JSON objects of a JSON-lines reply (code fences and blank lines skipped)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("```"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise PatternReplyError(f"the {what} line {line[:80]!r} is not a JSON object") from None
        if not isinstance(obj, dict):
            raise PatternReplyError(f"the {what} line {line[:80]!r} is not a JSON object")
        out.append(obj)
    if not out:
        raise PatternReplyError(f"the model wrote no {what}")
    return out


def parse_pattern_choice(text: str) -> tuple[str, str]:
    """``(pattern, reason)`` from an ``agent-pattern-select`` reply."""
    start, end = text.find("{"), text.rfind("}")
    try:
        obj = json.loads(text[start:end + 1]) if 0 <= start < end else None
    except ValueError:
        obj = None
    if not isinstance(obj, dict) or obj.get("pattern") not in PATTERNS:
        raise PatternReplyError(f"the router's reply names none of {', '.join(PATTERNS)}: {text[:120]!r}")
    return obj["pattern"], str(obj.get("reason") or "").strip() or "the model gave no reason"


def parse_plan(text: str, tools: set[str]) -> list[PlanStep]:
    """The steps of an ``agent-plan`` reply; a step may depend only on earlier steps (so the plan is acyclic)."""
    steps = []
    objects = _objects(text, "plan step")
    if len(objects) > MAX_STEPS:
        raise PatternReplyError(f"the plan has {len(objects)} steps; at most {MAX_STEPS} are run")
    for n, obj in enumerate(objects, 1):
        goal, tool, deps = obj.get("goal"), obj.get("tool"), obj.get("depends_on", [])
        if not isinstance(goal, str) or not goal.strip():
            raise PatternReplyError(f"plan step {n} has no goal")
        if tool not in tools:
            raise PatternReplyError(f"plan step {n} names tool {str(tool)[:40]!r}; "
                                    f"available: {', '.join(sorted(tools))}")
        if not isinstance(deps, list) or not all(type(d) is int and 1 <= d < n for d in deps):
            raise PatternReplyError(f"plan step {n} depends on {deps!r}: only numbers of earlier steps are allowed")
        steps.append(PlanStep(n, goal.strip(), tool, tuple(dict.fromkeys(deps))))
    return steps


def parse_goals(text: str) -> list[str]:
    """The sub-goals of an ``agent-decompose`` reply (duplicates dropped)."""
    goals = []
    for n, obj in enumerate(_objects(text, "sub-goal"), 1):
        goal = obj.get("goal")
        if not isinstance(goal, str) or not goal.strip():
            raise PatternReplyError(f"sub-goal {n} is empty")
        goals.append(goal.strip())
    goals = list(dict.fromkeys(goals))
    if len(goals) > MAX_GOALS:
        raise PatternReplyError(f"the decomposition has {len(goals)} sub-goals; at most {MAX_GOALS} are run")
    return goals
