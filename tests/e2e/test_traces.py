"""tg-list-explain-traces, tg-show-explain-trace (text, json, turtle, trig), tg-delete/prune-explain-trace(s)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from e2e_support import AGENT_QUESTION, GRAPH_QUESTION, parse_explain

pytestmark = pytest.mark.e2e

#: Traces stored by trace model v1, with their answers (tests/fixtures/trace_v1/README.md).
V1_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "trace_v1"


def _first_uri(result) -> str:
    blocks, _ = parse_explain(result.stdout)
    return blocks[0].uri


def _list_json(d, *args: str) -> dict:
    return json.loads(d.ok("tg-list-explain-traces", "--format", "json", *args).stdout)


def _agent_sub(asked) -> tuple[str, str]:
    """(agent question URI, its GraphRAG sub-trace URI) from the agent's -x output."""
    blocks, _ = parse_explain(asked.agent.stdout)
    sub = next(b for b in blocks[1:] if b.stage == "question")
    return blocks[0].uri, sub.uri


def test_list_json_newest_first_with_types_and_parents(asked):
    d = asked.deployment
    agent_uri, sub_uri = _agent_sub(asked)
    asked.deployment.trace_json(agent_uri)  # distributed: wait until the last trace is stored
    page = _list_json(d)
    traces = page["traces"]
    times = [t["time"] for t in traces]
    assert times == sorted(times, reverse=True)
    by_id = {t["id"]: t for t in traces}
    graph_uri, doc_uri = _first_uri(asked.graph_rag), _first_uri(asked.document_rag)
    assert by_id[graph_uri]["type"] == "GraphRAG" and by_id[graph_uri]["question"] == GRAPH_QUESTION
    assert by_id[doc_uri]["type"] == "DocRAG"
    assert by_id[agent_uri]["type"] == "Agent" and by_id[agent_uri]["parent"] is None
    assert by_id[sub_uri]["parent"] == f"{agent_uri}/i1"
    assert by_id[graph_uri]["parent"] is None
    assert {by_id[u]["status"] for u in (graph_uri, doc_uri, agent_uri, sub_uri)} == {"complete"}
    # asked in this order: graph-rag, document-rag, agent (whose sub-trace starts after it)
    order = [t["id"] for t in traces]
    assert order.index(sub_uri) < order.index(agent_uri) < order.index(doc_uri) < order.index(graph_uri)


def test_list_table_shows_sub_traces_under_their_parent(asked):
    d = asked.deployment
    agent_uri, sub_uri = _agent_sub(asked)
    d.trace_json(agent_uri)
    lines = d.ok("tg-list-explain-traces").stdout.splitlines()
    assert lines[0].split() == ["Session", "Type", "Question", "Time"]
    rows = {line.split()[0] if not line.startswith("  └") else line.split()[1]: (n, line)
            for n, line in enumerate(lines[1:], 1)}
    n_agent, agent_row = rows[agent_uri]
    n_sub, sub_row = rows[sub_uri]
    assert not agent_row.startswith(" ") and "Agent" in agent_row
    assert sub_row.startswith("  └ ") and "GraphRAG" in sub_row
    assert n_sub == n_agent + 1
    # the sub-trace is not also listed as a top-level row
    assert sum(sub_uri in line for line in lines) == 1


def test_list_type_filter_and_limit(asked):
    d = asked.deployment
    doc_uri = _first_uri(asked.document_rag)
    d.trace_json(doc_uri)
    docs = _list_json(d, "--type", "docrag")["traces"]
    assert doc_uri in [t["id"] for t in docs]
    assert {t["type"] for t in docs} == {"DocRAG"}
    agents = _list_json(d, "--type", "agent")["traces"]
    assert agents and {t["type"] for t in agents} == {"Agent"}
    first = _list_json(d, "--limit", "1")
    assert len(first["traces"]) == 1 and first["next_cursor"]
    second = _list_json(d, "--limit", "1", "--cursor", first["next_cursor"])
    assert len(second["traces"]) == 1 and second["traces"][0]["id"] != first["traces"][0]["id"]
    assert second["traces"][0]["time"] <= first["traces"][0]["time"]


def test_show_text_has_every_stage(asked):
    d = asked.deployment
    uri = _first_uri(asked.graph_rag)
    d.trace_json(uri)
    text = d.ok("tg-show-explain-trace", uri, "--show-provenance").stdout
    for heading in (f"=== GraphRAG trace: {uri} ===", f"Question: {GRAPH_QUESTION}", "--- Grounding ---",
                    "Concepts: ", "--- Exploration ---", "--- Focus (edge selection) ---", "--- Synthesis ---",
                    "Answer:"):
        assert heading in text, text
    assert "     Reason: " in text and "     Source: Chunk " in text and "     Concept: " in text
    assert text.count("Model: ") == 2  # the edge selection's and the synthesis' model calls
    plain = d.ok("tg-show-explain-trace", uri).stdout
    assert "Source:" not in plain and "Reason:" in plain

    doc_uri = _first_uri(asked.document_rag)
    d.trace_json(doc_uri)
    doc_text = d.ok("tg-show-explain-trace", doc_uri).stdout
    assert f"=== DocRAG trace: {doc_uri} ===" in doc_text
    assert "chunk(s) from the document store" in doc_text and "--- Synthesis ---" in doc_text

    agent_uri = _first_uri(asked.agent)
    stored = d.trace_json(agent_uri)
    agent_text = d.ok("tg-show-explain-trace", agent_uri).stdout
    first = stored["analyses"][0]
    # the thought, observation and answer texts come from the librarian documents the trace names
    assert first["thought"] and f"Thought: {first['thought']}" in agent_text
    assert first["observation"] and first["observation"].splitlines()[0] in agent_text
    assert stored["conclusion"]["answer"] and stored["conclusion"]["answer"].splitlines()[0] in agent_text
    assert agent_text.index("--- Analysis 1 ") < agent_text.index("--- Conclusion ---")


