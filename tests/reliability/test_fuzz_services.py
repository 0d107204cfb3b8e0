"""Hostile input through the real services (embedded stack: in-process bus, SQLite) and the LLM's output.

- every request/response service gets undecodable payloads and decodable requests full of
  hostile values (CQL and path fragments in names, Turtle in text, absurd numbers): each gets
  exactly one final reply (an ``Error`` for the bad ones), nothing is written for a refused
  request, no file appears outside ``$TG_HOME``, and the service still answers afterwards;
- every flow consumer gets the same: refused messages are dead-lettered with a reason, a batch
  with one bad triple writes nothing, and the consumer keeps consuming;
- the LLM (the project's scripted test server) answers edge selection, synthesis (GraphRAG and
  DocumentRAG) and the ReAct prompt with arbitrary text: every query still ends (answer or error),
  its stored trace is SHACL-valid, an empty answer is an Error, never an answer, and only edges
  that exist in the knowledge graph are ever recorded as selected;
- agent requests that reuse session ids, one after the other and at once: per session id one run,
  every other request refused with an Error naming the id;
- oversized payloads get a clear refusal.

Hypothesis drives the inputs with a bounded number of examples (see ``fuzz cases run`` at the
end of the session).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from fuzz_inputs import ATTACKS, JSON, NAME_ATTACKS, TERMS, count, request_of
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.service, pytest.mark.timeout(900)]

REPLY_SECONDS = 60.0


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.filter_too_much])


class Stack:
    """The embedded stack on an event loop of its own thread, so synchronous hypothesis tests can drive it."""

    def __init__(self, home: Path, llm):
        self.home, self.llm = home, llm
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fuzz-stack", daemon=True)
        self.thread.start()
        self.script = None
        self.stack = None

    def run(self, coro, timeout: float = 300.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        from trustgraph_flow.embedded import ALL, start_embedded

        settings_ = {"text-completion": {"base_url": self.llm.base_url, "api_key": "k", "model": "scripted",
                                         "max_retries": 0, "timeout": 30.0},
                     "agent-manager-react": {"max_iterations": 3}, "kg-extract": {"extractor": "pattern"}}
        self.stack = self.run(start_embedded(self.home, only=ALL, llm="openai", settings=settings_))

    def stop(self) -> None:
        if self.stack is not None:
            self.run(self.stack.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    @property
    def backend(self):
        return self.stack.backend

    def store(self, kind: str):
        return next(s for s in self.stack.stores if hasattr(s, {"triples": "list_traces",
                                                                 "librarian": "stream_content"}[kind]))

    async def raw(self, service: str, payload: bytes, timeout: float = REPLY_SECONDS) -> list:
        """Send raw bytes to ``service``'s request queue; return its decoded replies up to the final one."""
        from trustgraph_base.codec import decode
        from trustgraph_base.processor.client import default_is_final
        from trustgraph_base.pubsub.topics import request_queue, response_queue
        from trustgraph_flow.common.services import SERVICES

        s = SERVICES[service]
        rid = uuid.uuid4().hex
        consumer = await self.backend.subscribe(response_queue(service, self.stack.flow), f"fuzz-{rid}", shared=False)
        producer = await self.backend.create_producer(request_queue(service, self.stack.flow))
        final = default_is_final(s.response)
        replies = []
        try:
            await producer.send(payload, {"id": rid})
            while True:
                msg = await consumer.receive(timeout=timeout)
                await consumer.ack(msg)
                if msg.properties.get("id") != rid:
                    continue
                reply = decode(s.response, msg.data)
                replies.append(reply)
                if final(reply) or getattr(reply, "error", None) is not None:
                    return replies
        finally:
            await producer.close()
            await consumer.close()

    async def idle(self) -> None:
        await self.stack.wait_idle(timeout=120)


def scripted_llm():
    from trustgraph_flow.model.testserver import start_server

    holder: dict = {"script": None}

    def script(template_id, terms, messages):
        fn = holder["script"]
        if fn is None:
            raise RuntimeError("no script")
        return fn(template_id, terms, messages)

    server = start_server("scripted", script=script)
    server.holder = holder
    return server


