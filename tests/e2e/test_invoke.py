"""tg-invoke-graph-rag / -document-rag / -agent with -x: the live explain output equals the stored trace."""

from __future__ import annotations

import re

import pytest
from e2e_support import AGENT_QUESTION, DOC_QUESTION, GRAPH_QUESTION, focus_edges, parse_explain

pytestmark = pytest.mark.e2e

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def chain_text(chain: list[dict]) -> str:
    """The documented ``Source:`` form: labels from chunk to document, subgraph left out."""
    return " → ".join(link["label"] or link["uri"] for link in chain if link["type"] != "subgraph")


def test_graph_rag_explain_blocks_equal_the_stored_trace(asked):
    d = asked.deployment
    blocks, answer = parse_explain(asked.graph_rag.stdout)
    assert [b.stage for b in blocks] == ["question", "grounding", "exploration", "focus", "synthesis"], \
        asked.graph_rag.explain()
    question, grounding, exploration, focus, synthesis = blocks
    session = re.fullmatch(rf"urn:trustgraph:question:({UUID})", question.uri)
    assert session, question.uri
    assert question.value("Query") == GRAPH_QUESTION
    assert grounding.uri == f"urn:trustgraph:prov:grounding:{session.group(1)}"
    concepts = grounding.value("Concepts")  # the seed entities' labels, the first 20 of them
    assert exploration.uri == f"urn:trustgraph:prov:exploration:{session.group(1)}"
    assert focus.uri == f"urn:trustgraph:prov:focus:{session.group(1)}"
    assert synthesis.uri == f"urn:trustgraph:prov:synthesis:{session.group(1)}"
    counts = re.fullmatch(r"Retrieved (\d+) edge\(s\), (\d+) sent to the model \(budget 3000 tokens\)",
                          exploration.lines[0].strip())
    assert counts, exploration.lines
    edge_count, sent = int(counts.group(1)), int(counts.group(2))
    assert 0 < sent <= edge_count
    printed = focus_edges(focus)
    assert focus.lines[0].strip() == f"Selected {len(printed)} edge(s)"
    assert printed, asked.graph_rag.stdout
    assert all(e.reason for e in printed)
    scored = [line.strip() for line in focus.lines if line.strip().startswith("Concept:")]
    assert len(scored) == len(printed) and all(re.fullmatch(r"Concept: .+  Score: \d\.\d+", x) for x in scored)
    assert all(e.sources and all(re.fullmatch(r"Chunk \d+ → Page \d+ → .+", s) for s in e.sources)
               for e in printed), printed
    assert "radium" in answer.lower()

    stored = d.trace_json(question.uri)
    assert stored["type"] == "graphrag" and stored["uri"] == question.uri
    assert stored["question"] == GRAPH_QUESTION
    assert stored["grounding"]["uri"] == grounding.uri
    assert concepts.split(", ")[0] in stored["grounding"]["concepts"]  # a set in the store: compare one
    assert 0 < len(stored["grounding"]["concepts"]) <= len(stored["exploration"]["seed_entities"])
    assert stored["exploration"]["uri"] == exploration.uri
    assert stored["exploration"]["edge_count"] == edge_count
    assert (stored["exploration"]["sent_edge_count"], stored["exploration"]["selection_token_budget"]) == (sent, 3000)
    assert 0 < stored["exploration"]["selection_prompt_tokens"] <= 3000
    assert stored["focus"]["uri"] == focus.uri
    edges = stored["focus"]["selected_edges"]
    assert [tuple(e["labels"][k] for k in "spo") for e in edges] == [e.labels for e in printed]
    assert [e["reasoning"] for e in edges] == [e.reason for e in printed]
    assert [f"Concept: {e['concept'] or '-'}  Score: {e['score']!r}" for e in edges] == scored
    assert stored["focus"]["usage"]["model"] and stored["synthesis"]["usage"]["model"]
    assert [sorted(chain_text(c) for c in e["sources"]) for e in edges] == [sorted(e.sources) for e in printed]
    # The quoted edges are the original knowledge-graph terms, not labels.
    assert all(e["edge"]["s"]["type"] == "iri" and e["edge"]["p"]["type"] == "iri" for e in edges)
    assert stored["synthesis"]["uri"] == synthesis.uri
    assert stored["synthesis"]["answer"].strip() == answer.strip()


def test_graph_rag_no_streaming_prints_the_same_answer_only(asked):
    d = asked.deployment
    r = d.ok("tg-invoke-graph-rag", "--no-streaming", "-q", GRAPH_QUESTION)
    _, streamed_answer = parse_explain(asked.graph_rag.stdout)
    assert "[question]" not in r.stdout
    assert r.stdout.strip() == streamed_answer.strip()
    assert r.stderr == ""


def test_graph_rag_limits_reach_the_service(asked):
    d = asked.deployment
    r = d.ok("tg-invoke-graph-rag", "-x", "-s", "5", "--edge-limit", "1", "-e", "3", "-q", GRAPH_QUESTION)
    blocks, _ = parse_explain(r.stdout)
    by_stage = {b.stage: b for b in blocks}
    explored = int(re.search(r"Retrieved (\d+) edge", by_stage["exploration"].lines[0]).group(1))
    assert 0 < explored <= 5
    assert len(focus_edges(by_stage["focus"])) <= 1
    stored = d.trace_json(by_stage["question"].uri)
    assert stored["exploration"]["edge_count"] == explored
    assert len(stored["exploration"]["seed_entities"]) <= 3


