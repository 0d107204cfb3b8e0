"""Deliberately injected bus fault: messages of one queue that are lost on their way.

Pulsar's non-persistent topics (request, response and notify queues) lose messages when a
consumer has no room for them or while a connection is re-established.  :class:`LossyBackend`
wraps a real backend (the in-process bus or Pulsar) and drops the messages of one queue that a
predicate picks as they are sent; everything else is the real backend's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class _LossyProducer:
    def __init__(self, producer, lost: Callable[[bytes], bool]):
        self._producer = producer
        self._lost = lost
        self.dropped = 0

    async def send(self, data: bytes, properties: dict[str, str] | None = None) -> None:
        if self._lost(data):
            self.dropped += 1
            return
        await self._producer.send(data, properties)

    async def close(self) -> None:
        await self._producer.close()


class LossyBackend:
    """``backend``, except that a message sent to ``queue`` for which ``lost(payload)`` is true goes nowhere.

    :ivar producers: the lossy producers made so far (their ``dropped`` counts prove the fault happened).
    """

    def __init__(self, backend, queue: str, lost: Callable[[bytes], bool]):
        self._backend = backend
        self._queue = queue
        self._lost = lost
        self.producers: list[_LossyProducer] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    @property
    def dropped(self) -> int:
        return sum(p.dropped for p in self.producers)

    async def create_producer(self, queue: str, **options):
        producer = await self._backend.create_producer(queue, **options)
        if queue != self._queue:
            return producer
        lossy = _LossyProducer(producer, self._lost)
        self.producers.append(lossy)
        return lossy

    async def subscribe(self, queue: str, subscription: str, **options):
        return await self._backend.subscribe(queue, subscription, **options)

    async def close(self) -> None:
        await self._backend.close()
