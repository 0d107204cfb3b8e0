"""The service manifest (trustgraph_flow/manifest.py) against what it describes.

Every processor is declared once in the manifest; these tests hold the other places to it:
pyproject.toml's console scripts, each processor's class (its id, the consumers, producers and
clients it really adds, the store options its script offers), and the processor sets the
``tg-*`` commands and the embedded stack derive from it.
"""

from __future__ import annotations

import argparse
import importlib
import tomllib
from pathlib import Path

import pytest

from trustgraph_base.processor.launcher import ConfigurationError, add_common_args, build_group
from trustgraph_base.pubsub.memory import MemoryBackend
from trustgraph_base.pubsub.pulsar import PulsarBackend
from trustgraph_base.pubsub.topics import flow_queue, notify_queue, request_queue
from trustgraph_flow.common.stores import STORE_FLAGS
from trustgraph_flow.manifest import FLOW_NAMES, PROCESSORS, closure, processor_class
from trustgraph_flow.storage.triples.service import TriplesWriteService

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def test_every_service_script_of_pyproject_is_a_manifest_entry_and_back():
    services = {name: target for name, target in SCRIPTS.items() if not name.startswith("tg-")}
    assert services == {e.id: e.entry_point for e in PROCESSORS.values()}
    assert SCRIPTS["tg-processor-group"] == "trustgraph_flow.manifest:group_main"


@pytest.mark.parametrize("pid", list(PROCESSORS))
def test_the_entry_names_its_class_and_the_runner_of_its_script(pid):
    entry = PROCESSORS[pid]
    cls = processor_class(pid)
    assert cls.default_id == pid
    module = importlib.import_module(entry.entry_point.partition(":")[0])
    assert callable(getattr(module, entry.runner))


def _full_configuration(pid: str, tmp_path: Path, monkeypatch) -> dict:
    """Constructor parameters under which ``pid`` adds every client it may have (an LLM configured)."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    params: dict = {"store": "sqlite", "store_options": {"home": tmp_path}} if PROCESSORS[pid].stores else {}
    params.update({
        "embeddings": {"embedder": object()},
        "prompt": {"llm": "openai"},
        "kg-extract": {"extractor": "llm"},
        "api-gateway": {"port": 0},
    }.get(pid, {}))
    return params


@pytest.mark.parametrize("pid", list(PROCESSORS))
def test_the_entry_says_what_the_processor_serves_calls_consumes_and_feeds(pid, tmp_path, monkeypatch):
    entry = PROCESSORS[pid]
    flow = "f"
    processor = processor_class(pid)(backend=MemoryBackend(), flow=flow, **_full_configuration(pid, tmp_path,
                                                                                            monkeypatch))
    consumed = {spec.queue for spec in processor._consumer_specs}
    produced = {spec.queue for spec in processor._producer_specs if spec.queue.startswith("flow:")}
    assert consumed == ({request_queue(s, flow) for s in entry.serves}
                        | {flow_queue(f, flow) for f in entry.consumes} | {notify_queue(b) for b in entry.hears})
    assert produced == {flow_queue(f, flow) for f in (*entry.feeds, *entry.starts)}
    assert {spec.service for spec in processor._client_specs} == set(entry.calls)
    for store in getattr(processor, "_owned_stores", ()):
        store.close()


def _parser(cls) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=cls.default_id)
    add_common_args(parser, cls.default_id)
    cls.add_args(parser)
    return parser


@pytest.mark.parametrize("pid", list(PROCESSORS))
def test_a_script_offers_the_store_flags_of_the_stores_it_keeps(pid):
    options = _parser(processor_class(pid))._option_string_actions
    kinds = PROCESSORS[pid].store_kinds
    assert ("--store" in options) == bool(kinds)
    assert {kind for kind, flag in STORE_FLAGS.items() if flag in options} == set(kinds)


def test_per_kind_flags_default_to_store_and_override_it():
    parser = _parser(processor_class("librarian"))
    params = processor_class("librarian").params_from_args(
        parser.parse_args(["--store", "cassandra", "--vector-store", "sqlite"]))
    assert params["store"] == "cassandra" and params["store_backends"] == {"vectors": "sqlite"}


def test_on_pulsar_a_store_service_given_no_store_refuses_to_start():
    with pytest.raises(ConfigurationError, match="--store.*TG_STORE"):
        TriplesWriteService(backend=PulsarBackend("pulsar://127.0.0.1:9", admin_url=None))


def test_on_pulsar_a_per_kind_backend_is_enough(tmp_path):
    writer = TriplesWriteService(backend=PulsarBackend("pulsar://127.0.0.1:9", admin_url=None),
                                 store_backends={"triples": "sqlite"}, store_options={"home": tmp_path})
    assert writer.store.backend == "sqlite"
    writer.store.close()


def test_group_entries_may_name_a_manifest_service(tmp_path):
    config = {"processor": [{"service": "triples-query", "params": {"store": "sqlite",
                                                                    "store_options": {"home": str(tmp_path)}}}]}
    [processor] = build_group(config, MemoryBackend(), processor_class)
    assert processor.id == "triples-query" and type(processor).__name__ == "TriplesQueryService"
    with pytest.raises(ConfigurationError, match="unknown processor 'nope'"):
        build_group({"processor": [{"service": "nope"}]}, MemoryBackend(), processor_class)


def test_the_closure_follows_clients_and_fed_flows_but_started_flows_only_when_named():
    assert closure("trace-list") == ("triples-query",)
    assert closure("triples", "librarian") == ("triples-write", "triples-query", "librarian")
    assert "decoder" not in closure("graph-rag")
    ingest = closure("librarian", "document-load")
    assert {"decoder", "chunker", "kg-extract", "graph-embeddings-write", "document-embeddings-write",
            "embeddings"} <= set(ingest)
    with pytest.raises(ValueError, match="unknown services or flows: nope"):
        closure("nope")


def test_the_closure_is_in_manifest_order_servers_before_their_clients():
    order = list(PROCESSORS)
    for e in PROCESSORS.values():
        for pid in closure(*e.calls):
            if pid != e.id:  # the agent calls itself: a supervisor's sub-agents are agent requests
                assert order.index(pid) < order.index(e.id), (e.id, pid)


def test_flows_named_in_the_manifest_are_the_flows_of_the_contracts():
    from trustgraph_flow.common.services import FLOWS, SERVICES

    assert set(FLOW_NAMES) == set(FLOWS)
    named = {s for e in PROCESSORS.values() for s in (*e.serves, *e.calls)}
    assert named == set(SERVICES)
    assert {s for e in PROCESSORS.values() for s in e.serves} == set(SERVICES)


def test_listing_traces_embedded_imports_neither_the_pdf_parser_nor_the_embedder(tmp_path):
    """Classes are imported only when their processor runs: the trace listing's stack is triples-query alone."""
    import subprocess
    import sys

    code = (
        "import asyncio, sys\n"
        "from trustgraph_cli.common import Target\n"
        "async def main():\n"
        f"    async with Target(None, {str(tmp_path)!r}, 30.0).connect(('trace-list',)) as conn:\n"
        "        print(sorted(p.id for p in conn.stack.processors))\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in ('pypdf', 'onnxruntime', 'tokenizers', 'cassandra') if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["['triples-query']", "[]"], r.stdout
