"""Tenant isolation: a user or collection never lists, shows, queries or deletes another's traces, documents or
triples, through any CLI command or service request, on both deployments.

The owner (one user and collection) has the sample corpus and three traces (GraphRAG, DocumentRAG,
an agent with its sub-trace).  Two intruders - another user with the same collection name, and
the owner's user in another collection - try every path; afterwards the owner's data is
checked to be exactly as it was.
"""

from __future__ import annotations

import json
from functools import partial

import pytest
from tenants import Deployment, distributed, embedded, intruders

pytestmark = pytest.mark.timeout(900)

QUESTION = "Who discovered polonium?"
DOC_QUESTION = "What is the unit of radioactivity?"


@pytest.fixture(scope="module", params=[pytest.param("embedded", marks=pytest.mark.service),
                                        pytest.param("distributed", marks=pytest.mark.integration)])
def owned(request, tmp_path_factory):
    """(deployment, {kind: trace URI}) with the owner's corpus and traces."""
    if request.param == "embedded":
        d = embedded(tmp_path_factory.mktemp("iso-home"))
    else:
        d = distributed(request.getfixturevalue("fault_stack"))
        d.stack.llm.set_latency(0)
    traces = {"graphrag": d.ok("tg-invoke-graph-rag", "-x", "-q", QUESTION).question_uri,
              "docrag": d.ok("tg-invoke-document-rag", "-x", "-q", DOC_QUESTION).question_uri,
              "agent": d.ok("tg-invoke-agent", "-x", "-q", QUESTION).question_uri}
    return d, traces


def snapshot(d: Deployment, traces: dict[str, str]) -> dict:
    """Everything the owner can see of their traces (to compare before and after the intruders)."""
    shown = {k: json.loads(d.ok("tg-show-explain-trace", uri, "--format", "json").stdout) for k, uri in traces.items()}
    listed = json.loads(d.ok("tg-list-explain-traces", "--limit", "1000", "--format", "json").stdout)["traces"]
    return {"shown": shown, "listed": {t["id"]: t["status"] for t in listed if t["id"] in traces.values()}}


def test_owner_sees_complete_traces(owned):
    d, traces = owned
    snap = snapshot(d, traces)
    assert snap["listed"] == {uri: "complete" for uri in traces.values()}
    assert "polonium" in snap["shown"]["graphrag"]["synthesis"]["answer"].lower()


def test_intruders_cannot_list_show_or_export_traces(owned):
    d, traces = owned
    for user, collection in intruders(d):
        listed = json.loads(d.ok("tg-list-explain-traces", "--limit", "1000", "--format", "json",
                                 user=user, collection=collection).stdout)["traces"]
        assert not {t["id"] for t in listed} & set(traces.values()), (user, collection)
        for uri in traces.values():
            for fmt in ("text", "json", "turtle"):
                r = d.cli("tg-show-explain-trace", uri, "--format", fmt, user=user, collection=collection)
                assert r.returncode == 1 and f"no trace {uri}" in r.stderr and not r.stdout, r.explain()


def test_intruders_cannot_delete_or_prune_traces(owned):
    d, traces = owned
    before = snapshot(d, traces)
    for user, collection in intruders(d):
        for uri in traces.values():
            r = d.cli("tg-delete-explain-trace", uri, user=user, collection=collection)
            assert r.returncode == 1 and "no trace" in r.stderr, r.explain()
        r = d.ok("tg-prune-explain-traces", "--older-than", "1s", user=user, collection=collection)
        assert "Deleted" in r.stdout
    assert snapshot(d, traces) == before


def test_intruders_query_nothing_of_the_owners_knowledge_or_documents(owned):
    from trustgraph_flow.retrieval.document_rag.rag import NO_DOCUMENTS_ANSWER
    from trustgraph_flow.retrieval.graph_rag.rag import NO_KNOWLEDGE_ANSWER

    d, _ = owned
    doc = d.documents[0].id
    assert d.ok("tg-show-extraction-provenance", doc, "--format", "json").stdout  # the owner's control
    for user, collection in intruders(d):
        g = d.ok("tg-invoke-graph-rag", "-q", QUESTION, "--no-streaming", user=user, collection=collection)
        assert g.stdout.strip() == NO_KNOWLEDGE_ANSWER, g.explain()
        r = d.ok("tg-invoke-document-rag", "-q", DOC_QUESTION, "--no-streaming", user=user, collection=collection)
        assert r.stdout.strip() == NO_DOCUMENTS_ANSWER, r.explain()
        p = d.cli("tg-show-extraction-provenance", doc, user=user, collection=collection)
        assert p.returncode != 0 and not p.stdout, p.explain()


