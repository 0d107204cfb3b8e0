"""QuerySession: the explain protocol GraphRAG, DocumentRAG and the agent share (docs/guarantees.md, "Traces").

Stages go to a real SQLite triple store; faults (a refused write, a write held back, a client
that cannot be sent to) are injected into the writes and sends themselves.
"""

from __future__ import annotations

import asyncio

import pytest

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance import uris
from trustgraph_base.provenance.triples import exploration_triples, question_triples
from trustgraph_base.schema import IRI, AgentResponse, Error, GraphRagResponse, Term, TriplePattern
from trustgraph_base.store.triples import open_triples_store
from trustgraph_flow.common.query_session import (
    NO_ANSWER_ERROR,
    QuerySession,
    alongside,
    cancel_with_reason,
    check_question,
)

pytestmark = pytest.mark.unit

USER, COLLECTION = "u", "c"


class SqliteExplainStore:
    """Stores stages in a SQLite triple store; ``refuse`` and ``hold`` inject faults into chosen stages' writes."""

    def __init__(self, home):
        self.store = open_triples_store("sqlite", home=home)
        self.answers: dict[str, str] = {}
        self.refuse: set[str] = set()
        self.hold: dict[str, asyncio.Event] = {}

    async def store_explain(self, user, collection, stage_uri, triples):
        if stage_uri in self.hold:
            await self.hold[stage_uri].wait()
        if stage_uri in self.refuse:
            raise ConnectionError(f"the write of {stage_uri} was refused")
        await asyncio.to_thread(self.store.insert, user, collection, triples)

    async def store_answer(self, user, collection, document_id, text, stage_uri, stage_triples):
        self.answers[document_id] = text
        await self.store_explain(user, collection, stage_uri, stage_triples)

    def stages(self) -> dict[str, set[str]]:
        """Stored node -> its types, in the retrieval graph."""
        out: dict[str, set[str]] = {}
        for t in self.store.query(USER, COLLECTION, TriplePattern(p=Term(IRI, ns.RDF_TYPE), g=ns.GRAPH_RETRIEVAL)):
            out.setdefault(t.s.value, set()).add(t.o.value)
        return out


def rag_failure(error, message, trace):
    return GraphRagResponse(error=Error("graph-rag-error", message), end_of_stream=True, end_of_session=True, **trace)


def new_session(ports, sent: list, *, streaming: bool = False, queue_events: bool = True, emit=None):
    query_id = uris.new_id()

    async def record(msg):
        sent.append(msg)

    return query_id, QuerySession(ports, emit or record, response=GraphRagResponse, user=USER, collection=COLLECTION,
                                  question_uri=uris.question_uri(query_id), explainable=True, streaming=streaming,
                                  subject="test query", failure=rag_failure, queue_events=queue_events)


def kinds(sent) -> list[str]:
    """``explain:<stage>``, ``chunk`` or ``error`` per message."""
    return [f"explain:{uris.parse_trace_uri(m.explain_id).stage}" if m.message_type == "explain"
            else "error" if m.error else m.message_type for m in sent]


async def first_two_stages(session: QuerySession, qid: str) -> tuple[str, str]:
    """Explain a GraphRAG trace's Question and Exploration (the stage reached becomes ``exploration``)."""
    q, exp = uris.question_uri(qid), uris.exploration_uri(qid)
    await session.explain(q, question_triples(q, "Who?"))
    session.stage = "exploration"
    await session.explain(exp, exploration_triples(exp, q, 0, []))
    return q, exp


def test_the_last_message_waits_until_every_stage_is_stored(tmp_path):
    ports = SqliteExplainStore(tmp_path)
    sent: list = []

    async def main():
        qid, session = new_session(ports, sent)
        hold = ports.hold[uris.exploration_uri(qid)] = asyncio.Event()
        q, exp = await first_two_stages(session, qid)
        closing = asyncio.ensure_future(session.close(GraphRagResponse(end_of_session=True)))
        await asyncio.sleep(0.05)
        assert not closing.done() and not any(m.end_of_session for m in sent)  # the Exploration is not stored yet
        hold.set()
        await closing
        return q, exp

    q, exp = asyncio.run(main())
    assert kinds(sent) == ["explain:question", "explain:exploration", "chunk"] and sent[-1].end_of_session
    assert set(ports.stages()) == {q, exp}


def test_a_failure_ends_the_trace_with_an_error_after_the_last_stored_stage(tmp_path):
    ports = SqliteExplainStore(tmp_path)
    sent: list = []

    async def main():
        qid, session = new_session(ports, sent)
        ports.refuse.add(uris.exploration_uri(qid))

        async def query():
            await first_two_stages(session, qid)
            session.stage = "synthesis"
            await session.close(GraphRagResponse(end_of_session=True))  # raises the refused write

        await session.run(query)
        return qid, uris.question_uri(qid)

    qid, q = asyncio.run(main())
    err = uris.error_uri(qid)
    stored = ports.stages()
    assert set(stored) == {q, err} and ns.TG_ERROR in stored[err]  # a prefix of the stages, then the Error
    def objects(predicate: str) -> list[str]:
        return [t.o.value for t in ports.store.query(USER, COLLECTION, TriplePattern(s=Term(IRI, err),
                                                                                     p=Term(IRI, predicate)))]

    assert objects(ns.PROV_WAS_DERIVED_FROM) == [q] and objects(ns.TG_STAGE) == ["synthesis"]
    assert kinds(sent) == ["explain:question", "explain:exploration", "explain:error", "error"]
    last = sent[-1]
    assert "refused" in last.error.message and last.end_of_session and last.explain_id == q
    assert (last.explain_collection, last.explain_graph) == (COLLECTION, ns.GRAPH_RETRIEVAL)


