"""Retention on both stores: tg-delete-explain-trace and tg-prune-explain-traces delete whole traces - every stage,
edge selection, sub-trace and stored answer - and nothing else.

"Nothing else" is checked on the database itself: every quad of the collection (knowledge,
extraction provenance, other traces), every librarian document (sources, pages, chunks, other
answers) and the trace index are read before and after, and the difference must be exactly the
deleted traces.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from tenants import BIN, Deployment, distributed, embedded

pytestmark = pytest.mark.timeout(900)

QUESTION = "Who discovered polonium?"


@pytest.fixture(scope="module", params=[pytest.param("embedded", marks=pytest.mark.service),
                                        pytest.param("distributed", marks=pytest.mark.integration)])
def deployment(request, tmp_path_factory) -> Deployment:
    if request.param == "embedded":
        return embedded(tmp_path_factory.mktemp("retention-home"), "ret", "kept")
    d = distributed(request.getfixturevalue("fault_stack"))
    d.stack.llm.set_latency(0)
    return d


@dataclass
class Snapshot:
    quads: set
    documents: set
    traces: set


def snapshot(d: Deployment, collection: str) -> Snapshot:
    """Every quad, librarian document and listed trace of the owner's user in ``collection``."""
    from trustgraph_base.rdf.terms import serialize_term
    from trustgraph_base.schema import TriplePattern

    triples, librarian = d.open_stores()
    user = d.owner[0]
    try:
        quads = {(serialize_term(t.s), serialize_term(t.p), serialize_term(t.o), t.g or "")
                 for page in triples.iter_query(user, collection, TriplePattern(limit=0), page_size=5000)
                 for t in page}
        documents, todo = set(), []
        for kind in ("source", "answer"):
            todo += librarian.list_documents(user, collection, kind, 100_000)
        while todo:
            m = todo.pop()
            documents.add((m.document_type, m.id))
            todo += librarian.list_children(user, collection, m.id)
        traces, cursor = set(), ""
        while True:
            page = triples.list_traces(user, collection, "", 1000, cursor)
            traces |= {t.uri for t in page.traces}
            cursor = page.next_cursor
            if not cursor:
                break
    finally:
        triples.close()
        librarian.close()
    return Snapshot(quads, documents, traces)


def trace_quads(d: Deployment, collection: str, uri: str) -> tuple[set, set]:
    """(quads, answer document ids) of one stored trace, sub-traces included."""
    import asyncio

    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.provenance.walk import collect_trace, trace_documents
    from trustgraph_base.rdf.terms import serialize_term

    triples, librarian = d.open_stores()
    user = d.owner[0]
    try:
        async def q(patterns):
            return [t for r in triples.query_many(user, collection, patterns) for t in r]

        found = asyncio.run(collect_trace(q, uri))
    finally:
        triples.close()
        librarian.close()
    return ({(serialize_term(t.s), serialize_term(t.p), serialize_term(t.o), ns.GRAPH_RETRIEVAL) for t in found},
            {("answer", doc) for doc in trace_documents(found)})


def wait_complete(d: Deployment, collection: str, uris: list[str], seconds: float = 60) -> None:
    """Distributed stores are written asynchronously: wait until the traces are listed as complete."""
    deadline = time.monotonic() + seconds
    while True:
        listed = json.loads(d.ok("tg-list-explain-traces", "--limit", "1000", "--format", "json",
                                 collection=collection).stdout)["traces"]
        status = {t["id"]: t["status"] for t in listed}
        if all(status.get(u) == "complete" for u in uris) or time.monotonic() > deadline:
            assert all(status.get(u) == "complete" for u in uris), status
            return
        time.sleep(1)


