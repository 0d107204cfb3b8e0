"""How a term reads to a person: its ``rdfs:label``, else a readable stand-in.

GraphRAG shows the LLM edges by these labels, and the CLI prints a trace's edges and seed
entities with them, so both name a term the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..schema import BLANK, IRI, LITERAL, TRIPLE, Term
from .terms import quoted, spo

__all__ = ["fallback_label", "term_label"]


def fallback_label(iri: str) -> str:
    """A readable stand-in when an IRI has no ``rdfs:label``: its last path segment, de-slugged."""
    tail = re.split(r"[/#:]", iri.rstrip("/#"))[-1] or iri
    return tail.replace("-", " ").replace("_", " ") or iri


def term_label(term: Term, labels: Mapping[str, str]) -> str:
    """The label of a term: ``rdfs:label`` for IRIs, the lexical form for literals."""
    if term.type == IRI:
        return labels.get(term.value) or fallback_label(term.value)
    if term.type == LITERAL:
        return term.value
    if term.type == BLANK:
        return f"_:{term.value}"
    if term.type == TRIPLE:
        s, p, o = spo(quoted(term))
        return f"<<{term_label(s, labels)} {term_label(p, labels)} {term_label(o, labels)}>>"
    return str(term.value)
