"""Provenance URIs and trace builders (docs/trace-model.md): exact URIs, triples, types, bad input."""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from trustgraph_base.provenance import (
    TG,
    EdgeSelection,
    LlmUsage,
    activity_triples,
    agent_final_triples,
    agent_iteration_triples,
    agent_observation_triples,
    agent_session_triples,
    agent_thought_triples,
    chunk_triples,
    docrag_exploration_triples,
    docrag_question_triples,
    docrag_synthesis_triples,
    document_triples,
    edge_id,
    error_triples,
    exploration_triples,
    focus_triples,
    grounding_triples,
    in_graph,
    page_triples,
    question_triples,
    subgraph_triples,
    synthesis_triples,
    timestamp_literal,
    uris,
    vocabulary_labels,
    vocabulary_triples,
)
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.rdf.terms import MAX_LITERAL_LENGTH, MAX_TRIPLE_DEPTH, TermError, validate_triple
from trustgraph_base.schema import IRI, LITERAL, TRIPLE, Term, Triple, blank, iri, literal, triple_term

pytestmark = pytest.mark.unit

XSD = ns.XSD
G = ns.GRAPH_RETRIEVAL
WHEN = datetime(2025, 6, 1, 9, 30, 0, 123456, tzinfo=UTC)
SID = "3f2b9c1e-0000-4000-8000-000000000001"


def props(triples: list[Triple], subject: str) -> dict[str, list[Term]]:
    """predicate IRI -> objects, for one subject."""
    out: dict[str, list[Term]] = {}
    for t in triples:
        if t.s.value == subject:
            out.setdefault(t.p.value, []).append(t.o)
    return out


def types(triples: list[Triple], subject: str) -> set[str]:
    return {o.value for o in props(triples, subject).get(ns.RDF_TYPE, [])}


def only(triples: list[Triple], subject: str, predicate: str) -> Term:
    values = props(triples, subject).get(predicate, [])
    assert len(values) == 1, f"{subject} {predicate}: {values}"
    return values[0]


def assert_well_formed(triples: list[Triple], graph: str) -> None:
    for t in triples:
        validate_triple(t)
        assert t.g == graph


# ---------------------------------------------------------------- URI patterns (docs/trace-model.md)

def test_graphrag_uris():
    assert uris.question_uri(SID) == f"urn:trustgraph:question:{SID}"
    assert uris.exploration_uri(SID) == f"urn:trustgraph:prov:exploration:{SID}"
    assert uris.focus_uri(SID) == f"urn:trustgraph:prov:focus:{SID}"
    assert uris.edge_selection_uri(SID, 0) == f"urn:trustgraph:prov:edge:{SID}:0"
    assert uris.edge_selection_uri(SID, 12) == f"urn:trustgraph:prov:edge:{SID}:12"
    assert uris.synthesis_uri(SID) == f"urn:trustgraph:prov:synthesis:{SID}"
    assert uris.answer_document_uri(SID) == f"urn:trustgraph:answer:{SID}"
    assert uris.error_uri(SID) == f"urn:trustgraph:prov:error:{SID}"


def test_docrag_uris():
    assert uris.docrag_question_uri(SID) == f"urn:trustgraph:docrag:{SID}"
    assert uris.docrag_exploration_uri(SID) == f"urn:trustgraph:docrag:{SID}/exploration"
    assert uris.docrag_synthesis_uri(SID) == f"urn:trustgraph:docrag:{SID}/synthesis"
    assert uris.docrag_answer_uri(SID) == f"urn:trustgraph:docrag:{SID}/answer"


def test_agent_uris():
    assert uris.agent_session_uri("sess-1") == "urn:trustgraph:agent:sess-1"
    assert uris.agent_iteration_uri("sess-1", 1) == "urn:trustgraph:agent:sess-1/i1"
    assert uris.agent_iteration_uri("sess-1", 10) == "urn:trustgraph:agent:sess-1/i10"
    assert uris.agent_final_uri("sess-1") == "urn:trustgraph:agent:sess-1/final"
    assert uris.agent_error_uri("sess-1") == "urn:trustgraph:agent:sess-1/error"
    with pytest.raises(ValueError, match="numbered from 1"):
        uris.agent_iteration_uri("sess-1", 0)


@pytest.mark.parametrize("bad", ["", "a b", "a/b", "<x>", "-lead", "x" * 129, "é"])
def test_agent_session_ids_are_checked(bad):
    with pytest.raises(ValueError, match="invalid session id"):
        uris.agent_session_uri(bad)


def test_new_id_is_a_uuid4():
    a, b = uris.new_id(), uris.new_id()
    assert a != b and uuid.UUID(a).version == 4


