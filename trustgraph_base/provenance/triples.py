"""Trace builders for GraphRAG, DocumentRAG and extraction provenance.

Each builder returns a list of :class:`Triple` in a named graph (query time:
``urn:graph:retrieval``; extraction: ``urn:graph:source``).  Values that are not text are
typed literals (``xsd:dateTime``, ``xsd:integer``, ``xsd:double``).  Builders validate their inputs: an
invalid IRI raises :class:`~trustgraph_base.rdf.terms.TermError`, so nothing unparseable
ever reaches a store or an export.

Shared constant terms (predicates, classes) are module-level singletons, so building a trace
costs little per triple (the ``codec`` benchmark in ``bench/README.md``).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ..rdf.terms import TermError, validate_iri, validate_term
from ..schema.primitives import IRI, LITERAL, TRIPLE, Term, Triple
from . import namespaces as ns

__all__ = [
    "EdgeSelection", "LlmUsage", "SelectionCut", "edge_id", "timestamp_literal", "stage_time_triple", "in_graph",
    "question_triples", "grounding_triples", "exploration_triples", "focus_triples", "synthesis_triples",
    "error_triples", "docrag_question_triples", "docrag_exploration_triples", "docrag_synthesis_triples",
    "document_triples", "page_triples", "chunk_triples", "subgraph_triples", "activity_triples",
    "FINAL_STAGE_TYPES", "ends_a_trace", "OTEL_TRACE_ID",
]

#: An OpenTelemetry trace id as a Question records it (``tg:otelTraceId``): 32 lowercase hex digits.
OTEL_TRACE_ID = re.compile(r"[0-9a-f]{32}")

_TERMS: dict[str, Term] = {}


def _c(iri: str) -> Term:
    """A shared constant IRI term (never mutate it)."""
    t = _TERMS.get(iri)
    if t is None:
        t = _TERMS[iri] = Term(IRI, iri)
    return t


A = _c(ns.RDF_TYPE)
LABEL = _c(ns.RDFS_LABEL)


def _iri(value: str) -> Term:
    return Term(IRI, validate_iri(value))


def _text(value: str) -> Term:
    return validate_term(Term(LITERAL, value))


def _int(value: int) -> Term:
    if type(value) is not int:
        raise TermError(f"expected an integer, got {type(value).__name__}")
    return Term(LITERAL, str(value), ns.XSD_INTEGER)


def _double(value: float) -> Term:
    if type(value) is not float:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TermError(f"expected a finite number, got {value!r}")
        value = float(value)
    if not math.isfinite(value):
        raise TermError(f"expected a finite number, got {value!r}")
    return Term(LITERAL, repr(value), ns.XSD_DOUBLE)


def timestamp_literal(when: datetime | str | None = None) -> Term:
    """An ``xsd:dateTime`` literal (UTC, millisecond precision); ``None`` means now."""
    if when is None:
        when = datetime.now(UTC)
    if isinstance(when, datetime):
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        text = when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    else:
        text = str(when)
        try:
            datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise TermError(f"invalid timestamp {text!r}") from None
    return Term(LITERAL, text, ns.XSD_DATETIME)


def edge_id(s: str, p: str, o: str) -> str:
    """The id the LLM sees for an edge: first 8 hex digits of ``sha256("s|p|o")``."""
    return hashlib.sha256(f"{s}|{p}|{o}".encode()).hexdigest()[:8]


def in_graph(triples: Iterable[Triple], graph: str) -> list[Triple]:
    """Copies of ``triples`` placed in named graph ``graph`` (``""`` = default graph)."""
    if graph:
        validate_iri(graph)
    return [Triple(t.s, t.p, t.o, graph) for t in triples]


@dataclass(slots=True)
class EdgeSelection:
    """One edge the selector chose, with the original terms, its stated reason and, when the selector gave them,
    its score and the concept (a seed entity or an anchor of the question) it was reached from."""

    edge: Triple
    reasoning: str = ""
    edge_id: str = ""
    score: float | None = None
    concept: str = ""
    #: why the reasoning is unusable ("" when it is usable): it copies the prompt's example, or the same text
    #: was given for many edges; the edge stays selected
    unusable: str = ""


@dataclass(frozen=True, slots=True)
class SelectionCut:
    """How the candidate edges were cut to the edge-selection prompt's token budget (``tg:sentEdgeCount``,
    ``tg:selectionTokenBudget`` (0: none), ``tg:selectionPromptTokens``)."""

    sent: int
    budget: int = 0
    prompt_tokens: int = 0


@dataclass(frozen=True, slots=True)
class LlmUsage:
    """What one model call of a stage cost and which model answered (``tg:inToken``, ``tg:outToken``,
    ``tg:llmModel``); a count of None is one the endpoint did not report (no triple: unknown, not 0)."""

    in_token: int | None = 0
    out_token: int | None = 0
    model: str = ""


def _types(uri: Term, g: str, *classes: str) -> list[Triple]:
    return [Triple(uri, A, _c(c), g) for c in classes]


def _usage(out: list[Triple], node: Term, usage: LlmUsage | None, graph: str) -> None:
    """The usage of the model call a stage made (nothing for a stage that made none)."""
    if usage is None:
        return
    if usage.in_token is not None:
        out.append(Triple(node, _c(ns.TG_IN_TOKEN), _int(usage.in_token), graph))
    if usage.out_token is not None:
        out.append(Triple(node, _c(ns.TG_OUT_TOKEN), _int(usage.out_token), graph))
    if usage.model:
        out.append(Triple(node, _c(ns.TG_LLM_MODEL), _text(usage.model), graph))


# ---------------------------------------------------------------- GraphRAG
def question_triples(question_uri: str, query: str, timestamp: datetime | str | None = None, *,
                     parent_uri: str = "", graph: str = ns.GRAPH_RETRIEVAL,
                     question_type: str = ns.TG_GRAPH_RAG_QUESTION,
                     label: str = "GraphRAG question", otel_trace_id: str = "") -> list[Triple]:
    """The Question activity: what was asked, when, and (for sub-queries) which Analysis asked.

    ``otel_trace_id``: the OpenTelemetry trace of the query (32 hex digits), when tracing is on.
    """
    q = _iri(question_uri)
    out = _types(q, graph, ns.PROV_ACTIVITY, ns.TG_QUESTION, question_type)
    out.append(Triple(q, LABEL, _text(label), graph))
    out.append(Triple(q, _c(ns.PROV_STARTED_AT_TIME), timestamp_literal(timestamp), graph))
    out.append(Triple(q, _c(ns.TG_QUERY), _text(query), graph))
    if parent_uri:
        out.append(Triple(q, _c(ns.PROV_WAS_DERIVED_FROM), _iri(parent_uri), graph))
    out += otel_trace_triples(q, otel_trace_id, graph)
    return out


def otel_trace_triples(question: Term, otel_trace_id: str, graph: str) -> list[Triple]:
    """``tg:otelTraceId`` of a Question: the OpenTelemetry trace id, 32 lower-case hex digits (none when "")."""
    if not otel_trace_id:
        return []
    if not OTEL_TRACE_ID.fullmatch(otel_trace_id):
        raise ValueError(f"not an OpenTelemetry trace id: {otel_trace_id[:64]!r}")
    return [Triple(question, _c(ns.TG_OTEL_TRACE_ID), _c_lit(otel_trace_id), graph)]


def grounding_triples(grounding_uri: str, question_uri: str, concepts: Sequence[str], *,
                      graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The Grounding entity: the concepts the retrieval started from, derived from the Question."""
    g = _iri(grounding_uri)
    out = _types(g, graph, ns.PROV_ENTITY, ns.TG_GROUNDING)
    out.append(Triple(g, LABEL, _c_lit("Grounding"), graph))
    out.append(Triple(g, _c(ns.PROV_WAS_DERIVED_FROM), _iri(question_uri), graph))
    concept = _c(ns.TG_CONCEPT)
    for text in dict.fromkeys(concepts):
        out.append(Triple(g, concept, _text(text), graph))
    return out


