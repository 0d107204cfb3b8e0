"""Ingestion with extraction provenance, on both deployments.

Every extracted edge resolves through ``tg:contains`` to its chunk, page and document;
re-loading a document is idempotent; bad documents are refused whole while the pipeline
keeps serving others; removing a document removes its chunks, provenance, vectors and the
knowledge only it contained.
"""

from __future__ import annotations

import uuid

import pytest

from trustgraph_base.processor import ServiceError
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance import uris
from trustgraph_base.schema import IRI, TRIPLE, DocumentMetadata, LibrarianRequest, Term, TriplePattern
from trustgraph_flow.embedded import INGEST

pytestmark = pytest.mark.timeout(600)

TEXT = b"""# Lise Meitner

Lise Meitner was born in Vienna. Lise Meitner worked with Otto Hahn in Berlin.
Otto Hahn discovered nuclear fission in 1938. Lise Meitner explained nuclear fission with Otto Frisch.
Meitnerium is named after Lise Meitner.
"""

OTHER = b"""Otto Hahn discovered nuclear fission in 1938. Otto Hahn won the Nobel Prize in Chemistry in 1944.
"""


def store_of(stack, attr):
    return next(s for s in stack.stores if hasattr(s, attr))


async def load(stack, user, collection, docs):
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.load import load_documents

    async with Connection.attach(stack, timeout=120) as conn:
        await load_documents(conn, user, collection, docs, idle_timeout=120, show=False)
    await stack.wait_idle()


def source_graph_size(triples, user, collection):
    return sum(len(b) for b in triples.iter_query(user, collection, TriplePattern(g=ns.GRAPH_SOURCE)))


async def test_every_edge_resolves_to_chunk_page_document(deployment):
    user, coll = deployment.user, f"ingest-{uuid.uuid4().hex[:6]}"
    doc_id = "https://trustgraph.ai/doc/test-meitner"
    stack = await deployment.start(tuple(dict.fromkeys(INGEST)), llm="extractive")
    try:
        await load(stack, user, coll, [(doc_id, "Lise Meitner", "text/markdown", TEXT)])
        triples = store_of(stack, "list_traces")
        knowledge = [t for b in triples.iter_query(user, coll, TriplePattern(g="")) for t in b]
        edges = [t for t in knowledge if t.p.value != ns.RDFS_LABEL]
        assert len(edges) >= 5
        contains = Term(IRI, ns.TG_CONTAINS)
        for e in edges:
            found = triples.query(user, coll, TriplePattern(p=contains, o=Term(TRIPLE, triple=e), g=ns.GRAPH_SOURCE))
            assert found, f"edge {e} has no subgraph"
            sg = found[0].s.value
            chunk = triples.query(user, coll, TriplePattern(s=Term(IRI, sg), p=Term(IRI, ns.PROV_WAS_DERIVED_FROM),
                                                            g=ns.GRAPH_SOURCE))[0].o.value
            page = triples.query(user, coll, TriplePattern(s=Term(IRI, chunk), p=Term(IRI, ns.PROV_WAS_DERIVED_FROM),
                                                           g=ns.GRAPH_SOURCE))[0].o.value
            doc = triples.query(user, coll, TriplePattern(s=Term(IRI, page), p=Term(IRI, ns.PROV_WAS_DERIVED_FROM),
                                                          g=ns.GRAPH_SOURCE))[0].o.value
            assert doc == doc_id and page == uris.page_uri(doc_id, 1) and chunk.startswith("urn:chunk:")
            types = {t.o.value for t in triples.query(user, coll, TriplePattern(s=Term(IRI, chunk), g=ns.GRAPH_SOURCE))
                     if t.p.value == ns.RDF_TYPE}
            assert ns.TG_CHUNK_TYPE in types
        # activity/agent records name the extractor honestly
        models = {t.o.value for b in triples.iter_query(user, coll, TriplePattern(p=Term(IRI, ns.TG_LLM_MODEL),
                                                                                  g=ns.GRAPH_SOURCE)) for t in b}
        assert models == {"extractive"}

        # re-loading the same document is idempotent
        before = source_graph_size(triples, user, coll), len(knowledge)
        await load(stack, user, coll, [(doc_id, "Lise Meitner", "text/markdown", TEXT)])
        after = (source_graph_size(triples, user, coll),
                 sum(len(b) for b in triples.iter_query(user, coll, TriplePattern(g=""))))
        assert after == before

        # removing it removes chunks, provenance, chunk vectors and the knowledge only it held,
        # while a fact also extracted from another document stays
        other_id = "https://trustgraph.ai/doc/test-hahn"
        await load(stack, user, coll, [(other_id, "Otto Hahn", "text/plain", OTHER)])
        from trustgraph_cli.connection import Connection

        async with Connection.attach(stack) as conn:
            await conn.request("librarian", LibrarianRequest(operation="remove-document", user=user,
                                                             collection=coll, document_id=doc_id))
        await stack.wait_idle()
        librarian = store_of(stack, "stream_content")
        assert doc_id not in {m.id for m in librarian.list_documents(user, coll)}
        remaining_source = [t for b in triples.iter_query(user, coll, TriplePattern(g=ns.GRAPH_SOURCE)) for t in b]
        assert not [t for t in remaining_source if t.s.value == doc_id or t.o.value == doc_id]
        assert not [t for t in remaining_source if t.s.value.startswith("urn:chunk:") and
                    t.o.value == uris.page_uri(doc_id, 1)]
        kept = [t for b in triples.iter_query(user, coll, TriplePattern(g="")) for t in b]
        labels = {t.s.value: t.o.value for t in kept if t.p.value == ns.RDFS_LABEL}
        assert any(labels.get(t.s.value) == "Otto Hahn" and "fission" in labels.get(t.o.value, "")
                   for t in kept if t.o.type == IRI), "the shared fact must survive"
        assert not [t for t in kept if labels.get(t.s.value) == "Meitnerium"], "knowledge only in the removed doc"
        docs_index = next(s for s in stack.stores if getattr(s, "kind", "") == "document")
        info = docs_index.index_info(user, coll)
        assert info is not None and info.count >= 1  # the other document's chunk vectors remain
    finally:
        await stack.stop()


