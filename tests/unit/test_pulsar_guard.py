"""PulsarBackend._guard: a broker time-out on creating a producer or subscribing is tried again,
other errors are not."""

from __future__ import annotations

import pulsar
import pulsar.asyncio
import pytest

from trustgraph_base.pubsub import BackendUnavailable
from trustgraph_base.pubsub.pulsar import OPERATION_ATTEMPTS, PulsarBackend


def failing(results: list):
    """A ``start`` whose calls fail with the given Pulsar results in turn, then return ``"done"``."""
    calls = []

    def start():
        async def call():
            calls.append(len(calls))
            if len(calls) <= len(results):
                raise pulsar.asyncio.PulsarException(results[len(calls) - 1])
            return "done"
        return call()

    return start, calls


async def test_a_time_out_is_tried_again_and_the_call_succeeds():
    backend = PulsarBackend("pulsar://127.0.0.1:1", admin_url=None, connect_timeout=1)
    start, calls = failing([pulsar.Result.Timeout] * (OPERATION_ATTEMPTS - 1))
    assert await backend._guard("subscribe to t", start) == "done"
    assert len(calls) == OPERATION_ATTEMPTS


async def test_time_outs_on_every_attempt_end_in_a_clear_error():
    backend = PulsarBackend("pulsar://127.0.0.1:1", admin_url=None, connect_timeout=1)
    start, calls = failing([pulsar.Result.Timeout] * OPERATION_ATTEMPTS)
    with pytest.raises(BackendUnavailable, match="cannot subscribe to t on Pulsar at pulsar://127.0.0.1:1"):
        await backend._guard("subscribe to t", start)
    assert len(calls) == OPERATION_ATTEMPTS


async def test_other_errors_are_not_retried():
    backend = PulsarBackend("pulsar://127.0.0.1:1", admin_url=None, connect_timeout=1)
    start, calls = failing([pulsar.Result.ConnectError])
    with pytest.raises(BackendUnavailable):
        await backend._guard("create a producer for t", start)
    assert len(calls) == 1
