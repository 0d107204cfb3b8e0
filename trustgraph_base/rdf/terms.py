"""Validation and the one canonical serialisation of terms (RDF 1.2 N-Triples syntax).

Every store keys terms by :func:`serialize_term`, so the same term always gives the same
string, whoever wrote it: IRIs as ``<iri>``, literals as ``"lex"``, ``"lex"@lang`` (tag
lower-cased) or ``"lex"^^<datatype>`` (``xsd:string`` dropped), blank nodes as ``_:id``
and triple terms as ``<<( s p o )>>``, nested as deep as :data:`MAX_TRIPLE_DEPTH`.  The
output is byte-identical to pyoxigraph's N-Triples form of the same term, and
:func:`parse_term` reads it back.
"""

from __future__ import annotations

import re

from pyoxigraph import Literal as _Literal
from pyoxigraph import NamedNode as _NamedNode

from ..schema.primitives import BLANK, IRI, LITERAL, TRIPLE, Term, Triple

__all__ = [
    "TermError", "MAX_TRIPLE_DEPTH", "MAX_LITERAL_LENGTH", "MAX_IRI_LENGTH",
    "validate_iri", "validate_term", "validate_triple",
    "serialize_term", "serialize_triple", "get_term_value", "parse_term", "parse_triple", "quoted", "spo",
]

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

#: How deeply triple terms may nest (``<<( a b <<( c d e )>> )>>`` has depth 2).
MAX_TRIPLE_DEPTH = 8
#: Longest literal accepted (characters); answers and chunk texts fit comfortably.
MAX_LITERAL_LENGTH = 4 * 1024 * 1024
#: Longest IRI accepted (characters).
MAX_IRI_LENGTH = 8 * 1024


class TermError(ValueError):
    """A term is not valid RDF (bad IRI, bad language tag, nesting too deep, ...)."""


# IRIREF of N-Triples/Turtle: no controls, space, or <>"{}|^`\ ; we also require a scheme.
_IRI_BAD = re.compile(r'[\x00-\x20<>"{}|^`\\]')
_IRI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_LANG = re.compile(r"[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*\Z")
_BLANK_ID = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.\-]*[A-Za-z0-9_\-])?\Z")
_SURROGATE = re.compile("[\ud800-\udfff]")


# IRIs seen valid recently: builders re-check the same predicates, classes and stage URIs
# hundreds of times per trace, so a small set makes validation nearly free (cleared when full).
_VALID_IRIS: set[str] = set()
_VALID_IRIS_MAX = 65536


def validate_iri(value: str) -> str:
    """Return ``value`` if it is an absolute IRI (RFC 3987) usable in N-Triples, else raise :class:`TermError`.

    pyoxigraph's parser decides (so whatever passes can be exported); our own checks only
    explain the common failures in plainer words.
    """
    if type(value) is str and value in _VALID_IRIS:
        return value
    if type(value) is not str or not value:
        raise TermError("IRI is empty")
    if len(value) > MAX_IRI_LENGTH:
        raise TermError(f"IRI longer than {MAX_IRI_LENGTH} characters")
    try:
        _NamedNode(value)
    except ValueError as e:  # includes UnicodeEncodeError for unpaired surrogates
        bad = _IRI_BAD.search(value)
        if bad:
            raise TermError(f"IRI {value[:80]!r} contains forbidden character {bad.group()!r}") from None
        if _SURROGATE.search(value):
            raise TermError(f"IRI {value[:80]!r} contains an unpaired surrogate") from None
        if not _IRI_SCHEME.match(value):
            raise TermError(f"IRI {value[:80]!r} has no scheme (expected e.g. 'urn:' or 'http:')") from None
        raise TermError(f"IRI {value[:80]!r} is not a valid IRI: {e}") from None
    if len(_VALID_IRIS) >= _VALID_IRIS_MAX:
        _VALID_IRIS.clear()
    _VALID_IRIS.add(value)
    return value


