"""triples-write and triples-query as services, on both deployments: streamed batches, chain walking,
trace listing with a cursor, bad input answered with errors, bad batches dead-lettered whole."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from itertools import pairwise

import pytest

from trustgraph_base.codec import encode
from trustgraph_base.processor import ServiceError
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance import uris
from trustgraph_base.provenance.triples import exploration_triples, question_triples, synthesis_triples
from trustgraph_base.pubsub import dead_letter_queue, flow_queue
from trustgraph_base.schema import (
    Metadata,
    TraceListRequest,
    Triple,
    TriplePattern,
    Triples,
    TriplesQueryRequest,
    iri,
    literal,
)

pytestmark = pytest.mark.timeout(300)

STACK = ("triples-write", "triples-query")


async def write(stack, user, collection, triples):
    producer = await stack.backend.create_producer(flow_queue("triples-store", stack.flow))
    await producer.send(encode(Triples(metadata=Metadata(id="t", user=user, collection=collection),
                                       triples=triples)))
    await producer.close()


async def wait_for(check, timeout=30.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.1)


async def test_query_streaming_follow_and_trace_listing(deployment):
    from trustgraph_cli.connection import Connection

    user, coll = deployment.user, f"tq-{uuid.uuid4().hex[:6]}"
    stack = await deployment.start(STACK)
    store = next(s for s in stack.stores if hasattr(s, "list_traces"))
    e = "http://trustgraph.ai/e/"
    data = [Triple(iri(f"{e}n{i}"), iri(f"{e}next"), iri(f"{e}n{i + 1}")) for i in range(120)]
    data += [Triple(iri(f"{e}n{i}"), iri(ns.RDFS_LABEL), literal(f"node {i}")) for i in range(121)]
    questions = []
    for i in range(7):
        q = uris.question_uri(f"00000000-0000-4000-8000-{i:012d}")
        questions.append(q)
        data += question_triples(q, f"question {i}", f"2026-01-0{i + 1}T00:00:00Z")
    try:
        await write(stack, user, coll, data)
        await wait_for(lambda: len(store.query(user, coll, TriplePattern(g=ns.GRAPH_RETRIEVAL))) >= 7 * 6)
        async with Connection.attach(stack, timeout=30) as conn:
            client = await conn.client("triples")
            parts = [r async for r in client.stream(TriplesQueryRequest(
                user=user, collection=coll, p=iri(f"{e}next"), g="", streaming=True, batch_size=50))]
            assert [len(p.triples) for p in parts] == [50, 50, 20] and parts[-1].is_final
            assert not any(p.is_final for p in parts[:-1])
            # one request walks a chain: n0 -next-> n1 -next-> n2 -next-> n3, with labels of every node
            walked = await conn.request("triples", TriplesQueryRequest(
                user=user, collection=coll, patterns=[TriplePattern(s=iri(f"{e}n0"), p=iri(f"{e}next"), g="")],
                follow=[f"{e}next"], follow_depth=3, describe=[ns.RDFS_LABEL]))
            labels = {t.o.value for t in walked.triples if t.p.value == ns.RDFS_LABEL}
            assert {"node 0", "node 1", "node 2", "node 3"} <= labels and "node 6" not in labels
            # newest first, paged with a cursor
            first = await conn.request("trace-list", TraceListRequest(user=user, collection=coll, limit=3))
            second = await conn.request("trace-list", TraceListRequest(user=user, collection=coll, limit=10,
                                                                        cursor=first.next_cursor))
            listed = [t.uri for t in first.traces + second.traces]
            assert listed == list(reversed(questions)) and not second.next_cursor
            assert first.traces[0].question == "question 6" and first.traces[0].type == "graphrag"
            # bad input is an error reply, the service keeps serving
            for bad in (TriplesQueryRequest(user="x'; DROP KEYSPACE tg; --", collection=coll),
                        TriplesQueryRequest(user=user, collection="../../etc"),
                        TriplesQueryRequest(user=user, collection=coll, limit=10**9),
                        TriplesQueryRequest(user=user, collection=coll, s=iri("not an iri"))):
                with pytest.raises(ServiceError):
                    await conn.request("triples", bad)
            assert (await conn.request("triples", TriplesQueryRequest(user=user, collection=coll,
                                                                      p=iri(f"{e}next"), limit=1))).triples
    finally:
        await stack.stop()


async def test_chain_walk_reads_followed_nodes_whole_and_falls_back_for_big_ones(deployment):
    """Nodes reached by a link are read as one subject slice; one with more rows than a slice holds
    (here 80 unrelated triples) is read predicate by predicate: the walk returns exactly the
    described and followed triples either way, in the pattern's graph only."""
    from trustgraph_flow.query.triples.service import NODE_SLICE

    user, coll = deployment.user, f"tw-{uuid.uuid4().hex[:6]}"
    e, g = "http://trustgraph.ai/e/", "urn:graph:source"
    up, label, kind = ns.PROV_WAS_DERIVED_FROM, ns.RDFS_LABEL, ns.RDF_TYPE
    nodes = ["sg", "chunk", "page", "doc"]
    data = []
    for child, parent in pairwise(nodes):
        data.append(Triple(iri(e + child), iri(up), iri(e + parent), g))
    for n in nodes:
        data += [Triple(iri(e + n), iri(label), literal(f"{n} label"), g),
                 Triple(iri(e + n), iri(kind), iri(e + "T"), g)]
    data.append(Triple(iri(e + "page"), iri(kind), iri(e + "T2"), g))
    wanted = set((t.s.value, t.p.value, t.o.value) for t in data)
    noise = [Triple(iri(e + "chunk"), iri(e + "extra"), literal(f"x{i}"), g) for i in range(NODE_SLICE + 16)]
    noise += [Triple(iri(e + "page"), iri(e + "extra"), literal("y"), g),
              Triple(iri(e + "page"), iri(label), literal("page label in the default graph"), "")]
    contains = Triple(iri(e + "sg"), iri(ns.TG_CONTAINS), iri(e + "edge"), g)
    stack = await deployment.start(STACK)
    store = next(s for s in stack.stores if hasattr(s, "list_traces"))
    try:
        await write(stack, user, coll, data + noise + [contains])
        await wait_for(lambda: len(store.query(user, coll, TriplePattern(g=g))) >= len(data) + len(noise) - 1)
        from trustgraph_cli.connection import Connection

        async with Connection.attach(stack, timeout=30) as conn:
            walked = await conn.request("triples", TriplesQueryRequest(
                user=user, collection=coll,
                patterns=[TriplePattern(p=iri(ns.TG_CONTAINS), o=iri(e + "edge"), g=g)],
                follow=[up], follow_depth=4, describe=[label, kind]))
            # describe_types: only the listed classes' rdf:type rows of described nodes
            typed = await conn.request("triples", TriplesQueryRequest(
                user=user, collection=coll,
                patterns=[TriplePattern(p=iri(ns.TG_CONTAINS), o=iri(e + "edge"), g=g)],
                follow=[up], follow_depth=4, describe=[label, kind], describe_types=[e + "T2"]))
        got = [(t.s.value, t.p.value, t.o.value) for t in walked.triples]
        assert len(got) == len(set(got))
        assert set(got) == wanted | {(e + "sg", ns.TG_CONTAINS, e + "edge")}
        got_typed = {(t.s.value, t.p.value, t.o.value) for t in typed.triples}
        assert got_typed == {(s, p, o) for s, p, o in set(got) if p != kind or o == e + "T2"}
        assert {(e + "page", kind, e + "T2"), (e + "page", kind, e + "T")} & got_typed == {(e + "page", kind, e + "T2")}
    finally:
        await stack.stop()


