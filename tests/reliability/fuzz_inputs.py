"""Hostile inputs for the fuzz tests: strategies, known attack strings, and a count of the cases run.

The strategies build values of the schema's own types (so they pass the codec and reach the
service logic) but fill them with what an attacker or a broken client would send: CQL and
path fragments in names, Turtle/N-Triples syntax in literals, control characters, huge
numbers, long strings.  :data:`CASES` counts every example a fuzz test ran; the tier's
``conftest.py`` prints the totals at the end of the session.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections import Counter
from typing import Any

from hypothesis import strategies as st

from trustgraph_base.schema import TERM_TYPES, Term, Triple

#: Examples run per fuzz test (name -> count), printed by conftest.py at the end of the session.
CASES: Counter = Counter()


def count(name: str) -> None:
    CASES[name] += 1


#: Strings that try to escape their context: CQL, SQL, paths, Turtle/N-Triples, console markup, JSON.
ATTACKS = [
    "x'; DROP KEYSPACE tg; --", "a\"; DROP TABLE quads; --", "'; SELECT * FROM system_auth.roles; --",
    "1 OR 1=1", "tg_alice_5d41402abc", "system", "system_schema",
    "../../etc/passwd", "..", ".", "/", "a/../../b", "..\\..\\windows", "~root", "/tmp/x", "a\x00b", "NUL", "con",
    '" . <urn:x:evil> <urn:x:p> <urn:x:o> .\n<urn:x:a> <urn:x:b> "', '"""', "'''", "> .", "<<( <a> <b> <c> )>>",
    "\\u0022", "@prefix x: <urn:x:> .", "_:b0", "\n\r\t", "[/]", "[bold red]x[/]", "{\"id\": \"x\"}",
    "é漢字😀", "\u202e\u0301", "\x7f\x1b[31m", " ", "",
]
NAME_ATTACKS = st.sampled_from(ATTACKS) | st.text(max_size=80)
TEXT = st.one_of(st.text(max_size=40), st.sampled_from(ATTACKS), st.text(min_size=300, max_size=2000))
INTS = st.one_of(st.integers(-3, 50), st.sampled_from([-2**31, 2**31 - 1, 2**53, -(2**63), 2**63 - 1]))
FLOATS = st.one_of(st.floats(-10, 10, allow_nan=False), st.sampled_from([0.0, -1.0, 1e308, -1e308]))
IRIS = st.one_of(st.sampled_from(["urn:x:a", "http://example.org/e", "https://trustgraph.ai/ns/p"]),
                 st.sampled_from(ATTACKS), st.text(max_size=30))
TERMS = st.recursive(
    st.builds(Term, type=st.sampled_from(TERM_TYPES), value=IRIS | TEXT,
              datatype=st.sampled_from(["", "http://www.w3.org/2001/XMLSchema#integer", "bad datatype"]),
              language=st.sampled_from(["", "en", "not a tag!"])),
    lambda inner: st.builds(lambda s, p, o: Term(type="t", triple=Triple(s, p, o)), inner, inner, inner),
    max_leaves=4)


def hostile(tp: Any, depth: int = 0) -> st.SearchStrategy:
    """Values of schema type ``tp`` filled with hostile contents (bounded in size and depth)."""
    if tp is str:
        return TEXT
    if tp is bool:
        return st.booleans()
    if tp is int:
        return INTS
    if tp is float:
        return FLOATS
    if tp is bytes:
        return st.binary(max_size=200)
    if tp is Any:
        return st.none() | TEXT | INTS
    if tp is Term:
        return TERMS
    if tp is Triple:
        return st.builds(Triple, TERMS, TERMS, TERMS, st.sampled_from(["", "urn:graph:retrieval", "not an iri"]))
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return st.none() | hostile(inner[0], depth)
    if origin is list:
        return st.lists(hostile(args[0], depth + 1), max_size=3 if depth < 2 else 0)
    if origin is dict:
        return st.dictionaries(TEXT, hostile(args[1], depth + 1), max_size=3 if depth < 2 else 0)
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return st.builds(tp, **{f.name: hostile(hints[f.name], depth + 1) for f in dataclasses.fields(tp) if f.init})
    raise AssertionError(f"no hostile strategy for {tp!r}")


def request_of(cls: type, **fixed: st.SearchStrategy) -> st.SearchStrategy:
    """Hostile instances of request class ``cls``; ``fixed`` overrides the strategy of some fields."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: fixed.get(f.name, hostile(hints[f.name], 1)) for f in dataclasses.fields(cls) if f.init}
    return st.builds(cls, **fields)


JSON = st.recursive(st.none() | st.booleans() | INTS | FLOATS | TEXT,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=12)
