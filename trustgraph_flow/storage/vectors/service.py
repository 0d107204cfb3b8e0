"""Vector writers: entity vectors into the graph-embeddings index, chunk vectors into the document one.

Each writer asks the ``embeddings`` service for vectors and records the model that made them
with the index, so vectors of different models are never mixed.  Both are idempotent by id.

Throughput: each writer handles several messages at once and gathers what they need into one
``embeddings`` request (each distinct text once) and one index write per (user, collection),
so the embedder gets batches it can spread over the cores and the bus and the index see one
round trip per batch instead of one per message.  Every message is still acknowledged only
after its own vectors are stored; when a batch fails for a reason other than an unavailable
dependency, its messages are retried one by one, so a bad message never takes its batch
neighbours down with it.

A vector stored from the same text (and label and document) is not embedded and written again:
an entity recurs in most chunks of the document that names it, a document loaded again brings the
same chunks, and an index re-indexes every vector it is given (on Cassandra, the SAI index costs
about 2 ms of server CPU per vector, the largest part of what a chunk costs Cassandra).  Each vector
is stored with its source mark (a digest of what it was made from), and a batch reads the marks of
its ids first (one look-up per batch), so this holds across writer restarts, replicas and separate
``tg-load-document`` runs, and a vector removed in the meantime (a document removal) is written again.

Which vector an id keeps: a chunk's text is its id's, so the document writer keeps the later message's
vector.  An entity has a definition in every chunk that names it, and chunks are extracted several at
once (and by replicas), so "the later message" would make its vector depend on arrival order: the
graph writer keeps the vector of the entity's longest definition instead (ties: the lesser digest),
and does not write a definition it does not prefer over the one stored.  Two loads of a corpus, in
any order and by any writers, therefore store the same entity vectors, and a query picks the same
seed entities from both.  One race remains: two writers (replicas) that read an entity's mark at
the same moment both write, and the later write stays even if it is the shorter definition; the
next load that brings the longer one replaces it.

Pipelining: a writer keeps :data:`PARALLEL_BATCHES` batches in flight, so the next batch is being
embedded while one waits for its vectors (the embedder spreads them over the cores; with one batch
at a time, a document's first chunk embedded alone left the other core idle).  Batches are
embedded at once but stored in the order they started, so for an id in two batches in flight the
later message still wins, as one by one (an entity's preferred definition wins, whichever batch holds it).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from dataclasses import dataclass

from trustgraph_base.processor import Processor, ProducerSpec, launch, raise_on_error
from trustgraph_base.schema import Chunk, EmbeddingsRequest, EntityContexts, IngestProgress
from trustgraph_base.store.vectors import VectorItem

from ...common.batching import Batcher
from ...common.services import client_spec, flow_spec, progress_queue
from ...common.stores import StoreBackedProcessor

#: Messages each writer handles at once (their texts are embedded together).
DEFAULT_CONCURRENCY = 16
#: Most texts in one ``embeddings`` request.
MAX_BATCH_TEXTS = 64
#: Batches a writer embeds at once (see the module docstring).
PARALLEL_BATCHES = 2
#: Vectors a writer remembers having stored (their ids and source marks), for batches in flight.
REMEMBERED_VECTORS = 50_000
#: Length field of a graph source mark: definitions longer than this compare as this long.
_LENGTH_MAX = 0xFFFF_FFFF


@dataclass
class _Job:
    """One message's vectors to write: ``(id, text, label, document_id)`` per item."""

    user: str
    collection: str
    items: list[tuple[str, str, str, str]]


