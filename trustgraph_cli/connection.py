"""How a command reaches the services: embedded (in this process) or over Pulsar.

Embedded (the default) starts just the processors the command needs on the in-process bus
over the SQLite stores in ``$TG_HOME``, and on exit waits until everything they were asked
to store is stored.  With ``--pulsar-url`` (or env ``PULSAR_URL``) the command talks to
running services over Apache Pulsar.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from trustgraph_base.processor.client import RequestResponseClient
from trustgraph_base.pubsub.topics import request_queue, response_queue


class Connection:
    """An open connection to the services.

    :param pulsar_url: talk to services over Pulsar at this URL; ``None`` = embedded.
    :param home: embedded data directory (default ``$TG_HOME`` or ``~/.trustgraph``).
    :param needs: embedded processor ids the command uses (see ``trustgraph_flow.embedded``).
    :param timeout: seconds to wait for each reply.
    """

    def __init__(self, pulsar_url: str | None = None, home: Path | None = None, needs: tuple[str, ...] = (),
                 timeout: float = 120.0, flow: str = "default"):
        self.pulsar_url = pulsar_url
        self.home = home
        self.needs = needs
        self.timeout = timeout
        self.flow = flow
        self.stack = None
        self.backend = None
        self._clients: dict[str, RequestResponseClient] = {}

    @classmethod
    def attach(cls, stack, timeout: float = 120.0) -> "Connection":
        """A connection to an already running stack (tests, benchmarks); leaving it does not stop the stack."""
        conn = cls(None, None, (), timeout, stack.flow)
        conn.backend = stack.backend
        conn._attached = stack
        return conn

    @property
    def embedded(self) -> bool:
        return self.pulsar_url is None

    async def __aenter__(self) -> "Connection":
        if getattr(self, "_attached", None) is not None:
            return self
        if self.pulsar_url:
            from trustgraph_base.pubsub import open_backend

            self.backend = open_backend("pulsar", url=self.pulsar_url, connect_timeout=5.0,
                                        admin_url=os.environ.get("PULSAR_ADMIN_URL", ""))
        else:
            from trustgraph_flow.embedded import start_embedded

            self.stack = await start_embedded(self.home, only=self.needs, flow=self.flow)
            self.backend = self.stack.backend
        return self

    async def client(self, service: str) -> RequestResponseClient:
        """A started client of ``service`` (cached for the connection's life)."""
        from trustgraph_flow.common.services import SERVICES

        c = self._clients.get(service)
        if c is None:
            s = SERVICES[service]
            c = RequestResponseClient(self.backend, service, request_queue(service, self.flow),
                                      response_queue(service, self.flow), s.request, s.response,
                                      timeout=self.timeout, owner="cli")
            await c.start()
            self._clients[service] = c
        return c

    async def request(self, service: str, request: Any) -> Any:
        from trustgraph_base.processor import raise_on_error

        return raise_on_error(service, await (await self.client(service)).request(request))

    async def settle(self) -> None:
        """Embedded: wait until every message the command caused has been handled (traces stored)."""
        stack = self.stack or getattr(self, "_attached", None)
        if stack is not None and hasattr(stack.backend, "pending"):
            await stack.wait_idle()

    async def __aexit__(self, exc_type, exc, tb) -> None:
        for c in self._clients.values():
            try:
                await c.stop()
            except Exception:  # noqa: BLE001 - closing on the way out
                pass
        if getattr(self, "_attached", None) is not None:
            return  # the stack belongs to the caller
        if self.stack is not None:
            if exc_type is None:
                await self.stack.wait_idle()
            else:
                # Interrupted or failed: still let in-flight stores finish, but do not hang.
                try:
                    await asyncio.wait_for(self.stack.wait_idle(), 10)
                except Exception:  # noqa: BLE001
                    pass
            await self.stack.stop()
        elif self.backend is not None:
            await self.backend.close()