@pytest.fixture(scope="module")
def fuzz_stack(tmp_path_factory):
    """Every processor, SQLite under a fresh TG_HOME with the sample corpus, LLM = the scripted test server."""
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.load import load_documents
    from trustgraph_flow.ingest.sample_corpus import sample_documents

    llm = scripted_llm()
    home = tmp_path_factory.mktemp("fuzz-home")
    stack = Stack(home, llm)
    try:
        stack.start()

        async def ingest():
            async with Connection.attach(stack.stack, timeout=120) as conn:
                await load_documents(conn, "trustgraph", "default",
                                     [(d.id, d.title, d.kind, d.content) for d in sample_documents()],
                                     idle_timeout=120, show=False)
            await stack.idle()

        stack.run(ingest())  # the pattern extractor: the LLM is not asked while loading
        yield stack
    finally:
        stack.stop()
        llm.stop()


def _files(home: Path) -> set[str]:
    return {str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()}


def _check_reply(service: str, replies: list) -> None:
    assert replies, f"{service}: no reply"
    for r in replies:
        err = getattr(r, "error", None)
        if err is not None:
            assert err.message.strip(), f"{service}: an error reply without a message"


def replies_from(texts: list[str]):
    """A scripted LLM that answers with ``texts`` in turn (drawn before the query: the server runs in a thread)."""
    state = {"n": 0}

    def script(template_id, terms, messages):
        text = texts[state["n"] % len(texts)]
        state["n"] += 1
        if "%s" in text and template_id == "kg-edge-selection":
            ids = [k["id"] for k in terms.get("knowledge", [])] or ["00000000"]
            text = text.replace("%s", ids[state["n"] % len(ids)])
        return text

    return script


LLM_TEXT = st.one_of(st.text(max_size=300), st.sampled_from(ATTACKS),
                     st.lists(st.one_of(st.sampled_from(['{"id": "%s", "reasoning": "r"}', "```jsonl", "```", "",
                                                         '{"id": 7}', "[1, 2]", "not json"]), st.text(max_size=40)),
                              max_size=8).map("\n".join))


# ------------------------------------------------------------------------------------------ request decoding

SERVICES = ["triples", "trace-list", "trace-admin", "trace-claim", "graph-embeddings", "document-embeddings",
            "embeddings", "prompt", "text-completion", "librarian", "graph-rag", "document-rag", "agent"]


@fuzz(12)
@given(data=st.data())
@pytest.mark.parametrize("service", SERVICES)
def test_undecodable_requests_get_a_bad_request_error(fuzz_stack, service, data):
    count(f"requests: undecodable ({service})")
    from trustgraph_base.codec import CodecError, decode
    from trustgraph_flow.common.services import SERVICES as SPECS

    payload = data.draw(st.one_of(st.binary(max_size=200), JSON.map(lambda v: json.dumps(v).encode()),
                                  st.sampled_from([b"", b"null", b"[]", b'{"user": 5}', b"[" * 50_000,
                                                   b'{"query": ' + b"[" * 10_000 + b"}"])))
    try:
        decode(SPECS[service].request, payload)
        decodable = True
    except CodecError:
        decodable = False
    replies = fuzz_stack.run(fuzz_stack.raw(service, payload))
    _check_reply(service, replies)
    if not decodable:
        assert len(replies) == 1 and replies[0].error.type == "bad-request", replies
        assert "cannot decode request" in replies[0].error.message


def _strategy(service: str):
    from trustgraph_flow.common.services import SERVICES as SPECS

    cls = SPECS[service].request
    names = {"user": NAME_ATTACKS | st.just("trustgraph"), "collection": NAME_ATTACKS | st.just("default")}
    extra = {
        "librarian": {"operation": st.sampled_from(["add-document", "add-child-document", "get-document-metadata",
                                                    "get-document-content", "stream-document", "list-documents",
                                                    "list-children", "remove-document", "process-document", "x"])},
        "trace-admin": {"operation": st.sampled_from(["delete", "prune", "purge"]),
                        "dry_run": st.just(True)},
        "agent": {"max_iterations": st.integers(0, 2), "question": st.sampled_from(ATTACKS) | st.text(max_size=60)},
        "graph-rag": {"entity_limit": st.integers(-2, 20), "triple_limit": st.integers(-2, 20),
                      "max_subgraph_size": st.integers(-2, 50), "max_path_length": st.integers(-1, 3),
                      "edge_limit": st.integers(-1, 10)},
        "embeddings": {"texts": st.lists(st.sampled_from(ATTACKS) | st.text(max_size=200), max_size=3)},
    }.get(service, {})
    fields = {f: s for f, s in {**names, **extra}.items() if f in cls.__dataclass_fields__}
    return request_of(cls, **fields)


