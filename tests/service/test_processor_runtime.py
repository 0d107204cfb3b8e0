"""The processor runtime as a user meets it: console scripts, signals, metrics, groups, unreachable brokers,
and the model services over the bus."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

from trustgraph_base.processor import RequestResponseClient
from trustgraph_base.pubsub import BackendUnavailable, open_backend, request_queue, response_queue
from trustgraph_base.schema import (
    EmbeddingsRequest,
    PromptRequest,
    TextCompletionRequest,
    TriplesQueryRequest,
    TriplesQueryResponse,
)

pytestmark = [pytest.mark.service, pytest.mark.timeout(300)]

BIN = os.path.dirname(sys.executable)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_unreachable_pulsar_fails_fast_with_a_clear_error():
    backend = open_backend("pulsar", url="pulsar://127.0.0.1:1", admin_url=None, connect_timeout=2.0)
    t0 = time.monotonic()
    with pytest.raises(BackendUnavailable, match="pulsar://127.0.0.1:1"):
        await backend.create_producer(request_queue("triples"))
    assert time.monotonic() - t0 < 15
    await backend.close()


def test_service_script_reports_unreachable_broker_and_exits(tmp_path):
    t0 = time.monotonic()
    proc = subprocess.run([f"{BIN}/triples-query", "--pubsub", "pulsar", "--pulsar-url", "pulsar://127.0.0.1:1",
                           "--store", "sqlite", "--data-dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PULSAR_ADMIN_URL": "http://127.0.0.1:1"})
    assert proc.returncode == 2
    assert "cannot" in proc.stderr and "pulsar://127.0.0.1:1" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - t0 < 45


def test_a_service_that_fails_exits_1_with_its_traceback_logged(tmp_path):
    config = tmp_path / "group.toml"
    config.write_text(textwrap.dedent("""
        pubsub = "memory"
        [[processor]]
        class = "trustgraph_flow.query.triples.service:TriplesQueryService"
        [processor.params]
        store = "no-such-store"
    """))
    proc = subprocess.run([f"{BIN}/tg-processor-group", "-c", str(config)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "the service failed" in proc.stderr and "no-such-store" in proc.stderr


@pytest.mark.integration
def test_group_runner_serves_over_pulsar_stops_on_sigterm_and_exposes_metrics(tmp_path, pulsar_service):
    flow = f"grp{os.getpid()}{int(time.time()) % 100000}"
    port = free_port()
    config = tmp_path / "group.toml"
    config.write_text(textwrap.dedent(f"""
        pubsub = "pulsar"
        pulsar_url = "{pulsar_service.url}"
        flow = "{flow}"
        [[processor]]
        class = "trustgraph_flow.query.triples.service:TriplesQueryService"
        [processor.params]
        store = "sqlite"
        store_options = {{ home = "{tmp_path}" }}
        [[processor]]
        class = "trustgraph_flow.storage.triples.service:TriplesWriteService"
        [processor.params]
        store = "sqlite"
        store_options = {{ home = "{tmp_path}" }}
    """))
    proc = subprocess.Popen([f"{BIN}/tg-processor-group", "-c", str(config), "--metrics-port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PULSAR_ADMIN_URL": pulsar_service.admin_url})
    try:
        async def ask() -> TriplesQueryResponse:
            backend = open_backend("pulsar", url=pulsar_service.url, admin_url=pulsar_service.admin_url)
            client = RequestResponseClient(backend, "triples", request_queue("triples", flow),
                                           response_queue("triples", flow), TriplesQueryRequest,
                                           TriplesQueryResponse, timeout=5)
            await client.start()
            try:
                for _ in range(30):  # the group needs a moment to subscribe
                    try:
                        return await client.request(TriplesQueryRequest(user="grp", collection="c"))
                    except TimeoutError:
                        continue
                raise AssertionError("the group never answered")
            finally:
                await client.stop()
                await backend.close()

        reply = asyncio.run(ask())
        assert reply.error is None and reply.is_final and reply.triples == []
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        ok = [line for line in metrics.splitlines() if line.startswith("tg_messages_total{")
              and 'processor="triples-query"' in line and 'outcome="ok"' in line]
        assert ok and float(ok[0].rsplit(" ", 1)[1]) >= 1
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, f"the group exited {proc.returncode} on SIGTERM; its log ends:\n{stderr[-3000:]}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def _call(stack, service, request):
    from trustgraph_cli.connection import Connection

    async with Connection.attach(stack, timeout=60) as conn:
        client = await conn.client(service)
        return [m async for m in client.stream(request)]


async def test_model_services_over_the_bus(tmp_path, llm_server_extractive):
    from trustgraph_flow.embedded import start_embedded

    stack = await start_embedded(tmp_path, only=("embeddings", "prompt", "text-completion"), llm="openai",
                                 settings={"text-completion": {"base_url": llm_server_extractive.base_url,
                                                               "api_key": "k", "model": "extractive",
                                                               "max_retries": 1}})
    try:
        emb = (await _call(stack, "embeddings", EmbeddingsRequest(texts=["radium", "polonium"])))[0]
        assert emb.error is None and len(emb.vectors) == 2 and len(emb.vectors[0]) == 384
        assert emb.model == "all-MiniLM-L6-v2-onnx-int8"
        chunks = await _call(stack, "text-completion", TextCompletionRequest(
            prompt="say hi", streaming=True))
        assert chunks[-1].end_of_stream
        knowledge = [{"id": "e1", "s": "Marie Curie", "p": "discovered", "o": "polonium"},
                     {"id": "e2", "s": "Paris", "p": "capital of", "o": "France"}]
        sel = (await _call(stack, "prompt", PromptRequest(id="kg-edge-selection", terms={
            "query": json.dumps("Who discovered polonium?"), "knowledge": json.dumps(knowledge)})))[-1]
        assert sel.error is None and [o["id"] for o in json.loads(sel.object)] == ["e1"]
        llm_server_extractive.fail_next(5, status=500, message="boom")
        bad = (await _call(stack, "text-completion", TextCompletionRequest(prompt="x")))[-1]
        assert bad.error is not None and bad.error.type == "llm-error"
        assert llm_server_extractive.base_url in bad.error.message and "500" in bad.error.message
        llm_server_extractive.clear_faults()
        unknown = (await _call(stack, "prompt", PromptRequest(id="no-such-template", terms={})))[-1]
        assert unknown.error is not None and "no-such-template" in unknown.error.message
    finally:
        await stack.stop()


@pytest.fixture
def llm_server_extractive():
    from trustgraph_flow.model.testserver import start_server

    server = start_server("extractive")
    yield server
    server.stop()
