"""Apache Pulsar backend (``pulsar-client``'s asyncio API).

Flow queues map to persistent topics, request/response/notify queues to non-persistent
ones (:mod:`.topics`).  Payloads are raw bytes (``BytesSchema``); properties are Pulsar
message properties.  Request/response producers do not batch (latency matters more than
throughput; see apache/pulsar-client-python #226); flow producers batch with a 1 ms delay.
``nack`` uses Pulsar negative acks with a short redelivery delay; redelivery counts come from
the broker.

The tenant ``tg`` and its namespaces are created through the admin REST API on first use
when an admin URL is known (``PULSAR_ADMIN_URL`` or ``http://<broker host>:8080``).  An
unreachable broker gives :class:`BackendUnavailable` within ``connect_timeout`` seconds; once
connected, the client reconnects by itself when the broker comes back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .base import BackendError, BackendUnavailable, Message, ReceiveTimeout
from .topics import QUEUE_CLASSES, TOPICSPACE, is_persistent, parse_queue, pulsar_topic

T = TypeVar("T")

log = logging.getLogger(__name__)


def _errors() -> tuple[type[BaseException], ...]:
    """Exceptions of pulsar-client: the C++ binding's and the asyncio wrapper's (not related classes)."""
    import pulsar
    import pulsar.asyncio

    return (pulsar.PulsarException, pulsar.asyncio.PulsarException)


#: Attempts of a producer creation or a subscription that times out (see ``PulsarBackend._guard``).
OPERATION_ATTEMPTS = 6

#: Largest payload (bytes) a message may carry: the broker's default ``maxMessageSize`` (5 MiB) less
#: 64 KiB for the message's metadata and its batch container.  A larger send fails (``MessageTooBig``,
#: or on a batching producer a send time-out); a payload just under 5 MiB already did.
MAX_MESSAGE_BYTES = 5 * 1024 * 1024 - 64 * 1024


def _is_timeout(e: BaseException) -> bool:
    """True for a time-out: ours, the C++ binding's ``pulsar.Timeout``, or the asyncio wrapper's ``Result.Timeout``."""
    import pulsar

    if isinstance(e, (asyncio.TimeoutError, pulsar.Timeout)):
        return True
    error = getattr(e, "error", None)
    return callable(error) and error() == pulsar.Result.Timeout


def broker_accepts_connections(url: str, timeout: float) -> bool:
    """Whether a TCP connection to one of the service URL's brokers (``pulsar://h1:6650,h2:6650``) succeeds."""
    parts = urllib.parse.urlsplit(url)
    default_port = 6651 if parts.scheme == "pulsar+ssl" else 6650
    for address in parts.netloc.rsplit("@", 1)[-1].split(","):
        host, _, port = address.rpartition(":") if ":" in address else (address, "", "")
        try:
            with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port or default_port)), timeout):
                return True
        except (OSError, ValueError):
            continue
    return False


def _admin_url_for(url: str) -> str:
    host = urllib.parse.urlparse(url).hostname or "127.0.0.1"
    return f"http://{host}:8080"


def ensure_tenant(admin_url: str, tenant: str = TOPICSPACE, timeout: float = 5.0) -> None:
    """Create tenant ``tg`` and namespaces ``tg/{flow,request,response,notify}`` if missing (idempotent)."""

    def put(path: str, body: dict[str, Any] | None) -> None:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(admin_url.rstrip("/") + path, data=data, method="PUT",
                                     headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=timeout).read()
        except urllib.error.HTTPError as e:
            if e.code != 409:  # 409: already exists
                raise BackendError(f"Pulsar admin {path} failed: HTTP {e.code} {e.read()[:200]!r}") from None

    clusters = json.loads(urllib.request.urlopen(admin_url.rstrip("/") + "/admin/v2/clusters",
                                                 timeout=timeout).read())
    put(f"/admin/v2/tenants/{tenant}", {"allowedClusters": clusters})
    for ns in QUEUE_CLASSES:
        put(f"/admin/v2/namespaces/{tenant}/{ns}", None)


