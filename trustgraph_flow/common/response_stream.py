"""A query's response messages, sent in order without the query waiting for each explain event.

An explain event is queued (:meth:`ResponseStream.send_soon`) and goes out in the background,
in order: awaiting it where it is emitted would put one broker round trip per stage on the
query's critical path (``bench/README.md``), for a message nothing in the query depends on.
Every other message (answer text, the final message) is sent after everything queued before
it (:meth:`ResponseStream.send`), so the client sees exactly the order in which they were
produced, and a failed send still fails the query at its next awaited message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .background_writes import BackgroundWrites

__all__ = ["ResponseStream"]


class ResponseStream:
    """The ordered response messages of one session.

    :param emit: sends one message to the client (the request context's ``respond``).
    """

    def __init__(self, emit: Callable[[Any], Awaitable[None]]):
        self._emit = emit
        self._queued = BackgroundWrites()

    def send_soon(self, message: Any) -> None:
        """Queue ``message``; it is sent after the messages before it, while the caller goes on."""
        self._queued.start("", lambda: self._emit(message))

    async def send(self, message: Any) -> None:
        """Send ``message`` after everything queued before it; raises the first failed send."""
        await self._queued.wait()
        await self._emit(message)

    async def settle(self) -> None:
        """Wait for the queued messages, logging (not raising) a failed send: for a session failing anyway."""
        await self._queued.settle()
