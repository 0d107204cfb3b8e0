"""What every tg-* command shares: connection options, output, running async code, clean failures.

Failures print one line on stderr (``Error: ...``) and exit non-zero, never a traceback: 1 for
a failed operation (service error, not found, a data directory or disk that cannot be used, a
local file or the output that cannot be written), 2 for bad usage or bad input, 3 when a server
cannot be reached or does not answer, 130 on Ctrl-C.  ``TG_DEBUG=1`` shows the traceback.
Whatever was already printed on stdout stays as it was, ending with a complete line.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import os
import re
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from trustgraph_base import telemetry
from trustgraph_flow.model.llm_settings import HOP_MARGIN, LlmSettings, LlmSettingsError, reply_deadline

from .terminal_text import ECHO_LIMIT, clip, is_utf8, printable, quoted

EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 1, 2, 3, 130

_FLOW = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}\Z")


class CliError(click.ClickException):
    """A failure with a message for the user and an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.exit_code = code  # type: ignore[misc]  # click declares a class default; its exit() reads the instance

    def show(self, file=None) -> None:
        error_line(self.message)


class TgCommand(click.Command):
    """A tg-* command: a usage error (unknown option, missing or invalid value) is one ``Error:`` line
    on stderr and exit 2, like every other failure, instead of click's usage text and help hint.  So is
    a text value that is not UTF-8 (bytes the terminal could not decode): it names the option; file
    names are paths, not text, and may be anything."""

    def make_context(self, info_name, args, parent=None, **extra):
        command = info_name or self.name
        try:
            ctx = super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            message = _LONG_WORD.sub(lambda m: clip(m.group()), e.format_message())  # echoed input, clipped
            raise CliError(f"{message} (see {command} --help)", EXIT_USAGE) from None
        for param in self.params:
            values = ctx.params.get(param.name)
            for value in values if isinstance(values, (tuple, list)) else (values,):
                if isinstance(value, str) and not is_utf8(value):
                    name = param.opts[-1] if isinstance(param, click.Option) else param.human_readable_name
                    raise CliError(f"{name} {quoted(value)} is not valid UTF-8 (see {command} --help)", EXIT_USAGE)
        return ctx


_LONG_WORD = re.compile(rf"\S{{{ECHO_LIMIT + 1},}}")


# ------------------------------------------------------------------------------- stdout

class _Stdout:
    """Whether the last thing written to stdout ended a line (so a failure never leaves half a line)."""

    at_line_start = True


def out(line: str = "", nl: bool = True) -> None:
    """Write one line (or the start of one) to stdout at once (explain events must appear while the
    query runs).  Every control character in it is escaped, newlines too: data never starts a line."""
    _write(printable(line), nl)


def out_text(text: str, nl: bool = True) -> None:
    """Write text whose own newlines are its layout (an answer, streamed or whole); other control
    characters are escaped."""
    _write(printable(text, newlines=True), nl)


def out_document(text: str) -> None:
    """Write a JSON, Turtle or TriG document: control characters that it still holds as raw text are
    written as ``\\uXXXX`` escapes, which parse back to the same characters."""
    _write(printable(text, newlines=True, unicode_escapes=True), True)


def out_json(data) -> None:
    """Write ``data`` as indented JSON (see :func:`out_document`)."""
    import json

    out_document(json.dumps(data, ensure_ascii=False, indent=2))


def _write(s: str, nl: bool) -> None:
    s += "\n" if nl else ""
    if not s:
        return
    sys.stdout.write(s)
    sys.stdout.flush()
    _Stdout.at_line_start = s.endswith("\n")


def err_line(line: str) -> None:
    """Write one line to stderr (notes, ``-v`` thoughts), escaped as :func:`out` does."""
    end_line()
    click.echo(printable(line), err=True)


def error_line(message: str) -> None:
    """Write a failure as its one ``Error: ...`` line on stderr: the whole message on one line (data in it
    may hold newlines), escaped, at most :data:`ERROR_LIMIT` characters."""
    end_line()
    click.echo(f"Error: {_one_line(message)}", err=True)


def end_line() -> None:
    """Finish a partly written stdout line (a streamed answer cut short)."""
    if not _Stdout.at_line_start:
        out()


# --------------------------------------------------------------------------- connection