class _VectorWriter(StoreBackedProcessor, Processor):
    kind = ""
    #: For an id written again from another source: ``False`` keeps the later message's vector, ``True``
    #: the one from the preferred source (the lesser :meth:`source_mark`), whatever order they come in.
    keeps_preferred_source = False

    def __init__(self, *, vector_index=None, batch_concurrency: int = DEFAULT_CONCURRENCY,
                 max_batch_texts: int = MAX_BATCH_TEXTS, **params):
        """:param batch_concurrency: messages handled at once (at least the processor's ``concurrency``).
        :param max_batch_texts: most texts in one ``embeddings`` request (a bigger message goes alone).
        """
        super().__init__(**params)
        if batch_concurrency < 1 or max_batch_texts < 1:
            raise ValueError("batch_concurrency and max_batch_texts must be >= 1")
        self.batch_concurrency = max(batch_concurrency, self.concurrency)
        self.max_batch_texts = max_batch_texts
        self.index = self.use_store(vector_index, "vectors", kind=self.kind)
        self.add(client_spec("embeddings", self.flow))
        self.add(ProducerSpec("progress", progress_queue(), IngestProgress))
        self._batcher = Batcher(self._embed_and_store, size=lambda job: len(job.items), max_size=max_batch_texts,
                                parallel=PARALLEL_BATCHES, name=f"{self.id}-batches")
        #: set once the batch started last has stored its vectors (or given up): the next one stores after it
        self._last_store: asyncio.Future | None = None
        #: (user, collection, id) -> source mark of the vector this writer stored last for it
        self._written: OrderedDict[tuple[str, str, str], bytes] = OrderedDict()

    async def embed(self, texts: list[str]) -> tuple[list[list[float]], str]:
        resp = raise_on_error("embeddings", await self.client("embeddings").request(EmbeddingsRequest(texts=texts)))
        if len(resp.vectors) != len(texts):
            raise RuntimeError(f"embeddings service returned {len(resp.vectors)} vectors for {len(texts)} texts")
        return resp.vectors, resp.model

    async def progress(self, meta, document_id: str, stage: str, item_id: str) -> None:
        await self.producer("progress").send(IngestProgress(user=meta.user, collection=meta.collection,
                                                            document_id=document_id, stage=stage, item_id=item_id))

    # ------------------------------------------------------------------ batching

    async def write(self, user: str, collection: str, items: list[tuple[str, str, str, str]]) -> None:
        """Embed and store ``items`` (``(id, text, label, document_id)``), batched with concurrent calls.

        Returns once these items are in the index; raises what made that impossible.
        """
        if items:
            await self._batcher.submit(_Job(user, collection, items))

    async def _embed_and_store(self, batch: list[_Job]) -> None:
        previous, stored = self._last_store, asyncio.get_running_loop().create_future()
        self._last_store = stored
        try:
            await self._embed_and_store_after(batch, previous)
        finally:
            stored.set_result(None)

    def source_mark(self, text: str, label: str, document_id: str) -> bytes:
        """What a vector was made from, in a few bytes stored with it: equal marks, same source.

        Where :attr:`keeps_preferred_source`, the lesser mark (compared as bytes) is the preferred source.
        """
        return _digest((text, label, document_id))

    async def _embed_and_store_after(self, batch: list[_Job], previous: asyncio.Future | None) -> None:
        """Embed ``batch`` now, and store its vectors once the batch started before it is done storing."""
        chosen: dict[tuple[str, str, str], tuple[str, str, str]] = {}
        marks: dict[tuple[str, str, str], bytes] = {}
        for job in batch:  # in arrival order: for a repeated id the later message wins, as one by one ...
            for i, text, label, doc in job.items:
                key, mark = (job.user, job.collection, i), self.source_mark(text, label, doc)
                if self.keeps_preferred_source and key in marks and marks[key] <= mark:
                    continue  # ... unless the writer keeps the preferred source
                chosen.pop(key, None)
                chosen[key] = (text, label, doc)
                marks[key] = mark
        remembered = {key: self._written.get(key) for key in chosen}  # what this writer had stored when it began
        stored = await asyncio.to_thread(self._stored_marks, list(chosen))
        for key in [key for key in chosen if self._holds_as_good(stored.get(key), marks[key])]:
            del chosen[key]
        if not chosen:
            return
        texts = list(dict.fromkeys(text for text, _label, _doc in chosen.values()))
        vectors, model = await self.embed(texts)
        vector_of = dict(zip(texts, vectors, strict=True))
        if previous is not None:
            await asyncio.wait({previous})  # not cancelled with this batch: it is the earlier batch's
        # the batches started before this one have stored now; one of them may have stored a preferred source
        for key in [key for key in chosen if self._written.get(key) != remembered[key]
                    and self._holds_as_good(self._written.get(key), marks[key])]:
            del chosen[key]
        groups: dict[tuple[str, str], list[VectorItem]] = {}
        for key, (text, label, doc) in chosen.items():
            user, collection, i = key
            groups.setdefault((user, collection), []).append(
                VectorItem(id=i, vector=vector_of[text], label=label, document_id=doc, source=marks[key]))
        await asyncio.to_thread(self._upsert_groups, model, groups)
        for key in chosen:
            self._written.pop(key, None)
            self._written[key] = marks[key]
        while len(self._written) > REMEMBERED_VECTORS:
            self._written.popitem(last=False)

    def _holds_as_good(self, stored: bytes | None, mark: bytes) -> bool:
        """Whether a vector stored from ``stored`` (``None`` or empty: no vector, or its source unknown) makes
        one from ``mark`` unneeded."""
        if not stored:
            return False
        return stored == mark or (self.keeps_preferred_source and stored < mark)

    def _stored_marks(self, keys: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], bytes]:
        """The source mark of each of ``keys`` whose vector the index holds."""
        ids: dict[tuple[str, str], list[str]] = {}
        for user, collection, i in keys:
            ids.setdefault((user, collection), []).append(i)
        return {(user, collection, i): mark for (user, collection), wanted in ids.items()
                for i, mark in self.index.stored_sources(user, collection, wanted).items()}

    def _upsert_groups(self, model: str, groups: dict[tuple[str, str], list[VectorItem]]) -> None:
        for (user, collection), items in groups.items():
            self.index.upsert(user, collection, model, items)


