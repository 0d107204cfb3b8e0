"""RDF 1.2 export: pyoxigraph conversion, Turtle / TriG / N-Quads / N-Triples round trips, bad input."""

from __future__ import annotations

import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustgraph_base.provenance import (
    EdgeSelection,
    exploration_triples,
    focus_triples,
    question_triples,
    subgraph_triples,
    synthesis_triples,
    uris,
)
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.rdf.export import DEFAULT_PREFIXES, ExportError, RdfParseError, parse, serialize
from trustgraph_base.rdf.oxigraph import from_oxigraph_term, from_quad, to_oxigraph_term, to_quad
from trustgraph_base.rdf.terms import TermError, serialize_term
from trustgraph_base.schema import LITERAL, TRIPLE, Term, Triple, blank, iri, literal, triple_term

pytestmark = pytest.mark.unit

XSD = "http://www.w3.org/2001/XMLSchema#"
RETRIEVAL = ns.GRAPH_RETRIEVAL
INJECTION = '"> ; <x> <y> <z> .'

# ---------------------------------------------------------------- strategies

_IRI_CHAR = st.characters(categories=["L", "Nd"]) | st.sampled_from(list("-._~!$&'()*+,;=:@/"))
# Namespaces of DEFAULT_PREFIXES appear often, so prefixed names with awkward local parts get written.
_BASES = st.sampled_from([ns.TG_NS, ns.PROV, ns.RDFS, "http://example.org/", "urn:x:", "https://e.example/a#"])
iri_terms = st.builds(lambda base, local: iri(base + local), _BASES, st.text(_IRI_CHAR, max_size=10)).filter(
    lambda t: t.value != "urn:x:")
blank_terms = st.from_regex(r"[A-Za-z][A-Za-z0-9_\-]{0,8}", fullmatch=True).map(blank)
TEXT = st.text(max_size=30) | st.sampled_from([INJECTION, "line one\nline two", 'say "hi"', "tab\there", "\\"])
literal_terms = st.one_of(
    TEXT.map(literal),
    st.builds(lambda v, lang: literal(v, language=lang), TEXT, st.sampled_from(["en", "de-ch", "zh-hant", "fr"])),
    st.builds(lambda v, dt: literal(v, datatype=dt), TEXT | st.sampled_from(["5", "-0", "1.5e3", "true"]),
              st.sampled_from([XSD + "integer", XSD + "dateTime", XSD + "double", XSD + "boolean",
                               "http://example.org/dt"])),
)
subject_terms = iri_terms | blank_terms
object_terms = st.recursive(iri_terms | blank_terms | literal_terms,
                            lambda inner: st.builds(triple_term, subject_terms, iri_terms, inner), max_leaves=5)


def triples(graphs):
    return st.builds(Triple, subject_terms, iri_terms, object_terms, graphs)


def canonical(term: Term) -> Term:
    """What a parse gives back: language lower-cased, xsd:string dropped."""
    if term.type == LITERAL:
        dt = "" if term.language or term.datatype == XSD + "string" else term.datatype
        return Term(LITERAL, term.value, dt, term.language.lower())
    if term.type == TRIPLE:
        t = term.triple
        return Term(TRIPLE, triple=Triple(canonical(t.s), canonical(t.p), canonical(t.o)))
    return term


def canonical_triple(t: Triple, graph: str | None = None) -> Triple:
    return Triple(canonical(t.s), canonical(t.p), canonical(t.o), t.g if graph is None else graph)


def graphrag_trace(session: str = "s1") -> list[Triple]:
    """A GraphRAG trace from the real builders, with edges whose objects are typed / tagged / nested."""
    edges = [
        Triple(iri("http://example.org/e/marie-curie"), iri("http://example.org/r/born"),
               literal("1867", datatype=XSD + "integer")),
        Triple(iri("http://example.org/e/marie-curie"), iri(ns.RDFS_LABEL), literal("Marie Curie", language="en")),
        Triple(iri("http://example.org/e/x"), iri("http://example.org/r/said"),
               triple_term(iri("http://example.org/e/y"), iri("http://example.org/r/q"), literal(INJECTION))),
    ]
    q, e, f = uris.question_uri(session), uris.exploration_uri(session), uris.focus_uri(session)
    return (question_triples(q, "Who was\n\"Marie\"?", "2025-03-01T12:00:00.000Z")
            + exploration_triples(e, q, 3, [iri("http://example.org/e/marie-curie")])
            + focus_triples(f, e, [EdgeSelection(edge, f"reason {i}: {INJECTION}") for i, edge in enumerate(edges)],
                            session)
            + synthesis_triples(uris.synthesis_uri(session), f, uris.answer_document_uri(session)))


