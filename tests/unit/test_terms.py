"""Canonical term strings: identical to pyoxigraph's N-Triples form, parse back, reject bad input."""

from __future__ import annotations

import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustgraph_base.rdf.oxigraph import to_oxigraph_term
from trustgraph_base.rdf.terms import (
    MAX_IRI_LENGTH,
    MAX_LITERAL_LENGTH,
    MAX_TRIPLE_DEPTH,
    TermError,
    get_term_value,
    parse_term,
    parse_triple,
    serialize_term,
    serialize_triple,
    validate_iri,
    validate_term,
    validate_triple,
)
from trustgraph_base.schema import BLANK, IRI, LITERAL, TRIPLE, Term, Triple, blank, iri, literal, triple_term

pytestmark = pytest.mark.unit

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

# ---------------------------------------------------------------- strategies

_IRI_CHAR = st.characters(categories=["L", "Nd"]) | st.sampled_from(list("-._~!$&'()*+,;=:@/"))
_IRI_TEXT = st.text(_IRI_CHAR, max_size=12)


@st.composite
def iri_values(draw) -> str:
    """Absolute IRIs valid for both our validator and pyoxigraph (RFC 3987), with non-ASCII text."""
    if draw(st.booleans()):
        host = draw(st.from_regex(r"[a-z][a-z0-9\-]{0,8}(\.[a-z]{2,4})?", fullmatch=True))
        value = draw(st.sampled_from(["http://", "https://"])) + host + "/" + draw(_IRI_TEXT)
        if draw(st.booleans()):
            value += draw(st.sampled_from(["%20", "%C3%A9", "?q=1&r=2"]))
    else:
        nid = draw(st.from_regex(r"[a-z][a-z0-9]{1,8}", fullmatch=True))
        value = f"urn:{nid}:" + draw(st.text(_IRI_CHAR, min_size=1, max_size=12))
    if draw(st.booleans()):
        value += "#" + draw(st.text(st.characters(categories=["L", "Nd"]), max_size=6))
    return value


LANG_TAGS = st.from_regex(r"[a-zA-Z]{2,3}(-[a-zA-Z]{2}|-[0-9]{3})?", fullmatch=True)
DATATYPES = st.sampled_from([XSD + "integer", XSD + "dateTime", XSD + "double", XSD + "boolean", XSD + "string",
                             XSD + "decimal"]) | iri_values()
# Any text, including control characters, quotes, backslashes, newlines and non-ASCII.
TEXT = st.text(max_size=40)

iri_terms = iri_values().map(iri)
blank_terms = st.from_regex(r"[A-Za-z0-9_]([A-Za-z0-9_.\-]{0,10}[A-Za-z0-9_\-])?", fullmatch=True).map(blank)
literal_terms = st.one_of(
    TEXT.map(literal),
    st.builds(lambda v, lang: literal(v, language=lang), TEXT, LANG_TAGS),
    st.builds(lambda v, dt: literal(v, datatype=dt), TEXT, DATATYPES),
)
subject_terms = iri_terms | blank_terms
leaf_terms = iri_terms | blank_terms | literal_terms
# Triple terms nest (at most max_leaves deep, below MAX_TRIPLE_DEPTH); subjects are IRIs or blanks (RDF 1.2).
terms = st.recursive(leaf_terms, lambda inner: st.builds(triple_term, subject_terms, iri_terms, inner),
                     max_leaves=6)


def canonical(term: Term) -> Term:
    """The term as parse_term gives it back: language lower-cased, xsd:string and rdf:langString dropped."""
    if term.type == LITERAL:
        if term.language:
            return Term(LITERAL, term.value, "", term.language.lower())
        return Term(LITERAL, term.value, "" if term.datatype == XSD + "string" else term.datatype)
    if term.type == TRIPLE:
        t = term.triple
        return Term(TRIPLE, triple=Triple(canonical(t.s), canonical(t.p), canonical(t.o)))
    return Term(term.type, term.value)


def ox_string(term) -> str:
    """pyoxigraph's N-Triples form of a term (``str(Triple)`` omits the ``<<( )>>`` of a top-level triple term)."""
    return f"<<( {term} )>>" if isinstance(term, ox.Triple) else str(term)


def nested(depth: int) -> Term:
    """A triple term nested ``depth`` levels deep (depth 1 = ``<<( s p o )>>``)."""
    t = iri("http://x/leaf")
    for _ in range(depth):
        t = triple_term(iri("http://x/s"), iri("http://x/p"), t)
    return t