@dataclass(frozen=True)
class Target:
    """Where a command finds the services: embedded under ``home``, over Pulsar at ``pulsar_url``, or through
    the gateway ``gateway`` describes.

    :param pulsar_url: Pulsar service URL; ``None`` = embedded (or the gateway).
    :param home: embedded data directory (``None`` = ``$TG_HOME`` or ``~/.trustgraph``).
    :param timeout: seconds to wait for each reply.
    :param flow: flow name in queue names (services started with the same ``--flow``).
    :param gateway: the gateway (:class:`~trustgraph_cli.gateway_transport.GatewayInfo`) of ``--api-url``.
    """

    pulsar_url: str | None
    home: Path | None
    timeout: float
    flow: str = "default"
    gateway: Any = None

    def connect(self, uses: tuple[str, ...]):
        """A :class:`~trustgraph_cli.connection.Connection` for a command that uses ``uses``: the services it
        calls and the flows it writes or starts.  Embedded, it starts only the processors those need
        (their closure in the service manifest, :func:`trustgraph_flow.manifest.closure`).  Through the
        gateway, a :class:`~trustgraph_cli.gateway_transport.GatewayConnection` with the same interface."""
        if self.gateway is not None:
            from .gateway_transport import GatewayConnection

            return GatewayConnection(self.gateway, self.timeout)
        from trustgraph_flow.manifest import closure

        from .connection import Connection

        return Connection(self.pulsar_url, self.home, closure(*uses), self.timeout, self.flow)

    @property
    def max_message_bytes(self) -> int | None:
        """The largest message the transport carries (``None``: the in-process bus has no limit)."""
        if self.gateway is not None:
            return self.gateway.max_message_bytes
        if self.pulsar_url:
            from trustgraph_base.pubsub.pulsar import MAX_MESSAGE_BYTES

            return MAX_MESSAGE_BYTES
        return None

    @property
    def carrier(self) -> str:
        """What carries the messages, for errors about their size: ``Pulsar`` or ``the gateway``."""
        return "the gateway" if self.gateway is not None else "Pulsar"


#: Longest ``--timeout`` (seconds): one day.  Far beyond any reply; the bus clients take waits in
#: milliseconds as 32-bit integers (at most 24.8 days).
MAX_TIMEOUT = 86400.0


class TimeoutSeconds(click.FloatRange):
    """A number of seconds from 0.1 to :data:`MAX_TIMEOUT`: ``nan`` and ``inf`` are refused."""

    name = "seconds"

    def __init__(self):
        super().__init__(min=0.1, max=MAX_TIMEOUT)

    def convert(self, value, param, ctx):
        seconds = super().convert(value, param, ctx)
        if math.isnan(seconds):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return seconds


