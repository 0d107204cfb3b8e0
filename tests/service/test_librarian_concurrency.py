"""The librarian answers requests side by side, and a removal runs alone.

The real librarian service on the in-process bus, over real SQLite stores; the librarian store
is wrapped so that storing a chunk takes a moment and every store call is recorded with its start
and end.  Chunk writes of one page overlap (the chunker sends them together); a removal waits for
the writes in progress and holds back the ones sent after it until it is done.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from trustgraph_base.processor import RequestResponseClient
from trustgraph_base.pubsub import open_backend, request_queue, response_queue
from trustgraph_base.schema import DocumentMetadata, LibrarianRequest, LibrarianResponse
from trustgraph_base.schema.library import CHUNK, PAGE
from trustgraph_base.store.librarian import open_librarian_store
from trustgraph_base.store.triples import open_triples_store
from trustgraph_base.store.vectors import open_vector_index
from trustgraph_flow.librarian.service import LibrarianService

pytestmark = [pytest.mark.service, pytest.mark.timeout(120)]

USER, COLLECTION = "alice", "library"
DOC, PAGE_ID = "urn:doc:1", "urn:doc:1/p1"
SLOW_SECONDS = 0.4


class RecordingStore:
    """A librarian store whose chunk writes take :data:`SLOW_SECONDS`; ``log`` has ``(what, id, start|end)``."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.backend = inner.backend
        self.log: list[tuple[str, str, str]] = []
        self.slow = False

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def add_child(self, user, collection, parent_id, meta, content):
        self.log.append(("add", meta.id, "start"))
        if self.slow:
            time.sleep(SLOW_SECONDS)
        try:
            return self.inner.add_child(user, collection, parent_id, meta, content)
        finally:
            self.log.append(("add", meta.id, "end"))

    def remove_document(self, user, collection, document_id, include_children=True):
        self.log.append(("remove", document_id, "start"))
        try:
            return self.inner.remove_document(user, collection, document_id, include_children)
        finally:
            self.log.append(("remove", document_id, "end"))


@pytest.fixture
async def librarian(tmp_path):
    """The librarian service (with a recording store, a source document and its page stored) and a client."""
    backend = open_backend("memory")
    flow = f"l{uuid.uuid4().hex[:8]}"
    store = RecordingStore(open_librarian_store("sqlite", home=tmp_path))
    triples = open_triples_store("sqlite", home=tmp_path)
    indexes = [open_vector_index("sqlite", kind=kind, home=tmp_path) for kind in ("document", "graph")]
    service = LibrarianService(backend=backend, flow=flow, librarian_store=store, triples_store=triples,
                               document_index=indexes[0], graph_index=indexes[1])
    client = RequestResponseClient(backend, "librarian", request_queue("librarian", flow),
                                   response_queue("librarian", flow), LibrarianRequest, LibrarianResponse, timeout=30)
    await service.start()
    await client.start()
    try:
        await ask(client, LibrarianRequest(
            operation="add-document", user=USER, collection=COLLECTION, document_id=DOC, content=b"Polonium.\n",
            document_metadata=DocumentMetadata(id=DOC, kind="text/plain", title="doc")))
        await ask(client, child_request(PAGE_ID, DOC, PAGE))
        store.slow = True
        yield client, store
    finally:
        await client.stop()
        await service.stop()
        for s in (store.inner, triples, *indexes):
            s.close()
        await backend.close()


def child_request(child_id: str, parent_id: str, document_type: str = CHUNK) -> LibrarianRequest:
    return LibrarianRequest(operation="add-child-document", user=USER, collection=COLLECTION, document_id=parent_id,
                            content=b"Polonium.", document_metadata=DocumentMetadata(
                                id=child_id, kind="text/plain", parent_id=parent_id, document_type=document_type))


async def ask(client, request: LibrarianRequest, delay: float = 0.0) -> LibrarianResponse:
    await asyncio.sleep(delay)
    response = await client.request(request)
    assert response.error is None, response.error
    return response


async def test_the_chunks_of_a_page_are_stored_side_by_side(librarian):
    client, store = librarian
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await asyncio.gather(*(ask(client, child_request(f"{PAGE_ID}/c{n}", PAGE_ID)) for n in range(4)))
    elapsed = loop.time() - t0
    assert elapsed < 3 * SLOW_SECONDS, f"four {SLOW_SECONDS} s chunk writes took {elapsed:.2f} s: one after another"
    listed = await ask(client, LibrarianRequest(operation="list-children", user=USER, collection=COLLECTION,
                                                document_id=PAGE_ID))
    assert sorted(d.id for d in listed.document_metadatas) == [f"{PAGE_ID}/c{n}" for n in range(4)]


async def test_a_removal_waits_for_the_writes_in_progress_and_holds_back_later_ones(librarian):
    client, store = librarian
    store.slow = False
    await ask(client, child_request(f"{PAGE_ID}/c0", PAGE_ID))
    store.slow = True
    store.log.clear()
    await asyncio.gather(
        ask(client, child_request(f"{PAGE_ID}/c1", PAGE_ID)),
        ask(client, child_request(f"{PAGE_ID}/c2", PAGE_ID)),
        ask(client, LibrarianRequest(operation="remove-document", user=USER, collection=COLLECTION,
                                     document_id=f"{PAGE_ID}/c0"), delay=0.1),
        ask(client, child_request(f"{PAGE_ID}/c3", PAGE_ID), delay=0.2))
    position = {entry: n for n, entry in enumerate(store.log)}
    removal_start, removal_end = position[("remove", f"{PAGE_ID}/c0", "start")], position[
        ("remove", f"{PAGE_ID}/c0", "end")]
    assert position[("add", f"{PAGE_ID}/c1", "end")] < removal_start  # sent first: the removal waited for it
    assert position[("add", f"{PAGE_ID}/c2", "end")] < removal_start
    assert position[("add", f"{PAGE_ID}/c3", "start")] > removal_end  # sent during the removal: it waited
    assert removal_end == removal_start + 1  # nothing ran in the middle of the removal
