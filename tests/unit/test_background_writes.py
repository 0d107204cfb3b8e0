"""The chain of explain writes: in order, off the critical path, nothing after a failure, failures surface."""

from __future__ import annotations

import asyncio
import logging

import pytest

from trustgraph_flow.common.background_writes import BackgroundWrites


def run(coro):
    return asyncio.run(coro)


def test_writes_run_in_start_order_and_wait_collects_them():
    async def main():
        done: list[str] = []
        writes = BackgroundWrites()

        def write(key: str, delay: float):
            async def go():
                await asyncio.sleep(delay)
                done.append(key)
            return go

        # the first write is the slowest: the chain still completes them in order
        for key, delay in (("q", 0.03), ("exp", 0.0), ("focus", 0.01)):
            writes.start(key, write(key, delay))
        assert done == []  # start() does not wait
        await writes.wait()
        return done, writes.last_written

    done, last = run(main())
    assert done == ["q", "exp", "focus"] and last == "focus"


def test_no_write_starts_after_a_failure_and_wait_raises_it():
    async def main():
        done: list[str] = []
        writes = BackgroundWrites()

        async def ok(key):
            done.append(key)

        async def boom():
            raise RuntimeError("queue refused")

        writes.start("q", lambda: ok("q"))
        writes.start("exp", boom)
        writes.start("focus", lambda: ok("focus"))
        with pytest.raises(RuntimeError, match="queue refused"):
            await writes.wait()
        return done, writes.last_written

    done, last = run(main())
    assert done == ["q"] and last == "q"


def test_settle_logs_instead_of_raising_and_the_chain_can_go_on():
    # a handler of our own: other tests may reconfigure logging (disable existing loggers, stop propagation)
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    logger = logging.getLogger("trustgraph_flow.common.background_writes")
    handler, disabled, level = Collect(), logger.disabled, logger.level
    logger.addHandler(handler)
    logger.disabled = False
    logger.setLevel(logging.ERROR)

    async def main():
        writes = BackgroundWrites()

        async def boom():
            raise RuntimeError("broker gone")

        async def ok():
            return None

        writes.start("q", boom)
        await writes.settle()
        writes.start("error", ok)  # a new chain after settle: the error stage is written
        await writes.wait()
        return writes.last_written

    try:
        assert run(main()) == "error"
    finally:
        logger.removeHandler(handler)
        logger.disabled = disabled
        logger.setLevel(level)
    assert any("broker gone" in m for m in messages), messages


def test_wait_without_writes_returns():
    run(BackgroundWrites().wait())
