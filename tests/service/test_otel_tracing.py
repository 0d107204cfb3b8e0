"""OpenTelemetry spans of a GraphRAG query, exported to a real receiver (Arize Phoenix) and read back from it.

On the in-process bus with SQLite and (integration tier) on real Pulsar with Cassandra: one query is one
trace whose spans cover every service hop with the right parents, its model spans carry the token counts
the PROV trace records, every span names the Question (``trustgraph.explain_id``) and the Question names
the trace (``tg:otelTraceId``).  Phoenix comes from ``scripts/phoenix.sh`` (a venv of its own); when it
cannot be installed the tests skip, and fail under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from trustgraph_base import telemetry
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance.walk import collect_trace
from trustgraph_base.rdf.validation import validate_trace
from trustgraph_base.schema import GraphRagQuery
from trustgraph_flow.embedded import QUERY_STACK

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]
PHOENIX_START_SECONDS = 180.0


def _required() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.environ.get("REQUIRE_INTEGRATION") == "1"


def _unavailable(message: str) -> None:
    if _required():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Phoenix:
    """A running Phoenix server: its OTLP/HTTP endpoint and its REST API."""

    url: str
    log: Path

    @property
    def traces_endpoint(self) -> str:
        return f"{self.url}/v1/traces"

    def spans(self, trace_id: str, *, at_least: int, timeout: float = 60.0) -> list[dict]:
        """The spans of ``trace_id`` once the trace is whole: ``at_least`` spans, a root, every parent present,
        and no new span for a second (Phoenix ingests in the background)."""
        deadline = time.monotonic() + timeout
        found: list[dict] = []
        seen = -1
        while True:
            found = [s for s in self._all_spans() if s["context"]["trace_id"] == trace_id]
            ids = {s["context"]["span_id"] for s in found}
            whole = (len(found) >= at_least and any(not s["parent_id"] for s in found)
                     and all(s["parent_id"] in ids for s in found if s["parent_id"]))
            if (whole and len(found) == seen) or time.monotonic() > deadline:
                return found
            seen = len(found) if whole else -1
            time.sleep(1.0)

    def _all_spans(self) -> list[dict]:
        out: list[dict] = []
        cursor = ""
        while True:
            query = "limit=1000" + (f"&cursor={cursor}" if cursor else "")
            with urllib.request.urlopen(f"{self.url}/v1/projects/default/spans?{query}", timeout=30) as r:
                page = json.loads(r.read())
            out += page["data"]
            cursor = page.get("next_cursor") or ""
            if not cursor:
                return out


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory) -> Iterator[Phoenix]:
    """Phoenix serving on free ports of 127.0.0.1 with a working directory of its own."""
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "phoenix.sh"), "ensure"], capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0:
        _unavailable(f"cannot install Arize Phoenix (scripts/phoenix.sh): {proc.stderr.strip()[-1000:]}")
    bin_dir = Path(proc.stdout.strip().splitlines()[-1])
    work = tmp_path_factory.mktemp("phoenix")
    port = _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(_free_port())}
    for name in [n for n in env if n.startswith("OTEL_")]:
        del env[name]  # Phoenix must not trace itself into the suite's settings
    log = work / "phoenix.log"
    with open(log, "wb") as out:
        server = subprocess.Popen([str(bin_dir / "phoenix"), "serve"], env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + PHOENIX_START_SECONDS
        while True:
            if server.poll() is not None:
                _unavailable(f"phoenix serve exited with {server.returncode}: "
                             f"{log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                _unavailable(f"phoenix serve not ready after {PHOENIX_START_SECONDS:.0f} s")
            time.sleep(1)
        yield Phoenix(url, log)
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)


@pytest.fixture
def tracing(phoenix) -> Iterator[Phoenix]:
    """Spans of this process go to ``phoenix`` for the test; tracing is off again afterwards."""
    assert telemetry.install_state("trustgraph-tests", endpoint=phoenix.traces_endpoint)
    try:
        yield phoenix
    finally:
        telemetry.shutdown()


def _flat(attributes: dict, prefix: str = "") -> dict[str, Any]:
    """Phoenix nests dotted attribute names (``gen_ai.usage`` -> {"gen_ai": {"usage": ...}}); flatten them."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, name + "."))
        else:
            out[name] = value
    return out