async def test_a_bad_batch_is_dead_lettered_whole(deployment):
    user, coll = deployment.user, f"tw-{uuid.uuid4().hex[:6]}"
    stack = await deployment.start(STACK)
    store = next(s for s in stack.stores if hasattr(s, "list_traces"))
    dlq = await stack.backend.subscribe(dead_letter_queue(flow_queue("triples-store", stack.flow)), "inspect")
    good = Triple(iri("http://trustgraph.ai/e/a"), iri("http://trustgraph.ai/e/b"), literal("fine"))
    bad = Triple(iri("http://trustgraph.ai/e/a"), iri("http://trustgraph.ai/e/b"), iri("not an iri"))
    try:
        await write(stack, user, coll, [good, bad])
        dead = await dlq.receive(timeout=60)
        await dlq.ack(dead)
        assert "not an iri" in dead.properties["dlq-reason"] or "IRI" in dead.properties["dlq-reason"]
        assert store.query(user, coll, TriplePattern()) == []  # nothing written half-way
        await write(stack, user, coll, [good])  # the writer keeps working
        await wait_for(lambda: len(store.query(user, coll, TriplePattern())) == 1)
    finally:
        await dlq.close()
        await stack.stop()


LONG_LINGER = {"triples-write": {"linger_ms": 300}}