# ---------------------------------------------------------------- canonical form == pyoxigraph

@settings(max_examples=150, deadline=None)
@given(terms)
def test_canonical_string_equals_pyoxigraph_str(term):
    validate_term(term)
    assert serialize_term(term) == ox_string(to_oxigraph_term(term))


@settings(max_examples=150, deadline=None)
@given(terms)
def test_parse_term_round_trip(term):
    text = serialize_term(term)
    back = parse_term(text)
    assert back == canonical(term)
    assert serialize_term(back) == text


@settings(max_examples=100, deadline=None)
@given(subject_terms, iri_terms, terms)
def test_canonical_strings_form_valid_ntriples(s, p, o):
    """A line built from canonical strings is valid N-Triples that pyoxigraph reads back to the same terms."""
    line = f"{serialize_term(s)} {serialize_term(p)} {serialize_term(o)} .\n"
    (quad,) = list(ox.parse(line, format=ox.RdfFormat.N_TRIPLES))
    assert ox_string(quad.subject) == serialize_term(s)
    assert ox_string(quad.object) == serialize_term(o)


def test_serialize_examples():
    assert serialize_term(iri("http://x/a")) == "<http://x/a>"
    assert serialize_term(literal("chat", language="FR-be")) == '"chat"@fr-be'
    assert serialize_term(literal("5", datatype=XSD + "integer")) == f'"5"^^<{XSD}integer>'
    assert serialize_term(literal("s", datatype=XSD + "string")) == '"s"'
    assert serialize_term(blank("b0")) == "_:b0"
    edge = triple_term(iri("http://x/a"), iri("http://x/p"), literal("1", datatype=XSD + "integer"))
    assert serialize_term(edge) == f'<<( <http://x/a> <http://x/p> "1"^^<{XSD}integer> )>>'
    assert serialize_triple(edge.triple) == serialize_term(edge)
    assert get_term_value(edge) == serialize_term(edge)
    assert get_term_value(literal("plain")) == "plain"
    assert parse_triple(serialize_term(edge)) == edge.triple


def test_nested_triple_terms_round_trip():
    term = nested(MAX_TRIPLE_DEPTH)
    validate_term(term)
    text = serialize_term(term)
    assert text.count("<<(") == MAX_TRIPLE_DEPTH
    assert parse_term(text) == term
    assert ox_string(to_oxigraph_term(term)) == text


# ---------------------------------------------------------------- control characters and escaping

def test_control_characters_are_escaped_and_parse_back():
    value = "".join(chr(c) for c in range(32)) + '\x7f "quoted" back\\slash \u2028 é 😀'
    text = serialize_term(literal(value))
    assert not any(ord(c) < 32 or ord(c) == 0x7F for c in text), "raw control character in canonical form"
    assert '\\n' in text and '\\u0000' in text and '\\u007F' in text
    assert parse_term(text).value == value
    assert ox.Literal(value).value == value and str(ox.Literal(value)) == text


def test_turtle_injection_in_literal_stays_a_literal():
    value = '"> ; <http://x/y> <http://x/z> .\n_:b <http://x/p> "'
    text = serialize_term(literal(value))
    assert parse_term(text) == literal(value)
    line = f"<http://x/s> <http://x/p> {text} .\n"
    quads = list(ox.parse(line, format=ox.RdfFormat.N_TRIPLES))
    assert len(quads) == 1 and quads[0].object.value == value


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("value, message", [
    ("", "IRI is empty"),
    ("http://x/a b", "forbidden character ' '"),
    ("http://x/<a>", "forbidden character '<'"),
    ("http://x/a>", "forbidden character '>'"),
    ('http://x/"q"', "forbidden character '\"'"),
    ("http://x/a\nb", "forbidden character '\\n'"),
    ("http://x/a\x00", "forbidden character '\\x00'"),
    ("no-scheme-here", "has no scheme"),
    ("http://x/\ud800", "unpaired surrogate"),
    ("http://x/" + "a" * MAX_IRI_LENGTH, f"longer than {MAX_IRI_LENGTH}"),
])
def test_invalid_iris_rejected(value, message):
    with pytest.raises(TermError, match=message.replace("\\", "\\\\").replace("(", r"\(")):
        validate_iri(value)
    with pytest.raises(TermError):
        validate_term(iri(value))


@pytest.mark.parametrize("value", ["http://x/a%zz", "http://x/%", "http://[x/", "http://h:port/", "urn:a#b#c",
                                   "http://x/\ufffe"])
