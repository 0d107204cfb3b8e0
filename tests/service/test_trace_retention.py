"""Trace retention against forged and half-written traces, through the real trace-admin service.

Anyone who can write to the bus can write triples into ``urn:graph:retrieval``, so these tests
forge traces straight into the triple store and check what retention promises
(docs/guarantees.md, *Retention*):

* it removes a librarian document only when it is the trace's own (its answer, or an agent's
  thought or observation, by the URI scheme of one of its Questions; held as an answer; marked with
  one of its nodes or stored before the marker); a source document, its pages, chunks, knowledge
  and vectors are never touched;
* it never enters another trace's nodes, however a forged trace links to them;
* a trace still being written (no final stage reached yet, younger than the grace period) is
  skipped by prune and refused by delete, so a prune racing a query leaves every triple of it
  reachable; "finished" is decided by reachability, so stages stored out of order do not fool it;
* malformed traces (cycles, non-literal values, bad times, huge fan-out, deep chains, orphaned
  and cyclic sub-traces) are deleted whole, without an error.

Runs on the in-process bus with SQLite and (integration tier) on real Pulsar with Cassandra.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from test_answer_store import stores, until
from test_document_rag_and_agent import agent_script
from test_graph_rag_service import polonium_script

from trustgraph_base.processor import ServiceError
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance import uris
from trustgraph_base.provenance.answers import marked_stages
from trustgraph_base.provenance.triples import (
    EdgeSelection,
    exploration_triples,
    focus_triples,
    question_triples,
    synthesis_triples,
)
from trustgraph_base.provenance.walk import PATTERN_LIMIT, collect_trace
from trustgraph_base.rdf.terms import serialize_term
from trustgraph_base.schema import (
    AgentRequest,
    DocumentMetadata,
    GraphRagQuery,
    TraceAdminRequest,
    Triple,
    TriplePattern,
    iri,
    literal,
)
from trustgraph_base.schema.library import ANSWER, SOURCE
from trustgraph_base.store.errors import NotFound
from trustgraph_flow.embedded import INGEST, QUERY_STACK

pytestmark = pytest.mark.timeout(900)

R = ns.GRAPH_RETRIEVAL
OLD = "2000-01-01T00:00:00Z"
HAHN = b"Otto Hahn discovered nuclear fission in 1938. Lise Meitner explained nuclear fission.\n"


def t(s: str, p: str, o) -> Triple:
    return Triple(iri(s), iri(p), o if not isinstance(o, str) else iri(o), R)


def old_time():
    return literal(OLD, ns.XSD_DATETIME)


def key(x: Triple) -> tuple:
    return serialize_term(x.s), serialize_term(x.p), serialize_term(x.o), x.g or ""


async def ingest(deployment, collection: str, docs: list[tuple[str, str, str, bytes]]) -> None:
    """Load source documents into ``collection`` through the real ingestion pipeline."""
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.load import load_documents

    stack = await deployment.start(tuple(dict.fromkeys(INGEST)), llm="extractive")
    try:
        async with Connection.attach(stack, timeout=180) as conn:
            await load_documents(conn, deployment.user, collection, docs, idle_timeout=180, show=False)
        await stack.wait_idle()
    finally:
        await stack.stop()


def vector_stores(stack):
    return {s.kind: s for s in stack.stores if getattr(s, "kind", None) in ("document", "graph")}


def outside_traces(stack, deployment, collection: str) -> dict:
    """Everything retention must never touch: quads outside urn:graph:retrieval, source documents with
    their pages and chunks (ids and sha256), and the vector counts of both indexes."""
    triples, librarian = stores(stack)
    user = deployment.user
    quads = {key(x) for page in triples.iter_query(user, collection, TriplePattern(limit=0), page_size=5000)
             for x in page if x.g != R}
    docs, todo = set(), list(librarian.list_documents(user, collection, SOURCE, 100_000))
    while todo:
        m = todo.pop()
        docs.add((m.document_type, m.id, m.sha256))
        todo += librarian.list_children(user, collection, m.id)
    vectors = {kind: (s.index_info(user, collection) or None) for kind, s in vector_stores(stack).items()}
    return {"quads": quads, "documents": docs, "vectors": vectors}


def retrieval_quads(stack, deployment, collection: str) -> set:
    triples, _ = stores(stack)
    return {key(x) for page in triples.iter_query(deployment.user, collection, TriplePattern(g=R, limit=0),
                                                  page_size=5000) for x in page}


async def stored(stack, deployment, collection: str, uri: str) -> list[Triple]:
    triples, _ = stores(stack)

    async def q(patterns):
        return [x for r in triples.query_many(deployment.user, collection, patterns) for x in r]

    return await collect_trace(q, uri)


async def admin(stack, **request):
    from trustgraph_cli.connection import Connection

    async with Connection.attach(stack, timeout=120) as conn:
        return await conn.request("trace-admin", TraceAdminRequest(**request))


async def ask(stack, deployment, collection: str, query: str):
    from trustgraph_cli.connection import Connection

    async with Connection.attach(stack, timeout=120) as conn:
        client = await conn.client("graph-rag")
        return [m async for m in client.stream(GraphRagQuery(query=query, user=deployment.user, collection=collection))]


async def wait_finished(stack, deployment, collection: str, question: str) -> list[Triple]:
    async def synthesis_stored():
        trace = await stored(stack, deployment, collection, question)
        return trace if any(x.p.value == ns.RDF_TYPE and x.o.value == ns.TG_SYNTHESIS for x in trace) else None

    return await until(synthesis_stored, 120, "the Synthesis to be stored")


def complete_trace(session: str, answer: str = "", when: str = OLD) -> list[Triple]:
    """A whole GraphRAG trace built by the real builders (started ``when``), its Synthesis naming ``answer``."""
    q, e, f, s = (uris.question_uri(session), uris.exploration_uri(session), uris.focus_uri(session),
                  uris.synthesis_uri(session))
    edge = Triple(iri("http://trustgraph.ai/e/otto-hahn"), iri("http://trustgraph.ai/e/discovered"),
                  iri("http://trustgraph.ai/e/nuclear-fission"))
    return (question_triples(q, "Who discovered fission?", when) + exploration_triples(e, q, 3)
            + focus_triples(f, e, [EdgeSelection(edge, "it says so")], session)
            + synthesis_triples(s, f, answer))


# --------------------------------------------------------------------------- forged traces and documents

async def test_a_forged_trace_never_removes_a_source_document(deployment):
    """The issue's reproduction: a forged trace pointing tg:document at a source document (and its page, its
    chunk, another trace's answer, and a source stored under the trace's own answer URI) removes none of them."""
    coll = f"forge{uuid.uuid4().hex[:6]}"
    u_forged, u_squat = uris.new_id(), uris.new_id()
    squatted = uris.answer_document_uri(u_squat)  # a source document under the answer URI of a forged trace
    await ingest(deployment, coll, [("urn:test:hahn", "Hahn", "text/plain", HAHN),
                                    (squatted, "Squatter", "text/plain", b"Marie Curie discovered polonium.\n")])
    stack = await deployment.start(QUERY_STACK, llm="extractive")
    try:
        real_msgs = await ask(stack, deployment, coll, "Who discovered nuclear fission?")
        real = real_msgs[0].explain_id
        await wait_finished(stack, deployment, coll, real)
        real_session = real.rsplit(":", 1)[-1]
        real_answer = uris.answer_document_uri(real_session)
        triples, librarian = stores(stack)
        page = librarian.list_children(deployment.user, coll, "urn:test:hahn")[0].id
        chunk = librarian.list_children(deployment.user, coll, page)[0].id

        q = uris.question_uri(u_forged)
        node = f"urn:x:forged:{u_forged}"
        forged = [t(q, ns.RDF_TYPE, ns.TG_GRAPH_RAG_QUESTION), t(q, ns.TG_QUERY, literal("x")),
                  t(q, ns.PROV_STARTED_AT_TIME, old_time()), t(node, ns.PROV_WAS_DERIVED_FROM, q),
                  *[t(node, ns.TG_DOCUMENT, d) for d in ("urn:test:hahn", page, chunk, real_answer)],
                  # links into the real trace: none of its nodes becomes part of the forged one
                  t(uris.exploration_uri(real_session), ns.PROV_WAS_GENERATED_BY, q),
                  t(real, ns.PROV_WAS_DERIVED_FROM, node)]
        squat = complete_trace(u_squat, squatted)
        triples.insert(deployment.user, coll, forged + squat)
        before = outside_traces(stack, deployment, coll)
        real_before = {key(x) for x in await stored(stack, deployment, coll, real)}
        assert before["documents"] and before["vectors"]["document"] and before["vectors"]["graph"]

        dry = await admin(stack, operation="prune", user=deployment.user, collection=coll, older_than_seconds=86400,
                          dry_run=True)
        r = await admin(stack, operation="prune", user=deployment.user, collection=coll, older_than_seconds=86400)
        after = outside_traces(stack, deployment, coll)
        assert after == before  # no source, page, chunk, knowledge, provenance or vector removed
        assert librarian.get_metadata(deployment.user, coll, squatted).document_type == SOURCE
        assert librarian.get_content(deployment.user, coll, real_answer)
        assert sorted(r.traces) == sorted([q, uris.question_uri(u_squat)]) and r.documents == 0
        assert r.skipped_documents == 5  # source, page, chunk, the real trace's answer, the squatted source
        assert r.triples == len(forged) - 2 + len(squat)  # the two links live on the real trace's nodes
        assert (dry.documents, dry.skipped_documents, dry.triples) == (r.documents, r.skipped_documents, r.triples)
        # the real trace is untouched, the two forged links on its nodes included
        assert {key(forged[-1]), key(forged[-2])} <= real_before
        assert {key(x) for x in await stored(stack, deployment, coll, real)} == real_before
        assert [x.uri for x in triples.list_traces(deployment.user, coll).traces] == [real]

        # the real trace goes whole, with its answer and the two forged links on its nodes
        done = await admin(stack, operation="delete", user=deployment.user, collection=coll, uri=real)
        assert done.documents == 1 and done.skipped_documents == 0
        assert retrieval_quads(stack, deployment, coll) == set()
        with pytest.raises(NotFound):
            librarian.get_metadata(deployment.user, coll, real_answer)
        assert outside_traces(stack, deployment, coll) == before
        await stack.wait_idle()
    finally:
        await stack.stop()


async def test_answers_are_removed_only_through_their_own_trace(deployment):
    """An answer goes with the trace that stored it (marked), or, stored before the marker existed, with the
    trace whose answer URI it is; never through a trace its marker does not name."""
    coll = f"answers{uuid.uuid4().hex[:6]}"
    stack = await deployment.start(QUERY_STACK, llm="extractive")
    try:
        triples, librarian = stores(stack)
        user = deployment.user
        real = (await ask(stack, deployment, coll, "Who discovered polonium?"))[0].explain_id
        await wait_finished(stack, deployment, coll, real)
        real_answer = uris.answer_document_uri(real.rsplit(":", 1)[-1])
        meta = librarian.get_metadata(user, coll, real_answer)
        assert meta.document_type == ANSWER
        assert marked_stages(meta) == [uris.synthesis_uri(real.rsplit(":", 1)[-1])]  # the librarian's marker

        u_old, u_foreign, u_other = uris.new_id(), uris.new_id(), uris.new_id()
        old_answer, foreign_answer = uris.answer_document_uri(u_old), uris.answer_document_uri(u_foreign)
        librarian.add_document(user, coll, DocumentMetadata(id=old_answer, document_type=ANSWER), b"old answer")
        librarian.add_document(user, coll, DocumentMetadata(
            id=foreign_answer, document_type=ANSWER,
            metadata=[Triple(iri(uris.synthesis_uri(u_other)), iri(ns.TG_DOCUMENT), iri(foreign_answer))]),
            b"an answer another stage stored")
        triples.insert(user, coll, complete_trace(u_old, old_answer) + complete_trace(u_foreign, foreign_answer))

        old = await admin(stack, operation="delete", user=user, collection=coll, uri=uris.question_uri(u_old))
        assert (old.documents, old.skipped_documents) == (1, 0)  # no marker: removed by its answer URI and type
        with pytest.raises(NotFound):
            librarian.get_metadata(user, coll, old_answer)
        foreign = await admin(stack, operation="delete", user=user, collection=coll,
                              uri=uris.question_uri(u_foreign))
        assert (foreign.documents, foreign.skipped_documents) == (0, 1)  # marked by another trace's stage
        assert librarian.get_content(user, coll, foreign_answer) == b"an answer another stage stored"
        mine = await admin(stack, operation="delete", user=user, collection=coll, uri=real)
        assert (mine.documents, mine.skipped_documents) == (1, 0)
        with pytest.raises(NotFound):
            librarian.get_metadata(user, coll, real_answer)
        assert retrieval_quads(stack, deployment, coll) == set()
        await stack.wait_idle()
    finally:
        await stack.stop()


async def test_an_agent_trace_goes_with_its_thoughts_observations_and_answer_and_nothing_else(
        deployment, llm_server, llm_settings):
    """Trace model v2 stores an agent's thoughts, observations and answer in the librarian: deleting the trace
    removes exactly those (and its sub-trace's answer); a forged trace pointing at them, or owning by its URIs a
    source document stored under one of its thought ids, removes none of them."""
    from trustgraph_cli.connection import Connection

    coll = f"agentdocs{uuid.uuid4().hex[:6]}"
    sid, forged_sid = f"ret-{uuid.uuid4().hex[:8]}", f"forged-{uuid.uuid4().hex[:8]}"
    root, forged_root = uris.agent_session_uri(sid), uris.agent_session_uri(forged_sid)
    squatted = uris.agent_thought_uri(forged_sid, 1)  # a source document under a thought id of the forged trace
    await ingest(deployment, coll, [("urn:test:hahn", "Hahn", "text/plain", HAHN),
                                    (squatted, "Squatter", "text/plain", b"Marie Curie discovered polonium.\n")])
    llm_server.set_script(agent_script([
        'Thought: ask the graph\nAction: knowledge-query\nArgs: {"question": "Who discovered nuclear fission?"}',
        "Thought: I know it now\nFinal Answer: Otto Hahn discovered nuclear fission."]))
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        triples, librarian = stores(stack)
        user = deployment.user
        async with Connection.attach(stack, timeout=120) as conn:
            msgs = [m async for m in (await conn.client("agent")).stream(AgentRequest(
                question="Who discovered nuclear fission?", user=user, collection=coll, session_id=sid))]
        assert msgs[-1].end_of_dialog and msgs[-1].error is None
        own = [uris.agent_answer_uri(sid), uris.agent_thought_uri(sid, 1), uris.agent_observation_uri(sid, 1)]
        async def concluded():
            trace = await stored(stack, deployment, coll, root)
            return trace if any(x.p.value == ns.RDF_TYPE and x.o.value == ns.TG_CONCLUSION for x in trace) else None

        trace = await until(concluded, 60, "the agent's Conclusion to be stored")
        sub_answers = [x.o.value for x in trace if x.p.value == ns.TG_DOCUMENT
                       and x.o.value.startswith("urn:trustgraph:answer:")]
        await until(lambda: all(_has(librarian, user, coll, d) for d in own + sub_answers), 60, "the documents")
        for doc in own:
            meta = librarian.get_metadata(user, coll, doc)
            assert meta.document_type == ANSWER
            assert marked_stages(meta) == [doc if "/i" in doc else uris.agent_final_uri(sid)]

        node = f"{forged_root}/i1"
        forged = [t(forged_root, ns.RDF_TYPE, ns.TG_AGENT_QUESTION), t(forged_root, ns.TG_QUERY, literal("x")),
                  t(forged_root, ns.PROV_STARTED_AT_TIME, old_time()), t(node, ns.PROV_WAS_DERIVED_FROM, forged_root),
                  *[t(node, ns.TG_DOCUMENT, d) for d in (*own, squatted)]]
        triples.insert(user, coll, forged)
        before = outside_traces(stack, deployment, coll)
        r = await admin(stack, operation="delete", user=user, collection=coll, uri=forged_root)
        assert (r.documents, r.skipped_documents) == (0, len(own) + 1)
        assert all(_has(librarian, user, coll, d) for d in own)
        assert librarian.get_metadata(user, coll, squatted).document_type == SOURCE
        assert outside_traces(stack, deployment, coll) == before

        r = await admin(stack, operation="delete", user=user, collection=coll, uri=root)
        assert r.documents == len(own) + len(sub_answers) and r.skipped_documents == 0
        assert not [d for d in own + sub_answers if _has(librarian, user, coll, d)]
        assert retrieval_quads(stack, deployment, coll) == set()
        assert outside_traces(stack, deployment, coll) == before
        await stack.wait_idle()
    finally:
        await stack.stop()


def _has(librarian, user: str, collection: str, doc: str) -> bool:
    try:
        librarian.get_metadata(user, collection, doc)
    except NotFound:
        return False
    return True


async def test_the_librarian_removes_a_document_only_of_the_type_a_removal_names(deployment):
    from trustgraph_base.schema import LibrarianRequest

    coll = f"typed{uuid.uuid4().hex[:6]}"
    await ingest(deployment, coll, [("urn:test:hahn", "Hahn", "text/plain", HAHN)])
    stack = await deployment.start(("librarian", "triples-write", "triples-query"))
    try:
        from trustgraph_cli.connection import Connection

        before = outside_traces(stack, deployment, coll)
        async with Connection.attach(stack, timeout=60) as conn:
            with pytest.raises(ServiceError, match="is a source document, not 'answer': not removed"):
                await conn.request("librarian", LibrarianRequest(
                    operation="remove-document", user=deployment.user, collection=coll, document_id="urn:test:hahn",
                    document_type=ANSWER))
        assert outside_traces(stack, deployment, coll) == before
    finally:
        await stack.stop()


# --------------------------------------------------------------------------- traces still being written

async def test_prune_racing_a_running_query_leaves_the_whole_trace_reachable(deployment, llm_server, llm_settings):
    """The issue's race: a prune while a slow query runs skips its trace (delete refuses it); afterwards every
    stored triple of it and its answer are reachable, and the next prune removes all of them."""
    coll = f"race{uuid.uuid4().hex[:6]}"
    await ingest(deployment, coll, [("urn:test:curie", "Curie", "text/plain",
                                     b"Marie Curie discovered polonium. Pierre Curie discovered polonium.\n")])
    llm_server.set_script(polonium_script({}, malformed_extra=False))
    llm_server.set_latency(2500)  # each of the two LLM calls: the trace takes seconds to be written
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    user = deployment.user
    try:
        triples, librarian = stores(stack)
        msgs: list = []

        async def run_query():
            from trustgraph_cli.connection import Connection

            async with Connection.attach(stack, timeout=120) as conn:
                client = await conn.client("graph-rag")
                async for m in client.stream(GraphRagQuery(query="Who discovered polonium?", user=user,
                                                           collection=coll)):
                    msgs.append(m)

        query = asyncio.create_task(run_query())
        await until(lambda: msgs, 60, "the Question event")
        question = msgs[0].explain_id
        await until(lambda: triples.get_trace(user, coll, question), 60, "the Question to be indexed")

        r = await admin(stack, operation="prune", user=user, collection=coll, older_than_seconds=1e-6)
        assert (r.traces, r.triples, r.documents) == ([], 0, 0)
        assert r.skipped == 1
        with pytest.raises(ServiceError, match=f"trace {question} is still being written.*--grace") as refused:
            await admin(stack, operation="delete", user=user, collection=coll, uri=question)
        assert refused.value.error_type == "trace-being-written"
        assert not query.done()

        await query
        assert msgs[-1].end_of_session and msgs[-1].error is None
        trace = await wait_finished(stack, deployment, coll, question)
        await stack.wait_idle()
        answer = uris.answer_document_uri(question.rsplit(":", 1)[-1])
        # every stored trace triple is reachable from the Question, and is what the client was sent
        everything = retrieval_quads(stack, deployment, coll)
        assert {key(x) for x in trace} == everything
        streamed = {key(Triple(x.s, x.p, x.o, R)) for m in msgs if m.message_type == "explain"
                    for x in m.explain_triples}
        assert everything == streamed
        assert librarian.get_content(user, coll, answer)

        done = await admin(stack, operation="prune", user=user, collection=coll, older_than_seconds=1e-6)
        assert (done.traces, done.triples, done.documents, done.skipped) == ([question], len(everything), 1, 0)
        assert retrieval_quads(stack, deployment, coll) == set()
        assert triples.list_traces(user, coll).traces == []
        with pytest.raises(NotFound):
            librarian.get_metadata(user, coll, answer)
    finally:
        llm_server.set_latency(0)
        await stack.stop()


async def test_finished_means_the_final_stage_is_reached_not_merely_stored(deployment):
    """Stages stored out of order (replicas of triples-write): a Synthesis stored before its Focus does not
    make the trace finished; once the Focus arrives, prune removes the trace whole."""
    coll = f"order{uuid.uuid4().hex[:6]}"
    stack = await deployment.start(("trace-admin", "librarian", "triples-write", "triples-query"))
    user = deployment.user
    try:
        triples, _ = stores(stack)
        session = uris.new_id()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        whole = complete_trace(session, when=now)
        focus = [x for x in whole if x.s.value.startswith((uris.focus_uri(session), "urn:trustgraph:prov:edge:"))]
        triples.insert(user, coll, [x for x in whole if x not in focus])
        r = await admin(stack, operation="prune", user=user, collection=coll, older_than_seconds=1e-6)
        assert (r.traces, r.triples) == ([], 0) and r.skipped == 1
        assert len(retrieval_quads(stack, deployment, coll)) == len(whole) - len(focus)
        # no grace: an unfinished trace is deleted, and says how much
        dry = await admin(stack, operation="prune", user=user, collection=coll, older_than_seconds=1e-6,
                          grace_seconds=0, dry_run=True)
        assert dry.traces == [uris.question_uri(session)] and dry.skipped == 0
        triples.insert(user, coll, focus)
        done = await admin(stack, operation="prune", user=user, collection=coll, older_than_seconds=1e-6)
        assert (done.traces, done.triples, done.skipped) == ([uris.question_uri(session)], len(whole), 0)
        assert retrieval_quads(stack, deployment, coll) == set()
    finally:
        await stack.stop()


# --------------------------------------------------------------------------- malformed traces

def malformed_traces() -> tuple[list[Triple], int]:
    """Forged traces of every awkward shape (all started long ago or at no readable time); how many Questions."""
    def q(uri: str, kind: str = ns.TG_GRAPH_RAG_QUESTION, time_term=None, parent: str = "") -> list[Triple]:
        out = [t(uri, ns.RDF_TYPE, kind), t(uri, ns.PROV_STARTED_AT_TIME, time_term or old_time())]
        return out + ([t(uri, ns.PROV_WAS_DERIVED_FROM, parent)] if parent else [])

    out: list[Triple] = []
    a = "urn:trustgraph:agent:cycle"              # an agent derived from its own analysis
    out += q(a, ns.TG_AGENT_QUESTION, parent=f"{a}/i1") + [t(f"{a}/i1", ns.RDF_TYPE, ns.TG_ANALYSIS),
                                                          t(f"{a}/i1", ns.PROV_WAS_DERIVED_FROM, a)]
    b, d = "urn:trustgraph:agent:mutual", "urn:trustgraph:docrag:mutual"   # two sub-traces of each other
    out += q(b, ns.TG_AGENT_QUESTION, parent=f"{d}/i1") + q(d, ns.TG_AGENT_QUESTION, parent=f"{b}/i1")
    out += [t(f"{b}/i1", ns.PROV_WAS_DERIVED_FROM, b), t(f"{d}/i1", ns.PROV_WAS_DERIVED_FROM, d)]
    session = uris.new_id()                       # IRIs where literals belong
    c, e = uris.question_uri(session), uris.exploration_uri(session)
    out += q(c, time_term=iri("urn:x:time")) + [t(c, ns.TG_QUERY, "urn:x:q"), t(e, ns.PROV_WAS_GENERATED_BY, c),
                                                 t(e, ns.TG_EDGE_COUNT, "urn:x:n")]
    for text in ("99999-99-99", "9999-01-01T00:00:00Z", "-1", "9" * 5000):  # bad and far-future times
        out += q(uris.question_uri(uris.new_id()), time_term=literal(text, ns.XSD_DATETIME))
    fan = uris.question_uri(uris.new_id())        # more children than one pattern returns (three passes)
    out += q(fan) + [t(f"urn:x:fan:{i}", ns.PROV_WAS_DERIVED_FROM, fan) for i in range(2 * PATTERN_LIMIT + 100)]
    deep = uris.question_uri(uris.new_id())       # a chain longer than the rounds of one pass
    out += q(deep) + [t(f"urn:x:deep:{i}", ns.PROV_WAS_DERIVED_FROM, f"urn:x:deep:{i - 1}" if i else deep)
                      for i in range(100)]
    orphan = uris.question_uri(uris.new_id())     # a sub-trace of an agent that was never stored
    out += q(orphan, parent="urn:trustgraph:agent:nobody/i1")
    self_parent = uris.docrag_question_uri(uris.new_id())
    out += q(self_parent, ns.TG_DOC_RAG_QUESTION, parent=f"{self_parent}/i1")
    return out, 12


async def test_malformed_traces_are_deleted_whole_and_nothing_else(deployment):
    coll = f"malformed{uuid.uuid4().hex[:6]}"
    stack = await deployment.start(("trace-admin", "librarian", "triples-write", "triples-query"))
    user = deployment.user
    try:
        triples, _ = stores(stack)
        kept = complete_trace(uris.new_id(), when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        forged, questions = malformed_traces()
        triples.insert(user, coll, kept)
        for i in range(0, len(forged), 5000):
            triples.insert(user, coll, forged[i:i + 5000])
        assert len(triples.list_traces(user, coll, limit=1000).traces) == questions + 1
        dry = await admin(stack, operation="prune", user=user, collection=coll, older_than_seconds=3600,
                          dry_run=True)
        assert len(retrieval_quads(stack, deployment, coll)) == len(kept) + len(forged)
        assert len(dry.traces) == questions and len(set(dry.traces)) == questions
        r = await admin(stack, operation="prune", user=user, collection=coll, older_than_seconds=3600)
        assert retrieval_quads(stack, deployment, coll) == {key(x) for x in kept}
        assert r.triples == len(forged) and r.skipped == 0 and sorted(r.traces) == sorted(dry.traces)
        assert [x.uri for x in triples.list_traces(user, coll).traces] == [kept[0].s.value]
    finally:
        await stack.stop()