def test_extraction_uris_are_deterministic_and_valid():
    page = uris.page_uri("urn:document:d", 1)
    assert page == uris.page_uri("urn:document:d", 1) != uris.page_uri("urn:document:d", 2)
    assert re.fullmatch(r"urn:page:[0-9a-f\-]{36}", uris.page_uri("urn:document:d", 1))
    assert re.fullmatch(r"urn:chunk:[0-9a-f\-]{36}", uris.chunk_uri("urn:document:d", 1, 0))
    assert uris.document_uri("my report.pdf") == "urn:document:my%20report.pdf"
    assert uris.document_uri("https://example.org/doc") == "https://example.org/doc"
    assert uris.subgraph_uri("urn:chunk:1") == "https://trustgraph.ai/subgraph/urn%3Achunk%3A1"
    assert uris.entity_uri("Marie Curie") == "http://trustgraph.ai/e/marie-curie"
    for value in (uris.entity_uri("漢字 <x>"), uris.activity_uri("kg extract", "urn:chunk:1"), uris.agent_uri("a b")):
        validate_triple(Triple(iri(value), iri(ns.RDFS_LABEL), literal("x")))


# ---------------------------------------------------------------- edge ids

def test_edge_id_is_first_8_hex_of_sha256_of_s_p_o():
    assert edge_id("Marie Curie", "won", "Nobel Prize") == "ac87eef7"
    s, p, o = "http://example.org/e/curie", "http://example.org/r/won", "http://example.org/e/nobel"
    assert edge_id(s, p, o) == hashlib.sha256(f"{s}|{p}|{o}".encode()).hexdigest()[:8] == "2a5f3db3"
    assert edge_id("a", "b", "c") != edge_id("a", "c", "b")
    assert re.fullmatch(r"[0-9a-f]{8}", edge_id("é", "😀", ""))


# ---------------------------------------------------------------- timestamps

def test_timestamp_literal():
    assert timestamp_literal(WHEN) == literal("2025-06-01T09:30:00.123Z", datatype=XSD + "dateTime")
    naive = datetime(2025, 6, 1, 9, 30)
    assert timestamp_literal(naive).value == "2025-06-01T09:30:00.000Z"
    paris = datetime(2025, 6, 1, 11, 30, tzinfo=timezone(timedelta(hours=2)))
    assert timestamp_literal(paris).value == "2025-06-01T09:30:00.000Z"
    assert timestamp_literal("2025-06-01T09:30:00Z").value == "2025-06-01T09:30:00Z"
    now = timestamp_literal()
    assert now.datatype == XSD + "dateTime" and now.value.endswith("Z")
    with pytest.raises(TermError, match="invalid timestamp"):
        timestamp_literal("yesterday")


# ---------------------------------------------------------------- GraphRAG builders

def test_question_triples():
    q = uris.question_uri(SID)
    ts = question_triples(q, "Who discovered radium?", WHEN)
    assert_well_formed(ts, G)
    assert types(ts, q) == {ns.PROV_ACTIVITY, ns.TG_QUESTION, ns.TG_GRAPH_RAG_QUESTION}
    assert only(ts, q, ns.TG_QUERY) == literal("Who discovered radium?")
    assert only(ts, q, ns.PROV_STARTED_AT_TIME) == literal("2025-06-01T09:30:00.123Z", datatype=XSD + "dateTime")
    assert only(ts, q, ns.RDFS_LABEL).type == LITERAL
    assert ns.PROV_WAS_DERIVED_FROM not in props(ts, q)
    parent = uris.agent_iteration_uri("sess-1", 2)
    sub = question_triples(q, "sub", WHEN, parent_uri=parent)
    assert only(sub, q, ns.PROV_WAS_DERIVED_FROM) == iri(parent)


def test_grounding_triples():
    q, g = uris.question_uri(SID), uris.grounding_uri(SID)
    assert g == f"urn:trustgraph:prov:grounding:{SID}"
    ts = grounding_triples(g, q, ["Marie Curie", "polonium", "Marie Curie"])
    assert_well_formed(ts, G)
    assert types(ts, g) == {ns.PROV_ENTITY, ns.TG_GROUNDING}
    assert only(ts, g, ns.PROV_WAS_DERIVED_FROM) == iri(q)
    assert props(ts, g)[ns.TG_CONCEPT] == [literal("Marie Curie"), literal("polonium")]  # each concept once
    assert ns.TG_CONCEPT not in props(grounding_triples(g, q, []), g)


