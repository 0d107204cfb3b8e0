"""What a handler gets besides the message: its properties and a way to reply."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..codec import encode


@dataclass
class MessageContext:
    """Per-message context handed to handlers.

    ``respond`` sends a reply with the request's ``id`` property to the client's own reply
    queue (the ``reply-to`` property), or to the consumer's response queue when the request
    names none (clients that share one response topic, as TrustGraph's do).
    """

    processor_id: str
    spec_name: str
    queue: str
    message_id: str
    properties: dict[str, str] = field(default_factory=dict)
    redelivery_count: int = 0
    _response_producer: Any = None
    _reply_producer: Any = None  # async (reply-to queue) -> producer, provided by the processor
    responses_sent: int = 0

    @property
    def request_id(self) -> str:
        return self.properties.get("id", "")

    async def respond(self, obj: Any) -> None:
        if self._response_producer is None:
            raise RuntimeError(f"{self.spec_name} has no response queue")
        producer = self._response_producer
        reply_to = self.properties.get("reply-to", "")
        if reply_to and self._reply_producer is not None:
            producer = await self._reply_producer(reply_to) or producer
        await producer.send(encode(obj), {"id": self.request_id})
        self.responses_sent += 1
