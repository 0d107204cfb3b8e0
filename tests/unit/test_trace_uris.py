"""Reading trace URIs back (``parse_trace_uri`` and what is built on it) the way they are built.

The reference readers below are the hand-written ones this parser replaces (the retention regex, the
CLI's check of a trace argument, its agent-parent lookup, its final-stage look-up, the agent's
filter of forwarded sub-query events), the retention regex extended by the one stage URI trace
model v2 added outside the docrag and agent suffixes (``urn:trustgraph:prov:grounding:{uuid}``);
on every URI they must agree with the parser.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustgraph_base.provenance import uris
from trustgraph_base.provenance.uris import TRACE_URI_FORMATS, TraceUri, parse_trace_uri

pytestmark = pytest.mark.unit

SID = "3f2b9c1e-0000-4000-8000-000000000001"

# ---------------------------------------------------------------- the readers the parser replaces
_SESSION = r"[A-Za-z0-9._\-]+"
_OLD_TRACE_NODE = re.compile(
    rf"urn:trustgraph:(?:question:(?P<q>{_SESSION})"
    rf"|prov:(?:grounding|exploration|focus|synthesis|error):(?P<stage>{_SESSION})"
    rf"|prov:edge:(?P<edge>{_SESSION}):[0-9]+"
    rf"|answer:(?P<answer>{_SESSION})"
    rf"|(?P<kind>docrag|agent):(?P<sid>{_SESSION})(?:/.*)?)\Z", re.DOTALL)
_OLD_CLI_TRACE_URI = re.compile(r"urn:trustgraph:(question:[0-9A-Za-z\-]{1,128}|docrag:[0-9A-Za-z\-]{1,128}"
                                r"|agent:[A-Za-z0-9][A-Za-z0-9._\-]{0,127})\Z")


def old_trace_root_of(uri: str) -> str:
    m = _OLD_TRACE_NODE.match(uri)
    if m is None:
        return ""
    session = m.group("q") or m.group("stage") or m.group("edge") or m.group("answer")
    if session:
        return f"urn:trustgraph:question:{session}"
    return f"urn:trustgraph:{m.group('kind')}:{m.group('sid')}"


def old_answer_uri_of(question: str) -> str:
    if old_trace_root_of(question) != question or not question:  # it named "/answer" the answer of ""
        return ""
    kind, _, session = question.removeprefix("urn:trustgraph:").partition(":")
    if kind == "question":
        return f"urn:trustgraph:answer:{session}"
    if kind == "docrag":
        return f"urn:trustgraph:docrag:{session}/answer"
    return f"{question}/answer"


def old_forwarded_sub_question(uri: str) -> bool:
    return uri.startswith(("urn:trustgraph:question:", "urn:trustgraph:docrag:")) and "/" not in uri.split(":", 3)[-1]


# URIs built from the pieces the scheme is made of, so that most examples are close to real ones
_PIECES = st.sampled_from(["urn:trustgraph:", "question:", "prov:", "grounding:", "exploration:", "focus:",
                           "synthesis:", "error:", "edge:", "answer:", "docrag:", "agent:", "/", "/i", "/final",
                           "/error", "/answer", "/grounding", "/exploration", "/synthesis", "/thought", "/observation",
                           ":", "0", "12", "i", SID, "s.1_x-y", "\n", " ", "é", "~"])
URIS = st.one_of(st.lists(_PIECES, max_size=8).map("".join), st.text(max_size=40),
                 st.builds(lambda a, b: "urn:trustgraph:" + a + b, _PIECES, st.text(max_size=20)))
SESSIONS = st.from_regex(r"[A-Za-z0-9._\-]{1,40}", fullmatch=True)


# ---------------------------------------------------------------- building and reading agree
@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(TRACE_URI_FORMATS)), SESSIONS, st.integers(1, 10 ** 30))
def test_every_uri_the_scheme_builds_reads_back_as_what_it_names(kind_stage, session, n):
    kind, stage = kind_stage
    index = n if "{i}" in TRACE_URI_FORMATS[kind_stage] else None
    uri = uris.trace_uri(kind, session, stage, index)
    assert parse_trace_uri(uri) == TraceUri(kind, session, stage, index)
    assert parse_trace_uri(uri).question == uris.trace_uri(kind, session, "question")


def test_the_builders_name_exactly_the_documented_uris():
    assert uris.question_uri(SID) == f"urn:trustgraph:question:{SID}"
    assert uris.edge_selection_uri(SID, 3) == f"urn:trustgraph:prov:edge:{SID}:3"
    assert uris.docrag_synthesis_uri(SID) == f"urn:trustgraph:docrag:{SID}/synthesis"
    assert uris.agent_iteration_uri("run-1", 2) == "urn:trustgraph:agent:run-1/i2"
    assert uris.agent_final_uri("run-1") == "urn:trustgraph:agent:run-1/final"
    assert uris.grounding_uri(SID) == f"urn:trustgraph:prov:grounding:{SID}"
    assert uris.docrag_grounding_uri(SID) == f"urn:trustgraph:docrag:{SID}/grounding"
    assert uris.agent_thought_uri("run-1", 2) == "urn:trustgraph:agent:run-1/i2/thought"
    assert uris.agent_observation_uri("run-1", 2) == "urn:trustgraph:agent:run-1/i2/observation"
    with pytest.raises(ValueError):
        uris.agent_observation_uri("run-1", 0)
    with pytest.raises(ValueError):
        uris.trace_uri("docrag", SID, "focus")
    with pytest.raises(ValueError):
        uris.trace_uri("graphrag", SID, "edge")


def test_a_uri_is_read_into_kind_session_stage_and_index():
    assert parse_trace_uri(f"urn:trustgraph:prov:edge:{SID}:7") == TraceUri("graphrag", SID, "edge", 7)
    assert parse_trace_uri("urn:trustgraph:agent:run-1/i12") == TraceUri("agent", "run-1", "analysis", 12)
    assert parse_trace_uri("urn:trustgraph:agent:run-1/final") == TraceUri("agent", "run-1", "conclusion")
    assert parse_trace_uri(f"urn:trustgraph:docrag:{SID}/answer") == TraceUri("docrag", SID, "answer")
    assert parse_trace_uri(f"urn:trustgraph:prov:grounding:{SID}") == TraceUri("graphrag", SID, "grounding")
    assert parse_trace_uri(f"urn:trustgraph:docrag:{SID}/grounding") == TraceUri("docrag", SID, "grounding")
    assert parse_trace_uri("urn:trustgraph:agent:run-1/i3/thought") == TraceUri("agent", "run-1", "thought", 3)
    assert parse_trace_uri("urn:trustgraph:agent:run-1/i3/observation") == TraceUri("agent", "run-1", "observation",
                                                                                     3)
    assert parse_trace_uri("urn:trustgraph:agent:run-1/i3/other") == TraceUri("agent", "run-1", "")
    # a suffix the scheme does not define: no stage, but still named after that trace
    assert parse_trace_uri("urn:trustgraph:agent:run-1/i0") == TraceUri("agent", "run-1", "")
    assert parse_trace_uri(f"urn:trustgraph:docrag:{SID}/") == TraceUri("docrag", SID, "")
    # an edge number too long for an int still names the trace's edge
    assert parse_trace_uri(f"urn:trustgraph:prov:edge:{SID}:{'9' * 5000}") == TraceUri("graphrag", SID, "edge")
    for other in ("", "urn:trustgraph:question:", f"urn:trustgraph:question:{SID}/x", "urn:chunk:1",
                  f"urn:trustgraph:prov:edge:{SID}", f"urn:trustgraph:question:{SID}\n", None, 7):
        assert parse_trace_uri(other) is None, other


# ---------------------------------------------------------------- the readers it replaces agree with it
@settings(max_examples=800, deadline=None)
@given(URIS)
def test_trace_root_and_answer_uri_read_every_uri_as_the_retention_regex_did(uri):
    assert uris.trace_root_of(uri) == old_trace_root_of(uri)
    assert uris.answer_uri_of(uri) == old_answer_uri_of(uri)


@settings(max_examples=800, deadline=None)
@given(URIS)
def test_a_question_uri_is_accepted_exactly_as_the_cli_regex_did(uri):
    try:
        uris.check_question_uri(uri)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == bool(_OLD_CLI_TRACE_URI.match(uri)), uri


@settings(max_examples=800, deadline=None)
@given(URIS)
def test_forwarded_sub_questions_are_the_ones_the_agent_forwarded(uri):
    trace = parse_trace_uri(uri)
    # any text after "question:" without "/" is not enough: the trace scheme names only sessions
    # of letters, digits and "._-", the only ones a GraphRAG or DocumentRAG service makes
    if re.fullmatch(r"urn:trustgraph:(question|docrag):[A-Za-z0-9._\-]+", uri):
        assert (trace is not None and trace.stage == "question" and trace.kind in ("graphrag", "docrag")) \
            == old_forwarded_sub_question(uri)


def test_the_documents_a_trace_stores_name_their_trace():
    assert uris.document_owner(f"urn:trustgraph:answer:{SID}") == f"urn:trustgraph:question:{SID}"
    assert uris.document_owner(f"urn:trustgraph:docrag:{SID}/answer") == f"urn:trustgraph:docrag:{SID}"
    for doc in ("urn:trustgraph:agent:run-1/answer", "urn:trustgraph:agent:run-1/i2/thought",
                "urn:trustgraph:agent:run-1/i12/observation"):
        assert uris.document_owner(doc) == "urn:trustgraph:agent:run-1", doc
    # stages, other suffixes and documents of no trace are no trace's documents
    for doc in (f"urn:trustgraph:question:{SID}", f"urn:trustgraph:prov:synthesis:{SID}",
                "urn:trustgraph:agent:run-1/i2", "urn:trustgraph:agent:run-1/i2/thoughts",
                "urn:trustgraph:agent:run-1/i0/thought", f"urn:trustgraph:docrag:{SID}/thought",
                "urn:document:report", "urn:chunk:1", ""):
        assert uris.document_owner(doc) == "", doc


def test_final_stage_uris_of_every_kind_of_question():
    assert uris.final_stage_uris(f"urn:trustgraph:question:{SID}") == (
        f"urn:trustgraph:prov:synthesis:{SID}", f"urn:trustgraph:prov:error:{SID}")
    assert uris.final_stage_uris(f"urn:trustgraph:docrag:{SID}") == (
        f"urn:trustgraph:docrag:{SID}/synthesis", f"urn:trustgraph:docrag:{SID}/error")
    assert uris.final_stage_uris("urn:trustgraph:agent:run-1") == (
        "urn:trustgraph:agent:run-1/final", "urn:trustgraph:agent:run-1/error")
    assert uris.final_stage_uris(f"urn:trustgraph:prov:focus:{SID}") == ("", "")
    assert uris.final_stage_uris("urn:chunk:1") == ("", "")
