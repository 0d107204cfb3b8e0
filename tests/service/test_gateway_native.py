"""The gateway's own channel (``/api/v1/native``, ``/api/v1/whoami``) with the CLI's transport, on both deployments.

The commands' transport (:mod:`trustgraph_cli.gateway_transport`) talks to an ``api-gateway`` in
front of the whole stack; the same requests also go straight over the bus
(:class:`trustgraph_cli.connection.Connection`).  Checked: the replies are the same dataclasses
with the same content (the project's own fields included, which TrustGraph's protocol drops); a
token acts as its user whatever a message says (requests, flow writes, the progress feed); what
the gateway refuses stores nothing.  Then the channel's own edge (frames, cancel, whoami), on
the embedded stack.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import aiohttp
import pytest

from trustgraph_base.codec import decode, encode
from trustgraph_base.processor import ServiceError
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.pubsub import BackendError
from trustgraph_base.pubsub.topics import flow_queue
from trustgraph_base.schema import (
    DocumentRef,
    EntityContext,
    EntityContexts,
    GraphRagQuery,
    IngestProgress,
    LibrarianRequest,
    Metadata,
    TraceListRequest,
    Triple,
    Triples,
    TriplesQueryRequest,
    iri,
    literal,
)
from trustgraph_base.schema.library import ANSWER, DocumentMetadata
from trustgraph_cli.connection import Connection
from trustgraph_cli.gateway_transport import GatewayConnection, gateway_info
from trustgraph_cli.load import load_documents
from trustgraph_flow.common.services import progress_queue
from trustgraph_flow.embedded import ALL, STORAGE, start_embedded
from trustgraph_flow.gateway.auth import Auth
from trustgraph_flow.gateway.limits import Limits
from trustgraph_flow.gateway.service import ApiGateway

pytestmark = pytest.mark.timeout(600)

ALICE_TOKEN, BOB_TOKEN = "alice-token-0123456789", "bob-token-0123456789ab"
QUESTION = "Who discovered polonium?"


def _drop(deployment, users: list[str]) -> None:
    if deployment.kind != "distributed" or not users:
        return
    import warnings

    from cassandra import DriverException

    from trustgraph_base.store.cassandra.connection import CassandraConfig, connect
    from trustgraph_base.store.names import storage_name

    session = connect(CassandraConfig(hosts=(deployment.cassandra.host,), port=int(deployment.cassandra.port)))
    for user in users:
        for prefix in ("tg", "tgv"):
            try:
                session.execute(f"DROP KEYSPACE IF EXISTS {storage_name(prefix, user)}", timeout=180)
            except DriverException as e:  # a slow drop on a busy node must not fail the tests
                warnings.warn(f"could not drop keyspace of {user}: {e}", stacklevel=1)


@pytest.fixture
async def native_on(deployment):
    """``await native_on(auth=...)``: the whole stack of ``deployment``, a gateway in front of it, and
    ``connect(token, user)`` giving the CLI's transport to it."""
    started, users = [], []

    async def start(auth: Auth | None = None):
        stack = await deployment.start(ALL)
        gw = ApiGateway(backend=stack.backend, flow=stack.flow, port=0,
                        auth=auth or Auth(default_user=deployment.user))
        await gw.start()
        started.append((gw, stack))

        async def connect(token: str | None = None, user: str = deployment.user) -> GatewayConnection:
            info = await asyncio.to_thread(gateway_info, gw.url, token, 60.0, user=user, user_given=False,
                                           flow=stack.flow, flow_given=True)
            return GatewayConnection(info, timeout=180.0)

        return gw, stack, connect

    start.users = users
    yield start
    for gw, stack in reversed(started):
        await gw.stop()
        await stack.stop()
    _drop(deployment, users)


