"""What a handler gets besides the message: its properties and a way to reply."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..codec import encode


@dataclass
class MessageContext:
    """Per-message context handed to handlers.

    ``respond`` sends a reply on the consumer's response queue with the request's ``id``
    property, so the requesting client can route it.
    """

    processor_id: str
    spec_name: str
    queue: str
    message_id: str
    properties: dict[str, str] = field(default_factory=dict)
    redelivery_count: int = 0
    _response_producer: Any = None
    responses_sent: int = 0

    @property
    def request_id(self) -> str:
        return self.properties.get("id", "")

    async def respond(self, obj: Any) -> None:
        if self._response_producer is None:
            raise RuntimeError(f"{self.spec_name} has no response queue")
        await self._response_producer.send(encode(obj), {"id": self.request_id})
        self.responses_sent += 1