@fuzz(15)
@given(data=st.data())
@pytest.mark.parametrize("service", SERVICES)
def test_hostile_requests_get_one_clear_final_reply(fuzz_stack, service, data):
    """Decodable requests with hostile contents: a reply (an Error when refused); no file outside its place."""
    from trustgraph_base.codec import CodecError, encode
    from trustgraph_base.store.names import InvalidName, check_collection, check_user

    fuzz_stack.llm.holder["script"] = replies_from(data.draw(st.lists(LLM_TEXT, min_size=1, max_size=4),
                                                             label="llm replies"))
    request = data.draw(_strategy(service))
    try:
        payload = encode(request)
    except CodecError:
        assume(False)  # not sendable at all (e.g. an unpaired surrogate): nothing reaches the service
    count(f"requests: hostile values ({service})")
    before = _files(fuzz_stack.home)
    replies = fuzz_stack.run(fuzz_stack.raw(service, payload))
    _check_reply(service, replies)
    user, collection = getattr(request, "user", "trustgraph"), getattr(request, "collection", "default")
    try:
        check_user(user)
        check_collection(collection)
        valid_names = True
    except InvalidName:
        valid_names = False
    if not valid_names:
        # the agent without a session id may answer from the LLM alone (it stores nothing); every service
        # that would touch a store refuses the name
        if service not in ("embeddings", "prompt", "text-completion", "agent"):
            assert replies[-1].error is not None, f"{service} accepted user {user!r} / collection {collection!r}"
        fuzz_stack.run(fuzz_stack.idle())
        assert _files(fuzz_stack.home) == before  # an invalid name reaches no store: no file appears
    for f in _files(fuzz_stack.home) - before:
        assert f.startswith(("triples/", "librarian/", "vectors/")) and ".." not in f, f


# ------------------------------------------------------------------------------------------ flow consumers

@fuzz(30)
@given(flow=st.sampled_from(["triples-store", "document-load", "text-pages", "chunks", "entity-contexts",
                             "answer-store"]),
       data=st.data())
def test_flow_consumers_dead_letter_what_they_refuse(fuzz_stack, flow, data):
    """Undecodable messages are dead-lettered with the reason; hostile decodable ones are handled or dead-lettered."""
    from trustgraph_base.codec import CodecError, decode, encode
    from trustgraph_base.pubsub import dead_letter_queue, flow_queue
    from trustgraph_base.schema import Metadata
    from trustgraph_flow.common.services import FLOWS

    if data.draw(st.booleans(), label="raw bytes"):
        payload = data.draw(st.binary(max_size=100) | JSON.map(lambda v: json.dumps(v).encode()))
    else:
        names = {"user": NAME_ATTACKS | st.just("fuzzer"), "collection": NAME_ATTACKS | st.just("default")}
        if flow == "answer-store":  # names at the top level; its metadata is a DocumentMetadata
            fields = names
        else:
            fields = {"metadata": st.none() | request_of(Metadata, **names)}
        try:
            payload = encode(data.draw(request_of(FLOWS[flow], **fields)))
        except CodecError:
            assume(False)
    try:
        decode(FLOWS[flow], payload)
        undecodable = False
    except CodecError:
        undecodable = True
    count("flows: hostile messages")

    async def send():
        dlq = await fuzz_stack.backend.subscribe(dead_letter_queue(flow_queue(flow, fuzz_stack.stack.flow)),
                                                 f"inspect-{uuid.uuid4().hex[:8]}", shared=False)
        producer = await fuzz_stack.backend.create_producer(flow_queue(flow, fuzz_stack.stack.flow))
        try:
            await producer.send(payload)
            if undecodable:
                dead = await dlq.receive(timeout=30)
                await dlq.ack(dead)
                assert dead.data == payload and dead.properties["dlq-reason"].startswith("undecodable"), dead
        finally:
            await producer.close()
            await dlq.close()  # before waiting for idle: an unread dead letter would count as pending work
        await fuzz_stack.idle()

    fuzz_stack.run(send())


