"""Real processors on a store whose data directory cannot be used (full, a file where a directory belongs).

On both buses such a failure is never a dead letter and a request gets an ``Error`` naming the
path.  The difference (``docs/guarantees.md``, "Messages"): over Pulsar the message waits in
the broker, retried with back-off, and is stored once there is space again; on the in-process
bus it lives only in memory, so the embedded stack fails at once (every processor stops taking
messages, :meth:`EmbeddedStack.wait_idle` and a connection raise the store error), and nothing
sent after the failed write is stored after it.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from storage_faults import fill, sqlite_full, tmpfs

from trustgraph_base.codec import encode
from trustgraph_base.processor import RequestResponseClient
from trustgraph_base.pubsub import ReceiveTimeout, dead_letter_queue, flow_queue, open_backend
from trustgraph_base.pubsub.topics import request_queue, response_queue
from trustgraph_base.schema import Metadata, Triple, TriplePattern, Triples, TriplesQueryRequest, iri, literal
from trustgraph_base.store.errors import StoreEnvironmentError
from trustgraph_base.store.triples import open_triples_store
from trustgraph_flow.common.services import SERVICES
from trustgraph_flow.embedded import start_embedded

BUSES = [
    pytest.param("memory", marks=pytest.mark.service, id="embedded"),
    pytest.param("pulsar", marks=pytest.mark.integration, id="pulsar"),
]
STORAGE = ("triples-write", "triples-query")


@pytest.fixture(params=BUSES)
def bus(request):
    """A function opening a new backend of the parametrised bus."""
    if request.param == "memory":
        return lambda: open_backend("memory")
    pulsar = request.getfixturevalue("pulsar_service")
    return lambda: open_backend("pulsar", url=pulsar.url, admin_url=pulsar.admin_url, nack_delay=0.2)


def _batch(name: str, n: int, size: int) -> Triples:
    return Triples(metadata=Metadata(id=f"urn:x:{name}", user="u", collection="c"),
                   triples=[Triple(iri(f"urn:x:{name}{i}"), iri("urn:x:p"), literal("v" * size + str(i)))
                            for i in range(n)])


def _stored(home, subject: str) -> int:
    store = open_triples_store("sqlite", home=home)
    try:
        return store.count("u", "c", TriplePattern(s=iri(subject)))
    finally:
        store.close()


def _errors_of(processor_id: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("tg_messages_total",
                                     {"processor": processor_id, "spec": "input", "outcome": "error"}) or 0.0


async def _no_dead_letter(stack, flow: str) -> None:
    dlq = await stack.backend.subscribe(dead_letter_queue(flow_queue("triples-store", flow)), "inspect",
                                        initial_position="earliest")
    try:
        with pytest.raises(ReceiveTimeout):
            await dlq.receive(timeout=1.0)
    finally:
        await dlq.close()


async def test_a_write_the_store_cannot_take_is_never_dead_lettered(bus, tmp_path):
    """Injected: the triple store's file may not grow (SQLite reports "database or disk is full")."""
    seed = open_triples_store("sqlite", home=tmp_path)
    seed.insert("u", "c", _batch("seed", 5, 10).triples)  # the file exists, with room in its pages
    seed.close()
    flow = f"f{uuid.uuid4().hex[:8]}"
    with sqlite_full(tmp_path):
        stack = await start_embedded(tmp_path, only=STORAGE, backend=bus(), flow=flow)
        try:
            dlq = await stack.backend.subscribe(dead_letter_queue(flow_queue("triples-store", flow)), "inspect")
            producer = await stack.backend.create_producer(flow_queue("triples-store", flow))
            await producer.send(encode(_batch("big", 200, 2000)))  # needs new pages
            await producer.send(encode(_batch("small", 1, 10)))  # would fit in the pages there are
            writer = stack.get("triples-write")
            if not stack.backend.durable:
                with pytest.raises(StoreEnvironmentError) as caught:
                    await asyncio.wait_for(stack.wait_idle(), 60)
                path = next((tmp_path / "triples").glob("*.sqlite"))
                assert str(caught.value) == f"no space left on {path}"
                assert stack.failure is caught.value and writer.environment_failure is not None
                assert all(p._halted for p in stack.processors)
            else:  # Pulsar: retried with back-off beyond max_redeliveries, like an outage
                before, deadline = _errors_of(writer.id), time.monotonic() + 120
                while _errors_of(writer.id) - before < 7 and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
                assert _errors_of(writer.id) - before >= 7
                assert writer.environment_failure is not None and stack.failure is None
            with pytest.raises(ReceiveTimeout):
                await dlq.receive(timeout=1.0)
            await dlq.close()
        finally:
            await stack.stop()
            await stack.backend.close()
    assert _stored(tmp_path, "urn:x:big0") == 0
    if not stack.backend.durable:
        assert _stored(tmp_path, "urn:x:small0") == 0  # nothing after the failed write was stored


