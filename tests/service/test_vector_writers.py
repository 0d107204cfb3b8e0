"""The vector writers batch concurrent messages into one embeddings request without changing what is stored.

Real processors on the in-process bus: the embeddings service with the packaged embedder, the
two writers, SQLite vector indexes.  Messages that arrive together share an ``embeddings``
request and an index write; every one still gets exactly the vector it would get alone, a
repeated id keeps the later message's data, and a bad message is dead-lettered on its own.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import replace

import pytest

from trustgraph_base.codec import decode, encode
from trustgraph_base.processor import RequestResponseClient
from trustgraph_base.pubsub import (
    ReceiveTimeout,
    dead_letter_queue,
    flow_queue,
    open_backend,
    request_queue,
    response_queue,
)
from trustgraph_base.schema import (
    Chunk,
    EmbeddingsRequest,
    EmbeddingsResponse,
    EntityContext,
    EntityContexts,
    IngestProgress,
    Metadata,
    iri,
)
from trustgraph_base.store.vectors import open_vector_index
from trustgraph_flow.common.services import progress_queue
from trustgraph_flow.model.embeddings import LocalEmbedder
from trustgraph_flow.model.services import EmbeddingsService
from trustgraph_flow.storage.vectors.service import DocumentEmbeddingsWriter, GraphEmbeddingsWriter

pytestmark = [pytest.mark.service, pytest.mark.timeout(300)]

USER, COLLECTION = "alice", "writers"
TEXTS = [
    "Marie Curie discovered polonium and radium with Pierre Curie in 1898.",
    "Henri Becquerel found that uranium salts emit rays that fog photographic plates.",
    "Ernest Rutherford named alpha and beta rays and proposed the nuclear model of the atom.",
    "The Radium Institute in Paris was founded in 1909 by the University of Paris and the Pasteur Institute.",
    "Irene Joliot-Curie and Frederic Joliot discovered artificial radioactivity in 1934.",
    "Polonium is named after Poland, the country where Marie Curie was born.",
]


@pytest.fixture
async def writers(tmp_path):
    """The embeddings service and both writers (by kind), with the embeddings requests each writer made."""
    backend = open_backend("memory")
    flow = f"w{uuid.uuid4().hex[:8]}"
    graph = open_vector_index("sqlite", kind="graph", home=tmp_path)
    document = open_vector_index("sqlite", kind="document", home=tmp_path)
    procs = [EmbeddingsService(backend=backend, flow=flow),
             GraphEmbeddingsWriter(backend=backend, flow=flow, vector_index=graph),
             DocumentEmbeddingsWriter(backend=backend, flow=flow, vector_index=document)]
    requests: dict[str, list[list[str]]] = {"graph": [], "document": []}
    for writer in procs[1:]:
        def counting(texts, writer=writer, original=writer.embed):
            requests[writer.kind].append(list(texts))
            return original(texts)
        writer.embed = counting
    for p in procs:
        await p.start()
    progress = await backend.subscribe(progress_queue(), f"t-{uuid.uuid4().hex[:8]}", shared=False)
    try:
        yield backend, flow, graph, document, requests, progress, {w.kind: w for w in procs[1:]}
    finally:
        await progress.close()
        for p in reversed(procs):
            await p.stop()
        graph.close()
        document.close()
        await backend.close()


async def _until(check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def _send(backend, queue: str, messages: list) -> None:
    producer = await backend.create_producer(queue)
    try:
        for m in messages:
            await producer.send(encode(m))
    finally:
        await producer.close()


def _chunk(i: int, text: str, chunk_id: str | None = None) -> Chunk:
    return Chunk(metadata=Metadata(id=f"urn:c:{i}", root="urn:doc:1", user=USER, collection=COLLECTION),
                 document_id="urn:doc:1", page_id="urn:page:1", chunk_id=chunk_id or f"urn:chunk:{i}",
                 chunk_index=i, text=text)


async def _progress_items(progress, stage: str, n: int) -> set[str]:
    items: set[str] = set()
    while len(items) < n:
        msg = await progress.receive(timeout=60)
        await progress.ack(msg)
        ev = decode(IngestProgress, msg.data)
        if ev.stage == stage:
            items.add(ev.item_id)
    return items


async def _mention(backend, flow: str, progress, n: int, entity, context: str) -> None:
    """Send chunk ``n``'s extraction naming ``entity`` (Marie Curie) with ``context``; wait until it is stored."""
    await _send(backend, flow_queue("entity-contexts", flow), [EntityContexts(
        metadata=Metadata(id=f"urn:chunk:{n}", root="urn:doc:a", user=USER, collection=COLLECTION),
        chunk_id=f"urn:chunk:{n}", entities=[EntityContext(entity, "Marie Curie", context)])])
    assert await _progress_items(progress, "graph-embedded", 1) == {f"urn:chunk:{n}"}


