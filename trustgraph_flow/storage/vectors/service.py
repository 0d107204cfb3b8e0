"""Vector writers: entity vectors into the graph-embeddings index, chunk vectors into the document one.

Each writer asks the ``embeddings`` service for vectors and records the model that made them
with the index, so vectors of different models are never mixed.  Both are idempotent by id.
"""

from __future__ import annotations

import asyncio

from trustgraph_base.processor import Processor, ProducerSpec, launch, raise_on_error
from trustgraph_base.schema import Chunk, EmbeddingsRequest, EntityContexts, IngestProgress
from trustgraph_base.store.vectors import VectorItem, open_vector_index

from ...common.services import client_spec, flow_spec, progress_queue
from ...common.stores import StoreBackedProcessor


class _VectorWriter(StoreBackedProcessor, Processor):
    kind = ""

    def __init__(self, *, vector_index=None, **params):
        super().__init__(**params)
        self.index = self.use_store(vector_index, open_vector_index, kind=self.kind)
        self.add(client_spec("embeddings", self.flow))
        self.add(ProducerSpec("progress", progress_queue(), IngestProgress))

    async def embed(self, texts: list[str]) -> tuple[list[list[float]], str]:
        resp = raise_on_error("embeddings", await self.client("embeddings").request(EmbeddingsRequest(texts=texts)))
        return resp.vectors, resp.model

    async def progress(self, meta, document_id: str, stage: str, item_id: str) -> None:
        await self.producer("progress").send(IngestProgress(user=meta.user, collection=meta.collection,
                                                            document_id=document_id, stage=stage, item_id=item_id))


class GraphEmbeddingsWriter(_VectorWriter):
    """Embeds extracted entities (label and definition) into the graph-embeddings index."""

    default_id = "graph-embeddings-write"
    kind = "graph"

    def __init__(self, **params):
        super().__init__(**params)
        self.add(flow_spec("entity-contexts", self.flow, self.on_entities))

    async def on_entities(self, msg: EntityContexts, ctx) -> None:
        meta = msg.metadata
        entities = [e for e in msg.entities if e.entity is not None]
        if entities:
            vectors, model = await self.embed([e.context or e.label or e.entity.value for e in entities])
            items = [VectorItem(id=e.entity.value, vector=v, label=e.label, document_id=meta.root)
                     for e, v in zip(entities, vectors)]
            await asyncio.to_thread(self.index.upsert, meta.user, meta.collection, model, items)
        await self.progress(meta, meta.root, "graph-embedded", msg.chunk_id)


class DocumentEmbeddingsWriter(_VectorWriter):
    """Embeds chunk texts into the document-embeddings index."""

    default_id = "document-embeddings-write"
    kind = "document"

    def __init__(self, **params):
        super().__init__(**params)
        self.add(flow_spec("chunks", self.flow, self.on_chunk))

    async def on_chunk(self, msg: Chunk, ctx) -> None:
        meta = msg.metadata
        if msg.text.strip():
            vectors, model = await self.embed([msg.text])
            await asyncio.to_thread(self.index.upsert, meta.user, meta.collection, model, [VectorItem(
                id=msg.chunk_id, vector=vectors[0], label=f"Chunk {msg.chunk_index}", document_id=msg.document_id)])
        await self.progress(meta, msg.document_id, "doc-embedded", msg.chunk_id)


def run_graph_embeddings() -> None:
    launch(GraphEmbeddingsWriter)


def run_document_embeddings() -> None:
    launch(DocumentEmbeddingsWriter)