def _digest(item: tuple[str, str, str]) -> bytes:
    """What a vector was made from (text, label, document id), in 16 bytes."""
    return hashlib.blake2b("\x00".join(item).encode("utf-8"), digest_size=16).digest()


class GraphEmbeddingsWriter(_VectorWriter):
    """Embeds extracted entities (label and definition) into the graph-embeddings index."""

    default_id = "graph-embeddings-write"
    kind = "graph"
    keeps_preferred_source = True

    def source_mark(self, text: str, label: str, document_id: str) -> bytes:
        """The longest definition is preferred (ties: the lesser digest), so an entity's vector does not
        depend on the order its chunks' extractions arrive in: two loads of a corpus store the same vectors.

        The mark is the definition's length subtracted from :data:`_LENGTH_MAX` (4 bytes, big-endian),
        then the digest: as bytes, a longer definition's mark is the lesser.
        """
        return (_LENGTH_MAX - min(len(text), _LENGTH_MAX)).to_bytes(4, "big") + _digest((text, label, document_id))

    def __init__(self, **params):
        super().__init__(**params)
        self.add(flow_spec("entity-contexts", self.flow, self.on_entities, concurrency=self.batch_concurrency))

    async def on_entities(self, msg: EntityContexts, ctx) -> None:
        meta = msg.metadata
        # an entity belongs to the collection's graph, not to the document that mentioned it last: its
        # vector names no document (it goes when the entity has no triple left, see librarian.removal)
        await self.write(meta.user, meta.collection, [
            (e.entity.value, e.context or e.label or e.entity.value, e.label, "")
            for e in msg.entities if e.entity is not None])
        await self.progress(meta, meta.root, "graph-embedded", msg.chunk_id)


class DocumentEmbeddingsWriter(_VectorWriter):
    """Embeds chunk texts into the document-embeddings index."""

    default_id = "document-embeddings-write"
    kind = "document"

    def __init__(self, **params):
        super().__init__(**params)
        self.add(flow_spec("chunks", self.flow, self.on_chunk, concurrency=self.batch_concurrency))

    async def on_chunk(self, msg: Chunk, ctx) -> None:
        meta = msg.metadata
        if msg.text.strip():
            await self.write(meta.user, meta.collection,
                             [(msg.chunk_id, msg.text, f"Chunk {msg.chunk_index}", msg.document_id)])
        await self.progress(meta, msg.document_id, "doc-embedded", msg.chunk_id)


def run_graph_embeddings() -> None:
    launch(GraphEmbeddingsWriter)


def run_document_embeddings() -> None:
    launch(DocumentEmbeddingsWriter)