def test_exploration_triples():
    q, e = uris.question_uri(SID), uris.exploration_uri(SID)
    seeds = [iri("http://example.org/e/curie"), literal("radium", language="en")]
    ts = exploration_triples(e, q, 42, seeds)
    assert_well_formed(ts, G)
    assert types(ts, e) == {ns.PROV_ENTITY, ns.TG_EXPLORATION}
    assert only(ts, e, ns.PROV_WAS_GENERATED_BY) == iri(q)
    assert ns.PROV_WAS_DERIVED_FROM not in props(ts, e)
    assert only(ts, e, ns.TG_EDGE_COUNT) == literal("42", datatype=XSD + "integer")
    assert props(ts, e)[ns.TG_ENTITY] == seeds
    grounded = exploration_triples(e, q, 42, seeds, grounding_uri=uris.grounding_uri(SID))
    assert only(grounded, e, ns.PROV_WAS_DERIVED_FROM) == iri(uris.grounding_uri(SID))
    assert only(grounded, e, ns.PROV_WAS_GENERATED_BY) == iri(q)


def test_focus_triples_quote_the_original_edges():
    f, e = uris.focus_uri(SID), uris.exploration_uri(SID)
    edges = [
        Triple(iri("http://example.org/e/curie"), iri("http://example.org/r/born"),
               literal("1867", datatype=XSD + "integer"), "urn:graph:ignored"),
        Triple(iri("http://example.org/e/curie"), iri(ns.RDFS_LABEL), literal("Marie Curie", language="en")),
        Triple(blank("b1"), iri("http://example.org/r/said"),
               triple_term(iri("http://example.org/e/a"), iri("http://example.org/r/b"), literal("c"))),
    ]
    selections = [EdgeSelection(edges[0], "born then", edge_id("a", "b", "c")), (edges[1], "its name"), (edges[2], "")]
    ts = focus_triples(f, e, selections, SID, dropped=2)
    assert_well_formed(ts, G)
    assert types(ts, f) == {ns.PROV_ENTITY, ns.TG_FOCUS}
    assert only(ts, f, ns.PROV_WAS_DERIVED_FROM) == iri(e)
    assert only(ts, f, ns.TG_DROPPED_COUNT) == literal("2", datatype=XSD + "integer")
    sel_uris = [uris.edge_selection_uri(SID, i) for i in range(3)]
    assert props(ts, f)[ns.TG_SELECTED_EDGE] == [iri(u) for u in sel_uris]
    for u, edge in zip(sel_uris, edges, strict=True):
        assert types(ts, u) == {ns.TG_EDGE_SELECTION}
        quoted = only(ts, u, ns.TG_EDGE)
        assert quoted.type == TRIPLE
        # The original terms, datatype and language included; the quoted triple carries no graph.
        assert quoted.triple == Triple(edge.s, edge.p, edge.o)
    assert only(ts, sel_uris[0], ns.TG_REASONING) == literal("born then")
    assert ns.TG_REASONING not in props(ts, sel_uris[2])  # empty reasoning is not recorded
    for u in sel_uris:  # no score or concept given: none recorded
        assert ns.TG_SCORE not in props(ts, u) and ns.TG_CONCEPT not in props(ts, u)
    assert ns.TG_IN_TOKEN not in props(ts, f) and ns.TG_LLM_MODEL not in props(ts, f)


def test_focus_records_score_concept_and_the_selection_call():
    f, e = uris.focus_uri(SID), uris.exploration_uri(SID)
    edge = Triple(iri("http://example.org/e/curie"), iri("http://example.org/r/discovered"),
                  iri("http://example.org/e/polonium"))
    selections = [EdgeSelection(edge, "names the discoverer", "ab12cd34", score=0.78, concept="polonium"),
                  EdgeSelection(edge, "again", "ab12cd35", score=1, concept=""),
                  EdgeSelection(edge, "tiny", "ab12cd36", score=1e-7)]
    ts = focus_triples(f, e, selections, SID, usage=LlmUsage(1200, 45, "gpt-x"))
    assert_well_formed(ts, G)
    first, second, third = (uris.edge_selection_uri(SID, i) for i in range(3))
    assert only(ts, first, ns.TG_SCORE) == literal("0.78", datatype=XSD + "double")
    assert only(ts, first, ns.TG_CONCEPT) == literal("polonium")
    assert only(ts, second, ns.TG_SCORE) == literal("1.0", datatype=XSD + "double")
    assert ns.TG_CONCEPT not in props(ts, second)
    assert float(only(ts, third, ns.TG_SCORE).value) == 1e-7
    assert only(ts, f, ns.TG_IN_TOKEN) == literal("1200", datatype=XSD + "integer")
    assert only(ts, f, ns.TG_OUT_TOKEN) == literal("45", datatype=XSD + "integer")
    assert only(ts, f, ns.TG_LLM_MODEL) == literal("gpt-x")
    for bad in (float("nan"), float("inf"), True, "0.5"):
        with pytest.raises(TermError, match="finite number"):
            focus_triples(f, e, [EdgeSelection(edge, "r", "x", score=bad)], SID)


