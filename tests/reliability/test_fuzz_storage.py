"""Fuzz: a GraphRAG query on an embedded stack whose disk runs out at an arbitrary moment.

The data directory (the sample corpus, loaded once and copied for each example) lives on a
real small tmpfs (``storage_faults.tmpfs``, a deliberately injected fault) that hypothesis
fills up to a drawn number of free bytes, so the query's trace writes, its answer or the
write-ahead logs hit ENOSPC at a different moment each time.  Whatever the moment, the query
either succeeds with a complete trace, or ends with the one-line ``no space left on <path>``
store error — never a hang, never another error, never a dead letter — and what storage holds
(read back once space is freed) is a prefix of the stages the client was sent: no stage
without the stages before it, no Synthesis without the answer it names (``docs/guarantees.md``,
"Traces").
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from storage_faults import tmpfs
from tenants import embedded
from trace_audit import QueryRecord, ask, key, load_trace

from trustgraph_base.provenance import uris
from trustgraph_base.pubsub import ReceiveTimeout, dead_letter_queue, flow_queue
from trustgraph_base.store.errors import StoreEnvironmentError
from trustgraph_base.store.librarian import open_librarian_store
from trustgraph_base.store.triples import open_triples_store
from trustgraph_cli.connection import Connection
from trustgraph_flow.embedded import start_embedded
from trustgraph_flow.manifest import closure

pytestmark = [pytest.mark.service, pytest.mark.timeout(900)]

USER, COLLECTION = "fuzz", "storage"
QUESTION = "Who discovered polonium?"
#: Every queue whose dead letters would mean data was dropped instead of failing the command.
FLOWS = ("triples-store", "answer-store")


def leave_free(root: Path, free: int) -> None:
    """Fill the file system of ``root`` until at most ``free`` bytes are left for writing."""
    st_ = os.statvfs(root)
    filler = max(0, st_.f_bavail * st_.f_frsize - free)
    with open(root / "filler", "wb") as f:
        block = b"\0" * (1 << 20)
        while filler > 0:
            f.write(block[:min(filler, len(block))])
            filler -= min(filler, len(block))


@pytest.fixture(scope="module")
def corpus_home(tmp_path_factory) -> Path:
    """A data directory holding the sample corpus, loaded once; each example works on a copy."""
    home = tmp_path_factory.mktemp("corpus-home")
    embedded(home, USER, COLLECTION, timeout=180)
    return home


async def _query(home: Path) -> tuple[QueryRecord, BaseException | None]:
    """Run one explainable GraphRAG query on the data under ``home``; the store failure, if any."""
    flow = f"f{uuid.uuid4().hex[:8]}"
    record = QueryRecord(index=0, question=QUESTION)
    failure: BaseException | None = None
    stack = await start_embedded(home, only=closure("graph-rag"), llm="extractive",
                                 flow=flow)
    dead = [await stack.backend.subscribe(dead_letter_queue(flow_queue(f, flow)), "audit") for f in FLOWS]
    try:
        try:
            async with Connection.attach(stack, timeout=60) as conn:
                await ask(await conn.client("graph-rag"), USER, COLLECTION, record, timeout=60)
            await asyncio.wait_for(stack.wait_idle(), 120)
        except StoreEnvironmentError as e:  # the stack halted on the full store: the command's error
            failure = e
        failure = failure or stack.failure
        for consumer in dead:
            with pytest.raises(ReceiveTimeout):
                await consumer.receive(timeout=0.2)
    finally:
        for consumer in dead:
            await consumer.close()
        await stack.stop()
    return record, failure


async def _stored(home: Path, question_uri: str):
    triples = open_triples_store("sqlite", home=home)
    librarian = open_librarian_store("sqlite", home=home)

    def content(doc_id: str) -> str | None:
        try:
            return librarian.get_content(USER, COLLECTION, doc_id).decode("utf-8")
        except (KeyError, OSError, ValueError):  # absent (or unreadable) answer: reported as None
            return None

    try:
        return await load_trace(triples, content, USER, COLLECTION, question_uri)
    finally:
        triples.close()
        librarian.close()


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(free=st.integers(min_value=256 << 10, max_value=1 << 20))
def test_a_disk_that_fills_up_mid_query_fails_cleanly_and_keeps_a_prefix(corpus_home, tmp_path_factory, free):
    with tmpfs(tmp_path_factory.mktemp("disk"), "32m") as disk:
        home = disk / "home"
        shutil.copytree(corpus_home, home)
        leave_free(disk, free)
        record, failure = asyncio.run(asyncio.wait_for(_query(home), 300))
        (disk / "filler").unlink()  # space again, so the stores can be read back
        event("no space" if failure is not None else record.outcome)
        if failure is not None:
            assert isinstance(failure, StoreEnvironmentError)
            assert str(failure).startswith(f"no space left on {home}"), str(failure)
        else:
            assert record.outcome == "answered", (record.outcome, record.error)
        if not record.question_uri:
            return  # refused before the Question was accepted: nothing to audit
        trace = asyncio.run(_stored(home, record.question_uri))
    session = record.question_uri.rsplit(":", 1)[-1]
    chain = [uris.question_uri(session), uris.grounding_uri(session), uris.exploration_uri(session),
             uris.focus_uri(session), uris.synthesis_uri(session)]
    stored = [trace.has(stage) for stage in chain]
    # a prefix: once a stage is missing, no later stage is stored
    assert stored == sorted(stored, reverse=True), dict(zip(chain, stored, strict=True))
    for stage in chain:
        if trace.has(stage):
            sent = {key(t) for t in record.events.get(stage, [])}
            assert trace.stage(stage) <= sent, f"{stage} stored but never sent"
    if trace.has(uris.synthesis_uri(session)):
        assert trace.answer is not None, "a stored Synthesis names an answer the librarian does not hold"
        assert trace.answer == record.answer
    if failure is None:
        assert trace.status == "complete"
