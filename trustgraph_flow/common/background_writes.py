"""Explain triples are stored without the query waiting for each write, and without gaps.

A query sends each stage's triples to the ``explainability`` queue the moment the stage is
done (docs/guarantees.md, "Traces").  Each send starts at once and runs beside the next
stage: waiting for the broker's acknowledgement of each send would put one persistent-queue
round trip per stage on the query's critical path (``bench/README.md``).  The sends are
chained: one starts after the previous one was acknowledged, and none starts after a failure,
so what reaches storage is always a prefix of the stages the client saw (never a trace with a hole),
and :attr:`BackgroundWrites.last_written` names the stage an Error can be derived from.  The
session's last message waits for the chain (:meth:`BackgroundWrites.wait`): ``end_of_session``
still means every stage is durably queued, and a failed send still turns the query into an error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

__all__ = ["BackgroundWrites"]


class BackgroundWrites:
    """A chain of writes, each started after the previous one succeeded, awaited at the end of a session."""

    def __init__(self) -> None:
        self._tail: asyncio.Future | None = None
        #: Key of the last write that completed (``""``: none yet).
        self.last_written = ""

    def start(self, key: str, write: Callable[[], Awaitable[None]]) -> None:
        """Run ``write()`` after the writes started before it; skipped if one of them failed.

        :param key: what is written (a stage URI); becomes :attr:`last_written` once it succeeded.
        :param write: makes the write's coroutine (called only when its turn comes).
        """
        previous = self._tail

        async def run() -> None:
            if previous is not None:
                await previous  # a failure before this write is this write's failure: no gaps
            await write()
            self.last_written = key

        self._tail = asyncio.ensure_future(run())

    async def wait(self) -> None:
        """Wait until every started write is done; raise the first failure."""
        tail, self._tail = self._tail, None
        if tail is not None:
            await tail

    async def settle(self) -> None:
        """Like :meth:`wait`, logging a failure instead of raising it (for a session that is failing anyway)."""
        try:
            await self.wait()
        except Exception as e:  # noqa: BLE001 - the caller is already reporting a failure
            log.error("an explain write failed: %s", e)