def test_focus_without_selections_is_recorded_honestly():
    f = uris.focus_uri(SID)
    ts = focus_triples(f, uris.exploration_uri(SID), [], SID)
    assert types(ts, f) == {ns.PROV_ENTITY, ns.TG_FOCUS}
    assert ns.TG_SELECTED_EDGE not in props(ts, f)
    assert ns.TG_DROPPED_COUNT not in props(ts, f)


def test_synthesis_triples():
    s, f = uris.synthesis_uri(SID), uris.focus_uri(SID)
    ts = synthesis_triples(s, f, uris.answer_document_uri(SID), usage=LlmUsage(300, 0, "m1"))
    assert_well_formed(ts, G)
    assert types(ts, s) == {ns.PROV_ENTITY, ns.TG_SYNTHESIS}
    assert only(ts, s, ns.PROV_WAS_DERIVED_FROM) == iri(f)
    assert only(ts, s, ns.TG_DOCUMENT) == iri(f"urn:trustgraph:answer:{SID}")
    assert only(ts, s, ns.TG_LLM_MODEL) == literal("m1")
    assert only(ts, s, ns.TG_IN_TOKEN) == literal("300", datatype=XSD + "integer")
    assert only(ts, s, ns.TG_OUT_TOKEN) == literal("0", datatype=XSD + "integer")
    inline = synthesis_triples(s, f, content="The answer")
    assert only(inline, s, ns.TG_CONTENT) == literal("The answer") and ns.TG_DOCUMENT not in props(inline, s)
    assert not {ns.TG_IN_TOKEN, ns.TG_OUT_TOKEN, ns.TG_LLM_MODEL} & props(inline, s).keys()  # no model call
    with pytest.raises(TermError, match="expected an integer"):
        synthesis_triples(s, f, usage=LlmUsage(1.5, 0, "m"))


def test_unreported_token_counts_record_the_model_and_no_counts():
    """An endpoint that sent no usage: the model is recorded, the counts are left out (unknown, never 0)."""
    from trustgraph_base.provenance.trace_model import build_trace
    s, f = uris.synthesis_uri(SID), uris.focus_uri(SID)
    ts = synthesis_triples(s, f, uris.answer_document_uri(SID), usage=LlmUsage(None, None, "llama"))
    assert_well_formed(ts, G)
    assert only(ts, s, ns.TG_LLM_MODEL) == literal("llama")
    assert not {ns.TG_IN_TOKEN, ns.TG_OUT_TOKEN} & props(ts, s).keys()
    q, e = uris.question_uri(SID), uris.exploration_uri(SID)
    trace = build_trace(question_triples(q, "Who?", WHEN) + exploration_triples(e, q, 0)
                        + focus_triples(f, e, [], SID) + ts, q)
    assert trace["synthesis"]["usage"] == {"in_token": None, "out_token": None, "model": "llama"}


def test_error_triples():
    err, e = uris.error_uri(SID), uris.exploration_uri(SID)
    ts = error_triples(err, e, "boom " * 2000, "focus")
    assert_well_formed(ts, G)
    assert types(ts, err) == {ns.PROV_ENTITY, ns.TG_ERROR}
    assert only(ts, err, ns.PROV_WAS_DERIVED_FROM) == iri(e)
    assert only(ts, err, ns.TG_STAGE) == literal("focus")
    assert len(only(ts, err, ns.TG_ERROR_MESSAGE).value) == 4000


# ---------------------------------------------------------------- DocumentRAG builders

def test_docrag_triples():
    q, e, s = uris.docrag_question_uri(SID), uris.docrag_exploration_uri(SID), uris.docrag_synthesis_uri(SID)
    g = uris.docrag_grounding_uri(SID)
    assert g == f"urn:trustgraph:docrag:{SID}/grounding"
    ts = (docrag_question_triples(q, "What does the report say?", WHEN)
          + grounding_triples(g, q, ["What does the report say?"])
          + docrag_exploration_triples(e, q, ["urn:chunk:1", "urn:chunk:2", "urn:chunk:3"], grounding_uri=g)
          + docrag_synthesis_triples(s, e, "It says…", uris.docrag_answer_uri(SID), usage=LlmUsage(10, 4, "m")))
    assert only(ts, e, ns.PROV_WAS_DERIVED_FROM) == iri(g)
    assert only(ts, s, ns.TG_OUT_TOKEN) == literal("4", datatype=XSD + "integer")
    assert_well_formed(ts, G)
    assert types(ts, q) == {ns.PROV_ACTIVITY, ns.TG_QUESTION, ns.TG_DOC_RAG_QUESTION}
    assert only(ts, q, ns.PROV_STARTED_AT_TIME).datatype == XSD + "dateTime"
    assert types(ts, e) == {ns.PROV_ENTITY, ns.TG_EXPLORATION}
    assert only(ts, e, ns.PROV_WAS_GENERATED_BY) == iri(q)
    assert only(ts, e, ns.TG_CHUNK_COUNT) == literal("3", datatype=XSD + "integer")
    assert props(ts, e)[ns.TG_SELECTED_CHUNK] == [iri("urn:chunk:1"), iri("urn:chunk:2"), iri("urn:chunk:3")]
    assert types(ts, s) == {ns.PROV_ENTITY, ns.TG_SYNTHESIS}
    assert only(ts, s, ns.PROV_WAS_DERIVED_FROM) == iri(e)
    assert only(ts, s, ns.TG_CONTENT) == literal("It says…")
    assert only(ts, s, ns.TG_DOCUMENT) == iri(f"urn:trustgraph:docrag:{SID}/answer")