async def test_chunks_that_arrive_together_share_a_request_and_get_their_own_vectors(writers):
    backend, flow, _graph, document, requests, progress, _procs = writers
    await _send(backend, flow_queue("chunks", flow), [_chunk(i, t) for i, t in enumerate(TEXTS)])
    done = await _progress_items(progress, "doc-embedded", len(TEXTS))
    assert done == {f"urn:chunk:{i}" for i in range(len(TEXTS))}
    assert document.index_info(USER, COLLECTION).count == len(TEXTS)
    assert sorted(t for r in requests["document"] for t in r) == sorted(TEXTS)
    assert len(requests["document"]) < len(TEXTS)  # batched, not one request per chunk
    alone = LocalEmbedder(cache_size=0, workers=1)
    for i, text in enumerate(TEXTS):  # the vector each chunk would get on its own
        hit = document.search(USER, COLLECTION, alone.model_id, alone.embed([text])[0], limit=1)[0]
        assert (hit.id, hit.label, hit.document_id) == (f"urn:chunk:{i}", f"Chunk {i}", "urn:doc:1")
        assert hit.score == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("chunk_id, document_id, reason, embedded_with_them", [
    ("urn:chunk:" + "x" * 2000, "urn:doc:1", "longer than 1024", False),  # refused by the batch's look-up
    ("urn:chunk:9", "urn:doc:\x01", "control character", True),  # refused by the write, after embedding
], ids=["bad-id", "bad-document-id"])
async def test_a_bad_message_is_dead_lettered_alone_and_its_batch_neighbours_are_stored(
        writers, chunk_id, document_id, reason, embedded_with_them):
    backend, flow, _graph, document, requests, progress, _procs = writers
    queue = flow_queue("chunks", flow)
    dlq = await backend.subscribe(dead_letter_queue(queue), f"inspect-{uuid.uuid4().hex[:8]}", shared=False)
    try:
        chunks = [_chunk(i, t) for i, t in enumerate(TEXTS[:4])]
        bad = "a chunk whose id no index accepts"
        chunks.insert(2, replace(_chunk(9, bad, chunk_id=chunk_id), document_id=document_id))
        await _send(backend, queue, chunks)
        dead = await dlq.receive(timeout=60)
        await dlq.ack(dead)
        assert decode(Chunk, dead.data).chunk_index == 9
        assert reason in dead.properties["dlq-reason"]
        assert await _progress_items(progress, "doc-embedded", 4) == {f"urn:chunk:{i}" for i in range(4)}
        assert document.index_info(USER, COLLECTION).count == 4
        # when its look-up passed, it was embedded with good ones (their batch failed at the write)
        assert any(bad in r and len(r) > 1 for r in requests["document"]) == embedded_with_them
        with pytest.raises(ReceiveTimeout):
            await dlq.receive(timeout=0.3)
    finally:
        await dlq.close()


