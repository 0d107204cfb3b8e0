"""Checks of a query's messages and stored trace shared by the retrieval service tests."""

from __future__ import annotations

from trustgraph_base.provenance import namespaces as ns

#: The error of a query whose model answered with nothing.
NO_ANSWER = "the model returned no answer"


def assert_failed_without_answer(msgs, trace, reached: str, answer_predicates: tuple[str, ...]) -> None:
    """A query whose model answered with nothing: one last message carrying the error and no answer text,
    and a stored trace that ends in an Error after the ``reached`` stage type, with no answer document."""
    last = msgs[-1]
    assert last.end_of_session and sum(m.end_of_session for m in msgs) == 1
    assert last.error is not None and last.error.message == NO_ANSWER, last.error
    assert not [m.response for m in msgs if m.response], "the client was sent an answer"
    types = {t.o.value for t in trace if t.p.value == ns.RDF_TYPE}
    assert ns.TG_ERROR in types and reached in types and ns.TG_SYNTHESIS not in types
    assert not [t for t in trace if t.p.value in answer_predicates]
    assert next(t.o.value for t in trace if t.p.value == ns.TG_STAGE) == "synthesis"
