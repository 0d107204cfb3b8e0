"""The ingestion pipeline services, each a thin wrapper over a pure function.

    librarian --document-load--> decoder --text-pages--> chunker --chunks--> kg-extract --triples-store-->
                                                                       \\--> document-embeddings-write
                                        kg-extract --entity-contexts--> graph-embeddings-write

Every stage writes its extraction provenance (docs/trace-model.md) to ``urn:graph:source``: the
decoder the Document and its Pages, the chunker the Chunks, the extractor one Subgraph per
chunk with ``tg:contains <<( s p o )>>`` for each extracted triple, plus Activity/Agent records
(component, version, model).  Page and chunk URIs are derived from the document and position,
so re-processing a document writes the same triples again (idempotent).  Each stage reports
progress on ``notify:tg:ingest-progress`` so loaders can draw progress bars.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging

from trustgraph_base import __version__
from trustgraph_base.processor import Processor, ProducerSpec, launch, raise_on_error
from trustgraph_base.provenance import uris
from trustgraph_base.provenance.triples import (
    activity_triples,
    chunk_triples,
    document_triples,
    page_triples,
    subgraph_triples,
)
from trustgraph_base.schema import (
    Chunk,
    DocumentMetadata,
    DocumentRef,
    EntityContexts,
    IngestProgress,
    LibrarianRequest,
    Metadata,
    PromptRequest,
    TextPage,
    Triples,
)
from trustgraph_base.schema.library import CHUNK, PAGE

from ..common.ports import prompt_terms
from ..common.services import client_spec, flow_producer_spec, flow_spec, progress_queue
from ..model.llm import resolve_llm
from .chunking import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, check_chunk_options, chunk_text
from .decoding import stream_document
from .extraction import (
    COMPONENT_NAME,
    COMPONENT_VERSION,
    MODEL_ID,
    extract,
    extraction_to_triples,
    parse_llm_extraction,
)

log = logging.getLogger(__name__)

#: Chunks of one page the chunker stores in the librarian at once.
CHUNK_WRITES = 16
#: Pages the chunker, and chunks the extractor, handle at once (at least the processor's ``concurrency``):
#: each waits for round trips (the librarian, the broker's acknowledgements, an LLM), so one at a time
#: left the stage idle most of the time while a document's chunks queued behind each other.
PAGE_CONCURRENCY = 4
EXTRACT_CONCURRENCY = 8


class _Stage(Processor):
    """Shared wiring: librarian client, triples-store producer, progress producer."""

    def __init__(self, **params):
        super().__init__(**params)
        self.add(client_spec("librarian", self.flow))
        self.add(flow_producer_spec("triples", "triples-store", self.flow))
        self.add(ProducerSpec("progress", progress_queue(), IngestProgress))

    async def librarian(self, **fields) -> object:
        return raise_on_error("librarian", await self.client("librarian").request(LibrarianRequest(**fields)))

    async def store_triples(self, meta: Metadata, item_id: str, document_id: str, triples: list) -> None:
        await self.producer("triples").send(Triples(
            metadata=Metadata(id=item_id, root=document_id, user=meta.user, collection=meta.collection),
            triples=triples))

    async def progress(self, meta: Metadata, document_id: str, stage: str, item_id: str = "", total: int = 0,
                       error: str = "") -> None:
        await self.producer("progress").send(IngestProgress(user=meta.user, collection=meta.collection,
                                                            document_id=document_id, stage=stage,
                                                            item_id=item_id, total=total, error=error))


class DecoderService(_Stage):
    """Decodes a stored document (any supported kind, see :mod:`.decoding`) into pages.

    Pages are decoded one at a time and each goes on as soon as it is stored, so a long document is
    never held as pages all at once, and chunking and extraction of its first pages run while the
    later ones are still being decoded.
    """

    default_id = "decoder"

    def __init__(self, **params):
        super().__init__(**params)
        self.add(flow_spec("document-load", self.flow, self.on_document))
        self.add(flow_producer_spec("pages", "text-pages", self.flow))

    async def on_document(self, msg: DocumentRef, ctx) -> None:
        meta = msg.metadata
        doc_id = msg.document_id
        try:
            parts = []
            async for resp in self.client("librarian").stream(LibrarianRequest(
                    operation="stream-document", user=meta.user, collection=meta.collection, document_id=doc_id)):
                parts.append(raise_on_error("librarian", resp).content)
            content = b"".join(parts)
            del parts
            pages = await asyncio.to_thread(stream_document, content, msg.kind, msg.title)
            del content
        except ValueError as e:  # bad content: tell the loader, then dead-letter (no retry helps)
            await self.progress(meta, doc_id, "decoded", error=str(e))
            raise
        doc_uri = uris.document_uri(doc_id)
        activity = uris.activity_uri("decoder", doc_uri)
        prov = document_triples(doc_uri, msg.title, msg.kind, pages.count)
        prov += activity_triples(activity, "decoder", __version__, used_uri=doc_uri)
        await self.store_triples(meta, doc_uri, doc_id, prov)
        await self.progress(meta, doc_id, "decoded", total=pages.count)
        # One page at a time: decoded, recorded, stored and passed on before the next is decoded.  The
        # librarian decoded the whole document before storing it, so a page fails here only if the
        # decoder changed since; the pages before it stay stored, and the loader is told.
        while True:
            try:
                page = await asyncio.to_thread(next, pages.pages, None)
            except ValueError as e:
                await self.progress(meta, doc_id, "decoded", error=str(e))
                raise
            if page is None:
                break
            p_uri = uris.page_uri(doc_uri, page.page_number)
            await self.store_triples(meta, p_uri, doc_id, page_triples(p_uri, doc_uri, page.page_number,
                                                                       activity_uri=activity, label=page.label))
            await self.librarian(operation="add-child-document", user=meta.user, collection=meta.collection,
                                 document_id=doc_id, content=page.text.encode("utf-8"),
                                 document_metadata=DocumentMetadata(id=p_uri, kind="text/plain",
                                                                    title=page_title(msg.title, page),
                                                                    parent_id=doc_id, document_type=PAGE))
            await self.producer("pages").send(TextPage(
                metadata=meta, document_id=doc_id, page_id=p_uri, page_number=page.page_number,
                page_count=pages.count, text=page.text))


def page_title(document_title: str, page) -> str:
    """The librarian title of a page: ``<title> page 3``, or ``<title> — Slide 3: Results`` for a named unit."""
    if not page.label or page.label == f"Page {page.page_number}":
        return f"{document_title} page {page.page_number}"
    return f"{document_title} — {page.label}"


class ChunkerService(_Stage):
    """Splits pages into overlapping chunks with exact character offsets."""

    default_id = "chunker"

    def __init__(self, *, chunk_size: int = DEFAULT_CHUNK_SIZE, chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
                 **params):
        super().__init__(**params)
        check_chunk_options(chunk_size, chunk_overlap)
        self.chunk_size, self.chunk_overlap = chunk_size, chunk_overlap
        self.add(flow_spec("text-pages", self.flow, self.on_page, concurrency=max(PAGE_CONCURRENCY, self.concurrency)))
        self.add(flow_producer_spec("chunks", "chunks", self.flow))

    async def on_page(self, msg: TextPage, ctx) -> None:
        meta = msg.metadata
        doc_uri = uris.document_uri(msg.document_id)
        chunks = chunk_text(msg.text, self.chunk_size, self.chunk_overlap)
        activity = uris.activity_uri("chunker", msg.page_id)
        prov = activity_triples(activity, "chunker", __version__, used_uri=msg.page_id)
        out = []
        for c in chunks:
            c_uri = uris.chunk_uri(doc_uri, msg.page_number, c.index)
            prov += chunk_triples(c_uri, msg.page_id, c.index, c.char_offset, c.char_length, activity_uri=activity)
            out.append(Chunk(metadata=meta, document_id=msg.document_id, page_id=msg.page_id, chunk_id=c_uri,
                             chunk_index=c.index, char_offset=c.char_offset, char_length=c.char_length,
                             text=c.text))
        # The chunks are stored concurrently (a round trip each, a lightweight transaction on Cassandra), and
        # each goes on to extraction and embedding as soon as it is stored.  The page is acknowledged only
        # after its provenance and progress are sent, so a crash in between redoes the page (idempotently).
        limit = asyncio.Semaphore(CHUNK_WRITES)

        async def store(chunk: Chunk) -> None:
            async with limit:
                await self.librarian(operation="add-child-document", user=meta.user, collection=meta.collection,
                                     document_id=msg.page_id, content=chunk.text.encode("utf-8"),
                                     document_metadata=DocumentMetadata(id=chunk.chunk_id, kind="text/plain",
                                                                        title=f"Chunk {chunk.chunk_index}",
                                                                        parent_id=msg.page_id, document_type=CHUNK))
                await self.producer("chunks").send(chunk)

        await asyncio.gather(*(store(c) for c in out))
        await self.store_triples(meta, msg.page_id, msg.document_id, prov)
        await self.progress(meta, msg.document_id, "chunked", item_id=msg.page_id, total=len(chunks))

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE)
        parser.add_argument("--chunk-overlap", type=int, default=DEFAULT_CHUNK_OVERLAP)

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        return {"chunk_size": args.chunk_size, "chunk_overlap": args.chunk_overlap}


class KgExtractService(_Stage):
    """Extracts entities, relationships and definitions from chunks, with a Subgraph per chunk.

    ``extractor="pattern"`` is the deterministic offline extractor; ``"llm"`` asks the prompt
    service (templates ``extract-relationships`` and ``extract-definitions``).
    """

    default_id = "kg-extract"

    def __init__(self, *, extractor: str = "auto", **params):
        super().__init__(**params)
        if extractor == "auto":
            extractor = "llm" if resolve_llm() == "openai" else "pattern"
        if extractor not in ("pattern", "llm"):
            raise ValueError(f"unknown extractor {extractor!r}: use pattern or llm")
        self.extractor = extractor
        self.add(flow_spec("chunks", self.flow, self.on_chunk, concurrency=max(EXTRACT_CONCURRENCY, self.concurrency)))
        self.add(flow_producer_spec("entities", "entity-contexts", self.flow))
        if extractor == "llm":
            self.add(client_spec("prompt", self.flow))

    async def on_start(self) -> None:
        log.info("kg-extract: extractor %s", self.extractor if self.extractor == "llm"
                 else f"{COMPONENT_NAME} (model {MODEL_ID}: deterministic rules, not an LLM)")

    async def _extract(self, text: str):
        if self.extractor == "pattern":
            return await asyncio.to_thread(extract, text), COMPONENT_NAME, COMPONENT_VERSION, MODEL_ID
        terms = prompt_terms({"text": text})
        rel, defs = await asyncio.gather(
            self.client("prompt").request(PromptRequest(id="extract-relationships", terms=terms)),
            self.client("prompt").request(PromptRequest(id="extract-definitions", terms=terms)))
        rel, defs = raise_on_error("prompt", rel), raise_on_error("prompt", defs)
        extraction = parse_llm_extraction(json.loads(rel.object or "[]"), json.loads(defs.object or "[]"))
        return extraction, "llm-extractor", __version__, rel.model or defs.model

    async def on_chunk(self, msg: Chunk, ctx) -> None:
        meta = msg.metadata
        extraction, component, version, model = await self._extract(msg.text)
        graph = extraction_to_triples(extraction)
        knowledge = graph.triples  # default graph
        sg = uris.subgraph_uri(msg.chunk_id)
        activity = uris.activity_uri(component, msg.chunk_id)
        prov = subgraph_triples(sg, msg.chunk_id, knowledge, activity_uri=activity)
        prov += activity_triples(activity, component, version, model=model, used_uri=msg.chunk_id)
        await self.store_triples(meta, msg.chunk_id, msg.document_id, knowledge + prov)
        await self.producer("entities").send(EntityContexts(
            metadata=Metadata(id=msg.chunk_id, root=msg.document_id, user=meta.user, collection=meta.collection),
            chunk_id=msg.chunk_id, entities=[e.to_entity_context() for e in graph.entities]))
        await self.progress(meta, msg.document_id, "extracted", item_id=msg.chunk_id)

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--extractor", choices=["auto", "pattern", "llm"], default="auto")

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        return {"extractor": args.extractor}


def run_decoder() -> None:
    launch(DecoderService)


def run_chunker() -> None:
    launch(ChunkerService)


def run_kg_extract() -> None:
    launch(KgExtractService)
