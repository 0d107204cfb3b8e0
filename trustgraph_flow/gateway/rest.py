"""The REST part: ``POST /api/v1/flow/{flow}/service/{kind}``, ``POST /api/v1/librarian``, the OpenAPI document.

A flow-service call runs the request like a WebSocket one and answers with **one** body: the
answer text joined, token counts and model of the last message, the sources (RAG), or all
the triples.  Refusals and service errors are HTTP 200 with ``{"error": {"type", "message"}}``,
as TrustGraph's gateway answers (its client turns any other status into "Status code N");
only what never reaches a service gets another status: 400 (the body is not a JSON object),
401 (no or unknown token), 403 (a workspace the token does not grant), 404 (unknown service)
and 413 (a body over the limit).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
from aiohttp import web

from trustgraph_base import telemetry

from .auth import AccessDenied, Auth, bearer_token
from .dispatch import Dispatcher, Reply
from .openapi import openapi_document
from .translate import FLOW_SERVICES
from .wire import GATEWAY_ERROR, REQUEST_ERROR, GatewayRequestError, error_body


def _json(body: dict, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _text(body: dict) -> str:
    return orjson.dumps(body).decode()


def _refusal(status: int, error_type: str, message: str) -> web.Response:
    return _json({"error": error_body(error_type, message)}, status)


async def aggregate(service: str, replies: AsyncIterator[Reply]) -> dict:
    """One body from all the replies to one request (the first error wins)."""
    texts: list[str] = []
    quads: list = []
    out: dict = {}
    async for reply in replies:
        if reply.error is not None:
            return {"error": reply.error}
        body = reply.body or {}
        if service == "triples":
            quads += body["response"]
        elif service == "agent":
            if body.get("message_type") in ("answer", "final-answer") and body.get("content"):
                texts.append(body["content"])
        elif body.get("message_type") == "chunk" and body.get("response"):
            texts.append(body["response"])
        for key in ("in_token", "out_token", "model", "sources"):
            if key in body:
                out[key] = body[key]
    if service == "triples":
        return {"response": quads}
    if service == "agent":
        return {"message_type": "answer", "content": "".join(texts), "end_of_message": True, "end_of_dialog": True,
                **out}
    return {"message_type": "chunk", "response": "".join(texts), "end_of_stream": True, "end_of_session": True,
            **out}


class Rest:
    """The REST handlers of one gateway."""

    def __init__(self, dispatcher: Dispatcher, auth: Auth):
        self.dispatcher = dispatcher
        self.auth = auth
        self.openapi = orjson.dumps(openapi_document(dispatcher.flow))

    async def _caller(self, request: web.Request) -> tuple[str | None, dict]:
        """The principal and the JSON body, or a ready refusal raised as an HTTP exception."""
        try:
            principal = self.auth.principal(bearer_token(request.headers.get("Authorization")))
        except AccessDenied as e:
            raise web.HTTPUnauthorized(text=_text({"error": e.wire()}), content_type="application/json") from e
        raw = await request.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
        if type(body) is not dict:
            refusal = {"error": error_body(REQUEST_ERROR, "the body must be a JSON object")}
            raise web.HTTPBadRequest(text=_text(refusal), content_type="application/json")
        return principal, body

    def _user(self, principal: str | None, body: dict) -> str:
        try:
            return self.auth.user_for(principal, body.get("workspace"))
        except AccessDenied as e:
            raise web.HTTPForbidden(text=_text({"error": e.wire()}), content_type="application/json") from e

    async def flow_service(self, request: web.Request) -> web.Response:
        kind = request.match_info["kind"]
        if kind not in FLOW_SERVICES:
            return _refusal(404, GATEWAY_ERROR, f"unknown service {kind[:60]!r}; this gateway serves "
                                                f"{', '.join(FLOW_SERVICES)}")
        principal, body = await self._caller(request)
        try:
            user = self._user(principal, body)
        except GatewayRequestError as e:
            return _json({"error": e.wire()})
        # The caller's W3C trace context (``traceparent`` header), if any, is the parent of the request's spans.
        with telemetry.span(f"api-gateway {kind}", kind="server", context=telemetry.extract(request.headers),
                            attributes={telemetry.SERVICE: "api-gateway", "http.request.method": request.method,
                                        "http.route": "/api/v1/flow/{flow}/service/" + kind}):
            replies = self.dispatcher.replies(user, kind, request.match_info["flow"], body)
            return _json(await aggregate(kind, replies))

    async def librarian(self, request: web.Request) -> web.Response:
        principal, body = await self._caller(request)
        try:
            user = self._user(principal, body)
        except GatewayRequestError as e:
            return _json({"error": e.wire()})
        async for reply in self.dispatcher.replies(user, "librarian", None, body):
            return _json({"error": reply.error} if reply.error is not None else reply.body or {})
        return _refusal(200, GATEWAY_ERROR, "no reply")

    async def openapi_json(self, request: web.Request) -> web.Response:
        return web.Response(body=self.openapi, content_type="application/json")

    def routes(self) -> list:
        return [web.post("/api/v1/flow/{flow}/service/{kind}", self.flow_service),
                web.post("/api/v1/librarian", self.librarian),
                web.get("/api/v1/openapi.json", self.openapi_json)]