@contextlib.asynccontextmanager
async def counted_writer(deployment, collection: str, settings: dict | None = LONG_LINGER):
    """The stack (by default with a long linger), the triple store, and the sizes of its inserts into
    ``collection``.

    Yields ``(stack, store, calls)``; restores the store's ``insert`` and stops the stack afterwards.
    """
    stack = await deployment.start(STACK, settings=settings)
    store = next(s for s in stack.stores if hasattr(s, "list_traces"))
    calls: list[int] = []
    insert = store.insert

    def counting_insert(u, c, triples):
        if c == collection:
            calls.append(len(triples))
        return insert(u, c, triples)

    store.insert = counting_insert
    try:
        yield stack, store, calls
    finally:
        store.insert = insert
        await stack.stop()


async def test_small_batches_arriving_together_share_writes_and_a_bad_one_is_refused_alone(deployment):
    """triples-write coalesces the messages it handles at once (one insert per batch, not per
    message); a bad message among them is dead-lettered alone and its neighbours are stored."""
    user, coll = deployment.user, f"tw-{uuid.uuid4().hex[:6]}"

    def message(k: int, bad: bool = False) -> bytes:
        o = iri("not an iri") if bad else literal(f"value {k}")
        return encode(Triples(metadata=Metadata(id=f"m{k}", user=user, collection=coll),
                              triples=[Triple(iri(f"http://trustgraph.ai/e/{k}"), iri(f"http://trustgraph.ai/p/{j}"), o)
                                       for j in range(3)]))

    async with counted_writer(deployment, coll) as (stack, store, calls):
        dlq = await stack.backend.subscribe(dead_letter_queue(flow_queue("triples-store", stack.flow)), "inspect")
        producer = await stack.backend.create_producer(flow_queue("triples-store", stack.flow))
        try:
            await asyncio.gather(*(producer.send(message(k, bad=(k == 5))) for k in range(12)))
            dead = await dlq.receive(timeout=60)
            await dlq.ack(dead)
            assert "not an iri" in dead.properties["dlq-reason"] or "IRI" in dead.properties["dlq-reason"]
            await wait_for(lambda: len(store.query(user, coll, TriplePattern())) == 33)
            stored = {t.s.value for t in store.query(user, coll, TriplePattern())}
            assert stored == {f"http://trustgraph.ai/e/{k}" for k in range(12) if k != 5}
            # one coalesced insert that failed on the bad message, then one per message to isolate it;
            # without coalescing there would be exactly one insert per message and none bigger than 3
            assert max(calls) > 3, calls
        finally:
            await producer.close()
            await dlq.close()


async def test_coalesced_writes_store_every_message_once_and_in_few_inserts(deployment):
    user, coll = deployment.user, f"tw-{uuid.uuid4().hex[:6]}"
    async with counted_writer(deployment, coll) as (stack, store, calls):
        producer = await stack.backend.create_producer(flow_queue("triples-store", stack.flow))
        try:
            await asyncio.gather(*(producer.send(encode(Triples(
                metadata=Metadata(id=f"m{k}", user=user, collection=coll),
                triples=[Triple(iri(f"http://trustgraph.ai/e/{k}"), iri("http://trustgraph.ai/p"), literal("v"))])))
                for k in range(20)))
            await wait_for(lambda: len(store.query(user, coll, TriplePattern())) == 20)
            await stack.wait_idle()
            assert sum(calls) == 20 and len(calls) < 20, calls  # every message once, fewer inserts than messages
        finally:
            await producer.close()