async def test_entities_keep_one_by_one_semantics_with_each_text_embedded_once(writers):
    backend, flow, graph, _document, requests, progress, _procs = writers
    curie, polonium = iri("urn:e:marie-curie"), iri("urn:e:polonium")

    def contexts(n: int, root: str, entities: list[EntityContext]) -> EntityContexts:
        return EntityContexts(metadata=Metadata(id=f"urn:chunk:{n}", root=root, user=USER, collection=COLLECTION),
                              chunk_id=f"urn:chunk:{n}", entities=entities)

    await _send(backend, flow_queue("entity-contexts", flow), [
        contexts(0, "urn:doc:a", [EntityContext(curie, "Marie Curie", "Marie Curie"),
                                  EntityContext(polonium, "polonium", "polonium")]),
        contexts(1, "urn:doc:a", [EntityContext(curie, "Marie Curie", "Marie Curie")]),
        contexts(2, "urn:doc:b", [EntityContext(curie, "Marie Curie", "a physicist and chemist"),
                                  EntityContext(None, "no entity", "skipped")]),
        contexts(3, "urn:doc:b", []),
    ])
    assert await _progress_items(progress, "graph-embedded", 4) == {f"urn:chunk:{n}" for n in range(4)}
    assert graph.index_info(USER, COLLECTION).count == 2
    sent = [t for r in requests["graph"] for t in r]
    # "Marie Curie" may be superseded by the later context before it is embedded (same batch)
    assert {"a physicist and chemist", "polonium"} <= set(sent) <= {"Marie Curie", "a physicist and chemist",
                                                                    "polonium"}
    for r in requests["graph"]:
        assert len(r) == len(set(r))  # a text is sent once per request
    alone = LocalEmbedder(cache_size=0, workers=1)
    # The entity's longest definition wins for a repeated id (see the next test); an entity's vector names no
    # document (entities belong to the collection's graph).
    hit = graph.search(USER, COLLECTION, alone.model_id, alone.embed(["a physicist and chemist"])[0], limit=1)[0]
    assert (hit.id, hit.label, hit.document_id) == ("urn:e:marie-curie", "Marie Curie", "")
    assert hit.score == pytest.approx(1.0, abs=1e-6)


async def test_a_vector_stored_from_the_same_text_is_not_written_again_while_it_is_stored(writers):
    """An entity named in many chunks is embedded and written once; once its vector is gone (a document
    removal), the next mention writes it again; another text for it is written at once."""
    backend, flow, graph, _document, requests, progress, _procs = writers
    curie = iri("urn:e:marie-curie")

    async def mention(n: int, context: str) -> None:
        await _mention(backend, flow, progress, n, curie, context)

    def embedded() -> list[str]:
        return [t for r in requests["graph"] for t in r]

    await mention(0, "Marie Curie")
    await mention(1, "Marie Curie")
    assert embedded() == ["Marie Curie"] and graph.existing_ids(USER, COLLECTION, [curie.value]) == {curie.value}
    assert graph.delete_ids(USER, COLLECTION, [curie.value]) == 1
    await mention(2, "Marie Curie")
    assert embedded() == ["Marie Curie"] * 2 and graph.existing_ids(USER, COLLECTION, [curie.value]) == {curie.value}
    await mention(3, "a physicist and chemist")
    await mention(4, "a physicist and chemist")
    assert embedded() == ["Marie Curie"] * 2 + ["a physicist and chemist"]
    await mention(5, "Curie")  # a shorter definition than the stored one: neither embedded nor written
    assert embedded() == ["Marie Curie"] * 2 + ["a physicist and chemist"]
    alone = LocalEmbedder(cache_size=0, workers=1)
    hit = graph.search(USER, COLLECTION, alone.model_id, alone.embed(["a physicist and chemist"])[0], limit=1)[0]
    assert hit.id == curie.value and hit.score == pytest.approx(1.0, abs=1e-6)


