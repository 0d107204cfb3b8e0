"""Conversion between our :class:`Term`/:class:`Triple` messages and pyoxigraph terms and quads.

pyoxigraph (>= 0.5) implements RDF 1.2, so triple terms ``<<( s p o )>>`` map to
:class:`pyoxigraph.Triple`.  RDF 1.2 allows a triple term only in **object** position (also
inside another triple term); a triple term or literal as subject is refused here with a
:class:`TermError` that says so, instead of pyoxigraph's generic ``TypeError``.

Terms come back canonical: language tags lower-cased, ``xsd:string`` datatype dropped, so
``from_oxigraph_term(to_oxigraph_term(t))`` has the same :func:`serialize_term` as ``t``
(and is equal to ``t`` when ``t`` was canonical already).

### Usage example

>>> from trustgraph_base.schema import iri, literal, Triple
>>> q = to_quad(Triple(iri("http://x/s"), iri("http://x/p"), literal("hi", language="en"), "urn:g"))
>>> from_quad(q) == Triple(iri("http://x/s"), iri("http://x/p"), literal("hi", language="en"), "urn:g")
True
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pyoxigraph as ox

from ..schema.primitives import BLANK, IRI, LITERAL, TRIPLE, Term, Triple
from .terms import (
    MAX_TRIPLE_DEPTH,
    RDF_LANG_STRING,
    XSD_STRING,
    TermError,
    quoted,
    spo,
    validate_iri,
    validate_term,
)

__all__ = ["OxTerm", "to_oxigraph_term", "from_oxigraph_term", "to_oxigraph_triple", "to_quad", "from_quad"]

#: Any pyoxigraph term we convert to or from.
OxTerm = ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple

_SUBJECT_MESSAGE = ("a triple term cannot be a subject: triple terms may only be objects "
                    "in RDF 1.2 exports ({where})")


def _literal(term: Term) -> ox.Literal:
    if term.language:
        return ox.Literal(term.value, language=term.language)
    if term.datatype and term.datatype != XSD_STRING:
        return ox.Literal(term.value, datatype=ox.NamedNode(term.datatype))
    return ox.Literal(term.value)


def _subject(term: Term, where: str) -> ox.NamedNode | ox.BlankNode:
    if term.type == TRIPLE:
        raise TermError(_SUBJECT_MESSAGE.format(where=where))
    if term.type == LITERAL:
        raise TermError(f"a literal cannot be a subject in RDF ({where})")
    if term.type == IRI:
        return ox.NamedNode(term.value)
    if term.type == BLANK:
        return ox.BlankNode(term.value)
    raise TermError(f"unknown term type {term.type!r}")


def _triple(triple: Triple) -> ox.Triple:
    s, p, o = spo(triple)
    if p.type != IRI:
        raise TermError("predicate must be an IRI")
    return ox.Triple(_subject(s, "inside a triple term"), ox.NamedNode(p.value), _convert(o))


def _convert(term: Term) -> OxTerm:
    t = term.type
    if t == IRI:
        return ox.NamedNode(term.value)
    if t == LITERAL:
        return _literal(term)
    if t == BLANK:
        return ox.BlankNode(term.value)
    if t == TRIPLE:
        return _triple(quoted(term))
    raise TermError(f"unknown term type {t!r}")


@contextmanager
def _pyoxigraph_errors(what: str) -> Iterator[None]:
    """Turn pyoxigraph's ValueError/TypeError into a TermError naming ``what`` was rejected."""
    try:
        yield
    except TermError:
        raise
    except (ValueError, TypeError) as e:
        raise TermError(f"pyoxigraph rejected {what}: {e}") from None


def to_oxigraph_term(term: Term) -> OxTerm:
    """Convert one term (recursively for triple terms) to its pyoxigraph equivalent.

    :param term: the term; it is validated first, so bad IRIs, language tags, blank ids and
        over-deep nesting raise :class:`TermError` with our message.
    :returns: a ``NamedNode``, ``Literal``, ``BlankNode`` or ``Triple``.
    """
    validate_term(term)
    with _pyoxigraph_errors("term"):
        return _convert(term)