# ---------------------------------------------------------------- pyoxigraph conversion

def test_term_conversion_both_ways():
    cases = [
        iri("http://example.org/a"),
        blank("b0"),
        literal("plain"),
        literal("chat", language="fr"),
        literal("42", datatype=XSD + "integer"),
        triple_term(iri("http://x/s"), iri("http://x/p"), triple_term(blank("b"), iri("http://x/q"), literal("z"))),
    ]
    for term in cases:
        ox_term = to_oxigraph_term(term)
        assert from_oxigraph_term(ox_term) == term
    assert isinstance(to_oxigraph_term(cases[-1]), ox.Triple)
    assert to_oxigraph_term(literal("42", datatype=XSD + "integer")) == ox.Literal(
        "42", datatype=ox.NamedNode(XSD + "integer"))


def test_conversion_canonicalises():
    assert from_oxigraph_term(to_oxigraph_term(literal("x", language="EN-gb"))) == literal("x", language="en-gb")
    assert from_oxigraph_term(to_oxigraph_term(literal("x", datatype=XSD + "string"))) == literal("x")


def test_quads_default_and_named_graph():
    t = Triple(iri("http://x/s"), iri("http://x/p"), literal("o"))
    q = to_quad(t)
    assert q.graph_name == ox.DefaultGraph()
    assert from_quad(q) == t
    named = Triple(t.s, t.p, t.o, RETRIEVAL)
    assert to_quad(named).graph_name == ox.NamedNode(RETRIEVAL)
    assert from_quad(to_quad(named)) == named
    assert from_quad(ox.Triple(ox.NamedNode("http://x/s"), ox.NamedNode("http://x/p"), ox.Literal("o"))) == t


def test_triple_term_as_subject_is_refused_clearly():
    quoted = triple_term(iri("http://x/a"), iri("http://x/b"), iri("http://x/c"))
    with pytest.raises(TermError, match="triple terms may only be objects in RDF 1.2 exports"):
        to_quad(Triple(quoted, iri("http://x/p"), literal("o")))
    inner_subject = triple_term(quoted, iri("http://x/p"), literal("o"))
    with pytest.raises(TermError, match="triple terms may only be objects in RDF 1.2 exports"):
        to_quad(Triple(iri("http://x/s"), iri("http://x/p"), inner_subject))
    with pytest.raises(TermError, match="triple terms may only be objects"):
        serialize([Triple(quoted, iri("http://x/p"), literal("o"))], "turtle")


def test_literal_subject_and_bad_terms_refused():
    with pytest.raises(TermError, match="literal cannot be a subject"):
        to_quad(Triple(literal("s"), iri("http://x/p"), literal("o")))
    with pytest.raises(TermError, match="forbidden character ' '"):
        to_quad(Triple(iri("http://x/a b"), iri("http://x/p"), literal("o")))
    with pytest.raises(TermError, match="predicate must be an IRI"):
        to_quad(Triple(iri("http://x/s"), blank("p"), literal("o")))
    with pytest.raises(TermError, match="forbidden character"):
        to_quad(Triple(iri("http://x/s"), iri("http://x/p"), literal("o"), "urn:graph name"))


def test_unrepresentable_pyoxigraph_terms_refused():
    with pytest.raises(TermError, match="base direction"):
        from_oxigraph_term(ox.Literal("x", language="ar", direction=ox.BaseDirection.RTL))
    with pytest.raises(TermError, match="cannot convert Variable"):
        from_oxigraph_term(ox.Variable("x"))
    blank_graph = ox.Quad(ox.NamedNode("http://x/s"), ox.NamedNode("http://x/p"), ox.Literal("o"), ox.BlankNode("g"))
    with pytest.raises(TermError, match="blank node"):
        from_quad(blank_graph)


# ---------------------------------------------------------------- round trips

