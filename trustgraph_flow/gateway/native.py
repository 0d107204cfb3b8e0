"""This project's own channel, for its ``tg-*`` commands (``--api-url``): ``/api/v1/native`` and ``/api/v1/whoami``.

TrustGraph's protocol (:mod:`.mux`, :mod:`.rest`) carries the fields TrustGraph knows; this
project's commands use more (``explain_collection``, edge sources, trace listing and retention,
the librarian's own operations, ingestion progress, ``tg-load-turtle``'s writes).  This
WebSocket carries the project's own messages in its codec JSON (:mod:`trustgraph_base.codec`),
so a command prints through the gateway what it prints over the bus.  Auth, limits and
multiplexing by ``id`` are those of ``/api/v1/socket`` (:class:`.mux.Socket`)::

    → {"type": "auth", "token": "…"}
    ← {"type": "auth-ok", "user": "alice"}                                      (null in open mode)
    → {"id": "1", "type": "request", "service": "graph-rag", "flow": "default", "request": {GraphRagQuery}}
    ← {"id": "1", "response": {GraphRagResponse}, "complete": false}    … up to "complete": true
    → {"id": "2", "type": "write", "flow": "default", "queue": "triples-store", "message": {Triples}}
    ← {"id": "2", "response": {}, "complete": true}                             (the bus took it)
    → {"id": "3", "type": "progress", "user": "alice"}
    ← {"id": "3", "response": null, "complete": false}                          (subscribed)
    ← {"id": "3", "response": {IngestProgress}, "complete": false}      … until cancelled
    → {"type": "cancel", "id": "3"}
    ← {"id": "4", "error": {"type": "request-error", "message": "…"}, "complete": true}

A service's own ``Error`` travels inside its response, as on the bus.  Refusals of the gateway
have a ``type``: ``request-error`` (the message cannot be accepted), ``gateway-error`` (access,
limits), ``timeout`` (a service did not answer in the gateway's time), ``unavailable`` (the bus
failed).

**Users.**  With tokens, everything a socket sends acts as the token's user: the gateway sets
``user`` (``metadata.user`` of a write) to it, whatever the message says, and a progress feed
carries only that user's events.  In open mode the user the message names is used, validated.

**Checked before anything reaches a service**: the message decodes into its schema; user and
collection names; the RAG limits TrustGraph's requests are held to (:data:`.translate.RAG_LIMITS`)
and the triples limit; ``parent_uri`` is refused (only the agent links a sub-trace to its
Analysis); librarian operations are those of the commands (:data:`LIBRARIAN_OPERATIONS`; the
pipeline's ``add-child-document`` is not one), and only source documents are added or removed
(answers come with their traces and go with them, ``tg-delete-explain-trace``); writes go to
``triples-store`` and ``entity-contexts`` only, with no quad in ``urn:graph:retrieval`` (explain
traces cannot be forged) and only terms and labels the stores take.

``GET /api/v1/whoami`` (bearer token when the gateway has tokens) tells a client, before it
starts, whose the token is, the flow served and how large a message may be.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from aiohttp import web

from trustgraph_base.codec import CodecError, decode, from_json, to_json
from trustgraph_base.processor import RequestResponseClient, RequestTimeout
from trustgraph_base.processor.base import TypedProducer
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.pubsub import Backend, BackendError
from trustgraph_base.schema import EntityContexts, IngestProgress, LibrarianRequest, Triples
from trustgraph_base.schema.library import SOURCE
from trustgraph_base.store.errors import InvalidQuery
from trustgraph_base.store.names import InvalidName, check_collection, check_user
from trustgraph_base.store.triples import prepare_triples
from trustgraph_base.store.vectors import VectorItem, prepare_items

from ..common.services import FLOWS, SERVICES, progress_queue
from .auth import AccessDenied, Auth, bearer_token
from .dispatch import Reply
from .limits import Limits
from .mux import Socket, socket_handler
from .translate import MAX_TRIPLES_LIMIT, RAG_LIMITS
from .wire import REQUEST_ERROR, TIMEOUT, UNAVAILABLE, GatewayRequestError, error_body

log = logging.getLogger(__name__)

#: The request/response services the commands call.
NATIVE_SERVICES = ("graph-rag", "document-rag", "agent", "triples", "trace-list", "trace-admin", "librarian")
#: The flow queues a client may write (``tg-load-turtle``).
NATIVE_QUEUES = ("triples-store", "entity-contexts")
#: The librarian operations the commands use.
LIBRARIAN_OPERATIONS = ("add-document", "process-document", "get-document-metadata", "get-document-content",
                        "stream-document", "list-documents", "list-library", "list-children", "find-document",
                        "remove-document", "ingest-status")
#: Bytes of a frame besides the message it carries (id, type, service, flow), counted generously.
FRAME_ENVELOPE_BYTES = 1024

#: GraphRAG/DocumentRAG fields bounded like TrustGraph's keys (:data:`.translate.RAG_LIMITS`).
_RAG_FIELDS = {"entity_limit": "entity-limit", "triple_limit": "triple-limit", "max_subgraph_size": "max-subgraph-size",
               "max_path_length": "max-path-length", "edge_limit": "edge-limit", "doc_limit": "doc-limit"}


# ------------------------------------------------------------------------------------ checks

def _user(principal: str | None, named: Any) -> str:
    """The token's user, or (open mode) the user a message names, validated."""
    if principal is not None:
        return principal
    try:
        return check_user(named)
    except InvalidName as e:
        raise GatewayRequestError(str(e)) from None


