"""api-gateway on real processors: TrustGraph's protocol in front of the services, on both deployments.

The first group runs on the embedded stack and on Pulsar + Cassandra (``deployment``, the
sample corpus loaded): streams with explain events and ``complete`` flags, multiplexing,
TrustGraph's ``g`` rules against the real store, minted agent session ids, REST aggregation,
the librarian without collections (staging, processing into a collection, look-up by id),
user isolation by token, nothing stored from a refused request.  The second group is the
gateway's own edge (bad frames, limits, auth frames, HTTP statuses), on the embedded stack.
"""

from __future__ import annotations

import asyncio
import base64
import uuid

import aiohttp
import pytest
from gateway_client import Gateway, b64, eventually

from trustgraph_base.provenance import namespaces as ns
from trustgraph_flow.embedded import ALL, STORAGE, start_embedded
from trustgraph_flow.gateway.auth import Auth
from trustgraph_flow.gateway.limits import Limits
from trustgraph_flow.gateway.service import ApiGateway

pytestmark = pytest.mark.timeout(600)

ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789ab"
QUESTION = "Who discovered polonium?"


def _drop_users(deployment, users: list[str]) -> None:
    if deployment.kind != "distributed" or not users:
        return
    from trustgraph_base.store.cassandra.connection import CassandraConfig, connect
    from trustgraph_base.store.names import storage_name

    session = connect(CassandraConfig(hosts=(deployment.cassandra.host,), port=int(deployment.cassandra.port)))
    for user in users:
        for prefix in ("tg", "tgv"):
            try:
                session.execute(f"DROP KEYSPACE IF EXISTS {storage_name(prefix, user)}", timeout=180)
            except Exception as e:  # noqa: BLE001 - a slow drop on a busy node must not fail the tests
                import warnings

                warnings.warn(f"could not drop keyspace of {user}: {e}", stacklevel=2)


@pytest.fixture
async def gateway_on(deployment):
    """``await gateway_on(auth=..., limits=...)``: the whole stack of ``deployment`` plus a gateway on a free port."""
    started, users = [], []

    async def start(auth: Auth | None = None, limits: Limits | None = None) -> Gateway:
        stack = await deployment.start(ALL)
        gw = ApiGateway(backend=stack.backend, flow=stack.flow, port=0,
                        auth=auth or Auth(default_user=deployment.user), limits=limits)
        await gw.start()
        http = aiohttp.ClientSession()
        started.append((gw, stack, http))
        g = Gateway(gw, http)
        g.users = users
        return g

    yield start
    for gw, stack, http in reversed(started):
        await http.close()
        await gw.stop()
        await stack.stop()
    _drop_users(deployment, users)


def fresh_user(gateway: Gateway) -> str:
    user = f"gw{uuid.uuid4().hex[:10]}"
    gateway.users.append(user)
    return user


def explain_ids(frames: list[dict]) -> list[str]:
    return [f["response"]["explain_id"] for f in frames if f.get("response", {}).get("message_type") == "explain"]


async def traces_of(sock, workspace="default", collection="default") -> set[str]:
    frames = await sock.call("triples", {"p": {"t": "i", "i": ns.TG_QUERY}, "g": "urn:graph:retrieval",
                                         "collection": collection, "limit": 1000}, workspace=workspace)
    assert "error" not in frames[-1], frames[-1]
    return {q["s"]["i"] for q in frames[-1]["response"]["response"]}


# ------------------------------------------------------------------------- both deployments

async def test_graph_rag_streams_explain_events_then_the_answer(gateway_on):
    gw = await gateway_on()
    sock = await gw.socket()
    frames = await sock.call("graph-rag", {"query": QUESTION, "collection": "default", "entity-limit": 50,
                                           "triple-limit": 30, "max-subgraph-size": 150, "max-path-length": 2,
                                           "edge-score-limit": 30, "edge-limit": 25, "max-reranker-input": 350,
                                           "streaming": True, "explainable": True})
    assert all(f["id"] == "req-1" and "error" not in f for f in frames)
    assert [f["complete"] for f in frames] == [False] * (len(frames) - 1) + [True]
    ids = explain_ids(frames)
    assert [i.split(":")[-2] for i in ids] == ["question", "grounding", "exploration", "focus", "synthesis"]
    focus = next(f["response"] for f in frames if f["response"].get("explain_id", "").startswith(
        "urn:trustgraph:prov:focus"))
    edges = [q["o"] for q in focus["explain_triples"] if q["p"]["i"] == ns.TG_SELECTED_EDGE]
    assert edges and all(q.get("g") == "urn:graph:retrieval" for q in focus["explain_triples"])
    answer = "".join(f["response"].get("response", "") for f in frames)
    assert "Curie" in answer
    last = frames[-1]["response"]
    assert last["end_of_session"] is True and last["model"] == "extractive" and last["sources"]


