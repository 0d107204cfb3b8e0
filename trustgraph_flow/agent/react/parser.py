"""Parser of the ReAct grammar the agent-react prompt asks for.

A reply is either a step::

    Thought: I need the discoverer of polonium.
    Action: knowledge-query
    Args: {"question": "Who discovered polonium?"}

or a conclusion::

    Thought: The graph answered.
    Final Answer: Marie and Pierre Curie.

Keywords are case-insensitive at the start of a line (optionally wrapped in ``**``);
``Action Input:`` is accepted for ``Args:``; the arguments may span several lines or sit
in a code fence; the final answer may span several lines. A model that writes its own
``Observation:`` has everything from that line on ignored. Whichever of ``Action:`` and
``Final Answer:`` comes first decides the kind of reply. Anything else raises
:class:`ReactParseError`, whose message tells the model how to reply and can be fed back
to it as the observation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_KEYWORD = re.compile(
    r"^[ \t>*_#]*(thought|action input|action|args|arguments|final answer|observation)[ \t*_]*:[ \t*_]*",
    re.IGNORECASE | re.MULTILINE,
)
_TOOL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]*\Z")
_FENCE = re.compile(r"^\s*```[^\n]*$", re.MULTILINE)

FORMAT_HELP = (
    "Reply either with\n"
    "Thought: <your reasoning>\nAction: <tool name>\nArgs: <JSON object of arguments>\n"
    "or with\n"
    "Thought: <your reasoning>\nFinal Answer: <the answer>"
)


class ReactParseError(ValueError):
    """The reply does not follow the grammar; the message explains what to fix."""


@dataclass(frozen=True)
class ReactStep:
    """The agent wants to call ``action`` with ``arguments``."""

    thought: str
    action: str
    arguments: dict = field(default_factory=dict)


@dataclass(frozen=True)
class FinalAnswer:
    """The agent has concluded."""

    thought: str
    answer: str


def _sections(text: str) -> list[tuple[str, str]]:
    """``(keyword, body)`` pairs in order; bodies run to the next keyword line."""
    matches = list(_KEYWORD.finditer(text))
    sections = []
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        keyword = " ".join(match.group(1).lower().split())
        sections.append((keyword, text[match.end():end]))
    return sections


def _clean(text: str) -> str:
    return _FENCE.sub("", text).strip()


def _parse_arguments(body: str, keyword: str) -> dict:
    text = _clean(body)
    if not text:
        return {}
    start = text.find("{")
    if start < 0:
        raise ReactParseError(
            f"The '{keyword.title()}:' line must hold a JSON object such as "
            f'{{"question": "..."}}, but it holds {text[:80]!r}.\n{FORMAT_HELP}'
        )
    try:
        value, _ = json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        raise ReactParseError(
            f"The arguments after '{keyword.title()}:' are not valid JSON ({reason}): {text[start:start + 80]!r}. "
            f"Write them as one JSON object with double-quoted keys and strings.\n{FORMAT_HELP}"
        ) from None
    if not isinstance(value, dict):  # pragma: no cover - raw_decode from "{" always yields a dict
        raise ReactParseError(f"The arguments must be a JSON object.\n{FORMAT_HELP}")
    return value


def parse_react(text: str) -> ReactStep | FinalAnswer:
    """Parse one agent reply.

    :param text: the model's reply.
    :returns: a ReactStep (tool call) or a FinalAnswer.
    :raises ReactParseError: the reply does not follow the grammar (message suitable as feedback).
    """
    if not isinstance(text, str) or not text.strip():
        raise ReactParseError(f"The reply was empty.\n{FORMAT_HELP}")
    sections = []
    for keyword, body in _sections(text):
        if keyword == "observation":
            break
        sections.append((keyword, body))
    thought = next((_clean(body) for keyword, body in sections if keyword == "thought"), "")

    decisive = next(((i, k) for i, (k, _) in enumerate(sections) if k in ("action", "final answer")), None)
    if decisive is None:
        if any(k in ("args", "arguments", "action input") for k, _ in sections):
            raise ReactParseError(f"The reply gives arguments but no 'Action:' line naming the tool.\n{FORMAT_HELP}")
        raise ReactParseError(f"The reply has neither an 'Action:' line nor a 'Final Answer:' line.\n{FORMAT_HELP}")
    index, keyword = decisive
    body = sections[index][1]

    if keyword == "final answer":
        answer = _clean(body)
        if not answer:
            raise ReactParseError(f"The 'Final Answer:' is empty.\n{FORMAT_HELP}")
        return FinalAnswer(thought=thought, answer=answer)

    lines = _clean(body).split("\n", 1)
    action = lines[0].strip().strip("`'\"").strip()
    rest = lines[1] if len(lines) > 1 else ""
    if not action:
        raise ReactParseError(f"The 'Action:' line does not name a tool.\n{FORMAT_HELP}")
    if not _TOOL_NAME.match(action):
        raise ReactParseError(
            f"'Action:' must be just a tool name, got {action[:80]!r}; put the arguments on an 'Args:' line "
            f"as a JSON object.\n{FORMAT_HELP}"
        )
    arguments: dict = {}
    for keyword_after, body_after in sections[index + 1:]:
        if keyword_after in ("args", "arguments", "action input"):
            arguments = _parse_arguments(body_after, keyword_after)
            break
        if keyword_after in ("action", "final answer"):
            break
    else:
        if rest.strip():
            raise ReactParseError(
                f"Unexpected text after the tool name: {rest.strip()[:80]!r}; arguments go on an 'Args:' line.\n"
                f"{FORMAT_HELP}"
            )
    return ReactStep(thought=thought, action=action, arguments=arguments)
