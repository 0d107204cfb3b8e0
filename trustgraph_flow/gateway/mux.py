"""The WebSocket ``/api/v1/socket``: first-frame auth, then many requests multiplexed by ``id``.

The first frame must be ``{"type": "auth", "token": "…"}``; the answer is
``{"type": "auth-ok", "default_workspace": "default"}`` or ``{"type": "auth-failed", "error": …}``
(after :attr:`Limits.max_auth_attempts` failures the socket is closed).  A request frame is
``{"id", "workspace", "service", "flow"?, "request"}``; each reply is
``{"id", "response", "complete"}`` or ``{"id", "error": {"type", "message"}, "complete": true}``.
Ids are the client's own (TrustGraph numbers them ``req-1``, ``req-2``, … per connection),
so they are kept per socket.  Every bad frame (not JSON, not an object, no id, an id in use,
too large, too many requests open, binary) gets an error frame and the socket stays usable.
Requests still open when the socket closes are cancelled.  :class:`Socket` is also the framing of
this project's own channel (``/api/v1/native``, :mod:`.native`), which has frames of its own.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import WSMsgType, web

from trustgraph_base import telemetry

from .auth import AccessDenied, Auth
from .dispatch import Dispatcher, Reply
from .limits import Limits
from .wire import GATEWAY_ERROR, REQUEST_ERROR, GatewayRequestError, error_body

if TYPE_CHECKING:
    from opentelemetry.context import Context

log = logging.getLogger(__name__)

#: Longest request id accepted.
MAX_ID_LENGTH = 128
#: Seconds between WebSocket pings the gateway sends (a dead peer is noticed after two).
HEARTBEAT_SECONDS = 30.0


class Socket:
    """One client connection: its auth state, its open requests and an ordered writer."""

    def __init__(self, ws: web.WebSocketResponse, dispatcher: Dispatcher | None, auth: Auth, limits: Limits):
        self.ws = ws
        #: The trace context of the upgrade request (its ``traceparent`` header); None: none, or tracing is off.
        self.trace_context: Context | None = None
        self.dispatcher = dispatcher
        self.auth = auth
        self.limits = limits
        self.authenticated = False
        self.principal: str | None = None
        self.failed_auth = 0
        self.open: dict[str, asyncio.Task] = {}
        self._write = asyncio.Lock()

    async def send(self, frame: dict) -> None:
        data = orjson.dumps(frame).decode()
        async with self._write:
            await self.ws.send_str(data)

    async def refuse(self, request_id: Any, error_type: str, message: str) -> None:
        await self.send({"id": request_id if type(request_id) is str else None,
                         "error": error_body(error_type, message), "complete": True})

    async def run(self) -> None:
        """Read frames until the client leaves, is idle too long, or fails auth too often."""
        try:
            while not self.ws.closed:
                try:
                    msg = await self.ws.receive(timeout=self.limits.idle_seconds)
                except TimeoutError:
                    if self.open:
                        continue
                    await self.ws.close(code=1000, message=b"idle")
                    break
                if msg.type == WSMsgType.TEXT:
                    await self.on_text(msg.data)
                elif msg.type == WSMsgType.BINARY:
                    await self.refuse(None, REQUEST_ERROR, "binary frames are not supported: send JSON text")
                elif msg.type == WSMsgType.ERROR:
                    log.info("socket closed on a protocol error: %s", self.ws.exception())
                    break
                else:  # CLOSE, CLOSING, CLOSED
                    break
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            for task in self.open.values():
                task.cancel()
            if self.open:
                await asyncio.gather(*self.open.values(), return_exceptions=True)

    async def on_text(self, data: str) -> None:
        limit = self.limits.max_frame_bytes
        if len(data) > limit or len(data.encode("utf-8", "replace")) > limit:
            await self.refuse(None, REQUEST_ERROR, f"frame larger than {limit} bytes")
            return
        try:
            frame = orjson.loads(data)
        except orjson.JSONDecodeError:
            await self.refuse(None, REQUEST_ERROR, "frame is not JSON")
            return
        if type(frame) is not dict:
            await self.refuse(None, REQUEST_ERROR, "frame must be a JSON object")
            return
        if frame.get("type") == "auth":
            await self.on_auth(frame.get("token"))
            return
        request_id = frame.get("id")
        if not self.authenticated:
            await self.refuse(request_id, GATEWAY_ERROR, 'authenticate first: send {"type": "auth", "token": "…"}')
            return
        if await self.on_control(frame):
            return
        if type(request_id) is not str or not 0 < len(request_id) <= MAX_ID_LENGTH:
            await self.refuse(None, REQUEST_ERROR, f"a request needs an 'id': a string of 1-{MAX_ID_LENGTH} characters")
            return
        if request_id in self.open:
            await self.refuse(request_id, REQUEST_ERROR, f"request id {request_id!r} is already in use")
            return
        if len(self.open) >= self.limits.max_outstanding:
            await self.refuse(request_id, GATEWAY_ERROR,
                              f"too many requests open on this socket (at most {self.limits.max_outstanding})")
            return
        await self.start(request_id, frame)

    async def on_control(self, frame: dict) -> bool:
        """Handle a frame that is not a request (a subclass's own frame types); ``True`` if it was one."""
        return False

    async def start(self, request_id: str, frame: dict) -> None:
        """Start serving one request frame (its id is free and within the limits)."""
        try:
            user = self.auth.user_for(self.principal, frame.get("workspace"))
        except GatewayRequestError as e:
            await self.refuse(request_id, e.error_type, e.message)
            return
        if "request" not in frame:
            await self.refuse(request_id, REQUEST_ERROR, "a request frame needs 'request'")
            return
        if self.dispatcher is None:  # a socket without a dispatcher overrides start
            raise RuntimeError("this socket has no dispatcher")
        self.spawn(request_id, self.relay(request_id, self.dispatcher.replies(
            user, frame.get("service"), frame.get("flow"), frame["request"])))

    def spawn(self, request_id: str, work) -> None:
        """Run ``work`` as the open request ``request_id`` (cancelled when the socket closes)."""
        task = asyncio.create_task(self.traced(work))
        self.open[request_id] = task
        task.add_done_callback(lambda _task: self.open.pop(request_id, None))

    async def traced(self, work: Awaitable[None]) -> None:
        """Run ``work`` (one request) in a span of the gateway, a child of the caller's trace context (the
        ``traceparent`` header of the WebSocket's upgrade request) when it sent one (docs/observability.md)."""
        with telemetry.span("api-gateway websocket request", kind="server", context=self.trace_context,
                            attributes={telemetry.SERVICE: "api-gateway"}):
            await work

    def auth_ok(self) -> dict:
        """The frame a successful auth gets."""
        return {"type": "auth-ok", "default_workspace": "default"}

    async def on_auth(self, token: Any) -> None:
        try:
            self.principal = self.auth.principal(token if type(token) is str else None)
        except AccessDenied as e:
            self.failed_auth += 1
            await self.send({"type": "auth-failed", "error": e.message})
            if self.failed_auth >= self.limits.max_auth_attempts:
                await self.ws.close(code=1008, message=b"auth failure")
            return
        self.authenticated = True
        await self.send(self.auth_ok())

    async def relay(self, request_id: str, replies: AsyncIterator[Reply]) -> None:
        """Send the replies of one request as frames, up to the complete one or an error."""
        try:
            async for reply in replies:
                if reply.error is not None:
                    await self.send({"id": request_id, "error": reply.error, "complete": True})
                    return
                await self.send({"id": request_id, "response": reply.body, "complete": reply.complete})
                if reply.complete:
                    return
        except ConnectionResetError as e:  # the socket went away while replying
            log.debug("reply to %s not delivered: %s", request_id, e)
        except Exception as e:  # a defect of the gateway: the client still gets its last frame
            log.exception("request %s failed inside the gateway", request_id)
            if not self.ws.closed:
                await self.refuse(request_id, "unexpected-error", f"the gateway failed: {type(e).__name__}")


def socket_handler(make_socket: Callable[[web.WebSocketResponse], Socket], limits: Limits,
                   sockets: weakref.WeakSet):
    """The aiohttp handler of a WebSocket endpoint whose connections ``make_socket`` serves."""

    async def handle(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=HEARTBEAT_SECONDS, max_msg_size=limits.hard_frame_bytes)
        await ws.prepare(request)
        sockets.add(ws)
        socket = make_socket(ws)
        socket.trace_context = telemetry.extract(request.headers)
        await socket.run()
        if not ws.closed:
            await ws.close()
        return ws

    return handle
