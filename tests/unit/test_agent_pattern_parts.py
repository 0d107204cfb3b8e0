"""The agent patterns' parts without services: reply parsers, the extractive policies, the trace URIs and
builders (a DAG that validates against the SHACL shapes), the trace model's reading and the explorer's layout."""

from __future__ import annotations

import json

import pytest

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance import uris
from trustgraph_base.provenance.agent import agent_final_triples, agent_session_triples
from trustgraph_base.provenance.agent_patterns import (
    decomposition_triples,
    finding_triples,
    pattern_decision_triples,
    pattern_synthesis_triples,
    plan_triples,
    step_result_triples,
)
from trustgraph_base.provenance.trace_model import build_trace, node_name
from trustgraph_base.rdf.validation import validate_trace
from trustgraph_flow.agent.patterns import PatternReplyError, PlanStep, parse_goals, parse_pattern_choice, parse_plan
from trustgraph_flow.gateway.explorer.layout import draw_dag
from trustgraph_flow.model.extractive import pattern_policy

pytestmark = pytest.mark.unit

TOOLS = {"knowledge-query", "document-query"}


# ------------------------------------------------------------------ replies
def test_plan_with_dependencies():
    text = "```\n" + "\n".join(json.dumps(s) for s in [
        {"goal": "Who discovered polonium?", "tool": "knowledge-query"},
        {"goal": "Why the name?", "tool": "document-query", "depends_on": []},
        {"goal": "Join them", "tool": "knowledge-query", "depends_on": [1, 2, 2]}]) + "\n```"
    assert parse_plan(text, TOOLS) == [PlanStep(1, "Who discovered polonium?", "knowledge-query"),
                                       PlanStep(2, "Why the name?", "document-query"),
                                       PlanStep(3, "Join them", "knowledge-query", (1, 2))]


@pytest.mark.parametrize("lines, message", [
    ([{"goal": "a", "tool": "crystal-ball"}], "names tool 'crystal-ball'"),
    ([{"goal": "a", "tool": "knowledge-query", "depends_on": [1]}], "only numbers of earlier steps"),
    ([{"goal": "a", "tool": "knowledge-query"}, {"goal": "b", "tool": "knowledge-query", "depends_on": [3]}],
     "only numbers of earlier steps"),
    ([{"goal": " ", "tool": "knowledge-query"}], "has no goal"),
    ([], "wrote no plan step"),
])
def test_unusable_plans_are_refused(lines, message):
    with pytest.raises(PatternReplyError, match=message):
        parse_plan("\n".join(json.dumps(x) for x in lines), TOOLS)


def test_a_plan_line_that_is_not_json_is_refused():
    with pytest.raises(PatternReplyError, match="is not a JSON object"):
        parse_plan("1. ask the graph", TOOLS)


def test_goals_and_pattern_choice():
    assert parse_goals('{"goal": "a?"}\n\n{"goal": "b?"}\n{"goal": "a?"}') == ["a?", "b?"]
    assert parse_pattern_choice('Sure: {"pattern": "supervisor", "reason": "two threads"}') == (
        "supervisor", "two threads")
    with pytest.raises(PatternReplyError, match="names none of"):
        parse_pattern_choice('{"pattern": "swarm"}')


# ------------------------------------------------------------------ extractive policies
def test_clauses_split_at_question_marks_and_before_question_words():
    assert [c.text for c in pattern_policy.clauses("Who discovered polonium and where was Marie Curie born?")] == [
        "Who discovered polonium?", "Where was Marie Curie born?"]
    assert [c.text for c in pattern_policy.clauses("Who discovered polonium and radium?")] == [
        "Who discovered polonium and radium?"]
    then = pattern_policy.clauses("Who discovered polonium, then when was it discovered?")
    assert [c.after_previous for c in then] == [False, True]


def test_extractive_router_plan_decomposition_and_synthesis():
    assert json.loads(pattern_policy.select_pattern("Who discovered polonium?"))["pattern"] == "react"
    assert json.loads(pattern_policy.select_pattern("Who discovered polonium? Who discovered radium?"))[
        "pattern"] == "supervisor"
    assert json.loads(pattern_policy.select_pattern("Who discovered polonium, then when?"))[
        "pattern"] == "plan-then-execute"
    tools = [{"name": "knowledge-query", "description": "Ask the knowledge graph about people", "arguments": []}]
    steps = parse_plan(pattern_policy.plan("Who discovered polonium, then when was it discovered?", tools),
                       {"knowledge-query"})
    assert [s.depends_on for s in steps] == [(), (1,)]
    assert parse_goals(pattern_policy.decompose("Who discovered polonium and who discovered radium?")) == [
        "Who discovered polonium?", "Who discovered radium?"]
    answer = pattern_policy.synthesise("q", [{"goal": "a?", "result": "A.", "error": ""},
                                             {"goal": "b?", "result": "", "error": "timed out"}])
    assert answer == "A. Missing: b? (timed out)."


# ------------------------------------------------------------------ URIs
def test_pattern_uris_read_back():
    for stage, index in (("pattern-decision", None), ("plan", None), ("step", 3), ("decomposition", None),
                         ("finding", 2), ("synthesis", None)):
        uri = uris.agent_pattern_uri("run-1", stage, index)
        parsed = uris.parse_trace_uri(uri)
        assert (parsed.kind, parsed.session, parsed.stage, parsed.index) == ("agent", "run-1", stage, index), uri
    assert uris.agent_pattern_uri("run-1", "decomposition") == "urn:trustgraph:agent:run-1/decompose"
    assert uris.document_owner("urn:trustgraph:agent:run-1/step/3") == "urn:trustgraph:agent:run-1"
    assert uris.document_owner("urn:trustgraph:agent:run-1/finding/2") == "urn:trustgraph:agent:run-1"
    with pytest.raises(ValueError):
        uris.agent_pattern_uri("run-1", "step", 0)


