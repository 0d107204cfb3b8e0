"""``api-gateway`` (a service over the bus, like every other) and ``tg-gateway`` (the embedded stack plus the gateway).

``api-gateway`` is a processor with clients of graph-rag, document-rag, agent, triples, trace-list,
trace-admin and librarian on its ``--flow``, and producers of its ``triples-store`` and
``entity-contexts`` flows (for this project's ``tg-load-turtle --api-url``); it takes the
launcher's common options (``--pubsub``, ``--pulsar-url``, ``--flow``, ...) plus ``--host``
(default 127.0.0.1), ``--port`` (8888), ``--default-user``, ``--token`` / ``--tokens-file``,
``--library-collection`` and the limits.  ``tg-gateway`` starts every embedded processor
(in-process bus, SQLite under ``--home``) and the gateway in one process, so TrustGraph's client,
this project's ``tg-* --api-url`` or a browser can talk to it without Pulsar.
Both refuse a non-loopback ``--host`` without tokens (exit 2).  See ``docs/gateway.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from trustgraph_base.processor import Processor, launch
from trustgraph_base.processor.launcher import serve_until_stopped, setup_logging

from ..common.services import client_spec, flow_producer_spec
from .app import make_app
from .auth import Auth, AuthConfigError, check_bind, make_auth
from .dispatch import GATEWAY_SERVICES, Dispatcher
from .explorer import Explorer
from .limits import Limits
from .native import NATIVE_QUEUES, NATIVE_SERVICES, Native

log = logging.getLogger(__name__)

DEFAULT_PORT = 8888


class ApiGateway(Processor):
    """Serves TrustGraph 2.11.1's gateway protocol (WebSocket and REST) and this project's own channel (for its
    ``tg-*`` commands, :mod:`.native`) in front of the services."""

    default_id = "api-gateway"

    def __init__(self, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, auth: Auth | None = None,
                 limits: Limits | None = None, library_collection: str = "default", tracing_ui_url: str = "",
                 **params: Any):
        super().__init__(**params)
        self.host = host
        self.port = port
        self.auth = auth or Auth()
        self.limits = limits or Limits()
        check_bind(host, self.auth)
        self.dispatcher = Dispatcher(self.client, self.flow, library_collection)
        self.explorer = Explorer(self.client, self.auth, tracing_ui_url=check_tracing_ui_url(tracing_ui_url))
        self.native = Native(self.client, self.producer, self.backend, self.flow, self.auth, self.limits, self.id)
        for service in dict.fromkeys(GATEWAY_SERVICES + NATIVE_SERVICES):
            self.add(client_spec(service, self.flow))
        for queue in NATIVE_QUEUES:  # unbatched: each write is awaited by its client
            self.add(flow_producer_spec(queue, queue, self.flow, batching=False))
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """The base URL clients use (with the port actually bound, when ``port`` was 0)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def on_start(self) -> None:
        self._runner = web.AppRunner(make_app(self.dispatcher, self.auth, self.limits, self.native,
                                                self.explorer), access_log=None,
                                     shutdown_timeout=5.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True, backlog=1024)
        await site.start()
        if self.port == 0:
            server = site._server
            if not isinstance(server, asyncio.Server):
                raise RuntimeError("the gateway's site started without a listening server")
            self.port = server.sockets[0].getsockname()[1]
        log.info("api-gateway listening on %s (flow %s, %s)", self.url, self.flow,
                 "tokens required" if self.auth.required else "open, loopback only")

    async def on_stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        super().add_args(parser)
        add_gateway_args(parser)

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        return {**super().params_from_args(args), **gateway_params(args)}


def add_gateway_args(parser: argparse.ArgumentParser) -> None:
    """The options both commands share."""
    env = os.environ.get
    parser.add_argument("--host", default=env("TG_GATEWAY_HOST", "127.0.0.1"),
                        help="address to listen on (env TG_GATEWAY_HOST; non-loopback needs tokens)")
    parser.add_argument("--port", type=int, default=int(env("TG_GATEWAY_PORT", str(DEFAULT_PORT))),
                        help="port (env TG_GATEWAY_PORT; 0 = any free port)")
    parser.add_argument("--default-user", default=env("TG_GATEWAY_DEFAULT_USER", "trustgraph"),
                        help="user of workspace 'default' (and of --token)")
    parser.add_argument("--token", default=env("TG_GATEWAY_TOKEN"),
                        help="bearer token of the default user (env TG_GATEWAY_TOKEN)")
    parser.add_argument("--tokens-file", default=env("TG_GATEWAY_TOKENS_FILE"),
                        help="file of 'USER TOKEN' lines (env TG_GATEWAY_TOKENS_FILE)")
    parser.add_argument("--library-collection", default="default",
                        help="collection where TrustGraph's add-document stages documents")
    defaults = Limits()
    parser.add_argument("--max-frame-bytes", type=int, default=defaults.max_frame_bytes)
    parser.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes)
    parser.add_argument("--max-outstanding", type=int, default=defaults.max_outstanding,
                        help="requests one WebSocket may have open at once")
    parser.add_argument("--idle-seconds", type=float, default=defaults.idle_seconds)
    parser.add_argument("--tracing-ui-url", default=env("TG_TRACING_UI_URL", ""),
                        help="link of the explorer's OpenTelemetry trace ids: an http(s) URL with {trace_id}, "
                             "e.g. http://127.0.0.1:16686/trace/{trace_id} (env TG_TRACING_UI_URL)")


