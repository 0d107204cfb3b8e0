"""What every tg-* command shares: connection options, running async code, clean failures.

Failures print one line on stderr and exit non-zero, never a traceback: 1 for a failed
operation (service error, not found), 2 for bad usage or bad input, 3 when a server cannot
be reached or does not answer, 130 on Ctrl-C.  ``TG_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable

import click

EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 1, 2, 3, 130


class CliError(click.ClickException):
    """A failure with a message for the user and an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.exit_code = code

    def show(self, file=None) -> None:
        click.echo(f"Error: {self.message}", err=True)


def connection_options(fn: Callable) -> Callable:
    """``-U/--user``, ``-C/--collection``, ``--pulsar-url``, ``--home``, ``--timeout``."""
    options = [
        click.option("-U", "--user", default="trustgraph", show_default=True, help="user (tenant) name"),
        click.option("-C", "--collection", default="default", show_default=True, help="collection name"),
        click.option("--pulsar-url", envvar="PULSAR_URL", default=None,
                     help="talk to services over Pulsar (env PULSAR_URL); default: embedded"),
        click.option("--home", envvar="TG_HOME", default=None, type=click.Path(path_type=Path),
                     help="embedded data directory (env TG_HOME; default ~/.trustgraph)"),
        click.option("--timeout", default=120.0, show_default=True, type=float,
                     help="seconds to wait for each reply"),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def check_names(user: str, collection: str) -> None:
    """Refuse bad user/collection names before anything starts (exit 2)."""
    from trustgraph_base.store.names import InvalidName, check_collection, check_user

    try:
        check_user(user)
        check_collection(collection)
    except InvalidName as e:
        raise CliError(str(e), EXIT_USAGE) from None


def run_async(coro_fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """Run an async command body; map every failure to one line on stderr and an exit code."""

    @functools.wraps(coro_fn)
    def wrapper(*args, **kwargs):
        from trustgraph_base.processor import RequestTimeout, ServiceError
        from trustgraph_base.pubsub import BackendError, BackendUnavailable
        from trustgraph_base.store.errors import NotFound, StoreError, StoreUnavailable

        debug = os.environ.get("TG_DEBUG") == "1"
        try:
            return asyncio.run(coro_fn(*args, **kwargs))
        except click.ClickException:
            raise
        except KeyboardInterrupt:
            _flush()
            click.echo("Interrupted.", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except (BackendUnavailable, StoreUnavailable, RequestTimeout) as e:
            _fail(e, EXIT_UNREACHABLE, debug)
        except (BackendError, ConnectionError, OSError) as e:
            _fail(e, EXIT_UNREACHABLE, debug)
        except ServiceError as e:
            _fail(e, EXIT_USAGE if e.error_type in ("invalid-request", "bad-request") else EXIT_FAILED, debug)
        except (NotFound, LookupError) as e:
            _fail(e, EXIT_FAILED, debug)
        except (StoreError, ValueError) as e:
            _fail(e, EXIT_USAGE, debug)
        except Exception as e:  # noqa: BLE001 - the promise is: one line, no traceback
            _fail(e, EXIT_FAILED, debug)

    return wrapper


def _flush() -> None:
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass


def _fail(e: BaseException, code: int, debug: bool) -> None:
    _flush()
    if debug:
        import traceback

        traceback.print_exception(e)
    message = str(e) or type(e).__name__
    click.echo(f"Error: {message.splitlines()[0] if message else type(e).__name__}", err=True)
    sys.exit(code)


def quiet_logging() -> None:
    """Services in the embedded stack log to stderr only warnings and worse (``TG_LOG_LEVEL`` overrides)."""
    import logging

    level = os.environ.get("TG_LOG_LEVEL", "ERROR").upper()
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger().setLevel(level)
