"""Retention against forged traces (:mod:`forged_traces`), on both stores, through the real trace-admin service.

Each example writes a forgery straight into the triple store (and squats its own document URIs in the
librarian), next to two genuine traces with their marked documents (a GraphRAG trace and its answer; an
agent trace of trace model v2 and its thought, observation and answer), then:

1. reads every forged trace the way ``tg-show-explain-trace`` does (walk, structure, text): no crash;
2. dry-runs a delete of every forged trace: a response or "not found", never another error;
3. prunes with no grace: no error; nothing outside ``urn:graph:retrieval`` changes (knowledge,
   extraction provenance, source documents with their pages and chunks, both vector indexes),
   no genuine document goes, the genuine traces keep every triple;
4. deletes the genuine traces: their documents go with them, and the retrieval graph and the trace
   index are exactly as before the example: every forged triple was removable.

Embedded (in-process bus, SQLite) always; on this session's own Pulsar + Cassandra with the
distributed part of the tier.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid

import pytest
from forged_traces import Forgery, Targets, forgeries
from fuzz_inputs import count
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tenants import Deployment, cli_env, distributed

pytestmark = pytest.mark.timeout(1800)

NOTE = "Otto Hahn discovered nuclear fission. Lise Meitner worked with Otto Hahn.\n"


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large])


class Retention:
    """One deployment's trace-admin (a connection kept open on a loop of its own) and its stores."""

    def __init__(self, d: Deployment, collection: str, genuine: str):
        self.d, self.user, self.collection = d, d.owner[0], collection
        self.genuine = genuine  # the Question of a query answered before the fuzzing
        self.agent = ""  # the Question of an agent run before the fuzzing
        self.session = uuid.uuid4().hex  # of the genuine trace each example builds
        self.documents: list[str] = []  # sources, pages and chunks loaded before the fuzzing
        self.triples, self.librarian = d.open_stores()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="retention-fuzz", daemon=True)
        self.thread.start()
        self._cm = d.connect()
        self.conn = self.run(self._cm.__aenter__())

    def run(self, coro, timeout: float = 600):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def admin(self, **request):
        from trustgraph_base.schema import TraceAdminRequest

        return self.run(self.conn.request("trace-admin", TraceAdminRequest(
            user=self.user, collection=self.collection, **request)))

    def close(self) -> None:
        try:
            self.run(self._cm.__aexit__(None, None, None))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.triples.close()
            self.librarian.close()


def _trace_triples(r: Retention, root: str) -> list:
    """The stored triples of the trace of Question ``root`` (sub-traces included), read from the collection's
    triple store the way tg-show-explain-trace reads them over the bus (collect_trace)."""
    from trustgraph_base.provenance.walk import collect_trace

    async def query(patterns):
        return [t for matches in r.triples.query_many(r.user, r.collection, patterns) for t in matches]

    return r.run(collect_trace(query, root))


@pytest.fixture(scope="module", params=[pytest.param("embedded", marks=pytest.mark.service),
                                        pytest.param("distributed", marks=pytest.mark.integration)])
def retention(request, tmp_path_factory):
    """A collection with one loaded document (pages, chunks, knowledge, vectors) and one answered query."""
    if request.param == "embedded":
        home = tmp_path_factory.mktemp("fuzz-retention")
        d = Deployment("embedded", ("fuzz", "fuzzret"), cli_env(home), home=home)
    else:
        d = distributed(request.getfixturevalue("fault_stack"))
        d.stack.llm.set_latency(0)
    collection = f"fuzzret{uuid.uuid4().hex[:6]}"
    note = tmp_path_factory.mktemp("fuzz-note") / "hahn.txt"
    note.write_text(NOTE)
    d.load(note, collection)
    asked = d.ok("tg-invoke-graph-rag", "-x", "-q", "Who discovered nuclear fission?", collection=collection)
    agent = d.ok("tg-invoke-agent", "-x", "-q", "Who discovered nuclear fission?", collection=collection)
    r = Retention(d, collection, asked.question_uri)
    r.agent = agent.question_uri  # its first block is the agent's Question
    try:
        _wait_until_settled(r)
        r.documents = loaded_documents(r)
        yield r
    finally:
        r.close()


def _wait_until_settled(r: Retention, timeout: float = 180) -> None:
    """Wait until both genuine traces are complete, with their answers stored, and the collection has stopped
    changing: the distributed stack writes a trace's last triples through the bus after the command has printed
    its answer, and a write landing after an example's first look at the collection would read as a change."""
    deadline = time.monotonic() + timeout
    last, unchanged = None, 0
    while True:
        now = state(r) if _complete(r, r.genuine) and _complete(r, r.agent) and _answer_of(r, r.genuine) \
            and _answer_of(r, r.agent) else None
        unchanged = unchanged + 1 if now is not None and now == last else 0
        if unchanged == 2:  # the same for two seconds
            return
        assert time.monotonic() < deadline, "the genuine traces were not stored, or the collection kept changing"
        last = now
        time.sleep(1.0)