async def test_an_entity_keeps_the_vector_of_its_longest_definition_whatever_order_they_arrive_in(writers):
    """Two loads of the same chunks in opposite orders store the same entity vectors: the longest definition's
    (for definitions of one length, the same one of them), so a query picks the same seeds from both."""
    backend, flow, graph, _document, _requests, progress, _procs = writers
    curie, radon = "urn:e:marie-curie", "urn:e:radon"
    definitions = {curie: ["Marie Curie", "a physicist and chemist", "the discoverer of polonium"],
                   radon: ["a radioactive noble gas", "a heavy radioactive gas"]}  # the two of radon: same length
    vectors = {}
    for collection, order in (("forwards", 1), ("backwards", -1)):
        for n in range(3)[::order]:  # one message at a time, so arrival order is the order sent
            entities = [EntityContext(iri(e), e, texts[n]) for e, texts in definitions.items() if n < len(texts)]
            await _send(backend, flow_queue("entity-contexts", flow), [EntityContexts(
                metadata=Metadata(id=f"urn:chunk:{n}", root="urn:doc:a", user=USER, collection=collection),
                chunk_id=f"urn:chunk:{n}", entities=entities)])
            assert await _progress_items(progress, "graph-embedded", 1) == {f"urn:chunk:{n}"}
        vectors[collection] = _similarities(graph, collection, ["the discoverer of polonium", "a radioactive noble gas",
                                                                "a heavy radioactive gas"])
    assert vectors["forwards"] == vectors["backwards"]
    forwards = vectors["forwards"]
    assert forwards[("the discoverer of polonium", curie)] == pytest.approx(1.0, abs=1e-6)
    assert max(forwards[(text, radon)] for text in ("a radioactive noble gas", "a heavy radioactive gas")) \
        == pytest.approx(1.0, abs=1e-6)


async def test_a_writer_started_afresh_does_not_store_again_what_the_index_holds(writers):
    """Each vector is stored with its source mark, so writers that start afresh (a restart, a replica, the next
    ``tg-load-document`` run) neither embed a chunk stored from the same text again nor replace an entity's longer
    definition with a shorter one; what is new is still written."""
    backend, flow, graph, document, _requests, progress, procs = writers
    curie = iri("urn:e:marie-curie")

    async def mention(n: int, context: str) -> None:
        await _mention(backend, flow, progress, n, curie, context)

    async def chunk(text: str) -> None:
        await _send(backend, flow_queue("chunks", flow), [_chunk(0, text)])
        assert await _progress_items(progress, "doc-embedded", 1) == {"urn:chunk:0"}

    await chunk(TEXTS[0])
    await mention(0, "the discoverer of polonium")
    for writer in procs.values():
        await writer.stop()
    fresh = [GraphEmbeddingsWriter(backend=backend, flow=flow, vector_index=graph),
             DocumentEmbeddingsWriter(backend=backend, flow=flow, vector_index=document)]
    requests: dict[str, list[str]] = {"graph": [], "document": []}
    for writer in fresh:
        def counting(texts, writer=writer, original=writer.embed):
            requests[writer.kind] += texts
            return original(texts)
        writer.embed = counting
        await writer.start()
    try:
        await chunk(TEXTS[0])  # the same text: not embedded again
        await mention(1, "Marie Curie")  # shorter than the stored definition: neither embedded nor written
        assert requests == {"graph": [], "document": []}
        await chunk(TEXTS[1])  # new text for the chunk: the later message wins
        await mention(2, "the discoverer of polonium and radium")  # longer: replaces the stored vector
        assert requests == {"graph": ["the discoverer of polonium and radium"], "document": [TEXTS[1]]}
        alone = LocalEmbedder(cache_size=0, workers=1)
        for index, item, text in ((graph, curie.value, "the discoverer of polonium and radium"),
                                  (document, "urn:chunk:0", TEXTS[1])):
            hit = index.search(USER, COLLECTION, alone.model_id, alone.embed([text])[0], limit=1)[0]
            assert hit.id == item and hit.score == pytest.approx(1.0, abs=1e-6)
    finally:
        for writer in fresh:
            await writer.stop()


def _similarities(index, collection: str, probes: list[str]) -> dict[tuple[str, str], float]:
    """(probe text, id) -> cosine similarity of the id's stored vector to the probe's: the same for two
    collections whose vectors are the same."""
    alone = LocalEmbedder(cache_size=0, workers=1)
    return {(probe, hit.id): round(hit.score, 6) for probe, vector in zip(probes, alone.embed(probes), strict=True)
            for hit in index.search(USER, collection, alone.model_id, vector, limit=10)}