def _valid_language(tag: str) -> bool:
    """BCP 47 well-formedness, as pyoxigraph checks it (``en-a`` and ``a`` are not tags)."""
    if not _LANG.match(tag):
        return False
    try:
        _Literal("", language=tag)
    except ValueError:
        return False
    return True


def validate_term(term: Term | None, depth: int = 0) -> Term:
    """Check one term (recursively for triple terms); raise :class:`TermError` if invalid."""
    if term is None:
        raise TermError("term is missing")
    t = term.type
    if t == IRI:
        validate_iri(term.value)
    elif t == LITERAL:
        v = term.value
        if type(v) is not str:
            raise TermError("literal value is not text")
        if len(v) > MAX_LITERAL_LENGTH:
            raise TermError(f"literal longer than {MAX_LITERAL_LENGTH} characters")
        if _SURROGATE.search(v):
            raise TermError("literal contains an unpaired surrogate")
        if term.language:
            if not _valid_language(term.language):
                raise TermError(f"invalid language tag {term.language!r}")
            if term.datatype and term.datatype != RDF_LANG_STRING:
                raise TermError("a literal cannot have both a language tag and a datatype")
        elif term.datatype:
            validate_iri(term.datatype)
    elif t == BLANK:
        if not _BLANK_ID.match(term.value or ""):
            raise TermError(f"invalid blank node id {term.value!r}")
    elif t == TRIPLE:
        if depth >= MAX_TRIPLE_DEPTH:
            raise TermError(f"triple terms nested deeper than {MAX_TRIPLE_DEPTH}")
        if term.triple is None:
            raise TermError("triple term without a triple")
        validate_triple(term.triple, depth + 1)
    else:
        raise TermError(f"unknown term type {t!r}")
    return term


def validate_triple(triple: Triple | None, depth: int = 0) -> Triple:
    """Check a triple: predicate must be an IRI, graph an IRI or ``""``."""
    if triple is None:
        raise TermError("triple is missing")
    validate_term(triple.s, depth)
    if validate_term(triple.p, depth).type != IRI:
        raise TermError("predicate must be an IRI")
    validate_term(triple.o, depth)
    if triple.g:
        validate_iri(triple.g)
    return triple


def spo(triple: Triple) -> tuple[Term, Term, Term]:
    """Subject, predicate and object of a triple that has all three (stored and validated ones do)."""
    s, p, o = triple.s, triple.p, triple.o
    if s is None or p is None or o is None:
        raise TermError("triple without a subject, predicate or object")
    return s, p, o


def quoted(term: Term) -> Triple:
    """The triple of a triple term."""
    if term.triple is None:
        raise TermError("triple term without a triple")
    return term.triple


# ---------------------------------------------------------------- serialisation

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_NEEDS_ESCAPE = re.compile(r'[\\"\x00-\x1f\x7f]')


def _escape_char(m: re.Match[str]) -> str:
    c = m.group()
    return _ESCAPES.get(c) or f"\\u{ord(c):04X}"


def _literal(term: Term) -> str:
    v = term.value
    lex = _NEEDS_ESCAPE.sub(_escape_char, v) if _NEEDS_ESCAPE.search(v) else v
    if term.language:
        return f'"{lex}"@{term.language.lower()}'
    dt = term.datatype
    if dt and dt != XSD_STRING:
        return f'"{lex}"^^<{dt}>'
    return f'"{lex}"'


def serialize_term(term: Term) -> str:
    """The canonical N-Triples string of a term (does not validate; see :func:`validate_term`)."""
    t = term.type
    if t == IRI:
        return f"<{term.value}>"
    if t == LITERAL:
        return _literal(term)
    if t == TRIPLE:
        return serialize_triple(quoted(term))
    if t == BLANK:
        return f"_:{term.value}"
    raise TermError(f"unknown term type {t!r}")