def _complete(r: Retention, question: str) -> bool:
    """Whether the stored trace of ``question`` has reached its final stage (what tg-show-explain-trace calls
    complete)."""
    from trustgraph_cli.trace_model import TraceIndex, build_trace, trace_status, trace_type

    index = TraceIndex(_trace_triples(r, question))
    return trace_type(index, question) is not None and trace_status(build_trace(index, question)) == "complete"


def _answer_of(r: Retention, question: str) -> bool:
    from trustgraph_base.provenance.uris import answer_uri_of
    from trustgraph_base.store.errors import NotFound

    try:
        r.librarian.get_metadata(r.user, r.collection, answer_uri_of(question))
        return True
    except NotFound:
        return False


def _key(t) -> tuple:
    from trustgraph_base.rdf.terms import serialize_term

    return serialize_term(t.s), serialize_term(t.p), serialize_term(t.o), t.g or ""


def state(r: Retention) -> dict:
    """Retrieval quads, trace index, everything else (other quads, documents, vectors) of the collection."""
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.schema import TriplePattern

    quads = {_key(t) for page in r.triples.iter_query(r.user, r.collection, TriplePattern(limit=0), page_size=5000)
             for t in page}
    retrieval = {q for q in quads if q[3] == ns.GRAPH_RETRIEVAL}
    docs, todo = set(), [m for kind in ("source", "answer")
                         for m in r.librarian.list_documents(r.user, r.collection, kind, 100_000)]
    while todo:
        m = todo.pop()
        docs.add((m.document_type, m.id, m.sha256))
        todo += r.librarian.list_children(r.user, r.collection, m.id)
    index, cursor = set(), ""
    while True:
        page = r.triples.list_traces(r.user, r.collection, "", 1000, cursor)
        index |= {t.uri for t in page.traces}
        cursor = page.next_cursor
        if not cursor:
            break
    return {"retrieval": retrieval, "other": quads - retrieval, "index": index,
            "sources": {d for d in docs if d[0] != "answer"}, "answers": {d for d in docs if d[0] == "answer"},
            "vectors": _vectors(r)}


def _vectors(r: Retention) -> dict:
    from trustgraph_base.store.vectors import open_vector_index

    out = {}
    for kind in ("document", "graph"):
        if r.d.kind == "distributed":
            index = open_vector_index("cassandra", kind=kind, config=r.d.stack.cassandra_config())
        else:
            index = open_vector_index("sqlite", kind=kind, home=r.d.home)
        try:
            out[kind] = index.index_info(r.user, r.collection)
        finally:
            index.close()
    return out


def genuine_trace(r: Retention) -> tuple[list[str], list, list]:
    """Two complete traces started now, built by the real builders, with their documents marked as the librarian
    marks them: a GraphRAG trace and its answer, an agent trace and its thought, observation and answer;
    (questions, [(document metadata, content)], triples)."""
    from trustgraph_base.provenance import uris
    from trustgraph_base.provenance.agent import (
        agent_final_triples,
        agent_iteration_triples,
        agent_observation_triples,
        agent_session_triples,
        agent_thought_triples,
    )
    from trustgraph_base.provenance.answers import answer_marker
    from trustgraph_base.provenance.triples import (
        EdgeSelection,
        LlmUsage,
        exploration_triples,
        focus_triples,
        grounding_triples,
        question_triples,
        synthesis_triples,
    )
    from trustgraph_base.schema import DocumentMetadata, Triple, iri

    s = r.session  # the same every example (it is deleted at the end of each), so the strategy is the same too
    q, g, e, f, y, a = (uris.question_uri(s), uris.grounding_uri(s), uris.exploration_uri(s), uris.focus_uri(s),
                        uris.synthesis_uri(s), uris.answer_document_uri(s))
    edge = Triple(iri("http://trustgraph.ai/e/otto-hahn"), iri("http://trustgraph.ai/e/discovered"),
                  iri("http://trustgraph.ai/e/nuclear-fission"))
    usage = LlmUsage(10, 2, "m")
    triples = (question_triples(q, "Who discovered fission?") + grounding_triples(g, q, ["Otto Hahn"])
               + exploration_triples(e, q, 1, grounding_uri=g)
               + focus_triples(f, e, [EdgeSelection(edge, "says so", score=0.8, concept="Otto Hahn")], s, usage=usage)
               + synthesis_triples(y, f, a, usage=usage))
    docs = [(a, y)]
    root = uris.agent_session_uri(f"agent-{s}")
    a1, t1, o1, final, answer = (f"{root}/i1", f"{root}/i1/thought", f"{root}/i1/observation", f"{root}/final",
                                 f"{root}/answer")
    triples += (agent_session_triples(root, "Who discovered fission?")
                + agent_iteration_triples(a1, root, "knowledge-query", {"question": "fission?"}, thought_uri=t1,
                                          usage=usage)
                + agent_thought_triples(t1, a1) + agent_observation_triples(o1, a1)
                + agent_final_triples(final, o1, answer, usage=usage))
    docs += [(t1, t1), (o1, o1), (answer, final)]
    return ([q, root], [(DocumentMetadata(id=d, document_type="answer", metadata=answer_marker(d, stage)),
                         b"Otto Hahn.") for d, stage in docs], triples)


