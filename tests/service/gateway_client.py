"""A minimal client of the gateway's protocol for the tests: raw frames over a real WebSocket, raw REST.

It speaks exactly what TrustGraph 2.11.1's client sends (``docs/gateway.md``) and hides
nothing: tests read the frames as they come.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field

import aiohttp

from trustgraph_flow.gateway.service import ApiGateway

#: Seconds a test waits for one frame before failing.
FRAME_WAIT = 120.0


@dataclass
class Socket:
    """One WebSocket connection to the gateway; frames not yet claimed are kept by id."""

    ws: aiohttp.ClientWebSocketResponse
    flow: str = "default"
    pending: dict[str, list] = field(default_factory=dict)
    unrouted: list = field(default_factory=list)
    counter: int = 0

    async def send(self, frame) -> None:
        if isinstance(frame, str):
            await self.ws.send_str(frame)
        else:
            await self.ws.send_json(frame)

    async def frame(self, timeout: float = FRAME_WAIT) -> dict:
        msg = await self.ws.receive(timeout=timeout)
        assert msg.type == aiohttp.WSMsgType.TEXT, f"expected a text frame, got {msg.type} {msg.data!r}"
        return msg.json()

    async def auth(self, token: str = "") -> dict:
        await self.send({"type": "auth", "token": token})
        return await self.frame()

    def next_id(self) -> str:
        self.counter += 1
        return f"req-{self.counter}"

    async def request(self, service: str, body: dict, workspace: str = "default", flow: str | None = None,
                      request_id: str | None = None) -> str:
        """Send one request frame (on the gateway's flow unless ``flow`` says otherwise; none for librarian)."""
        rid = request_id or self.next_id()
        frame = {"id": rid, "workspace": workspace, "service": service, "request": body}
        if service != "librarian":
            frame["flow"] = flow or self.flow
        await self.send(frame)
        return rid

    async def replies(self, rid: str, timeout: float = FRAME_WAIT) -> list[dict]:
        """Every frame of request ``rid`` up to the one marked complete (other ids are kept for later)."""
        got = self.pending.setdefault(rid, [])
        while not (got and got[-1].get("complete")):
            frame = await self.frame(timeout)
            fid = frame.get("id")
            if fid is None:
                self.unrouted.append(frame)
            else:
                self.pending.setdefault(fid, []).append(frame)
        return self.pending.pop(rid)

    async def call(self, service: str, body: dict, **kw) -> list[dict]:
        return await self.replies(await self.request(service, body, **kw))


@dataclass
class Gateway:
    """A running gateway and an HTTP session to reach it."""

    gateway: ApiGateway
    http: aiohttp.ClientSession

    @property
    def url(self) -> str:
        return self.gateway.url

    def service_path(self, kind: str) -> str:
        return f"api/v1/flow/{self.gateway.flow}/service/{kind}"

    async def socket(self, token: str | None = "") -> Socket:
        ws = await self.http.ws_connect(self.url + "api/v1/socket", max_msg_size=64 << 20)
        sock = Socket(ws, self.gateway.flow)
        if token is not None:
            reply = await sock.auth(token)
            assert reply["type"] == "auth-ok", reply
        return sock

    async def post(self, path: str, body, token: str | None = None) -> tuple[int, dict | None]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        kw = {"data": body} if isinstance(body, (str, bytes)) else {"json": body}
        async with self.http.post(self.url + path.lstrip("/"), headers=headers, **kw) as resp:
            try:
                data = await resp.json(content_type=None)
            except (ValueError, aiohttp.ContentTypeError):
                data = None
            return resp.status, data

    async def librarian(self, body: dict, token: str | None = None, workspace: str = "default") -> dict:
        status, data = await self.post("api/v1/librarian", {"workspace": workspace, **body}, token)
        assert status == 200, (status, data)
        return data


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def eventually(check, timeout: float = 60.0, every: float = 0.25):
    """``await check()`` until it returns something truthy (stores on Pulsar are written asynchronously)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await check()
        if result or loop.time() > deadline:
            return result
        await asyncio.sleep(every)