def test_iris_that_rfc3987_rejects_are_rejected(value):
    """Everything validate_iri accepts must be writable by pyoxigraph, or exports would fail later."""
    with pytest.raises(ValueError):
        ox.NamedNode(value)
    with pytest.raises(TermError):
        validate_iri(value)


@pytest.mark.parametrize("tag", ["en_US", "e n", "", "123", "toolongtag-x", "en-", "-en", "en-a", "a", "zz-ZZ-zz"])
def test_invalid_language_tags_rejected(tag):
    if tag == "":
        validate_term(literal("x", language=tag))  # empty means "no language tag"
        return
    with pytest.raises(TermError, match="invalid language tag"):
        validate_term(literal("x", language=tag))


def test_language_and_datatype_together_rejected():
    with pytest.raises(TermError, match="both a language tag and a datatype"):
        validate_term(literal("x", language="en", datatype=XSD + "string"))
    validate_term(literal("x", language="en", datatype=RDF_LANG_STRING))


def test_invalid_datatype_iri_rejected():
    with pytest.raises(TermError, match="forbidden character"):
        validate_term(literal("1", datatype="http://x/int eger"))


@pytest.mark.parametrize("value", ["", "a b", "-x", "x.", "é", "a:b", "_:x"])
def test_invalid_blank_ids_rejected(value):
    with pytest.raises(TermError, match="invalid blank node id"):
        validate_term(blank(value))


def test_too_deep_nesting_rejected():
    validate_term(nested(MAX_TRIPLE_DEPTH))
    with pytest.raises(TermError, match=f"nested deeper than {MAX_TRIPLE_DEPTH}"):
        validate_term(nested(MAX_TRIPLE_DEPTH + 1))
    with pytest.raises(TermError, match=f"nested deeper than {MAX_TRIPLE_DEPTH}"):
        parse_term(serialize_term(nested(MAX_TRIPLE_DEPTH + 1)))


def test_absurdly_long_literal_rejected():
    validate_term(literal("x" * 1000))
    with pytest.raises(TermError, match=f"literal longer than {MAX_LITERAL_LENGTH}"):
        validate_term(literal("x" * (MAX_LITERAL_LENGTH + 1)))


def test_unpaired_surrogate_in_literal_rejected():
    with pytest.raises(TermError, match="unpaired surrogate"):
        validate_term(literal("a\udc80b"))


@pytest.mark.parametrize("term, message", [
    (None, "term is missing"),
    (Term(type="z", value="x"), "unknown term type"),
    (Term(type=TRIPLE), "triple term without a triple"),
    (Term(type=LITERAL, value=5), "literal value is not text"),
])
def test_malformed_terms_rejected(term, message):
    with pytest.raises(TermError, match=message):
        validate_term(term)


def test_triple_rules():
    validate_triple(Triple(iri("http://x/s"), iri("http://x/p"), literal("o"), "urn:graph:g"))
    with pytest.raises(TermError, match="predicate must be an IRI"):
        validate_triple(Triple(iri("http://x/s"), literal("p"), literal("o")))
    with pytest.raises(TermError, match="forbidden character"):
        validate_triple(Triple(iri("http://x/s"), iri("http://x/p"), literal("o"), "urn:graph g"))
    with pytest.raises(TermError, match="term is missing"):
        validate_triple(Triple(iri("http://x/s"), iri("http://x/p"), None))


@pytest.mark.parametrize("text, message", [
    ("<http://x/a", "unterminated IRI"),
    ('"abc', "unterminated literal"),
    ('"abc\\"', "unterminated literal"),
    ("<<( <http://x/a> <http://x/b> <http://x/c>", "unterminated triple term"),
    ("<http://x/a> extra", "trailing text"),
    ('"a\\qb"', "invalid escape"),
    ("", "unexpected end of term"),
    ("?x", "cannot parse term"),
    ('"x"@', "empty language tag"),
    ('"x"^^<http://x/dt', "unterminated datatype IRI"),
    ("_:", "empty blank node id"),
])
def test_parse_term_errors_are_clear(text, message):
    with pytest.raises(TermError, match=message):
        parse_term(text)


def test_parse_triple_requires_a_triple_term():
    with pytest.raises(TermError, match="not a triple term"):
        parse_triple("<http://x/a>")


def test_term_type_constants():
    assert (IRI, LITERAL, BLANK, TRIPLE) == ("i", "l", "b", "t")
