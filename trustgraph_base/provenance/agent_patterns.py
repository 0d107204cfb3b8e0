"""Trace builders for the plan-then-execute and supervisor agent patterns and the router (docs/trace-model.md).

The classes and predicates are TrustGraph 2.11.1's (``tg:PatternDecision``, ``tg:Plan`` with ``tg:planStep``,
``tg:StepResult``, ``tg:Decomposition`` with ``tg:subagentGoal``, ``tg:Finding``, ``tg:Synthesis``), with one
difference that makes the trace a DAG rather than a chain: every node is ``prov:wasDerivedFrom`` **each** of its
inputs (a step result from the Plan and from the step results it depends on, a Finding from the Decomposition and
the sub-agent's Conclusion, the Synthesis from every step result or Finding).  Each builder describes one node,
so each is one explain event.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..schema.primitives import Term, Triple
from . import namespaces as ns
from .triples import LABEL, LlmUsage, _c, _c_lit, _int, _iri, _text, _types, _usage

__all__ = ["pattern_decision_triples", "plan_triples", "step_result_triples", "decomposition_triples",
           "finding_triples", "pattern_synthesis_triples"]


def _derived(out: list[Triple], node: Term, parents: Sequence[str], graph: str) -> None:
    for parent in dict.fromkeys(parents):
        out.append(Triple(node, _c(ns.PROV_WAS_DERIVED_FROM), _iri(parent), graph))


def pattern_decision_triples(uri: str, question_uri: str, pattern: str, reason: str, *,
                             usage: LlmUsage | None = None, graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The router's choice of ``pattern`` for the Question and why (``tg:reasoning``); ``usage``: the model call
    that chose it (none for a rule)."""
    d = _iri(uri)
    out = _types(d, graph, ns.PROV_ENTITY, ns.TG_PATTERN_DECISION)
    out.append(Triple(d, LABEL, _text(f"Pattern: {pattern}"), graph))
    out.append(Triple(d, _c(ns.PROV_WAS_DERIVED_FROM), _iri(question_uri), graph))
    out.append(Triple(d, _c(ns.TG_PATTERN), _text(pattern), graph))
    out.append(Triple(d, _c(ns.TG_REASONING), _text(reason), graph))
    _usage(out, d, usage, graph)
    return out


def plan_triples(uri: str, inputs: Sequence[str], steps: Sequence[str], *, usage: LlmUsage | None = None,
                 graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The Plan: one ``tg:planStep`` per step (its goal, numbered ``"<n>. <goal>"`` so the order survives),
    derived from the Question and, when the router chose the pattern, its PatternDecision."""
    p = _iri(uri)
    out = _types(p, graph, ns.PROV_ENTITY, ns.TG_PLAN)
    out.append(Triple(p, LABEL, _text(f"Plan with {len(steps)} steps"), graph))
    _derived(out, p, inputs, graph)
    for n, goal in enumerate(steps, 1):
        out.append(Triple(p, _c(ns.TG_PLAN_STEP), _text(f"{n}. {goal}"), graph))
    _usage(out, p, usage, graph)
    return out


def step_result_triples(uri: str, plan_uri: str, depends_on: Sequence[str], number: int, goal: str, tool: str, *,
                        tool_error: str = "", graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """One executed plan step: derived from the Plan and from the step result of every step it depends on; its
    result text is the librarian document of the same URI; ``tool_error`` when the step failed."""
    s = _iri(uri)
    out = _types(s, graph, ns.PROV_ENTITY, ns.TG_STEP_RESULT, ns.TG_ANSWER_TYPE)
    out.append(Triple(s, LABEL, _text(f"Step result: {goal[:60]}"), graph))
    _derived(out, s, [plan_uri, *depends_on], graph)
    out.append(Triple(s, _c(ns.TG_PLAN_STEP), _text(goal), graph))
    out.append(Triple(s, _c(ns.TG_STEP_NUMBER), _int(number), graph))
    out.append(Triple(s, _c(ns.TG_ACTION), _text(tool), graph))
    out.append(Triple(s, _c(ns.TG_DOCUMENT), s, graph))
    if tool_error:
        out.append(Triple(s, _c(ns.TG_TOOL_ERROR), _text(tool_error[:4000]), graph))
    return out


def decomposition_triples(uri: str, inputs: Sequence[str], goals: Sequence[str], *, usage: LlmUsage | None = None,
                          graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The Decomposition: one ``tg:subagentGoal`` per sub-goal, derived from the Question and, when the router
    chose the pattern, its PatternDecision."""
    d = _iri(uri)
    out = _types(d, graph, ns.PROV_ENTITY, ns.TG_DECOMPOSITION)
    out.append(Triple(d, LABEL, _text(f"Decomposed into {len(goals)} research threads"), graph))
    _derived(out, d, inputs, graph)
    for goal in dict.fromkeys(goals):
        out.append(Triple(d, _c(ns.TG_SUBAGENT_GOAL), _text(goal), graph))
    _usage(out, d, usage, graph)
    return out


def finding_triples(uri: str, decomposition_uri: str, subagent_final_uri: str, number: int, goal: str, *,
                    error: str = "", graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """What sub-agent ``number`` found for ``goal``: derived from the Decomposition and from the sub-agent's last
    stage (its Conclusion, or its Error; none when it never stored one); the text is the librarian document of
    the same URI; ``error`` when the sub-agent failed."""
    f = _iri(uri)
    out = _types(f, graph, ns.PROV_ENTITY, ns.TG_FINDING, ns.TG_ANSWER_TYPE)
    out.append(Triple(f, LABEL, _text(f"Finding: {goal[:60]}"), graph))
    _derived(out, f, [decomposition_uri, *([subagent_final_uri] if subagent_final_uri else [])], graph)
    out.append(Triple(f, _c(ns.TG_SUBAGENT_GOAL), _text(goal), graph))
    out.append(Triple(f, _c(ns.TG_STEP_NUMBER), _int(number), graph))
    out.append(Triple(f, _c(ns.TG_DOCUMENT), f, graph))
    if error:
        out.append(Triple(f, _c(ns.TG_TOOL_ERROR), _text(error[:4000]), graph))
    return out


def pattern_synthesis_triples(uri: str, inputs: Sequence[str], document_uri: str, *, usage: LlmUsage | None = None,
                              graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The Synthesis of a plan or a supervisor: derived from **every** step result or Finding it joins; the answer
    is the librarian document ``document_uri``."""
    s = _iri(uri)
    out = _types(s, graph, ns.PROV_ENTITY, ns.TG_SYNTHESIS, ns.TG_ANSWER_TYPE)
    out.append(Triple(s, LABEL, _c_lit("Synthesis"), graph))
    _derived(out, s, inputs, graph)
    out.append(Triple(s, _c(ns.TG_DOCUMENT), _iri(document_uri), graph))
    _usage(out, s, usage, graph)
    return out
