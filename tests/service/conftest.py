"""Fixtures that run real processors: on the in-process bus with SQLite ("embedded"), and on
real Apache Pulsar with Apache Cassandra ("distributed", the integration tier).

The sample corpus is ingested once per session and deployment by the real pipeline (pattern
extractor, packaged embedder); each test then starts the query services it needs against
that data, with an LLM endpoint served by the project's local OpenAI-compatible server.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from trustgraph_flow.embedded import INGEST, start_embedded

DEPLOYMENTS = [
    pytest.param("embedded", marks=pytest.mark.service, id="embedded"),
    pytest.param("distributed", marks=pytest.mark.integration, id="distributed"),
]


@dataclass
class Deployment:
    """Where a test's processors run and where the data lives."""

    kind: str
    user: str
    collection: str = "default"
    home: Path | None = None
    pulsar: Any = None
    cassandra: Any = None
    documents: list = field(default_factory=list)

    def store_kwargs(self) -> dict:
        if self.kind == "embedded":
            return {"home": self.home}
        from trustgraph_base.store.cassandra.connection import CassandraConfig

        return {"store": "cassandra",
                "store_options": {"config": CassandraConfig(hosts=(self.cassandra.host,),
                                                            port=int(self.cassandra.port))}}

    def backend(self):
        from trustgraph_base.pubsub import open_backend

        if self.kind == "embedded":
            return open_backend("memory")
        return open_backend("pulsar", url=self.pulsar.url, admin_url=self.pulsar.admin_url, nack_delay=0.2)

    async def start(self, only: tuple[str, ...], *, llm: str = "extractive", settings: dict | None = None,
                    flow: str | None = None):
        return await start_embedded(only=only, llm=llm, settings=settings, backend=self.backend(),
                                    flow=flow or f"f{uuid.uuid4().hex[:8]}", **self.store_kwargs())


def _drop_keyspaces(deployment: Deployment) -> None:
    if deployment.kind != "distributed":
        return
    from trustgraph_base.store.cassandra.connection import CassandraConfig, connect
    from trustgraph_base.store.names import storage_name

    session = connect(CassandraConfig(hosts=(deployment.cassandra.host,), port=int(deployment.cassandra.port)))
    for prefix in ("tg", "tgv"):
        try:
            session.execute(f"DROP KEYSPACE IF EXISTS {storage_name(prefix, deployment.user)}", timeout=180)
        except Exception as e:  # noqa: BLE001 - a slow drop on a busy node must not fail the tests
            import warnings

            warnings.warn(f"could not drop keyspace of {deployment.user}: {e}", stacklevel=2)


async def ingest_sample_corpus(deployment: Deployment) -> list:
    """Load the sample corpus through the real pipeline; return the documents loaded."""
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.load import load_documents
    from trustgraph_flow.ingest.sample_corpus import sample_documents

    docs = sample_documents()
    stack = await deployment.start(tuple(dict.fromkeys(INGEST)), llm="extractive")
    try:
        async with Connection.attach(stack, timeout=180) as conn:
            await load_documents(conn, deployment.user, deployment.collection,
                                 [(d.id, d.title, d.kind, d.content) for d in docs], idle_timeout=180, show=False)
        await stack.wait_idle()
    finally:
        await stack.stop()
    return docs


@pytest.fixture(scope="session", params=DEPLOYMENTS)
def deployment(request, tmp_path_factory) -> Deployment:
    """A deployment with the sample corpus loaded (once per session and kind)."""
    kind = request.param
    d = Deployment(kind=kind, user=f"svc{uuid.uuid4().hex[:8]}")
    if kind == "embedded":
        d.home = tmp_path_factory.mktemp("tg-home")
    else:
        d.pulsar = request.getfixturevalue("pulsar_service")
        d.cassandra = request.getfixturevalue("cassandra_service")
    d.documents = asyncio.run(ingest_sample_corpus(d))
    yield d
    _drop_keyspaces(d)


@pytest.fixture
def llm_server():
    """The project's OpenAI-compatible server, scripted per test through ``server.script``."""
    from trustgraph_flow.model.testserver import start_server

    holder: dict[str, Any] = {"script": None}

    def script(template_id, terms, messages):
        if holder["script"] is None:
            raise RuntimeError("no script set for this test")
        return holder["script"](template_id, terms, messages)

    server = start_server("scripted", script=script)
    server.set_script = lambda fn: holder.__setitem__("script", fn)
    yield server
    server.stop()


def _llm_settings(server, **extra) -> dict:
    """Processor settings that point the text-completion service at the test server."""
    settings = {"text-completion": {"base_url": server.base_url, "api_key": "test-key", "model": "scripted",
                                    "max_retries": 1, "timeout": 20.0}}
    for pid, params in extra.items():
        settings.setdefault(pid, {}).update(params)
    return settings


@pytest.fixture
def llm_settings():
    """``llm_settings(server, **{processor_id: params})`` -> processor settings for start()."""
    return _llm_settings
