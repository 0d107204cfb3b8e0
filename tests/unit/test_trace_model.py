"""The CLI's reading of a stored trace (``trustgraph_cli.trace_model``): trace model v2 and v1 read alike."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from trustgraph_base.provenance import (
    EdgeSelection,
    LlmUsage,
    agent_final_triples,
    agent_iteration_triples,
    agent_observation_triples,
    agent_session_triples,
    agent_thought_triples,
    error_triples,
    exploration_triples,
    focus_triples,
    grounding_triples,
    question_triples,
    synthesis_triples,
    uris,
)
from trustgraph_base.rdf.export import parse
from trustgraph_base.schema import Triple, iri
from trustgraph_cli.explain import render_text
from trustgraph_cli.trace_model import build_trace

pytestmark = pytest.mark.unit

V1 = Path(__file__).resolve().parents[1] / "fixtures" / "trace_v1"
WHEN = "2025-06-01T10:00:00.000Z"
USAGE = LlmUsage(812, 40, "gpt-x")
EDGE = Triple(iri("http://trustgraph.ai/e/marie-curie"), iri("http://trustgraph.ai/e/discovered"),
              iri("http://trustgraph.ai/e/polonium"))


def text_of(trace: dict) -> str:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        render_text(trace, False, 0)
    return out.getvalue()


def v2_agent(session: str = "run-1") -> tuple[list[Triple], dict[str, str]]:
    """An agent trace of trace model v2 (two iterations, the second a parse failure) and its documents."""
    root = uris.agent_session_uri(session)
    a1, t1, o1 = (uris.agent_iteration_uri(session, 1), uris.agent_thought_uri(session, 1),
                  uris.agent_observation_uri(session, 1))
    a2, o2 = uris.agent_iteration_uri(session, 2), uris.agent_observation_uri(session, 2)
    sub = uris.question_uri("0b7c2a4e-1f3d-4c55-9a61-2e8f7d1c0a09")
    triples = (agent_session_triples(root, "Who discovered polonium?", WHEN)
               + agent_iteration_triples(a1, root, "knowledge-query", {"question": "Who discovered polonium?"},
                                         thought_uri=t1, usage=USAGE)
               + agent_thought_triples(t1, a1)
               + question_triples(sub, "Who discovered polonium?", WHEN, parent_uri=a1)
               + agent_observation_triples(o1, a1)
               + agent_iteration_triples(a2, o1, "parse-error", {}, usage=USAGE)
               + agent_observation_triples(o2, a2, tool_error="no Action")
               + agent_final_triples(uris.agent_final_uri(session), o2, uris.agent_answer_uri(session),
                                     usage=USAGE))
    documents = {t1: "I should ask the knowledge graph.", o1: "Marie Curie discovered polonium in 1898.",
                 o2: "Your reply could not be parsed: no Action.",
                 uris.agent_answer_uri(session): "Marie Curie discovered polonium."}
    return triples, documents


def test_an_agent_trace_of_v2_reads_its_texts_from_its_documents():
    triples, documents = v2_agent()
    root = uris.agent_session_uri("run-1")
    trace = build_trace(triples, root, answers=documents)
    first, second = trace["analyses"]
    assert (first["thought"], first["action"], first["observation"], first["tool_error"]) == (
        "I should ask the knowledge graph.", "knowledge-query", "Marie Curie discovered polonium in 1898.", None)
    assert first["observation_uri"] == f"{root}/i1/observation"
    assert first["usage"] == {"in_token": 812, "out_token": 40, "model": "gpt-x"}
    assert [s["uri"] for s in first["sub_traces"]] == [uris.question_uri("0b7c2a4e-1f3d-4c55-9a61-2e8f7d1c0a09")]
    assert (second["thought"], second["action"], second["tool_error"]) == (None, "parse-error", "no Action")
    assert trace["conclusion"]["answer"] == "Marie Curie discovered polonium."
    assert trace["conclusion"]["document"] == f"{root}/answer" and trace["status"] == "complete"
    json.dumps(trace)
    text = text_of(trace)
    for line in ("Model: gpt-x (812 in / 40 out tokens)", "Thought: I should ask the knowledge graph.",
                 "  Marie Curie discovered polonium in 1898.", "Tool error: no Action", "--- Conclusion ---",
                 "  Marie Curie discovered polonium."):
        assert line in text, text
    # a document the librarian no longer has reads as not available, never as another text
    trace = build_trace(triples, root, answers={})
    assert trace["analyses"][0]["thought"] is None and trace["conclusion"]["answer"] is None
    assert "(answer not available)" in text_of(trace)


def test_an_agent_failure_after_an_observation_is_found():
    triples, documents = v2_agent("run-2")
    root = uris.agent_session_uri("run-2")
    o1 = uris.agent_observation_uri("run-2", 1)
    cut = [t for t in triples if not t.s.value.startswith((f"{root}/i2", f"{root}/final"))]
    failed = cut + error_triples(uris.agent_error_uri("run-2"), o1, "the prompt service failed", "analysis")
    trace = build_trace(failed, root, answers=documents)
    assert trace["status"] == "failed" and trace["error"]["stage"] == "analysis"
    assert [a["uri"] for a in trace["analyses"]] == [f"{root}/i1"]


def test_traces_stored_by_trace_model_v1_read_as_before():
    triples = parse((V1 / "traces.trig").read_bytes(), "trig")
    answers = {doc: a["text"] for doc, a in json.loads((V1 / "answers.json").read_text()).items()}
    agent = build_trace(triples, "urn:trustgraph:agent:v1-agent-session-0001", answers=answers)
    first, second = agent["analyses"]
    assert (first["thought"], first["observation"], first["observation_uri"], first["usage"]) == (
        "I should ask the knowledge graph.", "Marie Curie discovered polonium in 1898.", None, None)
    assert second["tool_error"] == "no Action" and agent["conclusion"]["answer"] == "Marie Curie discovered polonium."
    assert agent["conclusion"]["document"] is None and agent["status"] == "complete"
    assert first["sub_traces"][0]["synthesis"]["answer"] == "Marie Curie discovered polonium in 1898."
    graph = build_trace(triples, "urn:trustgraph:question:0b7c2a4e-1f3d-4c55-9a61-2e8f7d1c0a01", answers=answers)
    assert graph["grounding"] is None and graph["exploration"]["edge_count"] == 12
    assert [(e["score"], e["concept"]) for e in graph["focus"]["selected_edges"]] == [(None, ""), (None, "")]
    assert graph["focus"]["usage"] is None
    assert graph["synthesis"]["usage"] == {"in_token": None, "out_token": None, "model": "extractive"}
    assert "Model: extractive (tokens not reported)\n" in text_of(graph) and "Concept:" not in text_of(graph)


def test_a_graphrag_trace_of_v2_shows_its_grounding_scores_concepts_and_usage():
    s = "0b7c2a4e-1f3d-4c55-9a61-2e8f7d1c0a07"
    q, g, e, f = uris.question_uri(s), uris.grounding_uri(s), uris.exploration_uri(s), uris.focus_uri(s)
    triples = (question_triples(q, "Who discovered polonium?", WHEN) + grounding_triples(g, q, ["polonium", "Curie"])
               + exploration_triples(e, q, 3, [EDGE.o], grounding_uri=g)
               + focus_triples(f, e, [EdgeSelection(EDGE, "names the discoverer", score=0.7865, concept="polonium")],
                               s, usage=USAGE)
               + synthesis_triples(uris.synthesis_uri(s), f, uris.answer_document_uri(s), usage=LlmUsage(20, 9, "m")))
    trace = build_trace(triples, q, answers={uris.answer_document_uri(s): "Marie Curie."})
    assert trace["grounding"] == {"uri": g, "concepts": ["polonium", "Curie"]}
    [edge] = trace["focus"]["selected_edges"]
    assert (edge["score"], edge["concept"]) == (0.7865, "polonium")
    assert trace["focus"]["usage"]["in_token"] == 812 and trace["synthesis"]["usage"]["out_token"] == 9
    text = text_of(trace)
    for line in ("--- Grounding ---", "Concepts: polonium, Curie", "     Concept: polonium  Score: 0.7865",
                 "Model: m (20 in / 9 out tokens)"):
        assert line in text, text


def test_stage_timings_are_the_trace_own_stages_in_order_counted_from_the_question():
    from trustgraph_base.provenance.triples import stage_time_triple

    s = "0b7c2a4e-1f3d-4c55-9a61-2e8f7d1c0a08"
    q, g, e, f = uris.question_uri(s), uris.grounding_uri(s), uris.exploration_uri(s), uris.focus_uri(s)
    syn = uris.synthesis_uri(s)
    other = uris.focus_uri("0b7c2a4e-1f3d-4c55-9a61-2e8f7d1c0a09")  # another trace's stage in the same triples
    triples = (question_triples(q, "Who discovered polonium?", WHEN) + grounding_triples(g, q, ["polonium"])
               + exploration_triples(e, q, 3, [EDGE.o], grounding_uri=g)
               + focus_triples(f, e, [EdgeSelection(EDGE, "names the discoverer")], s)
               + synthesis_triples(syn, f, uris.answer_document_uri(s))
               + [stage_time_triple(syn, "2025-06-01T10:00:01.250Z"), stage_time_triple(g, "2025-06-01T10:00:00.020Z"),
                  stage_time_triple(f, "2025-06-01T10:00:00.900Z"), stage_time_triple(e, "2025-06-01T10:00:00.150Z"),
                  stage_time_triple(other, "2025-06-01T10:00:00.500Z")])
    timings = build_trace(triples, q)["timings"]
    assert [(t["stage"], t["after_ms"]) for t in timings] == [
        ("grounding", 20.0), ("exploration", 150.0), ("focus", 900.0), ("synthesis", 1250.0)]
    assert build_trace(triples[:-5], q)["timings"] == []  # a trace stored before stages were stamped


def test_stage_timings_of_a_question_time_without_a_zone_count_it_as_utc():
    from trustgraph_base.provenance.triples import stage_time_triple

    s = "0b7c2a4e-1f3d-4c55-9a61-2e8f7d1c0a0a"
    q, g = uris.question_uri(s), uris.grounding_uri(s)
    triples = (question_triples(q, "Who discovered polonium?", "2025-06-01T10:00:00")  # xsd:dateTime without a zone
               + grounding_triples(g, q, ["polonium"]) + [stage_time_triple(g, "2025-06-01T10:00:00.040Z")])
    assert [(t["stage"], t["after_ms"]) for t in build_trace(triples, q)["timings"]] == [("grounding", 40.0)]