# ---------------------------------------------------------------- agent builders

def test_agent_builders_have_the_v2_signatures():
    def positional(fn):
        return [p.name for p in inspect.signature(fn).parameters.values()
                if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]

    assert positional(agent_session_triples) == ["session_uri", "query", "timestamp"]
    assert positional(agent_iteration_triples) == ["iteration_uri", "parent_uri", "action", "arguments"]
    assert positional(agent_thought_triples) == ["thought_uri", "iteration_uri"]
    assert positional(agent_observation_triples) == ["observation_uri", "iteration_uri"]
    assert positional(agent_final_triples) == ["final_uri", "parent_uri", "document_uri"]


def test_agent_triples():
    s = "sess-1"
    q, a1, a2, c = (uris.agent_session_uri(s), uris.agent_iteration_uri(s, 1), uris.agent_iteration_uri(s, 2),
                    uris.agent_final_uri(s))
    t1, o1, o2 = uris.agent_thought_uri(s, 1), uris.agent_observation_uri(s, 1), uris.agent_observation_uri(s, 2)
    assert (t1, o1) == ("urn:trustgraph:agent:sess-1/i1/thought", "urn:trustgraph:agent:sess-1/i1/observation")
    ts = (agent_session_triples(q, "Plan a trip", WHEN)
          + agent_iteration_triples(a1, q, "knowledge-query", {"z": 1, "question": "Paris?"}, thought_uri=t1,
                                    usage=LlmUsage(812, 40, "gpt-x"))
          + agent_thought_triples(t1, a1)
          + agent_observation_triples(o1, a1)
          + agent_iteration_triples(a2, o1, "none", '{"already": "json"}')
          + agent_observation_triples(o2, a2, tool_error="timeout")
          + agent_final_triples(c, o2, uris.agent_answer_uri(s), termination_reason="answered",
                                usage=LlmUsage(900, 12, "gpt-x")))
    assert_well_formed(ts, G)
    assert types(ts, q) == {ns.PROV_ACTIVITY, ns.TG_QUESTION, ns.TG_AGENT_QUESTION}
    assert only(ts, q, ns.TG_QUERY) == literal("Plan a trip")
    assert only(ts, q, ns.PROV_STARTED_AT_TIME) == timestamp_literal(WHEN)
    assert types(ts, a1) == {ns.PROV_ENTITY, ns.TG_ANALYSIS}
    assert only(ts, a1, ns.PROV_WAS_DERIVED_FROM) == iri(q)
    assert only(ts, a2, ns.PROV_WAS_DERIVED_FROM) == iri(o1)  # each Analysis follows the last Observation
    assert only(ts, a1, ns.TG_ACTION) == literal("knowledge-query")
    args = only(ts, a1, ns.TG_ARGUMENTS).value
    assert json.loads(args) == {"z": 1, "question": "Paris?"} and args.index('"question"') < args.index('"z"')
    assert only(ts, a2, ns.TG_ARGUMENTS) == literal('{"already": "json"}')
    assert only(ts, a1, ns.TG_IN_TOKEN) == literal("812", datatype=XSD + "integer")
    assert only(ts, a1, ns.TG_LLM_MODEL) == literal("gpt-x")
    assert not {ns.TG_IN_TOKEN, ns.TG_LLM_MODEL} & props(ts, a2).keys()
    # the thought: an entity of its own whose text is the librarian document of the same URI (TrustGraph's shape);
    # each builder describes one node, as TrustGraph's client types an explain event by all of its types
    assert only(ts, a1, ns.TG_THOUGHT) == iri(t1)
    for build in (agent_iteration_triples(a1, q, "a", {}, thought_uri=t1), agent_thought_triples(t1, a1),
                  agent_observation_triples(o1, a1)):
        assert len({t.s.value for t in build}) == 1
    assert types(ts, t1) == {ns.PROV_ENTITY, ns.TG_REFLECTION_TYPE, ns.TG_THOUGHT_TYPE}
    assert only(ts, t1, ns.PROV_WAS_DERIVED_FROM) == iri(a1) and only(ts, t1, ns.TG_DOCUMENT) == iri(t1)
    assert ns.TG_THOUGHT not in props(ts, a2)  # no thought given: none recorded
    assert types(ts, o1) == {ns.PROV_ENTITY, ns.TG_OBSERVATION_TYPE}
    assert only(ts, o1, ns.PROV_WAS_DERIVED_FROM) == iri(a1) and only(ts, o1, ns.TG_DOCUMENT) == iri(o1)
    assert ns.TG_TOOL_ERROR not in props(ts, o1) and only(ts, o2, ns.TG_TOOL_ERROR) == literal("timeout")
    assert not {ns.TG_OBSERVATION, ns.TG_ANSWER} & {t.p.value for t in ts}  # the texts are documents, not inline
    assert types(ts, c) == {ns.PROV_ENTITY, ns.TG_CONCLUSION}
    assert only(ts, c, ns.PROV_WAS_DERIVED_FROM) == iri(o2)
    assert only(ts, c, ns.TG_TERMINATION_REASON) == literal("answered")
    assert only(ts, c, ns.TG_DOCUMENT) == iri("urn:trustgraph:agent:sess-1/answer")
    assert only(ts, c, ns.TG_OUT_TOKEN) == literal("12", datatype=XSD + "integer")


