"""OpenTelemetry spans of a GraphRAG query, exported to a real receiver (Arize Phoenix) and read back from it.

On the in-process bus with SQLite and (integration tier) on real Pulsar with Cassandra: one query is one
trace whose spans cover every service hop with the right parents, its model spans carry the token counts
the PROV trace records, every span names the Question (``trustgraph.explain_id``) and the Question names
the trace (``tg:otelTraceId``).  The receiver is Phoenix (``tests/otel_receiver.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from otel_receiver import Phoenix, flat_attributes, start_phoenix

from trustgraph_base import telemetry
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance.walk import collect_trace
from trustgraph_base.rdf.validation import validate_trace
from trustgraph_base.schema import GraphRagQuery
from trustgraph_flow.embedded import QUERY_STACK

pytestmark = pytest.mark.timeout(600)

@pytest.fixture(scope="module")
def phoenix(tmp_path_factory) -> Iterator[Phoenix]:
    """Phoenix serving on free ports of 127.0.0.1 with a working directory of its own."""
    with start_phoenix(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


@pytest.fixture
def tracing(phoenix) -> Iterator[Phoenix]:
    """Spans of this process go to ``phoenix`` for the test; tracing is off again afterwards."""
    assert telemetry.install_state("trustgraph-tests", endpoint=phoenix.traces_endpoint)
    try:
        yield phoenix
    finally:
        telemetry.shutdown()


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


#: Where the explorer links an OpenTelemetry trace id (a Jaeger UI's trace page, as docs/observability.md shows).
TRACING_UI = "http://127.0.0.1:16686/trace/{trace_id}"

#: The hops of a GraphRAG query: (service, the span's name in that service).
HOPS = [("graph-rag", "graph-rag request"), ("embeddings", "embeddings request"),
        ("graph-embeddings-query", "graph-embeddings-query request"), ("triples-query", "triples-query request"),
        ("prompt", "prompt request"), ("text-completion", "text-completion request"),
        ("triples-write", "triples-write input"), ("librarian", "librarian answers")]


async def ask_graph_rag(stack, deployment, *, streaming: bool = False) -> list:
    """The messages of one GraphRAG question asked through the CLI's connection to ``stack``."""
    from trustgraph_cli.connection import Connection

    async with Connection.attach(stack, timeout=60) as conn:
        client = await conn.client("graph-rag")
        return [m async for m in client.stream(GraphRagQuery(
            query="Who discovered polonium?", user=deployment.user, collection=deployment.collection,
            streaming=streaming))]


def trace_reader(stack, deployment):
    """A reader of stored traces by their root URI, once ``stack`` is idle."""
    triples_store = next(s for s in stack.stores if hasattr(s, "list_traces"))

    async def q(patterns):
        return [t for r in triples_store.query_many(deployment.user, deployment.collection, patterns) for t in r]

    async def read(uri: str) -> list:
        await stack.wait_idle()
        return await collect_trace(q, uri)

    return read


async def test_graph_rag_query_is_one_trace_linked_to_its_prov_trace(deployment, tracing, llm_server, llm_settings):
    llm_server.set_script(_script)
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        msgs = await ask_graph_rag(stack, deployment, streaming=True)
        final = msgs[-1]
        assert final.end_of_session and final.error is None, final.error
        q_uri = next(m.explain_id for m in msgs if m.message_type == "explain")
        trace = await trace_reader(stack, deployment)(q_uri)
    finally:
        await stack.stop()
    assert validate_trace(trace).conforms

    # the Question names the OpenTelemetry trace
    [trace_id] = _values(trace, q_uri, ns.TG_OTEL_TRACE_ID)
    assert len(trace_id) == 32 and int(trace_id, 16)
    assert telemetry.flush()
    spans = tracing.spans(trace_id, at_least=len(HOPS) + 4)
    by_id = {s["context"]["span_id"]: s for s in spans}
    attrs = {s["context"]["span_id"]: flat_attributes(s["attributes"]) for s in spans}

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
    telemetry.shutdown()
    assert not telemetry.enabled()
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        msgs = await ask_graph_rag(stack, deployment)
        q_uri = next(m.explain_id for m in msgs if m.message_type == "explain")
        trace = await trace_reader(stack, deployment)(q_uri)
    finally:
        await stack.stop()
    assert _values(trace, q_uri, ns.TG_QUERY) and not _values(trace, q_uri, ns.TG_OTEL_TRACE_ID)


