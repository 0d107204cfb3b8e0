"""Text from data made safe to print: control characters escaped, echoed input clipped.

What a tg-* command prints that comes from data (titles, file names, questions, answers,
labels, reasons, URIs, error messages quoting input) must reach the terminal as text, never
as an instruction.  :func:`printable` replaces every character a terminal may obey or that
changes what a line seems to say with a visible escape:

- C0 controls (ESC starts colour, cursor and screen-clearing sequences; CR and backspace
  overwrite what was printed), DEL and the C1 controls (``\\x9b`` is a one-byte CSI);
- bidirectional-text controls (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C), which
  reorder what is shown, and the line and paragraph separators U+2028, U+2029;
- unpaired surrogates (a file name that is not UTF-8 arrives as them), which cannot be
  written as UTF-8 at all.

A tab is kept (it cannot move the cursor back or start a line).  A newline is kept only
where it is text layout (``newlines=True``: an answer's body, a JSON or RDF document); in a
one-line field it becomes ``\\n``, so data can never start a line of its own (a title
printing a fake ``[synthesis]`` line).  ``CR LF`` in such text is a newline.
"""

from __future__ import annotations

import re

__all__ = ["printable", "clip", "quoted", "is_utf8", "ECHO_LIMIT"]

#: Characters of echoed input an error message shows (the rest is cut, with an ellipsis).
ECHO_LIMIT = 80

_OTHER_UNSAFE = "\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
#: Unsafe in a one-line field: every C0 control but the tab, and the rest.
_UNSAFE_LINE = re.compile(f"[\x00-\x08\x0a-\x1f{_OTHER_UNSAFE}]")
#: Unsafe in text with a layout: the same, newlines allowed.
_UNSAFE_TEXT = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHER_UNSAFE}]")
_SHORT = {"\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match) -> str:
    ch = match.group()
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _unicode_escape(match: re.Match) -> str:
    return f"\\u{ord(match.group()):04x}"


def printable(text: str, *, newlines: bool = False, unicode_escapes: bool = False) -> str:
    """``text`` with every unsafe character (module docstring) replaced by a visible escape.

    :param newlines: keep newlines (text layout); otherwise they are escaped as ``\\n``.
    :param unicode_escapes: write every escape as ``\\uXXXX``, which JSON strings and Turtle,
        TriG and N-Quads strings and IRIs read back as the same character, so an escaped
        document still parses to the same data; otherwise ``\\x1b``, ``\\r``, ``\\u202e``.
    """
    text = str(text)
    if newlines:
        if not _UNSAFE_TEXT.search(text):
            return text
        text = text.replace("\r\n", "\n")
        return _UNSAFE_TEXT.sub(_unicode_escape if unicode_escapes else _escape, text)
    if not _UNSAFE_LINE.search(text):
        return text
    return _UNSAFE_LINE.sub(_unicode_escape if unicode_escapes else _escape, text)


def clip(text: str, limit: int = ECHO_LIMIT, *, tail: bool = False) -> str:
    """``text`` cut to ``limit`` characters, with ``…`` where something was cut: at the end, or at the
    start with ``tail`` (a path, whose file name matters most)."""
    text = str(text)
    if len(text) <= limit:
        return text
    keep = max(limit - 1, 0)
    return "…" + text[len(text) - keep:] if tail else text[:keep] + "…"


def quoted(value: str, limit: int = ECHO_LIMIT) -> str:
    """Input echoed in a message: clipped to ``limit`` characters, escaped, in single quotes."""
    return f"'{printable(clip(value, limit))}'"


def is_utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (an argument or file name the terminal could not decode
    arrives with unpaired surrogates instead of its bytes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
