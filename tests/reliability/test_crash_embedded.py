"""Crashes of the embedded deployment (one process, in-process bus, SQLite) and store outages.

Embedded, the CLI process *is* the whole stack, so a crash is ``kill -9`` of a running
``tg-invoke-graph-rag``.  What a crash may leave, precisely: the stages stored before it
(Question, maybe Grounding, Exploration and Focus) and nothing after; never a Synthesis without the
answer it claims, never a duplicated triple, never a damaged SQLite file.  Such a trace is
*incomplete* (no final stage, no Error), and ``tg-list-explain-traces`` / ``tg-show-explain-trace``
say so instead of showing it like a finished one.  A later query and listing work as usual.

The store-outage test shows the processor framework's answer to a store that is down for a
while: the message is retried with back-off, never dead-lettered, and is stored once the
store is back.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trace_audit import load_trace

pytestmark = [pytest.mark.service, pytest.mark.timeout(600)]

BIN = Path(sys.executable).parent
QUESTION = "Who discovered polonium?"


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A TG_HOME with the sample corpus, loaded by the real ingestion processors."""
    from tenants import embedded

    path = tmp_path_factory.mktemp("tg-home")
    embedded(path, "trustgraph", "default")
    return path


@pytest.fixture(scope="module")
def slow_llm():
    """The OpenAI-compatible test server, extractive answers after 1.5 s: a query is surely in flight."""
    from trustgraph_flow.model.testserver import start_server

    server = start_server("extractive", latency_ms=1500)
    yield server
    server.stop()


def env_for(home: Path, llm) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PULSAR_URL", "TG_FLOW", "TG_DEBUG")}
    env.update({"TG_HOME": str(home), "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test-key",
                "OPENAI_MODEL": "extractive", "LLM_BACKEND": "openai", "PYTHONUNBUFFERED": "1"})
    return env


def cli(home: Path, llm, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / args[0]), *args[1:]], env=env_for(home, llm), capture_output=True, text=True,
                          timeout=timeout)


