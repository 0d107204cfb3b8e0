"""Trace builders for the ReAct agent (trace model v2, docs/trace-model.md).

An iteration is an Analysis (the action and its arguments), the Thought that led to it and an
Observation (what the tool returned); the texts of thoughts, observations and the final answer
are librarian documents the trace names with ``tg:document``, in TrustGraph 2.11.1's shape.
Each builder describes one node, so each is one explain event: TrustGraph's client types an
event by every ``rdf:type`` in it, whatever its subject.
``arguments`` may be a dict (stored as canonical JSON) or an already-encoded JSON string.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ..schema.primitives import Triple
from . import namespaces as ns
from .triples import LABEL, LlmUsage, _c, _c_lit, _iri, _text, _types, _usage, otel_trace_triples, timestamp_literal

__all__ = ["agent_session_triples", "agent_iteration_triples", "agent_thought_triples", "agent_observation_triples",
           "agent_final_triples"]


def agent_session_triples(session_uri: str, query: str, timestamp: datetime | str | None = None, *,
                          graph: str = ns.GRAPH_RETRIEVAL, otel_trace_id: str = "",
                          parent_uri: str = "") -> list[Triple]:
    """The agent's Question: what was asked and when (and in which OpenTelemetry trace, when tracing is on);
    ``parent_uri``: the supervisor's Decomposition a sub-agent's Question is derived from."""
    q = _iri(session_uri)
    out = _types(q, graph, ns.PROV_ACTIVITY, ns.TG_QUESTION, ns.TG_AGENT_QUESTION)
    out.append(Triple(q, LABEL, _c_lit("Agent question"), graph))
    out.append(Triple(q, _c(ns.PROV_STARTED_AT_TIME), timestamp_literal(timestamp), graph))
    out.append(Triple(q, _c(ns.TG_QUERY), _text(query), graph))
    if parent_uri:
        out.append(Triple(q, _c(ns.PROV_WAS_DERIVED_FROM), _iri(parent_uri), graph))
    out += otel_trace_triples(q, otel_trace_id, graph)
    return out


def agent_iteration_triples(iteration_uri: str, parent_uri: str, action: str, arguments: dict[str, Any] | str, *,
                            thought_uri: str = "", usage: LlmUsage | None = None,
                            graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """One Analysis: the action the model chose and its arguments (JSON), derived from the previous step (the
    Question, or the previous iteration's Observation); ``usage``: the model call that chose it.

    With ``thought_uri`` the Analysis names its Thought (``tg:thought``, :func:`agent_thought_triples`; none
    when the model gave no thought).
    """
    a = _iri(iteration_uri)
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    out = _types(a, graph, ns.PROV_ENTITY, ns.TG_ANALYSIS)
    out.append(Triple(a, LABEL, _c_lit("Analysis"), graph))
    out.append(Triple(a, _c(ns.PROV_WAS_DERIVED_FROM), _iri(parent_uri), graph))
    out.append(Triple(a, _c(ns.TG_ACTION), _text(action), graph))
    out.append(Triple(a, _c(ns.TG_ARGUMENTS), _text(arguments), graph))
    _usage(out, a, usage, graph)
    if thought_uri:
        out.append(Triple(a, _c(ns.TG_THOUGHT), _iri(thought_uri), graph))
    return out


def agent_thought_triples(thought_uri: str, iteration_uri: str, *, graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The Thought of an Analysis: derived from it; its text is the librarian document of the same URI."""
    t = _iri(thought_uri)
    out = _types(t, graph, ns.PROV_ENTITY, ns.TG_REFLECTION_TYPE, ns.TG_THOUGHT_TYPE)
    out.append(Triple(t, LABEL, _c_lit("Thought"), graph))
    out.append(Triple(t, _c(ns.PROV_WAS_DERIVED_FROM), _iri(iteration_uri), graph))
    out.append(Triple(t, _c(ns.TG_DOCUMENT), t, graph))
    return out


def agent_observation_triples(observation_uri: str, iteration_uri: str, *, tool_error: str = "",
                              graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The Observation of an iteration: what its tool returned (the librarian document of the same URI),
    derived from the Analysis; ``tool_error`` when the tool failed (or could not be run)."""
    o = _iri(observation_uri)
    out = _types(o, graph, ns.PROV_ENTITY, ns.TG_OBSERVATION_TYPE)
    out.append(Triple(o, LABEL, _c_lit("Observation"), graph))
    out.append(Triple(o, _c(ns.PROV_WAS_DERIVED_FROM), _iri(iteration_uri), graph))
    out.append(Triple(o, _c(ns.TG_DOCUMENT), o, graph))
    if tool_error:
        out.append(Triple(o, _c(ns.TG_TOOL_ERROR), _text(tool_error), graph))
    return out


def agent_final_triples(final_uri: str, parent_uri: str, document_uri: str, *, termination_reason: str = "",
                        usage: LlmUsage | None = None, graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The Conclusion: derived from the last Observation (or the Question); the answer is the librarian document
    ``document_uri``; ``usage``: the model call that gave the answer (none when the agent gave up)."""
    c = _iri(final_uri)
    out = _types(c, graph, ns.PROV_ENTITY, ns.TG_CONCLUSION)
    out.append(Triple(c, LABEL, _c_lit("Conclusion"), graph))
    out.append(Triple(c, _c(ns.PROV_WAS_DERIVED_FROM), _iri(parent_uri), graph))
    out.append(Triple(c, _c(ns.TG_DOCUMENT), _iri(document_uri), graph))
    if termination_reason:
        out.append(Triple(c, _c(ns.TG_TERMINATION_REASON), _text(termination_reason), graph))
    _usage(out, c, usage, graph)
    return out