async def test_one_socket_multiplexes_requests_by_id(gateway_on):
    gw = await gateway_on()
    sock = await gw.socket()
    a = await sock.request("graph-rag", {"query": QUESTION, "streaming": True})
    b = await sock.request("triples", {"p": {"t": "i", "i": ns.RDFS_LABEL}, "limit": 5})
    c = await sock.request("document-rag", {"query": "What is the unit of radioactivity?", "streaming": True})
    got = {rid: await sock.replies(rid) for rid in (c, b, a)}
    assert len(got[b]) == 1 and len(got[b][0]["response"]["response"]) == 5, got[b]
    for rid in (a, c):
        assert got[rid][-1]["response"]["end_of_session"] is True
        assert all(f["id"] == rid for f in got[rid])


async def test_triples_follow_trustgraphs_graph_rules(gateway_on):
    gw = await gateway_on()
    sock = await gw.socket()
    await sock.call("graph-rag", {"query": QUESTION})  # a trace in urn:graph:retrieval
    labels = (await sock.call("triples", {"p": {"t": "i", "i": ns.RDFS_LABEL}, "limit": 100000}))[-1]
    quads = labels["response"]["response"]
    assert quads and all("g" not in q for q in quads)  # p bound, no g: the default graph only
    everywhere = (await sock.call("triples", {"p": {"t": "i", "i": ns.RDFS_LABEL}, "g": "*", "limit": 100000}))
    graphs = {q.get("g", "") for q in everywhere[-1]["response"]["response"]}
    assert "" in graphs and "urn:graph:source" in graphs  # "*": every graph (document labels live in source)
    questions = await traces_of(sock)
    assert any(q.startswith("urn:trustgraph:question:") for q in questions)
    streamed = await sock.call("triples", {"g": "urn:graph:source", "streaming": True, "batch-size": 20,
                                           "limit": 200})
    assert len(streamed) == 10 and all(len(f["response"]["response"]) == 20 for f in streamed)
    assert [f["complete"] for f in streamed][-2:] == [False, True]


async def test_agent_without_session_id_gets_one_and_its_trace_is_stored(gateway_on):
    gw = await gateway_on()
    sock = await gw.socket()
    frames = await sock.call("agent", {"question": QUESTION, "collection": "default", "streaming": True})
    assert frames[-1]["response"]["end_of_dialog"] is True
    sessions = [i for i in explain_ids(frames) if i.startswith("urn:trustgraph:agent:") and "/" not in i]
    assert len(sessions) == 1
    assert any(f["response"].get("message_type") == "answer" and "Curie" in f["response"].get("content", "")
               for f in frames)
    assert await eventually(lambda: _has(traces_of(sock), sessions[0]))


async def _has(coro, item) -> bool:
    return item in await coro


async def test_rest_aggregates_a_stream_into_one_body(gateway_on):
    gw = await gateway_on()
    sock = await gw.socket()
    question = "What is the unit of radioactivity?"
    streamed = await sock.call("document-rag", {"query": question, "streaming": True})
    text = "".join(f["response"].get("response", "") for f in streamed)
    status, body = await gw.post(gw.service_path("document-rag"),
                                 {"workspace": "default", "query": question, "collection": "default",
                                  "doc-limit": 10, "fetch-limit": 0})
    assert status == 200 and body["response"] == text and "becquerel" in text.lower()
    assert body["end_of_session"] is True and body["model"] == "extractive"
    status, body = await gw.post(gw.service_path("triples"),
                                 {"p": {"t": "i", "i": ns.RDFS_LABEL}, "limit": 3})
    assert status == 200 and len(body["response"]) == 3


