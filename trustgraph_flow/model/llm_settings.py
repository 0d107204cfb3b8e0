"""The settings of every LLM call (timeout, retries, completion length) and the deadlines that follow them.

Every command and service reads them the same way: a flag wins (``--llm-timeout``,
``--llm-max-retries``, ``--llm-max-tokens`` on the ``tg-*`` commands; ``--timeout``,
``--max-retries``, ``--max-tokens`` on ``text-completion``), else the environment
(``TG_LLM_TIMEOUT``, ``TG_LLM_MAX_RETRIES``, ``TG_LLM_MAX_TOKENS``), else the defaults, which suit
a hosted API.  A slow local model needs a longer timeout (docs/models.md).

The LLM timeout bounds one whole LLM call, retries included.  Every bus client between a caller
and that call waits for each reply at least the LLM timeout plus :data:`HOP_MARGIN` seconds per
hop (:func:`reply_deadline`), so the innermost deadline fires first and its error, which names
the setting to raise, is what the caller sees; no client waits for ever.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["LlmSettings", "LlmSettingsError", "ENV_TIMEOUT", "ENV_MAX_RETRIES", "ENV_MAX_TOKENS", "DEFAULT_TIMEOUT",
           "DEFAULT_MAX_RETRIES", "DEFAULT_MAX_TOKENS", "MAX_TIMEOUT", "MAX_RETRIES", "MAX_TOKENS", "HOP_MARGIN",
           "TIMEOUT_HINT", "reply_deadline", "add_llm_args", "settings_from_args", "check_timeout",
           "check_max_retries", "check_max_tokens"]

ENV_TIMEOUT = "TG_LLM_TIMEOUT"
ENV_MAX_RETRIES = "TG_LLM_MAX_RETRIES"
ENV_MAX_TOKENS = "TG_LLM_MAX_TOKENS"

#: Defaults for a hosted API; docs/models.md gives the ones for a slow local model.
DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_RETRIES = 3
DEFAULT_MAX_TOKENS = 2048

#: Bounds of the settings: a timeout of at most a day (bus waits are 32-bit milliseconds), at most
#: 20 retries, at most a million completion tokens.
MAX_TIMEOUT = 86400.0
MAX_RETRIES = 20
MAX_TOKENS = 1_000_000

#: Seconds each bus hop between a client and the LLM call adds to the client's reply deadline.
HOP_MARGIN = 30.0

#: What an LLM timeout error tells the user to raise.
TIMEOUT_HINT = f"raise --llm-timeout (env {ENV_TIMEOUT}; text-completion: --timeout)"


class LlmSettingsError(ValueError):
    """A setting out of range or not a number; the message names the setting."""


@dataclass(frozen=True)
class LlmSettings:
    """Timeout (seconds per call, retries included), retries after the first attempt, completion length limit.

    :raises LlmSettingsError: a value out of range.
    """

    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    max_tokens: int = DEFAULT_MAX_TOKENS

    def __post_init__(self) -> None:
        check_timeout(self.timeout, "LLM timeout")
        check_max_retries(self.max_retries, "LLM max retries")
        check_max_tokens(self.max_tokens, "LLM max tokens")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LlmSettings:
        """The settings of ``TG_LLM_TIMEOUT``, ``TG_LLM_MAX_RETRIES`` and ``TG_LLM_MAX_TOKENS`` (defaults when unset).

        :param environ: the environment (default ``os.environ``).
        :raises LlmSettingsError: a variable that is not a number in range; the message names it.
        """
        env = os.environ if environ is None else environ
        return cls(
            timeout=_parse(env, ENV_TIMEOUT, float, DEFAULT_TIMEOUT, check_timeout),
            max_retries=_parse(env, ENV_MAX_RETRIES, int, DEFAULT_MAX_RETRIES, check_max_retries),
            max_tokens=_parse(env, ENV_MAX_TOKENS, int, DEFAULT_MAX_TOKENS, check_max_tokens),
        )

    def completion_params(self) -> dict[str, float | int]:
        """Parameters of ``OpenAICompletion`` and the ``text-completion`` service."""
        return {"timeout": self.timeout, "max_retries": self.max_retries, "max_tokens": self.max_tokens}

    def env(self) -> dict[str, str]:
        """The same settings as environment variables (for processes a caller starts)."""
        return {ENV_TIMEOUT: f"{self.timeout:g}", ENV_MAX_RETRIES: str(self.max_retries),
                ENV_MAX_TOKENS: str(self.max_tokens)}


def add_llm_args(parser: argparse.ArgumentParser) -> None:
    """``--llm-timeout``, ``--llm-max-retries``, ``--llm-max-tokens`` for a program that starts processors
    which may call an LLM (``tg-gateway``); read back with :func:`settings_from_args`."""
    parser.add_argument("--llm-timeout", type=float, default=None,
                        help=f"seconds one LLM call may take, retries included (env {ENV_TIMEOUT}; "
                             f"default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--llm-max-retries", type=int, default=None,
                        help=f"retries of a failed LLM call (env {ENV_MAX_RETRIES}; default {DEFAULT_MAX_RETRIES})")
    parser.add_argument("--llm-max-tokens", type=int, default=None,
                        help=f"completion length limit (env {ENV_MAX_TOKENS}; default {DEFAULT_MAX_TOKENS})")


def settings_from_args(args: argparse.Namespace) -> LlmSettings:
    """The settings of :func:`add_llm_args`' flags, else of the environment.

    :raises LlmSettingsError: a value out of range; the message names the flag or variable.
    """
    env = LlmSettings.from_env()
    timeout = env.timeout if args.llm_timeout is None else check_timeout(args.llm_timeout, "--llm-timeout")
    retries = env.max_retries if args.llm_max_retries is None else check_max_retries(args.llm_max_retries,
                                                                                      "--llm-max-retries")
    tokens = env.max_tokens if args.llm_max_tokens is None else check_max_tokens(args.llm_max_tokens,
                                                                                  "--llm-max-tokens")
    return LlmSettings(timeout, retries, tokens)


def reply_deadline(llm_timeout: float, hops: int) -> float:
    """Seconds a client ``hops`` bus hops away from an LLM call waits for a reply: the call's own
    deadline plus :data:`HOP_MARGIN` per hop, so the inner deadline always fires first.

    :param llm_timeout: the LLM timeout in seconds.
    :param hops: bus hops between the client and the call (``text-completion``'s clients: 1).
    """
    return llm_timeout + hops * HOP_MARGIN


def check_timeout(value: float, name: str) -> float:
    """``value`` if it is a number of seconds from 0.1 to :data:`MAX_TIMEOUT`, else LlmSettingsError naming ``name``."""
    if not isinstance(value, (int, float)) or math.isnan(value) or not 0.1 <= value <= MAX_TIMEOUT:
        raise LlmSettingsError(f"{name} must be a number of seconds from 0.1 to {MAX_TIMEOUT:g}, got {value!r}")
    return float(value)


def check_max_retries(value: int, name: str) -> int:
    """``value`` if it is a whole number from 0 to :data:`MAX_RETRIES`, else LlmSettingsError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RETRIES:
        raise LlmSettingsError(f"{name} must be a whole number from 0 to {MAX_RETRIES}, got {value!r}")
    return value


def check_max_tokens(value: int, name: str) -> int:
    """``value`` if it is a whole number from 1 to :data:`MAX_TOKENS`, else LlmSettingsError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise LlmSettingsError(f"{name} must be a whole number from 1 to {MAX_TOKENS}, got {value!r}")
    return value


def _parse(env: Mapping[str, str], name: str, kind: type, default, check):
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise LlmSettingsError(f"{name}={raw!r} is not a {'number' if kind is float else 'whole number'}") from None
    return check(value, name)
