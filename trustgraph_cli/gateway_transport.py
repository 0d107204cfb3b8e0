"""The third transport: a command talks to the services through the project's own gateway (``--api-url``).

Beside embedded and Pulsar (:mod:`.connection`), a command can reach the services through
``api-gateway`` or ``tg-gateway`` over HTTP: ``--api-url`` (env ``TRUSTGRAPH_URL``) and
``--token`` (env ``TRUSTGRAPH_TOKEN``).  It speaks the gateway's own channel
(``/api/v1/native``, ``docs/gateway.md``), which carries this project's messages in its codec
JSON, so a command receives the same response dataclasses as over the bus and prints the same.

:class:`GatewayConnection` offers what :class:`~trustgraph_cli.connection.Connection` offers:
``client(service)`` objects with ``request`` / ``stream``, ``request``, ``settle``, ``flow``, and a
``backend`` that follows ingestion progress and writes the ``triples-store`` / ``entity-contexts``
flows (what ``tg-load-document`` and ``tg-load-turtle`` use the bus for).

Before the command starts, :func:`gateway_info` asks ``GET /api/v1/whoami`` whose the token is,
which flow the gateway serves and how large a message may be; an unreachable gateway is then
exit 3 (``cannot reach the gateway at …``), a refused token exit 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from trustgraph_base.codec import encode, from_json
from trustgraph_base.processor import RequestTimeout, ServiceError, raise_on_error
from trustgraph_base.pubsub import BackendError, BackendUnavailable, Message, ReceiveTimeout
from trustgraph_base.pubsub.topics import parse_queue
from trustgraph_flow.gateway.wire import GATEWAY_ERROR, REQUEST_ERROR, TIMEOUT, UNAVAILABLE

if TYPE_CHECKING:
    import aiohttp

from .common import EXIT_FAILED, EXIT_UNREACHABLE, EXIT_USAGE, CliError

log = logging.getLogger(__name__)

#: Seconds to reach the gateway and finish the WebSocket handshake and auth.
CONNECT_SECONDS = 10.0
#: Seconds between WebSocket pings (a dead gateway is noticed after two).
HEARTBEAT_SECONDS = 30.0
#: Largest frame read from the gateway (a reply carries up to 100,000 triples).
MAX_REPLY_BYTES = 256 << 20


@dataclass(frozen=True)
class GatewayInfo:
    """A gateway as a command uses it: where, with which token, as whom, on which flow, within which limits."""

    url: str
    token: str | None
    user: str
    flow: str
    max_frame_bytes: int
    max_message_bytes: int
    max_outstanding: int


def api_base(url: str) -> str:
    """``url`` as the base the endpoints hang off (ends with ``/``); a usage error when it is no HTTP URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(f"invalid gateway URL {url[:80]!r}: expected http://host:port/ (or https://...)", EXIT_USAGE)
    return url if url.endswith("/") else url + "/"


def gateway_info(url: str, token: str | None, timeout: float, *, user: str, user_given: bool, flow: str,
                 flow_given: bool) -> GatewayInfo:
    """Ask the gateway who the token is and what it serves, and settle the command's user and flow.

    With a token the command acts as the token's user: ``-U`` may be left out, or name that user (any
    other is a usage error).  The flow is the gateway's; ``--flow`` (or ``TG_FLOW``) naming another is a
    usage error.  In open mode (a gateway without tokens) ``-U`` is the user, as embedded.
    """
    base = api_base(url)
    body = _whoami(base, token, min(timeout, CONNECT_SECONDS))
    try:
        owner, served = body["user"], body["flow"]
        frame, message, outstanding = (int(body[k]) for k in ("max_frame_bytes", "max_message_bytes",
                                                                "max_outstanding"))
    except (KeyError, TypeError, ValueError):
        raise CliError(f"the gateway at {base} answered GET api/v1/whoami with something else than this "
                       f"project's gateway does", EXIT_FAILED) from None
    if owner is not None and user != owner:
        if user_given:
            raise CliError(f"the token is user {owner}'s, so -U {user} cannot be used with it (leave -U out)",
                           EXIT_USAGE)
        user = owner
    if flow != served:
        if flow_given:
            raise CliError(f"the gateway at {base} serves flow {served!r}, not {flow!r} (--flow or TG_FLOW)",
                           EXIT_USAGE)
        flow = served
    return GatewayInfo(base, token, user, flow, frame, message, max(1, outstanding))


def _opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))  # as the WebSocket: no proxy