def counts(stdout: str) -> tuple[int, int, int]:
    m = re.search(r"(\d+) trace\(s\), (\d+) triple\(s\), (\d+) answer document\(s\)", stdout)
    assert m, stdout
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def test_delete_removes_the_whole_trace_and_nothing_else(deployment):
    d = deployment
    coll = d.owner[1]
    graph = d.ok("tg-invoke-graph-rag", "-x", "-q", QUESTION).question_uri
    other = d.ok("tg-invoke-graph-rag", "-x", "-q", "Who discovered radium?").question_uri
    docrag = d.ok("tg-invoke-document-rag", "-x", "-q", "What is the unit of radioactivity?").question_uri
    agent = d.ok("tg-invoke-agent", "-x", "-q", QUESTION).question_uri
    wait_complete(d, coll, [graph, other, docrag, agent])

    for uri, traces in [(graph, 1), (docrag, 1), (agent, 2)]:  # the agent's GraphRAG sub-trace goes with it
        before = snapshot(d, coll)
        quads, answers = trace_quads(d, coll, uri)
        assert quads and answers and quads <= before.quads and answers <= before.documents
        dry = d.ok("tg-delete-explain-trace", uri, "--dry-run")
        assert dry.stdout.startswith("Would delete") and snapshot(d, coll) == before
        done = d.ok("tg-delete-explain-trace", uri)
        assert counts(done.stdout) == (traces, len(quads), len(answers)) == counts(dry.stdout), done.stdout
        after = snapshot(d, coll)
        assert before.quads - after.quads == quads and after.quads <= before.quads
        assert before.documents - after.documents == answers and after.documents <= before.documents
        assert uri in before.traces and uri not in after.traces and len(before.traces - after.traces) == traces
        gone = d.cli("tg-show-explain-trace", uri)
        assert gone.returncode == 1 and "no trace" in gone.stderr
        again = d.cli("tg-delete-explain-trace", uri)
        assert again.returncode == 1 and snapshot(d, coll) == after  # deleting twice changes nothing
    # the trace nobody deleted is whole
    shown = json.loads(d.ok("tg-show-explain-trace", other, "--format", "json").stdout)
    assert shown["status"] == "complete" and shown["synthesis"]["answer"]


def test_prune_removes_older_traces_only(deployment, tmp_path):
    d = deployment
    coll = f"prune{uuid.uuid4().hex[:6]}"
    note = tmp_path / "note.txt"
    note.write_text("Ada Lovelace wrote the first program. Ada Lovelace worked with Charles Babbage.\n")
    d.load(note, coll)
    old = [d.ok("tg-invoke-graph-rag", "-x", "-q", q, collection=coll).question_uri
           for q in ("Who wrote the first program?", "Who worked with Charles Babbage?")]
    wait_complete(d, coll, old)
    time.sleep(3)
    middle = datetime.now(UTC)
    time.sleep(3)
    new = d.ok("tg-invoke-graph-rag", "-x", "-q", "Who is Ada Lovelace?", collection=coll).question_uri
    wait_complete(d, coll, [new])
    kept_elsewhere = snapshot(d, d.owner[1])

    before = snapshot(d, coll)
    assert set(old) | {new} == before.traces
    doomed = [trace_quads(d, coll, uri) for uri in old]
    older = f"{(datetime.now(UTC) - middle).total_seconds():.1f}s"
    dry = d.ok("tg-prune-explain-traces", "--older-than", older, "--dry-run", collection=coll)
    assert snapshot(d, coll) == before
    done = d.ok("tg-prune-explain-traces", "--older-than", older, collection=coll)
    quads = set().union(*(q for q, _ in doomed))
    answers = set().union(*(a for _, a in doomed))
    assert counts(done.stdout) == (2, len(quads), len(answers)) == counts(dry.stdout), done.stdout
    after = snapshot(d, coll)
    assert after.traces == {new}
    assert before.quads - after.quads == quads and after.quads <= before.quads
    assert before.documents - after.documents == answers and after.documents <= before.documents
    assert ("source", next(m for t, m in before.documents if t == "source")) in after.documents
    assert snapshot(d, d.owner[1]) == kept_elsewhere  # another collection of the same user is untouched
    assert json.loads(d.ok("tg-show-explain-trace", new, "--format", "json", collection=coll).stdout)["status"] \
        == "complete"


# --------------------------------------------------------------------------- forged and half-written traces

def forge(d: Deployment, collection: str, triples: list) -> None:
    """Write triples straight into the deployment's triple store, as a client on the bus could."""
    store, librarian = d.open_stores()
    try:
        for i in range(0, len(triples), 5000):
            store.insert(d.owner[0], collection, triples[i:i + 5000])
    finally:
        store.close()
        librarian.close()


def retrieval(d: Deployment, collection: str) -> set:
    from trustgraph_base.provenance import namespaces as ns

    return {q for q in snapshot(d, collection).quads if q[3] == ns.GRAPH_RETRIEVAL}


