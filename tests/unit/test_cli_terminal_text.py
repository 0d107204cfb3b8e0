"""The one escaping function of the tg-* commands: data reaches the terminal as text, never as an instruction."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from trustgraph_base.rdf.export import parse, serialize
from trustgraph_base.schema import Triple, iri, literal
from trustgraph_cli.terminal_text import ECHO_LIMIT, clip, printable, quoted

pytestmark = pytest.mark.unit

#: Every code point, unpaired surrogates included (a file name that is not UTF-8 holds them).
ANY_TEXT = st.text(st.characters(codec=None, categories=None), max_size=200)
#: Text made mostly of the characters that matter here.
HOSTILE_TEXT = st.text(st.sampled_from(
    list("\x00\x07\x08\t\n\x0b\x0c\r\x1b\x7f\x85\x9b\u061c\u200e\u200f\u2028\u2029\u202a\u202e\u2066\u2069\ud800\udcff")
    + list("[]2J;0m aé€𝄞\\")), max_size=60)

#: Format characters that reorder what a line shows (bidirectional controls), and line separators.
BIDI_AND_SEPARATORS = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")


def unsafe(ch: str, allowed: str) -> bool:
    """A character a terminal may obey, or that reorders or breaks a line, or cannot be written as UTF-8."""
    if ch in allowed:
        return False
    return unicodedata.category(ch) in ("Cc", "Cs") or ch in BIDI_AND_SEPARATORS


@given(ANY_TEXT | HOSTILE_TEXT)
@example("title\x1b[2J\r\n[synthesis] urn:fake")
@example("\u202eevil")
def test_a_one_line_field_holds_no_control_character_but_tab(text):
    shown = printable(text)
    assert not [ch for ch in shown if unsafe(ch, "\t")], repr(shown)
    assert "\n" not in shown  # data never starts a line of its own
    shown.encode("utf-8")  # always writable


@given(ANY_TEXT | HOSTILE_TEXT)
def test_text_with_a_layout_keeps_newlines_and_tabs_only(text):
    shown = printable(text, newlines=True)
    assert not [ch for ch in shown if unsafe(ch, "\t\n")], repr(shown)
    assert shown.count("\n") == text.count("\n")
    shown.encode("utf-8")


@given(st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"]).filter(
    lambda ch: ch not in BIDI_AND_SEPARATORS), max_size=100))
def test_ordinary_text_is_unchanged(text):
    assert printable(text) == text
    assert printable(text, newlines=True) == text


@given(st.recursive(st.none() | st.booleans() | st.integers() | ANY_TEXT,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
                    max_leaves=12))
def test_an_escaped_json_document_parses_to_the_same_data(data):
    shown = printable(json.dumps(data, ensure_ascii=False, indent=2), newlines=True, unicode_escapes=True)
    assert not [ch for ch in shown if unsafe(ch, "\t\n")]
    assert json.loads(shown) == data


def test_an_escaped_turtle_document_parses_to_the_same_triples():
    value = "a\x1b[2J\r\n\u202e\x85\x9b\t\u2028 é"
    triples = [Triple(iri("http://example.org/a\u202e"), iri("http://example.org/p"), literal(value))]
    shown = printable(serialize(triples, "turtle"), newlines=True, unicode_escapes=True)
    assert not [ch for ch in shown if unsafe(ch, "\t\n")]
    assert parse(shown, "turtle") == triples


@pytest.mark.parametrize("text, shown", [
    ("a\x1bb", "a\\x1bb"),
    ("cr\rlf\n", "cr\\rlf\\n"),
    ("\x9b31m", "\\x9b31m"),
    ("\u202egnp.exe", "\\u202egnp.exe"),
    ("caf\udce9.txt", "caf\\udce9.txt"),
    ("tab\there", "tab\there"),
])
def test_escapes_are_visible(text, shown):
    assert printable(text) == shown


def test_crlf_in_text_with_a_layout_is_a_newline():
    assert printable("one\r\ntwo\rthree", newlines=True) == "one\ntwo\\rthree"


def test_clip_keeps_the_start_or_the_end():
    assert clip("x" * ECHO_LIMIT) == "x" * ECHO_LIMIT
    assert clip("abcdefghij", 5) == "abcd…"
    assert clip("/a/long/path/name.txt", 9, tail=True) == "…name.txt"


@given(ANY_TEXT)
def test_quoted_echo_is_short_and_safe(value):
    shown = quoted(value)
    assert len(clip(value)) <= ECHO_LIMIT
    assert shown == f"'{printable(clip(value))}'"
    assert not [ch for ch in shown if unsafe(ch, "\t")]