def exploration_triples(exploration_uri: str, question_uri: str, edge_count: int,
                        entities: Sequence[Term] = (), *, grounding_uri: str = "", cut: SelectionCut | None = None,
                        graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The Exploration entity: how many edges were retrieved, from which seed entities; generated by the
    Question and derived from its Grounding.

    :param cut: how many of the edges the edge selector was shown, under which token budget (none when
        nothing was sent to a selector).
    """
    e = _iri(exploration_uri)
    out = _types(e, graph, ns.PROV_ENTITY, ns.TG_EXPLORATION)
    out.append(Triple(e, LABEL, _c_lit("Exploration"), graph))
    out.append(Triple(e, _c(ns.PROV_WAS_GENERATED_BY), _iri(question_uri), graph))
    if grounding_uri:
        out.append(Triple(e, _c(ns.PROV_WAS_DERIVED_FROM), _iri(grounding_uri), graph))
    out.append(Triple(e, _c(ns.TG_EDGE_COUNT), _int(edge_count), graph))
    if cut is not None:
        if not 0 <= cut.sent <= edge_count:
            raise ValueError(f"{cut.sent} edges sent to the selector, but {edge_count} retrieved")
        out.append(Triple(e, _c(ns.TG_SENT_EDGE_COUNT), _int(cut.sent), graph))
        out.append(Triple(e, _c(ns.TG_SELECTION_TOKEN_BUDGET), _int(cut.budget), graph))
        out.append(Triple(e, _c(ns.TG_SELECTION_PROMPT_TOKENS), _int(cut.prompt_tokens), graph))
    ent = _c(ns.TG_ENTITY)
    for term in entities:
        out.append(Triple(e, ent, validate_term(term), graph))
    return out


def focus_triples(focus_uri: str, exploration_uri: str, selections: Sequence[EdgeSelection | tuple[Triple, str]],
                  session_id: str, *, dropped: int = 0, usage: LlmUsage | None = None,
                  unusable: int | None = None, graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The Focus entity and one EdgeSelection per selected edge (``tg:edge <<( s p o )>>``, reasoning, and the
    selector's score and concept when it gave them).

    :param selections: ``EdgeSelection`` objects or ``(Triple, reasoning)`` pairs, with the
        edge's **original** terms.
    :param dropped: how many lines of the LLM's selection output were unusable.
    :param unusable: how many selections have an unusable reasoning (default: counted from ``selections``).
    :param usage: the edge-selection model call (none when no model was asked: nothing to select from).
    """
    from .uris import edge_selection_uri

    f = _iri(focus_uri)
    out = _types(f, graph, ns.PROV_ENTITY, ns.TG_FOCUS)
    out.append(Triple(f, LABEL, _c_lit("Focus"), graph))
    out.append(Triple(f, _c(ns.PROV_WAS_DERIVED_FROM), _iri(exploration_uri), graph))
    if dropped:
        out.append(Triple(f, _c(ns.TG_DROPPED_COUNT), _int(dropped), graph))
    if unusable is None:
        unusable = sum(1 for sel in selections if isinstance(sel, EdgeSelection) and sel.unusable)
    if unusable:
        out.append(Triple(f, _c(ns.TG_UNUSABLE_REASONING_COUNT), _int(unusable), graph))
    _usage(out, f, usage, graph)
    sel_p, edge_p, reason_p = _c(ns.TG_SELECTED_EDGE), _c(ns.TG_EDGE), _c(ns.TG_REASONING)
    score_p, concept_p = _c(ns.TG_SCORE), _c(ns.TG_CONCEPT)
    sel_type = _c(ns.TG_EDGE_SELECTION)
    # Selection i is "<prefix><i>": the prefix is checked once, and digits keep an IRI valid.
    prefix = edge_selection_uri(session_id, 0)[:-1]
    validate_iri(prefix + "0")
    concepts: dict[str, Term] = {}  # a few concepts reach many edges: each literal is checked once
    for i, sel in enumerate(selections):
        if isinstance(sel, EdgeSelection):
            edge, reasoning, score, concept, why = sel.edge, sel.reasoning, sel.score, sel.concept, sel.unusable
        else:
            (edge, reasoning), score, concept, why = sel, None, "", ""
        quoted = validate_term(Term(TRIPLE, triple=Triple(edge.s, edge.p, edge.o)))
        u = Term(IRI, f"{prefix}{i}")
        out.append(Triple(f, sel_p, u, graph))
        out.append(Triple(u, A, sel_type, graph))
        out.append(Triple(u, edge_p, quoted, graph))
        if reasoning:
            out.append(Triple(u, reason_p, _text(reasoning), graph))
        if why:
            out.append(Triple(u, _c(ns.TG_REASONING_UNUSABLE), _text(why), graph))
        if score is not None:
            out.append(Triple(u, score_p, _double(score), graph))
        if concept:
            term = concepts.get(concept)
            if term is None:
                term = concepts[concept] = _text(concept)
            out.append(Triple(u, concept_p, term, graph))
    return out


def synthesis_triples(synthesis_uri: str, focus_uri: str, document_uri: str = "", *, content: str = "",
                      usage: LlmUsage | None = None, graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The Synthesis entity: derived from the Focus; the answer text is in the librarian at ``document_uri``.

    :param usage: the synthesis model call (none when the answer needed no model: nothing was selected).
    """
    s = _iri(synthesis_uri)
    out = _types(s, graph, ns.PROV_ENTITY, ns.TG_SYNTHESIS)
    out.append(Triple(s, LABEL, _c_lit("Synthesis"), graph))
    out.append(Triple(s, _c(ns.PROV_WAS_DERIVED_FROM), _iri(focus_uri), graph))
    if document_uri:
        out.append(Triple(s, _c(ns.TG_DOCUMENT), _iri(document_uri), graph))
    if content:
        out.append(Triple(s, _c(ns.TG_CONTENT), _text(content), graph))
    _usage(out, s, usage, graph)
    return out


def error_triples(error_uri: str, parent_uri: str, message: str, stage: str, *,
                  graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """An Error entity recording how far a failed query got (derived from its last completed stage)."""
    e = _iri(error_uri)
    out = _types(e, graph, ns.PROV_ENTITY, ns.TG_ERROR)
    out.append(Triple(e, LABEL, _c_lit("Error"), graph))
    out.append(Triple(e, _c(ns.PROV_WAS_DERIVED_FROM), _iri(parent_uri), graph))
    out.append(Triple(e, _c(ns.TG_STAGE), _text(stage), graph))
    out.append(Triple(e, _c(ns.TG_ERROR_MESSAGE), _text(message[:4000]), graph))
    return out


def stage_time_triple(stage_uri: str, when: datetime | str | None = None, *,
                      graph: str = ns.GRAPH_RETRIEVAL) -> Triple:
    """``prov:generatedAtTime`` of a stage after the Question: when the query produced it (``None``: now).

    Added by the query session as it records each stage, so the builders above stay pure and a trace
    says where its time went (the Question's ``prov:startedAtTime`` is the start).
    """
    return Triple(_iri(stage_uri), _c(ns.PROV_GENERATED_AT_TIME), timestamp_literal(when), graph)


#: Stage classes no other stage of the same trace follows: a GraphRAG or DocumentRAG Synthesis,
#: an agent's Conclusion, the Error of a failed query.
FINAL_STAGE_TYPES = frozenset({ns.TG_SYNTHESIS, ns.TG_CONCLUSION, ns.TG_ERROR})


def ends_a_trace(triples: Iterable[Triple]) -> bool:
    """Whether ``triples`` hold a final stage (``?x rdf:type`` one of :data:`FINAL_STAGE_TYPES`).

    A writer that waits for a trace's stages to share one write stops waiting here: nothing of
    that trace comes after it.  (A nested trace, e.g. an agent's GraphRAG tool call, ends its own
    trace; the enclosing one goes on, and its later stages simply form the next write.)
    """
    for t in triples:
        if t.p is not None and t.p.value == ns.RDF_TYPE and t.o is not None and t.o.value in FINAL_STAGE_TYPES:
            return True
    return False


# ---------------------------------------------------------------- DocumentRAG
def docrag_question_triples(question_uri: str, query: str, timestamp: datetime | str | None = None, *,
                            parent_uri: str = "", graph: str = ns.GRAPH_RETRIEVAL,
                            otel_trace_id: str = "") -> list[Triple]:
    return question_triples(question_uri, query, timestamp, parent_uri=parent_uri, graph=graph,
                            question_type=ns.TG_DOC_RAG_QUESTION, label="DocumentRAG question",
                            otel_trace_id=otel_trace_id)


def docrag_exploration_triples(exploration_uri: str, question_uri: str, chunk_uris: Sequence[str], *,
                               grounding_uri: str = "", graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The Exploration of a DocumentRAG query: which chunks were retrieved (extraction-provenance URIs);
    generated by the Question and derived from its Grounding."""
    e = _iri(exploration_uri)
    out = _types(e, graph, ns.PROV_ENTITY, ns.TG_EXPLORATION)
    out.append(Triple(e, LABEL, _c_lit("Exploration"), graph))
    out.append(Triple(e, _c(ns.PROV_WAS_GENERATED_BY), _iri(question_uri), graph))
    if grounding_uri:
        out.append(Triple(e, _c(ns.PROV_WAS_DERIVED_FROM), _iri(grounding_uri), graph))
    out.append(Triple(e, _c(ns.TG_CHUNK_COUNT), _int(len(chunk_uris)), graph))
    sel = _c(ns.TG_SELECTED_CHUNK)
    for c in chunk_uris:
        out.append(Triple(e, sel, _iri(c), graph))
    return out


def docrag_synthesis_triples(synthesis_uri: str, exploration_uri: str, content: str, document_uri: str = "", *,
                             usage: LlmUsage | None = None, graph: str = ns.GRAPH_RETRIEVAL) -> list[Triple]:
    """The Synthesis of a DocumentRAG query: the answer, inline and in the librarian; ``usage``: its model call
    (none when no chunk was found and no model was asked)."""
    s = _iri(synthesis_uri)
    out = _types(s, graph, ns.PROV_ENTITY, ns.TG_SYNTHESIS)
    out.append(Triple(s, LABEL, _c_lit("Synthesis"), graph))
    out.append(Triple(s, _c(ns.PROV_WAS_DERIVED_FROM), _iri(exploration_uri), graph))
    out.append(Triple(s, _c(ns.TG_CONTENT), _text(content), graph))
    if document_uri:
        out.append(Triple(s, _c(ns.TG_DOCUMENT), _iri(document_uri), graph))
    _usage(out, s, usage, graph)
    return out


# ---------------------------------------------------------------- extraction (urn:graph:source)
def document_triples(doc_uri: str, title: str, mime_type: str = "", page_count: int = 0, *,
                     graph: str = ns.GRAPH_SOURCE) -> list[Triple]:
    d = _iri(doc_uri)
    out = _types(d, graph, ns.PROV_ENTITY, ns.TG_DOCUMENT_TYPE)
    if title:
        out.append(Triple(d, _c(ns.DC_TITLE), _text(title), graph))
        out.append(Triple(d, LABEL, _text(title), graph))
    if mime_type:
        out.append(Triple(d, _c(ns.TG_MIME_TYPE), _text(mime_type), graph))
    if page_count:
        out.append(Triple(d, _c(ns.TG_PAGE_COUNT), _int(page_count), graph))
    return out


def page_triples(page_uri: str, doc_uri: str, page_number: int, *, activity_uri: str = "", label: str = "",
                 graph: str = ns.GRAPH_SOURCE) -> list[Triple]:
    """A Page of a document; ``label`` names its unit (``Slide 3: Results``; default ``Page <number>``)."""
    p = _iri(page_uri)
    out = _types(p, graph, ns.PROV_ENTITY, ns.TG_PAGE_TYPE)
    out.append(Triple(p, LABEL, _text(label or f"Page {page_number}"), graph))
    out.append(Triple(p, _c(ns.TG_PAGE_NUMBER), _int(page_number), graph))
    out.append(Triple(p, _c(ns.PROV_WAS_DERIVED_FROM), _iri(doc_uri), graph))
    if activity_uri:
        out.append(Triple(p, _c(ns.PROV_WAS_GENERATED_BY), _iri(activity_uri), graph))
    return out


def chunk_triples(chunk_uri: str, page_uri: str, chunk_index: int, char_offset: int, char_length: int, *,
                  activity_uri: str = "", graph: str = ns.GRAPH_SOURCE) -> list[Triple]:
    c = _iri(chunk_uri)
    out = _types(c, graph, ns.PROV_ENTITY, ns.TG_CHUNK_TYPE)
    out.append(Triple(c, LABEL, _text(f"Chunk {chunk_index}"), graph))
    out.append(Triple(c, _c(ns.TG_CHUNK_INDEX), _int(chunk_index), graph))
    out.append(Triple(c, _c(ns.TG_CHAR_OFFSET), _int(char_offset), graph))
    out.append(Triple(c, _c(ns.TG_CHAR_LENGTH), _int(char_length), graph))
    out.append(Triple(c, _c(ns.PROV_WAS_DERIVED_FROM), _iri(page_uri), graph))
    if activity_uri:
        out.append(Triple(c, _c(ns.PROV_WAS_GENERATED_BY), _iri(activity_uri), graph))
    return out


def subgraph_triples(subgraph_uri: str, chunk_uri: str, extracted: Iterable[Triple], *, activity_uri: str = "",
                     graph: str = ns.GRAPH_SOURCE) -> list[Triple]:
    """The Subgraph of one chunk: ``tg:contains <<( s p o )>>`` for every triple extracted from it."""
    sg = _iri(subgraph_uri)
    out = _types(sg, graph, ns.PROV_ENTITY, ns.TG_SUBGRAPH_TYPE)
    out.append(Triple(sg, _c(ns.PROV_WAS_DERIVED_FROM), _iri(chunk_uri), graph))
    if activity_uri:
        out.append(Triple(sg, _c(ns.PROV_WAS_GENERATED_BY), _iri(activity_uri), graph))
    contains = _c(ns.TG_CONTAINS)
    for t in extracted:
        out.append(Triple(sg, contains, validate_term(Term(TRIPLE, triple=Triple(t.s, t.p, t.o))), graph))
    return out


def activity_triples(activity_uri: str, component: str, version: str, *, model: str = "",
                     used_uri: str = "", timestamp: datetime | str | None = None,
                     graph: str = ns.GRAPH_SOURCE) -> list[Triple]:
    """An extraction Activity and the software Agent that ran it (component, version, model).

    The activity URI is derived from the component and its input, and no time is recorded
    unless ``timestamp`` is given, so processing the same input again writes the same
    triples (re-loading a document is idempotent).
    """
    from .uris import agent_uri

    a = _iri(activity_uri)
    ag = _iri(agent_uri(component))
    out = _types(a, graph, ns.PROV_ACTIVITY)
    out.append(Triple(a, LABEL, _text(component), graph))
    out.append(Triple(a, _c(ns.PROV_WAS_ASSOCIATED_WITH), ag, graph))
    if timestamp is not None:
        out.append(Triple(a, _c(ns.PROV_STARTED_AT_TIME), timestamp_literal(timestamp), graph))
    if used_uri:
        out.append(Triple(a, _c(ns.PROV_USED), _iri(used_uri), graph))
    out.append(Triple(ag, A, _c(ns.PROV_AGENT), graph))
    out.append(Triple(ag, LABEL, _text(component), graph))
    out.append(Triple(ag, _c(ns.TG_COMPONENT_VERSION), _text(version), graph))
    if model:
        out.append(Triple(ag, _c(ns.TG_LLM_MODEL), _text(model), graph))
    return out


_LITS: dict[str, Term] = {}


def _c_lit(text: str) -> Term:
    """A shared constant plain literal (never mutate it)."""
    t = _LITS.get(text)
    if t is None:
        t = _LITS[text] = Term(LITERAL, text)
    return t