def test_a_forged_trace_pointing_at_a_source_document_leaves_it_alone(deployment, tmp_path):
    """The issue's reproduction through the commands: the prune deletes the forged trace and reports the source
    document it points at as left alone; the document's extraction provenance is still there."""
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.schema import Triple, iri, literal

    d = deployment
    coll = f"c2{uuid.uuid4().hex[:6]}"
    note = tmp_path / "hahn.txt"
    note.write_text("Otto Hahn discovered nuclear fission in 1938.\n")
    d.load(note, coll)
    before = snapshot(d, coll)
    doc = next(i for t, i in before.documents if t == "source")
    q, s, g = "urn:trustgraph:question:11111111-1111-1111-1111-111111111111", "urn:x:s", ns.GRAPH_RETRIEVAL
    forge(d, coll, [Triple(iri(q), iri(ns.RDF_TYPE), iri(ns.TG_GRAPH_RAG_QUESTION), g),
                    Triple(iri(q), iri(ns.TG_QUERY), literal("x"), g),
                    Triple(iri(q), iri(ns.PROV_STARTED_AT_TIME), literal("2000-01-01T00:00:00Z", ns.XSD_DATETIME), g),
                    Triple(iri(s), iri(ns.PROV_WAS_DERIVED_FROM), iri(q), g),
                    Triple(iri(s), iri(ns.TG_DOCUMENT), iri(doc), g)])
    pruned = d.ok("tg-prune-explain-traces", "--older-than", "30d", collection=coll)
    assert counts(pruned.stdout) == (1, 5, 0), pruned.stdout
    assert "Left 1 document(s) alone" in pruned.stdout, pruned.stdout
    assert snapshot(d, coll) == before
    shown = d.ok("tg-show-extraction-provenance", doc, collection=coll)
    assert doc in shown.stdout and "Chunk 0" in shown.stdout, shown.explain()


def malformed(session: str) -> tuple[list, list[str]]:
    """Forged traces of awkward shapes (started long ago or at no readable time), and their Question URIs."""
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.schema import Triple, iri, literal

    g, old = ns.GRAPH_RETRIEVAL, literal("2000-01-01T00:00:00Z", ns.XSD_DATETIME)

    def t(s, p, o):
        return Triple(iri(s), iri(p), iri(o) if isinstance(o, str) else o, g)

    def question(uri, kind=ns.TG_AGENT_QUESTION, when=old, parent=""):
        out = [t(uri, ns.RDF_TYPE, kind), t(uri, ns.TG_QUERY, literal(f"forged {uri[-12:]}"))]
        out += [t(uri, ns.PROV_STARTED_AT_TIME, when)] if when is not None else []
        return out + ([t(uri, ns.PROV_WAS_DERIVED_FROM, parent)] if parent else [])

    cyc, mutual, deep, fan = (f"urn:trustgraph:agent:{session}-{n}" for n in ("cycle", "mutual", "deep", "fan"))
    doc, odd = f"urn:trustgraph:docrag:{session}-doc", f"urn:trustgraph:question:{session}-odd"
    triples = question(cyc, parent=f"{cyc}/i1") + [
        t(f"{cyc}/i1", ns.RDF_TYPE, ns.TG_ANALYSIS), t(f"{cyc}/i1", ns.PROV_WAS_DERIVED_FROM, cyc),
        t(f"{cyc}/i1", ns.TG_ARGUMENTS, literal("[" * 20_000 + "]" * 20_000)),
        t(f"{cyc}/i{'9' * 5000}", ns.RDF_TYPE, ns.TG_ANALYSIS),
        t(f"{cyc}/i{'9' * 5000}", ns.PROV_WAS_DERIVED_FROM, cyc),
        t(f"{cyc}/i²", ns.PROV_WAS_DERIVED_FROM, cyc)]
    triples += question(mutual, parent=f"{doc}/i1") + question(doc, parent=f"{mutual}/i1") + [
        t(f"{mutual}/i1", ns.RDF_TYPE, ns.TG_ANALYSIS), t(f"{mutual}/i1", ns.PROV_WAS_DERIVED_FROM, mutual),
        t(f"{doc}/i1", ns.RDF_TYPE, ns.TG_ANALYSIS), t(f"{doc}/i1", ns.PROV_WAS_DERIVED_FROM, doc)]
    triples += question(odd, ns.TG_GRAPH_RAG_QUESTION, when=iri("urn:x:time")) + [
        t(odd, ns.TG_QUERY, "urn:x:not-a-literal"),
        t(f"urn:trustgraph:prov:exploration:{session}-odd", ns.PROV_WAS_GENERATED_BY, odd),
        t(f"urn:trustgraph:prov:exploration:{session}-odd", ns.RDF_TYPE, ns.TG_EXPLORATION),
        t(f"urn:trustgraph:prov:exploration:{session}-odd", ns.TG_EDGE_COUNT, literal("9" * 5000, ns.XSD_INTEGER))]
    triples += question(deep) + [t(f"{deep}/i{k}", ns.PROV_WAS_DERIVED_FROM, f"{deep}/i{k - 1}" if k > 1 else deep)
                                 for k in range(1, 150)]
    triples += question(fan, when=literal("99999-99-99", ns.XSD_DATETIME)) + [
        t(f"urn:x:{session}:fan:{k}", ns.PROV_WAS_DERIVED_FROM, fan) for k in range(12_000)]
    return triples, [cyc, mutual, doc, odd, deep, fan]


