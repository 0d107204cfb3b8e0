"""Running processors: one per process (console scripts) or many in one process (groups).

Every service console script is ``launch(ServiceClass)``: common options (``--pubsub
pulsar|memory`` / env ``PUBSUB_BACKEND``, ``--pulsar-url`` / env ``PULSAR_URL``, ``--flow`` / env
``TG_FLOW``, ``--id``, ``--concurrency``, ``--metrics-port`` / env ``TG_METRICS_PORT``,
``--log-level``, ``--log-format``) plus the service's own.  SIGTERM and SIGINT stop the processor
gracefully: in-flight messages finish first.  A configuration the processor cannot start with
(:class:`ConfigurationError`) ends it with one line and exit status 2.

A group runs several processors on one backend from a small TOML file
(``tg-processor-group -c group.toml``; the format is in docs/deployment.md)::

    pubsub = "memory"            # or "pulsar" (pulsar_url = "pulsar://...")
    [[processor]]
    service = "triples-write"    # a service of the manifest (trustgraph_flow.manifest), or
                                 # class = "package.module:ClassName"
    id = "triples-write"         # optional
    [processor.params]
    store = "sqlite"
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import os
import signal
import sys
import tomllib
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from .. import telemetry
from ..hard_exit import hard_exit
from ..pubsub import Backend, BackendUnavailable, open_backend
from ..store.errors import StoreEnvironmentError
from .base import Processor
from .metrics import serve_metrics

log = logging.getLogger(__name__)


class ConfigurationError(ValueError):
    """A processor cannot start with the configuration it was given (a missing store, no LLM endpoint).

    The message is one line that names the option and the environment variable to set.
    """


class JsonFormatter(logging.Formatter):
    """One JSON object per log line (``--log-format json``), for log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname,
                 "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def add_common_args(parser: argparse.ArgumentParser, default_id: str) -> None:
    parser.add_argument("--pubsub", choices=["pulsar", "memory"], default=os.environ.get("PUBSUB_BACKEND", "pulsar"),
                        help="message bus (default: env PUBSUB_BACKEND or pulsar)")
    parser.add_argument("--pulsar-url", default=os.environ.get("PULSAR_URL", "pulsar://127.0.0.1:6650"),
                        help="Pulsar service URL (env PULSAR_URL)")
    parser.add_argument("--pulsar-admin-url", default=os.environ.get("PULSAR_ADMIN_URL", ""),
                        help="Pulsar admin URL for tenant set-up (env PULSAR_ADMIN_URL)")
    parser.add_argument("--flow", default=os.environ.get("TG_FLOW", "default"),
                        help="flow name used in queue names (env TG_FLOW)")
    parser.add_argument("--id", default=default_id, help="processor id (replicas with one id share the work)")
    parser.add_argument("--concurrency", type=int, default=int(os.environ.get("TG_CONCURRENCY", "1")),
                        help="handlers running at once per consumer")
    parser.add_argument("--metrics-port", type=int, default=int(os.environ.get("TG_METRICS_PORT", "0")),
                        help="serve Prometheus metrics on 127.0.0.1:PORT (0 = off)")
    parser.add_argument("--log-level", default=os.environ.get("TG_LOG_LEVEL", "INFO"))
    parser.add_argument("--log-format", choices=["text", "json"], default=os.environ.get("TG_LOG_FORMAT", "text"))


def make_backend(args: argparse.Namespace) -> Backend:
    if args.pubsub == "pulsar":
        return open_backend("pulsar", url=args.pulsar_url, admin_url=args.pulsar_admin_url or "")
    return open_backend("memory")


