"""The gateway's translators, driven by frames TrustGraph 2.11.1's own client sent and accepted.

``tests/fixtures/tg_frames``: "in" frames are what the real client sends (every one must
translate), "out" frames show encodings the client read (our encoders must produce them
exactly from our dataclasses).
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import pytest

from trustgraph_base.provenance.namespaces import RDFS_LABEL
from trustgraph_base.schema import (
    AgentRequest,
    AgentResponse,
    DocumentRagQuery,
    GraphRagQuery,
    GraphRagResponse,
    Source,
    Term,
    Triple,
    TriplesQueryRequest,
    TriplesQueryResponse,
    iri,
    literal,
    triple_term,
)
from trustgraph_flow.gateway.library import content_of, metadata_from_wire, metadata_to_wire
from trustgraph_flow.gateway.terms import MAX_TERM_DEPTH, quad_from_wire, quad_to_wire, term_from_wire, term_to_wire
from trustgraph_flow.gateway.translate import (
    agent_response,
    flow_request,
    graph_of,
    is_complete,
    rag_response,
    response_error,
    triples_response,
)
from trustgraph_flow.gateway.wire import GatewayRequestError

pytestmark = pytest.mark.unit

FRAMES = Path(__file__).parent.parent / "fixtures" / "tg_frames"
USER = "alice"


def frames(direction: str) -> list[dict]:
    out = []
    for name in ("frames_plain.jsonl", "frames_bridge.jsonl"):
        for line in (FRAMES / name).read_text().splitlines():
            entry = json.loads(line)
            if entry["dir"] == direction:
                out.append(entry["msg"])
    return out


def requests_of(service: str) -> list[dict]:
    return [f for f in frames("in") if f.get("service") == service]


def recorded_quads() -> list[dict]:
    quads = []
    for f in frames("out"):
        body = f.get("response")
        if isinstance(body, dict):
            quads += body.get("explain_triples", [])
            if isinstance(body.get("response"), list):
                quads += body["response"]
    return quads


# ------------------------------------------------------------------------------------ terms

def test_recorded_quads_cover_every_term_shape():
    kinds = {q["o"]["t"] for q in recorded_quads()}
    assert {"i", "l", "t"} <= kinds
    assert any("dt" in q["o"] for q in recorded_quads())
    assert any("g" not in q for q in recorded_quads()) and any("g" in q for q in recorded_quads())


def test_every_recorded_quad_round_trips_exactly():
    quads = recorded_quads()
    assert len(quads) > 500
    for q in quads:
        assert quad_to_wire(quad_from_wire(q)) == q


def test_default_graph_is_absent_g_both_ways():
    t = quad_from_wire({"s": {"t": "i", "i": "http://x/a"}, "p": {"t": "i", "i": "http://x/p"},
                        "o": {"t": "l", "v": "v"}})
    assert t.g == ""
    assert "g" not in quad_to_wire(t)
    named = Triple(iri("http://x/a"), iri("http://x/p"), literal("v"), "urn:graph:retrieval")
    assert quad_to_wire(named)["g"] == "urn:graph:retrieval"


def test_terms_keep_datatype_language_and_nested_triples():
    terms = [literal("150", datatype="http://www.w3.org/2001/XMLSchema#integer"), literal("radium", language="en"),
             Term("b", "b0"), triple_term(iri("http://x/a"), iri("http://x/p"), literal("1", language="fr"))]
    for t in terms:
        assert term_from_wire(term_to_wire(t)) == t
    assert term_to_wire(terms[0]) == {"t": "l", "v": "150", "dt": "http://www.w3.org/2001/XMLSchema#integer"}
    assert term_to_wire(terms[1]) == {"t": "l", "v": "radium", "ln": "en"}
    assert term_to_wire(terms[2]) == {"t": "b", "d": "b0"}


@pytest.mark.parametrize("bad", [
    None, "http://x", {"i": "http://x"}, {"t": "x", "i": "http://x"}, {"t": "i"}, {"t": "i", "i": 5},
    {"t": "l", "v": 3}, {"t": "b"}, {"t": "t"}, {"t": "t", "tr": {"s": {"t": "i", "i": "http://x"}}},
])
def test_malformed_terms_are_refused_with_a_reason(bad):
    with pytest.raises(GatewayRequestError) as e:
        term_from_wire(bad)
    assert e.value.error_type == "request-error" and e.value.message


def test_triple_terms_nested_too_deeply_are_refused():
    term = {"t": "i", "i": "http://x/a"}
    for _ in range(MAX_TERM_DEPTH + 1):
        term = {"t": "t", "tr": {"s": term, "p": {"t": "i", "i": "http://x/p"}, "o": {"t": "l", "v": "o"}}}
    with pytest.raises(GatewayRequestError, match="nested deeper"):
        term_from_wire(term)


# ------------------------------------------------------------------------------ requests

def test_graph_rag_requests_of_the_real_client_map_hyphenated_keys():
    recorded = requests_of("graph-rag")
    assert recorded
    for frame in recorded:
        req = flow_request("graph-rag", frame["request"], USER)
        assert isinstance(req, GraphRagQuery)
        assert (req.query, req.user, req.collection) == ("Who discovered polonium?", USER, "default")
        assert (req.entity_limit, req.triple_limit, req.max_subgraph_size, req.max_path_length, req.edge_limit) == \
            (50, 30, 150, 2, 25)
        assert req.streaming is True and req.explainable is True


def test_document_rag_requests_of_the_real_client():
    for frame in requests_of("document-rag") + [f["body"] for f in frames("rest-in")
                                                if f["path"].endswith("/document-rag")]:
        body = frame.get("request", frame)
        req = flow_request("document-rag", body, USER)
        assert isinstance(req, DocumentRagQuery)
        assert (req.doc_limit, req.collection, req.user) == (10, "default", USER)


def test_agent_requests_without_session_id_get_a_fresh_one():
    recorded = requests_of("agent")
    assert len(recorded) >= 3
    ids = []
    for frame in recorded:
        req = flow_request("agent", frame["request"], USER)
        assert isinstance(req, AgentRequest)
        assert req.collection == "default" and req.question
        uuid.UUID(req.session_id)
        ids.append(req.session_id)
    assert len(set(ids)) == len(ids)
    given = flow_request("agent", {"question": "q", "session_id": "s-1"}, USER)
    assert given.session_id == "s-1"


def test_triples_requests_of_the_real_client_follow_trustgraphs_g_rules():
    recorded = requests_of("triples")
    assert len(recorded) > 50
    for frame in recorded:
        body = frame["request"]
        req = flow_request("triples", body, USER)
        assert isinstance(req, TriplesQueryRequest) and req.user == USER
        label_lookup = body.get("p", {}).get("i") == RDFS_LABEL and "s" in body and "o" not in body
        if "g" in body:
            assert req.g == body["g"]
        elif label_lookup:
            assert req.g is None  # every graph: provenance hops keep their labels in urn:graph:source
        elif any(k in body for k in ("s", "p", "o")):
            assert req.g == ""  # the default graph only
        assert req.limit == body["limit"]
        assert req.streaming is True  # always streamed from the service; joined again unless asked
        assert req.batch_size == body.get("batch-size", 1000)
    assert any("g" not in f["request"] for f in recorded)
    assert any(f["request"].get("p", {}).get("i") == RDFS_LABEL and "g" not in f["request"] for f in recorded)


def test_a_label_look_up_without_a_graph_reads_every_graph_and_nothing_else_does():
    s, label = {"t": "i", "i": "urn:chunk:1"}, {"t": "i", "i": RDFS_LABEL}
    assert flow_request("triples", {"s": s, "p": label, "limit": 1}, USER).g is None
    assert flow_request("triples", {"s": s, "p": label, "g": "", "limit": 1}, USER).g == ""
    assert flow_request("triples", {"s": s, "p": label, "o": {"t": "l", "v": "x"}}, USER).g == ""
    assert flow_request("triples", {"p": label}, USER).g == ""
    assert flow_request("triples", {"s": s, "p": {"t": "i", "i": "http://x/p"}}, USER).g == ""


@pytest.mark.parametrize("body, expected", [
    ({}, None), ({"g": "*"}, None), ({"g": "*", "s": {"t": "i", "i": "http://x"}}, None),
    ({"s": {"t": "i", "i": "http://x"}}, ""), ({"p": {"t": "i", "i": "http://x"}}, ""),
    ({"g": ""}, ""), ({"g": "urn:graph:source"}, "urn:graph:source"),
])
def test_g_translation(body, expected):
    assert graph_of(body) == expected


@pytest.mark.parametrize("service, body, words", [
    ("graph-rag", {"query": ""}, "'query'"),
    ("graph-rag", {"query": "q", "entity-limit": -1}, "entity-limit"),
    ("graph-rag", {"query": "q", "entity-limit": "5"}, "entity-limit"),
    ("graph-rag", {"query": "q", "grounding-seeds": ["radium"]}, "grounding-seeds"),
    ("graph-rag", {"query": "q", "graph": "urn:x"}, "'graph'"),
    ("graph-rag", {"query": "q", "collection": "../etc"}, "invalid collection"),
    ("graph-rag", {"query": "q", "streaming": "yes"}, "streaming"),
    ("document-rag", {"query": 5}, "'query'"),
    ("agent", {"question": "q", "pattern": "swarm"}, "not supported"),
    ("agent", {"question": "q", "group": [1]}, "group"),
    ("agent", {}, "'question'"),
    ("triples", {"limit": 0}, "limit"),
    ("triples", {"limit": 10, "s": {"t": "z"}}, "'t'"),
    ("triples", {"g": 5}, "'g'"),
    ("nope", {}, "unknown service"),
    ("graph-rag", ["query"], "must be an object"),
])
def test_unusable_requests_are_refused_before_any_service(service, body, words):
    with pytest.raises(GatewayRequestError) as e:
        flow_request(service, body, USER)
    assert words in e.value.message
    assert e.value.wire() == {"type": "request-error", "message": e.value.message}


# ----------------------------------------------------------------------------- responses

def test_rag_explain_messages_encode_as_the_client_read_them():
    recorded = [f["response"] for f in frames("out")
                if isinstance(f.get("response"), dict) and f["response"].get("message_type") == "explain"
                and "end_of_session" in f["response"]]
    assert recorded
    for body in recorded:
        ours = GraphRagResponse(message_type="explain", explain_id=body["explain_id"],
                                explain_graph=body["explain_graph"], explain_collection="elsewhere",
                                explain_triples=[quad_from_wire(q) for q in body["explain_triples"]])
        assert rag_response(ours) == body


def test_rag_final_message_carries_usage_and_sources():
    final = GraphRagResponse(message_type="chunk", end_of_stream=True, end_of_session=True, model="extractive",
                             sources=[Source("urn:document:curie.txt", "Marie and Pierre Curie: Polonium and Radium")])
    assert rag_response(final) == {
        "message_type": "chunk", "end_of_stream": True, "end_of_session": True, "in_token": 0, "out_token": 0,
        "model": "extractive", "sources": [{"uri": "urn:document:curie.txt",
                                            "title": "Marie and Pierre Curie: Polonium and Radium"}]}
    assert is_complete("graph-rag", final) and not is_complete("graph-rag", GraphRagResponse())
    # TrustGraph's clients expect numbers: counts the endpoint did not report go out as 0 (docs/gateway.md)
    unreported = GraphRagResponse(message_type="chunk", end_of_stream=True, end_of_session=True, in_token=None,
                                  out_token=None, unreported_calls=2, model="llama")
    assert rag_response(unreported) == {"message_type": "chunk", "end_of_stream": True, "end_of_session": True,
                                        "in_token": 0, "out_token": 0, "model": "llama"}


def test_agent_messages_encode_as_the_client_read_them():
    recorded = [f["response"] for f in frames("out")
                if isinstance(f.get("response"), dict) and "end_of_dialog" in f["response"]
                and f["response"].get("message_type") != "explain"]
    assert recorded
    for body in recorded:
        ours = AgentResponse(message_type=body["message_type"], content=body.get("content", ""),
                             end_of_message=body["end_of_message"], end_of_dialog=body["end_of_dialog"])
        assert agent_response(ours) == body


def test_triples_and_error_responses():
    t = Triple(iri("http://x/a"), iri("http://x/p"), literal("v"))
    assert triples_response(TriplesQueryResponse(triples=[t])) == {"response": [quad_to_wire(t)]}
    from trustgraph_base.schema import Error

    assert response_error(GraphRagResponse(error=Error("graph-rag-error", "boom"))) == \
        {"type": "graph-rag-error", "message": "boom"}
    assert response_error(GraphRagResponse()) is None


# ----------------------------------------------------------------------------- librarian

def test_add_document_body_of_the_real_client_translates():
    doc_id = "https://trustgraph.ai/doc/9f86d081884c7d65"
    body = {"operation": "add-document", "workspace": "default",
            "document-metadata": {"id": doc_id, "time": 1733300000, "kind": "text/plain", "title": "Notes",
                                  "comments": "", "tags": [],
                                  "metadata": [{"s": {"t": "i", "i": doc_id},
                                                "p": {"t": "i", "i": "https://schema.org/name"},
                                                "o": {"t": "l", "v": "Notes"}}]},
            "content": base64.b64encode(b"Radium glows.").decode()}
    meta = metadata_from_wire(body["document-metadata"])
    assert (meta.id, meta.kind, meta.title, meta.time) == (doc_id, "text/plain", "Notes", 1733300000.0)
    assert meta.metadata[0].o == literal("Notes") and meta.metadata[0].g == ""
    assert content_of(body) == b"Radium glows."
    assert metadata_to_wire(meta) == body["document-metadata"]


@pytest.mark.parametrize("bad", [{"content": "not base64!"}, {"content": 5}, {}])
def test_add_document_content_must_be_base64(bad):
    with pytest.raises(GatewayRequestError):
        content_of(bad)
