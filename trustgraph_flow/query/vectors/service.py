"""Vector queries: nearest entities (graph-embeddings) and nearest chunks (document-embeddings)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from trustgraph_base.processor import MessageContext, Processor, launch
from trustgraph_base.schema import (
    ChunkMatch,
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    EntityMatch,
    GraphEmbeddingsRequest,
    GraphEmbeddingsResponse,
    iri,
)

from ...common.services import request_spec
from ...common.stores import StoreBackedProcessor

MAX_LIMIT = 1000


def _check(limit: int, vector) -> int:
    if not vector:
        raise ValueError("the query vector is empty")
    if limit <= 0 or limit > MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


class _VectorQuery(StoreBackedProcessor, Processor):
    kind = ""
    service = ""
    on_request: Callable[[Any, MessageContext], Awaitable[None]]  # each service's handler

    def __init__(self, *, vector_index=None, **params):
        super().__init__(**params)
        self.index = self.use_store(vector_index, "vectors", kind=self.kind)
        self.add(request_spec(self.service, self.flow, self.on_request))

    async def search(self, req):
        limit = _check(req.limit, req.vector)
        return await asyncio.to_thread(self.index.search, req.user, req.collection, req.model, req.vector, limit)


class GraphEmbeddingsQuery(_VectorQuery):
    """Finds the entities nearest to a question vector."""

    default_id = "graph-embeddings-query"
    kind = "graph"
    service = "graph-embeddings"

    async def on_request(self, req: GraphEmbeddingsRequest, ctx) -> None:
        hits = await self.search(req)
        await ctx.respond(GraphEmbeddingsResponse(entities=[
            EntityMatch(entity=iri(h.id), label=h.label, score=float(h.score)) for h in hits]))


class DocumentEmbeddingsQuery(_VectorQuery):
    """Finds the chunks nearest to a question vector."""

    default_id = "document-embeddings-query"
    kind = "document"
    service = "document-embeddings"

    async def on_request(self, req: DocumentEmbeddingsRequest, ctx) -> None:
        hits = await self.search(req)
        await ctx.respond(DocumentEmbeddingsResponse(chunks=[
            ChunkMatch(chunk_id=h.id, document_id=h.document_id, score=float(h.score)) for h in hits]))


def run_graph_embeddings() -> None:
    launch(GraphEmbeddingsQuery)


def run_document_embeddings() -> None:
    launch(DocumentEmbeddingsQuery)