@fuzz(40)
@given(good=st.lists(st.builds(lambda i, v: (i, v), st.integers(0, 5), st.text(max_size=20)), min_size=1,
                     max_size=5),
       bad=TERMS, where=st.sampled_from(["s", "p", "o", "g"]))
def test_a_batch_with_one_bad_triple_writes_nothing(fuzz_stack, good, bad, where):
    from trustgraph_base.codec import CodecError, encode
    from trustgraph_base.pubsub import flow_queue
    from trustgraph_base.rdf.terms import TermError, validate_iri, validate_term
    from trustgraph_base.schema import Metadata, Triple, TriplePattern, Triples, iri, literal

    def invalid(check, value) -> bool:
        try:
            check(value)
        except TermError:
            return True
        return False

    if where == "g":
        assume(bad.value and invalid(validate_iri, bad.value))
        broken = Triple(iri("urn:x:s"), iri("urn:x:p"), literal("v"), bad.value)
    else:
        assume(invalid(validate_term, bad) or (where == "p" and bad.type != "i"))
        parts = {"s": iri("urn:x:s"), "p": iri("urn:x:p"), "o": literal("v"), where: bad}
        broken = Triple(parts["s"], parts["p"], parts["o"])
    collection = f"bad{uuid.uuid4().hex[:8]}"
    triples = [Triple(iri(f"urn:x:s{i}"), iri("urn:x:p"), literal(v)) for i, v in good]
    triples.insert(len(triples) // 2, broken)
    try:
        payload = encode(Triples(metadata=Metadata(id="urn:x:batch", user="fuzzer", collection=collection),
                                 triples=triples))
    except CodecError:
        assume(False)
    count("flows: batch with one bad triple")

    async def send():
        producer = await fuzz_stack.backend.create_producer(flow_queue("triples-store", fuzz_stack.stack.flow))
        await producer.send(payload)
        await producer.close()
        await fuzz_stack.idle()

    fuzz_stack.run(send())
    assert fuzz_stack.store("triples").query("fuzzer", collection, TriplePattern(limit=100)) == []


# ------------------------------------------------------------------------------------------ the LLM's output

@fuzz(30)
@given(replies=st.lists(LLM_TEXT, min_size=2, max_size=2))
@example(replies=['{"id":"%s","reasoning":""}', ""])  # an edge selected, then an empty answer
@example(replies=['{"id":"%s","reasoning":"r"}', " \n\t" * 8])  # ... or one of only whitespace, in pieces
def test_arbitrary_llm_output_through_graph_rag(fuzz_stack, replies):
    """Edge selection and synthesis answered with anything: the query ends, the trace is valid and honest."""
    count("llm output: GraphRAG selection + synthesis")
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.schema import GraphRagQuery, TriplePattern

    fuzz_stack.llm.holder["script"] = replies_from(replies)  # edge selection, synthesis
    collection = f"llm{uuid.uuid4().hex[:8]}"
    store = fuzz_stack.store("triples")
    msgs, stored = stream_and_collect_trace(fuzz_stack, "graph-rag", GraphRagQuery(
        query="Who discovered polonium?", explain_collection=collection, streaming=True), collection)
    for t in stored:
        if t.p.value == ns.TG_EDGE:  # every recorded edge is a real edge of the knowledge graph
            e = t.o.triple
            assert store.query("trustgraph", "default", TriplePattern(s=e.s, p=e.p, o=e.o, g="")), e
    assert_answer_or_error(msgs, stored)


def stream_and_collect_trace(fuzz_stack, service: str, request, collection: str):
    """Stream one RAG request to its end and read back its stored trace; the stream ended exactly once and
    the trace is SHACL-valid.  Returns ``(messages, stored trace triples)``."""
    from trustgraph_base.provenance.walk import collect_trace
    from trustgraph_base.rdf.validation import validate_trace
    from trustgraph_cli.connection import Connection

    store = fuzz_stack.store("triples")

    async def ask():
        async with Connection.attach(fuzz_stack.stack, timeout=60) as conn:
            client = await conn.client(service)
            msgs = [m async for m in client.stream(request)]
        await fuzz_stack.idle()

        async def q(patterns):
            return [t for r in store.query_many("trustgraph", collection, patterns) for t in r]

        return msgs, await collect_trace(q, msgs[0].explain_id)

    msgs, stored = fuzz_stack.run(ask())
    assert msgs[-1].end_of_session and sum(m.end_of_session for m in msgs) == 1
    report = validate_trace(stored)
    assert report.conforms, [v.message for v in report.violations]
    return msgs, stored


def assert_answer_or_error(msgs, stored) -> None:
    """A RAG query the client saw answered has a non-blank answer and a Synthesis naming it; any other ends in an
    Error, recorded as the trace's Error stage, with no Synthesis (an empty answer is never passed as one)."""
    from trustgraph_base.provenance import namespaces as ns

    answer = "".join(m.response for m in msgs if m.message_type == "chunk")
    types = {t.o.value for t in stored if t.p.value == ns.RDF_TYPE}
    if msgs[-1].error is None:
        assert answer.strip() and any(t.p.value == ns.TG_DOCUMENT for t in stored)
    else:
        assert ns.TG_ERROR in types and ns.TG_SYNTHESIS not in types, (msgs[-1].error, types)


@fuzz(15)
@given(replies=st.lists(LLM_TEXT, min_size=1, max_size=2))
@example(replies=[""])
@example(replies=["\n \t" * 12])
def test_arbitrary_llm_output_through_document_rag(fuzz_stack, replies):
    """DocumentRAG's answer prompt answered with anything: the query ends, the trace is valid and honest."""
    count("llm output: DocumentRAG synthesis")
    from trustgraph_base.schema import DocumentRagQuery

    fuzz_stack.llm.holder["script"] = replies_from(replies)
    collection = f"dr{uuid.uuid4().hex[:8]}"
    msgs, stored = stream_and_collect_trace(fuzz_stack, "document-rag", DocumentRagQuery(
        query="Why is polonium named so?", explain_collection=collection, streaming=True), collection)
    assert_answer_or_error(msgs, stored)


AGENT_STEPS = st.sampled_from([
    "Thought: t\nAction: knowledge-query\nArgs: {\"question\": \"Who discovered polonium?\"}",
    "Thought: t\nFinal Answer: polonium", "Thought: t\nAction: rm -rf /\nArgs: {}"])


@fuzz(15)
@given(replies=st.lists(LLM_TEXT | AGENT_STEPS, min_size=1, max_size=6))
@example(replies=["Thought: done\nFinal Answer:   \n"])  # an empty final answer, again and again
def test_arbitrary_llm_output_through_the_agent(fuzz_stack, replies):
    """The ReAct prompt answered with anything: the dialog ends with an answer or an error, never loops forever."""
    count("llm output: ReAct agent")
    from trustgraph_base.schema import AgentRequest
    from trustgraph_cli.connection import Connection

    fuzz_stack.llm.holder["script"] = replies_from(replies)

    async def ask():
        async with Connection.attach(fuzz_stack.stack, timeout=60) as conn:
            client = await conn.client("agent")
            msgs = [m async for m in client.stream(AgentRequest(question="Who discovered polonium?",
                                                                session_id=str(uuid.uuid4()), max_iterations=3,
                                                                collection=f"ag{uuid.uuid4().hex[:8]}"))]
        await fuzz_stack.idle()
        return msgs

    msgs = fuzz_stack.run(ask())
    assert msgs[-1].end_of_dialog
    assert msgs[-1].error is not None or any(m.message_type == "answer" and m.content.strip() for m in msgs)
    assert not [m for m in msgs if m.message_type == "answer" and not m.end_of_dialog and not m.content.strip()]


# ------------------------------------------------------------------------------------------ session ids

SESSION_IDS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,40}", fullmatch=True)