def kill_when(home: Path, llm, marker: str, collection: str) -> tuple[str, str]:
    """Run ``tg-invoke-graph-rag -x`` and ``kill -9`` it as soon as its output shows ``marker``.

    :returns: (question URI printed before the kill, everything printed).
    """
    proc = subprocess.Popen([str(BIN / "tg-invoke-graph-rag"), "-x", "-C", collection, "-q", QUESTION],
                            env=env_for(home, llm), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith(marker):
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    text = "".join(seen)
    assert marker in text, f"the query ended before {marker!r}:\n{text}"
    question = next(line.split()[1] for line in seen if line.startswith("[question] "))
    return question, text


def integrity(home: Path) -> dict[str, str]:
    """``PRAGMA integrity_check`` of every SQLite file under ``home``."""
    out = {}
    for f in sorted(home.rglob("*.sqlite")):
        with sqlite3.connect(f) as db:
            out[f.name] = db.execute("PRAGMA integrity_check").fetchone()[0]
    return out


def listed_traces(home: Path, llm) -> dict[str, str]:
    """Trace URI -> status, as ``tg-list-explain-traces --format json`` reports them."""
    r = cli(home, llm, "tg-list-explain-traces", "--limit", "1000", "--format", "json")
    assert r.returncode == 0, r.stderr
    return {t["id"]: t["status"] for t in json.loads(r.stdout)["traces"]}


@pytest.mark.parametrize("marker", ["[exploration]", "[focus]"], ids=["during-selection", "during-synthesis"])
def test_kill_embedded_query_leaves_an_honest_incomplete_trace(home, slow_llm, marker):
    from trustgraph_base.provenance import uris
    from trustgraph_base.store.errors import NotFound
    from trustgraph_base.store.librarian import open_librarian_store
    from trustgraph_base.store.triples import open_triples_store

    before = listed_traces(home, slow_llm)
    question, printed = kill_when(home, slow_llm, marker, "default")
    session = question.rsplit(":", 1)[-1]

    # the store: only stages before the crash, no duplicate rows, no answer, files intact
    assert set(integrity(home).values()) == {"ok"}
    triples_store = open_triples_store("sqlite", home=home)
    librarian = open_librarian_store("sqlite", home=home)
    try:
        def content(doc):
            try:
                return librarian.get_content("trustgraph", "default", doc).decode()
            except NotFound:
                return None

        trace = asyncio.run(load_trace(triples_store, content, "trustgraph", "default", question))
        with pytest.raises(NotFound):
            librarian.get_metadata("trustgraph", "default", uris.answer_document_uri(session))
    finally:
        triples_store.close()
        librarian.close()
    assert trace.status == "incomplete"
    assert trace.has(question) and not trace.has(uris.synthesis_uri(session))
    assert all(trace.rows[s] == trace.distinct[s] for s in trace.rows), trace.rows
    if marker == "[focus]":  # the LLM spent 1.5 s selecting edges after the Exploration was stored
        assert trace.has(uris.exploration_uri(session)), sorted(trace.subjects)

    # the CLI says the trace is incomplete, in the list and in the trace itself
    after = listed_traces(home, slow_llm)
    assert {u: s for u, s in after.items() if u not in before} == {question: "incomplete"}
    table = cli(home, slow_llm, "tg-list-explain-traces", "--limit", "1000")
    row = next(line for line in table.stdout.splitlines() if question in line)
    assert "[incomplete] Who discovered polonium?" in row, table.stdout
    shown = cli(home, slow_llm, "tg-show-explain-trace", question)
    assert shown.returncode == 0, shown.stderr
    assert "Status: INCOMPLETE" in shown.stdout and "--- Synthesis ---" not in shown.stdout
    as_json = json.loads(cli(home, slow_llm, "tg-show-explain-trace", question, "--format", "json").stdout)
    assert as_json["status"] == "incomplete" and as_json["synthesis"] is None and as_json["error"] is None

    # the next query on the same files works, and its trace is complete
    slow_llm.set_latency(0)
    try:
        again = cli(home, slow_llm, "tg-invoke-graph-rag", "-x", "-q", QUESTION)
    finally:
        slow_llm.set_latency(1500)
    assert again.returncode == 0, again.stderr
    assert "polonium" in again.stdout.lower()
    new = {u: s for u, s in listed_traces(home, slow_llm).items() if u not in before}
    assert sorted(new.values()) == ["complete", "incomplete"], new


async def test_store_outage_is_retried_not_dead_lettered(tmp_path):
    """A store that is down for longer than ``max_redeliveries`` attempts loses nothing: the batch waits."""
    from trustgraph_base.codec import encode
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.pubsub import dead_letter_queue, flow_queue, open_backend
    from trustgraph_base.schema import Metadata, Triple, Triples, iri, literal
    from trustgraph_base.store.errors import StoreUnavailable
    from trustgraph_base.store.triples import open_triples_store
    from trustgraph_flow.storage.triples.service import TriplesWriteService

    class Outage:
        """The real SQLite store behind a switch: while ``down``, every write fails as an unreachable store would."""

        def __init__(self, store):
            self.store, self.down, self.refused = store, True, 0

        def insert(self, user, collection, triples):
            if self.down:
                self.refused += 1
                raise StoreUnavailable("injected outage: the store cannot be reached")
            return self.store.insert(user, collection, triples)

        def __getattr__(self, name):
            return getattr(self.store, name)

    store = open_triples_store("sqlite", home=tmp_path)
    outage = Outage(store)
    backend = open_backend("memory")
    writer = TriplesWriteService(backend=backend, triples_store=outage)
    await writer.start()
    dlq = await backend.subscribe(dead_letter_queue(flow_queue("triples-store")), "inspect")
    producer = await backend.create_producer(flow_queue("triples-store"))
    try:
        batch = [Triple(iri("urn:x:q"), iri(ns.RDFS_LABEL), literal("kept through an outage"), ns.GRAPH_RETRIEVAL)]
        await producer.send(encode(Triples(metadata=Metadata(id="urn:x:q", user="u", collection="c"),
                                           triples=batch)))
        spec = writer._consumer_specs[0]
        deadline = time.monotonic() + 60
        while outage.refused <= spec.max_redeliveries and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert outage.refused > spec.max_redeliveries  # more refusals than redeliveries, yet not dead-lettered
        outage.down = False
        while not store.count("u", "c", _pattern()) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert store.count("u", "c", _pattern()) == 1
        from trustgraph_base.pubsub import ReceiveTimeout

        with pytest.raises(ReceiveTimeout):
            await dlq.receive(timeout=0.5)
    finally:
        await writer.stop()
        await backend.close()
        store.close()


def _pattern():
    from trustgraph_base.schema import TriplePattern, iri

    return TriplePattern(s=iri("urn:x:q"))