def _whoami(base: str, token: str | None, timeout: float) -> dict:
    request = urllib.request.Request(base + "api/v1/whoami", headers={"Authorization": f"Bearer {token}"}
                                     if token else {})
    try:
        with _opener().open(request, timeout=timeout) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        if e.code == 401:
            raise CliError(_refused(base, token, _error_message(e)), EXIT_FAILED) from None
        raise CliError(f"the gateway at {base} does not serve this project's commands (GET api/v1/whoami "
                       f"answered HTTP {e.code})", EXIT_FAILED) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise CliError(f"cannot reach the gateway at {base}: {_reason(reason)}", EXIT_UNREACHABLE) from None
    except ValueError:
        raise CliError(f"the gateway at {base} did not answer GET api/v1/whoami with JSON", EXIT_FAILED) from None
    if type(body) is not dict:
        raise CliError(f"the gateway at {base} did not answer GET api/v1/whoami with an object", EXIT_FAILED)
    return body


def _error_message(e: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(e.read())["error"]["message"])
    except (ValueError, KeyError, TypeError, OSError):
        return f"HTTP {e.code}"


def _refused(base: str, token: str | None, message: str) -> str:
    if not token:
        return f"the gateway at {base} requires a token: give --token or TRUSTGRAPH_TOKEN ({message})"
    return f"the gateway at {base} refused the token: {message}"


def _reason(reason: Any) -> str:
    if isinstance(reason, TimeoutError):
        return "timed out"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower()
    return str(reason).lower() or type(reason).__name__


# ------------------------------------------------------------------------------ connection

class GatewayConnection:
    """An open connection to the services through the gateway (see the module docstring).

    :param info: the gateway (:func:`gateway_info`).
    :param timeout: seconds to wait for each reply.
    """

    embedded = False

    def __init__(self, info: GatewayInfo, timeout: float = 120.0):
        self.info = info
        self.timeout = timeout
        self.flow = info.flow
        self.backend = GatewayBackend(self)
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task | None = None
        self._routes: dict[str, asyncio.Queue] = {}
        self._ids = itertools.count(1)
        # one request fewer than the gateway allows: a finished one may still count there for a moment
        self._slots = asyncio.Semaphore(max(1, info.max_outstanding - 1))
        self._lost: str | None = None
        self._clients: dict[str, GatewayServiceClient] = {}

    @property
    def ws_url(self) -> str:
        parts = urllib.parse.urlsplit(self.info.url + "api/v1/native")
        return urllib.parse.urlunsplit(("wss" if parts.scheme == "https" else "ws", *parts[1:]))

    async def __aenter__(self) -> GatewayConnection:
        import aiohttp

        session = self._session = aiohttp.ClientSession()
        try:
            async with asyncio.timeout(CONNECT_SECONDS):
                ws = self._ws = await session.ws_connect(self.ws_url, heartbeat=HEARTBEAT_SECONDS,
                                                         max_msg_size=MAX_REPLY_BYTES)
                await ws.send_str(orjson.dumps({"type": "auth", "token": self.info.token or ""}).decode())
                reply = await ws.receive()
        except aiohttp.WSServerHandshakeError as e:
            await session.close()
            raise CliError(f"the gateway at {self.info.url} does not serve this project's commands (GET "
                           f"api/v1/native answered HTTP {e.status})", EXIT_FAILED) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            await session.close()
            reason = "timed out" if isinstance(e, TimeoutError) else _reason(getattr(e, "os_error", None) or e)
            raise BackendUnavailable(f"cannot reach the gateway at {self.info.url}: {reason}") from None
        frame = _json_frame(reply)
        if frame is None or frame.get("type") != "auth-ok":
            await self.close()
            if frame is not None and frame.get("type") == "auth-failed":
                raise CliError(_refused(self.info.url, self.info.token, str(frame.get("error"))), EXIT_FAILED)
            raise BackendUnavailable(f"the gateway at {self.info.url} did not accept the connection")
        self._reader = asyncio.create_task(self._read(), name="gateway-reader")
        return self

    async def _read(self) -> None:
        """Route every frame to the request it answers; a lost connection ends every open request."""
        import aiohttp

        ws = self._socket()
        try:
            while True:
                msg = await ws.receive()
                if msg.type != aiohttp.WSMsgType.TEXT:
                    break
                frame = _json_frame(msg)
                rid = frame.get("id") if frame is not None else None
                route = self._routes.get(rid) if isinstance(rid, str) else None
                if route is not None:
                    route.put_nowait(frame)
                else:
                    log.debug("frame for no open request: %.200s", msg.data)
        finally:
            code = ws.close_code
            self._lost = f"the gateway at {self.info.url} closed the connection" + (f" (code {code})" if code else "")
            for route in self._routes.values():
                route.put_nowait(None)

    def _socket(self) -> aiohttp.ClientWebSocketResponse:
        """The open web socket (a connection is used inside ``async with`` only)."""
        if self._ws is None:
            raise RuntimeError("the gateway connection is not open")
        return self._ws

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()

    async def __aexit__(self, exc_type, exc, tb) -> None:
        await self.close()

    async def client(self, service: str) -> GatewayServiceClient:
        c = self._clients.get(service)
        if c is None:
            c = self._clients[service] = GatewayServiceClient(self, service)
        return c

    async def request(self, service: str, request: Any) -> Any:
        return raise_on_error(service, await (await self.client(service)).request(request))

    async def settle(self) -> None:
        """Nothing to wait for here: the services store what they were sent, as over Pulsar."""

    # -------------------------------------------------------------------------- exchanges

    @contextlib.asynccontextmanager
    async def exchange(self, frame: dict, payload: bytes = b"", key: str = "") -> AsyncIterator[Exchange]:
        """Send one frame (``payload``, codec JSON, goes in as ``frame[key]``) and receive its replies; leaving
        before its last reply cancels it at the gateway."""
        rid = str(next(self._ids))
        head = orjson.dumps({"id": rid, **frame})
        text = head[:-1] + b',"' + key.encode() + b'":' + payload + b"}" if key else head
        if len(text) > self.info.max_frame_bytes:
            raise ServiceError(frame.get("service") or frame.get("queue") or "gateway", REQUEST_ERROR,
                               f"the message is {len(text):,} bytes; the gateway at {self.info.url} takes at most "
                               f"{self.info.max_frame_bytes:,} (its --max-frame-bytes)")
        async with self._slots:
            queue: asyncio.Queue = asyncio.Queue()
            self._routes[rid] = queue
            ex = Exchange(self, rid, queue)
            try:
                await self._send(text.decode())
                yield ex
            finally:
                del self._routes[rid]
                ws = self._socket()
                if not ex.done and self._lost is None and not ws.closed:
                    with contextlib.suppress(ConnectionResetError, RuntimeError):
                        await ws.send_str(orjson.dumps({"type": "cancel", "id": rid}).decode())

    async def _send(self, text: str) -> None:
        if self._lost is not None:
            raise BackendUnavailable(self._lost)
        try:
            await self._socket().send_str(text)
        except (ConnectionResetError, RuntimeError) as e:
            raise BackendUnavailable(f"the gateway at {self.info.url} closed the connection: {e}") from None