async def test_service_requests_of_intruders_find_nothing(owned):
    """The bus paths under the CLI: triples, vectors, librarian, trace listing and trace admin."""
    from trustgraph_base.processor import ServiceError
    from trustgraph_base.provenance.walk import collect_trace
    from trustgraph_base.schema import (
        DocumentEmbeddingsRequest,
        EmbeddingsRequest,
        GraphEmbeddingsRequest,
        LibrarianRequest,
        TraceAdminRequest,
        TraceListRequest,
        TriplePattern,
        TriplesQueryRequest,
        iri,
    )

    d, traces = owned
    doc = d.documents[0].id
    owner, coll = d.owner
    async with d.connect() as conn:
        async def triples(user, collection, patterns):
            return (await conn.request("triples", TriplesQueryRequest(user=user, collection=collection,
                                                                       patterns=patterns))).triples

        embedded_ = await conn.request("embeddings", EmbeddingsRequest(texts=["polonium radium Curie"]))
        vector, model = embedded_.vectors[0], embedded_.model
        owner_trace = await collect_trace(lambda p: triples(owner, coll, p), traces["graphrag"])
        answer_doc = next(t.o.value for t in owner_trace if t.p.value.endswith("/ns/document"))
        # the owner's controls: each path does find the owner's data
        assert await triples(owner, coll, [TriplePattern(limit=5)])
        assert (await conn.request("graph-embeddings", GraphEmbeddingsRequest(
            user=owner, collection=coll, vector=vector, limit=5, model=model))).entities
        assert (await conn.request("librarian", LibrarianRequest(operation="get-document-metadata", user=owner,
                                                                 collection=coll, document_id=doc))).document_metadata
        for user, collection in intruders(d):
            assert await triples(user, collection, [TriplePattern(limit=5, g=""),
                                                    TriplePattern(s=iri(traces["graphrag"]), limit=5),
                                                    TriplePattern(s=iri(doc), limit=5)]) == []
            assert await collect_trace(partial(triples, user, collection), traces["agent"]) == []
            assert not (await conn.request("graph-embeddings", GraphEmbeddingsRequest(
                user=user, collection=collection, vector=vector, limit=5, model=model))).entities
            assert not (await conn.request("document-embeddings", DocumentEmbeddingsRequest(
                user=user, collection=collection, vector=vector, limit=5, model=model))).chunks
            listed = await conn.request("trace-list", TraceListRequest(user=user, collection=collection, limit=1000))
            assert not {t.uri for t in listed.traces} & set(traces.values())
            for op in ("get-document-metadata", "get-document-content", "stream-document", "list-children",
                       "remove-document"):
                for target in (doc, answer_doc):
                    with pytest.raises(ServiceError) as e:
                        await conn.request("librarian", LibrarianRequest(operation=op, user=user, collection=collection,
                                                                         document_id=target))
                    assert e.value.error_type == "not-found", (op, target, e.value)
            for kind in ("source", "answer"):
                listed_docs = await conn.request("librarian", LibrarianRequest(
                    operation="list-documents", user=user, collection=collection, document_type=kind))
                assert not {m.id for m in listed_docs.document_metadatas} & {doc, answer_doc}
            with pytest.raises(ServiceError) as e:
                await conn.request("trace-admin", TraceAdminRequest(operation="delete", user=user,
                                                                    collection=collection, uri=traces["graphrag"]))
            assert e.value.error_type == "not-found"
        # nothing of the owner's went away
        assert (await conn.request("librarian", LibrarianRequest(operation="get-document-content", user=owner,
                                                                 collection=coll, document_id=answer_doc))).content
        after = await collect_trace(lambda p: triples(owner, coll, p), traces["graphrag"])
        assert len(after) == len(owner_trace)