@fuzz(15)
@given(sids=st.lists(SESSION_IDS, min_size=1, max_size=3, unique=True),
       batches=st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=4), min_size=1, max_size=3))
@example(sids=["s"], batches=[[0], [0]])        # sequential reuse
@example(sids=["s"], batches=[[0, 0, 0, 0]])    # concurrent reuse of a new session id
def test_a_session_id_names_one_agent_run(fuzz_stack, sids, batches):
    """Agent requests that use session ids again, one batch after the other, the requests of a batch at once:
    per session id exactly one request runs (one of the first batch that uses it), every other one gets an Error
    naming the id and nothing else, and each stored trace holds that one run (one question, one answer)."""
    count("sessions: reused session ids")
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.provenance.walk import collect_trace
    from trustgraph_base.rdf.validation import validate_trace
    from trustgraph_base.schema import AgentRequest
    from trustgraph_cli.connection import Connection

    fuzz_stack.llm.holder["script"] = lambda template_id, terms, messages: (
        f"Thought: easy\nFinal Answer: the answer to {terms['question']}")
    collection = f"ss{uuid.uuid4().hex[:8]}"  # session ids are claimed per collection: a fresh one per example
    store = fuzz_stack.store("triples")
    plan = [[(f"Question {b}.{k}?", sids[i % len(sids)]) for k, i in enumerate(batch)] for b, batch in
            enumerate(batches)]

    async def run():
        results = []
        async with Connection.attach(fuzz_stack.stack, timeout=60) as conn:
            client = await conn.client("agent")

            async def ask(question, sid):
                return [m async for m in client.stream(AgentRequest(question=question, session_id=sid,
                                                                    collection=collection))]

            for batch in plan:
                replies = await asyncio.gather(*(ask(q, sid) for q, sid in batch))
                results += [(q, sid, msgs) for (q, sid), msgs in zip(batch, replies, strict=True)]
        await fuzz_stack.idle()

        async def q(patterns):
            return [t for r in store.query_many("trustgraph", collection, patterns) for t in r]

        traces = {sid: await collect_trace(q, f"urn:trustgraph:agent:{sid}") for sid in {s for _, s, _ in results}}
        return results, traces

    results, traces = fuzz_stack.run(run())
    first_batch = {}
    for b, batch in enumerate(plan):
        for _, sid in batch:
            first_batch.setdefault(sid, b)
    for sid, trace in traces.items():
        root = f"urn:trustgraph:agent:{sid}"
        ran = [q for q, s, msgs in results if s == sid and msgs[-1].error is None]
        assert len(ran) == 1, (sid, [msgs[-1].error for _, s, msgs in results if s == sid])
        question = ran[0]
        assert question in [q for q, s in plan[first_batch[sid]] if s == sid]
        for q, s, msgs in results:
            if s == sid and q != question:
                assert [m.message_type for m in msgs] == ["error"], [m.message_type for m in msgs]
                err = msgs[-1].error
                assert err.type == "session-in-use" and repr(sid) in err.message and "\n" not in err.message
        assert sorted(t.o.value for t in trace if t.s.value == root and t.p.value == ns.TG_QUERY) == [question]
        assert len([t for t in trace if t.s.value == root and t.p.value == ns.PROV_STARTED_AT_TIME]) == 1
        answers = [t.o.value for t in trace if t.p.value == ns.TG_DOCUMENT and t.s.value == f"{root}/final"]
        assert answers == [f"{root}/answer"]
        answer = fuzz_stack.store("librarian").get_content("trustgraph", collection, answers[0]).decode()
        assert answer == f"the answer to {question}"
        report = validate_trace(trace)
        assert report.conforms, [v.message for v in report.violations]
    listed = [t.uri for t in store.list_traces("trustgraph", collection, "agent", 1000, "").traces]
    assert sorted(listed) == sorted(f"urn:trustgraph:agent:{sid}" for sid in traces)