class Exchange:
    """The replies to one frame sent to the gateway."""

    def __init__(self, conn: GatewayConnection, rid: str, queue: asyncio.Queue):
        self.conn = conn
        self.rid = rid
        self.queue = queue
        self.done = False

    async def reply(self, timeout: float | None, what: str) -> tuple[Any, bool]:
        """The next reply's ``response`` and whether it was the last; a refusal is raised as its exception.

        :raises RequestTimeout: nothing came within ``timeout`` seconds (``what`` names the service).
        """
        try:
            async with asyncio.timeout(timeout):
                frame = await self.queue.get()
        except TimeoutError:
            raise RequestTimeout(f"{what} did not answer within {timeout:g} s (request {self.rid})") from None
        if frame is None:
            self.done = True
            raise BackendUnavailable(self.conn._lost or f"the gateway at {self.conn.info.url} went away")
        if "error" in frame:
            self.done = True
            raise _refusal(what, frame.get("error"))
        self.done = bool(frame.get("complete"))
        return frame.get("response"), self.done


def _refusal(what: str, error: Any) -> Exception:
    """The exception a refusal of the gateway stands for (its exit code follows: 2, 1 or 3)."""
    error = error if type(error) is dict else {}
    kind, message = str(error.get("type") or GATEWAY_ERROR), str(error.get("message") or "")
    if kind == TIMEOUT:
        return RequestTimeout(message)
    if kind == UNAVAILABLE:
        return BackendUnavailable(message)
    return ServiceError(what, kind, message)


def _json_frame(msg) -> dict | None:
    try:
        frame = orjson.loads(msg.data) if isinstance(msg.data, (str, bytes)) else None
    except orjson.JSONDecodeError:
        return None
    return frame if type(frame) is dict else None


