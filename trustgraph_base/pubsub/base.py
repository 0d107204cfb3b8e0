"""The pub/sub backend protocol that every service is written against.

Two backends implement it with the same semantics: :mod:`.memory` (in-process asyncio, the
embedded default) and :mod:`.pulsar` (Apache Pulsar via ``pulsar-client``):

- ``subscribe(queue, subscription, shared=True)``: consumers of one shared subscription
  each get different messages (load spreading); every subscription gets every message.
  ``shared=False`` is an exclusive subscription (one consumer).
- Messages carry bytes and string properties; delivery is ordered per producer.
- ``ack`` settles a message; ``nack`` redelivers it (``redelivery_count`` grows).
- Persistent (flow) queues keep messages for a subscription until acked; non-persistent
  (request/response/notify) queues drop messages nobody is subscribed to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class BackendError(Exception):
    """A pub/sub failure (connection, topic, send)."""


class BackendUnavailable(BackendError):
    """The broker cannot be reached (within the configured time)."""


class ReceiveTimeout(BackendError, TimeoutError):
    """No message arrived within the receive timeout."""


@dataclass
class Message:
    """One received message."""

    data: bytes
    properties: dict[str, str] = field(default_factory=dict)
    queue: str = ""
    message_id: str = ""
    redelivery_count: int = 0
    handle: Any = None  # backend-specific, for ack/nack


class Producer(Protocol):
    async def send(self, data: bytes, properties: dict[str, str] | None = None) -> None: ...
    async def close(self) -> None: ...


class Consumer(Protocol):
    queue: str
    subscription: str

    async def receive(self, timeout: float | None = None) -> Message:
        """Wait for the next message; raise :class:`ReceiveTimeout` after ``timeout`` seconds."""
        ...

    async def ack(self, message: Message) -> None: ...
    async def nack(self, message: Message) -> None: ...
    async def close(self) -> None:
        """Stop consuming; an exclusive subscription is removed (no leaked subscriptions)."""
        ...


class Backend(Protocol):
    name: str
    #: Whether a message on a persistent queue outlives the processes (``True`` for Pulsar: the
    #: broker keeps it until it is acked; ``False`` in-process, where it lives in memory only).
    durable: bool

    async def create_producer(self, queue: str, *, batching: bool | None = None) -> Producer:
        """A producer on ``queue``; ``batching`` overrides the backend's choice (``None``: its default)."""
        ...

    async def subscribe(self, queue: str, subscription: str, *, shared: bool = True,
                        initial_position: str = "latest") -> Consumer: ...

    async def close(self) -> None: ...