async def test_the_default_linger_follows_the_bus(deployment):
    """Pulsar keeps unacked messages in the broker, so triples-write waits up to 1 s for neighbours there:
    two stages of a query sent 60 ms apart share one insert.  In-process a waiting message lives
    only in memory, so the wait stays 20 ms."""
    from trustgraph_flow.storage.triples.service import DEFAULT_LINGER_MS, DURABLE_BUS_LINGER_MS

    user, coll = deployment.user, f"tw-{uuid.uuid4().hex[:6]}"
    async with counted_writer(deployment, coll, settings=None) as (stack, store, calls):
        writer = next(p for p in stack.processors if p.id == "triples-write")
        durable = deployment.kind == "distributed"
        assert stack.backend.durable is durable
        assert writer.linger_ms == (DURABLE_BUS_LINGER_MS if durable else DEFAULT_LINGER_MS)
        q_uri = uris.question_uri(str(uuid.uuid4()))
        first = question_triples(q_uri, "first stage")
        await write(stack, user, coll, first)
        await asyncio.sleep(0.06)
        await write(stack, user, coll, [Triple(iri(q_uri), iri(ns.RDFS_LABEL), literal("second stage"))])
        await wait_for(lambda: sum(calls) == len(first) + 1)
        await stack.wait_idle()
        if durable:
            assert len(calls) == 1, calls  # both stages in one write
        assert store.get_trace(user, coll, q_uri) is not None


async def test_the_final_stage_of_a_trace_ends_the_wait(deployment):
    """With a 30 s linger, a query's stages wait for company; its Synthesis (nothing of the trace
    follows it) ends the wait at once, and all three stages are stored in one insert."""
    user, coll = deployment.user, f"tw-{uuid.uuid4().hex[:6]}"
    async with counted_writer(deployment, coll, settings={"triples-write": {"linger_ms": 30_000}}) as (
            stack, store, calls):
        session = str(uuid.uuid4())
        q, e, s = uris.question_uri(session), uris.exploration_uri(session), uris.synthesis_uri(session)
        stages = [question_triples(q, "which stages share a write?"), exploration_triples(e, q, 3),
                  synthesis_triples(s, uris.focus_uri(session))]
        loop = asyncio.get_running_loop()
        await write(stack, user, coll, stages[0])
        await write(stack, user, coll, stages[1])
        await asyncio.sleep(0.3)
        assert calls == []  # the Question and Exploration are still waiting (linger 30 s)
        t0 = loop.time()
        await write(stack, user, coll, stages[2])
        await wait_for(lambda: sum(calls) == sum(map(len, stages)), timeout=10)
        assert loop.time() - t0 < 10
        await stack.wait_idle()  # the insert was called; let it finish
        assert calls == [sum(map(len, stages))], calls  # one write holding the whole trace
        assert store.get_trace(user, coll, q) is not None


async def test_query_service_reports_lookups_in_flight_and_started_in_its_metrics(deployment):
    """What a scraper outside the process (the benchmarks' services run apart) reads: processors started,
    messages in flight (0 when idle), and triples-query's store pattern look-ups, one per pattern."""
    from prometheus_client import REGISTRY

    from trustgraph_cli.connection import Connection

    def sample(name: str, processor: str) -> float:
        return REGISTRY.get_sample_value(name, {"processor": processor}) or 0.0

    user, coll = deployment.user, f"tm-{uuid.uuid4().hex[:6]}"
    started_before = sample("tg_processors_started", "triples-query")
    stack = await deployment.start(STACK)
    try:
        assert sample("tg_processors_started", "triples-query") == started_before + 1
        e = "http://trustgraph.ai/e/"
        before = sample("tg_store_pattern_lookups_total", "triples-query")
        async with Connection.attach(stack, timeout=30) as conn:
            await conn.request("triples", TriplesQueryRequest(user=user, collection=coll, patterns=[
                TriplePattern(s=iri(f"{e}a")), TriplePattern(s=iri(f"{e}b")), TriplePattern(p=iri(f"{e}c"))]))
        assert sample("tg_store_pattern_lookups_total", "triples-query") == before + 3
        await stack.wait_idle(settle=0.01)
        assert sample("tg_in_flight_messages", "triples-query") == 0
    finally:
        await stack.stop()
    assert sample("tg_processors_started", "triples-query") == started_before
