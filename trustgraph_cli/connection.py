"""How a command reaches the services: embedded (in this process) or over Pulsar.  The third way,
through the gateway (``--api-url``), is :mod:`trustgraph_cli.gateway_transport`, with the same interface.

Embedded (the default) starts just the processors the command needs on the in-process bus
over the SQLite stores in ``$TG_HOME``, and on exit waits until everything they were asked
to store is stored.  A data directory that cannot be used, or stops being usable while the
command runs (the disk fills up), fails the command with that store error, whatever the
command was waiting for (see ``trustgraph_flow.embedded``).

With ``--pulsar-url`` (or env ``PULSAR_URL``) the command talks to running services over
Apache Pulsar: the broker's address is probed first, so an unreachable
broker is reported at once; the Pulsar client's own log goes nowhere (``TG_DEBUG=1``: to
stderr), so it can never mix with a command's output; ``PULSAR_LISTENER_NAME`` selects an
advertised listener (``external`` for the docker-compose broker seen from the host).
"""

from __future__ import annotations

import asyncio
import os
import socket
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trustgraph_base.processor.client import RequestResponseClient
from trustgraph_base.pubsub import Backend, BackendUnavailable
from trustgraph_base.pubsub.topics import request_queue, response_queue
from trustgraph_flow.manifest import PROCESSORS, closure

if TYPE_CHECKING:
    from trustgraph_flow.embedded import EmbeddedStack

#: Seconds to reach the broker's port / to finish the Pulsar handshake.
PROBE_SECONDS = 3.0
CONNECT_SECONDS = 5.0
#: After Ctrl-C or a failure (embedded): how long the writers may take to store what was already sent.
INTERRUPT_GRACE_SECONDS = 2.0
#: Seconds a processor stopped at once may take to finish its handlers before they are cancelled.
STOP_AT_ONCE_SECONDS = 0.2
#: Set once this process created a Pulsar client or started the embedded stack (whose ONNX
#: embedder runs native threads): the command then ends with ``os._exit``, see
#: :func:`trustgraph_cli.common._exit`.
native_runtime_started = False
#: Embedded processors that persist what they receive (a store and a flow to consume, in the service
#: manifest) and the services they call (the embedder): the rest are stopped at once on Ctrl-C.
WRITERS = frozenset(e.id for e in PROCESSORS.values() if e.stores and e.consumes) | frozenset(
    closure(*{c for e in PROCESSORS.values() if e.stores and e.consumes for c in e.calls}))


class Connection:
    """An open connection to the services.

    :param pulsar_url: talk to services over Pulsar at this URL; ``None`` = embedded.
    :param home: embedded data directory (default ``$TG_HOME`` or ``~/.trustgraph``).
    :param needs: embedded processor ids the command needs (:func:`trustgraph_flow.manifest.closure`).
    :param timeout: seconds to wait for each reply.
    :param flow: flow name in queue names.
    """

    def __init__(self, pulsar_url: str | None = None, home: Path | None = None, needs: tuple[str, ...] = (),
                 timeout: float = 120.0, flow: str = "default"):
        self.pulsar_url = pulsar_url
        self.home = home
        self.needs = needs
        self.timeout = timeout
        self.flow = flow
        self.stack: EmbeddedStack | None = None
        self.backend: Backend | None = None
        self._attached = None
        self._clients: dict[str, RequestResponseClient] = {}
        self._task: asyncio.Task | None = None  # runs the command's body while the connection is open
        self._unwatch = None
        self._cancelled_on_failure = False

    @classmethod
    def attach(cls, stack, timeout: float = 120.0) -> Connection:
        """A connection to an already running stack (tests, benchmarks); leaving it does not stop the stack."""
        conn = cls(None, None, (), timeout, stack.flow)
        conn.backend = stack.backend
        conn._attached = stack
        return conn

    @property
    def embedded(self) -> bool:
        return self.pulsar_url is None

    async def __aenter__(self) -> Connection:
        if self._attached is not None:
            self._watch(self._attached)  # a store failure ends the caller's wait here too
            return self
        if self.pulsar_url:
            await asyncio.to_thread(probe_broker, self.pulsar_url)
            self.backend = open_pulsar(self.pulsar_url)
        else:
            global native_runtime_started
            from trustgraph_flow.embedded import start_embedded

            native_runtime_started = True
            self.stack = stack = await start_embedded(self.home, only=self.needs, flow=self.flow)
            self.backend = stack.backend
        self._watch(self.stack or self._attached)
        return self

    def _watch(self, stack) -> None:
        """Fail the command's body at once when ``stack`` fails (embedded): cancel the task running it,
        and :meth:`__aexit__` raises the stack's failure instead of the cancellation."""
        if stack is None or not hasattr(stack, "watch"):
            return
        self._task = asyncio.current_task()

        def failed(_failure: BaseException) -> None:
            if self._task is not None and not self._task.done():
                self._cancelled_on_failure = True
                self._task.cancel()

        self._unwatch = stack.watch(failed)

    async def client(self, service: str) -> RequestResponseClient:
        """A started client of ``service`` (cached for the connection's life)."""
        from trustgraph_flow.common.services import SERVICES

        c = self._clients.get(service)
        if c is None:
            if self.backend is None:
                raise RuntimeError("the connection is not open")
            s = SERVICES[service]
            c = RequestResponseClient(self.backend, service, request_queue(service, self.flow),
                                      response_queue(service, self.flow), s.request, s.response,
                                      timeout=self.timeout, owner="cli", resend_after=s.resend_after(self.timeout))
            await c.start()
            self._clients[service] = c
        return c

    async def request(self, service: str, request: Any) -> Any:
        from trustgraph_base.processor import raise_on_error

        return raise_on_error(service, await (await self.client(service)).request(request))

    async def settle(self) -> None:
        """Embedded: wait until every message the command caused has been handled (traces stored)."""
        stack = self.stack or self._attached
        if stack is not None and hasattr(stack.backend, "pending"):
            await stack.wait_idle()

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if self._unwatch is not None:
            self._unwatch()  # from here on a failure is raised by wait_idle
        if self._cancelled_on_failure and self._task is not None:
            self._task.uncancel()
        stack = self.stack or self._attached
        for c in self._clients.values():
            try:
                await c.stop()
            except Exception:  # noqa: BLE001 - closing on the way out
                pass
        if self.stack is not None:
            if exc_type is None and self.stack.failure is None:
                try:
                    await self.stack.wait_idle()
                except BaseException:
                    await _stop_soon(self.stack)
                    raise
                await self.stack.stop()
            else:
                await _stop_soon(self.stack)
        elif self._attached is None and self.backend is not None:
            await self.backend.close()
        failure = getattr(stack, "failure", None)
        if failure is not None and (self._cancelled_on_failure or exc_type is None or issubclass(exc_type, Exception)):
            raise failure from None  # what the command was waiting for cannot come: the store failed


