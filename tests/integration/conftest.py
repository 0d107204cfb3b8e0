"""Fixtures for tests that run the same behaviour on the in-process bus and on real Apache Pulsar."""

from __future__ import annotations

import uuid

import pytest

from trustgraph_base.pubsub import open_backend

BUS_PARAMS = [
    pytest.param("memory", marks=pytest.mark.service, id="memory"),
    pytest.param("pulsar", marks=pytest.mark.integration, id="pulsar"),
]


@pytest.fixture
def flow_name() -> str:
    """A unique flow name, so queues never collide between tests on a shared broker."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=BUS_PARAMS)
def bus_name(request) -> str:
    return request.param


@pytest.fixture
async def backend(request, bus_name):
    """A fresh backend of the parametrised kind (Pulsar from the session's real broker)."""
    if bus_name == "pulsar":
        svc = request.getfixturevalue("pulsar_service")
        url = svc["url"] if isinstance(svc, dict) else svc.url
        admin = (svc.get("admin_url") if isinstance(svc, dict) else getattr(svc, "admin_url", "")) or ""
        b = open_backend("pulsar", url=url, admin_url=admin, nack_delay=0.2)
    else:
        b = open_backend("memory", nack_delay=0.05)
    yield b
    await b.close()