@pytest.mark.parametrize("fmt", ["turtle", "trig"])
def test_show_rdf_export_parses_back_with_triple_terms(asked, fmt):
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.rdf.export import parse
    from trustgraph_base.schema import TRIPLE

    d = asked.deployment
    uri = _first_uri(asked.graph_rag)
    stored = d.trace_json(uri)
    text = d.ok("tg-show-explain-trace", uri, "--format", fmt).stdout
    assert "<<(" in text
    triples = parse(text.encode(), fmt)
    edges = [t for t in triples if t.p.value == ns.TG_EDGE]
    assert len(edges) == len(stored["focus"]["selected_edges"])
    assert all(t.o.type == TRIPLE for t in edges)
    quoted = {(t.o.triple.s.value, t.o.triple.p.value, t.o.triple.o.value) for t in edges}
    assert quoted == {(e["edge"]["s"]["value"], e["edge"]["p"]["value"], e["edge"]["o"]["value"])
                      for e in stored["focus"]["selected_edges"]}
    subjects = {t.s.value for t in triples}
    assert {uri, stored["exploration"]["uri"], stored["focus"]["uri"], stored["synthesis"]["uri"]} <= subjects
    graphs = {t.g for t in triples}
    assert graphs == ({ns.GRAPH_RETRIEVAL} if fmt == "trig" else {""})


def test_delete_and_prune_remove_whole_traces_only(deployment):
    d = deployment
    collection = "scratch" + uuid.uuid4().hex[:6]
    first = d.ok("tg-invoke-graph-rag", "-x", "-C", collection, "-q", "Who discovered radium?")
    second = d.ok("tg-invoke-document-rag", "-x", "-C", collection, "-q", "What is radium?")
    uri1, uri2 = _first_uri(first), _first_uri(second)
    d.trace_json(uri1, collection=collection)
    d.trace_json(uri2, collection=collection)

    dry = d.ok("tg-delete-explain-trace", uri1, "-C", collection, "--dry-run")
    assert dry.stdout.startswith("Would delete 1 trace(s), ")
    assert d.run("tg-show-explain-trace", uri1, "-C", collection).returncode == 0
    gone = d.ok("tg-delete-explain-trace", uri1, "-C", collection)
    assert gone.stdout.startswith("Deleted 1 trace(s), ") and " 0 triple(s)" not in gone.stdout
    missing = d.run("tg-show-explain-trace", uri1, "-C", collection)
    assert missing.returncode == 1 and missing.stderr.startswith("Error: no trace ")
    left = [t["id"] for t in _list_json(d, "-C", collection)["traces"]]
    assert left == [uri2]

    assert d.ok("tg-prune-explain-traces", "-C", collection, "--older-than", "30d").stdout.startswith(
        "Deleted 0 trace(s)")
    pruned = d.ok("tg-prune-explain-traces", "-C", collection, "--older-than", "1s")
    assert pruned.stdout.startswith("Deleted 1 trace(s)")
    empty = d.ok("tg-list-explain-traces", "-C", collection)
    assert empty.stdout.strip() == f"No traces found for user {d.user}, collection {collection}."
    # other collections keep their traces
    assert _list_json(d)["traces"]


# ------------------------------------------------------------------------------ traces stored by trace model v1

@pytest.fixture
def deployment_stores(deployment, request):
    """(triples store, librarian store) of the deployment, opened on its own database."""
    from trustgraph_base.store.librarian import open_librarian_store
    from trustgraph_base.store.triples import open_triples_store

    if deployment.distributed:
        from trustgraph_base.store.cassandra.connection import CassandraConfig

        cassandra = request.getfixturevalue("cassandra_service")
        config = CassandraConfig(hosts=(cassandra.host,), port=int(cassandra.port))
        stores = open_triples_store("cassandra", config=config), open_librarian_store("cassandra", config=config)
    else:
        home = Path(deployment.env["TG_HOME"])
        stores = open_triples_store("sqlite", home=home), open_librarian_store("sqlite", home=home)
    yield stores
    for store in stores:
        store.close()


