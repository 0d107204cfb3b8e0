"""Answers reach the librarian on the ``answer-store`` flow queue, with the Synthesis that names them.

The RAG services do not wait for the librarian: they queue the answer together with the
Synthesis stage, and the librarian stores the answer first and only then passes the Synthesis
on to the triple store.  These tests hold the librarian's store down (an injected fault) and
check what that promises: the client still gets its answer, no Synthesis is stored while its
answer is not, and once the store is back both arrive; a redelivered answer is stored once;
a refused one is dead-lettered with its reason and its Synthesis is never stored.

Runs on the in-process bus with SQLite and (integration tier) on real Pulsar with Cassandra.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from test_graph_rag_service import polonium_script, stored_trace

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance import uris
from trustgraph_base.provenance.triples import synthesis_triples
from trustgraph_base.rdf.validation import validate_trace
from trustgraph_base.schema import DocumentMetadata, GraphRagQuery, StoredAnswer, TriplePattern, iri
from trustgraph_base.schema.library import ANSWER, SOURCE
from trustgraph_base.store.errors import NotFound, StoreUnavailable
from trustgraph_flow.embedded import QUERY_STACK

pytestmark = pytest.mark.timeout(600)


def stores(stack):
    """(triple store, librarian store) of a running stack."""
    triples = next(s for s in stack.stores if hasattr(s, "list_traces"))
    librarian = next(s for s in stack.stores if hasattr(s, "stream_content"))
    return triples, librarian


def answer_text(stack, deployment, doc_uri: str) -> str | None:
    _, librarian = stores(stack)
    try:
        return librarian.get_content(deployment.user, deployment.collection, doc_uri).decode("utf-8")
    except NotFound:
        return None


async def until(check, seconds: float = 60.0, what: str = "condition"):
    """Poll ``check()`` (sync or async) until it returns something truthy; return that."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


def stage_types(trace) -> set[str]:
    return {t.o.value for t in trace if t.p.value == ns.RDF_TYPE}


async def test_the_synthesis_is_stored_only_after_its_answer(deployment, llm_server, llm_settings):
    """Librarian store down: the query still answers; the stored trace stops at Focus until the answer is in."""
    from trustgraph_cli.connection import Connection

    llm_server.set_script(polonium_script({}, malformed_extra=False))
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    _, librarian = stores(stack)
    real_add = librarian.add_document
    down = {"on": True, "refused": 0}

    def add_document(*args, **kwargs):
        if down["on"]:
            down["refused"] += 1
            raise StoreUnavailable("injected: the librarian's store is down")
        return real_add(*args, **kwargs)

    librarian.add_document = add_document
    try:
        async with Connection.attach(stack, timeout=60) as conn:
            client = await conn.client("graph-rag")
            msgs = [m async for m in client.stream(GraphRagQuery(
                query="Who discovered polonium?", user=deployment.user, collection=deployment.collection))]
        # the librarian is not on the query path: a complete answer, no error
        assert msgs[-1].end_of_session and msgs[-1].error is None
        answer = "".join(m.response for m in msgs if m.message_type == "chunk")
        assert "polonium" in answer.lower()
        q_uri = msgs[0].explain_id
        session = q_uri.rsplit(":", 1)[-1]
        doc_uri = uris.answer_document_uri(session)
        assert any(m.explain_id == uris.synthesis_uri(session) for m in msgs)  # the client saw the Synthesis

        # while the store is down: Focus stored, the answer refused (and retried), no Synthesis
        await until(lambda: down["refused"] >= 2, what="the librarian to retry the answer")
        trace = await until(lambda: _stored_with(stack, deployment, q_uri, ns.TG_FOCUS), what="the Focus stage")
        assert ns.TG_SYNTHESIS not in stage_types(trace)
        assert answer_text(stack, deployment, doc_uri) is None

        # the store comes back: the answer, then its Synthesis, arrive without anyone resending
        down["on"] = False
        trace = await until(lambda: _stored_with(stack, deployment, q_uri, ns.TG_SYNTHESIS), what="the Synthesis")
        assert answer_text(stack, deployment, doc_uri) == answer
        assert next(t.o.value for t in trace if t.p.value == ns.TG_DOCUMENT) == doc_uri
        streamed = {(t.s.value, t.p.value, str(t.o.value)) for m in msgs if m.message_type == "explain"
                    for t in m.explain_triples}
        assert {(t.s.value, t.p.value, str(t.o.value)) for t in trace} == streamed
        report = validate_trace(trace)
        assert report.conforms, [v.message for v in report.violations]
        await stack.wait_idle()
    finally:
        librarian.add_document = real_add
        await stack.stop()


