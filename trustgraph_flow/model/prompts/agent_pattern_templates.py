"""Prompt templates of the agent patterns: the router, the planner, the decomposer and the synthesiser.

Each is a text template whose reply the agent parses itself (trustgraph_flow/agent/patterns/replies.py):
``agent-pattern-select`` answers one JSON object, ``agent-plan`` and ``agent-decompose`` one JSON object per line,
``agent-synthesise`` the answer in prose.
"""

from __future__ import annotations

from .templates import TEXT, PromptTemplate, _check_records, _check_str

PATTERN_SELECT = "agent-pattern-select"
PLAN = "agent-plan"
DECOMPOSE = "agent-decompose"
SYNTHESISE = "agent-synthesise"


def _check_select(terms: dict) -> None:
    _check_str(PATTERN_SELECT, terms, "question")
    _check_records(PATTERN_SELECT, terms, "patterns", {"name": (str,), "description": (str,)})


def _check_plan(terms: dict) -> None:
    _check_str(PLAN, terms, "question")
    _check_records(PLAN, terms, "tools", {"name": (str,), "description": (str,)})


def _check_decompose(terms: dict) -> None:
    _check_str(DECOMPOSE, terms, "question")


def _check_synthesise(terms: dict) -> None:
    _check_str(SYNTHESISE, terms, "question")
    _check_records(SYNTHESISE, terms, "results", {"goal": (str,), "result": (str,), "error": (str,)})


def _render_select(terms: dict) -> str:
    patterns = "\n".join(f"- {p['name']}: {p['description']}" for p in terms["patterns"])
    return f"Question: {terms['question']}\n\nPatterns:\n{patterns}"


def _render_plan(terms: dict) -> str:
    tools = "\n".join(f"- {t['name']}: {t['description']}" for t in terms["tools"]) or "(no tools)"
    return f"Question: {terms['question']}\n\nTools:\n{tools}"


def _render_decompose(terms: dict) -> str:
    return f"Question: {terms['question']}"


def _render_synthesise(terms: dict) -> str:
    lines = []
    for n, r in enumerate(terms["results"], 1):
        outcome = f"FAILED: {r['error']}" if r["error"] else r["result"]
        lines.append(f"{n}. {r['goal']}\n   {outcome}")
    return f"Question: {terms['question']}\n\nResults:\n" + ("\n".join(lines) or "(none)")


_SELECT_SYSTEM = """task: agent-pattern-select
You choose how an agent answers a question. Patterns:
- react: one line of reasoning with tool calls, for a single question.
- plan-then-execute: a plan of steps where later steps need the results of earlier ones.
- supervisor: independent sub-questions researched in parallel by sub-agents, then joined.
Reply with one JSON object on one line: {"pattern": "<react|plan-then-execute|supervisor>", "reason": "<one \
sentence: why>"}"""

_PLAN_SYSTEM = """task: agent-plan
You write a plan to answer a question with the tools listed.
Output one JSON object per line, one line per step, nothing else:
{"goal": "<what the step finds out, as a question>", "tool": "<one tool name>", "depends_on": [<numbers of earlier \
steps whose results this step needs>]}
Steps are numbered from 1 in the order written; a step may depend only on earlier steps.
Steps that do not depend on each other run at the same time."""

_DECOMPOSE_SYSTEM = """task: agent-decompose
You split a question into independent sub-goals, each researched by its own agent at the same time.
Output one JSON object per line, one per sub-goal, nothing else: {"goal": "<a self-contained question>"}"""

_SYNTHESISE_SYSTEM = """task: agent-synthesise
You answer a question from the results of the steps (or research threads) run for it.
Use only the results given. If a result FAILED, say which part of the question could not be answered and why.
Answer concisely in plain prose."""

PATTERN_TEMPLATES: tuple[PromptTemplate, ...] = (
    PromptTemplate(PATTERN_SELECT, _SELECT_SYSTEM, TEXT, _check_select, _render_select,
                   closing="Answer with the JSON object only."),
    PromptTemplate(PLAN, _PLAN_SYSTEM, TEXT, _check_plan, _render_plan, closing="Answer with JSON lines only."),
    PromptTemplate(DECOMPOSE, _DECOMPOSE_SYSTEM, TEXT, _check_decompose, _render_decompose,
                   closing="Answer with JSON lines only."),
    PromptTemplate(SYNTHESISE, _SYNTHESISE_SYSTEM, TEXT, _check_synthesise, _render_synthesise),
)

__all__ = ["PATTERN_TEMPLATES", "PATTERN_SELECT", "PLAN", "DECOMPOSE", "SYNTHESISE"]