# ---------------------------------------------------------------- extraction builders (urn:graph:source)

def test_extraction_triples():
    doc = uris.document_uri("report")
    page, chunk = uris.page_uri(doc, 1), uris.chunk_uri(doc, 1, 0)
    sg, act = uris.subgraph_uri(chunk), uris.activity_uri("kg-extract", chunk)
    extracted = [Triple(iri("http://example.org/e/a"), iri("http://example.org/r/b"), literal("c", language="en"))]
    ts = (document_triples(doc, "Annual report", "application/pdf", 3) + page_triples(page, doc, 1)
          + chunk_triples(chunk, page, 0, 0, 500) + subgraph_triples(sg, chunk, extracted, activity_uri=act)
          + activity_triples(act, "kg-extract", "1.0", model="m1", used_uri=chunk, timestamp=WHEN))
    assert_well_formed(ts, ns.GRAPH_SOURCE)
    assert types(ts, doc) == {ns.PROV_ENTITY, ns.TG_DOCUMENT_TYPE}
    assert only(ts, doc, ns.DC_TITLE) == literal("Annual report")
    assert only(ts, doc, ns.TG_PAGE_COUNT) == literal("3", datatype=XSD + "integer")
    assert only(ts, page, ns.TG_PAGE_NUMBER) == literal("1", datatype=XSD + "integer")
    assert only(ts, page, ns.PROV_WAS_DERIVED_FROM) == iri(doc)
    assert only(ts, chunk, ns.PROV_WAS_DERIVED_FROM) == iri(page)
    assert only(ts, chunk, ns.TG_CHAR_LENGTH) == literal("500", datatype=XSD + "integer")
    assert types(ts, sg) == {ns.PROV_ENTITY, ns.TG_SUBGRAPH_TYPE}
    assert only(ts, sg, ns.PROV_WAS_DERIVED_FROM) == iri(chunk)
    assert only(ts, sg, ns.TG_CONTAINS) == triple_term(*[getattr(extracted[0], k) for k in "spo"])
    assert only(ts, act, ns.PROV_USED) == iri(chunk)
    assert ns.PROV_AGENT in types(ts, uris.agent_uri("kg-extract"))


# ---------------------------------------------------------------- vocabulary and graphs

def all_builder_triples() -> list[Triple]:
    doc = "urn:document:d"
    edge = Triple(iri("http://example.org/e/a"), iri("http://example.org/r/b"), literal("c"))
    return (question_triples("urn:q:1", "q", WHEN, parent_uri="urn:a:1")
            + grounding_triples("urn:g:1", "urn:q:1", ["c"])
            + exploration_triples("urn:e:1", "urn:q:1", 1, [iri("http://example.org/e/a")], grounding_uri="urn:g:1")
            + focus_triples("urn:f:1", "urn:e:1", [EdgeSelection(edge, "why", score=0.5, concept="c")], "1",
                            dropped=1, usage=LlmUsage(1, 1, "m"))
            + synthesis_triples("urn:s:1", "urn:f:1", "urn:d:1", content="x", usage=LlmUsage(1, 1, "m"))
            + error_triples("urn:err:1", "urn:f:1", "m", "s")
            + docrag_question_triples("urn:q:2", "q", WHEN)
            + docrag_exploration_triples("urn:e:2", "urn:q:2", ["urn:chunk:1"])
            + docrag_synthesis_triples("urn:s:2", "urn:e:2", "x", "urn:d:2", usage=LlmUsage(1, 1, "m"))
            + agent_session_triples("urn:q:3", "q", WHEN)
            + agent_iteration_triples("urn:a:3", "urn:q:3", "a", {}, thought_uri="urn:t:3", usage=LlmUsage(1, 1, "m"))
            + agent_thought_triples("urn:t:3", "urn:a:3")
            + agent_observation_triples("urn:o:3", "urn:a:3", tool_error="e")
            + agent_final_triples("urn:c:3", "urn:o:3", "urn:d:3", termination_reason="r")
            + document_triples(doc, "T", "text/plain", 1) + page_triples("urn:p:1", doc, 1, activity_uri="urn:act:1")
            + chunk_triples("urn:chunk:1", "urn:p:1", 0, 0, 1, activity_uri="urn:act:1")
            + subgraph_triples("urn:sg:1", "urn:chunk:1", [edge], activity_uri="urn:act:1")
            + activity_triples("urn:act:1", "c", "1", model="m", used_uri=doc, timestamp=WHEN))