async def test_an_exporter_that_fails_never_fails_a_query(deployment, llm_server, llm_settings, monkeypatch, caplog):
    """Spans sent to an endpoint nobody listens on are dropped; the query answers and its trace is stored."""
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "10")  # export at once, so the failures happen during the query
    llm_server.set_script(_script)
    assert telemetry.install_state("trustgraph-tests", endpoint=f"http://127.0.0.1:{dead}/v1/traces")
    try:
        stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
        try:
            msgs = await ask_graph_rag(stack, deployment)
            q_uri = next(m.explain_id for m in msgs if m.message_type == "explain")
            trace = await trace_reader(stack, deployment)(q_uri)
        finally:
            await stack.stop()
        telemetry.flush(5000)
    finally:
        telemetry.shutdown()
    assert any(r.name.startswith("opentelemetry.exporter") and r.levelname == "ERROR" for r in caplog.records), \
        "the exporter did not fail: the test proves nothing"
    final = msgs[-1]
    assert final.end_of_session and final.error is None and "polonium" in "".join(
        m.response or "" for m in msgs).lower()
    assert validate_trace(trace).conforms and len(_values(trace, q_uri, ns.TG_OTEL_TRACE_ID)) == 1


@pytest.mark.parametrize("transport", ["rest", "websocket"])
async def test_a_gateway_call_with_a_traceparent_continues_the_callers_trace(deployment, tracing, transport):
    """A caller's W3C ``traceparent`` header (on the REST request, or on the WebSocket's upgrade request) makes
    the gateway's span, and so the whole query, part of the caller's trace."""
    import secrets

    import aiohttp
    from gateway_client import Socket

    from trustgraph_flow.gateway.auth import Auth
    from trustgraph_flow.gateway.service import ApiGateway

    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    headers = {"traceparent": f"00-{trace_id}-{caller}-01"}
    question = {"query": "Who discovered polonium?", "collection": deployment.collection}
    stack = await deployment.start(QUERY_STACK)
    gateway = ApiGateway(backend=stack.backend, flow=stack.flow, port=0, auth=Auth(default_user=deployment.user),
                         tracing_ui_url=TRACING_UI)
    await gateway.start()
    try:
        async with aiohttp.ClientSession() as http:
            if transport == "rest":
                async with http.post(f"{gateway.url}api/v1/flow/{stack.flow}/service/graph-rag", headers=headers,
                                     json={"workspace": "default", **question}) as resp:
                    status, body = resp.status, await resp.json()
            else:
                sock = Socket(await http.ws_connect(gateway.url + "api/v1/socket", headers=headers), stack.flow)
                assert (await sock.auth(""))["type"] == "auth-ok"
                frames = await sock.call("graph-rag", {**question, "streaming": True})
                await sock.ws.close()
                status, body = 200, {"response": "".join(f["response"].get("response") or "" for f in frames
                                                         if "response" in f)}
        await stack.wait_idle()
        telemetry.flush()
        spans = tracing.spans(trace_id, at_least=6, root_parent=caller)
        attrs = {s["context"]["span_id"]: flat_attributes(s["attributes"]) for s in spans}
        rag = next(s for s in spans if s["name"] == "graph-rag request")
        q_uri = attrs[rag["context"]["span_id"]][telemetry.EXPLAIN_ID]
        trace = await trace_reader(stack, deployment)(q_uri)
        async with aiohttp.ClientSession() as http, http.get(  # the explorer links the id to the tracing UI
                gateway.url + "explorer/trace", params={"uri": q_uri, "collection": deployment.collection}) as resp:
            page = await resp.text()
    finally:
        await gateway.stop()
        await stack.stop()
    assert status == 200 and "error" not in body and body["response"], body
    [root] = [s for s in spans if s["parent_id"] == caller]
    assert root["name"] == ("api-gateway graph-rag" if transport == "rest" else "api-gateway websocket request")
    by_id = {s["context"]["span_id"]: s for s in spans}
    parent = by_id[rag["parent_id"]]
    assert parent["name"] == "call graph-rag" and parent["parent_id"] == root["context"]["span_id"]
    assert _values(trace, q_uri, ns.TG_OTEL_TRACE_ID) == [trace_id]
    assert resp.status == 200 and f'href="{TRACING_UI.format(trace_id=trace_id)}"' in page, page[:2000]