@pytest.mark.parametrize("fmt", ["turtle", "trig", "nquads", "ntriples"])
def test_real_trace_round_trips_exactly(fmt):
    trace = graphrag_trace()
    text = serialize(trace, fmt)
    graph = RETRIEVAL if fmt in ("turtle", "ntriples") else ""
    assert parse(text, fmt, graph=graph) == trace
    assert "<<(" in text and ")>>" in text


@settings(max_examples=60, deadline=None)
@given(st.lists(triples(st.sampled_from(["", RETRIEVAL, ns.GRAPH_SOURCE])), max_size=6),
       st.sampled_from(["trig", "nquads"]))
def test_datasets_round_trip(ts, fmt):
    text = serialize(ts, fmt)
    assert parse(text, fmt) == [canonical_triple(t) for t in ts]


@settings(max_examples=60, deadline=None)
@given(st.lists(triples(st.just(RETRIEVAL)), max_size=6), st.sampled_from(["turtle", "ntriples"]))
def test_single_graph_formats_round_trip(ts, fmt):
    text = serialize(ts, fmt)
    assert parse(text, fmt) == [canonical_triple(t, "") for t in ts]
    assert parse(text, fmt, graph=RETRIEVAL) == [canonical_triple(t) for t in ts]


@pytest.mark.parametrize("fmt", ["turtle", "trig", "nquads", "ntriples"])
@pytest.mark.parametrize("value", [
    INJECTION,
    '"""> ; <x> <y> <z> . """',
    "first line\nsecond line\r\nthird",
    "\\u0041 is not an escape here \\",
    "control \x00\x01\x1f\x7f chars",
    "@prefix ex: <http://evil/> .",
    "} GRAPH <urn:g> { <a> <b> <c> }",
    "'single' and \"double\" quotes",
    "unicode: é 漢字 😀 \u2028 \ufeff",
])
def test_hostile_literals_round_trip(fmt, value):
    ts = [Triple(iri("http://x/s"), iri(ns.RDFS_LABEL), literal(value), RETRIEVAL),
          Triple(iri("http://x/s"), iri("http://x/p"), literal(value, language="en"), RETRIEVAL),
          Triple(iri("http://x/s"), iri("http://x/q"),
                 triple_term(iri("http://x/a"), iri("http://x/b"), literal(value, datatype="http://x/dt")), RETRIEVAL)]
    text = serialize(ts, fmt)
    graph = RETRIEVAL if fmt in ("turtle", "ntriples") else ""
    back = parse(text, fmt, graph=graph)
    assert back == ts
    assert len(back) == 3  # the injection did not add or remove statements


def test_long_literal_round_trips():
    value = "x" * 1_000_000 + "\n" + "é" * 1000
    ts = [Triple(iri("http://x/s"), iri("http://x/p"), literal(value))]
    for fmt in ("turtle", "trig", "nquads", "ntriples"):
        assert parse(serialize(ts, fmt), fmt) == ts


def test_literals_with_datatype_and_language_keep_them():
    ts = [Triple(iri("http://x/s"), iri("http://x/p"), o) for o in (
        literal("5", datatype=XSD + "integer"), literal("05", datatype=XSD + "integer"),
        literal("not a number", datatype=XSD + "integer"), literal("2025-01-01T00:00:00Z", datatype=XSD + "dateTime"),
        literal("1.0e5", datatype=XSD + "double"), literal("true", datatype=XSD + "boolean"),
        literal("hello", language="en"), literal("grüezi", language="de-ch"), literal("plain"),
    )]
    for fmt in ("turtle", "trig", "nquads", "ntriples"):
        assert parse(serialize(ts, fmt), fmt) == ts


def test_nested_triple_terms_round_trip():
    deep = iri("http://x/leaf")
    for i in range(5):
        deep = triple_term(blank(f"b{i}"), iri(f"http://x/p{i}"), deep)
    ts = [Triple(iri("http://x/s"), iri(ns.TG_CONTAINS), deep, ns.GRAPH_SOURCE)]
    for fmt in ("turtle", "trig", "nquads", "ntriples"):
        text = serialize(ts, fmt)
        assert text.count("<<(") == 5
        graph = ns.GRAPH_SOURCE if fmt in ("turtle", "ntriples") else ""
        assert parse(text, fmt, graph=graph) == ts