def to_oxigraph_triple(triple: Triple) -> ox.Triple:
    """Convert the ``s p o`` of a triple (its graph is ignored) to a pyoxigraph ``Triple``.

    :raises TermError: for invalid terms or a triple term / literal in subject position.
    """
    if triple is None:
        raise TermError("triple is missing")
    s, p = validate_term(triple.s), validate_term(triple.p)
    validate_term(triple.o)
    if s.type == TRIPLE:
        raise TermError(_SUBJECT_MESSAGE.format(where=f"subject of a triple with predicate <{p.value}>"))
    if s.type == LITERAL:
        raise TermError("a literal cannot be a subject in RDF")
    with _pyoxigraph_errors("triple"):
        return _triple(triple)


def to_quad(triple: Triple) -> ox.Quad:
    """Convert a triple to a pyoxigraph ``Quad``; graph ``""`` becomes ``DefaultGraph``.

    :param triple: the triple; subject must be an IRI or blank node, predicate an IRI,
        graph ``""`` or an IRI.
    :raises TermError: for invalid terms or a triple term / literal in subject position.
    """
    t = to_oxigraph_triple(triple)
    if not triple.g:
        return ox.Quad(t.subject, t.predicate, t.object, ox.DefaultGraph())
    validate_iri(triple.g)
    with _pyoxigraph_errors("graph name"):
        return ox.Quad(t.subject, t.predicate, t.object, ox.NamedNode(triple.g))


def from_oxigraph_term(term: OxTerm, _depth: int = 0) -> Term:
    """Convert a pyoxigraph term back to a canonical :class:`Term`.

    :param term: a ``NamedNode``, ``BlankNode``, ``Literal`` or ``Triple``.
    :raises TermError: for variables, directional literals (not representable) or triple
        terms nested deeper than :data:`MAX_TRIPLE_DEPTH`.
    """
    if isinstance(term, ox.NamedNode):
        return Term(IRI, term.value)
    if isinstance(term, ox.Literal):
        if term.direction is not None:
            raise TermError(f"literal {str(term)[:80]} has a base direction, which Term cannot carry")
        if term.language:
            return Term(LITERAL, term.value, "", term.language)
        dt = term.datatype.value
        return Term(LITERAL, term.value, "" if dt in (XSD_STRING, RDF_LANG_STRING) else dt)
    if isinstance(term, ox.BlankNode):
        return Term(BLANK, term.value)
    if isinstance(term, ox.Triple):
        if _depth >= MAX_TRIPLE_DEPTH:
            raise TermError(f"triple terms nested deeper than {MAX_TRIPLE_DEPTH}")
        return Term(TRIPLE, triple=Triple(from_oxigraph_term(term.subject, _depth + 1),
                                          from_oxigraph_term(term.predicate, _depth + 1),
                                          from_oxigraph_term(term.object, _depth + 1)))
    raise TermError(f"cannot convert {type(term).__name__} to a Term")


def from_quad(quad: ox.Quad | ox.Triple) -> Triple:
    """Convert a pyoxigraph ``Quad`` (or ``Triple``, taken as default graph) to a :class:`Triple`.

    :raises TermError: for a blank-node graph name (our graphs are IRIs or ``""``).
    """
    if isinstance(quad, ox.Quad):
        g = quad.graph_name
        if isinstance(g, ox.DefaultGraph):
            graph = ""
        elif isinstance(g, ox.NamedNode):
            graph = g.value
        else:
            raise TermError(f"graph name {g} is a blank node; graphs must be IRIs or the default graph")
    else:
        graph = ""
    return Triple(from_oxigraph_term(quad.subject), from_oxigraph_term(quad.predicate),
                  from_oxigraph_term(quad.object), graph)