def _collection(name: Any) -> str:
    try:
        return check_collection(name)
    except InvalidName as e:
        raise GatewayRequestError(str(e)) from None


def _decode(schema: type, data: Any):
    if type(data) is not dict:
        raise GatewayRequestError(f"the message must be a JSON object ({schema.__name__})")
    try:
        return from_json(schema, data)
    except CodecError as e:
        raise GatewayRequestError(str(e)) from None


def _bounded(name: str, value: int, hi: int) -> None:
    if not 0 <= value <= hi:
        raise GatewayRequestError(f"{name} must be from 0 to {hi:,} through the gateway, got {value:,}")


def check_request(service: str, req: Any, principal: str | None) -> None:
    """Make ``req`` the principal's and refuse what the gateway does not pass on (see the module docstring).

    Messages do not name the service: the refusal answers a request to it."""
    req.user = _user(principal, req.user)
    _collection(req.collection)
    if service in ("graph-rag", "document-rag"):
        if req.parent_uri:
            raise GatewayRequestError("parent_uri is set by the agent only")
        if req.explain_collection:
            _collection(req.explain_collection)
        for name, key in _RAG_FIELDS.items():
            if hasattr(req, name):
                _bounded(name, getattr(req, name), RAG_LIMITS[key])
    elif service == "triples":
        for pattern in [req, *req.patterns]:
            _bounded("limit", pattern.limit, MAX_TRIPLES_LIMIT)
    elif service == "librarian":
        _check_librarian(req)


def _check_librarian(req: LibrarianRequest) -> None:
    if req.operation not in LIBRARIAN_OPERATIONS:
        raise GatewayRequestError(f"operation {req.operation[:40]!r} is not served through the gateway "
                                  f"(served: {', '.join(LIBRARIAN_OPERATIONS)})")
    if req.operation == "add-document" and req.document_metadata is not None \
            and req.document_metadata.document_type != SOURCE:
        raise GatewayRequestError("only source documents are added through the gateway (answers are "
                                  "stored by the services that give them)")
    if req.operation == "remove-document" and req.document_type != SOURCE:
        raise GatewayRequestError("only source documents are removed through the gateway "
                                  "(document_type 'source'); answers go with their traces")


def check_write(msg: Triples | EntityContexts, principal: str | None) -> None:
    """Make a flow write the principal's and refuse what the stores would refuse, or a forged trace."""
    msg.metadata.user = _user(principal, msg.metadata.user)
    _collection(msg.metadata.collection)
    if isinstance(msg, Triples):
        for i, t in enumerate(msg.triples):
            if t.g == ns.GRAPH_RETRIEVAL:
                raise GatewayRequestError(f"triple {i} is in <{ns.GRAPH_RETRIEVAL}>, which holds "
                                          f"the explain traces the services record; traces cannot be written")
        try:
            prepare_triples(msg.triples)
        except InvalidQuery as e:
            raise GatewayRequestError(str(e)) from None
        return
    items = []
    for i, context in enumerate(msg.entities):
        if context.entity is None or context.entity.type != "i":
            raise GatewayRequestError(f"entity {i} must be an IRI")
        items.append(VectorItem(context.entity.value, (1.0,), label=context.label))
    try:
        prepare_items(items)
    except InvalidQuery as e:
        raise GatewayRequestError(str(e)) from None


# ---------------------------------------------------------------------------------- serving

