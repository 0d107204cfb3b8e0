"""Request/response clients: correlation by an ``id`` property, streaming, per-call timeouts.

Each client has a reply queue of its own, a sub-queue of the service's response queue
(``response:tg:graph-rag:default:r-<hex>``), names it in the ``reply-to`` property of every
request, and routes replies by the ``id`` property to the waiting call.  A client therefore
receives only its own replies: on Pulsar, where request/response topics are non-persistent
and a broker drops what a busy connection cannot take, no client's connection carries
everyone else's replies (TrustGraph's single shared response topic does, and loses large
replies under load).  Replies for unknown ids (a call that already timed out) are acked and
dropped.  ``stop()`` removes the subscription, so clients never leak subscriptions.

Non-persistent topics lose a message now and then (a broker drops what a slow connection
cannot take), and a lost request or reply would cost the caller its whole timeout.  A client
of an idempotent service (a store read, an embedding) is therefore given ``resend_after``: if
no reply has come by then, the request goes out again under a new id, until the timeout; the
first reply of any attempt is taken and a stream then follows that attempt only.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from .. import telemetry
from ..codec import decode, encode
from ..pubsub.base import Backend, BackendError, Consumer, Producer
from .metrics import REQUESTS

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger(__name__)

_FINAL_FLAGS = ("end_of_session", "end_of_dialog", "is_final", "end_of_stream")


class RequestTimeout(TimeoutError):
    """A service did not answer in time; the message names the service and the request id."""


class ServiceError(RuntimeError):
    """A service replied with an ``Error``; ``error_type`` and ``message`` come from it."""

    def __init__(self, service: str, error_type: str, message: str):
        self.service = service
        self.error_type = error_type
        self.message = message
        super().__init__(f"{service}: {message}" + (f" ({error_type})" if error_type else ""))


def default_is_final(schema: type) -> Callable[[Any], bool]:
    """The completion flag of a response schema, in TrustGraph's order of precedence."""
    fields = getattr(schema, "__dataclass_fields__", {})
    for flag in _FINAL_FLAGS:
        if flag in fields:
            return functools.partial(_flag_set, flag)
    return _always_final


def _flag_set(flag: str, response: Any) -> bool:
    return bool(getattr(response, flag))


def _always_final(response: Any) -> bool:
    return True


def raise_on_error(service: str, response: Any) -> Any:
    """Return ``response`` unless it carries an ``Error``, in which case raise :class:`ServiceError`."""
    err = getattr(response, "error", None)
    if err is not None and (err.message or err.type):
        raise ServiceError(service, err.type, err.message)
    return response


