"""Coalesce the messages that concurrent handlers are processing into batches of store writes.

A writer service runs many handlers at once (one per message in flight).  Each handler
hands its work to a :class:`Batcher` and waits; one drain task runs the pending work in
batches, one batch at a time, so the store sees one call per batch instead of one per message
and never more than one call at a time from this batcher.  Every handler still returns only
once its own work is done (the message is acknowledged after that), and raises what prevented
it, so at-least-once delivery is unchanged.

When a batch fails for a reason that is not transient (a store outage is transient: every
message of the batch would fail alike), its items are run one by one so that a bad message is
refused alone and its neighbours are stored.  When the store's data directory or file system
cannot be used (full, read-only), the items still waiting fail with the batch: a smaller write
that still fits must not be stored after one that did not (a trace is stored as a prefix).

``linger`` is how long the first item of an idle batcher waits for company, like a Kafka
producer's ``linger.ms``: small messages that arrive within it share one write.  ``max_items``
ends the wait early: once that many items wait (the handlers' concurrency), no other can join.
``ends_linger`` ends it early too, for an item after which waiting is not worth it (the final
stage of a trace: its earlier stages are already waiting, and nothing of it follows).

``parallel`` lets that many batches run at once, for work that is CPU-bound elsewhere (the
vector writers' embedding runs on the embedder's threads): an item that arrives while a batch
runs starts the next batch at once instead of waiting for it, so a document's first chunk no
longer leaves the second core idle.  Batches still start in arrival order; a ``run`` that must
also finish in that order orders itself (see the vector writers).  Only with ``parallel=1``
does an environment failure fail the items still waiting (the ordering the trace writers need).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from trustgraph_base.processor.base import is_environment_failure, is_transient

T = TypeVar("T")

__all__ = ["Batcher"]


class Batcher(Generic[T]):
    """Runs submitted items in batches of at most ``max_size`` (an item bigger than that goes alone).

    :param run: stores one batch; raises if any item of it could not be stored.
    :param size: the size of an item (e.g. its number of triples).
    :param max_size: most total size in one batch.
    :param linger: seconds the first item of a new batch waits for others (0: none).
    :param max_items: the linger ends as soon as this many items wait (``None``: it always runs out),
        or as soon as they add up to ``max_size``.
    :param ends_linger: the linger ends as soon as an item for which this is true waits.
    :param parallel: most batches running at once.
    :param name: names the drain task (shows in task dumps).
    """

    def __init__(self, run: Callable[[list[T]], Awaitable[None]], *, size: Callable[[T], int], max_size: int,
                 linger: float = 0.0, max_items: int | None = None,
                 ends_linger: Callable[[T], bool] | None = None, parallel: int = 1,
                 name: str = "batcher") -> None:
        if max_size < 1 or linger < 0 or parallel < 1 or (max_items is not None and max_items < 1):
            raise ValueError("max_size, max_items and parallel must be >= 1 and linger >= 0")
        self._run = run
        self._size = size
        self.max_size = max_size
        self.linger = linger
        self.max_items = max_items
        self._ends_linger = ends_linger
        self.parallel = parallel
        self._name = name
        self._pending: list[tuple[T, asyncio.Future]] = []
        self._pending_size = 0
        self._drainer: asyncio.Task | None = None
        self._lingering: asyncio.Event | None = None  # set to end the current linger early
        self._closing_item = False  # an item that ends the linger waits
        self._arrived: asyncio.Event | None = None  # set when an item arrives while a batch slot is free

    async def submit(self, item: T) -> None:
        """Return once ``item`` is stored; raise what prevented that."""
        done = asyncio.get_running_loop().create_future()
        self._pending.append((item, done))
        self._pending_size += self._size(item)
        if self._ends_linger is not None and self._ends_linger(item):
            self._closing_item = True
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name=self._name)
        elif self._lingering is not None and self._full():
            self._lingering.set()
        elif self._arrived is not None:
            self._arrived.set()
        await asyncio.shield(done)

    def _full(self) -> bool:
        """Whether the pending items make a whole batch (waiting longer could not add to it)."""
        return self._closing_item or self._pending_size >= self.max_size or (
            self.max_items is not None and len(self._pending) >= self.max_items)

    async def _linger(self) -> None:
        """Let the handlers started in this loop turn, or within the linger, join the first batch."""
        if not self.linger or self._full():
            await asyncio.sleep(0)
            return
        self._lingering = asyncio.Event()
        try:
            await asyncio.wait_for(self._lingering.wait(), self.linger)
        except TimeoutError:
            pass
        finally:
            self._lingering = None

    async def _drain(self) -> None:
        """Run what is pending, batch after batch (up to ``parallel`` at once), until nothing is left."""
        await self._linger()
        running: dict[asyncio.Task, list[tuple[T, asyncio.Future]]] = {}
        try:
            while self._pending or running:
                while self._pending and len(running) < self.parallel:
                    batch = self._next_batch()
                    running[asyncio.create_task(self._run_batch(batch), name=f"{self._name}-batch")] = batch
                waits: set[asyncio.Future] = set(running)
                if len(running) < self.parallel:  # a free slot: an item that arrives starts a batch at once
                    self._arrived = asyncio.Event()
                    waits.add(asyncio.ensure_future(self._arrived.wait()))
                try:
                    done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    self._arrived = None
                    for waiter in waits - running.keys():
                        waiter.cancel()
                for task in [t for t in running if t in done]:
                    del running[task]
                    task.result()
        except asyncio.CancelledError:
            for task in running:
                task.cancel()
            self._cancel([entry for batch in running.values() for entry in batch])
            raise

    def _next_batch(self) -> list[tuple[T, asyncio.Future]]:
        """Take the next batch off the pending items (at least one; at most ``max_size`` unless one is bigger)."""
        self._closing_item = False  # it is in this batch or the next: no linger until then
        batch: list[tuple[T, asyncio.Future]] = []
        total = 0
        while self._pending and (not batch or total + self._size(self._pending[0][0]) <= self.max_size):
            entry = self._pending.pop(0)
            batch.append(entry)
            total += self._size(entry[0])
        self._pending_size -= total
        return batch

    def _cancel(self, batch: list[tuple[T, asyncio.Future]]) -> None:
        """Cancel the handlers of ``batch`` and of every item still pending."""
        for _, done in batch + self._pending:
            done.cancel()
        self._pending.clear()
        self._pending_size = 0

    async def _run_batch(self, batch: list[tuple[T, asyncio.Future]]) -> None:
        try:
            await self._run([item for item, _ in batch])
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - reported to the handlers below
            if len(batch) == 1 or is_transient(e):
                if is_environment_failure(e) and self.parallel == 1:
                    batch, self._pending, self._pending_size = batch + self._pending, [], 0
                for _, done in batch:
                    _settle(done, e)
                return
            for item, done in batch:  # find the item that fails, and let the others through
                try:
                    await self._run([item])
                except asyncio.CancelledError:
                    raise
                except Exception as one:  # noqa: BLE001 - reported to that item's handler
                    _settle(done, one)
                else:
                    _settle(done)
            return
        for _, done in batch:
            _settle(done)


def _settle(future: asyncio.Future, error: BaseException | None = None) -> None:
    if not future.done():
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