async def test_librarian_stages_processes_and_finds_documents_without_collections(gateway_on):
    gw = await gateway_on()
    user = fresh_user(gw)
    doc = f"https://example.org/doc/{uuid.uuid4().hex}"
    text = "Zorblax Quentin discovered the element vibranium in 1952. Vibranium is a metal."
    assert await gw.librarian({"operation": "add-document", "content": b64(text),
                               "document-metadata": {"id": doc, "time": 1733300000, "kind": "text/plain",
                                                     "title": "Vibranium notes", "comments": "", "tags": [],
                                                     "metadata": []}}, workspace=user) == {}
    listed = await gw.librarian({"operation": "list-documents"}, workspace=user)
    assert [d["id"] for d in listed["document-metadatas"]] == [doc]
    got = await gw.librarian({"operation": "get-document-content", "document-id": doc}, workspace=user)
    assert got == {"content": b64(text)}
    assert await gw.librarian({"operation": "add-processing", "processing-metadata": {
        "id": "proc-1", "document-id": doc, "time": 1733300001, "flow": gw.gateway.flow, "collection": "papers",
        "tags": []}}, workspace=user) == {}
    sock = await gw.socket()

    async def answered():
        frames = await sock.call("document-rag", {"query": "Who discovered vibranium?", "collection": "papers"},
                                 workspace=user)
        return frames if "Zorblax" in "".join(f.get("response", {}).get("response", "") for f in frames) else None

    frames = await eventually(answered, timeout=120, every=1.0)
    assert frames, "the processed document never answered a query in its collection"
    synthesis = next(f["response"] for f in frames
                     if f["response"].get("explain_id", "").endswith("/synthesis"))
    answer_id = next(q["o"]["i"] for q in synthesis["explain_triples"] if q["p"]["i"] == ns.TG_DOCUMENT)
    # the answer lives in collection "papers"; TrustGraph asks for it without saying so
    answer = await eventually(lambda: _content(gw, answer_id, user), timeout=60)
    assert answer and "Zorblax" in answer
    refused = await gw.librarian({"operation": "add-processing", "processing-metadata": {
        "document-id": doc, "flow": "other", "collection": "papers"}}, workspace=user)
    assert refused["error"]["type"] == "request-error" and "flow" in refused["error"]["message"]


async def _content(gw, doc_id, user, token=None) -> str | None:
    body = await gw.librarian({"operation": "get-document-content", "document-id": doc_id}, token=token,
                              workspace=user)
    return base64.b64decode(body["content"]).decode() if "content" in body else None


async def test_refused_requests_store_nothing(gateway_on):
    gw = await gateway_on()
    user = fresh_user(gw)
    sock = await gw.socket()
    before = await traces_of(sock, workspace=user)
    for body in ({"query": "q", "grounding-seeds": ["x"]}, {"query": "q", "entity-limit": -5},
                 {"query": "q", "collection": "bad/name"}, {"query": ""}):
        frames = await sock.call("graph-rag", body, workspace=user)
        assert frames == [{"id": frames[0]["id"], "error": frames[0]["error"], "complete": True}]
        assert frames[0]["error"]["type"] == "request-error"
    bad_docs = [{"content": "***", "document-metadata": {"id": "urn:x:1", "kind": "text/plain"}},
                {"content": b64("%PDF-nonsense"), "document-metadata": {"id": "urn:x:2", "kind": "application/pdf"}},
                {"content": b64("text"), "document-metadata": {"id": "urn:x:3", "kind": "image/png"}},
                {"content": b64("text"), "document-metadata": {"kind": "text/plain"}}]
    for extra in bad_docs:
        reply = await gw.librarian({"operation": "add-document", **extra}, workspace=user)
        assert "error" in reply, extra
    assert (await gw.librarian({"operation": "list-documents"}, workspace=user))["document-metadatas"] == []
    await asyncio.sleep(0.5)
    assert await traces_of(sock, workspace=user) == before == set()