def serialize_triple(triple: Triple) -> str:
    """The canonical string of a triple term: ``<<( s p o )>>``."""
    s, p, o = spo(triple)
    return f"<<( {serialize_term(s)} {serialize_term(p)} {serialize_term(o)} )>>"


def get_term_value(term: Term) -> str:
    """The plain value of a term: the IRI, lexical form or blank id; the canonical string for triple terms."""
    if term.type == TRIPLE:
        return serialize_triple(quoted(term))
    return term.value


# ---------------------------------------------------------------- parsing

_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", "'": "'"}
_ESCAPE_SEQ = re.compile(r"\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", re.S)


def _unescape(m: re.Match[str]) -> str:
    e = m.group(1)
    if e[0] in "uU":
        return chr(int(e[1:], 16))
    r = _UNESCAPES.get(e)
    if r is None:
        raise TermError(f"invalid escape \\{e}")
    return r


def parse_term(text: str) -> Term:
    """Parse a canonical term string (as produced by :func:`serialize_term`)."""
    term, end = _parse(text, 0, 0)
    if end != len(text):
        raise TermError(f"trailing text after term: {text[end:end + 40]!r}")
    return term


def parse_triple(text: str) -> Triple:
    """Parse ``<<( s p o )>>`` into a :class:`Triple`."""
    term = parse_term(text)
    if term.type != TRIPLE:
        raise TermError(f"not a triple term: {text[:80]!r}")
    return quoted(term)


def _skip_ws(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in " \t":
        i += 1
    return i


def _parse(text: str, i: int, depth: int) -> tuple[Term, int]:
    if i >= len(text):
        raise TermError("unexpected end of term")
    c = text[i]
    if c == "<":
        if text.startswith("<<(", i):
            if depth >= MAX_TRIPLE_DEPTH:
                raise TermError(f"triple terms nested deeper than {MAX_TRIPLE_DEPTH}")
            i = _skip_ws(text, i + 3)
            s, i = _parse(text, i, depth + 1)
            i = _skip_ws(text, i)
            p, i = _parse(text, i, depth + 1)
            i = _skip_ws(text, i)
            o, i = _parse(text, i, depth + 1)
            i = _skip_ws(text, i)
            if not text.startswith(")>>", i):
                raise TermError(f"unterminated triple term in {text[:80]!r}")
            return Term(type=TRIPLE, triple=Triple(s=s, p=p, o=o)), i + 3
        end = text.find(">", i + 1)
        if end < 0:
            raise TermError(f"unterminated IRI in {text[:80]!r}")
        return Term(type=IRI, value=text[i + 1:end]), end + 1
    if c == '"':
        j = i + 1
        n = len(text)
        while True:
            j = text.find('"', j)
            if j < 0:
                raise TermError(f"unterminated literal in {text[:80]!r}")
            # count preceding backslashes: an even number means the quote is not escaped
            k = j - 1
            while k > i and text[k] == "\\":
                k -= 1
            if (j - k - 1) % 2 == 0:
                break
            j += 1
        raw = text[i + 1:j]
        value = _ESCAPE_SEQ.sub(_unescape, raw) if "\\" in raw else raw
        j += 1
        if j < n and text[j] == "@":
            m = re.compile(r"[A-Za-z0-9\-]+").match(text, j + 1)
            if not m:
                raise TermError("empty language tag")
            return Term(type=LITERAL, value=value, language=m.group()), m.end()
        if text.startswith("^^<", j):
            end = text.find(">", j + 3)
            if end < 0:
                raise TermError("unterminated datatype IRI")
            return Term(type=LITERAL, value=value, datatype=text[j + 3:end]), end + 1
        return Term(type=LITERAL, value=value), j
    if text.startswith("_:", i):
        m = re.compile(r"[A-Za-z0-9_.\-]+").match(text, i + 2)
        if not m:
            raise TermError("empty blank node id")
        return Term(type=BLANK, value=m.group()), m.end()
    raise TermError(f"cannot parse term at {text[i:i + 40]!r}")