def connection_options(fn: Callable) -> Callable:
    """``-U/--user``, ``-C/--collection``, ``--pulsar-url``, ``--api-url``, ``--token``, ``--home``, ``--flow``,
    ``--timeout``.

    The command receives ``user``, ``collection`` and ``target`` (a :class:`Target`).  The transport is
    chosen by :func:`transport`; through the gateway, ``user`` is the token's user (see
    :func:`~trustgraph_cli.gateway_transport.gateway_info`).
    """

    @functools.wraps(fn)
    def wrapper(*args, pulsar_url, api_url, token, home, timeout, flow, **kwargs):
        if not _FLOW.match(flow or ""):
            raise CliError(f"invalid flow name {flow!r}: use 1-64 letters, digits, '_', '.' or '-'", EXIT_USAGE)
        ctx = click.get_current_context()
        llm = kwargs.pop("llm", None)
        if llm is not None:
            timeout = reply_wait(timeout, ctx.get_parameter_source("timeout") is ParameterSource.COMMANDLINE, llm)
        given = {name: ctx.get_parameter_source(name) for name in ("pulsar_url", "api_url", "token", "user", "flow")}
        chosen = transport(pulsar_url or None, api_url or None, given)
        if chosen != "gateway":
            if token and given["token"] is ParameterSource.COMMANDLINE:
                raise CliError("--token is for the gateway: give it with --api-url (or TRUSTGRAPH_URL)", EXIT_USAGE)
            return fn(*args, target=Target(pulsar_url if chosen == "pulsar" else None, home, timeout, flow), **kwargs)
        from .gateway_transport import gateway_info

        info = gateway_info(api_url, token or None, timeout, user=kwargs["user"],
                            user_given=given["user"] is ParameterSource.COMMANDLINE, flow=flow,
                            flow_given=given["flow"] in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT))
        kwargs["user"] = info.user
        return fn(*args, target=Target(None, home, timeout, info.flow, info), **kwargs)

    options = [
        click.option("-U", "--user", default="trustgraph", show_default=True,
                     help="user (tenant) name; with --token, the token's user"),
        click.option("-C", "--collection", default="default", show_default=True, help="collection name"),
        click.option("--pulsar-url", envvar="PULSAR_URL", default=None,
                     help="talk to services over Pulsar (env PULSAR_URL); default: embedded"),
        click.option("--api-url", envvar="TRUSTGRAPH_URL", default=None,
                     help="talk to services through this project's gateway, e.g. http://127.0.0.1:8888/ "
                          "(env TRUSTGRAPH_URL)"),
        click.option("--token", envvar="TRUSTGRAPH_TOKEN", default=None,
                     help="the gateway's bearer token (env TRUSTGRAPH_TOKEN)"),
        click.option("--home", envvar="TG_HOME", default=None, type=click.Path(path_type=Path),
                     help="embedded data directory (env TG_HOME; default ~/.trustgraph)"),
        click.option("--flow", envvar="TG_FLOW", default="default", show_default=True,
                     help="flow name the services were started with (env TG_FLOW); the gateway's by default"),
        click.option("--timeout", default=DEFAULT_TIMEOUT, show_default=True, type=TimeoutSeconds(),
                     help=f"seconds to wait for each reply (0.1 to {MAX_TIMEOUT:g}); with an LLM, at least "
                          f"--llm-timeout + {CLI_LLM_HOPS * HOP_MARGIN:g} s (docs/models.md)"),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


#: ``--timeout`` when not given.
DEFAULT_TIMEOUT = 120.0
#: Bus hops between a command and an LLM call (command -> agent -> graph-rag -> prompt -> text-completion -> LLM).
CLI_LLM_HOPS = 5


def llm_options(fn: Callable) -> Callable:
    """``--llm-timeout``, ``--llm-max-retries``, ``--llm-max-tokens`` (env ``TG_LLM_TIMEOUT``,
    ``TG_LLM_MAX_RETRIES``, ``TG_LLM_MAX_TOKENS``) for a command that may run an LLM; put it above
    :func:`connection_options`.

    The settings reach the processors the command starts embedded the way a deployment's services
    get them, as those environment variables (restored when the command ends); over Pulsar or the
    gateway the services use their own.  The command's ``--timeout`` follows them (:func:`reply_wait`).
    """

    @functools.wraps(fn)
    def wrapper(*args, llm_timeout, llm_max_retries, llm_max_tokens, **kwargs):
        try:
            env = LlmSettings.from_env()
            llm = LlmSettings(timeout=env.timeout if llm_timeout is None else llm_timeout,
                              max_retries=env.max_retries if llm_max_retries is None else llm_max_retries,
                              max_tokens=env.max_tokens if llm_max_tokens is None else llm_max_tokens)
        except LlmSettingsError as e:
            raise CliError(str(e), EXIT_USAGE) from None
        saved = {name: os.environ.get(name) for name in llm.env()}
        os.environ.update(llm.env())
        try:
            return fn(*args, llm=llm, **kwargs)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    options = [
        click.option("--llm-timeout", type=TimeoutSeconds(), default=None,
                     help="seconds one LLM call may take, retries included (env TG_LLM_TIMEOUT; default 120; "
                          "a slow local model needs more, docs/models.md)"),
        click.option("--llm-max-retries", type=click.IntRange(0, 20), default=None,
                     help="retries of a failed LLM call (env TG_LLM_MAX_RETRIES; default 3)"),
        click.option("--llm-max-tokens", type=click.IntRange(1, 1_000_000), default=None,
                     help="completion length limit of one LLM call (env TG_LLM_MAX_TOKENS; default 2048)"),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def reply_wait(timeout: float, given: bool, llm: LlmSettings) -> float:
    """The seconds a command waits for each reply when an LLM may be called before it.

    An LLM call may take ``llm.timeout`` plus :data:`HOP_MARGIN` per service in between
    (:data:`CLI_LLM_HOPS`): a ``--timeout`` given shorter than that is refused (exit 2, naming both
    settings), since the command would give up while the LLM is still within its time; one not
    given becomes that long.  Without an LLM configured (the extractive backend) ``--timeout``
    stands as it is.

    :param timeout: the ``--timeout`` value.
    :param given: whether ``--timeout`` was given on the command line.
    :param llm: the command's LLM call settings.
    """
    from trustgraph_flow.model.llm import resolve_llm

    if resolve_llm("auto") != "openai":
        return timeout
    needed = reply_deadline(llm.timeout, CLI_LLM_HOPS)
    if timeout >= needed:
        return timeout
    if given:
        raise CliError(f"--timeout {timeout:g} is shorter than an LLM call may take: --llm-timeout "
                       f"{llm.timeout:g} plus {CLI_LLM_HOPS * HOP_MARGIN:g} s for the services in between; give "
                       f"--timeout {needed:g} or more, or a smaller --llm-timeout", EXIT_USAGE)
    return needed


def transport(pulsar_url: str | None, api_url: str | None, given: dict[str, ParameterSource | None]) -> str:
    """``embedded``, ``pulsar`` or ``gateway``: a flag wins over the environment; two flags, or both
    ``PULSAR_URL`` and ``TRUSTGRAPH_URL`` without a flag, are a usage error (exit 2)."""
    pulsar_flag = bool(pulsar_url) and given.get("pulsar_url") is ParameterSource.COMMANDLINE
    api_flag = bool(api_url) and given.get("api_url") is ParameterSource.COMMANDLINE
    if pulsar_flag and api_flag:
        raise CliError("--pulsar-url and --api-url name two ways to the services: give one", EXIT_USAGE)
    if api_flag or (api_url and not pulsar_flag and not pulsar_url):
        return "gateway"
    if pulsar_flag or (pulsar_url and not api_url):
        return "pulsar"
    if pulsar_url and api_url:
        raise CliError("both PULSAR_URL and TRUSTGRAPH_URL are set: choose with --pulsar-url or --api-url "
                       "(or unset one)", EXIT_USAGE)
    return "embedded"


def check_names(user: str, collection: str) -> None:
    """Refuse bad user/collection names before anything starts (exit 2)."""
    from trustgraph_base.store.names import InvalidName, check_collection, check_user

    try:
        check_user(user)
        check_collection(collection)
    except InvalidName as e:
        raise CliError(str(e), EXIT_USAGE) from None


# ------------------------------------------------------------------------------ running

def run_async(coro_fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """Run an async command body; map every failure to one line on stderr and an exit code."""

    @functools.wraps(coro_fn)
    def wrapper(*args, **kwargs):
        debug = os.environ.get("TG_DEBUG") == "1"
        code = 0
        try:
            asyncio.run(_interruptible(coro_fn(*args, **kwargs)))
        except click.ClickException as e:
            e.show()
            code = e.exit_code
        except KeyboardInterrupt:
            end_line()
            click.echo("Error: interrupted", err=True)
            code = EXIT_INTERRUPTED
        except BrokenPipeError:
            # stdout closed early (``| head``): exit quietly, as command-line tools do.
            _discard_output()
            code = EXIT_FAILED
        except Exception as e:  # noqa: BLE001 - the promise is: one line, no traceback
            code = exit_code_for(e)
            _report(e, debug)
        _exit(code)

    return wrapper


async def _interruptible(body: Awaitable[Any]) -> Any:
    """Await ``body``; Ctrl-C cancels it (again on each Ctrl-C) and the command ends as interrupted.

    ``asyncio.run`` handles Ctrl-C by cancelling the task once and reports an interruption only if
    that cancellation comes back out: a body that swallowed it, even by accident, carried on and
    exited 0.  Here the interruption is remembered, so it is reported however the body ends.  A
    command started with Ctrl-C ignored (in the background of a shell) keeps ignoring it.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return await body
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("run as a task")
    loop = asyncio.get_running_loop()
    interrupted = False

    def on_interrupt() -> None:
        nonlocal interrupted
        interrupted = True
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread: asyncio.run's handling
        return await body
    try:
        result = await body
    except BaseException:
        if interrupted:
            raise KeyboardInterrupt from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    if interrupted:
        raise KeyboardInterrupt
    return result


def _exit(code: int) -> None:
    """Leave with ``code``.  After a Pulsar client or the embedded stack was used the process
    ends at once (output flushed, clients and stack already closed): native code can abort
    ("terminate called without an active exception") while the interpreter shuts down.  The
    Pulsar C++ client does (apache/pulsar-client-python#256), and once in CI so did an embedded
    ``tg-load-document`` that never touched Pulsar (its stack had loaded the ONNX embedder).
    Spans still queued for the tracing exporter go out first (docs/observability.md)."""
    telemetry.shutdown()
    connection = sys.modules.get("trustgraph_cli.connection")
    if connection is not None and getattr(connection, "native_runtime_started", False):
        from trustgraph_base.hard_exit import hard_exit

        hard_exit(code)
    if code:
        sys.exit(code)


def exit_code_for(e: BaseException) -> int:
    """The exit code of a failure (see the module docstring)."""
    from trustgraph_base.processor import RequestTimeout, ServiceError
    from trustgraph_base.pubsub import BackendError, BackendUnavailable
    from trustgraph_base.store.errors import NotFound, StoreEnvironmentError, StoreError, StoreUnavailable

    if isinstance(e, StoreEnvironmentError):  # the data directory or its disk, not a server
        return EXIT_FAILED
    if isinstance(e, (BackendUnavailable, StoreUnavailable, RequestTimeout, BackendError, ConnectionError,
                      TimeoutError)):
        return EXIT_UNREACHABLE
    if isinstance(e, OSError):  # a local file or the output (stdout on a full disk) failed, not a server
        return EXIT_FAILED
    if isinstance(e, ServiceError):
        return EXIT_USAGE if e.error_type in ("invalid-request", "bad-request", "request-error") else EXIT_FAILED
    if isinstance(e, (NotFound, LookupError)):
        return EXIT_FAILED
    if isinstance(e, (StoreError, ValueError)):
        return EXIT_USAGE
    return EXIT_FAILED


#: Longest error message printed (characters); messages that quote input say less than this.
ERROR_LIMIT = 500


def _one_line(message: str) -> str:
    """A failure message as one line: escaped (newlines too) and cut to :data:`ERROR_LIMIT` characters."""
    return printable(clip((message or "").strip(), ERROR_LIMIT))


def _first_line(message: str) -> str:
    """The first non-blank line of an exception's message (a library's own detail lines are left out), as
    :func:`_one_line`."""
    lines = [line for line in (message or "").splitlines() if line.strip()]
    return _one_line(lines[0]) if lines else ""


def _report(e: BaseException, debug: bool) -> None:
    writing_output = isinstance(e, OSError) and _raised_by_output(e)
    if not writing_output:
        end_line()
    if debug:
        import traceback

        traceback.print_exception(e)
    message = _os_error_message(e, writing_output) if isinstance(e, OSError) else _first_line(str(e))
    click.echo(f"Error: {message or type(e).__name__}", err=True)
    if writing_output:
        _discard_output()


def _discard_output() -> None:
    """Point stdout at /dev/null: output that could not be written is not tried again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def _raised_by_output(e: BaseException) -> bool:
    """Whether ``e`` was raised while writing the command's output: by :func:`out` or :func:`end_line`, or
    by a rich console printing a table."""
    own = {out.__code__, end_line.__code__}
    tb = e.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code in own or frame.f_globals.get("__name__", "").startswith("rich."):
            return True
        tb = tb.tb_next
    return False


def _os_error_message(e: OSError, writing_output: bool) -> str:
    """One line for an ``OSError``: what could not be done, and the system's reason."""
    reason = (e.strerror or _first_line(str(e))).lower()
    if writing_output:
        return f"cannot write the output: {reason}"
    return f"{e.filename}: {reason}" if e.filename else reason


def quiet_logging() -> None:
    """Services in the embedded stack log to stderr only errors (``TG_LOG_LEVEL`` overrides)."""
    level = os.environ.get("TG_LOG_LEVEL", "CRITICAL" if os.environ.get("TG_DEBUG") != "1" else "INFO").upper()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_PrintableFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    logging.getLogger().setLevel(level)


class _PrintableFormatter(logging.Formatter):
    """Log records reach the terminal with control characters escaped (a traceback keeps its lines)."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), newlines=True)