def test_vocabulary_labels_every_class_and_predicate_the_builders_use():
    labels = vocabulary_labels()
    used = set()
    for t in all_builder_triples():
        used.add(t.p.value)
        if t.p.value == ns.RDF_TYPE:
            used.add(t.o.value)
    missing = sorted(used - labels.keys())
    assert not missing, f"no rdfs:label for {missing}"
    assert labels[ns.TG_EDGE_SELECTION] == "Edge Selection"
    assert labels[ns.TG_SELECTED_EDGE] == "selected edge"
    assert labels[ns.TG_GRAPH_RAG_QUESTION] == "GraphRAG Question"
    vocab = vocabulary_triples()
    assert len(vocab) == len(labels)
    assert all(t.p.value == ns.RDFS_LABEL and t.o.type == LITERAL and t.g == "" for t in vocab)
    assert {t.g for t in vocabulary_triples(G)} == {G}


def test_tg_namespace_fails_fast_on_typos():
    assert TG.selectedEdge == ns.TG_SELECTED_EDGE
    assert ns.TG_EDGE_SELECTION in TG
    with pytest.raises(AttributeError, match="selectedEdges"):
        _ = TG.selectedEdges


def test_in_graph_copies_into_a_graph():
    ts = question_triples("urn:q:1", "q", WHEN)
    moved = in_graph(ts, ns.GRAPH_SOURCE)
    assert {t.g for t in moved} == {ns.GRAPH_SOURCE}
    assert {t.g for t in ts} == {G}  # originals untouched
    assert [(t.s, t.p, t.o) for t in moved] == [(t.s, t.p, t.o) for t in ts]
    assert {t.g for t in in_graph(ts, "")} == {""}
    with pytest.raises(TermError, match="forbidden character"):
        in_graph(ts, "urn:graph with space")


def test_builders_default_graph_argument():
    assert {t.g for t in question_triples("urn:q:1", "q", WHEN, graph="")} == {""}
    assert {t.g for t in agent_final_triples("urn:c:1", "urn:q:1", "urn:d:1", graph="urn:g:x")} == {"urn:g:x"}


# ---------------------------------------------------------------- bad input to builders

@pytest.mark.parametrize("bad", ["", "urn:x:has space", "urn:x:<angle>", "http://x/>", "no-scheme", "urn:x:\n",
                                 "http://x/%zz"])
def test_builders_reject_invalid_iris(bad):
    ok = "urn:x:ok"
    calls = [
        lambda: question_triples(bad, "q", WHEN),
        lambda: question_triples(ok, "q", WHEN, parent_uri=bad or "urn:x:<empty>"),
        lambda: grounding_triples(bad, ok, ["c"]),
        lambda: exploration_triples(ok, bad, 1),
        lambda: exploration_triples(ok, ok, 1, grounding_uri=bad or "urn:x:<empty>"),
        lambda: focus_triples(bad, ok, [], "s"),
        lambda: synthesis_triples(ok, ok, bad or "urn:x:<empty>"),
        lambda: docrag_exploration_triples(ok, ok, [bad]),
        lambda: agent_session_triples(bad, "q", WHEN),
        lambda: agent_iteration_triples(ok, bad, "a", {}),
        lambda: agent_iteration_triples(ok, ok, "a", {}, thought_uri=bad or "urn:x:<empty>"),
        lambda: agent_thought_triples(bad, ok),
        lambda: agent_observation_triples(bad, ok),
        lambda: agent_final_triples(bad, ok, "urn:d:1"),
        lambda: agent_final_triples(ok, ok, bad or "urn:x:<empty>"),
        lambda: chunk_triples(ok, bad, 0, 0, 1),
    ]
    for call in calls:
        with pytest.raises(TermError, match="IRI"):
            call()