def gateway_params(args: argparse.Namespace) -> dict:
    """Constructor parameters from the options; a bad configuration ends the command with exit 2."""
    try:
        auth = make_auth(args.default_user, args.token, args.tokens_file)
        check_bind(args.host, auth)
        limits = Limits(args.max_frame_bytes, args.max_body_bytes, args.max_outstanding, args.idle_seconds)
        tracing_ui_url = check_tracing_ui_url(args.tracing_ui_url)
    except (AuthConfigError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    return {"host": args.host, "port": args.port, "auth": auth, "limits": limits,
            "library_collection": args.library_collection, "tracing_ui_url": tracing_ui_url}


def check_tracing_ui_url(template: str) -> str:
    """``template`` if it is an http(s) URL naming ``{trace_id}`` once (or empty: no link), else ValueError."""
    if not template:
        return ""
    parts = urllib.parse.urlsplit(template)
    if parts.scheme not in ("http", "https") or not parts.netloc or template.count("{trace_id}") != 1:
        raise ValueError(f"--tracing-ui-url must be an http(s) URL containing {{trace_id}} once, "
                         f"got {template[:200]!r}")
    return template


async def open_explorer(url: str) -> None:
    """Open ``url`` in the default browser; a machine without one is told where to go instead."""
    import webbrowser

    if not await asyncio.to_thread(webbrowser.open, url):
        print(f"tg-gateway: no browser to open here; open {url}", file=sys.stderr, flush=True)


def run() -> None:
    """``api-gateway``: the gateway as a service over the bus."""
    launch(ApiGateway)


def embedded_main(argv: Sequence[str] | None = None) -> None:
    """``tg-gateway``: the embedded stack and the gateway in one process."""
    from trustgraph_flow.model.llm_settings import LlmSettingsError, add_llm_args, settings_from_args

    parser = argparse.ArgumentParser(prog="tg-gateway", description="TrustGraph's gateway protocol over the "
                                                                    "embedded stack (no Pulsar needed)")
    parser.add_argument("--home", default=os.environ.get("TG_HOME"), type=Path,
                        help="embedded data directory (env TG_HOME; default ~/.trustgraph)")
    parser.add_argument("--flow", default=os.environ.get("TG_FLOW", "default"))
    parser.add_argument("--log-level", default=os.environ.get("TG_LOG_LEVEL", "WARNING"))
    parser.add_argument("--open", action="store_true",
                        help="open the trace explorer in the default browser once the gateway listens")
    add_gateway_args(parser)
    add_llm_args(parser)
    args = parser.parse_args(argv)
    try:  # the embedded processors read them as a deployment's services do: from the environment
        os.environ.update(settings_from_args(args).env())
    except LlmSettingsError as e:
        parser.error(str(e))
    setup_logging(args.log_level)
    params = gateway_params(args)

    async def main() -> None:
        from trustgraph_flow.embedded import start_embedded

        stack = await start_embedded(args.home, flow=args.flow)
        gateway = ApiGateway(backend=stack.backend, flow=args.flow, **params)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await gateway.start()
            print(f"tg-gateway: TrustGraph gateway protocol on {gateway.url} (embedded, flow {args.flow}, "
                  f"{'tokens required' if gateway.auth.required else 'no tokens: loopback only'}); "
                  f"trace explorer: {gateway.url}explorer", file=sys.stderr, flush=True)
            if args.open:
                await open_explorer(gateway.url + "explorer")
            await stop.wait()
        finally:
            await gateway.stop()
            try:
                await stack.wait_idle(timeout=30)
            finally:
                await stack.stop()

    serve_until_stopped(main)