async def test_a_token_reaches_only_its_own_users_traces_and_documents(gateway_on):
    probe = await gateway_on()
    alice, bob = fresh_user(probe), fresh_user(probe)
    gw = await gateway_on(auth=Auth(((ALICE, alice), (BOB, bob))))
    gw.users.extend([alice, bob])
    a = await gw.socket(ALICE)
    frames = await a.call("graph-rag", {"query": QUESTION})
    ids = explain_ids(frames)
    question = ids[0]
    doc = f"https://example.org/doc/{uuid.uuid4().hex}"
    assert await gw.librarian({"operation": "add-document", "content": b64("Alice's private notes."),
                               "document-metadata": {"id": doc, "kind": "text/plain", "title": "private"}},
                              token=ALICE) == {}
    assert await eventually(lambda: _has(traces_of(a), question))  # alice sees her own trace
    answer_id = f"urn:trustgraph:answer:{question.rsplit(':', 1)[1]}"
    assert await eventually(lambda: _content(gw, answer_id, "default", ALICE))

    b = await gw.socket(BOB)
    assert await traces_of(b) == set()  # bob's own (empty) store
    denied = await b.call("triples", {"p": {"t": "i", "i": ns.TG_QUERY}, "g": "urn:graph:retrieval"},
                          workspace=alice)
    assert denied[0]["error"]["type"] == "gateway-error" and "not allowed" in denied[0]["error"]["message"]
    for stage in ids:
        got = (await b.call("triples", {"s": {"t": "i", "i": stage}, "g": "urn:graph:retrieval"}))[-1]
        assert got["response"]["response"] == []
    for doc_id in (doc, answer_id):
        for op in ("get-document-content", "get-document-metadata", "remove-document"):
            reply = await gw.librarian({"operation": op, "document-id": doc_id}, token=BOB)
            assert reply["error"]["type"] == "not-found", (op, reply)
        status, body = await gw.post("api/v1/librarian", {"operation": "get-document-content", "document-id": doc_id,
                                                          "workspace": alice}, BOB)
        assert status == 403 and body["error"]["type"] == "gateway-error"
    assert (await gw.librarian({"operation": "list-documents"}, token=BOB))["document-metadatas"] == []
    status, body = await gw.post(gw.service_path("triples"), {"p": {"t": "i", "i": ns.TG_QUERY}})
    assert status == 401 and body["error"]["type"] == "gateway-error"
    # alice's data is untouched
    assert question in await traces_of(a)
    assert await _content(gw, doc, "default", ALICE) == "Alice's private notes."


# ------------------------------------------------------------------------- the edge (embedded)

@pytest.fixture
async def edge(tmp_path):
    """``await edge(auth=..., limits=...)``: a gateway on an embedded stack with only the triples services
    (requests to other services stay open: nothing consumes them)."""
    started = []

    async def start(auth: Auth | None = None, limits: Limits | None = None) -> Gateway:
        stack = await start_embedded(tmp_path / f"home{len(started)}", only=STORAGE + ("librarian",))
        gw = ApiGateway(backend=stack.backend, flow=stack.flow, port=0, auth=auth, limits=limits)
        await gw.start()
        http = aiohttp.ClientSession()
        started.append((gw, stack, http))
        return Gateway(gw, http)

    yield start
    for gw, stack, http in reversed(started):
        await http.close()
        await gw.stop()
        await stack.stop()


@pytest.mark.service
async def test_every_bad_frame_gets_an_error_frame_and_the_socket_stays_usable(edge):
    gw = await edge(limits=Limits(max_frame_bytes=4096))
    sock = await gw.socket(token=None)
    await sock.send({"id": "req-0", "service": "triples", "request": {}})
    first = await sock.frame()
    assert first["id"] == "req-0" and "authenticate first" in first["error"]["message"]
    assert (await sock.auth())["type"] == "auth-ok"
    bad = ["{not json", "[1, 2]", '"text"', {"service": "triples", "request": {}},
           {"id": 7, "service": "triples", "request": {}}, {"id": "x" * 200, "service": "triples", "request": {}},
           {"id": "r1", "service": "nope", "request": {}}, {"id": "r2", "service": "triples"},
           {"id": "r3", "service": "triples", "request": "s p o"},
           {"id": "r4", "service": "triples", "flow": "other", "request": {}},
           {"id": "r5", "service": "triples", "workspace": "../etc", "request": {}},
           {"id": "r6", "service": "triples", "request": {"s": {"t": "q"}}},
           {"id": "r7", "service": "librarian", "request": {"operation": "begin-upload"}},
           {"id": "r8", "service": "triples", "request": {"limit": 1, "s": {"t": "l", "v": "x" * 5000}}}]
    for frame in bad:
        await sock.send(frame)
        reply = await sock.frame()
        assert reply["complete"] is True and reply["error"]["type"] in ("request-error", "gateway-error"), frame
        assert reply["error"]["message"]
    await sock.ws.send_bytes(b"\x00\x01")
    assert "binary" in (await sock.frame())["error"]["message"]
    ok = await sock.call("triples", {"limit": 1})
    assert "error" not in ok[-1] and ok[-1]["complete"] is True


