"""A trace as data: from its triples to a structured, stable JSON form (and readable text).

:func:`build_trace` detects the kind of trace from the Question's type (GraphRAG, DocumentRAG,
agent) and returns a plain ``dict`` — the documented JSON of ``tg-show-explain-trace
--format json``:

- common: ``type`` (``graphrag`` | ``docrag`` | ``agent``), ``uri``, ``question``, ``time``,
  ``parent`` (the Analysis a sub-trace was asked from, or null), ``error`` (``{uri, stage,
  message}`` or null).
- graphrag: ``grounding {uri, concepts[]}``, ``exploration {uri, edge_count, sent_edge_count,
  selection_token_budget, selection_prompt_tokens, seed_entities[{uri, label}]}`` (the three about the edge
  selector's input are null in traces that do not record them), ``focus {uri, dropped, unusable_reasoning, usage,
  selected_edges[{uri, edge {s, p, o}, labels {s, p, o}, reasoning, reasoning_unusable, score, concept,
  sources[[{uri, type, label}]], source_removed}]}`` (``reasoning_unusable``: why the reasoning says nothing of
  its edge, or ``""``), ``synthesis {uri, document, answer, model, usage}``.
- docrag: ``grounding {uri, concepts[]}``, ``exploration {uri, chunk_count, chunks[{uri, chain[{uri, type,
  label}], source_removed}]}``, ``synthesis {uri, document, answer, model, usage}``.
- agent: ``pattern {uri, pattern, reason, usage}`` (the router's decision, or null), ``analyses[{uri, thought,
  action, arguments, usage, observation_uri, observation, tool_error, sub_traces[...]}]`` (react),
  ``plan {uri, steps[], usage}`` and ``step_results[{uri, number, goal, tool, inputs[], result, error,
  sub_traces[...]}]`` (plan-then-execute), ``decomposition {uri, goals[], usage, sub_agents[...]}`` and
  ``findings[{uri, number, goal, inputs[], result, error}]`` (supervisor), ``synthesis {uri, inputs[], document,
  answer, usage}`` (either), ``conclusion {uri, document, answer, termination_reason, usage}``; ``inputs`` are
  every node a node is derived from (the joins of the DAG).
- ``usage`` is ``{in_token, out_token, model}`` of the stage's model call, or null (no call recorded).
  ``grounding`` is null, ``score`` null and ``concept`` ``""`` in traces of trace model v1 (whose thoughts,
  observations and agent answers are inline rather than librarian documents: both read the same here).
- ``status``: ``complete`` (the final stage - Synthesis or Conclusion - is stored), ``failed``
  (an Error stage records how far the query got) or ``incomplete`` (neither: the query was cut
  short, e.g. the process running it was killed, so the trace stops at its last stored stage).
Terms in ``edge`` are ``{"type": "iri"|"literal"|"triple"|"blank", "value", "datatype"?,
"language"?}``.  Missing stages are null, never invented.  ``source_removed`` is true for an edge
no loaded document supports any more (and that is gone from the knowledge graph) and for a chunk
whose document was removed: the trace still shows what was used, and says its source is gone.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from ..rdf.terms import quoted, serialize_term, spo
from ..schema import BLANK, IRI, LITERAL, TRIPLE, Term, Triple
from ..store.triples import timestamp_micros
from . import namespaces as ns
from .uris import final_stage_uris, parse_trace_uri

#: A trace (or part of one) as JSON-ready data.
Json = dict[str, Any]
#: Canonical edge key or chunk URI -> its source chains.
Chains = Mapping[str, list[Any]]
#: Canonical edge keys and chunk URIs whose source is gone.
Removed = frozenset[str] | set[str]

__all__ = ["TraceIndex", "build_trace", "trace_type", "trace_status", "final_stage_uris", "term_json",
           "natural_key", "node_name", "QUESTION_TYPES"]

#: How deep sub-traces of sub-traces are built (a stored trace may nest, or loop, without end).
MAX_SUBTRACE_DEPTH = 16

QUESTION_TYPES = {ns.TG_GRAPH_RAG_QUESTION: "graphrag", ns.TG_DOC_RAG_QUESTION: "docrag",
                  ns.TG_AGENT_QUESTION: "agent"}
TYPE_NAMES = {"graphrag": "GraphRAG", "docrag": "DocRAG", "agent": "Agent"}


def term_json(term: Term) -> Json:
    kind = {IRI: "iri", LITERAL: "literal", BLANK: "blank", TRIPLE: "triple"}[term.type]
    if term.type == TRIPLE:
        s, p, o = spo(quoted(term))
        return {"type": kind, "value": serialize_term(term),
                "triple": {"s": term_json(s), "p": term_json(p), "o": term_json(o)}}
    out = {"type": kind, "value": term.value}
    if term.datatype:
        out["datatype"] = term.datatype
    if term.language:
        out["language"] = term.language
    return out


class TraceIndex:
    """Subject → predicate → objects over a set of triples, plus the reverse derivation links."""

    def __init__(self, triples: Iterable[Triple]):
        self.props: dict[str, dict[str, list[Term]]] = defaultdict(lambda: defaultdict(list))
        self.children: dict[str, list[tuple[str, str]]] = defaultdict(list)  # object -> [(predicate, subject)]
        self.triples = list(triples)
        for s, p, o in map(spo, self.triples):
            if s.type != IRI:
                continue
            self.props[s.value][p.value].append(o)
            if o.type == IRI and p.value in (ns.PROV_WAS_DERIVED_FROM, ns.PROV_WAS_GENERATED_BY):
                self.children[o.value].append((p.value, s.value))

    def one(self, s: str, p: str) -> Term | None:
        values = self.props.get(s, {}).get(p)
        return values[0] if values else None

    def text(self, s: str, p: str) -> str | None:
        v = self.one(s, p)
        return v.value if v is not None and v.type != TRIPLE else None

    def types(self, s: str) -> set[str]:
        return {o.value for o in self.props.get(s, {}).get(ns.RDF_TYPE, [])}

    def derived(self, parent: str, of_type: str | None = None) -> list[str]:
        out = [s for _p, s in self.children.get(parent, [])]
        if of_type:
            out = [s for s in out if of_type in self.types(s)]
        return sorted(dict.fromkeys(out), key=natural_key)

    def integer(self, s: str, p: str) -> int | None:
        v = self.text(s, p)
        try:
            return int(v) if v is not None else None
        except ValueError:
            return None


def natural_key(uri: str) -> tuple[tuple[int | str, str], ...]:
    """Sort ``.../i2`` before ``.../i10`` and ``...:edge:...:2`` before ``:10``.

    Digit runs compare by length, then by text (no ``int()``: a run of any length, in any
    script, sorts without error); the other parts compare as text.
    """
    import re

    parts = re.split(r"(\d+)", uri)
    return tuple((len(x.lstrip("0")), x.lstrip("0")) if i % 2 else ("", x) for i, x in enumerate(parts))


_STAGE_NAMES = {"question": "Question", "pattern-decision": "Pattern decision", "plan": "Plan", "step": "Step",
                "decomposition": "Decomposition", "finding": "Finding", "synthesis": "Synthesis",
                "conclusion": "Conclusion", "error": "Error", "analysis": "Analysis", "observation": "Observation"}


def node_name(uri: str, within: str = "") -> str:
    """A short readable name of a trace node: ``Finding 2``, ``Plan``; a node of another trace than the one
    ``within`` names is prefixed with its session, a supervisor's sub-agent's with its goal: ``Sub-agent g2
    Conclusion``."""
    node = parse_trace_uri(uri)
    if node is None:
        return uri
    name = _STAGE_NAMES.get(node.stage, node.stage or uri)
    if node.index is not None:
        name += f" {node.index}"
    root = parse_trace_uri(within) if within else None
    if root is not None and (root.kind, root.session) != (node.kind, node.session):
        own = node.session.startswith(root.session + "-") and node.kind == root.kind == "agent"
        name = f"Sub-agent {node.session[len(root.session) + 1:]} {name}" if own else f"{node.session} {name}"
    return name


def trace_type(index: TraceIndex, uri: str) -> str | None:
    for t in index.types(uri):
        if t in QUESTION_TYPES:
            return QUESTION_TYPES[t]
    return None


def _error(index: TraceIndex, stages: list[str]) -> Json | None:
    for st in stages:
        for e in index.derived(st, ns.TG_ERROR):
            return {"uri": e, "stage": index.text(e, ns.TG_STAGE), "message": index.text(e, ns.TG_ERROR_MESSAGE)}
    return None


def build_trace(triples: Iterable[Triple] | TraceIndex, uri: str, *, labels: Mapping[str, str] | None = None,
                answers: Mapping[str, str] | None = None, chains: Chains | None = None,
                removed: Removed = frozenset(), _within: frozenset[str] = frozenset()) -> Json:
    """The structured trace rooted at Question ``uri``.

    :param labels: IRI → ``rdfs:label`` for knowledge-graph terms (edge labels).
    :param answers: librarian document id → text, for the documents the trace stores (answers, an agent's
        thoughts and observations).
    :param chains: canonical edge/chunk key → list of chains (lists of ``{uri, type, label}``).
    :param removed: canonical edge keys and chunk URIs whose source document was removed.
    :param _within: the Questions this one is a sub-trace of (a stored cycle of sub-traces ends there).
    """
    index = triples if isinstance(triples, TraceIndex) else TraceIndex(triples)
    labels, answers, chains = labels or {}, answers or {}, chains or {}
    kind = trace_type(index, uri)
    if kind is None:
        raise LookupError(f"{uri} is not a stored Question (no GraphRAG, DocRAG or agent question type)")
    parent = index.one(uri, ns.PROV_WAS_DERIVED_FROM)
    out: dict[str, Any] = {
        "type": kind, "uri": uri, "question": index.text(uri, ns.TG_QUERY),
        "time": index.text(uri, ns.PROV_STARTED_AT_TIME), "parent": parent.value if parent else None,
        "otel_trace_id": index.text(uri, ns.TG_OTEL_TRACE_ID) or None,
    }
    if kind == "graphrag":
        out.update(_graphrag(index, uri, labels, answers, chains, removed))
    elif kind == "docrag":
        out.update(_docrag(index, uri, answers, chains, removed))
    else:
        out.update(_agent(index, uri, labels, answers, chains, removed, _within | {uri}))
    out["timings"] = stage_timings(index, uri, out["time"])
    out["status"] = trace_status(out)
    return out


def stage_timings(index: TraceIndex, uri: str, started: str | None) -> list[Json]:
    """When each stage of the trace rooted at ``uri`` was produced (``prov:generatedAtTime``), in order:
    ``{uri, stage, at, after_ms}``, ``after_ms`` counted from the Question's start.  Stages of sub-traces
    are theirs; traces stored before stages were stamped have none."""
    root = parse_trace_uri(uri)
    if root is None:
        return []
    start = timestamp_micros(started) if started else None
    found: list[tuple[int, str, Json]] = []
    for s, props in index.props.items():
        stamps = props.get(ns.PROV_GENERATED_AT_TIME)
        stamp = stamps[0].value if stamps else None
        at = timestamp_micros(stamp) if stamp is not None else None
        node = parse_trace_uri(s) if at is not None else None
        if at is None or node is None or (node.kind, node.session) != (root.kind, root.session):
            continue
        after = round((at - start) / 1000, 1) if start is not None else None
        found.append((at, s, {"uri": s, "stage": node.stage, "at": stamp, "after_ms": after}))
    found.sort(key=lambda f: (f[0], natural_key(f[1])))
    return [timing for _, _, timing in found]


def trace_status(trace: Mapping[str, Any]) -> str:
    """``failed`` when an Error stage is stored, ``complete`` when the final stage is, else ``incomplete``."""
    if trace.get("error"):
        return "failed"
    final = trace.get("conclusion") if trace.get("type") == "agent" else trace.get("synthesis")
    return "complete" if final else "incomplete"


def _label(term: Term, labels: Mapping[str, str]) -> str:
    from ..rdf.labels import term_label

    return term_label(term, labels)


def _usage(index: TraceIndex, node: str) -> Json | None:
    """The model call a stage recorded (``tg:inToken``, ``tg:outToken``, ``tg:llmModel``), or None."""
    usage = {"in_token": index.integer(node, ns.TG_IN_TOKEN), "out_token": index.integer(node, ns.TG_OUT_TOKEN),
             "model": index.text(node, ns.TG_LLM_MODEL)}
    return usage if any(v is not None for v in usage.values()) else None


def _number(index: TraceIndex, s: str, p: str) -> float | None:
    v = index.text(s, p)
    try:
        value = float(v) if v is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def _document_text(index: TraceIndex, node: str, answers: Mapping[str, str]) -> str | None:
    """The text of the librarian document ``node`` names with ``tg:document`` (None when not available)."""
    doc = index.text(node, ns.TG_DOCUMENT)
    return answers.get(doc) if doc else None


def _grounding(index: TraceIndex, q: str) -> tuple[str | None, Json | None]:
    g = next(iter(index.derived(q, ns.TG_GROUNDING)), None)
    if g is None:
        return None, None
    return g, {"uri": g, "concepts": [o.value for o in index.props.get(g, {}).get(ns.TG_CONCEPT, [])
                                      if o.type == LITERAL]}


def _synthesis(index: TraceIndex, syn: str, answers: Mapping[str, str]) -> Json:
    doc = index.text(syn, ns.TG_DOCUMENT)
    answer = index.text(syn, ns.TG_CONTENT)
    if answer is None and doc:
        answer = answers.get(doc)
    return {"uri": syn, "document": doc, "answer": answer, "model": index.text(syn, ns.TG_LLM_MODEL),
            "usage": _usage(index, syn)}


def _graphrag(index: TraceIndex, q: str, labels: Mapping[str, str], answers: Mapping[str, str], chains: Chains,
              removed: Removed) -> Json:
    grounding, out_grounding = _grounding(index, q)
    exp = next(iter(index.derived(q, ns.TG_EXPLORATION)), None)
    focus = next(iter(index.derived(exp, ns.TG_FOCUS)), None) if exp else None
    syn = next(iter(index.derived(focus, ns.TG_SYNTHESIS)), None) if focus else None
    out: dict[str, Any] = {"grounding": out_grounding, "exploration": None, "focus": None, "synthesis": None}
    if exp:
        seeds = index.props.get(exp, {}).get(ns.TG_ENTITY, [])
        out["exploration"] = {"uri": exp, "edge_count": index.integer(exp, ns.TG_EDGE_COUNT),
                              "sent_edge_count": index.integer(exp, ns.TG_SENT_EDGE_COUNT),
                              "selection_token_budget": index.integer(exp, ns.TG_SELECTION_TOKEN_BUDGET),
                              "selection_prompt_tokens": index.integer(exp, ns.TG_SELECTION_PROMPT_TOKENS),
                              "seed_entities": [{"uri": s.value, "label": _label(s, labels)} for s in seeds]}
    if focus:
        selected = []
        sels = [o.value for o in index.props.get(focus, {}).get(ns.TG_SELECTED_EDGE, []) if o.type == IRI]
        for sel in sorted(sels, key=natural_key):
            edge = index.one(sel, ns.TG_EDGE)
            item: dict[str, Any] = {"uri": sel, "edge": None, "labels": None,
                                    "reasoning": index.text(sel, ns.TG_REASONING) or "",
                                    "reasoning_unusable": index.text(sel, ns.TG_REASONING_UNUSABLE) or "",
                                    "score": _number(index, sel, ns.TG_SCORE),
                                    "concept": index.text(sel, ns.TG_CONCEPT) or "", "sources": [],
                                    "source_removed": False}
            if edge is not None and edge.type == TRIPLE:
                s, p, o = spo(quoted(edge))
                item["edge"] = {"s": term_json(s), "p": term_json(p), "o": term_json(o)}
                item["labels"] = {"s": _label(s, labels), "p": _label(p, labels), "o": _label(o, labels)}
                item["sources"] = chains.get(serialize_term(edge), [])
                item["source_removed"] = serialize_term(edge) in removed
            selected.append(item)
        out["focus"] = {"uri": focus, "dropped": index.integer(focus, ns.TG_DROPPED_COUNT) or 0,
                        "unusable_reasoning": index.integer(focus, ns.TG_UNUSABLE_REASONING_COUNT) or 0,
                        "usage": _usage(index, focus), "selected_edges": selected}
    if syn:
        out["synthesis"] = _synthesis(index, syn, answers)
    out["error"] = _error(index, [s for s in (focus, exp, grounding, q) if s])
    return out


def _docrag(index: TraceIndex, q: str, answers: Mapping[str, str], chains: Chains, removed: Removed) -> Json:
    grounding, out_grounding = _grounding(index, q)
    exp = next(iter(index.derived(q, ns.TG_EXPLORATION)), None)
    syn = next(iter(index.derived(exp, ns.TG_SYNTHESIS)), None) if exp else None
    out: dict[str, Any] = {"grounding": out_grounding, "exploration": None, "synthesis": None}
    if exp:
        chunks = [o.value for o in index.props.get(exp, {}).get(ns.TG_SELECTED_CHUNK, []) if o.type == IRI]
        out["exploration"] = {
            "uri": exp, "chunk_count": index.integer(exp, ns.TG_CHUNK_COUNT),
            "chunks": [{"uri": c, "chain": (chains.get(c) or [[]])[0], "source_removed": c in removed}
                       for c in chunks]}
    if syn:
        out["synthesis"] = _synthesis(index, syn, answers)
    out["error"] = _error(index, [s for s in (exp, grounding, q) if s])
    return out


def _thought(index: TraceIndex, analysis: str, answers: Mapping[str, str]) -> str | None:
    """An Analysis' thought: inline (v1), or the text of its Thought's librarian document (v2)."""
    thought = index.one(analysis, ns.TG_THOUGHT)
    if thought is None:
        return None
    if thought.type == IRI:
        return _document_text(index, thought.value, answers)
    return thought.value if thought.type == LITERAL else None


def _agent(index: TraceIndex, q: str, labels: Mapping[str, str], answers: Mapping[str, str], chains: Chains,
           removed: Removed, within: frozenset[str]) -> Json:
    """Question <- Analysis <- Observation <- Analysis ... <- Conclusion (react, v2; the router's PatternDecision
    beside it); Analysis <- Analysis (v1); Question [+ PatternDecision] <- Plan <- StepResults <- Synthesis <-
    Conclusion; Question [+ PatternDecision] <- Decomposition <- (sub-agents) <- Findings <- Synthesis <- Conclusion."""
    analyses, conclusion, seen = [], None, set()
    pattern: Json | None = None
    plan_or_decomposition = ""
    node: str | None = q
    while node and node not in seen:
        seen.add(node)
        nxt = None
        for child in index.derived(node):
            types = index.types(child)
            if ns.TG_PATTERN_DECISION in types:
                pattern = {"uri": child, "pattern": index.text(child, ns.TG_PATTERN),
                           "reason": index.text(child, ns.TG_REASONING), "usage": _usage(index, child)}
            elif ns.TG_PLAN in types or ns.TG_DECOMPOSITION in types:
                plan_or_decomposition = child
            elif ns.TG_ANALYSIS in types:
                args = index.text(child, ns.TG_ARGUMENTS)
                try:
                    parsed = json.loads(args) if args else {}
                except (ValueError, RecursionError):  # not JSON, or nested too deep to read
                    parsed = args
                obs = next(iter(index.derived(child, ns.TG_OBSERVATION_TYPE)), None)
                analyses.append({
                    "uri": child, "thought": _thought(index, child, answers),
                    "action": index.text(child, ns.TG_ACTION), "arguments": parsed, "usage": _usage(index, child),
                    "observation_uri": obs,
                    "observation": _document_text(index, obs, answers) if obs else index.text(child, ns.TG_OBSERVATION),
                    "tool_error": index.text(obs or child, ns.TG_TOOL_ERROR),
                    "sub_traces": _sub_traces(index, child, labels, answers, chains, removed, within)})
                nxt = obs or child
            elif ns.TG_CONCLUSION in types:
                conclusion = _conclusion(index, child, answers)
        node = nxt
    out: Json = {"pattern": pattern, "analyses": analyses, "plan": None, "step_results": [], "decomposition": None,
                 "findings": [], "synthesis": None}
    stages = [s for a in reversed(analyses) for s in (a["observation_uri"], a["uri"]) if s]
    if plan_or_decomposition:
        out.update(_branches(index, plan_or_decomposition, labels, answers, chains, removed, within))
        branches = [b["uri"] for b in (*out["step_results"], *out["findings"])]
        syn = out["synthesis"]
        stages = [*([syn["uri"]] if syn else []), *reversed(branches), plan_or_decomposition]
        if syn:
            conclusion = next((_conclusion(index, c, answers) for c in index.derived(syn["uri"], ns.TG_CONCLUSION)),
                              None)
    if pattern:
        stages.append(pattern["uri"])
    out["conclusion"] = conclusion
    out["error"] = _error(index, [*stages, q])
    return out


def _conclusion(index: TraceIndex, node: str, answers: Mapping[str, str]) -> Json:
    return {"uri": node, "document": index.text(node, ns.TG_DOCUMENT),
            "answer": index.text(node, ns.TG_ANSWER) or _document_text(index, node, answers),
            "termination_reason": index.text(node, ns.TG_TERMINATION_REASON), "usage": _usage(index, node)}


def _sub_traces(index: TraceIndex, node: str, labels: Mapping[str, str], answers: Mapping[str, str],
                chains: Chains, removed: Removed, within: frozenset[str]) -> list[Json]:
    """The traces whose Question is derived from ``node`` (a tool call's query, a supervisor's sub-agents)."""
    return [build_trace(index, s, labels=labels, answers=answers, chains=chains, removed=removed, _within=within)
            for s in index.derived(node) if trace_type(index, s) and s not in within
            and len(within) < MAX_SUBTRACE_DEPTH]


def _parents(index: TraceIndex, node: str) -> list[str]:
    return sorted((o.value for o in index.props.get(node, {}).get(ns.PROV_WAS_DERIVED_FROM, []) if o.type == IRI),
                  key=natural_key)


def _branches(index: TraceIndex, head: str, labels: Mapping[str, str], answers: Mapping[str, str], chains: Chains,
              removed: Removed, within: frozenset[str]) -> Json:
    """A Plan and its StepResults, or a Decomposition, its sub-agents and Findings; the Synthesis that joins them.

    ``inputs`` of a node are all it is derived from: the joins of the DAG."""
    out: Json = {}
    branch_type = ns.TG_STEP_RESULT if ns.TG_PLAN in index.types(head) else ns.TG_FINDING
    branches = []
    for b in sorted(index.derived(head, branch_type), key=lambda u: (index.integer(u, ns.TG_STEP_NUMBER) or 0,
                                                                       natural_key(u))):
        entry: Json = {"uri": b, "number": index.integer(b, ns.TG_STEP_NUMBER), "inputs": _parents(index, b),
                 "result": _document_text(index, b, answers), "error": index.text(b, ns.TG_TOOL_ERROR)}
        if branch_type == ns.TG_STEP_RESULT:
            entry.update(goal=index.text(b, ns.TG_PLAN_STEP), tool=index.text(b, ns.TG_ACTION),
                         sub_traces=_sub_traces(index, b, labels, answers, chains, removed, within))
        else:
            entry.update(goal=index.text(b, ns.TG_SUBAGENT_GOAL))
        branches.append(entry)
    if branch_type == ns.TG_STEP_RESULT:
        steps = sorted((o.value for o in index.props.get(head, {}).get(ns.TG_PLAN_STEP, [])), key=natural_key)
        out["plan"] = {"uri": head, "steps": steps, "usage": _usage(index, head)}
        out["step_results"] = branches
    else:
        goals = [o.value for o in index.props.get(head, {}).get(ns.TG_SUBAGENT_GOAL, [])]
        subs = _sub_traces(index, head, labels, answers, chains, removed, within)
        out["decomposition"] = {"uri": head, "goals": goals, "usage": _usage(index, head), "sub_agents": subs}
        out["findings"] = branches
    syn = next((c for b in branches for c in index.derived(b["uri"], ns.TG_SYNTHESIS)), None)
    if syn:
        out["synthesis"] = {"uri": syn, "inputs": _parents(index, syn), "document": index.text(syn, ns.TG_DOCUMENT),
                            "answer": _document_text(index, syn, answers), "usage": _usage(index, syn)}
    return out
