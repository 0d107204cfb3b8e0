"""triples-write: persist ``Triples`` batches from the ``triples-store`` flow queue.

At-least-once and idempotent: a message is acked only after the store has written it, and
re-writing it (redelivery) changes nothing.  An unreachable store raises, so the message is
nacked and redelivered; a message with invalid names or terms is bad input (``InvalidQuery``,
a ``ValueError``) and is dead-lettered at once with the reason.  Explain triples, extraction
provenance and knowledge all arrive here.

Messages handled at once are coalesced (:class:`~trustgraph_flow.common.batching.Batcher`):
they are written with one ``insert`` per user and collection, one insert at a time, in arrival
order; the first message after a quiet spell waits up to ``linger_ms`` for neighbours (less
once as many messages wait as are handled at once, and no longer once the final stage of a
trace arrives: a Synthesis, an agent's Conclusion or an Error, :func:`ends_a_trace`).  Each
explain stage of a query is a few dozen triples, and ingestion sends small batches per chunk;
one insert per message cost a transaction (SQLite) or several round trips (Cassandra).  The
stored trace is delayed by at most ``linger_ms``.

It also answers ``trace-claim`` requests: a run whose Question URI its client chose (an agent's
session id) stores its Question through one, which succeeds only if no trace with that URI is
stored, atomically in the store (:meth:`~trustgraph_base.store.triples.TriplesStore.claim_trace`),
so two runs, on any replicas, never share a trace.

The default linger depends on the bus.  On Pulsar a message waits in the broker until it is
acked, so waiting longer loses nothing: up to 1 s lets every stage of a query share one write,
which starts when the query's final stage arrives, i.e. after its answer has gone out, instead
of competing with the answer's streaming for the CPU (GraphRAG on Pulsar + Cassandra: a
shorter linger puts the write in the middle of the answer stream, ``bench/README.md``).  On
the in-process bus a message lives only in memory until it is stored, so the wait stays short
(20 ms).  The triples of a load (a document's pages, chunks and
extractions, a ``tg-load-turtle`` batch) do not wait: ingestion is a pipeline whose progress
waits for each write, and under load its messages coalesce anyway while a write runs.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os

from trustgraph_base.processor import Processor, ProducerSpec, launch
from trustgraph_base.provenance.triples import ends_a_trace
from trustgraph_base.schema import IngestProgress, TraceClaimRequest, TraceClaimResponse, Triples

from ...common.batching import Batcher
from ...common.services import flow_spec, progress_queue, request_spec
from ...common.stores import StoreBackedProcessor

log = logging.getLogger(__name__)

#: Messages handled (and so coalesced) at once.
DEFAULT_CONCURRENCY = 16
#: Most triples in one coalesced write (a bigger message is written alone).
MAX_BATCH_TRIPLES = 10_000
#: Milliseconds the first message of a batch waits for others, on the in-process bus.
DEFAULT_LINGER_MS = 20.0
#: ... and on a durable bus (Pulsar), where a waiting message is safe in the broker.
DURABLE_BUS_LINGER_MS = 1000.0


def ends_the_linger(msg: Triples) -> bool:
    """Whether a message is stored without waiting for neighbours: the final stage of a trace (nothing of it
    follows), or a load's triples (``metadata.root`` names the document or file being loaded: a pipeline that
    waits for each stage's write gains nothing from a wait; what arrives during a write still shares the next)."""
    return bool(msg.metadata is not None and msg.metadata.root) or ends_a_trace(msg.triples)


def default_linger_ms(backend) -> float:
    """The linger for ``backend``: longer where unacked messages survive a crash (module docstring)."""
    return DURABLE_BUS_LINGER_MS if backend.durable else DEFAULT_LINGER_MS


class TriplesWriteService(StoreBackedProcessor, Processor):
    """Writes triple batches to the triple store (SQLite or Cassandra).

    :param triples_store: a store object to share (embedded stack); else one is opened.
    :param batch_concurrency: messages handled at once (at least the processor's ``concurrency``).
    :param max_batch_triples: most triples in one coalesced write.
    :param linger_ms: how long the first message of a batch waits for others (0: no wait;
        ``None``: :func:`default_linger_ms` of the bus); the final stage of a trace ends the wait.
    """

    default_id = "triples-write"

    def __init__(self, *, triples_store=None, batch_concurrency: int = DEFAULT_CONCURRENCY,
                 max_batch_triples: int = MAX_BATCH_TRIPLES, linger_ms: float | None = None, **params):
        super().__init__(**params)
        if batch_concurrency < 1:
            raise ValueError("batch_concurrency must be >= 1")
        self.store = self.use_store(triples_store, "triples")
        self.linger_ms = float(default_linger_ms(self.backend) if linger_ms is None else linger_ms)
        handlers = max(batch_concurrency, self.concurrency)
        self._batcher = Batcher(self._insert, size=lambda m: len(m.triples), max_size=max_batch_triples,
                                linger=self.linger_ms / 1000, max_items=handlers,
                                ends_linger=ends_the_linger, name=f"{self.id}-batches")
        self.add(flow_spec("triples-store", self.flow, self.on_triples, concurrency=handlers))
        self.add(request_spec("trace-claim", self.flow, self.on_claim, name="trace-claim"))
        self.add(ProducerSpec("progress", progress_queue(), IngestProgress))

    async def on_triples(self, msg: Triples, ctx) -> None:
        meta = msg.metadata
        if msg.triples:
            await self._batcher.submit(msg)
        if meta.root:
            await self.producer("progress").send(IngestProgress(
                user=meta.user, collection=meta.collection, document_id=meta.root, stage="stored", item_id=meta.id))

    async def on_claim(self, req: TraceClaimRequest, ctx) -> None:
        claimed = await asyncio.to_thread(self.store.claim_trace, req.user, req.collection, req.triples)
        await ctx.respond(TraceClaimResponse(claimed=claimed))

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
        env = os.environ.get("TG_TRIPLES_LINGER_MS")
        parser.add_argument("--linger-ms", type=float, default=float(env) if env else None,
                            help="how long a message waits to share its write with others (env "
                                 f"TG_TRIPLES_LINGER_MS; default {DURABLE_BUS_LINGER_MS:g} on Pulsar, "
                                 f"{DEFAULT_LINGER_MS:g} on the in-process bus)")

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        return {**super().params_from_args(args), "linger_ms": args.linger_ms}


def run() -> None:
    launch(TriplesWriteService)
