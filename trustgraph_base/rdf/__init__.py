"""RDF interop: canonical term strings, pyoxigraph conversion, Turtle/TriG/N-Quads export, SHACL validation."""

from .terms import (
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
from .validation import validate_trace  # SHACL check of a whole trace (loads pyshacl on first use)

__all__ = [
    "MAX_TRIPLE_DEPTH", "TermError", "get_term_value", "parse_term", "parse_triple",
    "serialize_term", "serialize_triple", "validate_iri", "validate_term", "validate_trace", "validate_triple",
]