class GatewayServiceClient:
    """A client of one service through the gateway, with :class:`RequestResponseClient`'s ``request`` and
    ``stream``: the same response dataclasses, ``timeout`` per reply."""

    def __init__(self, conn: GatewayConnection, service: str):
        from trustgraph_flow.common.services import SERVICES

        self.conn = conn
        self.service = service
        self.contract = SERVICES[service]

    async def request(self, request: Any, timeout: float | None = None) -> Any:
        async with contextlib.aclosing(self.stream(request, timeout)) as replies:
            async for response in replies:
                return response
        raise BackendUnavailable(f"the gateway sent no reply to a {self.service} request")

    async def stream(self, request: Any, timeout: float | None = None) -> AsyncGenerator[Any, None]:
        if not isinstance(request, self.contract.request):
            raise TypeError(f"{self.service} expects {self.contract.request.__name__}, got {type(request).__name__}")
        frame = {"type": "request", "service": self.service, "flow": self.conn.flow}
        async with self.conn.exchange(frame, encode(request), "request") as ex:
            while True:
                body, last = await ex.reply(timeout or self.conn.timeout, self.service)
                yield from_json(self.contract.response, body)
                if last:
                    return

    async def stop(self) -> None:
        """Nothing to release: the connection owns the socket."""


# --------------------------------------------------------------------------- bus features

class GatewayBackend:
    """What commands use the bus for directly, through the gateway: following ``notify:tg:ingest-progress``
    (the gateway passes on the command user's events only) and producing onto the ``triples-store`` and
    ``entity-contexts`` flows of the gateway's flow.  Any other queue is refused."""

    name = "gateway"
    durable = True  # the gateway's bus decides; a write is answered once its bus took the message

    def __init__(self, conn: GatewayConnection):
        self.conn = conn

    async def subscribe(self, queue: str, subscription: str, *, shared: bool = True,
                        initial_position: str = "latest") -> ProgressConsumer:
        from trustgraph_flow.common.services import progress_queue

        if queue != progress_queue():
            raise BackendError(f"{queue} cannot be followed through the gateway")
        consumer = ProgressConsumer(self.conn, queue, subscription)
        await consumer.open()
        return consumer

    async def create_producer(self, queue: str, *, batching: bool | None = None) -> FlowWriter:
        kind, _space, name = parse_queue(queue)
        flow_name, _, flow = name.rpartition(":")
        if kind != "flow" or flow != self.conn.flow:
            raise BackendError(f"{queue} cannot be written through the gateway")
        return FlowWriter(self.conn, flow_name)

    async def close(self) -> None:
        """The connection closes the socket."""


class ProgressConsumer:
    """The ingestion progress events of the command's user, as bus messages (codec JSON of ``IngestProgress``)."""

    def __init__(self, conn: GatewayConnection, queue: str, subscription: str):
        self.conn = conn
        self.queue = queue
        self.subscription = subscription
        self._exchange: Exchange | None = None
        self._stack = contextlib.AsyncExitStack()

    async def open(self) -> None:
        """Subscribe at the gateway; returns once the subscription is in place (events from then on arrive)."""
        self._exchange = await self._stack.enter_async_context(
            self.conn.exchange({"type": "progress", "user": self.conn.info.user}))
        try:
            await self._exchange.reply(self.conn.timeout, "the gateway's progress feed")
        except BaseException:
            await self.close()
            raise

    async def receive(self, timeout: float | None = None) -> Message:
        if self._exchange is None:
            raise RuntimeError("the progress feed is not open")
        try:
            body, _last = await self._exchange.reply(timeout, "the gateway's progress feed")
        except RequestTimeout:
            raise ReceiveTimeout(f"no progress within {timeout:g} s") from None
        return Message(orjson.dumps(body), queue=self.queue)

    async def ack(self, message: Message) -> None:
        """Nothing to settle: the gateway acknowledged the event on its bus."""

    async def nack(self, message: Message) -> None:
        """Events are not redelivered."""

    async def close(self) -> None:
        await self._stack.aclose()


class FlowWriter:
    """A producer onto one flow queue through the gateway; ``send`` returns once the gateway's bus has the message."""

    def __init__(self, conn: GatewayConnection, queue: str):
        self.conn = conn
        self.queue = queue

    async def send(self, data: bytes, properties: dict[str, str] | None = None) -> None:
        frame = {"type": "write", "flow": self.conn.flow, "queue": self.queue}
        async with self.conn.exchange(frame, data, "message") as ex:
            await ex.reply(self.conn.timeout, self.queue)

    async def close(self) -> None:
        """Nothing to release."""


__all__ = ["GatewayInfo", "GatewayConnection", "GatewayServiceClient", "GatewayBackend", "gateway_info", "api_base"]