def _store_v1_fixture(d, stores, collection: str) -> dict:
    """Store the v1 traces in ``collection`` as v1 stored them: the triples, and each answer in the librarian marked
    with the stage that names it; returns the answers (id -> {stage, text})."""
    from trustgraph_base.provenance.answers import answer_marker
    from trustgraph_base.rdf.export import parse
    from trustgraph_base.schema import DocumentMetadata
    from trustgraph_base.schema.library import ANSWER

    triples, librarian = stores
    answers = json.loads((V1_FIXTURE / "answers.json").read_text())
    triples.insert(d.user, collection, parse((V1_FIXTURE / "traces.trig").read_bytes(), "trig"))
    for doc, answer in answers.items():
        librarian.add_document(d.user, collection, DocumentMetadata(
            id=doc, kind="text/plain", title="Answer", document_type=ANSWER,
            metadata=answer_marker(doc, answer["stage"])), answer["text"].encode())
    return answers


def test_traces_stored_by_trace_model_v1_are_shown_listed_deleted_and_pruned(deployment, deployment_stores):
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.schema import TriplePattern

    d = deployment
    coll = "v1traces" + uuid.uuid4().hex[:6]
    answers = _store_v1_fixture(d, deployment_stores, coll)
    graph = "urn:trustgraph:question:0b7c2a4e-1f3d-4c55-9a61-2e8f7d1c0a01"
    docrag = "urn:trustgraph:docrag:0b7c2a4e-1f3d-4c55-9a61-2e8f7d1c0a02"
    sub = "urn:trustgraph:question:0b7c2a4e-1f3d-4c55-9a61-2e8f7d1c0a03"
    failed = "urn:trustgraph:question:0b7c2a4e-1f3d-4c55-9a61-2e8f7d1c0a04"
    agent = "urn:trustgraph:agent:v1-agent-session-0001"

    listed = {t["id"]: t for t in _list_json(d, "-C", coll)["traces"]}
    assert {u: (t["type"], t["status"], t["parent"]) for u, t in listed.items()} == {
        graph: ("GraphRAG", "complete", None), docrag: ("DocRAG", "complete", None),
        agent: ("Agent", "complete", None), sub: ("GraphRAG", "complete", f"{agent}/i1"),
        failed: ("GraphRAG", "failed", None)}

    shown = d.trace_json(graph, collection=coll)
    assert shown["status"] == "complete" and shown["grounding"] is None
    assert shown["exploration"]["edge_count"] == 12 and len(shown["exploration"]["seed_entities"]) == 2
    edges = shown["focus"]["selected_edges"]
    assert [e["reasoning"].endswith(("score 0.78", "score 0.41")) for e in edges] == [True, True]
    assert [(e["score"], e["concept"]) for e in edges] == [(None, ""), (None, "")]
    assert edges[1]["edge"]["o"] == {"type": "literal", "value": "1898", "datatype": ns.XSD_INTEGER}
    assert shown["synthesis"]["answer"] == answers[shown["synthesis"]["document"]]["text"]
    assert shown["synthesis"]["model"] == "extractive" and shown["focus"]["dropped"] == 1
    assert d.trace_json(docrag, collection=coll)["synthesis"]["answer"] == \
        "The becquerel is the SI unit of radioactivity."
    agent_json = d.trace_json(agent, collection=coll)
    first, second = agent_json["analyses"]
    assert (first["thought"], first["action"], first["arguments"]) == (
        "I should ask the knowledge graph.", "knowledge-query", {"question": AGENT_QUESTION})
    assert first["observation"] == "Marie Curie discovered polonium in 1898." and first["tool_error"] is None
    assert [s["uri"] for s in first["sub_traces"]] == [sub] and first["sub_traces"][0]["status"] == "complete"
    assert second["action"] == "parse-error" and second["tool_error"] == "no Action"
    assert agent_json["conclusion"]["answer"] == "Marie Curie discovered polonium."
    assert d.trace_json(failed, collection=coll, complete=False)["error"]["stage"] == "exploration"
    text = d.ok("tg-show-explain-trace", agent, "-C", coll).stdout
    for line in ("Thought: I should ask the knowledge graph.", "  Marie Curie discovered polonium in 1898.",
                 "Tool error: no Action", "--- Conclusion ---", "  Marie Curie discovered polonium.",
                 f"=== GraphRAG trace: {sub} ==="):
        assert line in text, text

    gone = d.ok("tg-delete-explain-trace", graph, "-C", coll)
    assert gone.stdout.startswith("Deleted 1 trace(s), ") and gone.stdout.rstrip().endswith(
        " 1 answer document(s)."), gone.stdout
    pruned = d.ok("tg-prune-explain-traces", "-C", coll, "--older-than", "1d")
    assert pruned.stdout.startswith("Deleted 4 trace(s), ") and " 2 answer document(s)." in pruned.stdout
    triples, librarian = deployment_stores
    assert triples.count(d.user, coll, TriplePattern(g=ns.GRAPH_RETRIEVAL)) == 0
    assert librarian.list_documents(d.user, coll, "answer", 100) == []
    assert _list_json(d, "-C", coll)["traces"] == []