def test_malformed_traces_can_be_shown_deleted_and_pruned(deployment):
    """Cycles, sub-traces of each other, IRIs where literals belong, unreadable times, JSON nested 20,000 deep,
    digit runs too long for int(), a chain deeper and a fan-out wider than one walk: every command copes."""
    d = deployment
    coll = f"malformed{uuid.uuid4().hex[:6]}"
    triples, roots = malformed(uuid.uuid4().hex[:8])
    forge(d, coll, triples)
    for uri in roots:
        for fmt in ("text", "json", "trig"):
            r = d.cli("tg-show-explain-trace", uri, "--format", fmt, collection=coll)
            assert r.returncode == 0 and "Traceback" not in r.stderr, r.explain()
        dry = d.cli("tg-delete-explain-trace", uri, "--dry-run", collection=coll)
        assert dry.returncode == 0 and dry.stdout.startswith("Would delete"), dry.explain()
    listed = json.loads(d.ok("tg-list-explain-traces", "--format", "json", collection=coll).stdout)["traces"]
    assert {t["id"] for t in listed} == set(roots)
    table = d.ok("tg-list-explain-traces", collection=coll).stdout
    assert all(uri in table for uri in roots), table
    pruned = d.ok("tg-prune-explain-traces", "--older-than", "1d", collection=coll)
    assert counts(pruned.stdout)[1] == len(triples), pruned.stdout
    assert retrieval(d, coll) == set() and snapshot(d, coll).traces == set()


def test_a_prune_racing_a_running_query_leaves_its_trace_whole(deployment, tmp_path):
    """tg-invoke-graph-rag with a slow LLM and tg-prune-explain-traces while it runs: the prune skips the trace,
    tg-delete-explain-trace refuses it; afterwards every stored triple of it and its answer are reachable, and the
    next prune deletes all of them."""
    import subprocess

    from fault_stack import start_llm

    from trustgraph_base.provenance import uris

    d = deployment
    coll = f"race{uuid.uuid4().hex[:6]}"
    note = tmp_path / "curie.txt"
    note.write_text("Marie Curie discovered polonium. Pierre Curie discovered polonium.\n")
    d.load(note, coll)
    env, llm = dict(d.env), None
    if d.kind == "embedded":
        llm = start_llm(latency_ms=2500)
        env.update({"LLM_BACKEND": "openai", "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "k",
                    "OPENAI_MODEL": "extractive"})
    else:
        d.stack.llm.set_latency(2500)
    argv = [str(BIN / "tg-invoke-graph-rag"), "-x", "-q", QUESTION, "-U", d.owner[0], "-C", coll]
    query = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not snapshot(d, coll).traces:
            assert time.monotonic() < deadline and query.poll() is None, "the Question was not stored"
            time.sleep(0.2)
        (question,) = snapshot(d, coll).traces
        pruned = d.ok("tg-prune-explain-traces", "--older-than", "0.0000001s", collection=coll)
        assert counts(pruned.stdout) == (0, 0, 0), pruned.stdout
        assert "Skipped 1 trace(s) still being written" in pruned.stdout, pruned.stdout
        refused = d.cli("tg-delete-explain-trace", question, collection=coll)
        assert refused.returncode == 1 and "still being written" in refused.stderr, refused.explain()
        assert len(refused.stderr.strip().splitlines()) == 1 and question in refused.stderr, refused.explain()
        assert query.poll() is None, "the query ended before the prune: the race was not run"
        out, err = query.communicate(timeout=300)
        assert query.returncode == 0, err
    finally:
        if query.poll() is None:
            query.kill()
        if llm is not None:
            llm.stop()
        else:
            d.stack.llm.set_latency(0)
    wait_complete(d, coll, [question])
    quads, answers = trace_quads(d, coll, question)
    assert quads == retrieval(d, coll)  # every stored triple of the trace is reachable from its Question
    assert answers == {("answer", uris.answer_uri_of(question))} and answers <= snapshot(d, coll).documents
    done = d.ok("tg-prune-explain-traces", "--older-than", "0.0000001s", collection=coll)
    assert counts(done.stdout) == (1, len(quads), 1), done.stdout
    after = snapshot(d, coll)
    assert retrieval(d, coll) == set() and after.traces == set() and not answers & after.documents
