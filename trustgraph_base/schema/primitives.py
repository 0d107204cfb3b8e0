"""Primitive message types: RDF terms, triples, errors and metadata.

A :class:`Term` is one RDF 1.2 term.  ``type`` is one of :data:`IRI`, :data:`LITERAL`,
:data:`BLANK` or :data:`TRIPLE`; ``value`` holds the IRI, the literal's lexical form or
the blank node id; a TRIPLE term carries its quoted :class:`Triple` in ``triple``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

IRI = "i"
LITERAL = "l"
BLANK = "b"
TRIPLE = "t"

TERM_TYPES = (IRI, LITERAL, BLANK, TRIPLE)

#: The named graph of the knowledge itself.
DEFAULT_GRAPH = ""


@dataclass(slots=True)
class Term:
    """One RDF term (IRI, literal, blank node or triple term)."""

    type: str = IRI
    value: str = ""
    datatype: str = ""
    language: str = ""
    triple: Triple | None = None


@dataclass(slots=True)
class Triple:
    """A statement ``s p o`` in named graph ``g`` (``""`` = default graph)."""

    s: Term | None = None
    p: Term | None = None
    o: Term | None = None
    g: str = DEFAULT_GRAPH


@dataclass
class Error:
    """An error carried in a response instead of an exception across the bus."""

    type: str = ""
    message: str = ""


@dataclass
class Metadata:
    """Where a batch of triples or a document belongs."""

    id: str = ""
    root: str = ""
    user: str = "trustgraph"
    collection: str = "default"


@dataclass
class Triples:
    """A batch of triples for one user and collection (the triples-store flow message)."""

    metadata: Metadata = field(default_factory=Metadata)
    triples: list[Triple] = field(default_factory=list)


def iri(value: str) -> Term:
    """Build an IRI term."""
    return Term(type=IRI, value=value)


def literal(value: str, datatype: str = "", language: str = "") -> Term:
    """Build a literal term (plain string when neither datatype nor language is given)."""
    return Term(type=LITERAL, value=value, datatype=datatype, language=language)


def blank(value: str) -> Term:
    """Build a blank node term."""
    return Term(type=BLANK, value=value)


def triple_term(s: Term, p: Term, o: Term) -> Term:
    """Build an RDF 1.2 triple term ``<<( s p o )>>``."""
    return Term(type=TRIPLE, triple=Triple(s=s, p=p, o=o))