async def run_processors(processors: Sequence[Processor], backend: Backend) -> None:
    """Start processors, run until SIGTERM/SIGINT, then stop them gracefully (reverse order)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread
            pass
    started = []
    try:
        for p in processors:
            await p.start()
            started.append(p)
        await stop.wait()
        log.info("stopping: finishing in-flight messages")
    finally:
        for p in reversed(started):
            await p.stop()
        await backend.close()
        await asyncio.to_thread(telemetry.shutdown)  # the spans still queued go out before the process ends


def launch(cls: type[Processor], argv: Sequence[str] | None = None) -> None:
    """Console-script entry point of one service."""
    parser = argparse.ArgumentParser(prog=cls.default_id, description=(cls.__doc__ or "").strip().split("\n")[0])
    add_common_args(parser, cls.default_id)
    cls.add_args(parser)
    args = parser.parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    serve_metrics(args.metrics_port)
    telemetry.configure(default_service_name=args.id)

    async def main() -> None:
        backend = make_backend(args)
        processor = cls(backend=backend, id=args.id, flow=args.flow, concurrency=args.concurrency,
                        **cls.params_from_args(args))
        await run_processors([processor], backend)

    serve_until_stopped(main)


def serve_until_stopped(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``main`` and end the process: 0 after a graceful stop, 2 when the bus is unreachable or the
    configuration is not usable (one line naming the option to set), 1 when the service failed (its
    traceback logged) or cannot use its data directory (one line: a service never starts on a
    directory it could not write to).

    The exit is :func:`hard_exit` in every case, after the processors and the backend are
    closed: once a Pulsar client has run, the interpreter's own shutdown can abort on its
    native threads (exit -6 after a clean SIGTERM stop; seen in CI), and a supervisor would
    read that as a crash.
    """
    code = 0
    try:
        asyncio.run(main())
    except BackendUnavailable as e:
        log.error("%s", e)
        code = 2
    except ConfigurationError as e:
        log.error("cannot start: %s", e)
        code = 2
    except StoreEnvironmentError as e:
        log.error("cannot start: %s", e)
        code = 1
    except KeyboardInterrupt:
        pass
    except Exception:
        log.exception("the service failed")
        code = 1
    hard_exit(code)


def load_class(path: str) -> type[Processor]:
    """``package.module:ClassName`` -> the class."""
    module, _, name = path.partition(":")
    if not name:
        raise ValueError(f"processor class {path!r} must look like 'package.module:ClassName'")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, Processor)):
        raise TypeError(f"{path} is not a Processor")
    return cls


def build_group(config: dict[str, Any], backend: Backend,
                resolve: Callable[[str], type[Processor]] = load_class) -> list[Processor]:
    """Processors described by a group config (see the module docstring).

    :param resolve: turns an entry's ``service`` or ``class`` into the processor class (the
        default knows class paths only; ``tg-processor-group`` also resolves manifest ids).
    """
    procs = []
    for entry in config.get("processor", []):
        name = entry.get("service") or entry.get("class")
        if not name:
            raise ConfigurationError("a [[processor]] entry of the group config names no 'service' or 'class'")
        cls = resolve(name)
        params = dict(entry.get("params", {}))
        procs.append(cls(backend=backend, id=entry.get("id", cls.default_id), flow=config.get("flow", "default"),
                         concurrency=entry.get("concurrency", 1), **params))
    return procs


def group_main(argv: Sequence[str] | None = None,
               resolve: Callable[[str], type[Processor]] = load_class) -> None:
    """``tg-processor-group -c group.toml``: many processors in one process on one backend."""
    parser = argparse.ArgumentParser(prog="tg-processor-group", description="Run several processors in one process")
    parser.add_argument("-c", "--config", required=True, help="group config (TOML)")
    parser.add_argument("--metrics-port", type=int, default=0)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--log-format", choices=["text", "json"], default="text")
    args = parser.parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    try:
        with open(args.config, "rb") as f:
            config = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        parser.exit(2, f"tg-processor-group: cannot read {args.config}: {e}\n")
    serve_metrics(args.metrics_port)
    telemetry.configure()

    async def main() -> None:
        name = config.get("pubsub", "memory")
        backend = (open_backend("pulsar", url=config.get("pulsar_url") or os.environ.get("PULSAR_URL"))
                   if name == "pulsar" else open_backend(name))
        await run_processors(build_group(config, backend, resolve), backend)

    serve_until_stopped(main)