class PulsarProducer:
    def __init__(self, producer: Any, queue: str):
        self._producer = producer
        self.queue = queue

    async def send(self, data: bytes, properties: dict[str, str] | None = None) -> None:
        try:
            await self._producer.send(bytes(data), properties=properties or {})
        except _errors() as e:
            raise BackendError(f"send to {self.queue} failed: {e}") from e

    async def close(self) -> None:
        try:
            await self._producer.close()
        except Exception:  # noqa: BLE001 - closing a producer of a dead connection
            pass


class PulsarConsumer:
    def __init__(self, consumer: Any, queue: str, subscription: str, exclusive: bool):
        self._consumer = consumer
        self.queue = queue
        self.subscription = subscription
        self._exclusive = exclusive

    async def receive(self, timeout: float | None = None) -> Message:
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancellation (Ctrl-C)
            # that arrives just as a message does.
            async with asyncio.timeout(timeout):
                m = await self._consumer.receive()
        except TimeoutError:
            raise ReceiveTimeout(f"no message on {self.queue} within {timeout} s") from None
        except _errors() as e:
            raise BackendError(f"receive on {self.queue} failed: {e}") from e
        return Message(data=m.data(), properties=dict(m.properties()), queue=self.queue,
                       message_id=str(m.message_id()), redelivery_count=m.redelivery_count(), handle=m)

    async def ack(self, message: Message) -> None:
        # The C++ client groups acks and sends them in the background; awaiting a future per
        # ack (the asyncio wrapper) costs a thread hop per message and caps a consumer's rate (bench/README.md).

        try:
            self._consumer._consumer.acknowledge(message.handle._message)
        except _errors() as e:
            # The consumer is gone (shutdown, lost connection): the broker redelivers the message,
            # which handlers tolerate (idempotent writes).
            log.warning("ack of %s on %s failed (%s); it will be redelivered", message.message_id, self.queue, e)

    async def nack(self, message: Message) -> None:
        try:
            self._consumer._consumer.negative_acknowledge(message.handle._message)
        except _errors() as e:
            log.warning("nack of %s on %s failed (%s)", message.message_id, self.queue, e)

    async def close(self) -> None:
        try:
            if self._exclusive:
                await self._consumer.unsubscribe()
            await self._consumer.close()
        except Exception:  # noqa: BLE001 - the subscription dies with the connection anyway
            pass