class RequestResponseClient:
    """A typed client of one service.

    :param backend: the pub/sub backend.
    :param service: service name for messages (``graph-rag``).
    :param timeout: default seconds to wait for each reply.
    """

    def __init__(self, backend: Backend, service: str, request_queue: str, response_queue: str,
                 request_schema: type[Any], response_schema: type[Any], *, timeout: float = 60.0,
                 is_final: Callable[[Any], bool] | None = None, owner: str = "client",
                 resend_after: float | None = None):
        self.backend = backend
        self.service = service
        self.request_queue = request_queue
        self.response_queue = response_queue
        self.request_schema = request_schema
        self.response_schema = response_schema
        self.timeout = timeout
        self.is_final = is_final or default_is_final(response_schema)
        self.owner = owner
        if resend_after is not None and resend_after <= 0:
            raise ValueError("resend_after must be positive")
        #: Seconds without any reply after which the request is sent again (``None``: never).
        self.resend_after = resend_after
        token = uuid.uuid4().hex[:12]
        self.subscription = f"{owner}--{service}--rr-{token}"
        self.reply_queue = f"{response_queue}:r-{token}"
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[str, asyncio.Queue[tuple[str, bytes]]] = {}

    async def start(self) -> RequestResponseClient:
        if self._producer is not None:
            return self
        # Subscribe before the first request can be sent, so no reply is missed.
        self._consumer = consumer = await self.backend.subscribe(self.reply_queue, self.subscription, shared=False)
        self._producer = await self.backend.create_producer(self.request_queue)
        self._reader = asyncio.create_task(self._read(consumer), name=f"rr-reader-{self.service}")
        return self

    async def __aenter__(self) -> RequestResponseClient:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _read(self, consumer: Consumer) -> None:
        while True:
            try:
                msg = await consumer.receive()
            except asyncio.CancelledError:
                raise
            except BackendError as e:
                log.warning("%s: reply reader error: %s", self.service, e)
                await asyncio.sleep(0.5)
                continue
            rid = msg.properties.get("id", "")
            queue = self._pending.get(rid)
            if queue is not None:
                queue.put_nowait((rid, msg.data))
            try:
                await consumer.ack(msg)
            except Exception:  # noqa: BLE001 - ack of a dropped connection; the reply was already routed
                pass

    def _span(self) -> Span | None:
        """The client span of one call (None when tracing is off); the service's span is its child."""
        if not telemetry.enabled():
            return None
        return telemetry.start_span(f"call {self.service}", kind="client", attributes={
            telemetry.SERVICE: self.owner, "messaging.system": self.backend.name,
            "messaging.operation.type": "send", "messaging.destination.name": self.request_queue})

    async def _send(self, payload: bytes, queue: asyncio.Queue[tuple[str, bytes]], rids: list[str],
                    span: Span | None = None) -> None:
        """Send one attempt under a new id routed to ``queue``; the id is appended to ``rids``."""
        if self._producer is None:
            await self.start()
        producer = self._producer
        if producer is None:
            raise BackendError(f"the {self.service} client was stopped")
        rid = uuid.uuid4().hex
        self._pending[rid] = queue
        rids.append(rid)
        properties = {"id": rid, "reply-to": self.reply_queue}
        if span is not None:
            telemetry.inject(properties, telemetry.span_context(span))
        await producer.send(payload, properties)

    def _encode(self, request: Any) -> bytes:
        if not isinstance(request, self.request_schema):
            raise TypeError(f"{self.service} expects {self.request_schema.__name__}, "
                            f"got {type(request).__name__}")
        return encode(request)

    def _timed_out(self, rids: list[str], timeout: float) -> RequestTimeout:
        REQUESTS.labels(self.owner, self.service, "timeout").inc()
        sent = f", sent {len(rids)} times" if len(rids) > 1 else ""
        return RequestTimeout(f"{self.service} did not answer within {timeout:g} s (request {rids[0]}{sent})")

    async def _first_reply(self, request: Any, queue: asyncio.Queue[tuple[str, bytes]], rids: list[str],
                           timeout: float, span: Span | None = None) -> tuple[str, bytes]:
        """Send ``request`` and wait for the first reply of any attempt, resending every ``resend_after`` s."""
        payload = self._encode(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await self._send(payload, queue, rids, span)
        while True:
            left = deadline - loop.time()
            wait = min(left, self.resend_after) if self.resend_after else left
            try:  # asyncio.timeout: Python 3.11's wait_for can drop a cancellation that meets a reply
                async with asyncio.timeout(max(wait, 0.0)):
                    return await queue.get()
            except TimeoutError:
                if wait >= left:
                    raise self._timed_out(rids, timeout) from None
            log.warning("%s: no reply to request %s after %g s, sending it again", self.service, rids[0],
                        timeout - (deadline - loop.time()))
            REQUESTS.labels(self.owner, self.service, "resent").inc()
            await self._send(payload, queue, rids, span)

    def _forget(self, rids: list[str]) -> None:
        for rid in rids:
            self._pending.pop(rid, None)

    async def request(self, request: Any, timeout: float | None = None) -> Any:
        """Send one request and return its (first) reply."""
        queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()
        rids: list[str] = []
        span = self._span()
        error: BaseException | None = None
        try:
            _rid, data = await self._first_reply(request, queue, rids, timeout or self.timeout, span)
            response = decode(self.response_schema, data)
            REQUESTS.labels(self.owner, self.service, "ok").inc()
            return response
        except BaseException as e:
            error = e
            raise
        finally:
            self._forget(rids)
            telemetry.end_span(span, error)

    async def stream(self, request: Any, timeout: float | None = None) -> AsyncIterator[Any]:
        """Send one request and yield replies until the final one; ``timeout`` applies to each reply.

        If the request was sent more than once, the attempt that answered first is followed and
        the other attempts' replies are dropped.
        """
        timeout = timeout or self.timeout
        queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()
        rids: list[str] = []
        span = self._span()
        error: BaseException | None = None
        # Whether the span names a Question yet: a call made for a query (an agent's tool call) names that
        # query's Question, from the baggage
        named = span is None or bool(telemetry.current_explain_id())
        try:
            rid, data = await self._first_reply(request, queue, rids, timeout, span)
            self._forget([r for r in rids if r != rid])
            while True:
                response = decode(self.response_schema, data)
                explain_id = None if named else getattr(response, "explain_id", None)
                if isinstance(explain_id, str) and explain_id:
                    # else the first explain event is the Question the service minted: the caller's span names
                    # it too (later events name the stages)
                    telemetry.set_attributes({telemetry.EXPLAIN_ID: explain_id}, span)
                    named = True
                yield response
                if self.is_final(response) or (getattr(response, "error", None) is not None
                                                and self._error_is_final(response)):
                    REQUESTS.labels(self.owner, self.service, "ok").inc()
                    return
                while True:
                    try:
                        async with asyncio.timeout(timeout):
                            got, data = await queue.get()
                    except TimeoutError:
                        raise self._timed_out([rid], timeout) from None
                    if got == rid:  # replies of an abandoned attempt that were already queued
                        break
        except BaseException as e:
            error = e if not isinstance(e, GeneratorExit) else None
            raise
        finally:
            self._forget(rids)
            telemetry.end_span(span, error)

    def _error_is_final(self, response: Any) -> bool:
        # A reply carrying an error ends the stream only if the schema has no other way to
        # say so (services always set the completion flag on errors; this guards old ones).
        return not any(f in getattr(self.response_schema, "__dataclass_fields__", {}) for f in _FINAL_FLAGS)

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stop only waits for the reader to end
                pass
            self._reader = None
        if self._consumer is not None:
            await self._consumer.close()
            self._consumer = None
        if self._producer is not None:
            await self._producer.close()
            self._producer = None

