"""Hostile input, pure logic: the wire codec, names, the selection and ReAct parsers, RDF export, the CLI.

Every case must end in a clear refusal of the documented kind (``CodecError``, ``InvalidName``,
``ReactParseError``, a counted drop, a CLI exit 2 with one ``Error:`` line) or a correct result;
never another exception, a traceback, a hang, or output that means something else than the
input (an injected triple, console markup).  Hypothesis runs a bounded number of examples;
the totals are printed at the end of the session (``fuzz cases run``).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
import re
from unittest import mock

import orjson
import pytest
from fuzz_inputs import ATTACKS, JSON, NAME_ATTACKS, count, hostile
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import trustgraph_base.schema as schema_pkg
from trustgraph_base.codec import CodecError, decode, encode
from trustgraph_cli import common

pytestmark = pytest.mark.unit



def fuzz(examples: int) -> settings:
    """A bounded number of examples, no per-example deadline (the machine is shared)."""
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def schema_classes() -> list[type]:
    found = {}
    for info in pkgutil.iter_modules(schema_pkg.__path__, schema_pkg.__name__ + "."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__:
                found[obj.__qualname__] = obj
    return [found[k] for k in sorted(found)]


CLASSES = schema_classes()


# ------------------------------------------------------------------------------------------ codec

@fuzz(600)
@given(cls=st.sampled_from(CLASSES), payload=st.one_of(st.binary(max_size=300), JSON.map(orjson.dumps)))
def test_codec_decodes_any_bytes_or_refuses_with_codec_error(cls, payload):
    count("codec: arbitrary bytes and JSON")
    try:
        obj = decode(cls, payload)
    except CodecError as e:
        assert str(e) and "\n" not in str(e).strip()
        return
    assert isinstance(obj, cls)
    assert decode(cls, encode(obj)) == obj  # whatever decodes, re-encodes to the same thing


@fuzz(300)
@given(data=st.data())
def test_codec_survives_mutated_messages(data):
    """Valid messages with bytes flipped, cut or repeated: decoded as something valid, or refused."""
    count("codec: mutated valid messages")
    cls = data.draw(st.sampled_from(CLASSES))
    try:
        wire = encode(data.draw(hostile(cls)))
    except CodecError:
        assume(False)
    cut = data.draw(st.integers(0, len(wire)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, max(0, len(wire) - 1)), st.integers(0, 255)), max_size=4))
    mutated = bytearray(wire[:cut] + wire[cut:] * data.draw(st.integers(1, 2)))
    for pos, value in flips:
        if pos < len(mutated):
            mutated[pos] = value
    try:
        assert isinstance(decode(cls, bytes(mutated)), cls)
    except CodecError:
        pass


@pytest.mark.parametrize("payload", [b"[" * 200_000 + b"]" * 200_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
                                     b'{"triples": [' + b'{"o": {"triple": {"o":' * 5000 + b"{}" + b"}}" * 5000
                                     + b"]}"])
def test_codec_refuses_absurd_nesting_without_crashing(payload):
    count("codec: absurd nesting")
    from trustgraph_base.schema import Triples

    with pytest.raises(CodecError):
        decode(Triples, payload)


# ------------------------------------------------------------------------------------------ names

@fuzz(800)
@given(name=NAME_ATTACKS, other=NAME_ATTACKS)
def test_user_and_collection_names_are_validated_and_storage_names_safe(tmp_path_factory, name, other):
    """A name is refused, or maps to a storage name that cannot inject CQL or leave $TG_HOME."""
    count("names: users and collections")
    from trustgraph_base.store.names import InvalidName, check_collection, check_user, storage_name, user_file

    for check in (check_user, check_collection):
        try:
            check(name)
        except InvalidName as e:
            assert "invalid" in str(e)
            continue
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.@\-]{0,63}", name)
    try:
        check_user(name)
    except InvalidName:
        return
    ks = storage_name("tg", name)
    assert re.fullmatch(r"[a-z0-9_]{1,48}", ks)
    home = tmp_path_factory.getbasetemp() / "names-home"
    path = user_file("triples", name, home=home)
    assert path.resolve().parent == (home / "triples").resolve() and path.name == f"{ks}.sqlite"
    try:
        check_user(other)
    except InvalidName:
        return
    assert (storage_name("tg", other) == ks) == (other == name)  # injective: two users never share a keyspace


# ------------------------------------------------------------------------------------------ LLM output parsers

def _edges(n: int):
    from trustgraph_base.schema import Triple, iri, literal

    # labels that collide on purpose: two "Paris" nodes, two literals that print alike
    out = []
    for i in range(n):
        o = iri(f"urn:x:paris-{i % 2}") if i % 3 else literal("1", datatype="http://www.w3.org/2001/XMLSchema#integer")
        out.append(Triple(iri(f"urn:x:e{i % 4}"), iri(f"urn:x:p{i % 2}"), o))
    return out


_LABELS = {"urn:x:paris-0": "Paris", "urn:x:paris-1": "Paris", "urn:x:e0": "A", "urn:x:e1": "A"}


@fuzz(500)
@given(data=st.data(), n=st.integers(0, 12))
def test_edge_selection_from_arbitrary_llm_output(data, n):
    """Whatever the LLM writes, only real edges are selected, each once, with their original terms; the rest is
    counted as dropped."""
    count("selection: arbitrary LLM output")
    from trustgraph_flow.model.prompts.jsonl import parse_jsonl
    from trustgraph_flow.retrieval.graph_rag.labels import get_labelgraph
    from trustgraph_flow.retrieval.graph_rag.selection import resolve_selection

    graph = get_labelgraph(_edges(n), _LABELS)
    assert len(set(graph.ids)) == len(graph.ids) == len(graph.uri_map)
    line = st.one_of(
        st.builds(lambda i, r: json.dumps({"id": i, "reasoning": r}),
                  st.sampled_from(graph.ids or ["00000000"]) | st.text(max_size=12), st.text(max_size=30)),
        st.builds(lambda v: json.dumps(v), JSON), st.sampled_from(["```jsonl", "```", "", "  ", "Sure! Here you go:"]),
        st.sampled_from(ATTACKS), st.text(max_size=60))
    text = "\n".join(data.draw(st.lists(line, max_size=15)))
    limit = data.draw(st.integers(0, 5))
    parsed = parse_jsonl(text)
    result = resolve_selection(parsed.objects, graph.uri_map, limit, parser_dropped=parsed.dropped,
                               parser_reasons=parsed.reasons)
    chosen = [s.edge_id for s in result.selections]
    assert len(chosen) == len(set(chosen))
    assert all(graph.uri_map[s.edge_id] == s.edge for s in result.selections)
    assert not limit or len(chosen) <= limit
    assert len(result.selections) + result.dropped == len(parsed.objects) + parsed.dropped


@fuzz(400)
@given(parts=st.lists(st.one_of(st.sampled_from(["Thought:", "Action:", "Args:", "Final Answer:", "Observation:",
                                                 "Action Input:", "```json", "```", "knowledge-query", "{", "}",
                                                 '{"question": ', '"x"}', "\n", "**Action**:", "> Thought:"]),
                                st.sampled_from(ATTACKS), st.text(max_size=20)), max_size=30))
def test_react_parser_on_arbitrary_llm_output(parts):
    count("react: arbitrary LLM output")
    from trustgraph_flow.agent.react.parser import FinalAnswer, ReactParseError, ReactStep, parse_react

    try:
        step = parse_react("".join(parts))
    except ReactParseError as e:
        assert "Reply either with" in str(e)  # the message tells the model how to answer
        return
    if isinstance(step, ReactStep):
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:\-]*", step.action) and isinstance(step.arguments, dict)
    else:
        assert isinstance(step, FinalAnswer) and step.answer.strip()


def test_react_parser_refuses_absurdly_nested_arguments():
    count("react: absurd nesting")
    from trustgraph_flow.agent.react.parser import ReactParseError, parse_react

    with pytest.raises(ReactParseError, match="not valid JSON"):
        parse_react("Thought: t\nAction: knowledge-query\nArgs: " + '{"a": ' * 100_000 + "1" + "}" * 100_000)


# ------------------------------------------------------------------------------------------ RDF export

@fuzz(200)
@given(query=st.one_of(st.sampled_from(ATTACKS), st.text(max_size=200)),
       label=st.one_of(st.sampled_from(ATTACKS), st.text(max_size=100)),
       reasoning=st.one_of(st.sampled_from(ATTACKS), st.text(max_size=100)))
def test_turtle_and_trig_exports_cannot_be_injected(query, label, reasoning):
    """Questions, labels and reasons with Turtle syntax in them come back as the same literals, nothing more."""
    count("rdf: Turtle injection via labels and queries")
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.provenance.triples import EdgeSelection, focus_triples, question_triples
    from trustgraph_base.rdf.export import parse, serialize
    from trustgraph_base.rdf.terms import TermError, serialize_term, validate_term
    from trustgraph_base.schema import Triple, iri, literal

    try:
        validate_term(literal(query))
        validate_term(literal(label))
        validate_term(literal(reasoning))
    except TermError:
        assume(False)  # e.g. lone surrogates: refused before they can reach a store
    q = "urn:trustgraph:question:0f8fad5b-d9cb-469f-a165-70867728950e"
    edge = Triple(iri("urn:x:curie"), iri("urn:x:discovered"), literal(label))
    triples = question_triples(q, query) + focus_triples(
        "urn:trustgraph:prov:focus:0f8fad5b-d9cb-469f-a165-70867728950e",
        "urn:trustgraph:prov:exploration:0f8fad5b-d9cb-469f-a165-70867728950e",
        [EdgeSelection(edge=edge, reasoning=reasoning, edge_id="abcd1234")], "0f8fad5b-d9cb-469f-a165-70867728950e")
    triples.append(Triple(iri("urn:x:curie"), iri(ns.RDFS_LABEL), literal(label), ns.GRAPH_RETRIEVAL))

    def keys(ts):
        return {(serialize_term(t.s), serialize_term(t.p), serialize_term(t.o)) for t in ts}

    for fmt in ("turtle", "trig"):
        back = parse(serialize(triples, fmt).encode("utf-8"), fmt)
        assert keys(back) == keys(triples)


# ------------------------------------------------------------------------------------------ the CLI

def _commands():
    from trustgraph_cli import explain, invoke, library, load

    return {"tg-list-explain-traces": explain.list_traces, "tg-show-explain-trace": explain.show_trace,
            "tg-delete-explain-trace": explain.delete_trace, "tg-prune-explain-traces": explain.prune_traces,
            "tg-invoke-graph-rag": invoke.graph_rag, "tg-invoke-document-rag": invoke.document_rag,
            "tg-invoke-agent": invoke.agent, "tg-load-document": load.load_document,
            "tg-load-turtle": load.load_turtle, "tg-show-extraction-provenance": library.show_extraction_provenance,
            "tg-show-document-hierarchy": library.show_document_hierarchy,
            "tg-show-library-documents": library.show_library_documents,
            "tg-remove-library-document": library.remove_library_document, "tg-quickstart": load.quickstart}


COMMANDS = _commands()


def _tokens(command) -> st.SearchStrategy:
    """Argument tokens: the command's own options, attack strings, edge values, noise (no NUL: argv cannot hold it)."""
    options = [o for p in command.params for o in getattr(p, "opts", []) if o.startswith("-")]
    return st.one_of(st.sampled_from(options or ["--help"]), st.sampled_from(ATTACKS),
                     st.sampled_from(["0", "-1", "99999999999", "1e9", "nan", "30d", "urn:trustgraph:question:x",
                                      "urn:trustgraph:question:0f8fad5b-d9cb-469f-a165-70867728950e", "json",
                                      "turtle", "table", "graphrag"]),
                     st.text(max_size=15)).map(lambda t: t.replace("\x00", ""))