def _script(template_id, terms, messages):
    if template_id == "kg-edge-selection":
        chosen = [k for k in terms["knowledge"] if "polonium" in (k["s"] + " " + k["o"]).lower()][:3]
        return "\n".join(json.dumps({"id": k["id"], "reasoning": "about polonium", "score": 0.9,
                                     "concept": "polonium"}) for k in chosen)
    if template_id == "kg-synthesis":
        return "From the graph: " + "; ".join(f"{k['s']} {k['p']} {k['o']}" for k in terms["knowledge"]) + "."
    raise AssertionError(f"unexpected template {template_id}")


def _values(triples, subject: str, predicate: str) -> list[str]:
    return [t.o.value for t in triples if t.s.value == subject and t.p.value == predicate]


#: The hops of a GraphRAG query: (service, the span's name in that service).
HOPS = [("graph-rag", "graph-rag request"), ("embeddings", "embeddings request"),
        ("graph-embeddings-query", "graph-embeddings-query request"), ("triples-query", "triples-query request"),
        ("prompt", "prompt request"), ("text-completion", "text-completion request"),
        ("triples-write", "triples-write input"), ("librarian", "librarian answers")]


async def test_graph_rag_query_is_one_trace_linked_to_its_prov_trace(deployment, tracing, llm_server, llm_settings):
    llm_server.set_script(_script)
    from trustgraph_cli.connection import Connection

    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        async with Connection.attach(stack, timeout=60) as conn:
            client = await conn.client("graph-rag")
            msgs = [m async for m in client.stream(GraphRagQuery(
                query="Who discovered polonium?", user=deployment.user, collection=deployment.collection,
                streaming=True))]
        await stack.wait_idle()
        final = msgs[-1]
        assert final.end_of_session and final.error is None, final.error
        q_uri = next(m.explain_id for m in msgs if m.message_type == "explain")
        triples_store = next(s for s in stack.stores if hasattr(s, "list_traces"))

        async def q(patterns):
            return [t for r in triples_store.query_many(deployment.user, deployment.collection, patterns) for t in r]

        trace = await collect_trace(q, q_uri)
    finally:
        await stack.stop()
    assert validate_trace(trace).conforms

    # the Question names the OpenTelemetry trace
    [trace_id] = _values(trace, q_uri, ns.TG_OTEL_TRACE_ID)
    assert len(trace_id) == 32 and int(trace_id, 16)
    assert telemetry.flush()
    spans = tracing.spans(trace_id, at_least=len(HOPS) + 4)
    by_id = {s["context"]["span_id"]: s for s in spans}
    attrs = {s["context"]["span_id"]: _flat(s["attributes"]) for s in spans}

    # one trace, one root (this test's client call), every other span's parent in the trace
    roots = [s for s in spans if not s["parent_id"]]
    assert [r["name"] for r in roots] == ["call graph-rag"], [r["name"] for r in roots]
    assert all(s["parent_id"] in by_id for s in spans if s["parent_id"]), "a span's parent is missing"

    def ancestors(span: dict) -> list[str]:
        names = []
        while span["parent_id"]:
            span = by_id[span["parent_id"]]
            names.append(span["name"])
        return names

    # every service hop, each a child of the client call that reached it
    names = {s["name"] for s in spans}
    for service, name in HOPS:
        assert name in names, f"no span of {service} ({name}); spans: {sorted(names)}"
    for s in spans:
        a = attrs[s["context"]["span_id"]]
        if s["name"].endswith(" request"):  # a service's span: the child of the call that sent its request
            parent = by_id[s["parent_id"]]
            assert parent["name"].startswith("call "), (s["name"], parent["name"])
            queue = attrs[parent["context"]["span_id"]]["messaging.destination.name"]
            assert queue == a["messaging.destination.name"], (s["name"], parent["name"])
            assert a[telemetry.SERVICE] == s["name"].removesuffix(" request")
    chats = [s for s in spans if s["name"].startswith("chat ")]
    assert chats, "no model call span"
    for chat in chats:
        assert ancestors(chat)[:5] == ["text-completion request", "call text-completion", "prompt request",
                                      "call prompt", "graph-rag request"], ancestors(chat)
    for write in [s for s in spans if s["name"] == "triples-write input"]:
        assert "graph-rag request" in ancestors(write)

    # the model spans carry GenAI attributes, and the token counts the PROV trace records
    recorded = sorted((int(i), int(o)) for stage in trace_stages(trace)
                      for i, o in zip(_values(trace, stage, ns.TG_IN_TOKEN), _values(trace, stage, ns.TG_OUT_TOKEN),
                                      strict=True))
    spent = sorted((attrs[c["context"]["span_id"]]["gen_ai.usage.input_tokens"],
                    attrs[c["context"]["span_id"]]["gen_ai.usage.output_tokens"]) for c in chats)
    assert len(recorded) == 2 and spent == recorded, (spent, recorded)
    for chat in chats:
        a = attrs[chat["context"]["span_id"]]
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "scripted"
        assert a["gen_ai.response.finish_reasons"] == ["stop"]
        assert "gen_ai.input.messages" not in a and "input.value" not in a  # content only on opt-in
    embeds = [s for s in spans if s["name"].startswith("embeddings ") and not s["name"].endswith(" request")]
    assert embeds and all(attrs[e["context"]["span_id"]]["gen_ai.operation.name"] == "embeddings" for e in embeds)
    rag = next(attrs[s["context"]["span_id"]] for s in spans if s["name"] == "graph-rag request")
    assert rag["trustgraph.graph_rag.edges_selected"] == len(_values(trace, _focus(trace), ns.TG_SELECTED_EDGE))

    # every span of the query names its Question
    missing = sorted(s["name"] for s in spans if attrs[s["context"]["span_id"]].get(telemetry.EXPLAIN_ID) != q_uri)
    assert not missing, f"spans without {telemetry.EXPLAIN_ID}: {missing}"


