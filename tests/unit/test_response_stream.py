"""ResponseStream: queued explain events keep their place among awaited messages; a failed send is not lost."""

from __future__ import annotations

import asyncio

import pytest

from trustgraph_flow.common.response_stream import ResponseStream

pytestmark = pytest.mark.unit


class Client:
    """Receives messages the way a response producer does: each send takes a little while."""

    def __init__(self, fail_on: str = ""):
        self.got: list[str] = []
        self.fail_on = fail_on

    async def emit(self, message: str) -> None:
        await asyncio.sleep(0.005 if message.startswith("explain") else 0)
        if message == self.fail_on:
            raise ConnectionError(f"could not send {message}")
        self.got.append(message)


async def test_queued_and_awaited_messages_arrive_in_the_order_they_were_produced():
    client = Client()
    stream = ResponseStream(client.emit)
    stream.send_soon("explain question")
    stream.send_soon("explain exploration")
    assert client.got == []                      # the query goes on while they are sent
    await stream.send("chunk 1")                 # ... but no answer text overtakes them
    stream.send_soon("explain synthesis")
    await stream.send("final")
    assert client.got == ["explain question", "explain exploration", "chunk 1", "explain synthesis", "final"]


async def test_a_failed_queued_send_fails_the_next_awaited_one_and_nothing_after_it_goes_out():
    client = Client(fail_on="explain exploration")
    stream = ResponseStream(client.emit)
    stream.send_soon("explain question")
    stream.send_soon("explain exploration")
    stream.send_soon("explain focus")            # never sent: no gaps in what the client sees
    with pytest.raises(ConnectionError, match="explain exploration"):
        await stream.send("chunk 1")
    await stream.settle()                        # nothing left queued: returns at once
    await stream.send("error, end of session")   # the failure path still reaches the client
    assert client.got == ["explain question", "error, end of session"]