@pytest.mark.parametrize("kind, first, second, kept", [
    ("document", "first context", "a physicist and chemist", "a physicist and chemist"),  # the later message
    ("graph", "the discoverer of polonium and radium", "a physicist", "the discoverer of polonium and radium"),
], ids=["document-later-message-wins", "graph-longest-definition-wins"])
async def test_a_batch_is_embedded_while_the_one_before_it_is_but_stored_after_it(writers, kind, first, second, kept):
    """Two batches in flight: the second is embedded without waiting for the first, and stored after it, so for
    an id in both the later message still wins, as one by one, even when its vectors are ready first; an entity
    keeps its longest definition even when the batch holding it stores first."""
    backend, flow, graph, document, _requests, progress, procs = writers
    writer, index = procs[kind], {"graph": graph, "document": document}[kind]
    loop = asyncio.get_running_loop()
    calls: list[tuple[str, float, float]] = []  # (first text, embedding started, embedding done)
    original = writer.embed

    async def slow_first(texts):
        start = loop.time()
        if first in texts:
            await asyncio.sleep(0.5)
        result = await original(texts)
        calls.append((texts[0], start, loop.time()))
        return result

    writer.embed = slow_first
    item = "urn:e:marie-curie" if kind == "graph" else "urn:chunk:0"

    def message(n: int, text: str):
        if kind == "document":
            return _chunk(0, text)
        return EntityContexts(metadata=Metadata(id=f"urn:chunk:{n}", root="urn:doc:a", user=USER,
                                                collection=COLLECTION),
                              chunk_id=f"urn:chunk:{n}", entities=[EntityContext(iri(item), "Marie Curie", text)])

    queue = flow_queue("entity-contexts" if kind == "graph" else "chunks", flow)
    await _send(backend, queue, [message(0, first)])
    await asyncio.sleep(0.1)  # the first batch is being embedded
    await _send(backend, queue, [message(1, second)])
    await _progress_events(progress, "graph-embedded" if kind == "graph" else "doc-embedded", 2)
    (first_text, first_start, first_done), (second_text, second_start, second_done) = sorted(calls, key=lambda c: c[1])
    assert (first_text, second_text) == (first, second)
    assert second_start < first_done and second_done < first_done  # embedded meanwhile, and ready first
    alone = LocalEmbedder(cache_size=0, workers=1)
    hit = index.search(USER, COLLECTION, alone.model_id, alone.embed([kept])[0], limit=1)[0]
    assert hit.id == item and hit.score == pytest.approx(1.0, abs=1e-6)


async def _progress_events(progress, stage: str, n: int) -> None:
    """Wait for ``n`` progress events of ``stage`` (of any items)."""
    seen = 0
    while seen < n:
        msg = await progress.receive(timeout=60)
        await progress.ack(msg)
        seen += decode(IngestProgress, msg.data).stage == stage


class SlowEmbedder:
    """An embedder that takes ``seconds`` per call, so calls that overlap show in the elapsed time."""

    model_id = "slow-test-embedder"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    @property
    def dimension(self) -> int:
        return 3

    def embed(self, texts: list[str]) -> list[list[float]]:
        time.sleep(self.seconds)
        return [[1.0, 0.0, 0.0] for _ in texts]


async def test_the_embeddings_service_answers_several_requests_at_once():
    """The two writers' batches reach the embeddings service together; with one handler one waited for the other."""
    backend = open_backend("memory")
    flow = f"e{uuid.uuid4().hex[:8]}"
    service = EmbeddingsService(backend=backend, flow=flow, embedder=SlowEmbedder(0.5))
    client = RequestResponseClient(backend, "embeddings", request_queue("embeddings", flow),
                                   response_queue("embeddings", flow), EmbeddingsRequest, EmbeddingsResponse,
                                   timeout=30)
    await service.start()
    await client.start()
    try:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        answers = await asyncio.gather(*(client.request(EmbeddingsRequest(texts=[f"text {n}"])) for n in range(4)))
        elapsed = loop.time() - t0
        assert [(a.model, len(a.vectors)) for a in answers] == [("slow-test-embedder", 1)] * 4
        assert elapsed < 1.5, f"four 0.5 s requests took {elapsed:.2f} s: they ran one after another"
    finally:
        await client.stop()
        await service.stop()
        await backend.close()
