"""RDF interop: canonical term strings, pyoxigraph conversion, Turtle/TriG/N-Quads export, SHACL validation."""

from .terms import (
    MAX_TRIPLE_DEPTH, TermError, get_term_value, parse_term, parse_triple,
    serialize_term, serialize_triple, validate_iri, validate_term, validate_triple,
)

__all__ = [
    "MAX_TRIPLE_DEPTH", "TermError", "get_term_value", "parse_term", "parse_triple",
    "serialize_term", "serialize_triple", "validate_iri", "validate_term", "validate_triple",
]