@pytest.mark.service
async def test_a_socket_may_have_only_so_many_requests_open(edge):
    gw = await edge(limits=Limits(max_outstanding=3))
    sock = await gw.socket()
    for _ in range(3):  # nothing serves graph-rag here: these stay open
        await sock.request("graph-rag", {"query": QUESTION})
    rid = await sock.request("graph-rag", {"query": QUESTION})
    refused = await sock.frame()
    assert refused["id"] == rid and "too many requests open" in refused["error"]["message"]
    dup = await sock.request("graph-rag", {"query": QUESTION}, request_id="req-1")
    assert "already in use" in (await sock.frame())["error"]["message"] and dup == "req-1"
    await sock.ws.close()
    other = await gw.socket()  # the limit is per socket
    assert "error" not in (await other.call("triples", {"limit": 1}))[-1]


@pytest.mark.service
async def test_oversized_frames_are_refused_and_huge_ones_close_the_socket(edge):
    gw = await edge(limits=Limits(max_frame_bytes=2048))
    sock = await gw.socket()
    await sock.request("triples", {"limit": 1, "pad": "x" * 3000})
    assert "larger than 2048 bytes" in (await sock.frame())["error"]["message"]
    assert "error" not in (await sock.call("triples", {"limit": 1}))[-1]
    await sock.request("triples", {"limit": 1, "pad": "x" * 20000})
    msg = await sock.ws.receive(timeout=30)
    assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    assert sock.ws.close_code == 1009


@pytest.mark.service
async def test_an_idle_socket_is_closed_but_one_with_a_request_open_is_not(edge):
    gw = await edge(limits=Limits(idle_seconds=0.3))
    busy = await gw.socket()
    await busy.request("graph-rag", {"query": QUESTION})  # stays open
    idle = await gw.socket()
    msg = await idle.ws.receive(timeout=30)
    assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED) and idle.ws.close_code == 1000
    assert "error" not in (await busy.call("triples", {"limit": 1}))[-1]


@pytest.mark.service
async def test_auth_frames_with_tokens(edge):
    gw = await edge(auth=Auth(((ALICE, "alice"),)))
    sock = await gw.socket(token=None)
    for _ in range(2):
        assert await sock.auth("wrong-token-0123456789") == {"type": "auth-failed", "error": "auth failure"}
    assert await sock.auth("") == {"type": "auth-failed", "error": "a token is required"}
    msg = await sock.ws.receive(timeout=30)  # third failure: closed
    assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED) and sock.ws.close_code == 1008
    ok = await gw.socket(ALICE)
    assert "error" not in (await ok.call("triples", {"limit": 1}))[-1]


@pytest.mark.service
async def test_http_statuses_of_requests_that_reach_no_service(edge):
    gw = await edge(auth=Auth(((ALICE, "alice"),)), limits=Limits(max_body_bytes=8192))
    assert (await gw.post("api/v1/librarian", {"operation": "list-documents"}))[0] == 401
    assert (await gw.post("api/v1/librarian", {"operation": "list-documents"}, "nope-0123456789abcdef"))[0] == 401
    status, body = await gw.post("api/v1/librarian", "{not json", ALICE)
    assert status == 400 and body["error"]["type"] == "request-error"
    assert (await gw.post("api/v1/librarian", "[]", ALICE))[0] == 400
    assert (await gw.post(gw.service_path("nope"), {}, ALICE))[0] == 404
    assert (await gw.post("api/v1/librarian", {"operation": "x", "pad": "x" * 10000}, ALICE))[0] == 413
    status, body = await gw.post("api/v1/librarian", {"operation": "list-documents", "workspace": "bob"}, ALICE)
    assert status == 403
    status, body = await gw.post("api/v1/librarian", {"operation": "list-documents"}, ALICE)
    assert status == 200 and body == {"document-metadatas": []}
    async with gw.http.get(gw.url + "api/v1/openapi.json") as resp:
        doc = await resp.json()
    assert doc["openapi"].startswith("3.") and "/api/v1/librarian" in doc["paths"]


@pytest.mark.service
async def test_a_fault_inside_the_gateway_still_ends_the_request(edge, monkeypatch):
    gw = await edge()
    sock = await gw.socket()
    real = gw.gateway.dispatcher.replies

    async def faulty(user, service, flow, body):  # injected fault: a defect while replying
        if service == "graph-rag":
            raise KeyError("injected")
        async for reply in real(user, service, flow, body):
            yield reply

    monkeypatch.setattr(gw.gateway.dispatcher, "replies", faulty)
    frames = await sock.replies(await sock.request("graph-rag", {"query": QUESTION}), timeout=10)
    assert frames == [{"id": "req-1", "error": {"type": "unexpected-error", "message": "the gateway failed: KeyError"},
                       "complete": True}]
    assert "error" not in (await sock.call("triples", {"limit": 1}))[-1]