def _agent_script(template_id, terms, messages):
    if template_id == "agent-react":
        if terms.get("history"):
            return "Thought: the graph answered.\nFinal Answer: Marie and Pierre Curie discovered polonium."
        return 'Thought: ask the graph.\nAction: knowledge-query\nArgs: {"question": "Who discovered polonium?"}'
    return _script(template_id, terms, messages)


async def test_an_agent_and_its_graph_rag_sub_query_are_one_trace(deployment, tracing, llm_server, llm_settings):
    """The agent's tool call runs a GraphRAG sub-query in the same OpenTelemetry trace; each Question records it,
    each span names the Question of the query it worked for, and the model spans' tokens are those both PROV
    traces record."""
    import uuid

    from trustgraph_base.schema import AgentRequest
    from trustgraph_cli.connection import Connection

    llm_server.set_script(_agent_script)
    sid = f"otel-{uuid.uuid4().hex[:8]}"
    root = f"urn:trustgraph:agent:{sid}"
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        async with Connection.attach(stack, timeout=60) as conn:
            client = await conn.client("agent")
            msgs = [m async for m in client.stream(AgentRequest(
                question="Who discovered polonium?", user=deployment.user, collection=deployment.collection,
                session_id=sid))]
        read = trace_reader(stack, deployment)
        agent_trace = await read(root)
        [trace_id] = _values(agent_trace, root, ns.TG_OTEL_TRACE_ID)
        assert telemetry.flush()
        spans = tracing.spans(trace_id, at_least=15)
        attrs = {s["context"]["span_id"]: flat_attributes(s["attributes"]) for s in spans}
        [rag] = [s for s in spans if s["name"] == "graph-rag request"]
        sub = attrs[rag["context"]["span_id"]][telemetry.EXPLAIN_ID]
        sub_trace = await read(sub)
    finally:
        await stack.stop()
    assert msgs[-1].end_of_dialog and msgs[-1].error is None
    assert sub.startswith("urn:trustgraph:question:") and _values(sub_trace, sub, ns.TG_OTEL_TRACE_ID) == [trace_id]
    assert validate_trace(agent_trace).conforms and validate_trace(sub_trace).conforms
    by_id = {s["context"]["span_id"]: s for s in spans}

    def under_rag(span: dict) -> bool:
        while span["parent_id"]:
            if span["parent_id"] == rag["context"]["span_id"]:
                return True
            span = by_id[span["parent_id"]]
        return False

    for s in spans:
        expected = sub if under_rag(s) or s is rag else root
        assert attrs[s["context"]["span_id"]].get(telemetry.EXPLAIN_ID) == expected, (s["name"], expected)
    usage = {stage: (int(i), int(o)) for trace in (agent_trace, sub_trace) for stage in trace_stages(trace)
             for i, o in zip(_values(trace, stage, ns.TG_IN_TOKEN), _values(trace, stage, ns.TG_OUT_TOKEN),
                             strict=True)}  # by stage: the agent's trace may hold its sub-trace's stages too
    recorded = sorted(usage.values())
    spent = sorted((attrs[s["context"]["span_id"]]["gen_ai.usage.input_tokens"],
                    attrs[s["context"]["span_id"]]["gen_ai.usage.output_tokens"])
                   for s in spans if s["name"].startswith("chat "))
    assert len(spent) == 4 and spent == recorded, (spent, recorded)