def test_node_names():
    root = "urn:trustgraph:agent:run-1"
    assert node_name(f"{root}/finding/2", root) == "Finding 2"
    assert node_name(f"{root}-g2/final", root) == "Sub-agent g2 Conclusion"
    assert node_name(f"{root}/synthesis") == "Synthesis"


# ------------------------------------------------------------------ a supervisor trace as data
def supervisor_trace(sid: str = "run-1") -> tuple[list, dict]:
    root = uris.agent_session_uri(sid)
    decision, decomposition = uris.agent_pattern_uri(sid, "pattern-decision"), uris.agent_pattern_uri(
        sid, "decomposition")
    synthesis, final, answer = (uris.agent_pattern_uri(sid, "synthesis"), uris.agent_final_uri(sid),
                                uris.agent_answer_uri(sid))
    triples = agent_session_triples(root, "two questions")
    triples += pattern_decision_triples(decision, root, "supervisor", "two independent clauses")
    triples += decomposition_triples(decomposition, [root, decision], ["a?", "b?"])
    findings, docs = [], {answer: "A and B."}
    for n, goal in enumerate(["a?", "b?"], 1):
        sub = uris.agent_session_uri(f"{sid}-g{n}")
        sub_final = uris.agent_final_uri(f"{sid}-g{n}")
        triples += agent_session_triples(sub, goal, parent_uri=decomposition)
        triples += agent_final_triples(sub_final, sub, uris.agent_answer_uri(f"{sid}-g{n}"))
        finding = uris.agent_pattern_uri(sid, "finding", n)
        triples += finding_triples(finding, decomposition, sub_final, n, goal)
        findings.append(finding)
        docs[finding] = f"answer {n}"
    triples += pattern_synthesis_triples(synthesis, findings, answer)
    triples += agent_final_triples(final, synthesis, answer, termination_reason="subagents-complete")
    return triples, docs


def test_a_supervisor_trace_is_a_valid_dag_and_reads_back():
    triples, docs = supervisor_trace()
    report = validate_trace(triples)
    assert report.conforms, [v.message for v in report.violations]
    root = "urn:trustgraph:agent:run-1"
    trace = build_trace(triples, root, answers=docs)
    assert trace["status"] == "complete" and trace["pattern"]["pattern"] == "supervisor"
    assert trace["decomposition"]["goals"] == ["a?", "b?"]
    assert [s["uri"] for s in trace["decomposition"]["sub_agents"]] == [f"{root}-g1", f"{root}-g2"]
    assert [f["result"] for f in trace["findings"]] == ["answer 1", "answer 2"]
    assert trace["synthesis"]["inputs"] == [f"{root}/finding/1", f"{root}/finding/2"]
    assert trace["conclusion"]["answer"] == "A and B."
    dag = draw_dag(trace)
    kinds = sorted(n.kind for n in dag.nodes)
    assert kinds == sorted(["question", "decision", "head", "sub-agent", "sub-agent", "branch", "branch",
                            "synthesis", "conclusion"])
    # question -> decision, decomposition <- question + decision, 2 x (decomposition -> sub-agent,
    # decomposition -> finding, sub-agent -> finding), 2 findings -> synthesis, synthesis -> conclusion
    assert len(dag.edges) == 1 + 2 + 6 + 2 + 1
    levels = {n.label: n.y for n in dag.nodes}
    assert levels["Finding 1"] == levels["Finding 2"] > levels["Sub-agent g1"] > levels["Decomposition"]


def test_a_synthesis_of_one_rag_stage_may_not_join_several():
    """The DAG's joins are the agent's: a GraphRAG synthesis derived from two Focuses is a violation."""
    from trustgraph_base.provenance.triples import focus_triples, synthesis_triples

    s = "0b6d4c1e-0000-4000-8000-000000000001"
    bad = focus_triples(uris.focus_uri(s), uris.exploration_uri(s), [], s)
    bad += focus_triples(uris.focus_uri(s) + "x", uris.exploration_uri(s), [], s)
    bad += synthesis_triples(uris.synthesis_uri(s), uris.focus_uri(s), uris.answer_document_uri(s))
    bad += synthesis_triples(uris.synthesis_uri(s), uris.focus_uri(s) + "x")
    messages = [v.message for v in validate_trace(bad).violations]
    assert any("derived from more than one stage" in m for m in messages), messages


def test_a_step_result_derives_from_the_plan_and_its_dependencies():
    root = uris.agent_session_uri("p")
    plan = uris.agent_pattern_uri("p", "plan")
    steps = [uris.agent_pattern_uri("p", "step", n) for n in (1, 2, 3)]
    triples = agent_session_triples(root, "q") + plan_triples(plan, [root], ["a", "b", "c"])
    triples += step_result_triples(steps[0], plan, [], 1, "a", "knowledge-query")
    triples += step_result_triples(steps[1], plan, [], 2, "b", "document-query", tool_error="down")
    triples += step_result_triples(steps[2], plan, steps[:2], 3, "c", "knowledge-query")
    derived = {t.o.value for t in triples if t.s.value == steps[2] and t.p.value == ns.PROV_WAS_DERIVED_FROM}
    assert derived == {plan, *steps[:2]}
    report = validate_trace(triples)
    assert report.conforms, [v.message for v in report.violations]