def own_documents(r: Retention, question: str) -> list[str]:
    """The librarian documents the stored trace of ``question`` names and owns (its answer, thoughts, observations)."""
    from trustgraph_base.provenance.walk import trace_answers

    return trace_answers([question], _trace_triples(r, question))


def loaded_documents(r: Retention) -> list[str]:
    """Ids of the collection's source documents, their pages and their chunks."""
    sources = r.librarian.list_documents(r.user, r.collection, "source", 1000)
    docs = [m.id for m in sources]
    for m in sources:
        pages = r.librarian.list_children(r.user, r.collection, m.id)
        docs += [p.id for p in pages] + [c.id for p in pages for c in r.librarian.list_children(r.user, r.collection,
                                                                                                p.id)]
    return sorted(docs)


def targets(r: Retention, genuine: list) -> Targets:
    from trustgraph_base.provenance.uris import answer_uri_of

    module_nodes = sorted({t.s.value for root in (r.genuine, r.agent) for t in _trace_triples(r, root)
                           if t.s.type == "i"})
    hook_nodes = sorted({t.s.value for t in genuine if t.s.type == "i"})
    return Targets(documents=r.documents, answers=[answer_uri_of(r.genuine), *own_documents(r, r.agent)],
                   genuine_nodes=module_nodes + hook_nodes, hook_nodes=hook_nodes)


def show(r: Retention, root: str) -> None:
    """What tg-show-explain-trace does with a trace's triples, short of the bus: walk, structure, text, JSON."""
    import contextlib
    import io

    from trustgraph_cli.explain import render_text
    from trustgraph_cli.trace_model import TraceIndex, build_trace, trace_type

    index = TraceIndex(_trace_triples(r, root))
    if trace_type(index, root) is None:
        return  # the command says "no trace" for it
    trace = build_trace(index, root)
    json.dumps(trace, ensure_ascii=False)
    with contextlib.redirect_stdout(io.StringIO()):
        render_text(trace, True, 2000)


def forge(r: Retention, f: Forgery) -> None:
    from trustgraph_base.store.librarian import DocumentExists

    for meta, content in f.documents:
        try:
            r.librarian.add_document(r.user, r.collection, meta, content)
        except DocumentExists:
            pass
    for i in range(0, len(f.triples), 2000):
        r.triples.insert(r.user, r.collection, f.triples[i:i + 2000])


@fuzz(60)
@given(data=st.data())
def test_forged_traces_are_removable_and_remove_nothing_else(retention, data):
    from trustgraph_base.processor import ServiceError
    from trustgraph_base.provenance.uris import answer_uri_of

    r = retention
    count(f"retention: forged traces ({r.d.kind})")
    questions, documents, genuine = genuine_trace(r)
    forgery = data.draw(forgeries(targets(r, genuine)))  # before any write: hypothesis may end an example here
    before = state(r)
    ids = {meta.id for meta, _ in documents}
    module_documents = {answer_uri_of(r.genuine), *own_documents(r, r.agent)}
    for meta, content in documents:
        r.librarian.add_document(r.user, r.collection, meta, content)
    r.triples.insert(r.user, r.collection, genuine)
    forge(r, forgery)
    forged = state(r)

    for root in forgery.roots:
        show(r, root)
        try:
            r.admin(operation="delete", uri=root, dry_run=True, grace_seconds=0)
        except ServiceError as e:
            assert e.error_type == "not-found", e
    assert state(r) == forged  # a dry run changes nothing

    pruned = r.admin(operation="prune", older_than_seconds=3600, grace_seconds=0)
    after = state(r)
    assert pruned.documents <= len(forgery.documents)
    assert after["other"] == forged["other"] and after["vectors"] == forged["vectors"]
    assert after["sources"] == forged["sources"]  # no source, page or chunk, squatters included
    genuine_answers = {a for a in forged["answers"] if a[1] in ids | module_documents}
    assert len(genuine_answers) == len(ids | module_documents) and genuine_answers <= after["answers"]
    assert {_key(t) for t in genuine} <= after["retrieval"] and before["retrieval"] <= after["retrieval"]
    assert set(questions) <= after["index"] and {r.genuine, r.agent} <= after["index"]

    done = [r.admin(operation="delete", uri=q, grace_seconds=0) for q in questions]
    final = state(r)
    assert all(d.documents >= 1 for d in done)  # (and forged sub-traces' own)
    assert not ids & {a[1] for a in final["answers"]}  # every genuine document went with its trace
    assert final["retrieval"] == before["retrieval"] and final["index"] == before["index"]
    assert final["other"] == before["other"] and final["vectors"] == before["vectors"]
    assert final["sources"] == forged["sources"] and module_documents <= {a[1] for a in final["answers"]}