@pytest.mark.parametrize("name,kind,content,reason", [
    ("empty.txt", "text/plain", b"", "empty"),
    ("noise.txt", "text/plain", bytes(range(256)) * 40, "binary"),
    ("damaged.txt", "text/plain", "café crème".encode() + b" \xff\xfe", "UTF-8"),
    ("broken.pdf", "application/pdf", b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog", "PDF"),
    ("thing.xyz", "application/x-unknown", b"hello", "kind"),
    ("image.txt", "", b"\x89PNG\r\n\x1a\n" + bytes(64), "PNG image"),
    ("slides.pptx", "", b"PK\x03\x04 not really a presentation", "damaged ZIP"),
])
async def test_bad_documents_are_refused_whole(deployment, name, kind, content, reason):
    user, coll = deployment.user, f"bad-{uuid.uuid4().hex[:6]}"
    stack = await deployment.start(tuple(dict.fromkeys(INGEST)), llm="extractive")
    try:
        from trustgraph_cli.connection import Connection

        doc_id = f"https://trustgraph.ai/doc/bad-{uuid.uuid4().hex[:6]}"
        async with Connection.attach(stack) as conn:
            with pytest.raises(ServiceError) as err:
                await conn.request("librarian", LibrarianRequest(
                    operation="add-document", user=user, collection=coll, document_id=doc_id, content=content,
                    document_metadata=DocumentMetadata(id=doc_id, kind=kind, title=name)))
        assert reason.lower() in str(err.value).lower()
        librarian = store_of(stack, "stream_content")
        assert doc_id not in {m.id for m in librarian.list_documents(user, coll)}
        # the pipeline keeps working for other documents
        await load(stack, user, coll, [("https://trustgraph.ai/doc/good-" + uuid.uuid4().hex[:6], "Good",
                                        "text/plain", OTHER)])
        triples = store_of(stack, "list_traces")
        assert triples.query(user, coll, TriplePattern(g="", limit=1))
    finally:
        await stack.stop()


_SYLLABLES = ("ka", "lo", "mi", "ne", "ra", "su", "ti", "vo", "ze", "pa")


def _name(i: int) -> str:
    """A made-up proper name per number (the extractor takes names, not numbers, for entities)."""
    return "".join(_SYLLABLES[int(d)] for d in str(i)).capitalize()


def tiny_documents(n: int, tag: str) -> list[tuple[str, str, str, bytes]]:
    """``n`` one-chunk documents, each naming its own person and mineral."""
    return [(f"https://trustgraph.ai/doc/{tag}-{i}", f"{tag} {i}", "text/plain",
             f"{_name(i)} Mineva discovered the mineral {_name(i).lower()}ite. {_name(i)} Mineva worked in "
             f"{_name(i % 7 + 3)}.\n".encode()) for i in range(n)]


def assert_fully_stored(stack, user, coll, doc_ids):
    """Every chunk of every document has its Subgraph, its vector, and a vector for each of its entities."""
    librarian = store_of(stack, "stream_content")
    triples = store_of(stack, "list_traces")
    docs_index = next(s for s in stack.stores if getattr(s, "kind", "") == "document")
    graph_index = next(s for s in stack.stores if getattr(s, "kind", "") == "graph")
    chunks = [c.id for d in doc_ids for p in librarian.list_children(user, coll, d)
              for c in librarian.list_children(user, coll, p.id)]
    assert len(chunks) >= len(doc_ids)
    assert docs_index.existing_ids(user, coll, chunks) == set(chunks)
    entities = set()
    for c in chunks:
        own = triples.query(user, coll, TriplePattern(s=Term(IRI, uris.subgraph_uri(c)), g=ns.GRAPH_SOURCE))
        assert any(t.p.value == ns.PROV_WAS_DERIVED_FROM and t.o.value == c for t in own), f"{c} not extracted"
        edges = [t.o.triple for t in own if t.p.value == ns.TG_CONTAINS]
        entities |= {x.value for e in edges for x in (e.s, e.o) if x.type == IRI} - {e.p.value for e in edges}
    assert entities and graph_index.existing_ids(user, coll, sorted(entities)) == entities


@pytest.mark.timeout(1200)
async def test_a_load_of_many_documents_in_one_call_finishes(deployment):
    """200 documents in one ``load_documents`` call: on Pulsar the progress topic is non-persistent, and a
    loader that read no event until its 400th request was sent lost all but the first thousand and waited."""
    user, coll = deployment.user, f"many-{uuid.uuid4().hex[:6]}"
    docs = tiny_documents(200, f"many-{uuid.uuid4().hex[:6]}")
    stack = await deployment.start(tuple(dict.fromkeys(INGEST)), llm="extractive")
    try:
        await load(stack, user, coll, docs)
        librarian = store_of(stack, "stream_content")
        assert {m.id for m in librarian.list_documents(user, coll, limit=1000)} == {d[0] for d in docs}
        assert_fully_stored(stack, user, coll, [d[0] for d in docs])
    finally:
        await stack.stop()


async def test_a_load_finishes_when_progress_events_are_lost(deployment):
    """Progress events are best-effort: with every ``graph-embedded`` event and the ``decoded`` event of every
    other document lost on the way, the loader confirms from the stores that the documents are done."""
    from lossy_bus import LossyBackend

    from trustgraph_base.codec import decode
    from trustgraph_base.schema import IngestProgress
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.load import load_documents
    from trustgraph_flow.common.services import progress_queue
    from trustgraph_flow.embedded import start_embedded

    user, coll = deployment.user, f"lossy-{uuid.uuid4().hex[:6]}"
    docs = tiny_documents(6, f"lossy-{uuid.uuid4().hex[:6]}")
    odd = {d[0] for d in docs[1::2]}

    def lost(data: bytes) -> bool:
        ev = decode(IngestProgress, data)
        return ev.stage == "graph-embedded" or (ev.stage == "decoded" and ev.document_id in odd)

    backend = LossyBackend(deployment.backend(), progress_queue(), lost)
    stack = await start_embedded(only=tuple(dict.fromkeys(INGEST)), llm="extractive", backend=backend,
                                 flow=f"f{uuid.uuid4().hex[:8]}", **deployment.store_kwargs())
    try:
        async with Connection.attach(stack, timeout=120) as conn:
            await load_documents(conn, user, coll, docs, idle_timeout=60, show=False)
        assert backend.dropped >= len(docs)
        assert_fully_stored(stack, user, coll, [d[0] for d in docs])
    finally:
        await stack.stop()


async def test_only_events_about_the_load_keep_it_waiting(deployment):
    """A load whose documents make no progress fails after its idle time-out (exit 3), however many events
    other loads into the same collection send meanwhile."""
    import asyncio

    from trustgraph_base.codec import encode
    from trustgraph_base.schema import IngestProgress
    from trustgraph_cli.common import CliError
    from trustgraph_cli.load import ProgressFeed, follow_progress
    from trustgraph_flow.common.services import progress_queue

    user, coll = deployment.user, f"idle-{uuid.uuid4().hex[:6]}"
    backend = deployment.backend()
    producer = await backend.create_producer(progress_queue())

    async def other_load() -> None:
        for i in range(10_000):
            await producer.send(encode(IngestProgress(user=user, collection=coll, document_id="urn:other",
                                                      stage="extracted", item_id=f"urn:chunk:{i}")))
            await asyncio.sleep(0.05)

    noise = asyncio.create_task(other_load())
    try:
        async with ProgressFeed(backend) as feed:
            with pytest.raises(CliError) as err:
                await asyncio.wait_for(follow_progress(feed, user, coll, {"urn:stuck": "stuck.txt"}, idle_timeout=2,
                                                       show=False), 60)
        assert err.value.exit_code == 3 and "stuck.txt" in err.value.message
    finally:
        noise.cancel()
        await asyncio.gather(noise, return_exceptions=True)
        await producer.close()
        await backend.close()


async def test_ingest_status_says_how_far_each_document_got(deployment):
    """The librarian's ``ingest-status`` reads a document's progress from the stores, vectors included."""
    from trustgraph_cli.connection import Connection

    user, coll = deployment.user, f"status-{uuid.uuid4().hex[:6]}"
    (stored_id, title, kind, content), (loaded_id, *_rest) = docs = tiny_documents(2, f"st-{uuid.uuid4().hex[:6]}")
    stack = await deployment.start(tuple(dict.fromkeys(INGEST)), llm="extractive")
    try:
        await load(stack, user, coll, docs[1:])
        async with Connection.attach(stack) as conn:
            await conn.request("librarian", LibrarianRequest(
                operation="add-document", user=user, collection=coll, document_id=stored_id, content=content,
                document_metadata=DocumentMetadata(id=stored_id, kind=kind, title=title)))

            async def status():
                resp = await conn.request("librarian", LibrarianRequest(
                    operation="ingest-status", user=user, collection=coll,
                    document_ids=[stored_id, loaded_id, "https://trustgraph.ai/doc/never-stored"]))
                return resp.statuses

            not_processed, loaded, unknown = await status()
            assert (not_processed.found, not_processed.pages, not_processed.complete) == (True, 0, False)
            assert (unknown.found, unknown.complete) == (False, False)
            librarian = store_of(stack, "stream_content")
            chunks = [c.id for p in librarian.list_children(user, coll, loaded_id)
                      for c in librarian.list_children(user, coll, p.id)]
            assert loaded.complete and (loaded.pages, loaded.pages_chunked) == (1, 1)
            assert loaded.chunks == loaded.extracted == loaded.chunk_vectors == loaded.entities_embedded == len(chunks)
            assert loaded.extracted_triples > 0

            # a missing chunk vector, then a missing entity vector: no longer complete
            docs_index = next(s for s in stack.stores if getattr(s, "kind", "") == "document")
            graph_index = next(s for s in stack.stores if getattr(s, "kind", "") == "graph")
            docs_index.delete_ids(user, coll, chunks[:1])
            _, loaded, _ = await status()
            assert not loaded.complete and loaded.chunk_vectors == len(chunks) - 1
            triples = store_of(stack, "list_traces")
            edge = next(t.o.triple for t in triples.query(user, coll, TriplePattern(
                s=Term(IRI, uris.subgraph_uri(chunks[0])), p=Term(IRI, ns.TG_CONTAINS), g=ns.GRAPH_SOURCE))
                if t.o.triple.p.value != ns.RDFS_LABEL)
            assert graph_index.delete_ids(user, coll, [edge.s.value]) == 1
            _, loaded, _ = await status()
            assert not loaded.complete and loaded.entities_embedded == len(chunks) - 1
    finally:
        await stack.stop()