def test_builders_reject_bad_edges_and_values():
    good = Triple(iri("http://x/s"), iri("http://x/p"), literal("o"))
    with pytest.raises(TermError, match="forbidden character"):
        focus_triples("urn:f:1", "urn:e:1", [(Triple(iri("http://x/a b"), good.p, good.o), "r")], "s")
    with pytest.raises(TermError, match="predicate must be an IRI"):
        focus_triples("urn:f:1", "urn:e:1", [(Triple(good.s, literal("p"), good.o), "r")], "s")
    deep = good.o
    for _ in range(MAX_TRIPLE_DEPTH):
        deep = triple_term(good.s, good.p, deep)
    with pytest.raises(TermError, match="nested deeper"):
        focus_triples("urn:f:1", "urn:e:1", [(Triple(good.s, good.p, deep), "r")], "s")
    with pytest.raises(TermError, match="nested deeper"):
        subgraph_triples("urn:sg:1", "urn:chunk:1", [Triple(good.s, good.p, deep)])
    with pytest.raises(TermError, match="expected an integer"):
        exploration_triples("urn:e:1", "urn:q:1", "12")
    with pytest.raises(TermError, match="expected an integer"):
        exploration_triples("urn:e:1", "urn:q:1", True)
    with pytest.raises(TermError, match="invalid language tag"):
        exploration_triples("urn:e:1", "urn:q:1", 1, [literal("x", language="en_US")])


def test_builders_reject_absurd_literals_but_escape_control_characters():
    with pytest.raises(TermError, match="literal longer than"):
        question_triples("urn:q:1", "x" * (MAX_LITERAL_LENGTH + 1), WHEN)
    with pytest.raises(TermError, match="unpaired surrogate"):
        agent_observation_triples("urn:o:1", "urn:a:1", tool_error="bad \ud800 text")
    from trustgraph_base.rdf.export import parse, serialize

    nasty = "ctrl \x00\x07\x1b\x7f and \"quotes\" and\nnewlines and \"> ; <x> <y> <z> ."
    ts = question_triples("urn:q:1", nasty, WHEN)
    assert only(ts, "urn:q:1", ns.TG_QUERY).value == nasty
    assert parse(serialize(ts, "trig"), "trig") == ts


def test_shared_constant_terms_are_not_leaked_between_traces():
    a = question_triples("urn:q:1", "q", WHEN)
    b = question_triples("urn:q:2", "q", WHEN)
    assert a is not b and a[0] is not b[0]
    assert a[0].s.value == "urn:q:1" and b[0].s.value == "urn:q:2"
    assert all(isinstance(t.p, Term) and t.p.type == IRI for t in a + b)


def test_only_a_final_stage_ends_a_trace():
    from trustgraph_base.provenance.agent import agent_final_triples, agent_session_triples
    from trustgraph_base.provenance.triples import (
        docrag_synthesis_triples,
        ends_a_trace,
        error_triples,
        exploration_triples,
        question_triples,
        synthesis_triples,
    )

    s = str(uuid.uuid4())
    q = uris.question_uri(s)
    assert ends_a_trace(synthesis_triples(uris.synthesis_uri(s), uris.focus_uri(s)))
    assert ends_a_trace(docrag_synthesis_triples(uris.synthesis_uri(s), uris.exploration_uri(s), "answer"))
    assert ends_a_trace(error_triples(uris.error_uri(s), q, "LLM down", "focus"))
    assert ends_a_trace(agent_final_triples(uris.agent_final_uri(s), uris.agent_session_uri(s),
                                            uris.agent_answer_uri(s)))
    assert not ends_a_trace(question_triples(q, "why?"))
    assert not ends_a_trace(exploration_triples(uris.exploration_uri(s), q, 3))
    assert not ends_a_trace(agent_session_triples(uris.agent_session_uri(s), "why?"))
    assert not ends_a_trace(grounding_triples(uris.grounding_uri(s), q, ["c"]))
    assert not ends_a_trace(agent_iteration_triples(uris.agent_iteration_uri(s, 1), uris.agent_session_uri(s), "a",
                                                    {}, thought_uri=uris.agent_thought_uri(s, 1)))
    assert not ends_a_trace(agent_thought_triples(uris.agent_thought_uri(s, 1), uris.agent_iteration_uri(s, 1)))
    assert not ends_a_trace(agent_observation_triples(uris.agent_observation_uri(s, 1),
                                                      uris.agent_iteration_uri(s, 1)))
    assert not ends_a_trace([])
    # a Synthesis IRI as the object of another predicate is not a stage
    assert not ends_a_trace([Triple(iri(q), iri(ns.TG_DOCUMENT), iri(ns.TG_SYNTHESIS))])
