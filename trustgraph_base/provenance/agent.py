"""Trace builders for the ReAct agent (docs/trace-model.md, "Agent").

The three seed builders keep their exact signatures; extra keyword arguments follow.
``arguments`` may be a dict (stored as canonical JSON) or an already-encoded JSON string.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ..schema.primitives import Triple
from . import namespaces as ns
from .triples import LABEL, _c, _c_lit, _iri, _text, _types, timestamp_literal

__all__ = ["agent_session_triples", "agent_iteration_triples", "agent_final_triples"]


def agent_session_triples(session_uri: str, query: str, timestamp: datetime | str | None = None, *,
                          graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The agent's Question: what was asked and when."""
    q = _iri(session_uri)
    out = _types(q, graph, ns.PROV_ACTIVITY, ns.TG_QUESTION, ns.TG_AGENT_QUESTION)
    out.append(Triple(q, LABEL, _c_lit("Agent question"), graph))
    out.append(Triple(q, _c(ns.PROV_STARTED_AT_TIME), timestamp_literal(timestamp), graph))
    out.append(Triple(q, _c(ns.TG_QUERY), _text(query), graph))
    return out


def agent_iteration_triples(iteration_uri: str, parent_uri: str, thought: str, action: str,
                            arguments: dict[str, Any] | str, observation: str, *,
                            tool_error: str = "", graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """One Analysis: thought, action, arguments (JSON), observation; derived from the previous step."""
    a = _iri(iteration_uri)
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    out = _types(a, graph, ns.PROV_ENTITY, ns.TG_ANALYSIS)
    out.append(Triple(a, LABEL, _c_lit("Analysis"), graph))
    out.append(Triple(a, _c(ns.PROV_WAS_DERIVED_FROM), _iri(parent_uri), graph))
    out.append(Triple(a, _c(ns.TG_THOUGHT), _text(thought), graph))
    out.append(Triple(a, _c(ns.TG_ACTION), _text(action), graph))
    out.append(Triple(a, _c(ns.TG_ARGUMENTS), _text(arguments), graph))
    out.append(Triple(a, _c(ns.TG_OBSERVATION), _text(observation), graph))
    if tool_error:
        out.append(Triple(a, _c(ns.TG_TOOL_ERROR), _text(tool_error), graph))
    return out


def agent_final_triples(final_uri: str, parent_uri: str, answer: str, *, termination_reason: str = "",
                        document_uri: str = "", graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The Conclusion: the answer, derived from the last Analysis (or the Question)."""
    c = _iri(final_uri)
    out = _types(c, graph, ns.PROV_ENTITY, ns.TG_CONCLUSION)
    out.append(Triple(c, LABEL, _c_lit("Conclusion"), graph))
    out.append(Triple(c, _c(ns.PROV_WAS_DERIVED_FROM), _iri(parent_uri), graph))
    out.append(Triple(c, _c(ns.TG_ANSWER), _text(answer), graph))
    if termination_reason:
        out.append(Triple(c, _c(ns.TG_TERMINATION_REASON), _text(termination_reason), graph))
    if document_uri:
        out.append(Triple(c, _c(ns.TG_DOCUMENT), _iri(document_uri), graph))
    return out
