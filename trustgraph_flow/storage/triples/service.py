"""triples-write: persist ``Triples`` batches from the ``triples-store`` flow queue.

At-least-once and idempotent: a batch is acked only after the store has written it, and
re-writing a batch (redelivery) changes nothing.  An unreachable store raises, so the
message is nacked and redelivered; a batch with invalid names or terms is bad input
(``InvalidQuery``, a ``ValueError``) and is dead-lettered at once with the reason.  Explain
triples, extraction provenance and knowledge all arrive here.
"""

from __future__ import annotations

import asyncio
import logging

from trustgraph_base.processor import Processor, ProducerSpec, launch
from trustgraph_base.schema import IngestProgress, Triples
from trustgraph_base.store.triples import open_triples_store

from ...common.services import flow_spec, progress_queue
from ...common.stores import StoreBackedProcessor

log = logging.getLogger(__name__)


class TriplesWriteService(StoreBackedProcessor, Processor):
    """Writes triple batches to the triple store (SQLite or Cassandra)."""

    default_id = "triples-write"

    def __init__(self, *, triples_store=None, **params):
        super().__init__(**params)
        self.store = self.use_store(triples_store, open_triples_store)
        self.add(flow_spec("triples-store", self.flow, self.on_triples))
        self.add(ProducerSpec("progress", progress_queue(), IngestProgress))

    async def on_triples(self, msg: Triples, ctx) -> None:
        meta = msg.metadata
        if msg.triples:
            await asyncio.to_thread(self.store.insert, meta.user, meta.collection, msg.triples)
        if meta.root:
            await self.producer("progress").send(IngestProgress(
                user=meta.user, collection=meta.collection, document_id=meta.root, stage="stored", item_id=meta.id))


def run() -> None:
    launch(TriplesWriteService)
