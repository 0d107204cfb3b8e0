"""librarian: the document service.

Operations (``LibrarianRequest.operation``): ``add-document`` (source documents are checked
to decode before anything is stored, so a bad file is refused whole), ``add-child-document``
(pages, chunks), ``get-document-metadata``, ``get-document-content``, ``stream-document``
(content in bounded pieces, at least one reply even for an empty document),
``list-documents``, ``list-library`` (source documents with their page and chunk counts),
``ingest-status`` (how far ingestion got with source documents, read from the stores: see :mod:`.status`),
``list-children``, ``process-document`` (starts the ingestion pipeline), ``find-document`` (the
user's collections holding an id: for clients whose requests carry no collection), ``remove-document``
(a source document with its pages, chunks, extraction provenance, the knowledge only it supports and
the vectors; see :mod:`.removal`; a request that names a ``document_type`` removes only a document
of that type).
Answers of the RAG services are stored here as ``document_type="answer"``; they arrive on the
``answer-store`` flow queue (:class:`StoredAnswer`), each with the explain stage that points at
it, which is recorded in the answer's metadata (:mod:`trustgraph_base.provenance.answers`) and
passed on to the triple store once the answer is stored.

Requests run side by side (:data:`REQUEST_HANDLERS` at once): the chunker stores a page's chunks
concurrently, and on Cassandra each is a lightweight transaction, so one request at a time made
every chunk of a document wait for the one before it.  A removal runs alone: it waits for the
requests in progress and holds back new ones until it is done, so a chunk stored during a removal
cannot be left behind by it, and two removals never each keep an edge for the other's document.
"""

from __future__ import annotations

import argparse
import asyncio
import logging

import aiorwlock

from trustgraph_base.processor import Processor, launch
from trustgraph_base.provenance.answers import answer_marker
from trustgraph_base.schema import (
    DocumentRef,
    DocumentSummary,
    LibrarianRequest,
    LibrarianResponse,
    Metadata,
    StoredAnswer,
    Triples,
)
from trustgraph_base.schema.library import ANSWER, DOCUMENT_TYPES, SOURCE
from trustgraph_base.store.librarian import DocumentExists

from ..common.services import flow_producer_spec, flow_spec, request_spec
from ..common.stores import StoreBackedProcessor
from ..ingest.decoding import DEFAULT_MAX, check_document, detect_kind, normalize_kind
from .removal import remove_document_data
from .status import ingest_status

log = logging.getLogger(__name__)

STREAM_CHUNK = 1 << 20
#: Requests the librarian handles at once, at least (see the module docstring); ``--concurrency`` raises it.
REQUEST_HANDLERS = 8
#: Operations that run alone (every other request waits for them, and they for every other).
EXCLUSIVE_OPERATIONS = frozenset({"remove-document"})