def test_a_query_refused_before_anything_was_stored_names_no_trace(tmp_path):
    ports = SqliteExplainStore(tmp_path)
    sent: list = []

    async def main():
        _qid, session = new_session(ports, sent)
        await session.run(lambda: asyncio.sleep(0, check_question("   ")))

    asyncio.run(main())
    assert ports.stages() == {}
    assert len(sent) == 1 and sent[0].error.message == "the query is empty" and sent[0].explain_id == ""
    assert sent[0].end_of_stream and sent[0].end_of_session


def test_a_cancelled_query_writes_no_error_and_cancels_the_request_beside_it(tmp_path):
    ports = SqliteExplainStore(tmp_path)
    sent: list = []
    beside: list[asyncio.Future] = []

    async def main():
        qid, session = new_session(ports, sent)
        q = uris.question_uri(qid)

        async def query():
            await session.explain(q, question_triples(q, "Who?"))
            async with alongside(asyncio.sleep(60)) as request:
                beside.append(request)
                await asyncio.sleep(60)

        running = asyncio.ensure_future(session.run(query))
        await asyncio.sleep(0.05)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await session.writes.wait()  # the Question's write was on its way: it is stored
        await asyncio.sleep(0)
        return q

    q = asyncio.run(main())
    assert beside[0].cancelled()
    assert set(ports.stages()) == {q}  # no Error stage: the trace stays incomplete
    assert not any(m.error for m in sent)


def test_a_query_cancelled_with_a_reason_ends_its_trace_with_an_error_saying_it(tmp_path):
    """A supervisor's sub-agent stopped by an ``agent-cancel`` notice: its trace ends failed, not incomplete."""
    ports = SqliteExplainStore(tmp_path)
    sent: list = []
    beside: list[asyncio.Future] = []

    async def main():
        qid, session = new_session(ports, sent)
        q = uris.question_uri(qid)

        async def query():
            await session.explain(q, question_triples(q, "Who?"))
            async with alongside(asyncio.sleep(60)) as request:
                beside.append(request)
                await asyncio.sleep(60)

        running = asyncio.ensure_future(session.run(query))
        await asyncio.sleep(0.05)
        cancel_with_reason(running, "cancelled by its supervisor")
        await running  # ends normally: the cancellation became the session's error
        return qid, q

    qid, q = asyncio.run(main())
    err = uris.error_uri(qid)
    assert beside[0].cancelled()
    stored = ports.stages()
    assert set(stored) == {q, err} and ns.TG_ERROR in stored[err]
    assert [t.o.value for t in ports.store.query(USER, COLLECTION, TriplePattern(
        s=Term(IRI, err), p=Term(IRI, ns.TG_ERROR_MESSAGE)))] == ["cancelled by its supervisor"]
    assert sent[-1].error.message == "cancelled by its supervisor" and sent[-1].end_of_session


def test_whitespace_before_the_answer_goes_with_its_first_text_and_an_empty_answer_is_no_answer(tmp_path):
    ports = SqliteExplainStore(tmp_path)
    sent: list = []

    async def main():
        _qid, session = new_session(ports, sent, streaming=True)
        for piece in ("  ", "\n", "Curie", " discovered it."):
            await session.add_answer(piece)
        text = session.answer()
        await session.end_answer(text)
        _qid, empty = new_session(ports, [], streaming=True)
        await empty.add_answer(" \n")
        with pytest.raises(ValueError, match=NO_ANSWER_ERROR):
            empty.answer()
        return text

    assert asyncio.run(main()) == "  \nCurie discovered it."
    assert [m.response for m in sent] == ["  \nCurie", " discovered it.", ""] and sent[-1].end_of_stream


def test_a_refused_claim_stores_and_shows_nothing(tmp_path):
    ports = SqliteExplainStore(tmp_path)
    sent: list = []

    class Taken(ValueError):
        error_type = "session-in-use"

    async def record(msg):
        sent.append(msg)

    def failed(error, message, trace):
        return AgentResponse(message_type="error", content=message, error=Error(error.error_type, message),
                             end_of_dialog=True)

    async def main():
        uri = uris.agent_session_uri("run-1")
        session = QuerySession(ports, record, response=AgentResponse, user=USER, collection=COLLECTION,
                               question_uri=uri, explainable=True, subject="agent session run-1", failure=failed,
                               queue_events=False)

        async def claim():
            raise Taken("session id 'run-1' already names another run")

        await session.run(lambda: session.claim(uri, question_triples(uri, "Who?"), claim))

    asyncio.run(main())
    assert ports.stages() == {}
    assert [(m.message_type, m.error.type) for m in sent] == [("error", "session-in-use")]


@pytest.mark.parametrize("queue_events", [True, False])
def test_a_failed_event_send_fails_the_query_now_or_at_its_next_message(tmp_path, queue_events):
    """Queued events (the RAG services) fail the query at its next awaited message; the agent's are awaited."""
    ports = SqliteExplainStore(tmp_path)
    sent: list = []
    reached: list[str] = []

    async def emit(msg):
        if msg.message_type == "explain":
            raise ConnectionError("the client is gone")
        sent.append(msg)

    async def main():
        qid, session = new_session(ports, sent, queue_events=queue_events, emit=emit)
        q = uris.question_uri(qid)

        async def query():
            await session.explain(q, question_triples(q, "Who?"))
            reached.append("after the event")
            await session.send(GraphRagResponse(response="text"))
            reached.append("after the next message")

        await session.run(query)

    asyncio.run(main())
    assert reached == (["after the event"] if queue_events else [])
    assert [m.error.message for m in sent] == ["the client is gone"]