def trace_stages(trace) -> list[str]:
    """The stages of a trace that record usage (Focus, Synthesis)."""
    return sorted({t.s.value for t in trace if t.p.value == ns.TG_IN_TOKEN})


def _focus(trace) -> str:
    return next(t.s.value for t in trace if t.p.value == ns.RDF_TYPE and t.o.value == ns.TG_FOCUS)


async def test_tracing_off_records_no_trace_id(deployment, llm_server, llm_settings):
    """Off (the default), nothing is traced: the Question has no ``tg:otelTraceId``."""
    llm_server.set_script(_script)
    from trustgraph_cli.connection import Connection

    telemetry.shutdown()
    assert not telemetry.enabled()
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        async with Connection.attach(stack, timeout=60) as conn:
            client = await conn.client("graph-rag")
            msgs = [m async for m in client.stream(GraphRagQuery(
                query="Who discovered polonium?", user=deployment.user, collection=deployment.collection))]
        await stack.wait_idle()
        q_uri = next(m.explain_id for m in msgs if m.message_type == "explain")
        triples_store = next(s for s in stack.stores if hasattr(s, "list_traces"))

        async def q(patterns):
            return [t for r in triples_store.query_many(deployment.user, deployment.collection, patterns) for t in r]

        trace = await collect_trace(q, q_uri)
    finally:
        await stack.stop()
    assert _values(trace, q_uri, ns.TG_QUERY) and not _values(trace, q_uri, ns.TG_OTEL_TRACE_ID)
