"""How a stored answer is tied to the trace stage that names it.

The librarian stores each answer that arrives on the ``answer-store`` queue with a marker in its
metadata: the very triple of the trace that names it, ``<stage> tg:document <answer>``.  Trace
retention reads it back before removing an answer, so an answer is only ever removed through
the trace that stored it.  "Answers" are every document a trace stores in the librarian (as
``document_type="answer"``): a query's answer, and an agent's thoughts and observations.
"""

from __future__ import annotations

from ..rdf.terms import TermError, validate_iri
from ..schema.library import DocumentMetadata
from ..schema.primitives import IRI, Term, Triple
from . import namespaces as ns

__all__ = ["answer_marker", "marked_stages"]


def answer_marker(answer_id: str, stage_uri: str) -> list[Triple]:
    """The metadata triple recording that ``stage_uri`` names answer ``answer_id`` (none for an invalid IRI)."""
    try:
        validate_iri(answer_id)
        validate_iri(stage_uri)
    except TermError:
        return []
    return [Triple(Term(IRI, stage_uri), Term(IRI, ns.TG_DOCUMENT), Term(IRI, answer_id))]


def marked_stages(meta: DocumentMetadata) -> list[str]:
    """The stages an answer's metadata says name it (``[]`` for an answer stored without a marker)."""
    return [t.s.value for t in meta.metadata or []
            if isinstance(t, Triple) and t.p is not None and t.p.value == ns.TG_DOCUMENT
            and t.s is not None and t.s.type == IRI and t.o is not None and t.o.value == meta.id]