def _exit_in_process(code: int) -> None:
    if code:
        raise SystemExit(code)


@fuzz(40)
@given(data=st.data())
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_cli_with_arbitrary_arguments(name, data, tmp_path_factory):
    """Any argument list: exit 0-3, no traceback, one ``Error:`` line on failure.

    Every invocation ends with ``--pulsar-url`` pointing at a closed loopback port, so one whose
    arguments are valid fails fast (exit 3) instead of starting a stack; the arguments are
    checked before that.
    """
    count(f"cli: arbitrary arguments ({name})")
    from click.testing import CliRunner

    command = COMMANDS[name]
    args = data.draw(st.lists(_tokens(command), max_size=7)) + ["--pulsar-url", "pulsar://127.0.0.1:9"]
    home = tmp_path_factory.getbasetemp() / "cli-fuzz-home"
    # Drawn options can undo the closing --pulsar-url (``--home --pulsar-url URL`` makes the URL a positional
    # argument, ``--pulsar-url ''`` means embedded), so an example may start the embedded stack: in this
    # process the command must then end the way it does under pytest, not with the hard exit that a
    # console script uses once native threads run (it would end the test run).
    with mock.patch.object(common, "_exit", _exit_in_process):
        result = CliRunner().invoke(command, args, env={"TG_HOME": str(home), "PULSAR_URL": None, "TG_DEBUG": None},
                                    catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{name} {args!r} raised {result.exception!r}") from result.exception
    output = result.stdout + result.stderr
    assert "Traceback" not in output, (args, output)
    assert result.exit_code in (0, 1, 2, 3), (args, result.exit_code, output)
    if result.exit_code != 0:
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1, (args, result.stderr)
