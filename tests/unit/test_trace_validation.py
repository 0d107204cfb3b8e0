"""SHACL validation of explain traces: real builders' traces pass; each kind of broken trace fails by name."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from trustgraph_base.provenance import (
    EdgeSelection,
    LlmUsage,
    agent_final_triples,
    agent_iteration_triples,
    agent_observation_triples,
    agent_session_triples,
    agent_thought_triples,
    docrag_exploration_triples,
    docrag_question_triples,
    docrag_synthesis_triples,
    error_triples,
    exploration_triples,
    focus_triples,
    grounding_triples,
    question_triples,
    synthesis_triples,
    uris,
)
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.rdf import validate_trace
from trustgraph_base.rdf.export import parse, serialize
from trustgraph_base.rdf.validation import ValidationReport, Violation, load_shapes, to_rdflib_graph
from trustgraph_base.schema import Term, Triple, blank, iri, literal, triple_term

pytestmark = pytest.mark.unit

XSD = ns.XSD
G = ns.GRAPH_RETRIEVAL
WHEN = "2025-06-01T09:30:00.000Z"

Q, GND, EXP, FOC, SYN = (uris.question_uri("s1"), uris.grounding_uri("s1"), uris.exploration_uri("s1"),
                         uris.focus_uri("s1"), uris.synthesis_uri("s1"))
USAGE = LlmUsage(1200, 40, "test-model")
V1_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "trace_v1" / "traces.trig"
SEL = [uris.edge_selection_uri("s1", i) for i in range(3)]
EDGES = [
    Triple(iri("http://example.org/e/curie"), iri("http://example.org/r/won"), iri("http://example.org/e/nobel")),
    Triple(iri("http://example.org/e/curie"), iri("http://example.org/r/born"),
           literal("1867", datatype=XSD + "integer")),
    Triple(iri("http://example.org/e/curie"), iri(ns.RDFS_LABEL), literal("Marie Curie", language="en")),
]


def graphrag_trace() -> list[Triple]:
    return (question_triples(Q, "What did Curie win?", WHEN)
            + grounding_triples(GND, Q, ["Marie Curie"])
            + exploration_triples(EXP, Q, 40, [iri("http://example.org/e/curie")], grounding_uri=GND)
            + focus_triples(FOC, EXP, [EdgeSelection(e, f"relevant because {i}", score=0.5 + i / 10, concept="Curie")
                                       for i, e in enumerate(EDGES)], "s1", dropped=1, usage=USAGE)
            + synthesis_triples(SYN, FOC, uris.answer_document_uri("s1"), usage=USAGE))


def docrag_trace(session: str = "d1") -> list[Triple]:
    q, e = uris.docrag_question_uri(session), uris.docrag_exploration_uri(session)
    s = uris.docrag_synthesis_uri(session)
    g = uris.docrag_grounding_uri(session)
    return (docrag_question_triples(q, "What is in the report?", WHEN)
            + grounding_triples(g, q, ["What is in the report?"])
            + docrag_exploration_triples(e, q, ["urn:chunk:1", "urn:chunk:2"], grounding_uri=g)
            + docrag_synthesis_triples(s, e, "The report says…", uris.docrag_answer_uri(session), usage=USAGE))


def agent_trace(session: str = "a1", iterations: int = 2) -> list[Triple]:
    """Question <- Analysis 1 (with its Thought) <- Observation 1 <- Analysis 2 <- ... <- Conclusion."""
    q = uris.agent_session_uri(session)
    out = agent_session_triples(q, "Plan a trip", WHEN)
    parent = q
    for n in range(1, iterations + 1):
        a, o = uris.agent_iteration_uri(session, n), uris.agent_observation_uri(session, n)
        t = uris.agent_thought_uri(session, n)
        out += agent_iteration_triples(a, parent, "knowledge-query", {"question": f"q{n}"}, thought_uri=t,
                                       usage=USAGE)
        out += agent_thought_triples(t, a)
        out += agent_observation_triples(o, a)
        parent = o
    return out + agent_final_triples(uris.agent_final_uri(session), parent, uris.agent_answer_uri(session),
                                     usage=USAGE)


def error_trace() -> list[Triple]:
    return (question_triples(Q, "What did Curie win?", WHEN) + grounding_triples(GND, Q, [])
            + exploration_triples(EXP, Q, 0, grounding_uri=GND)
            + error_triples(uris.error_uri("s1"), EXP, "LLM endpoint unreachable", "focus"))


def v1_traces() -> list[Triple]:
    """Traces stored by trace model v1 (tests/fixtures/trace_v1): no Grounding, agent texts inline."""
    return parse(V1_FIXTURE.read_bytes(), "trig")


def drop(trace: list[Triple], s: str | None = None, p: str | None = None, o: str | None = None) -> list[Triple]:
    """The trace without the triples matching the given subject / predicate / object values."""
    out = [t for t in trace if not ((s is None or t.s.value == s) and (p is None or t.p.value == p)
                                    and (o is None or t.o.value == o))]
    assert len(out) < len(trace), "the broken variant must actually remove something"
    return out


def add(trace: list[Triple], s: str, p: str, o: Term) -> list[Triple]:
    return trace + [Triple(iri(s), iri(p), o, G)]


def assert_fails(report: ValidationReport, *fragments: str, focus: str | None = None) -> Violation:
    """The report fails and one violation message contains every fragment; returns that violation."""
    assert not report.conforms
    for v in report.violations:
        if all(f in v.message for f in fragments) and (focus is None or v.focus == focus):
            return v
    raise AssertionError(f"no violation mentions {fragments}; got:\n{report.text()}")


# ---------------------------------------------------------------- valid traces pass

@pytest.mark.parametrize("build", [graphrag_trace, docrag_trace, agent_trace, error_trace, v1_traces],
                         ids=["graphrag", "docrag", "agent", "error", "stored-by-v1"])
def test_valid_traces_conform(build):
    report = validate_trace(build())
    assert report.violations == [], report.text()
    assert report.conforms and report.text() == "trace conforms"


def test_other_valid_shapes_of_traces():
    empty_focus = (question_triples(Q, "q", WHEN) + exploration_triples(EXP, Q, 0) + focus_triples(FOC, EXP, [], "s1")
                   + synthesis_triples(SYN, FOC, uris.answer_document_uri("s1")))
    # a model call whose endpoint reported no usage: its model and no token counts
    unreported = (question_triples(Q, "q", WHEN) + exploration_triples(EXP, Q, 0) + focus_triples(FOC, EXP, [], "s1")
                  + synthesis_triples(SYN, FOC, uris.answer_document_uri("s1"), usage=LlmUsage(None, None, "llama")))
    assert not [t for t in unreported if t.p.value in (ns.TG_IN_TOKEN, ns.TG_OUT_TOKEN)]
    no_iterations = agent_trace("a2", iterations=0)
    # An agent's knowledge-query runs a GraphRAG query whose Question is derived from the Analysis.
    sub_query = question_triples(uris.question_uri("s9"), "sub", WHEN, parent_uri=uris.agent_iteration_uri("a1", 1))
    # ... which validates alone (the Analysis is in another trace) and together with the agent's trace.
    for trace in (empty_focus, unreported, no_iterations, sub_query, agent_trace() + sub_query,
                  graphrag_trace() + docrag_trace()):
        report = validate_trace(trace)
        assert report.conforms, report.text()


def test_trace_still_conforms_after_export_round_trip():
    trace = graphrag_trace() + docrag_trace() + agent_trace()
    back = parse(serialize(trace, "trig"), "trig")
    assert back == trace
    assert validate_trace(back).conforms


def test_trace_in_default_graph_conforms():
    trace = [Triple(t.s, t.p, t.o, "") for t in graphrag_trace()]
    assert validate_trace(trace).conforms


# ---------------------------------------------------------------- missing links

def test_focus_without_derivation_link():
    report = validate_trace(drop(graphrag_trace(), s=FOC, p=ns.PROV_WAS_DERIVED_FROM))
    v = assert_fails(report, f"Focus {FOC} has no prov:wasDerivedFrom link to its Exploration")
    assert v.focus == FOC and v.path == "prov:wasDerivedFrom"


def test_exploration_without_question_link():
    report = validate_trace(drop(graphrag_trace(), s=EXP, p=ns.PROV_WAS_GENERATED_BY))
    assert_fails(report, f"Exploration {EXP} has no prov:wasGeneratedBy link to its Question")
    assert len(report.violations) == 1, report.text()  # it still leads back, through its Grounding
    report = validate_trace(drop(drop(graphrag_trace(), s=EXP, p=ns.PROV_WAS_GENERATED_BY),
                                 s=EXP, p=ns.PROV_WAS_DERIVED_FROM))
    assert_fails(report, f"Exploration {EXP} does not lead back to a tg:Question")


def test_missing_stage_is_a_dangling_reference_reported_once():
    report = validate_trace(drop(graphrag_trace(), s=EXP))
    v = assert_fails(report, f"Focus {FOC} points at {EXP} through prov:wasDerivedFrom", "is not in the trace")
    assert v.constraint == "DerivedFromInTrace" and v.value == EXP
    # The broken chain is reported where it breaks, not again for every edge selection below it.
    chain = [x for x in report.violations if x.constraint == "ReachesQuestion"]
    assert [x.focus for x in chain] == [FOC]
    # The type rule on the same link is not repeated.
    assert not [x for x in report.violations if x.constraint == "Class"]


def test_synthesis_without_answer_document():
    report = validate_trace(drop(graphrag_trace(), s=SYN, p=ns.TG_DOCUMENT))
    assert_fails(report, f"GraphRAG synthesis {SYN} has no tg:document link to the stored answer")


def test_agent_analysis_with_missing_parent():
    trace = agent_trace()
    missing = uris.agent_observation_uri("a1", 1)
    report = validate_trace(drop(trace, s=missing))
    assert_fails(report, f"Analysis {uris.agent_iteration_uri('a1', 2)} points at {missing}", "is not in the trace")
    analysis = uris.agent_iteration_uri("a1", 1)
    report = validate_trace(drop(trace, s=analysis))
    assert_fails(report, f"Observation {missing} points at {analysis}", "is not in the trace")
    assert_fails(report, f"Thought {uris.agent_thought_uri('a1', 1)} points at {analysis}", "is not in the trace")


def test_exploration_derived_from_a_missing_grounding():
    report = validate_trace(drop(graphrag_trace(), s=GND))
    v = assert_fails(report, f"Exploration {EXP} points at {GND} through prov:wasDerivedFrom", "is not in the trace")
    assert v.constraint == "DerivedFromInTrace"


def test_derivation_cycle_does_not_reach_question():
    a1, o2 = uris.agent_iteration_uri("a1", 1), uris.agent_observation_uri("a1", 2)
    trace = drop(agent_trace(), s=a1, p=ns.PROV_WAS_DERIVED_FROM)
    trace = add(trace, a1, ns.PROV_WAS_DERIVED_FROM, iri(o2))
    report = validate_trace(trace)
    assert_fails(report, f"Analysis {a1} does not lead back to a tg:Question")
    assert_fails(report, f"Analysis {uris.agent_iteration_uri('a1', 2)} does not lead back to a tg:Question")


# ---------------------------------------------------------------- wrong types

def test_exploration_with_wrong_type():
    trace = drop(graphrag_trace(), s=EXP, p=ns.RDF_TYPE, o=ns.TG_EXPLORATION)
    trace = add(trace, EXP, ns.RDF_TYPE, iri(ns.TG_SYNTHESIS))
    report = validate_trace(trace)
    assert_fails(report, f"prov:wasDerivedFrom of Focus {FOC} is {EXP}, which is not a tg:Exploration")


def test_question_not_an_activity():
    report = validate_trace(drop(graphrag_trace(), s=Q, o=ns.PROV_ACTIVITY))
    v = assert_fails(report, f"GraphRAG question {Q} is not typed prov:Activity")
    assert v.path == "rdf:type"


def test_question_of_unknown_kind():
    report = validate_trace(drop(graphrag_trace(), s=Q, o=ns.TG_GRAPH_RAG_QUESTION))
    assert_fails(report, f"Question {Q} is none of tg:GraphRagQuestion, tg:DocRagQuestion, tg:AgentQuestion")


def test_kind_without_question_type():
    report = validate_trace(drop(graphrag_trace(), s=Q, o=ns.TG_QUESTION))
    assert_fails(report, f"GraphRAG question {Q} is not typed tg:Question")


def test_stage_not_an_entity():
    report = validate_trace(drop(graphrag_trace(), s=SYN, o=ns.PROV_ENTITY))
    assert_fails(report, f"Synthesis {SYN} is not typed prov:Entity")


def test_analysis_derived_from_a_conclusion():
    trace = agent_trace()
    a2, final = uris.agent_iteration_uri("a1", 2), uris.agent_final_uri("a1")
    trace = drop(trace, s=a2, p=ns.PROV_WAS_DERIVED_FROM)
    trace = add(trace, a2, ns.PROV_WAS_DERIVED_FROM, iri(final))
    report = validate_trace(trace)
    assert_fails(report, f"prov:wasDerivedFrom of Analysis {a2} is {final}, which is not a tg:Question or "
                         "tg:Observation or tg:Analysis")


# ---------------------------------------------------------------- edge selections

def test_edge_selection_without_triple_term():
    report = validate_trace(drop(graphrag_trace(), s=SEL[2], p=ns.TG_EDGE))
    v = assert_fails(report, f"Edge selection {SEL[2]} has no tg:edge triple term")
    assert v.focus == SEL[2] and v.path == "tg:edge"


def test_edge_selection_with_two_triple_terms():
    extra = triple_term(iri("http://example.org/e/a"), iri("http://example.org/r/b"), literal("c"))
    report = validate_trace(add(graphrag_trace(), SEL[0], ns.TG_EDGE, extra))
    assert_fails(report, f"Edge selection {SEL[0]} has more than one tg:edge triple term")


def test_edge_selection_pointing_at_an_iri_not_a_triple_term():
    trace = add(drop(graphrag_trace(), s=SEL[1], p=ns.TG_EDGE), SEL[1], ns.TG_EDGE, iri("http://example.org/e/curie"))
    report = validate_trace(trace)
    v = assert_fails(report, f"tg:edge of Edge selection {SEL[1]} is http://example.org/e/curie",
                     "not a triple term")
    assert v.value == "http://example.org/e/curie"


def test_dangling_selection_from_focus():
    ghost = uris.edge_selection_uri("s1", 7)
    report = validate_trace(add(graphrag_trace(), FOC, ns.TG_SELECTED_EDGE, iri(ghost)))
    v = assert_fails(report, f"Focus {FOC} selects {ghost}, but {ghost} is not in the trace")
    assert v.path == "tg:selectedEdge"
    assert len(report.violations) == 1, report.text()


def test_orphan_edge_selection():
    report = validate_trace(drop(graphrag_trace(), s=FOC, p=ns.TG_SELECTED_EDGE, o=SEL[1]))
    assert_fails(report, f"Edge selection {SEL[1]} is not selected by any Focus")
    assert_fails(report, f"Edge selection {SEL[1]} does not lead back to a tg:Question")


def test_violation_shows_triple_terms_readably():
    """A triple term used where an entity is expected is shown as <<( s p o )>>, not as an internal node."""
    quoted = triple_term(iri("http://example.org/e/a"), iri("http://example.org/r/b"), literal("c", language="en"))
    trace = add(graphrag_trace(), FOC, ns.TG_SELECTED_EDGE, quoted)
    report = validate_trace(trace)
    assert_fails(report, '<<( <http://example.org/e/a> <http://example.org/r/b> "c"@en )>>')


# ---------------------------------------------------------------- literal types and required values

def test_question_without_query():
    report = validate_trace(drop(graphrag_trace(), s=Q, p=ns.TG_QUERY))
    assert_fails(report, f"GraphRAG question {Q} has no tg:query")


def test_started_at_time_must_be_a_valid_datetime():
    trace = drop(graphrag_trace(), s=Q, p=ns.PROV_STARTED_AT_TIME)
    plain = validate_trace(add(trace, Q, ns.PROV_STARTED_AT_TIME, literal(WHEN)))
    assert_fails(plain, f"prov:startedAtTime of GraphRAG question {Q}", "expected a valid xsd:dateTime literal")
    ill_typed = validate_trace(add(trace, Q, ns.PROV_STARTED_AT_TIME, literal("yesterday", datatype=XSD + "dateTime")))
    assert_fails(ill_typed, '"yesterday"^^xsd:dateTime', "expected a valid xsd:dateTime literal")
    missing = validate_trace(trace)
    assert_fails(missing, f"GraphRAG question {Q} has no prov:startedAtTime")


def test_edge_count_rules():
    without = drop(graphrag_trace(), s=EXP, p=ns.TG_EDGE_COUNT)
    assert_fails(validate_trace(without), f"GraphRAG exploration {EXP} has no tg:edgeCount")
    as_text = validate_trace(add(without, EXP, ns.TG_EDGE_COUNT, literal("40")))
    assert_fails(as_text, f"tg:edgeCount of Exploration {EXP} is \"40\"", "expected a valid xsd:integer literal")
    negative = validate_trace(add(without, EXP, ns.TG_EDGE_COUNT, literal("-1", datatype=XSD + "integer")))
    assert_fails(negative, f"tg:edgeCount of Exploration {EXP}", "below the minimum 0")


def test_docrag_rules():
    e, s = uris.docrag_exploration_uri("d1"), uris.docrag_synthesis_uri("d1")
    assert_fails(validate_trace(drop(docrag_trace(), s=e, p=ns.TG_CHUNK_COUNT)),
                 f"DocumentRAG exploration {e} has no tg:chunkCount")
    assert_fails(validate_trace(drop(docrag_trace(), s=s, p=ns.TG_CONTENT)),
                 f"DocumentRAG synthesis {s} has no tg:content")
    literal_chunk = validate_trace(add(docrag_trace(), e, ns.TG_SELECTED_CHUNK, literal("urn:chunk:3")))
    assert_fails(literal_chunk, f"tg:selectedChunk of Exploration {e}", "expected an IRI")


def test_agent_rules():
    a1, final = uris.agent_iteration_uri("a1", 1), uris.agent_final_uri("a1")
    t1, o1 = uris.agent_thought_uri("a1", 1), uris.agent_observation_uri("a1", 1)
    for predicate, name in ((ns.TG_ACTION, "tg:action"), (ns.TG_ARGUMENTS, "tg:arguments")):
        assert_fails(validate_trace(drop(agent_trace(), s=a1, p=predicate)), f"Analysis {a1} has no {name}")
    assert_fails(validate_trace(drop(agent_trace(), s=final, p=ns.TG_DOCUMENT)),
                 f"Conclusion {final} has no answer: neither a tg:document link to it nor a tg:answer")
    twice = add(agent_trace(), final, ns.TG_DOCUMENT, iri(uris.agent_answer_uri("other")))
    assert_fails(validate_trace(twice), f"Conclusion {final} has more than one tg:document")
    assert_fails(validate_trace(drop(agent_trace(), s=o1, p=ns.TG_DOCUMENT)),
                 f"Observation {o1} has no tg:document link to its text in the librarian")
    assert_fails(validate_trace(drop(agent_trace(), s=t1, p=ns.TG_DOCUMENT)),
                 f"Thought {t1} has no tg:document link to its text in the librarian")
    not_a_thought = add(drop(agent_trace(), s=a1, p=ns.TG_THOUGHT), a1, ns.TG_THOUGHT, iri(o1))
    assert_fails(validate_trace(not_a_thought), f"tg:thought of Analysis {a1} is {o1}",
                 "neither text nor a tg:Thought")
    observed_twice = add(agent_trace(), o1, ns.PROV_WAS_DERIVED_FROM, iri(uris.agent_iteration_uri("a1", 2)))
    assert_fails(validate_trace(observed_twice), f"Observation {o1} has more than one prov:wasDerivedFrom")
    negative = add(drop(agent_trace(), s=a1, p=ns.TG_IN_TOKEN), a1, ns.TG_IN_TOKEN,
                   literal("-3", datatype=XSD + "integer"))
    assert_fails(validate_trace(negative), f"tg:inToken of Analysis {a1}", "below the minimum 0")
    # trace model v1: thought, observation and answer inline (the shapes still read them)
    v1 = [t for t in v1_traces() if t.p.value == ns.TG_OBSERVATION]
    assert v1 and all(t.o.datatype in ("", ns.XSD_STRING) for t in v1)


def test_grounding_and_edge_selection_v2_rules():
    no_question = drop(graphrag_trace(), s=GND, p=ns.PROV_WAS_DERIVED_FROM)
    assert_fails(validate_trace(no_question), f"Grounding {GND} has no prov:wasDerivedFrom link to its Question")
    from_exploration = add(no_question, GND, ns.PROV_WAS_DERIVED_FROM, iri(EXP))
    assert_fails(validate_trace(from_exploration), f"prov:wasDerivedFrom of Grounding {GND} is {EXP}",
                 "which is not a tg:Question")
    text_score = add(drop(graphrag_trace(), s=SEL[0], p=ns.TG_SCORE), SEL[0], ns.TG_SCORE, literal("high"))
    assert_fails(validate_trace(text_score), f"tg:score of Edge selection {SEL[0]}", "xsd:double")
    two_concepts = add(graphrag_trace(), SEL[1], ns.TG_CONCEPT, literal("Nobel"))
    assert_fails(validate_trace(two_concepts), f"Edge selection {SEL[1]} has more than one tg:concept")
    model_twice = add(graphrag_trace(), FOC, ns.TG_LLM_MODEL, literal("other-model"))
    assert_fails(validate_trace(model_twice), f"Focus {FOC} has more than one tg:llmModel")


def test_error_rules():
    err = uris.error_uri("s1")
    assert_fails(validate_trace(drop(error_trace(), s=err, p=ns.TG_ERROR_MESSAGE)),
                 f"Error {err} has no tg:errorMessage")
    assert_fails(validate_trace(drop(error_trace(), s=err, p=ns.PROV_WAS_DERIVED_FROM)),
                 f"Error {err} has no prov:wasDerivedFrom link to the last stage that completed")
    not_a_stage = add(drop(error_trace(), s=err, p=ns.PROV_WAS_DERIVED_FROM), err, ns.PROV_WAS_DERIVED_FROM,
                      iri("http://example.org/e/curie"))
    assert_fails(validate_trace(not_a_stage), f"Error {err} points at http://example.org/e/curie",
                 "is not in the trace")


def test_invalid_terms_are_reported_not_crashed_on():
    trace = graphrag_trace() + [Triple(iri("urn:x:bad iri"), iri(ns.RDFS_LABEL), literal("x"), G)]
    report = validate_trace(trace)
    v = assert_fails(report, "invalid triple about urn:x:bad iri", "forbidden character ' '")
    assert v.constraint == "Term"


def test_several_problems_are_all_listed():
    trace = drop(drop(graphrag_trace(), s=Q, p=ns.TG_QUERY), s=SEL[0], p=ns.TG_EDGE)
    report = validate_trace(trace)
    assert len(report.violations) == 2, report.text()
    assert report.text().splitlines() == [v.message for v in report.violations]
    assert str(report.violations[0]) == report.violations[0].message


# ---------------------------------------------------------------- the shipped shapes and the rdflib copy

def test_shapes_ship_with_the_package():
    text = resources.files("trustgraph_base.rdf").joinpath("shapes/trace.ttl").read_text("utf-8")
    assert "sh:NodeShape" in text
    assert len(load_shapes()) > 100


def test_rdflib_copy_describes_each_triple_term_once():
    from rdflib import RDF, URIRef

    trace = graphrag_trace() + graphrag_trace()  # duplicates collapse in an RDF graph
    graph, quoted = to_rdflib_graph(trace)
    assert len(quoted) == len(EDGES)
    node = next(iter(quoted))
    assert str(node).startswith("urn:triple:") and len(str(node)) == len("urn:triple:") + 64
    assert (node, RDF.type, URIRef(ns.TG_NS + "QuotedTriple")) in graph
    assert len(list(graph.objects(node, RDF.subject))) == 1
    # Blank nodes survive into the copy.
    g2, _ = to_rdflib_graph([Triple(blank("b1"), iri(ns.RDFS_LABEL), literal("x"))])
    assert len(g2) == 1


def test_importing_the_rdf_package_does_not_load_pyshacl():
    """Every service imports trustgraph_base.rdf for canonical terms; pyshacl loads only when validating."""
    import subprocess
    import sys

    code = "import sys, trustgraph_base.rdf; print('pyshacl' in sys.modules, 'rdflib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
