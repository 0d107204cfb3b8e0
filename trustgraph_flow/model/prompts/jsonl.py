"""Tolerant JSONL parsing of LLM output: keep every valid object, count and explain the rest.

LLMs wrap JSONL in code fences, add chatter lines, break lines, emit arrays instead of
JSONL or objects missing fields. None of that is fatal: each bad line is dropped with a
reason, so callers can record how much of the answer was unusable. ``parse_jsonl`` never
raises.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: ``validate(obj)`` returns an error message, or None when the object is acceptable.
Validator = Callable[[dict], "str | None"]

MAX_REASONS = 50
MAX_SNIPPET = 60


@dataclass
class JsonlResult:
    """Parsed objects, how many candidate lines were dropped, and why (at most ``MAX_REASONS`` reasons)."""

    objects: list[dict] = field(default_factory=list)
    dropped: int = 0
    reasons: list[str] = field(default_factory=list)

    def _drop(self, reason: str) -> None:
        self.dropped += 1
        if len(self.reasons) < MAX_REASONS:
            self.reasons.append(reason)
        elif len(self.reasons) == MAX_REASONS:
            self.reasons.append("further reasons omitted")


def _snippet(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_SNIPPET else text[: MAX_SNIPPET - 1] + "…"


def _is_fence(line: str) -> bool:
    return line.lstrip().startswith("```")


def _loads(text: str) -> tuple[Any, str | None]:
    """json.loads that reports failures (including absurd nesting) instead of raising."""
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        return None, message


def _accept(result: JsonlResult, obj: Any, where: str, validate: Validator | None) -> None:
    if not isinstance(obj, dict):
        result._drop(f"{where}: expected a JSON object, got {type(obj).__name__}")
        return
    if validate is not None:
        try:
            error = validate(obj)
        except Exception as exc:  # noqa: BLE001 - a validator bug must not lose the whole answer
            error = f"validator raised {type(exc).__name__}: {exc}"
        if error:
            result._drop(f"{where}: {error}")
            return
    result.objects.append(obj)


def parse_jsonl(text: Any, validate: Validator | None = None) -> JsonlResult:
    """Parse JSONL (one object per line) from LLM output.

    Code-fence lines (any language tag) and blank lines are skipped silently; a trailing
    comma after an object is tolerated; malformed JSON, non-objects and objects that fail
    ``validate`` are dropped and counted. As a fallback, a whole text that is one JSON
    array (the common LLM habit) contributes each of its elements.

    :param text: the raw completion text (anything that is not a str gives one drop).
    :param validate: optional check returning an error string or None for each object.
    :returns: the kept objects, the number of dropped lines/elements and the reasons.
    """
    result = JsonlResult()
    if not isinstance(text, str):
        result._drop(f"input is {type(text).__name__}, not text")
        return result

    lines = [line.rstrip("\r") for line in text.split("\n")]
    content = [(n, line) for n, line in enumerate(lines, start=1) if line.strip() and not _is_fence(line)]
    if not content:
        return result

    whole = "\n".join(line for _, line in content).strip()
    if whole.startswith("["):
        value, error = _loads(whole)
        if error is None and isinstance(value, list):
            for index, element in enumerate(value):
                _accept(result, element, f"array element {index}", validate)
            return result

    for number, line in content:
        candidate = line.strip()
        value, error = _loads(candidate)
        if error is not None and candidate.endswith(","):
            value, error = _loads(candidate[:-1])
        if error is not None:
            result._drop(f"line {number}: malformed JSON ({error}): {_snippet(candidate)!r}")
            continue
        _accept(result, value, f"line {number}", validate)
    return result


def require_strings(*names: str) -> Validator:
    """A validator requiring each of ``names`` to be a non-empty string.

    :param names: required field names.
    """

    def validate(obj: dict) -> str | None:
        for name in names:
            value = obj.get(name)
            if not isinstance(value, str):
                return f"field {name!r} missing or not a string"
            if not value.strip():
                return f"field {name!r} is empty"
        return None

    return validate
