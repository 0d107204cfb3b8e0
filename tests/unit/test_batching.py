"""Batcher: coalescing in the linger, size bounds, a bad item refused alone, outages reported, parallel batches."""

from __future__ import annotations

import asyncio

import pytest

from trustgraph_base.store.errors import StoreUnavailable
from trustgraph_flow.common.batching import Batcher


class Recorder:
    """A ``run`` that records its batches and fails on items named ``bad`` (or on everything when down)."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.down = False

    async def __call__(self, batch: list[str]) -> None:
        self.batches.append(list(batch))
        await asyncio.sleep(0.01)
        if self.down:
            raise StoreUnavailable("store down")
        if "bad" in batch:
            raise ValueError("bad item")


async def submit_later(batcher: Batcher, item: str, delay: float = 0.01) -> None:
    """Submit ``item`` after ``delay`` seconds (a handler that starts later)."""
    await asyncio.sleep(delay)
    await batcher.submit(item)


async def assert_a_new_batch_lingers(batcher: Batcher, run: Recorder) -> None:
    """The next items wait out a 0.2 s linger and share one batch (nothing left over says "write now")."""
    batcher.max_size, batcher.linger = 100, 0.2
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await asyncio.gather(batcher.submit("c"), submit_later(batcher, "d", 0.05))
    assert loop.time() - t0 >= 0.19
    assert run.batches[-1] == ["c", "d"]


async def test_items_submitted_within_the_linger_share_one_batch():
    run = Recorder()
    batcher = Batcher(run, size=lambda item: 1, max_size=100, linger=0.05)

    await asyncio.gather(batcher.submit("a"), submit_later(batcher, "b", 0.01), submit_later(batcher, "c", 0.02))
    assert run.batches == [["a", "b", "c"]]


async def test_the_linger_ends_once_max_items_wait():
    run = Recorder()
    batcher = Batcher(run, size=lambda item: 1, max_size=100, linger=30.0, max_items=3)

    # a 30 s linger, but the third item fills the batch: no handler could bring a fourth
    await asyncio.wait_for(asyncio.gather(batcher.submit("a"), submit_later(batcher, "b"), submit_later(batcher, "c")),
                           timeout=5)
    assert run.batches == [["a", "b", "c"]]


async def test_the_linger_ends_once_the_pending_items_fill_max_size():
    run = Recorder()
    batcher = Batcher(run, size=len, max_size=4, linger=30.0)

    await asyncio.wait_for(asyncio.gather(batcher.submit("aa"), submit_later(batcher, "bb")), timeout=5)
    assert run.batches == [["aa", "bb"]]


async def test_an_item_that_ends_the_linger_is_written_at_once_with_the_waiting_ones():
    run = Recorder()
    batcher = Batcher(run, size=lambda item: 1, max_size=100, linger=30.0, ends_linger=lambda item: item == "end")

    await asyncio.wait_for(asyncio.gather(batcher.submit("a"), submit_later(batcher, "b", 0.01),
                                          submit_later(batcher, "end", 0.05)), timeout=5)
    assert run.batches == [["a", "b", "end"]]
    await assert_a_new_batch_lingers(batcher, run)  # the flag went with the batch that held its item
    assert len(run.batches) == 2


async def test_an_ending_item_written_in_a_later_batch_leaves_no_flag_behind():
    run = Recorder()
    batcher = Batcher(run, size=lambda item: 1, max_size=1, linger=30.0, ends_linger=lambda item: item == "end")

    # max_size 1: "a" fills its batch and is written at once; "end" arrives during that write
    await asyncio.wait_for(asyncio.gather(batcher.submit("a"), submit_later(batcher, "end", 0.005)), timeout=5)
    assert run.batches == [["a"], ["end"]]
    await assert_a_new_batch_lingers(batcher, run)
    assert len(run.batches) == 3


async def test_fewer_items_than_max_items_wait_for_the_whole_linger():
    run = Recorder()
    batcher = Batcher(run, size=lambda item: 1, max_size=100, linger=0.2, max_items=3)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await asyncio.gather(batcher.submit("a"), batcher.submit("b"))
    assert loop.time() - t0 >= 0.19
    assert run.batches == [["a", "b"]]


async def test_without_linger_items_arriving_during_a_write_form_the_next_batch():
    run = Recorder()
    batcher = Batcher(run, size=lambda item: 1, max_size=100)

    # "b" and "c" arrive while ["a"] is being written
    await asyncio.gather(batcher.submit("a"), submit_later(batcher, "b", 0.005), submit_later(batcher, "c", 0.005))
    assert run.batches == [["a"], ["b", "c"]]


async def test_batches_stay_under_max_size_and_a_big_item_goes_alone():
    run = Recorder()
    batcher = Batcher(run, size=len, max_size=4)
    await asyncio.gather(*(batcher.submit(item) for item in ("aa", "bb", "c", "dddddd", "e")))
    assert run.batches == [["aa", "bb"], ["c"], ["dddddd"], ["e"]]


async def test_a_bad_item_is_refused_alone_and_its_neighbours_are_stored():
    run = Recorder()
    batcher = Batcher(run, size=lambda item: 1, max_size=100)
    results = await asyncio.gather(*(batcher.submit(item) for item in ("a", "bad", "c")), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], ValueError)
    assert run.batches == [["a", "bad", "c"], ["a"], ["bad"], ["c"]]


async def test_an_outage_fails_every_item_of_the_batch_without_retrying_them_one_by_one():
    run = Recorder()
    run.down = True
    batcher = Batcher(run, size=lambda item: 1, max_size=100)
    results = await asyncio.gather(*(batcher.submit(item) for item in ("a", "b")), return_exceptions=True)
    assert all(isinstance(r, StoreUnavailable) for r in results)
    assert run.batches == [["a", "b"]]
    run.down = False
    await batcher.submit("a")  # the batcher keeps working after a failed batch
    assert run.batches[-1] == ["a"]


async def test_a_cancelled_handler_does_not_cancel_the_write_of_its_batch():
    run = Recorder()
    batcher = Batcher(run, size=lambda item: 1, max_size=100, linger=0.02)
    waiting = asyncio.create_task(batcher.submit("a"))
    other = asyncio.create_task(batcher.submit("b"))
    await asyncio.sleep(0.005)
    waiting.cancel()
    await other
    assert run.batches == [["a", "b"]]


class Overlaps:
    """A ``run`` taking ``seconds`` per batch; records each batch with its start and end, and the most at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.batches: list[tuple[list[str], float, float]] = []
        self.running = 0
        self.most = 0

    async def __call__(self, batch: list[str]) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.running -= 1
        self.batches.append((list(batch), start, loop.time()))