async def eventually(check, timeout: float = 60.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await check()
        if result or loop.time() > deadline:
            return result
        await asyncio.sleep(0.25)


async def _traces(conn, user: str, collection: str = "default") -> set[str]:
    page = await conn.request("trace-list", TraceListRequest(user=user, collection=collection, limit=1000))
    return {t.uri for t in page.traces}


# ------------------------------------------------------------------------- both deployments

async def test_replies_through_the_gateway_are_those_over_the_bus(native_on, deployment):
    _gw, stack, connect = await native_on()
    user = deployment.user
    query = GraphRagQuery(query=QUESTION, user=user, streaming=True)
    async with await connect() as via, Connection.attach(stack, timeout=180) as bus:
        streamed = [m async for m in (await via.client("graph-rag")).stream(query)]
        direct = [m async for m in (await bus.client("graph-rag")).stream(query)]
        assert [m.message_type for m in streamed] == [m.message_type for m in direct]
        assert "".join(m.response for m in streamed) == "".join(m.response for m in direct)
        assert "Curie" in "".join(m.response for m in streamed) and streamed[-1].end_of_session
        focus = next(m for m in streamed if m.explain_id.startswith("urn:trustgraph:prov:focus:"))
        assert focus.edge_sources and focus.explain_collection == "default"  # fields TrustGraph's protocol drops
        assert len(focus.edge_sources) == len(next(m for m in direct if "focus" in m.explain_id).edge_sources)
        question = streamed[0].explain_id
        assert await eventually(lambda: _has(_traces(bus, user), question))

        doc = deployment.documents[0]
        for service, request in [
                ("trace-list", TraceListRequest(user=user, limit=1000)),
                ("librarian", LibrarianRequest(operation="list-library", user=user)),
                ("librarian", LibrarianRequest(operation="get-document-content", user=user, document_id=doc.id)),
                ("triples", TriplesQueryRequest(user=user, p=iri(ns.RDFS_LABEL), g="", limit=50)),
                ("triples", TriplesQueryRequest(user=user, s=iri(question), g=ns.GRAPH_RETRIEVAL, limit=100))]:
            assert await via.request(service, request) == await bus.request(service, request), (service, request)


async def _has(coro, item) -> bool:
    return item in await coro


async def test_a_token_acts_as_its_user_whatever_a_message_says(native_on, deployment, tmp_path):
    alice, bob = (f"nat{uuid.uuid4().hex[:10]}" for _ in range(2))
    native_on.users.extend([alice, bob])
    _gw, stack, connect = await native_on(auth=Auth(((ALICE_TOKEN, alice), (BOB_TOKEN, bob))))
    async with await connect(ALICE_TOKEN) as as_alice, await connect(BOB_TOKEN) as as_bob, \
            Connection.attach(stack, timeout=180) as bus:
        assert (as_alice.info.user, as_bob.info.user) == (alice, bob)
        # a request naming bob is alice's
        msgs = [m async for m in (await as_alice.client("graph-rag")).stream(GraphRagQuery(query=QUESTION, user=bob))]
        question = msgs[0].explain_id
        assert await eventually(lambda: _has(_traces(bus, alice), question))
        assert await _traces(bus, bob) == set()
        assert question not in await _traces(as_bob, bob)  # and bob's token cannot list it
        # a flow write naming bob lands in alice's store
        writer = await as_alice.backend.create_producer(flow_queue("triples-store", stack.flow))
        s = iri(f"http://example.org/native/{uuid.uuid4().hex}")
        await writer.send(encode(Triples(metadata=Metadata(id="urn:load:w#0", root="urn:load:w", user=bob,
                                                           collection="writes"),
                                         triples=[Triple(s, iri(ns.RDFS_LABEL), literal("written"))])))

        async def stored(user):
            return (await bus.request("triples", TriplesQueryRequest(user=user, collection="writes", s=s))).triples

        assert await eventually(lambda: stored(alice))
        assert await stored(bob) == []
        # the progress feed carries the token's user's events only, even when it asks for another user's
        async with GatewayConnection(replace(as_alice.info, user=bob), timeout=180) as claims_bob:
            feed = await claims_bob.backend.subscribe(progress_queue(), "test-feed")
            seen: list[IngestProgress] = []

            async def watch():
                while True:
                    seen.append(decode(IngestProgress, (await feed.receive()).data))

            watcher = asyncio.create_task(watch())
            theirs = [("https://example.org/native/bob", "Bob's notes", "text/plain", b"Zorblax discovered vibranium.")]
            await load_documents(as_bob, bob, "default", theirs, idle_timeout=180, show=False)
            mine = [("https://example.org/native/alice", "Alice's notes", "text/plain", b"Quentin discovered adamant.")]
            await load_documents(as_alice, alice, "default", mine, idle_timeout=180, show=False)
            assert await eventually(lambda: _done(seen))
            watcher.cancel()
            await feed.close()
        assert {e.document_id for e in seen} == {mine[0][0]}
        assert {e.user for e in seen} == {alice}


async def _done(seen: list[IngestProgress]) -> bool:
    return any(e.stage == "doc-embedded" for e in seen)


async def test_what_the_gateway_refuses_stores_nothing(native_on, deployment):
    user = f"nat{uuid.uuid4().hex[:10]}"
    native_on.users.append(user)
    _gw, stack, connect = await native_on(auth=Auth(((ALICE_TOKEN, user),)))
    async with await connect(ALICE_TOKEN) as via, Connection.attach(stack, timeout=180) as bus:
        writer = await via.backend.create_producer(flow_queue("triples-store", stack.flow))
        entities = await via.backend.create_producer(flow_queue("entity-contexts", stack.flow))
        question = "urn:trustgraph:question:00000000-0000-4000-8000-000000000001"
        refused = [
            (writer.send, Triples(metadata=Metadata(user=user, collection="c"), triples=[
                Triple(iri(question), iri(ns.RDF_TYPE), iri(ns.TG_QUESTION), ns.GRAPH_RETRIEVAL)])),  # a forged trace
            (writer.send, Triples(metadata=Metadata(user=user, collection="c"), triples=[
                Triple(iri("not an iri"), iri(ns.RDFS_LABEL), literal("x"))])),
            (writer.send, Triples(metadata=Metadata(user=user, collection="bad/name"), triples=[
                Triple(iri("http://x/a"), iri(ns.RDFS_LABEL), literal("x"))])),
            (entities.send, EntityContexts(metadata=Metadata(user=user, collection="c"), entities=[
                EntityContext(entity=literal("not an entity"), label="x")])),
        ]
        for send, message in refused:
            with pytest.raises(ServiceError) as e:
                await send(encode(message))
            assert e.value.error_type == "request-error", e.value
        meta = DocumentMetadata(id="https://example.org/native/answer", kind="text/plain", title="t",
                                document_type=ANSWER)
        for request in [
                LibrarianRequest(operation="add-document", user=user, collection="c", document_id=meta.id,
                                 document_metadata=meta, content=b"forged answer"),
                LibrarianRequest(operation="add-child-document", user=user, collection="c", document_id="urn:x",
                                 document_metadata=DocumentMetadata(id="urn:page:x"), content=b"page"),
                LibrarianRequest(operation="remove-document", user=user, collection="c", document_id=meta.id),
                GraphRagQuery(query=QUESTION, user=user, collection="c", parent_uri="urn:trustgraph:agent:x/i1"),
                GraphRagQuery(query=QUESTION, user=user, collection="c", triple_limit=5000),
                TriplesQueryRequest(user=user, collection="c", limit=10_000_000)]:
            service = {LibrarianRequest: "librarian", GraphRagQuery: "graph-rag",
                       TriplesQueryRequest: "triples"}[type(request)]
            with pytest.raises(ServiceError) as e:
                await via.request(service, request)
            assert e.value.error_type == "request-error", e.value
        loader = await via.backend.create_producer(flow_queue("document-load", stack.flow))
        with pytest.raises(ServiceError) as e:  # only the flows tg-load-turtle writes
            await loader.send(encode(DocumentRef(metadata=Metadata(user=user, collection="c"), document_id="urn:x")))
        assert e.value.error_type == "request-error" and "cannot be written" in e.value.message
        with pytest.raises(BackendError):
            await via.backend.create_producer(flow_queue("triples-store", "another-flow"))
        big = LibrarianRequest(operation="add-document", user=user, collection="c", document_id="https://x/big",
                               document_metadata=DocumentMetadata(id="https://x/big", kind="text/plain", title="big"),
                               content=b"x " * (via.info.max_frame_bytes // 2))
        with pytest.raises(ServiceError) as e:  # refused by the client before it is sent
            await via.request("librarian", big)
        assert "--max-frame-bytes" in e.value.message
        await asyncio.sleep(1.0 if deployment.kind == "distributed" else 0.2)
        if deployment.kind == "embedded":
            await stack.wait_idle()
        everything = await bus.request("triples", TriplesQueryRequest(user=user, collection="c", limit=1000))
        assert everything.triples == []
        listed = await bus.request("librarian", LibrarianRequest(operation="list-documents", user=user,
                                                                 collection="c", document_type=ANSWER))
        assert listed.document_metadatas == []
        assert await _traces(bus, user, "c") == set()


# ------------------------------------------------------------------------- the edge (embedded)

@pytest.fixture
async def edge(tmp_path):
    """A gateway on an embedded stack with only the triples services and the librarian."""
    started = []

    async def start(auth: Auth | None = None, limits: Limits | None = None) -> ApiGateway:
        stack = await start_embedded(tmp_path / f"home{len(started)}", only=STORAGE + ("librarian",))
        gw = ApiGateway(backend=stack.backend, flow=stack.flow, port=0, auth=auth, limits=limits)
        await gw.start()
        started.append((gw, stack))
        return gw

    yield start
    for gw, stack in reversed(started):
        await gw.stop()
        await stack.stop()


async def _frame(ws) -> dict:
    msg = await ws.receive(timeout=60)
    assert msg.type == aiohttp.WSMsgType.TEXT, msg
    return msg.json()


@pytest.mark.service
async def test_the_native_socket_frames_auth_cancel_and_whoami(edge):
    gw = await edge(auth=Auth(((ALICE_TOKEN, "alice"),)), limits=Limits(max_outstanding=2))
    async with aiohttp.ClientSession() as http:
        async with http.get(gw.url + "api/v1/whoami") as resp:
            assert resp.status == 401 and (await resp.json())["error"]["type"] == "gateway-error"
        async with http.get(gw.url + "api/v1/whoami", headers={"Authorization": f"Bearer {ALICE_TOKEN}"}) as resp:
            body = await resp.json()
        assert body == {"user": "alice", "flow": gw.flow, "max_frame_bytes": 1 << 20,
                        "max_message_bytes": (1 << 20) - 1024, "max_outstanding": 2}
        ws = await http.ws_connect(gw.url + "api/v1/native")
        await ws.send_json({"type": "auth", "token": "wrong-token-0123456789"})
        assert (await _frame(ws))["type"] == "auth-failed"
        await ws.send_json({"type": "auth", "token": ALICE_TOKEN})
        assert await _frame(ws) == {"type": "auth-ok", "user": "alice"}
        for bad in [{"id": "1", "type": "nope"}, {"id": "2", "type": "request", "service": "prompt", "request": {}},
                    {"id": "3", "type": "request", "service": "triples", "request": {"limit": "x"}},
                    {"id": "4", "type": "request", "service": "triples", "flow": "other", "request": {}},
                    {"id": "5", "type": "write", "queue": "chunks", "message": {}}]:
            await ws.send_json(bad)
            reply = await _frame(ws)
            assert reply["id"] == bad["id"] and reply["error"]["type"] == "request-error", reply
        # the progress feed holds its request open until cancelled, and counts against the limit
        await ws.send_json({"id": "p", "type": "progress"})
        assert await _frame(ws) == {"id": "p", "response": None, "complete": False}
        await ws.send_json({"id": "q", "type": "progress"})
        assert (await _frame(ws))["id"] == "q"
        await ws.send_json({"id": "r", "type": "request", "service": "triples", "request": {"limit": 1}})
        refused = await _frame(ws)
        assert refused["id"] == "r" and "too many requests open" in refused["error"]["message"]
        await ws.send_json({"type": "cancel", "id": "p"})
        await ws.send_json({"type": "cancel", "id": "q"})
        await asyncio.sleep(0.2)
        await ws.send_json({"id": "s", "type": "request", "service": "triples", "request": {"limit": 1}})
        ok = await _frame(ws)
        assert ok["id"] == "s" and ok["complete"] is True and "error" not in ok, ok
        await ws.close()
