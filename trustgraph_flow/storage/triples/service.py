"""triples-write: persist ``Triples`` batches from the ``triples-store`` flow queue.

At-least-once and idempotent: a message is acked only after the store has written it, and
re-writing it (redelivery) changes nothing.  An unreachable store raises, so the message is
nacked and redelivered; a message with invalid names or terms is bad input (``InvalidQuery``,
a ``ValueError``) and is dead-lettered at once with the reason.  Explain triples, extraction
provenance and knowledge all arrive here.

Messages handled at once are coalesced (:class:`~trustgraph_flow.common.batching.Batcher`):
they are written with one ``insert`` per user and collection, one insert at a time, in arrival
order; the first message after a quiet spell waits up to ``linger_ms`` for neighbours.  Each
explain stage of a query is a few dozen triples, and ingestion sends small batches per chunk;
one insert per message cost a transaction (SQLite) or several round trips (Cassandra).  The
stored trace is delayed by at most ``linger_ms``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os

from trustgraph_base.processor import Processor, ProducerSpec, launch
from trustgraph_base.schema import IngestProgress, Triples
from trustgraph_base.store.triples import open_triples_store

from ...common.batching import Batcher
from ...common.services import flow_spec, progress_queue
from ...common.stores import StoreBackedProcessor

log = logging.getLogger(__name__)

#: Messages handled (and so coalesced) at once.
DEFAULT_CONCURRENCY = 16
#: Most triples in one coalesced write (a bigger message is written alone).
MAX_BATCH_TRIPLES = 10_000
#: Milliseconds the first message of a batch waits for others.
DEFAULT_LINGER_MS = 20.0


class TriplesWriteService(StoreBackedProcessor, Processor):
    """Writes triple batches to the triple store (SQLite or Cassandra).

    :param triples_store: a store object to share (embedded stack); else one is opened.
    :param batch_concurrency: messages handled at once (at least the processor's ``concurrency``).
    :param max_batch_triples: most triples in one coalesced write.
    :param linger_ms: how long the first message of a batch waits for others (0: no wait).
    """

    default_id = "triples-write"

    def __init__(self, *, triples_store=None, batch_concurrency: int = DEFAULT_CONCURRENCY,
                 max_batch_triples: int = MAX_BATCH_TRIPLES, linger_ms: float = DEFAULT_LINGER_MS, **params):
        super().__init__(**params)
        if batch_concurrency < 1:
            raise ValueError("batch_concurrency must be >= 1")
        self.store = self.use_store(triples_store, open_triples_store)
        self._batcher = Batcher(self._insert, size=lambda m: len(m.triples), max_size=max_batch_triples,
                                linger=float(linger_ms) / 1000, name=f"{self.id}-batches")
        self.add(flow_spec("triples-store", self.flow, self.on_triples,
                           concurrency=max(batch_concurrency, self.concurrency)))
        self.add(ProducerSpec("progress", progress_queue(), IngestProgress))

    async def on_triples(self, msg: Triples, ctx) -> None:
        meta = msg.metadata
        if msg.triples:
            await self._batcher.submit(msg)
        if meta.root:
            await self.producer("progress").send(IngestProgress(
                user=meta.user, collection=meta.collection, document_id=meta.root, stage="stored", item_id=meta.id))

    async def _insert(self, batch: list[Triples]) -> None:
        groups: dict[tuple[str, str], list] = {}
        for msg in batch:
            groups.setdefault((msg.metadata.user, msg.metadata.collection), []).extend(msg.triples)
        await asyncio.to_thread(self._insert_groups, groups)

    def _insert_groups(self, groups: dict[tuple[str, str], list]) -> None:
        for (user, collection), triples in groups.items():
            self.store.insert(user, collection, triples)

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        super().add_args(parser)
        parser.add_argument("--linger-ms", type=float,
                            default=float(os.environ.get("TG_TRIPLES_LINGER_MS", DEFAULT_LINGER_MS)),
                            help="how long a message waits to share its write with others "
                                 f"(env TG_TRIPLES_LINGER_MS; default {DEFAULT_LINGER_MS:g})")

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        return {**super().params_from_args(args), "linger_ms": args.linger_ms}


def run() -> None:
    launch(TriplesWriteService)