class PulsarBackend:
    """Pub/sub over Apache Pulsar.

    :param url: broker service URL (env ``PULSAR_URL``, default ``pulsar://127.0.0.1:6650``).
    :param admin_url: admin REST URL for tenant/namespace set-up (env ``PULSAR_ADMIN_URL``);
        ``""`` derives ``http://<host>:8080``; ``None`` skips the set-up.
    :param connect_timeout: seconds to wait for the broker before :class:`BackendUnavailable`.
    :param nack_delay: seconds before a nacked message is redelivered.
    """

    name = "pulsar"
    durable = True  # the broker keeps a persistent queue's messages until they are acked

    def __init__(self, url: str | None = None, admin_url: str | None = "", connect_timeout: float = 10.0,
                 nack_delay: float = 1.0):
        self.url = url or os.environ.get("PULSAR_URL") or "pulsar://127.0.0.1:6650"
        if admin_url == "":
            admin_url = os.environ.get("PULSAR_ADMIN_URL") or _admin_url_for(self.url)
        self.admin_url = admin_url
        self.connect_timeout = connect_timeout
        self.nack_delay = nack_delay
        self._client = None
        self._tenant_ready = False

    def _get_client(self) -> Any:
        if self._client is None:
            import pulsar
            from pulsar.asyncio import Client

            self._client = Client(
                self.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
                operation_timeout_seconds=max(1, int(self.connect_timeout)),
                connection_timeout_ms=int(self.connect_timeout * 1000))
        return self._client

    async def _prepare(self) -> None:
        if self._tenant_ready or not self.admin_url:
            return
        try:
            await asyncio.to_thread(ensure_tenant, self.admin_url, TOPICSPACE, min(5.0, self.connect_timeout))
            self._tenant_ready = True
        except (OSError, BackendError) as e:
            # The namespaces may exist already (set up by scripts/servers.sh or docker-compose).
            log.warning("could not ensure Pulsar tenant %s via %s: %s", TOPICSPACE, self.admin_url, e)
            self._tenant_ready = True

    async def _guard(self, what: str, start: Callable[[], Awaitable[T]]) -> T:
        """Run the Pulsar call ``start()``; a time-out is tried again, other failures are not.

        Creating a persistent topic's first producer or subscription makes the broker open a
        ledger, which on a loaded machine has taken longer than the operation time-out (CI saw a
        subscribe fail with ``Timeout`` while the broker was up, three times in a row on a test's
        private broker beside the full suite).  Both calls are idempotent, so a time-out is
        retried, :data:`OPERATION_ATTEMPTS` attempts in all, while the broker's port accepts
        connections.  The client reports a broker that refuses connections as a time-out too, so
        a time-out is tried again only once a TCP connection to the broker succeeds.
        """
        errors: tuple[type[BaseException], ...] = (TimeoutError, *_errors())
        attempt = 0
        while True:
            attempt += 1
            try:
                return await asyncio.wait_for(start(), self.connect_timeout + 5)
            except errors as e:
                if attempt < OPERATION_ATTEMPTS and _is_timeout(e) and await asyncio.to_thread(
                        broker_accepts_connections, self.url, min(2.0, self.connect_timeout)):
                    log.warning("%s on Pulsar at %s timed out (attempt %d of %d); trying again",
                                what, self.url, attempt, OPERATION_ATTEMPTS)
                    continue
                raise BackendUnavailable(f"cannot {what} on Pulsar at {self.url}: {e or 'timed out'}") from e

    async def create_producer(self, queue: str, *, batching: bool | None = None) -> PulsarProducer:
        """A producer on ``queue``.

        :param batching: by default flow (work) queues batch for throughput and request/response
            queues never wait for a batch; ``False`` gives a flow-queue producer without the batch
            delay, for sends a caller waits for (its cost: ``bench/README.md``).
        """
        parse_queue(queue)
        await self._prepare()
        client = self._get_client()
        topic = pulsar_topic(queue)
        batching = is_persistent(queue) if batching is None else batching
        producer = await self._guard(f"create a producer for {topic}", lambda: client.create_producer(
            topic, batching_enabled=batching, batching_max_publish_delay_ms=1, block_if_queue_full=True,
            send_timeout_millis=30000))
        return PulsarProducer(producer, queue)

    async def subscribe(self, queue: str, subscription: str, *, shared: bool = True,
                        initial_position: str = "latest") -> PulsarConsumer:
        import pulsar

        parse_queue(queue)
        await self._prepare()
        client = self._get_client()
        topic = pulsar_topic(queue)
        position = (pulsar.InitialPosition.Earliest if initial_position == "earliest"
                    else pulsar.InitialPosition.Latest)
        consumer = await self._guard(f"subscribe to {topic}", lambda: client.subscribe(
            topic, subscription,
            consumer_type=pulsar.ConsumerType.Shared if shared else pulsar.ConsumerType.Exclusive,
            initial_position=position,
            negative_ack_redelivery_delay_ms=int(self.nack_delay * 1000),
            receiver_queue_size=1000))
        return PulsarConsumer(consumer, queue, subscription, exclusive=not shared)

    async def close(self) -> None:
        if self._client is not None:
            try:
                await self._client.close()
            except Exception:  # noqa: BLE001 - closing is best effort: the client is dropped either way
                pass
            self._client = None