async def _stored_with(stack, deployment, q_uri: str, stage_type: str):
    trace = await stored_trace(stack, deployment, q_uri)
    return trace if stage_type in stage_types(trace) else None


def stored_answer(deployment, session: str, text: str, *, document_type: str = ANSWER,
                  user: str | None = None) -> StoredAnswer:
    """A StoredAnswer as the GraphRAG service sends it (answer document plus its Synthesis stage)."""
    doc_uri, syn_uri = uris.answer_document_uri(session), uris.synthesis_uri(session)
    user = user or deployment.user
    return StoredAnswer(
        user=user, collection=deployment.collection, content=text.encode("utf-8"),
        metadata=DocumentMetadata(id=doc_uri, time=time.time(), title="Answer", document_type=document_type),
        explain_id=syn_uri, explain_triples=synthesis_triples(syn_uri, uris.focus_uri(session), doc_uri))


async def test_a_redelivered_answer_is_stored_once(deployment):
    from trustgraph_base.codec import encode
    from trustgraph_base.pubsub import flow_queue

    stack = await deployment.start(("librarian", "triples-write"))
    session = uris.new_id()
    msg = stored_answer(deployment, session, "Marie Curie discovered polonium.")
    producer = await stack.backend.create_producer(flow_queue("answer-store", stack.flow))
    try:
        for _ in range(2):  # the same message twice, as a redelivery would bring it
            await producer.send(encode(msg))
        syn = iri(uris.synthesis_uri(session))
        triples, librarian = stores(stack)
        found = await until(lambda: triples.query(deployment.user, deployment.collection,
                                                  TriplePattern(s=syn, g=ns.GRAPH_RETRIEVAL)),
                            what="the Synthesis stage")
        await stack.wait_idle()
        found = triples.query(deployment.user, deployment.collection, TriplePattern(s=syn, g=ns.GRAPH_RETRIEVAL))
        assert len(found) == len(msg.explain_triples)  # no duplicate rows
        answers = [d for d in librarian.list_documents(deployment.user, deployment.collection, ANSWER, 10_000)
                   if d.id == msg.metadata.id]
        assert len(answers) == 1
        assert librarian.get_content(deployment.user, deployment.collection, msg.metadata.id) == msg.content
    finally:
        await producer.close()
        await stack.stop()


@pytest.mark.parametrize("fault", ["not-an-answer", "hostile-user"])
async def test_a_refused_answer_is_dead_lettered_and_its_synthesis_never_stored(deployment, fault):
    from trustgraph_base.codec import encode
    from trustgraph_base.pubsub import dead_letter_queue, flow_queue

    stack = await deployment.start(("librarian", "triples-write"))
    session = uris.new_id()
    if fault == "not-an-answer":  # the queue must not become a way round the source-document checks
        msg = stored_answer(deployment, session, "text", document_type=SOURCE)
    else:
        msg = stored_answer(deployment, session, "text", user="x'); DROP KEYSPACE tg; --")
    queue = flow_queue("answer-store", stack.flow)
    dlq = await stack.backend.subscribe(dead_letter_queue(queue), f"inspect-{uuid.uuid4().hex[:8]}", shared=False)
    producer = await stack.backend.create_producer(queue)
    try:
        payload = encode(msg)
        await producer.send(payload)
        dead = await dlq.receive(timeout=60)
        await dlq.ack(dead)
        assert dead.data == payload
        reason = dead.properties["dlq-reason"]
        assert ("document_type 'answer'" in reason) if fault == "not-an-answer" else ("user" in reason.lower()), reason
        await dlq.close()
        await stack.wait_idle()
        triples, librarian = stores(stack)
        syn = iri(uris.synthesis_uri(session))
        assert triples.query(deployment.user, deployment.collection, TriplePattern(s=syn)) == []
        with pytest.raises(NotFound):
            librarian.get_metadata(deployment.user, deployment.collection, msg.metadata.id)
    finally:
        await producer.close()
        await stack.stop()
