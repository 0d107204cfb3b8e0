"""The aiohttp application: the WebSockets, the REST routes and a small index, with the gateway's limits."""

from __future__ import annotations

import weakref

import orjson
from aiohttp import WSCloseCode, web

from .auth import Auth
from .dispatch import Dispatcher
from .explorer import Explorer
from .limits import Limits
from .mux import Socket, socket_handler
from .native import Native
from .rest import Rest

SOCKETS = web.AppKey("sockets", weakref.WeakSet)


def make_app(dispatcher: Dispatcher, auth: Auth, limits: Limits, native: Native | None = None,
             explorer: Explorer | None = None) -> web.Application:
    """An application serving ``dispatcher`` (TrustGraph's protocol), ``native`` (this project's own channel,
    when given) and ``explorer`` (the trace explorer's pages, when given) behind ``auth`` within ``limits``."""
    app = web.Application(client_max_size=limits.max_body_bytes)
    sockets: weakref.WeakSet = weakref.WeakSet()
    app[SOCKETS] = sockets
    index = orjson.dumps({
        "service": "api-gateway", "protocol": "TrustGraph 2.11.1 gateway", "flow": dispatcher.flow,
        "auth": "bearer token" if auth.required else "open (loopback only)",
        "endpoints": ["GET /api/v1/socket (WebSocket)", "POST /api/v1/flow/{flow}/service/{kind}",
                      "POST /api/v1/librarian", "GET /api/v1/openapi.json"]
        + (["GET /api/v1/native (WebSocket, this project's tg-* commands)", "GET /api/v1/whoami"] if native else [])
        + (["GET /explorer (the trace explorer, in a browser)"] if explorer else []),
    }, option=orjson.OPT_INDENT_2)

    async def show_index(request: web.Request) -> web.Response:
        return web.Response(body=index, content_type="application/json")

    async def close_sockets(app: web.Application) -> None:
        for ws in list(sockets):
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"gateway stopping")

    app.router.add_get("/", show_index)
    app.router.add_get("/api/v1/socket", socket_handler(lambda ws: Socket(ws, dispatcher, auth, limits), limits,
                                                        sockets))
    app.router.add_routes(Rest(dispatcher, auth).routes())
    if native is not None:
        app.router.add_routes(native.routes(sockets))
    if explorer is not None:
        app.router.add_routes(explorer.routes())
    app.on_shutdown.append(close_sockets)
    return app
