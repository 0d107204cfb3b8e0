"""PulsarBackend._guard: a broker time-out on creating a producer or subscribing is tried again
while the broker's port accepts connections; other errors, and time-outs of a broker that refuses
connections, are not."""

from __future__ import annotations

import socket

import pulsar
import pulsar.asyncio
import pytest

from trustgraph_base.pubsub import BackendUnavailable
from trustgraph_base.pubsub.pulsar import OPERATION_ATTEMPTS, PulsarBackend, broker_accepts_connections


@pytest.fixture
def listening_url():
    """A ``pulsar://`` URL whose port accepts TCP connections (a listening socket, no broker behind it)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"pulsar://127.0.0.1:{server.getsockname()[1]}"


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


async def test_a_time_out_is_tried_again_and_the_call_succeeds(listening_url):
    backend = PulsarBackend(listening_url, admin_url=None, connect_timeout=1)
    start, calls = failing([pulsar.Result.Timeout] * (OPERATION_ATTEMPTS - 1))
    assert await backend._guard("subscribe to t", start) == "done"
    assert len(calls) == OPERATION_ATTEMPTS


async def test_time_outs_on_every_attempt_end_in_a_clear_error(listening_url):
    backend = PulsarBackend(listening_url, admin_url=None, connect_timeout=1)
    start, calls = failing([pulsar.Result.Timeout] * OPERATION_ATTEMPTS)
    with pytest.raises(BackendUnavailable, match=f"cannot subscribe to t on Pulsar at {listening_url}"):
        await backend._guard("subscribe to t", start)
    assert len(calls) == OPERATION_ATTEMPTS


async def test_other_errors_are_not_retried():
    backend = PulsarBackend("pulsar://127.0.0.1:1", admin_url=None, connect_timeout=1)
    start, calls = failing([pulsar.Result.ConnectError])
    with pytest.raises(BackendUnavailable):
        await backend._guard("create a producer for t", start)
    assert len(calls) == 1


async def test_a_time_out_of_a_broker_that_refuses_connections_is_not_retried():
    backend = PulsarBackend("pulsar://127.0.0.1:1", admin_url=None, connect_timeout=1)
    start, calls = failing([pulsar.Result.Timeout] * OPERATION_ATTEMPTS)
    with pytest.raises(BackendUnavailable, match="cannot subscribe to t on Pulsar at pulsar://127.0.0.1:1"):
        await backend._guard("subscribe to t", start)
    assert len(calls) == 1


def test_reachability_reads_every_broker_of_the_url(listening_url):
    port = listening_url.rsplit(":", 1)[1]
    assert broker_accepts_connections(listening_url, 1)
    assert broker_accepts_connections(f"pulsar://127.0.0.1:1,127.0.0.1:{port}", 1)
    assert not broker_accepts_connections("pulsar://127.0.0.1:1", 1)
