"""The processor base class: consume, handle, reply, ack — the same code on every backend.

A service subclasses :class:`Processor`, declares its specs in ``__init__`` and writes
``async`` handlers.  The base class opens producers and clients first, then consumers;
runs ``concurrency`` handlers per consumer; acks after success; nacks on failure and
dead-letters after ``max_redeliveries`` (at once for ``ValueError``: bad input does not get
better by retrying), except that a failure meaning a dependency is down (store unavailable,
bus error, time-out) is retried with a growing back-off and is not dead-lettered before
``max_transient_redeliveries`` (an outage loses nothing); so is a store whose data directory
or file system cannot be used (:func:`is_environment_failure`: read-only, full, not a directory),
which is also reported to :attr:`Processor.on_environment_failure` (the embedded stack fails the
command on it instead of retrying in memory); turns failures of request handlers into ``Error``
replies; dead-letters undecodable payloads (logged with queue and message id) without
stopping; and on :meth:`stop` finishes in-flight messages before closing.

### Usage example

```python
class Echo(Processor):
    default_id = "echo"

    def __init__(self, **params):
        super().__init__(**params)
        self.add(ConsumerSpec("request", request_queue("echo", self.flow), TextCompletionRequest,
                              self.on_request, response_queue=response_queue("echo", self.flow),
                              response_schema=TextCompletionResponse,
                              error_response=lambda e: TextCompletionResponse(error=e)))

    async def on_request(self, msg, ctx):
        await ctx.respond(TextCompletionResponse(response=msg.prompt))
```
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from .. import telemetry
from ..codec import CodecError, decode, encode
from ..pubsub.base import Backend, BackendError, Consumer, Message, Producer
from ..pubsub.topics import dead_letter_queue
from ..schema.primitives import Error
from .client import RequestResponseClient
from .context import MessageContext
from .metrics import HANDLER_SECONDS, IN_FLIGHT, MESSAGES, STARTED
from .specs import ConsumerSpec, ProducerSpec, RequestResponseSpec

log = logging.getLogger(__name__)

AnySpec = TypeVar("AnySpec", ConsumerSpec, ProducerSpec, RequestResponseSpec)

#: Reply producers a service keeps open for its clients' own reply queues.
CLIENT_REPLY_PRODUCERS = 256


def is_transient(e: BaseException) -> bool:
    """True when a failure says a dependency is unavailable (retry later), not that the message is bad.

    Store outages (``error_type == "store-unavailable"``: :class:`~trustgraph_base.store.errors.StoreUnavailable`
    or a service's error reply saying so), bus errors and time-outs are transient, and so is a store
    whose data directory or file system cannot be used (:func:`is_environment_failure`): the message
    is as good as ever, it waits until the machine is fixed.
    """
    return (getattr(e, "error_type", None) == "store-unavailable" or is_environment_failure(e)
            or isinstance(e, (BackendError, TimeoutError, ConnectionError)))


def is_environment_failure(e: BaseException) -> bool:
    """True when a store's data directory or file system cannot be used (``error_type == "store-environment"``:
    :class:`~trustgraph_base.store.errors.StoreEnvironmentError` or a service's error reply saying so)."""
    return getattr(e, "error_type", None) == "store-environment"


def transient_backoff(attempt: int) -> float:
    """Seconds to wait before handing back a message whose dependency is down: 0.25 s doubling to 30 s."""
    return min(30.0, 0.25 * 2.0 ** min(attempt, 8))


class TypedProducer:
    """Sends dataclass messages of one schema on one queue."""

    def __init__(self, producer: Producer, schema: type[Any], queue: str):
        self._producer = producer
        self.schema = schema
        self.queue = queue

    async def send(self, obj: Any, properties: dict[str, str] | None = None) -> None:
        if not isinstance(obj, self.schema):
            raise TypeError(f"{self.queue} carries {self.schema.__name__}, not {type(obj).__name__}")
        if telemetry.enabled():  # the consumer's span becomes a child of the current one
            properties = telemetry.inject(dict(properties or {}))
        await self._producer.send(encode(obj), properties)


class Processor:
    """Base of every service.

    :param backend: the pub/sub backend (shared by all processors of an embedded group).
    :param id: processor id; also the subscription prefix, so replicas with one id share work.
    :param flow: the flow name substituted into queue ids.
    :param concurrency: handlers running at once per consumer.
    """

    default_id = "processor"

    def __init__(self, *, backend: Backend, id: str | None = None, flow: str = "default", concurrency: int = 1,
                 **params: Any):
        if params:
            unknown = ", ".join(sorted(params))
            raise TypeError(f"{type(self).__name__} got unknown parameters: {unknown}")
        self.backend = backend
        self.id = id or self.default_id
        self.flow = flow
        self.concurrency = max(1, int(concurrency))
        self._consumer_specs: list[ConsumerSpec] = []
        self._producer_specs: list[ProducerSpec] = []
        self._client_specs: list[RequestResponseSpec] = []
        self._producers: dict[str, TypedProducer] = {}
        self._clients: dict[str, RequestResponseClient] = {}
        self._consumers: list[Any] = []
        self._reply_producers: dict[str, Any] = {}
        self._client_replies: collections.OrderedDict[str, Producer] = collections.OrderedDict()
        self._dead_letter: dict[str, Any] = {}
        self._workers: list[asyncio.Task[None]] = []
        self._receiving: set[asyncio.Task[Any]] = set()
        self._in_flight = 0
        self._in_flight_gauge = IN_FLIGHT.labels(self.id)  # the same count, for a benchmark or a scraper outside
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopping = False
        self._halted = False
        self._stop_requested = asyncio.Event()
        self._stopped = asyncio.Event()
        self.started = False
        #: The first environment failure a handler of this processor met (:func:`is_environment_failure`).
        self.environment_failure: BaseException | None = None
        #: Called with each environment failure a handler meets (the embedded stack sets it).
        self.on_environment_failure: Callable[[BaseException], None] | None = None

    # ------------------------------------------------------------ declaration
    def add(self, spec: AnySpec) -> AnySpec:
        """Register a spec (call from ``__init__``)."""
        if isinstance(spec, ConsumerSpec):
            self._consumer_specs.append(spec)
        elif isinstance(spec, ProducerSpec):
            self._producer_specs.append(spec)
        elif isinstance(spec, RequestResponseSpec):
            self._client_specs.append(spec)
        else:
            raise TypeError(f"unknown spec {spec!r}")
        return spec

    def producer(self, name: str) -> TypedProducer:
        return self._producers[name]

    def client(self, name: str) -> RequestResponseClient:
        return self._clients[name]

    # ------------------------------------------------------------ life cycle
    async def on_start(self) -> None:
        """Hook for subclasses: runs after producers and clients exist, before consumers start."""

    async def on_stop(self) -> None:
        """Hook for subclasses: runs after consumers stopped and in-flight work finished."""

    async def start(self) -> None:
        if self.started:
            return
        for spec in self._producer_specs:
            producer = await self.backend.create_producer(spec.queue, batching=spec.batching)
            self._producers[spec.name] = TypedProducer(producer, spec.schema, spec.queue)
        for cs in self._client_specs:
            client = RequestResponseClient(self.backend, cs.service, cs.request_queue, cs.response_queue,
                                           cs.request_schema, cs.response_schema, timeout=cs.timeout,
                                           is_final=cs.is_final, owner=self.id, resend_after=cs.resend_after)
            self._clients[cs.name] = await client.start()
        await self.on_start()
        for c in self._consumer_specs:
            if c.response_queue and c.response_queue not in self._reply_producers:
                self._reply_producers[c.response_queue] = await self.backend.create_producer(c.response_queue)
            consumer = await self.backend.subscribe(c.queue, c.subscription or f"{self.id}--{c.name}",
                                                    shared=c.shared)
            self._consumers.append(consumer)
            for n in range(c.concurrency or self.concurrency):
                self._workers.append(asyncio.create_task(self._work(c, consumer),
                                                         name=f"{self.id}-{c.name}-{n}"))
        self.started = True
        STARTED.labels(self.id).inc()
        log.info("%s started (%s)", self.id, ", ".join(s.name for s in self._consumer_specs) or "no consumers")

    async def stop(self, timeout: float = 30.0) -> None:
        """Stop taking messages, let in-flight handlers finish (up to ``timeout``), then close everything."""
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        self._stop_requested.set()
        # Workers blocked in receive() hold no message: cancel them.  Workers running a
        # handler finish it and exit on their own.
        for task in list(self._receiving):
            task.cancel()
        if self._workers:
            done, pending = await asyncio.wait(self._workers, timeout=timeout)
            for task in pending:
                log.warning("%s: handler still running after %.0f s, cancelling", self.id, timeout)
                task.cancel()
            await asyncio.gather(*self._workers, return_exceptions=True)
        if self.started:
            STARTED.labels(self.id).dec()
        await self.on_stop()
        for consumer in self._consumers:
            await consumer.close()
        for client in self._clients.values():
            await client.stop()
        for producer in [*self._producers.values()]:
            await producer._producer.close()
        for producer in [*self._reply_producers.values(), *self._client_replies.values(),
                         *self._dead_letter.values()]:
            await producer.close()
        self._stopped.set()
        log.info("%s stopped", self.id)

    def halt(self) -> None:
        """Take no more messages; handlers already running finish, nothing is closed (:meth:`stop` does that).

        The embedded stack halts every processor once one met an environment failure, so nothing
        that follows the failed write is stored after it.
        """
        self._halted = True
        for task in list(self._receiving):
            task.cancel()

    async def run(self) -> None:
        """Start, then wait until :meth:`stop` completes (from a signal handler or another task)."""
        await self.start()
        await self._stopped.wait()

    async def wait_idle(self) -> None:
        """Wait until no handler of this processor is running (tests and the embedded CLI use it)."""
        await self._idle.wait()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    # ------------------------------------------------------------ message handling
    async def _work(self, spec: ConsumerSpec, consumer: Consumer) -> None:
        me = asyncio.current_task()
        if me is None:
            raise RuntimeError("a consumer worker runs as a task")
        while not self._stopping and not self._halted:
            self._receiving.add(me)
            try:
                msg = await consumer.receive()
            except asyncio.CancelledError:
                return
            except BackendError as e:
                if self._stopping or self._halted:
                    return
                log.warning("%s/%s: receive failed (%s); retrying", self.id, spec.name, e)
                await asyncio.sleep(1.0)
                continue
            finally:
                self._receiving.discard(me)
            self._in_flight += 1
            self._in_flight_gauge.inc()
            self._idle.clear()
            try:
                await self._handle(spec, consumer, msg)
            except Exception:
                log.exception("%s/%s: unexpected failure handling message %s", self.id, spec.name, msg.message_id)
            finally:
                self._in_flight -= 1
                self._in_flight_gauge.dec()
                if self._in_flight == 0:
                    self._idle.set()

    def _span(self, spec: ConsumerSpec, msg: Message) -> AbstractContextManager[Any]:
        """The span of handling ``msg``: a child of the span that sent it (docs/observability.md)."""
        if not telemetry.enabled():
            return contextlib.nullcontext()
        return telemetry.consumer_span(
            f"{self.id} {spec.name}", msg.properties, kind="server" if spec.response_queue else "consumer",
            attributes={telemetry.SERVICE: self.id, "messaging.system": self.backend.name,
                        "messaging.operation.type": "process", "messaging.destination.name": spec.queue,
                        "messaging.message.id": msg.message_id})

    async def _handle(self, spec: ConsumerSpec, consumer: Consumer, msg: Message) -> None:
        ctx = MessageContext(self.id, spec.name, spec.queue, msg.message_id, msg.properties, msg.redelivery_count,
                             self._reply_producers.get(spec.response_queue) if spec.response_queue else None,
                             functools.partial(self._client_reply_producer, spec) if spec.response_queue else None)
        try:
            obj: Any = decode(spec.schema, msg.data)
        except CodecError as e:
            MESSAGES.labels(self.id, spec.name, "undecodable").inc()
            log.error("%s/%s: undecodable message %s on %s: %s", self.id, spec.name, msg.message_id, spec.queue, e)
            if spec.error_response is not None and ctx.request_id:
                await self._reply_error(ctx, spec, spec.error_response,
                                        Error("bad-request", f"cannot decode request: {e}"))
            await self._to_dead_letter(spec, msg, f"undecodable: {e}")
            await consumer.ack(msg)
            return
        t0 = time.perf_counter()
        try:
            with self._span(spec, msg):
                await spec.handler(obj, ctx)
        except Exception as e:  # noqa: BLE001 - every failure is either replied to or redelivered
            HANDLER_SECONDS.labels(self.id, spec.name).observe(time.perf_counter() - t0)
            MESSAGES.labels(self.id, spec.name, "error").inc()
            if is_environment_failure(e):
                self._environment_failed(e)
            if spec.error_response is not None and spec.response_queue:
                log.warning("%s/%s: request %s failed: %s", self.id, spec.name, ctx.request_id, e)
                await self._reply_error(ctx, spec, spec.error_response,
                                        Error(getattr(e, "error_type", f"{self.id}-error"), str(e)))
                await consumer.ack(msg)
            elif is_transient(e) and msg.redelivery_count < spec.max_transient_redeliveries:
                # A dependency is down (store unreachable, broker gone, a call timed out), not the
                # message: an outage must never dead-letter it.  Back off while holding it (a dead
                # store is not hammered), then hand it back for redelivery.
                delay = transient_backoff(msg.redelivery_count)
                log.warning("%s/%s: message %s failed (attempt %d), dependency unavailable; retrying in %.1f s: %s",
                            self.id, spec.name, msg.message_id, msg.redelivery_count + 1, delay, e)
                try:
                    await asyncio.wait_for(self._stop_requested.wait(), delay)
                except TimeoutError:
                    pass
                await consumer.nack(msg)
            elif isinstance(e, ValueError) or msg.redelivery_count >= spec.max_redeliveries:
                # Bad input (ValueError and its subclasses, e.g. invalid names or terms) will fail
                # the same way every time: dead-letter it at once instead of retrying.
                log.error("%s/%s: message %s dead-lettered after %d attempt(s): %s", self.id, spec.name,
                          msg.message_id, msg.redelivery_count + 1, e)
                await self._to_dead_letter(spec, msg, str(e))
                await consumer.ack(msg)
            else:
                log.warning("%s/%s: message %s failed (attempt %d), will be redelivered: %s", self.id, spec.name,
                            msg.message_id, msg.redelivery_count + 1, e)
                await consumer.nack(msg)
            return
        HANDLER_SECONDS.labels(self.id, spec.name).observe(time.perf_counter() - t0)
        MESSAGES.labels(self.id, spec.name, "ok").inc()
        await consumer.ack(msg)

    def _environment_failed(self, e: BaseException) -> None:
        """Record an environment failure and report it to :attr:`on_environment_failure`."""
        if self.environment_failure is None:
            self.environment_failure = e
            log.error("%s: %s", self.id, e)
        if self.on_environment_failure is not None:
            self.on_environment_failure(e)

    async def _client_reply_producer(self, spec: ConsumerSpec, reply_to: str) -> Producer | None:
        """The producer for a client's own reply queue (cached, least recently used closed first).

        Only sub-queues of the consumer's response queue are accepted, so a request can never
        make a service publish into another queue; ``None`` falls back to the shared queue.
        """
        if spec.response_queue is None or not reply_to.startswith(spec.response_queue + ":") or len(reply_to) > 512:
            log.warning("%s/%s: ignoring reply-to %r outside %s", self.id, spec.name, reply_to[:100],
                        spec.response_queue)
            return None
        cache = self._client_replies
        producer = cache.pop(reply_to, None)
        if producer is None:
            producer = await self.backend.create_producer(reply_to)
            while len(cache) >= CLIENT_REPLY_PRODUCERS:
                _old, evicted = cache.popitem(last=False)
                asyncio.create_task(evicted.close())
        cache[reply_to] = producer  # most recently used last
        return producer

    async def _reply_error(self, ctx: MessageContext, spec: ConsumerSpec, error_response: Callable[[Error], Any],
                           error: Error) -> None:
        try:
            await ctx.respond(error_response(error))
        except Exception as e:  # noqa: BLE001 - the client will time out; nothing else to do
            log.error("%s/%s: could not send error reply for %s: %s", self.id, spec.name, ctx.request_id, e)

    async def _to_dead_letter(self, spec: ConsumerSpec, msg: Message, reason: str) -> None:
        queue = dead_letter_queue(spec.queue)
        try:
            producer = self._dead_letter.get(queue)
            if producer is None:
                producer = self._dead_letter[queue] = await self.backend.create_producer(queue)
            props = dict(msg.properties)
            props.update({"dlq-reason": reason[:1000], "dlq-queue": spec.queue, "dlq-message-id": msg.message_id,
                          "dlq-processor": self.id})
            MESSAGES.labels(self.id, spec.name, "dead_letter").inc()
            await producer.send(msg.data, props)
        except Exception as e:  # noqa: BLE001 - a failed dead-letter is logged, never takes the consumer down
            log.error("%s/%s: could not dead-letter message %s: %s", self.id, spec.name, msg.message_id, e)

    # ------------------------------------------------------------ command line
    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        """Subclasses add their own options (call ``super().add_args(parser)`` first)."""

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict[str, Any]:
        """Map parsed options to constructor parameters (subclasses extend)."""
        return {}