async def test_writes_on_a_full_disk_wait_for_space_over_pulsar_and_fail_the_embedded_stack(bus, tmp_path):
    """A real full tmpfs: over Pulsar the batch waits in the broker and is stored when space is freed."""
    with tmpfs(tmp_path / "small", "4m") as small:
        seed = open_triples_store("sqlite", home=small)
        seed.insert("u", "c", _batch("seed", 5, 10).triples)
        seed.close()
        filler = fill(small)
        flow = f"f{uuid.uuid4().hex[:8]}"
        stack = await start_embedded(small, only=STORAGE, backend=bus(), flow=flow)
        try:
            producer = await stack.backend.create_producer(flow_queue("triples-store", flow))
            await producer.send(encode(_batch("big", 100, 2000)))
            writer = stack.get("triples-write")
            if not stack.backend.durable:
                with pytest.raises(StoreEnvironmentError, match=f"^no space left on {small}/triples/"):
                    await asyncio.wait_for(stack.wait_idle(), 60)
            else:
                before, deadline = _errors_of(writer.id), time.monotonic() + 120
                while _errors_of(writer.id) - before < 7 and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
                assert _errors_of(writer.id) - before >= 7  # more attempts than max_redeliveries
                filler.unlink()
                while _stored(small, "urn:x:big99") == 0 and time.monotonic() < deadline + 60:
                    await asyncio.sleep(0.5)
                assert _stored(small, "urn:x:big0") == 1 and _stored(small, "urn:x:big99") == 1
            await _no_dead_letter(stack, flow)
        finally:
            await stack.stop()
            await stack.backend.close()


async def test_a_request_on_a_store_that_cannot_exist_gets_an_error_naming_the_path(bus, tmp_path):
    flow = f"f{uuid.uuid4().hex[:8]}"
    stack = await start_embedded(tmp_path, only=STORAGE, backend=bus(), flow=flow)
    (tmp_path / "triples").write_text("a file where the store's directory belongs")
    service = SERVICES["triples"]
    client = RequestResponseClient(stack.backend, "triples", request_queue("triples", flow),
                                   response_queue("triples", flow), service.request, service.response, timeout=60)
    try:
        await client.start()
        reply = await client.request(TriplesQueryRequest(user="u", collection="c", s=iri("urn:x:s")))
        assert reply.error is not None and reply.error.type == "store-environment"
        assert reply.error.message.startswith(f"cannot use {tmp_path}/triples/")
        assert reply.error.message.endswith(f"{tmp_path}/triples is not a directory")
        assert reply.triples == []
        assert (stack.failure is not None) == (not stack.backend.durable)
    finally:
        await client.stop()
        await stack.stop()
        await stack.backend.close()


@pytest.mark.service
async def test_a_connection_fails_with_the_store_error_instead_of_waiting(tmp_path):
    """Embedded: the librarian cannot store the document; the request fails with the store's own error."""
    from trustgraph_base.schema import DocumentMetadata, LibrarianRequest
    from trustgraph_cli.connection import Connection

    (tmp_path / "librarian").write_text("a file where the store's directory belongs")
    stack = await start_embedded(tmp_path, only=("librarian",) + STORAGE)
    try:
        with pytest.raises(StoreEnvironmentError, match=f"{tmp_path}/librarian is not a directory"):
            async with Connection.attach(stack, timeout=600) as conn:
                await conn.request("librarian", LibrarianRequest(
                    operation="add-document", user="u", collection="c", document_id="urn:x:doc", content=b"text",
                    document_metadata=DocumentMetadata(id="urn:x:doc", kind="text/plain", title="doc")))
    finally:
        await stack.stop()
