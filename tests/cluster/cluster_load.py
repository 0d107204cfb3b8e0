"""Load and audit of the cluster tier: a GraphRAG query stream that runs until told to stop, and the
audits read at consistency ``ALL`` (every replica answers, so nothing a quorum read could hide).

The per-query rules are those of ``tests/reliability/trace_audit.py``: an answered query has a
complete, SHACL-valid trace equal to what its client was streamed; a trace never claims an
answer its client did not get; no stored triple is duplicated; no trace is foreign or listed twice.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from trace_audit import Audit, QueryRecord, QueryStream, audit, stored_traces

#: Seconds a client waits for each message of a query (graph-rag's own store calls give up after 15 s).
CLIENT_TIMEOUT = 30.0


async def graph_rag_client(stack, timeout: float = CLIENT_TIMEOUT):
    """A streaming GraphRAG client on the stack's flow: (backend, client), both to be closed by the caller."""
    from trustgraph_base.processor.client import RequestResponseClient
    from trustgraph_base.pubsub.topics import request_queue, response_queue
    from trustgraph_flow.common.services import SERVICES

    backend = stack.backend()
    s = SERVICES["graph-rag"]
    client = RequestResponseClient(backend, "graph-rag", request_queue("graph-rag", stack.flow),
                                   response_queue("graph-rag", stack.flow), s.request, s.response,
                                   timeout=timeout, owner="cluster-test")
    await client.start()
    return backend, client


async def keep_asking(stream: QueryStream, stop: asyncio.Event, concurrency: int = 2,
                      pause: float = 0.5, limit: int = 400) -> list[QueryRecord]:
    """Send batches of ``concurrency`` queries until ``stop`` is set (bounded by ``limit`` queries)."""
    sent: list[QueryRecord] = []
    while not stop.is_set() and len(sent) < limit:
        batch = stream.batch(concurrency)
        sent += await stream.send(batch, concurrency)
        await asyncio.sleep(pause)
    return sent


def window(records: list[QueryRecord], start: float, end: float) -> list[QueryRecord]:
    """The queries that were running at some moment between ``start`` and ``end`` (monotonic seconds)."""
    return [r for r in records if r.started <= end and r.finished >= start]


def outcomes(records: list[QueryRecord]) -> str:
    return ", ".join(f"{k}={n}" for k, n in sorted(Counter(r.outcome for r in records).items()))


async def settled_traces(stack, records: list[QueryRecord], collection: str, seconds: float = 180.0):
    """The stored traces of ``collection`` read at ``ALL``, once every answered query's trace is complete
    and nothing changed between two reads (stages of failed queries may still be on their way)."""
    from trustgraph_base.store.errors import NotFound, StoreUnavailable
    from trustgraph_base.store.librarian import open_librarian_store
    from trustgraph_base.store.triples import open_triples_store

    config = stack.cassandra_config("ALL")
    store = open_triples_store("cassandra", config=config)
    librarian = open_librarian_store("cassandra", config=config)

    def read(doc_id: str) -> str | None:
        try:
            return librarian.get_content(stack.user, collection, doc_id).decode("utf-8")
        except NotFound:
            return None

    try:
        deadline = time.monotonic() + seconds
        previous = None
        answered = {r.question_uri for r in records if r.outcome == "answered"}
        while True:
            try:
                traces = await stored_traces(store, read, stack.user, collection)
            except StoreUnavailable:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(2.0)
                continue
            snapshot = {u: (len(t.triples), t.answer is not None) for u, t in traces.items()}
            complete = all(u in traces and traces[u].status == "complete" for u in answered)
            if (complete and snapshot == previous) or time.monotonic() > deadline:
                return traces
            previous = snapshot
            await asyncio.sleep(3.0)
    finally:
        store.close()
        librarian.close()


async def audit_at_all(stack, records: list[QueryRecord], collection: str) -> Audit:
    """The trace audit of ``records`` against what every replica holds."""
    return audit(records, await settled_traces(stack, records, collection))


def quads_at_all(stack, collection: str) -> tuple[set[tuple], int]:
    """Every quad of ``collection`` read at ``ALL``: (the distinct quads, the rows read)."""
    from trustgraph_base.rdf.terms import serialize_term
    from trustgraph_base.schema import TriplePattern
    from trustgraph_base.store.triples import open_triples_store

    store = open_triples_store("cassandra", config=stack.cassandra_config("ALL"))
    try:
        rows = [(serialize_term(t.s), serialize_term(t.p), serialize_term(t.o), t.g)
                for page in store.iter_query(stack.user, collection, TriplePattern(), page_size=5000) for t in page]
    finally:
        store.close()
    return set(rows), len(rows)


def documents_at_all(stack, collection: str) -> set[str]:
    """Ids of the documents the librarian lists in ``collection``, read at ``ALL``."""
    from trustgraph_base.store.librarian import open_librarian_store

    librarian = open_librarian_store("cassandra", config=stack.cassandra_config("ALL"))
    try:
        return {d.id for d in librarian.list_documents(stack.user, collection)}
    finally:
        librarian.close()
