"""A call the client gave up on is cancelled at the server: the connection closes, the server stops.

The project's test server plays a llama.cpp server with one slot: ``slow_next`` makes a
generation hold the slot, later requests wait behind it, and a generation whose client
disconnects stops and is recorded.  The real openai client talks to it over HTTP.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from trustgraph_flow.model.llm_settings import ENV_TIMEOUT
from trustgraph_flow.model.prompts import render
from trustgraph_flow.model.testserver import start_server
from trustgraph_flow.model.text_completion import LlmError, OpenAICompletion

pytestmark = pytest.mark.unit

PROMPT = render("kg-synthesis", {
    "query": "Who discovered polonium?",
    "knowledge": [{"s": "Marie Curie", "p": "discovered", "o": "polonium", "reasoning": "shares 'discovered'"}],
})
SLOW = 20.0  # seconds a slow generation would take if nobody stopped it


@pytest.fixture
def server():
    with start_server(model="extractive") as handle:
        yield handle


async def _wait_for_disconnects(server, n: int, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while len(server.disconnects) < n and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
async def test_a_timed_out_call_is_stopped_at_the_server_and_the_next_is_not_queued(server, streaming):
    llm = OpenAICompletion(server.base_url, "k", "m", timeout=1.0, max_retries=0)
    try:
        server.slow_next(1, SLOW)
        t0 = time.monotonic()
        with pytest.raises(LlmError) as raised:
            if streaming:
                async for _ in llm.stream(PROMPT.system, PROMPT.user):
                    pass
            else:
                await llm.complete(PROMPT.system, PROMPT.user)
        assert time.monotonic() - t0 < SLOW / 2
        message = str(raised.value)
        assert "1s" in message and "--llm-timeout" in message and ENV_TIMEOUT in message, message

        await _wait_for_disconnects(server, 1)
        [gone] = server.disconnects
        assert gone.template_id == "kg-synthesis"
        assert gone.after_seconds < SLOW / 2  # it stopped generating, it did not run to the end

        t1 = time.monotonic()
        answer = await llm.complete(PROMPT.system, PROMPT.user)  # answered at once, not after the abandoned one
        assert time.monotonic() - t1 < SLOW / 4
        assert "Marie Curie" in answer.text and answer.in_token > 0 and answer.out_token > 0
    finally:
        await llm.aclose()


async def test_a_cancelled_caller_closes_the_connection(server):
    llm = OpenAICompletion(server.base_url, "k", "m", timeout=60.0, max_retries=0)
    try:
        server.slow_next(1, SLOW)
        task = asyncio.create_task(llm.complete(PROMPT.system, PROMPT.user))
        while not server.chat_requests():
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await _wait_for_disconnects(server, 1)
        assert len(server.disconnects) == 1
    finally:
        await llm.aclose()


async def test_without_a_disconnect_the_server_queues_behind_a_slow_generation(server):
    """The behaviour cancellation avoids: a generation nobody stops holds the slot for its whole time."""
    llm = OpenAICompletion(server.base_url, "k", "m", timeout=30.0, max_retries=0)
    try:
        server.slow_next(1, 1.5)
        t0 = time.monotonic()
        first = asyncio.create_task(llm.complete(PROMPT.system, PROMPT.user))
        while not server.chat_requests():
            await asyncio.sleep(0.02)
        second = await llm.complete(PROMPT.system, PROMPT.user)
        assert time.monotonic() - t0 >= 1.5  # waited for the slot
        assert (await first).text == second.text
        assert server.disconnects == []
    finally:
        await llm.aclose()


async def test_complete_streams_internally_and_keeps_usage(server):
    llm = OpenAICompletion(server.base_url, "k", "m", timeout=10.0, max_retries=0)
    plain = OpenAICompletion(server.base_url, "k", "m", timeout=10.0, max_retries=0, stream_completions=False)
    try:
        streamed = await llm.complete(PROMPT.system, PROMPT.user)
        whole = await plain.complete(PROMPT.system, PROMPT.user)
        bodies = [r.body for r in server.chat_requests()]
        assert bodies[0]["stream"] is True and bodies[0]["stream_options"] == {"include_usage": True}
        assert "stream" not in bodies[1]
        assert streamed == whole  # same text, usage, model and finish reason either way
    finally:
        await llm.aclose()
        await plain.aclose()


async def test_an_answer_cut_short_is_asked_again_not_taken_as_whole(server):
    """llama-cpp-python ends a stream early, well formed, when another request arrives: no finish reason."""
    llm = OpenAICompletion(server.base_url, "k", "m", timeout=10.0, max_retries=1, backoff_initial=0.01)
    once = OpenAICompletion(server.base_url, "k", "m", timeout=10.0, max_retries=0)
    try:
        whole = await llm.complete(PROMPT.system, PROMPT.user)
        server.cut_next(1)
        again = await llm.complete(PROMPT.system, PROMPT.user)
        assert again == whole and len(server.chat_requests()) == 3  # the cut answer was asked for again
        server.cut_next(1)
        with pytest.raises(LlmError, match="cut short.*--interrupt_requests False"):
            await once.complete(PROMPT.system, PROMPT.user)
        server.cut_next(1)
        pieces = []
        with pytest.raises(LlmError, match="cut short"):
            async for chunk in once.stream(PROMPT.system, PROMPT.user):
                pieces.append(chunk.text)
        assert pieces and "".join(pieces) != whole.text and whole.text.startswith("".join(pieces))
    finally:
        await llm.aclose()
        await once.aclose()