# ------------------------------------------------------------------------------------------ oversized payloads

def test_oversized_payloads_are_refused_clearly(fuzz_stack):
    count("oversized payloads")
    from trustgraph_base.codec import encode
    from trustgraph_base.schema import (
        AgentRequest,
        DocumentRagQuery,
        GraphRagQuery,
        TriplePattern,
        TriplesQueryRequest,
    )
    from trustgraph_flow.common.query_session import MAX_QUERY_CHARS

    store = fuzz_stack.store("triples")
    big = "Who discovered polonium? " * (MAX_QUERY_CHARS // 20)
    for service, request in [("graph-rag", GraphRagQuery(query=big, collection="big")),
                             ("document-rag", DocumentRagQuery(query=big, collection="big")),
                             ("agent", AgentRequest(question=big, collection="big", session_id="big"))]:
        replies = fuzz_stack.run(fuzz_stack.raw(service, encode(request)))
        assert replies[-1].error is not None, replies[-1]
        assert replies[-1].error.message == (f"the query is {len(big):,} characters long; "
                                             f"at most {MAX_QUERY_CHARS:,} are accepted"), replies[-1]
    fuzz_stack.run(fuzz_stack.idle())
    assert store.list_traces("trustgraph", "big", "", 10, "").traces == []  # refused before anything was stored
    replies = fuzz_stack.run(fuzz_stack.raw("triples", encode(TriplesQueryRequest(
        patterns=[TriplePattern(limit=1)] * 20_000))))
    assert "too many patterns" in replies[-1].error.message
    replies = fuzz_stack.run(fuzz_stack.raw("triples", os.urandom(8 * 1024 * 1024)))
    assert replies[-1].error.type == "bad-request"


# ------------------------------------------------------------------------------------------ the CLI's own output

def test_cli_shows_hostile_questions_as_text_and_exports_them_exactly(tmp_path):
    """A question full of Turtle and console markup: listed and shown literally, exported as the same literal."""
    count("cli: hostile question end to end")
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.rdf.export import parse

    question = '[/] [bold red]x[/] """ . <urn:x:evil> <urn:x:p> "o" . \\u0022 @prefix e: <urn:e:> . Who?'
    env = {k: v for k, v in os.environ.items() if k not in ("PULSAR_URL", "TG_FLOW", "OPENAI_BASE_URL",
                                                             "OPENAI_API_KEY", "LLM_BACKEND")}
    env.update({"TG_HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"})
    bin_ = Path(sys.executable).parent

    def cli(*args):
        r = subprocess.run([str(bin_ / args[0]), *args[1:]], env=env, capture_output=True, text=True, timeout=180)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        return r.stdout

    asked = cli("tg-invoke-graph-rag", "-x", "-q", question)
    uri = next(line.split()[1] for line in asked.splitlines() if line.startswith("[question] "))
    assert f"Query: {question}" in asked
    assert question[:40] in cli("tg-list-explain-traces")
    shown = cli("tg-show-explain-trace", uri)
    assert f"Question: {question}" in shown
    for fmt in ("turtle", "trig"):
        triples = parse(cli("tg-show-explain-trace", uri, "--format", fmt).encode(), fmt)
        queries = [t.o.value for t in triples if t.p.value == ns.TG_QUERY]
        assert queries == [question]
        assert not [t for t in triples if "evil" in t.s.value or "evil" in t.p.value]
    listed = json.loads(cli("tg-list-explain-traces", "--format", "json"))["traces"]
    assert [(t["question"], t["status"]) for t in listed] == [(question, "complete")]


def test_services_still_answer_after_the_fuzzing(fuzz_stack):
    """The probe after the storm: every service that was fuzzed answers a plain request."""
    from trustgraph_base.codec import encode
    from trustgraph_base.schema import (
        EmbeddingsRequest,
        GraphRagQuery,
        LibrarianRequest,
        TraceListRequest,
        TriplesQueryRequest,
    )

    fuzz_stack.llm.holder["script"] = lambda t, terms, m: "From the graph: Marie Curie discovered polonium."
    for service, request in [("triples", TriplesQueryRequest(limit=1)), ("trace-list", TraceListRequest()),
                             ("embeddings", EmbeddingsRequest(texts=["polonium"])),
                             ("librarian", LibrarianRequest(operation="list-documents")),
                             ("graph-rag", GraphRagQuery(query="Who discovered polonium?", streaming=False))]:
        replies = fuzz_stack.run(fuzz_stack.raw(service, encode(request)))
        assert replies[-1].error is None, (service, replies[-1].error)

    # and every flow consumer still consumes: a new document goes through the whole pipeline
    from trustgraph_base.schema import TriplePattern
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.load import load_documents

    doc = f"https://trustgraph.ai/doc/probe{uuid.uuid4().hex[:8]}"

    async def load():
        async with Connection.attach(fuzz_stack.stack, timeout=120) as conn:
            await load_documents(conn, "trustgraph", "probe", [(doc, "Probe", "text/plain",
                                                                 b"Ada Lovelace wrote the first program.")],
                                 idle_timeout=120, show=False)
        await fuzz_stack.idle()

    fuzz_stack.run(load())
    store = fuzz_stack.store("triples")
    assert store.query("trustgraph", "probe", TriplePattern(limit=10, g=""))  # knowledge extracted and stored