class Native:
    """Serves the channel: requests to services, flow writes and the progress feed of one user.

    :param client: the started client of a service, by service name.
    :param producer: the producer of a flow queue, by queue name (:data:`NATIVE_QUEUES`).
    :param backend: the bus (progress feeds subscribe to it).
    :param flow: the flow served.
    """

    def __init__(self, client: Callable[[str], RequestResponseClient], producer: Callable[[str], TypedProducer],
                 backend: Backend, flow: str, auth: Auth, limits: Limits, owner: str = "api-gateway"):
        self.client = client
        self.producer = producer
        self.backend = backend
        self.flow = flow
        self.auth = auth
        self.limits = limits
        self.owner = owner

    @property
    def max_message_bytes(self) -> int:
        """The largest message a frame can carry (on Pulsar, also what one Pulsar message can)."""
        n = self.limits.max_frame_bytes - FRAME_ENVELOPE_BYTES
        if getattr(self.backend, "name", "") == "pulsar":
            from trustgraph_base.pubsub.pulsar import MAX_MESSAGE_BYTES

            n = min(n, MAX_MESSAGE_BYTES)
        return n

    def whoami(self, principal: str | None) -> dict:
        return {"user": principal, "flow": self.flow, "max_frame_bytes": self.limits.max_frame_bytes,
                "max_message_bytes": self.max_message_bytes, "max_outstanding": self.limits.max_outstanding}

    def _check_flow(self, flow: Any) -> None:
        if flow not in (None, self.flow):
            raise GatewayRequestError(f"flow {str(flow)[:64]!r} is not served here (this gateway serves "
                                      f"{self.flow!r})")

    async def _replies(self, body: AsyncIterator[Reply]) -> AsyncIterator[Reply]:
        """``body``'s replies; a failure becomes the error reply that ends them."""
        try:
            async for reply in body:
                yield reply
        except GatewayRequestError as e:
            yield Reply(error=e.wire())
        except RequestTimeout as e:
            yield Reply(error=error_body(TIMEOUT, str(e)))
        except BackendError as e:
            log.warning("bus failure on a native request: %s", e)
            yield Reply(error=error_body(UNAVAILABLE, f"the message bus failed: {e}"))

    def request(self, principal: str | None, frame: dict) -> AsyncIterator[Reply]:
        return self._replies(self._request(principal, frame))

    async def _request(self, principal: str | None, frame: dict) -> AsyncIterator[Reply]:
        service = frame.get("service")
        if service not in NATIVE_SERVICES:
            raise GatewayRequestError(f"unknown service {str(service)[:60]!r}; served: {', '.join(NATIVE_SERVICES)}")
        self._check_flow(frame.get("flow"))
        req = _decode(SERVICES[service].request, frame.get("request"))
        check_request(service, req, principal)
        client = self.client(service)
        async for resp in client.stream(req):
            yield Reply(to_json(resp), complete=client.is_final(resp))

    def write(self, principal: str | None, frame: dict) -> AsyncIterator[Reply]:
        return self._replies(self._write(principal, frame))

    async def _write(self, principal: str | None, frame: dict) -> AsyncIterator[Reply]:
        queue = frame.get("queue")
        if queue not in NATIVE_QUEUES:
            raise GatewayRequestError(f"queue {str(queue)[:60]!r} cannot be written; writable: "
                                      f"{', '.join(NATIVE_QUEUES)}")
        self._check_flow(frame.get("flow"))
        msg = _decode(FLOWS[queue], frame.get("message"))
        check_write(msg, principal)
        await self.producer(queue).send(msg)
        yield Reply({})

    def progress(self, principal: str | None, frame: dict) -> AsyncIterator[Reply]:
        return self._replies(self._progress(principal, frame))

    async def _progress(self, principal: str | None, frame: dict) -> AsyncIterator[Reply]:
        user = _user(principal, frame.get("user"))
        consumer = await self.backend.subscribe(progress_queue(), f"{self.owner}-progress-{uuid.uuid4().hex[:12]}",
                                                shared=False)
        try:
            yield Reply(None, complete=False)
            while True:
                msg = await consumer.receive()
                await consumer.ack(msg)
                try:
                    event = decode(IngestProgress, msg.data)
                except CodecError:
                    continue
                if event.user == user:
                    yield Reply(to_json(event), complete=False)
        finally:
            await consumer.close()

    def routes(self, sockets) -> list:
        return [web.get("/api/v1/native", socket_handler(lambda ws: NativeSocket(ws, self), self.limits, sockets)),
                web.get("/api/v1/whoami", self.show_whoami)]

    async def show_whoami(self, request: web.Request) -> web.Response:
        try:
            principal = self.auth.principal(bearer_token(request.headers.get("Authorization")))
        except AccessDenied as e:
            return web.Response(body=orjson.dumps({"error": e.wire()}), status=401, content_type="application/json")
        return web.Response(body=orjson.dumps(self.whoami(principal)), content_type="application/json")


class NativeSocket(Socket):
    """One connection to ``/api/v1/native``: :class:`.mux.Socket`'s framing, this channel's frames."""

    def __init__(self, ws: web.WebSocketResponse, native: Native):
        super().__init__(ws, None, native.auth, native.limits)
        self.native = native

    def auth_ok(self) -> dict:
        return {"type": "auth-ok", "user": self.principal}

    async def on_control(self, frame: dict) -> bool:
        if frame.get("type") != "cancel":
            return False
        request_id = frame.get("id")
        task = self.open.get(request_id) if isinstance(request_id, str) else None
        if task is not None:
            task.cancel()
        return True

    async def start(self, request_id: str, frame: dict) -> None:
        kinds = {"request": self.native.request, "write": self.native.write, "progress": self.native.progress}
        kind = frame.get("type")
        serve = kinds.get(kind) if isinstance(kind, str) else None
        if serve is None:
            await self.refuse(request_id, REQUEST_ERROR, f"unknown frame type {str(frame.get('type'))[:40]!r}; "
                                                         f"expected auth, request, write, progress or cancel")
            return
        self.spawn(request_id, self.relay(request_id, serve(self.principal, frame)))


__all__ = ["Native", "NativeSocket", "NATIVE_SERVICES", "NATIVE_QUEUES", "LIBRARIAN_OPERATIONS", "check_request",
           "check_write"]
