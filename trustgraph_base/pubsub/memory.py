"""In-process asyncio pub/sub with Pulsar's semantics (the embedded default and the test bus).

One :class:`MemoryBackend` is one broker: every processor of an embedded group shares it.
Shared subscriptions hand each message to one of their consumers; exclusive ones allow a
single consumer; ``nack`` redelivers after ``nack_delay`` with a growing
``redelivery_count``; unacked messages of a closed consumer go back to the subscription.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

from .base import BackendError, Message, ReceiveTimeout
from .topics import is_persistent, parse_queue


@dataclass
class _Subscription:
    name: str
    shared: bool
    durable: bool
    queue: asyncio.Queue[Message] = field(default_factory=asyncio.Queue)
    consumers: int = 0
    unacked: dict[str, tuple[Message, MemoryConsumer]] = field(default_factory=dict)


class _Topic:
    def __init__(self, queue: str):
        self.queue = queue
        self.persistent = is_persistent(queue)
        self.subscriptions: dict[str, _Subscription] = {}


class MemoryProducer:
    def __init__(self, backend: MemoryBackend, topic: _Topic):
        self._backend = backend
        self._topic = topic
        self._closed = False

    async def send(self, data: bytes, properties: dict[str, str] | None = None) -> None:
        if self._closed:
            raise BackendError(f"producer for {self._topic.queue} is closed")
        if not isinstance(data, (bytes, bytearray)):
            raise BackendError("message data must be bytes")
        props = dict(properties or {})
        for sub in list(self._topic.subscriptions.values()):
            msg = Message(data=bytes(data), properties=dict(props), queue=self._topic.queue,
                          message_id=str(next(self._backend._ids)))
            sub.queue.put_nowait(msg)

    async def close(self) -> None:
        self._closed = True


class MemoryConsumer:
    def __init__(self, backend: MemoryBackend, topic: _Topic, sub: _Subscription):
        self._backend = backend
        self._topic = topic
        self._sub = sub
        self.queue = topic.queue
        self.subscription = sub.name
        self._closed = False

    async def receive(self, timeout: float | None = None) -> Message:
        if self._closed:
            raise BackendError(f"consumer {self.subscription} on {self.queue} is closed")
        # Yield first, so consumers already waiting on a shared subscription get their turn
        # (fair spreading, as Pulsar's dispatcher does).
        await asyncio.sleep(0)
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancellation (Ctrl-C)
            # that arrives just as a message does, and the command would carry on.
            async with asyncio.timeout(timeout):
                msg = await self._sub.queue.get()
        except TimeoutError:
            raise ReceiveTimeout(f"no message on {self.queue} within {timeout} s") from None
        msg.handle = (self._sub.name, msg.message_id)
        self._sub.unacked[msg.message_id] = (msg, self)
        return msg

    async def ack(self, message: Message) -> None:
        self._sub.unacked.pop(message.message_id, None)

    async def nack(self, message: Message) -> None:
        entry = self._sub.unacked.pop(message.message_id, None)
        if entry is None:
            return
        redelivered = Message(data=message.data, properties=dict(message.properties), queue=message.queue,
                              message_id=message.message_id, redelivery_count=message.redelivery_count + 1)
        backend = self._backend
        backend._redeliveries += 1

        def redeliver() -> None:
            backend._redeliveries -= 1
            self._sub.queue.put_nowait(redelivered)

        asyncio.get_running_loop().call_later(backend.nack_delay, redeliver)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        sub = self._sub
        sub.consumers -= 1
        # Unacked messages of this consumer go back to the subscription, as with Pulsar.
        for mid, (msg, owner) in list(sub.unacked.items()):
            if owner is self:
                del sub.unacked[mid]
                sub.queue.put_nowait(Message(data=msg.data, properties=msg.properties, queue=msg.queue,
                                             message_id=msg.message_id,
                                             redelivery_count=msg.redelivery_count + 1))
        if sub.consumers <= 0 and not sub.durable:
            self._topic.subscriptions.pop(sub.name, None)


class MemoryBackend:
    """An in-process broker.

    :param nack_delay: seconds before a nacked message is redelivered.
    """

    name = "memory"
    durable = False  # queued messages die with the process

    def __init__(self, nack_delay: float = 0.05):
        self.nack_delay = nack_delay
        self._topics: dict[str, _Topic] = {}
        self._ids = itertools.count(1)
        self._closed = False
        self._redeliveries = 0

    def _topic(self, queue: str) -> _Topic:
        parse_queue(queue)
        topic = self._topics.get(queue)
        if topic is None:
            topic = self._topics[queue] = _Topic(queue)
        return topic

    async def create_producer(self, queue: str, *, batching: bool | None = None) -> MemoryProducer:
        self._check_open()  # ``batching``: nothing to batch in process
        return MemoryProducer(self, self._topic(queue))

    async def subscribe(self, queue: str, subscription: str, *, shared: bool = True,
                        initial_position: str = "latest") -> MemoryConsumer:
        self._check_open()
        topic = self._topic(queue)
        sub = topic.subscriptions.get(subscription)
        if sub is None:
            # Shared subscriptions on persistent queues are durable: they keep their backlog
            # while no consumer is attached, like Pulsar's.
            sub = _Subscription(subscription, shared, durable=shared and topic.persistent)
            topic.subscriptions[subscription] = sub
        elif sub.shared != shared:
            raise BackendError(f"subscription {subscription} on {queue} exists with another type")
        elif not shared and sub.consumers > 0:
            raise BackendError(f"exclusive subscription {subscription} on {queue} already has a consumer")
        sub.consumers += 1
        return MemoryConsumer(self, topic, sub)

    def subscription_count(self, queue: str) -> int:
        """How many subscriptions a queue has (tests use it to prove nothing leaks)."""
        topic = self._topics.get(queue)
        return len(topic.subscriptions) if topic else 0

    def backlog(self, queue: str, subscription: str) -> int:
        """Messages waiting (not yet received) in one subscription."""
        topic = self._topics.get(queue)
        sub = topic.subscriptions.get(subscription) if topic else None
        return sub.queue.qsize() if sub else 0

    def pending(self) -> int:
        """Messages queued or awaiting redelivery across every subscription (0 = the bus is quiet)."""
        return sum(sub.queue.qsize() for topic in self._topics.values()
                   for sub in topic.subscriptions.values()) + self._redeliveries

    def _check_open(self) -> None:
        if self._closed:
            raise BackendError("memory backend is closed")

    async def close(self) -> None:
        self._closed = True