async def _stop_soon(stack) -> None:
    """Interrupted or failed: cancel the work at once, let the writers store what was already sent
    (at most :data:`INTERRUPT_GRACE_SECONDS`; none after a store failure, which halted them), then
    stop everything: a writer still waiting for a reply (from a service stopped above) is cancelled."""
    loop = asyncio.get_running_loop()
    others = [p for p in stack.processors if p.id not in WRITERS]
    writers = [p for p in stack.processors if p.id in WRITERS]
    await asyncio.gather(*(p.stop(timeout=STOP_AT_ONCE_SECONDS) for p in others), return_exceptions=True)
    pending = getattr(stack.backend, "pending", lambda: 0)
    deadline = loop.time() + (0.0 if stack.failure is not None else INTERRUPT_GRACE_SECONDS)
    try:
        while (any(p.in_flight for p in writers) or pending() > 0) and loop.time() < deadline:
            await asyncio.sleep(0.02)
    except BaseException:  # noqa: BLE001 - interrupted again: stop now
        pass
    await asyncio.gather(*(p.stop(timeout=STOP_AT_ONCE_SECONDS) for p in writers), return_exceptions=True)
    await stack.stop()


def broker_addresses(url: str) -> list[tuple[str, int]]:
    """``pulsar://h1:6650,h2:6651`` -> ``[("h1", 6650), ("h2", 6651)]``; ValueError when malformed."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("pulsar", "pulsar+ssl") or not parts.netloc:
        raise ValueError(f"invalid Pulsar URL {url!r}: expected pulsar://host:port")
    default = 6651 if parts.scheme == "pulsar+ssl" else 6650
    out = []
    for hostport in parts.netloc.split(","):
        host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
        host = host.strip("[]") or hostport
        try:
            out.append((host, int(port) if port else default))
        except ValueError:
            raise ValueError(f"invalid Pulsar URL {url!r}: bad port {port!r}") from None
    return out


def probe_broker(url: str, timeout: float = PROBE_SECONDS) -> None:
    """Raise :class:`BackendUnavailable` unless one of the broker addresses accepts a TCP connection."""
    errors = []
    for host, port in broker_addresses(url):
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as e:
            errors.append(e.strerror or str(e) or type(e).__name__)
    raise BackendUnavailable(f"cannot reach Pulsar at {url}: {'; '.join(errors).lower()}")


def open_pulsar(url: str):
    """A Pulsar backend whose client logs nowhere (or to stderr with ``TG_DEBUG=1``)."""
    from trustgraph_base.pubsub.pulsar import PulsarBackend

    class CliPulsarBackend(PulsarBackend):
        def _get_client(self):
            global native_runtime_started
            if self._client is None:
                import pulsar
                from pulsar.asyncio import Client

                debug = os.environ.get("TG_DEBUG") == "1"
                logger = pulsar.FileLogger(pulsar.LoggerLevel.Info if debug else pulsar.LoggerLevel.Error,
                                           "/dev/stderr" if debug else os.devnull)
                extra = {}
                if os.environ.get("PULSAR_LISTENER_NAME"):
                    extra["listener_name"] = os.environ["PULSAR_LISTENER_NAME"]
                self._client = Client(self.url, logger=logger,
                                      operation_timeout_seconds=max(1, int(self.connect_timeout)),
                                      connection_timeout_ms=int(self.connect_timeout * 1000), **extra)
                native_runtime_started = True
            return self._client

    return CliPulsarBackend(url, admin_url=os.environ.get("PULSAR_ADMIN_URL", ""), connect_timeout=CONNECT_SECONDS)