def test_subgraph_contains_triple_terms_round_trip():
    extracted = [Triple(iri("http://x/a"), iri("http://x/b"), literal("c", language="en")),
                 Triple(iri("http://x/a"), iri("http://x/b"), literal("7", datatype=XSD + "integer"))]
    ts = subgraph_triples(uris.subgraph_uri("urn:chunk:1"), "urn:chunk:1", extracted)
    assert parse(serialize(ts, "trig"), "trig") == ts


# ---------------------------------------------------------------- prefixes and graphs

def test_turtle_and_trig_use_nice_prefixes():
    for fmt in ("turtle", "trig"):
        text = serialize(graphrag_trace(), fmt)
        for prefix, namespace in DEFAULT_PREFIXES.items():
            assert f"@prefix {prefix}: <{namespace}> ." in text
        assert "tg:EdgeSelection" in text and "prov:wasDerivedFrom" in text and "xsd:dateTime" in text
    assert "@prefix" not in serialize(graphrag_trace(), "nquads")


def test_custom_and_no_prefixes():
    ts = [Triple(iri("http://example.org/a"), iri("http://example.org/p"), literal("x"))]
    text = serialize(ts, "turtle", prefixes={"ex": "http://example.org/"})
    assert "@prefix ex: <http://example.org/> ." in text and "ex:a ex:p" in text and "@prefix tg:" not in text
    assert "@prefix" not in serialize(ts, "turtle", prefixes={})
    assert parse(text, "turtle") == ts


def test_trig_keeps_each_graph():
    ts = [Triple(iri("http://x/a"), iri("http://x/p"), literal("1"), ""),
          Triple(iri("http://x/a"), iri("http://x/p"), literal("2"), RETRIEVAL),
          Triple(iri("http://x/a"), iri("http://x/p"), literal("3"), ns.GRAPH_SOURCE)]
    text = serialize(ts, "trig")
    assert f"<{RETRIEVAL}> {{" in text and f"<{ns.GRAPH_SOURCE}> {{" in text
    assert parse(text, "trig") == ts
    assert parse(serialize(ts, "nquads"), "nquads") == ts


@pytest.mark.parametrize("fmt", ["turtle", "ntriples"])
def test_several_graphs_in_single_graph_format_refused_unless_asked(fmt):
    ts = [Triple(iri("http://x/a"), iri("http://x/p"), literal("1"), RETRIEVAL),
          Triple(iri("http://x/a"), iri("http://x/p"), literal("2"), ns.GRAPH_SOURCE)]
    with pytest.raises(ExportError, match=r"single graph .* 2 graphs .*trig.*drop_graphs=True"):
        serialize(ts, fmt)
    merged = parse(serialize(ts, fmt, drop_graphs=True), fmt)
    assert merged == [Triple(t.s, t.p, t.o, "") for t in ts]


def test_unknown_format_and_bad_text():
    with pytest.raises(ExportError, match="unknown RDF format 'json-ld'"):
        serialize([], "json-ld")
    with pytest.raises(ExportError, match="unknown RDF format"):
        parse("", "rdfxml")
    with pytest.raises(RdfParseError, match="invalid turtle"):
        parse('<http://x/s> <http://x/p> "unterminated .', "turtle")
    with pytest.raises(RdfParseError, match="invalid nquads"):
        parse("<http://x/s> <http://x/p> <http://x/o> <urn:g> <extra> .", "nquads")
    with pytest.raises(RdfParseError):
        parse("<<( <http://x/a> <http://x/b> <http://x/c> )>> <http://x/p> <http://x/o> .", "ntriples")
    with pytest.raises(TermError, match="forbidden character"):
        parse("", "turtle", graph="urn:bad graph")


def test_nothing_written_when_a_term_is_bad():
    good = Triple(iri("http://x/s"), iri("http://x/p"), literal("o"))
    bad = Triple(iri("http://x/s"), iri("http://x/p"), iri("http://x/<oops>"))
    with pytest.raises(TermError, match="forbidden character '<'"):
        serialize([good, bad], "turtle")


def test_aliases_and_empty_input():
    ts = graphrag_trace()
    assert serialize(ts, "ttl") == serialize(ts, "turtle")
    assert serialize(ts, "nq") == serialize(ts, "nquads")
    assert serialize([], "nquads") == ""
    assert parse("", "trig") == []
    assert serialize_term(parse(serialize(ts, "nt"), "nt")[0].s) == f"<{uris.question_uri('s1')}>"
