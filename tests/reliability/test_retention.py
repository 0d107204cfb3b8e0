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
from datetime import datetime, timezone

import pytest

from tenants import Deployment, distributed, embedded

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
    middle = datetime.now(timezone.utc)
    time.sleep(3)
    new = d.ok("tg-invoke-graph-rag", "-x", "-q", "Who is Ada Lovelace?", collection=coll).question_uri
    wait_complete(d, coll, [new])
    kept_elsewhere = snapshot(d, d.owner[1])

    before = snapshot(d, coll)
    assert set(old) | {new} == before.traces
    doomed = [trace_quads(d, coll, uri) for uri in old]
    older = f"{(datetime.now(timezone.utc) - middle).total_seconds():.1f}s"
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
