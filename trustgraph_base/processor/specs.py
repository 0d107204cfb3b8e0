"""Declarative wiring of a processor: what it consumes, produces and calls.

A service lists its specs in its constructor; the :class:`~.base.Processor` opens them on
start and closes them on stop.  Queue ids come from :mod:`trustgraph_base.pubsub.topics`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..schema.primitives import Error

if TYPE_CHECKING:
    from .context import MessageContext

Handler = Callable[[Any, "MessageContext"], Awaitable[None]]


@dataclass
class ConsumerSpec:
    """Consume ``schema`` messages from ``queue`` and call ``handler(message, ctx)``.

    :param name: the spec's name (metrics label, subscription suffix).
    :param queue: full queue id (``flow:tg:...`` or ``request:tg:...``).
    :param response_queue: when set, the handler may ``await ctx.respond(obj)``; replies carry
        the request's ``id`` property.
    :param error_response: builds the reply for a failed request from an :class:`Error`; with it
        a handler exception becomes an error reply (and the request is acked), never a silent drop.
    :param concurrency: handlers running at once (default: the processor's ``concurrency``).
    :param max_redeliveries: after this many failed deliveries a flow message is dead-lettered.
    :param max_transient_redeliveries: failures meaning "a dependency is down" (store unavailable,
        bus error, time-out) are retried with a back-off up to 30 s this many times before the
        message is dead-lettered (100: about 45 minutes of outage), so an outage loses nothing.
    :param subscription: subscription name (default ``<processor id>--<name>``); processors with
        the same id share the work.
    """

    name: str
    queue: str
    schema: type
    handler: Handler
    response_queue: str | None = None
    response_schema: type | None = None
    error_response: Callable[[Error], Any] | None = None
    concurrency: int | None = None
    max_redeliveries: int = 5
    max_transient_redeliveries: int = 100
    subscription: str | None = None
    shared: bool = True


@dataclass
class ProducerSpec:
    """A typed producer of ``schema`` messages on ``queue`` (``processor.producer(name).send(obj)``).

    :param batching: ``False`` for a producer whose sends someone waits for (a query's explain
        stages: the session's last message waits for their acknowledgement); ``None`` leaves it
        to the backend (flow queues batch).
    """

    name: str
    queue: str
    schema: type
    batching: bool | None = None


@dataclass
class RequestResponseSpec:
    """A typed client of another service (``processor.client(name).request(obj)`` / ``.stream(obj)``).

    :param service: the service's name, used in timeout and error messages.
    :param is_final: which response ends a stream (default: the schema's completion flag).
    :param timeout: seconds to wait for each response message.
    :param resend_after: seconds without a first reply after which the request is sent again
        (idempotent services only; ``None``: never).
    """

    name: str
    service: str
    request_queue: str
    response_queue: str
    request_schema: type
    response_schema: type
    timeout: float = 60.0
    is_final: Callable[[Any], bool] | None = None
    resend_after: float | None = None