def test_document_rag_explain_shows_chunks_with_sources(asked):
    d = asked.deployment
    blocks, answer = parse_explain(asked.document_rag.stdout)
    assert [b.stage for b in blocks] == ["question", "grounding", "exploration", "synthesis"], \
        asked.document_rag.explain()
    question, grounding, exploration, synthesis = blocks
    session = re.fullmatch(rf"urn:trustgraph:docrag:({UUID})", question.uri).group(1)
    assert question.value("Query") == DOC_QUESTION
    assert grounding.uri == f"urn:trustgraph:docrag:{session}/grounding" and grounding.value("Concepts") == DOC_QUESTION
    assert exploration.uri == f"urn:trustgraph:docrag:{session}/exploration"
    assert synthesis.uri == f"urn:trustgraph:docrag:{session}/synthesis"
    count = int(re.fullmatch(r"Retrieved (\d+) chunk\(s\)", exploration.lines[0].strip()).group(1))
    printed: dict[str, list[str]] = {}
    for line in exploration.lines[1:]:
        item = line.strip()
        if item.startswith("Chunk: "):
            printed[item[len("Chunk: "):]] = []
        elif item.startswith("Source: "):
            printed[list(printed)[-1]].append(item[len("Source: "):])
    assert len(printed) == count > 0
    assert all(len(s) == 1 and re.fullmatch(r"Chunk \d+ → Page \d+ → .+", s[0]) for s in printed.values()), printed
    assert "becquerel" in answer.lower()

    stored = d.trace_json(question.uri)
    assert stored["type"] == "docrag"
    assert stored["grounding"]["concepts"] == [DOC_QUESTION]
    assert stored["exploration"]["chunk_count"] == count
    # The trace stores the selected chunks as a set: compare chunk -> source, whatever the order.
    assert {c["uri"]: [chain_text(c["chain"])] for c in stored["exploration"]["chunks"]} == printed
    assert stored["synthesis"]["answer"].strip() == answer.strip()


def test_agent_explain_verbose_shows_each_analysis_and_the_linked_sub_trace(asked):
    d = asked.deployment
    blocks, rest = parse_explain(asked.agent.stdout)
    stages = [b.stage for b in blocks]
    assert stages[0] == "question" and stages[-1] == "conclusion", asked.agent.explain()
    root = blocks[0]
    assert re.fullmatch(rf"urn:trustgraph:agent:{UUID}", root.uri), root.uri
    assert root.value("Query") == AGENT_QUESTION
    analyses = [b for b in blocks if b.stage == "analysis"]
    observations = [b for b in blocks if b.stage == "observation"]
    assert analyses and [a.uri for a in analyses] == [f"{root.uri}/i{n}" for n in range(1, len(analyses) + 1)]
    assert [o.uri for o in observations] == [f"{a.uri}/observation" for a in analyses]
    assert all(a.value("Thought") and a.value("Action") for a in analyses)
    assert all(o.value("Observation") for o in observations)
    # each Analysis, then the sub-query it asked, then its Observation
    assert [b.stage for b in blocks[1:4]] == ["analysis", "question", "observation"], asked.agent.explain()
    assert blocks[-1].uri == f"{root.uri}/final"
    # The knowledge-query tool's GraphRAG question names the Analysis that asked for it.
    subs = [b for b in blocks[1:] if b.stage == "question"]
    assert subs and subs[0].value("Asked by") == analyses[0].uri
    assert subs[0].uri.startswith("urn:trustgraph:question:")
    # -v: thoughts and observations are printed as they happen; the answer ends the output.
    assert "Thought: " in rest and "Observation: " in rest
    assert "polonium" in rest.splitlines()[-1].lower()

    stored = d.trace_json(root.uri)
    assert stored["type"] == "agent"
    assert [a["uri"] for a in stored["analyses"]] == [a.uri for a in analyses]
    for printed, seen, a in zip(analyses, observations, stored["analyses"], strict=True):
        assert a["thought"] == printed.value("Thought")  # from the librarian document the Thought names
        assert printed.value("Action").startswith(a["action"])
        assert a["observation_uri"] == seen.uri and a["observation"].startswith(seen.value("Observation")[:100])
        assert a["usage"]["model"]
    assert [s["uri"] for a in stored["analyses"] for s in a["sub_traces"]] == [s.uri for s in subs]
    assert stored["analyses"][0]["sub_traces"][0]["parent"] == analyses[0].uri
    assert stored["conclusion"]["uri"] == blocks[-1].uri
    assert stored["conclusion"]["document"] == f"{root.uri}/answer"
    assert "polonium" in stored["conclusion"]["answer"].lower()

    text = d.ok("tg-show-explain-trace", root.uri).stdout
    assert f"=== GraphRAG trace: {subs[0].uri} ===" in text
    assert f"Asked by: {analyses[0].uri}" in text
    assert "--- Conclusion ---" in text