async def test_with_parallel_batches_an_item_arriving_during_a_write_starts_its_own_batch_at_once():
    run = Overlaps(0.3)
    batcher = Batcher(run, size=lambda item: 1, max_size=100, parallel=2)

    await asyncio.gather(batcher.submit("a"), submit_later(batcher, "b", 0.05))
    (first, a_start, a_end), (second, b_start, _) = sorted(run.batches, key=lambda b: b[1])
    assert (first, second) == (["a"], ["b"])
    assert b_start < a_end and b_start - a_start < 0.2  # "b" did not wait for "a"'s write


async def test_no_more_than_parallel_batches_run_at_once_and_the_rest_wait_together():
    run = Overlaps(0.1)
    batcher = Batcher(run, size=lambda item: 1, max_size=100, parallel=2)

    items = [f"i{n}" for n in range(8)]
    await asyncio.gather(*(submit_later(batcher, item, 0.01 * n) for n, item in enumerate(items)))
    assert run.most == 2
    written = [item for batch, _, _ in run.batches for item in batch]
    assert sorted(written) == sorted(items)  # each once
    assert len(run.batches) < len(items)  # items that waited for a free slot shared a batch
    starts = [batch for batch, _, _ in sorted(run.batches, key=lambda b: b[1])]
    assert [item for batch in starts for item in batch] == items  # batches start in arrival order


async def test_parallel_batches_still_refuse_a_bad_item_alone():
    run = Recorder()
    batcher = Batcher(run, size=lambda item: 1, max_size=100, linger=0.05, parallel=2)

    results = await asyncio.gather(batcher.submit("a"), submit_later(batcher, "bad"), submit_later(batcher, "c", 0.02),
                                   return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], ValueError)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError):
        Batcher(Recorder(), size=len, max_size=0)
    with pytest.raises(ValueError):
        Batcher(Recorder(), size=len, max_size=10, linger=-1)
    with pytest.raises(ValueError):
        Batcher(Recorder(), size=len, max_size=10, max_items=0)
    with pytest.raises(ValueError):
        Batcher(Recorder(), size=len, max_size=10, parallel=0)
