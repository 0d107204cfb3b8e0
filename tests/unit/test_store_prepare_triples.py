"""prepare_triples: its fast path (IRI cache, one-walk triple terms, graph cache) gives the canonical keys
and the careful path's error messages."""

from __future__ import annotations

import pytest

from trustgraph_base.rdf.terms import serialize_term
from trustgraph_base.schema import Term, Triple, iri, literal, triple_term
from trustgraph_base.store.errors import InvalidQuery
from trustgraph_base.store.triples import prepare_triples

pytestmark = pytest.mark.unit

EX = "http://example.org/"
A, B, P = iri(EX + "a"), iri(EX + "b"), iri(EX + "p")


def test_keys_are_the_canonical_strings_and_duplicates_go():
    nested = triple_term(triple_term(A, P, literal("x", language="en")), P, Term(type="b", value="n1"))
    data = [Triple(A, P, B), Triple(nested, P, triple_term(A, P, B), "urn:g:1"), Triple(A, P, B, None),
            Triple(A, P, literal("5", datatype="http://www.w3.org/2001/XMLSchema#integer"), "urn:g:1"),
            Triple(A, P, B)]
    got = prepare_triples(data)
    assert got == [(serialize_term(t.s), serialize_term(t.p), serialize_term(t.o), t.g or "")
                   for t in data[:2] + data[3:4]]
    assert got[1][0] == f'<<( <<( <{EX}a> <{EX}p> "x"@en )>> <{EX}p> _:n1 )>>'


@pytest.mark.parametrize("bad, message", [
    (Triple(triple_term(A, literal("p"), B), P, B), "triple 1: predicate must be an IRI"),
    (Triple(A, P, triple_term(A, P, iri("not an iri"))), "triple 1:"),
    (Triple(A, P, Term(type="t", value="")), "triple 1: triple term without a triple"),
    (Triple(A, literal("p"), B), "triple 1: predicate must be an IRI"),
    (Triple(A, P, B, "not a graph"), "triple 1: invalid graph"),
    (Triple(A, P, None), "triple 1:"),
    ("not a triple", "triple 1: expected a Triple, got str"),
])
def test_a_bad_triple_is_named(bad, message):
    with pytest.raises(InvalidQuery, match=message.replace("(", r"\(")):
        prepare_triples([Triple(A, P, B), bad])


def test_triple_terms_nested_too_deep_are_refused():
    term = triple_term(A, P, B)
    for _ in range(10):
        term = triple_term(term, P, B)
    with pytest.raises(InvalidQuery, match="nested deeper"):
        prepare_triples([Triple(term, P, B)])