class LibrarianService(StoreBackedProcessor, Processor):
    """Stores documents, pages, chunks and answers; starts processing; removes with cascade."""

    default_id = "librarian"

    def __init__(self, *, librarian_store=None, triples_store=None, document_index=None, graph_index=None,
                 max_document_bytes: int = DEFAULT_MAX, **params):
        super().__init__(**params)
        self.store = self.use_store(librarian_store, "librarian")
        # Removal cascades into the triples and both vector indexes.
        self.triples = self.use_store(triples_store, "triples")
        self.document_index = self.use_store(document_index, "vectors", kind="document")
        self.graph_index = self.use_store(graph_index, "vectors", kind="graph")
        self.max_document_bytes = max_document_bytes
        self.add(request_spec("librarian", self.flow, self.on_request,
                              concurrency=max(self.concurrency, REQUEST_HANDLERS)))
        self._exclusive = aiorwlock.RWLock()
        self.add(flow_producer_spec("load", "document-load", self.flow))
        self.add(flow_spec("answer-store", self.flow, self.on_answer, name="answers"))
        self.add(flow_producer_spec("explainability", "triples-store", self.flow))

    async def on_request(self, req: LibrarianRequest, ctx) -> None:
        handler = self._OPS.get(req.operation)
        if handler is None:
            raise ValueError(f"unknown librarian operation {req.operation!r}; expected one of "
                             f"{', '.join(sorted(self._OPS))}")
        mode = self._exclusive.writer if req.operation in EXCLUSIVE_OPERATIONS else self._exclusive.reader
        async with mode:
            await handler(self, req, ctx)

    async def on_answer(self, msg: StoredAnswer, ctx) -> None:
        """Store an answer, then pass on the explain stage that points at it (a redelivery repeats both)."""
        meta = msg.metadata
        if meta is None or not meta.id or meta.document_type != ANSWER:
            raise ValueError("the answer-store queue takes answers: metadata with an id and document_type 'answer'")
        if msg.explain_id:
            meta.metadata = [*meta.metadata, *answer_marker(meta.id, msg.explain_id)]
        try:
            await asyncio.to_thread(self.store.add_document, msg.user, msg.collection, meta, msg.content)
        except DocumentExists as e:  # another answer under this id: retrying cannot help, dead-letter it
            raise ValueError(str(e)) from None
        if msg.explain_triples:
            await self.producer("explainability").send(Triples(
                metadata=Metadata(id=msg.explain_id, user=msg.user, collection=msg.collection),
                triples=msg.explain_triples))

    def _meta(self, req: LibrarianRequest):
        meta = req.document_metadata
        if meta is None or not (meta.id or req.document_id):
            raise ValueError("document metadata with an id is required")
        if not meta.id:
            meta.id = req.document_id
        if meta.document_type not in DOCUMENT_TYPES:
            raise ValueError(f"unknown document_type {meta.document_type!r}")
        return meta

    async def _add(self, req, ctx) -> None:
        meta = self._meta(req)
        if meta.document_type == SOURCE:
            # Refuse what the pipeline could not decode, before anything is stored (a page at a time).
            meta.kind = normalize_kind(meta.kind) if meta.kind else detect_kind(meta.title, req.content)
            await asyncio.to_thread(check_document, req.content, meta.kind, meta.title or meta.id,
                                    self.max_document_bytes)
        stored = await asyncio.to_thread(self.store.add_document, req.user, req.collection, meta, req.content)
        await ctx.respond(LibrarianResponse(document_metadata=stored))

    async def _add_child(self, req, ctx) -> None:
        meta = self._meta(req)
        stored = await asyncio.to_thread(self.store.add_child, req.user, req.collection, req.document_id, meta,
                                         req.content)
        await ctx.respond(LibrarianResponse(document_metadata=stored))

    async def _get_metadata(self, req, ctx) -> None:
        meta = await asyncio.to_thread(self.store.get_metadata, req.user, req.collection, req.document_id)
        await ctx.respond(LibrarianResponse(document_metadata=meta))

    async def _get_content(self, req, ctx) -> None:
        content = await asyncio.to_thread(self.store.get_content, req.user, req.collection, req.document_id)
        await ctx.respond(LibrarianResponse(content=content))

    async def _stream(self, req, ctx) -> None:
        size = req.chunk_size if 0 < req.chunk_size <= 4 * STREAM_CHUNK else STREAM_CHUNK
        parts = await asyncio.to_thread(
            lambda: list(self.store.stream_content(req.user, req.collection, req.document_id, size)))
        for i, part in enumerate(parts):
            await ctx.respond(LibrarianResponse(content=part, chunk_index=i, total_chunks=len(parts),
                                                is_final=i == len(parts) - 1))

    async def _list(self, req, ctx) -> None:
        docs = await asyncio.to_thread(self.store.list_documents, req.user, req.collection,
                                       req.document_type or SOURCE, req.limit or 1000)
        await ctx.respond(LibrarianResponse(document_metadatas=docs))

    async def _list_library(self, req, ctx) -> None:
        def summaries() -> list[DocumentSummary]:
            docs = self.store.list_documents(req.user, req.collection, SOURCE, req.limit or 1000)
            counts = self.store.count_descendants(req.user, req.collection, [d.id for d in docs])
            return [DocumentSummary(metadata=d, pages=counts[d.id][0], chunks=counts[d.id][1]) for d in docs]

        await ctx.respond(LibrarianResponse(summaries=await asyncio.to_thread(summaries)))

    async def _list_children(self, req, ctx) -> None:
        docs = await asyncio.to_thread(self.store.list_children, req.user, req.collection, req.document_id)
        await ctx.respond(LibrarianResponse(document_metadatas=docs))

    async def _process(self, req, ctx) -> None:
        meta = await asyncio.to_thread(self.store.get_metadata, req.user, req.collection, req.document_id)
        if meta.document_type != SOURCE:
            raise ValueError(f"{req.document_id} is a {meta.document_type}, not a source document")
        await self.producer("load").send(DocumentRef(
            metadata=Metadata(id=meta.id, root=meta.id, user=req.user, collection=req.collection),
            document_id=meta.id, kind=meta.kind, title=meta.title))
        await ctx.respond(LibrarianResponse(document_metadata=meta))

    async def _ingest_status(self, req, ctx) -> None:
        statuses = await asyncio.to_thread(ingest_status, req.user, req.collection, list(req.document_ids),
                                           self.store, self.triples, self.document_index, self.graph_index)
        await ctx.respond(LibrarianResponse(statuses=statuses))

    async def _find(self, req, ctx) -> None:
        collections = await asyncio.to_thread(self.store.find_document, req.user, req.document_id)
        await ctx.respond(LibrarianResponse(collections=collections))

    async def _remove(self, req, ctx) -> None:
        # NotFound first
        meta = await asyncio.to_thread(self.store.get_metadata, req.user, req.collection, req.document_id)
        if req.document_type and meta.document_type != req.document_type:
            raise ValueError(f"document {req.document_id[:200]!r} is a {meta.document_type} document, not "
                             f"{req.document_type[:40]!r}: not removed")
        if meta.document_type != SOURCE:
            removed = await asyncio.to_thread(self.store.remove_document, req.user, req.collection,
                                              req.document_id, True)
            await ctx.respond(LibrarianResponse(removed=removed))
            return
        report = await asyncio.to_thread(remove_document_data, req.user, req.collection, req.document_id,
                                         self.store, self.triples, self.document_index, self.graph_index)
        log.info("removed %s for %s/%s: %s", req.document_id, req.user, req.collection, report)
        await ctx.respond(LibrarianResponse(removed=report.documents, removal=report))

    _OPS = {
        "add-document": _add, "add-child-document": _add_child, "get-document-metadata": _get_metadata,
        "get-document-content": _get_content, "stream-document": _stream, "list-documents": _list,
        "list-library": _list_library, "list-children": _list_children, "process-document": _process,
        "remove-document": _remove, "find-document": _find,
        "ingest-status": _ingest_status,
    }

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        super().add_args(parser)
        parser.add_argument("--max-document-bytes", type=int, default=DEFAULT_MAX)

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        return {**super().params_from_args(args), "max_document_bytes": args.max_document_bytes}


def run() -> None:
    launch(LibrarianService)
