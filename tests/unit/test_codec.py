"""The wire codec: round trips of every schema dataclass, tolerant decoding, clear errors on bad input."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import types
import typing
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trustgraph_base.schema as schema_pkg
from trustgraph_base.codec import CodecError, decode, encode, from_json, to_json
from trustgraph_base.schema import (
    TERM_TYPES,
    AgentRequest,
    AgentStep,
    EmbeddingsResponse,
    GraphRagQuery,
    GraphRagResponse,
    LibrarianRequest,
    Term,
    TextCompletionRequest,
    Triple,
    Triples,
    iri,
    literal,
    triple_term,
)

pytestmark = pytest.mark.unit


def schema_dataclasses() -> list[type]:
    """Every dataclass defined in any module of trustgraph_base.schema (found, not listed by hand)."""
    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(schema_pkg.__path__, schema_pkg.__name__ + "."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


CLASSES = schema_dataclasses()

# ---------------------------------------------------------------- strategies from type hints

TEXT = st.text(max_size=20) | st.sampled_from(["é漢字😀", "\x00\x1f\x7f", '"quoted"\n\\', "<<( a b c )>>"])
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2**53, 2**53) | TEXT,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                           max_leaves=8)
GRAPHS = st.sampled_from(["", "urn:graph:retrieval", "urn:graph:source"])
# The codec carries any Term, valid or not (validation is the store's and builders' job), nested as it comes.
TERMS = st.recursive(
    st.builds(Term, type=st.sampled_from(TERM_TYPES), value=TEXT, datatype=TEXT | st.just(""),
              language=st.sampled_from(["", "en", "de-CH"])),
    lambda inner: st.builds(lambda s, p, o, g: Term(type="t", triple=Triple(s, p, o, g)), inner, inner, inner, GRAPHS),
    max_leaves=5)


def strategy_for(tp: Any) -> st.SearchStrategy:
    """A strategy for values of a type annotation as the schema uses them."""
    if tp is str:
        return TEXT
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(-2**63, 2**63 - 1)
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if tp is bytes:
        return st.binary(max_size=40)
    if tp is Any:
        return JSON_VALUES
    if tp is Term:
        return TERMS
    if tp is Triple:
        return st.builds(Triple, TERMS | st.none(), TERMS | st.none(), TERMS | st.none(), GRAPHS)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        assert len(inner) == 1, tp
        return st.none() | strategy_for(inner[0])
    if origin is list:
        return st.lists(strategy_for(args[0]), max_size=2)
    if origin is dict:
        assert args[0] is str, tp
        return st.dictionaries(TEXT, strategy_for(args[1]), max_size=2)
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return st.builds(tp, **{f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(tp) if f.init})
    raise AssertionError(f"no strategy for {tp!r}: extend the test when the schema grows a new kind of field")


def wrong_value(tp: Any) -> Any:
    """A JSON value that is not of type ``tp`` (None means: no wrong value exists, e.g. for Any)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
        origin = typing.get_origin(tp)
    if tp is Any:
        return None
    if tp is str or tp is bytes:
        return 5
    if tp in (int, float, bool):
        return "5"
    if origin is list:
        return {"not": "a list"}
    return ["not", "an", "object"]  # dicts and dataclasses


# ---------------------------------------------------------------- discovery

def test_discovery_finds_the_whole_schema():
    names = {c.__name__ for c in CLASSES}
    assert len(CLASSES) >= 30
    for expected in ("Term", "Triple", "Triples", "Metadata", "Error", "GraphRagQuery", "GraphRagResponse",
                     "DocumentRagResponse", "AgentRequest", "AgentResponse", "TriplesQueryRequest",
                     "LibrarianRequest", "TextCompletionRequest", "EmbeddingsResponse", "PromptResponse", "Chunk"):
        assert expected in names
    exported = {getattr(schema_pkg, n) for n in dir(schema_pkg) if dataclasses.is_dataclass(getattr(schema_pkg, n))}
    assert exported <= set(CLASSES)


# ---------------------------------------------------------------- round trips

@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_schema_class_round_trips(cls, data):
    obj = data.draw(strategy_for(cls))
    wire = encode(obj)
    assert isinstance(wire, bytes)
    assert decode(cls, wire) == obj
    assert decode(cls, wire.decode("utf-8")) == obj
    assert from_json(cls, to_json(obj)) == obj


def test_nested_triple_terms_and_non_ascii_round_trip():
    edge = triple_term(iri("http://example.org/é"), iri("http://example.org/p"),
                       triple_term(iri("urn:x:漢字"), iri("urn:x:p"), literal("😀 \"q\"\n", language="ja")))
    msg = Triples(triples=[Triple(iri("urn:trustgraph:prov:edge:s:0"), iri("https://trustgraph.ai/ns/edge"), edge,
                                  "urn:graph:retrieval")])
    wire = encode(msg)
    assert "漢字".encode() in wire and "😀".encode() in wire  # UTF-8, not \u escapes
    back = decode(Triples, wire)
    assert back == msg
    assert back.triples[0].o.triple.o.triple.o.language == "ja"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_defaults_are_omitted_on_the_wire(cls):
    def only_empty_objects(value) -> bool:
        return isinstance(value, dict) and all(only_empty_objects(v) for v in value.values())

    wire = encode(cls())
    assert only_empty_objects(orjson.loads(wire)), wire  # e.g. b'{}' or b'{"metadata":{}}'
    assert decode(cls, wire) == cls()
    assert decode(cls, b"{}") == cls()


# ---------------------------------------------------------------- tolerant decoding

@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_unknown_fields_are_ignored(cls):
    assert decode(cls, b'{"no_such_field": 1, "another": {"nested": [1, 2]}, "": null}') == cls()


def test_missing_fields_take_defaults():
    q = decode(GraphRagQuery, b'{"query": "Who?"}')
    assert q == GraphRagQuery(query="Who?")
    assert (q.user, q.collection, q.entity_limit, q.streaming) == ("trustgraph", "default", 0, False)
    old_agent_request = decode(AgentRequest, b'{"question": "Plan a trip", "history": [{"thought": "t"}]}')
    assert old_agent_request.collection == "default" and old_agent_request.session_id == ""
    assert old_agent_request.history == [AgentStep(thought="t")]
    assert decode(Term, b'{"value": "http://x"}') == iri("http://x")


def test_explicit_nulls_for_optional_fields():
    assert decode(GraphRagResponse, b'{"error": null}').error is None
    assert decode(TextCompletionRequest, b'{"temperature": null}').temperature is None
    assert decode(TextCompletionRequest, b'{"temperature": 1}').temperature == 1.0


# ---------------------------------------------------------------- wrong types name the field

def _field_cases():
    for cls in CLASSES:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            bad = wrong_value(hints[f.name])
            if bad is not None:
                yield pytest.param(cls, f.name, bad, id=f"{cls.__name__}.{f.name}")


@pytest.mark.parametrize("cls, name, bad", list(_field_cases()))
def test_wrong_type_names_the_field(cls, name, bad):
    with pytest.raises(CodecError) as err:
        decode(cls, orjson.dumps({name: bad}))
    assert err.value.path == f"{cls.__name__}.{name}"
    assert str(err.value).startswith(f"{cls.__name__}.{name}: expected")


@pytest.mark.parametrize("wire, path", [
    (b'{"explain_triples": [{"s": {"value": "x"}}, {"s": {"value": 5}}]}',
     "GraphRagResponse.explain_triples[1].s.value"),
    (b'{"explain_triples": [{"o": {"triple": {"o": {"triple": {"p": {"type": []}}}}}}]}',
     "GraphRagResponse.explain_triples[0].o.triple.o.triple.p.type"),
    (b'{"explain_triples": [{"g": null}]}', "GraphRagResponse.explain_triples[0].g"),
    (b'{"error": {"message": 1}}', "GraphRagResponse.error.message"),
    (b'{"explain_triples": {"0": {}}}', "GraphRagResponse.explain_triples"),
])
def test_nested_wrong_types_name_the_path(wire, path):
    with pytest.raises(CodecError) as err:
        decode(GraphRagResponse, wire)
    assert err.value.path == path


def test_dict_values_and_list_items_name_their_key_or_index():
    with pytest.raises(CodecError) as err:
        decode(AgentRequest, b'{"history": [{}, {"arguments": {"q": "ok", "k": 7}}]}')
    assert err.value.path == "AgentRequest.history[1].arguments['k']"
    with pytest.raises(CodecError) as err:
        decode(EmbeddingsResponse, b'{"vectors": [[1.0, 2.0], [3.0, "x"]]}')
    assert err.value.path == "EmbeddingsResponse.vectors[1][1]"


def test_bool_is_not_an_int_and_int_is_not_a_bool():
    with pytest.raises(CodecError, match="expected int, got bool"):
        decode(GraphRagQuery, b'{"entity_limit": true}')
    with pytest.raises(CodecError, match="expected bool, got int"):
        decode(GraphRagQuery, b'{"streaming": 1}')


def test_encoding_wrong_types_names_the_field():
    with pytest.raises(CodecError) as err:
        encode(Triples(triples=[Triple(s=iri("urn:x:ok")), Triple(s=Term(value=5))]))
    assert err.value.path == "Triples.triples[1].s.value"
    with pytest.raises(CodecError, match="GraphRagQuery.entity_limit: expected int"):
        encode(GraphRagQuery(entity_limit="10"))
    with pytest.raises(CodecError, match="expected a dataclass instance"):
        encode({"query": "x"})


# ---------------------------------------------------------------- malformed input

@pytest.mark.parametrize("wire", [b"not json", b"{", b"", b"\xff\xfe\x00", b"{'single': 'quotes'}", b'{"a": NaN}',
                                  b'{"query": "x",}', b"\x00"])
def test_non_json_is_a_codec_error(wire):
    with pytest.raises(CodecError, match="not valid JSON for GraphRagQuery"):
        decode(GraphRagQuery, wire)


@pytest.mark.parametrize("wire, got", [(b"[]", "list"), (b'[{"query": "x"}]', "list"), (b"null", "NoneType"),
                                       (b'"text"', "str"), (b"42", "int"), (b"true", "bool")])
def test_top_level_non_objects_are_rejected(wire, got):
    with pytest.raises(CodecError, match=f"expected object for GraphRagQuery, got {got}"):
        decode(GraphRagQuery, wire)


def test_huge_nesting_is_a_codec_error_not_a_crash():
    with pytest.raises(CodecError, match="not valid JSON"):
        decode(Term, b"[" * 100_000 + b"]" * 100_000)
    deep = b'{"triple": {"o": ' * 600 + b"{}" + b"}}" * 600
    with pytest.raises(CodecError, match="nested too deeply|depth limit"):
        decode(Term, deep)
    term = iri("http://x/leaf")
    for _ in range(3000):
        term = triple_term(iri("http://x/s"), iri("http://x/p"), term)
    with pytest.raises(CodecError, match="nested too deeply|Recursion limit"):
        encode(term)


def test_moderate_nesting_round_trips():
    term = iri("http://x/leaf")
    for _ in range(50):
        term = triple_term(iri("http://x/s"), iri("http://x/p"), term)
    assert decode(Term, encode(term)) == term


def test_non_finite_floats_are_refused_not_turned_into_null():
    with pytest.raises(CodecError, match=r"TextCompletionRequest.temperature: expected a finite float, got inf"):
        encode(TextCompletionRequest(temperature=float("inf")))
    with pytest.raises(CodecError, match=r"EmbeddingsResponse.vectors\[0\]\[1\]: expected a finite float, got nan"):
        encode(EmbeddingsResponse(vectors=[[1.0, float("nan")]]))
    with pytest.raises(CodecError, match="not valid JSON"):
        decode(TextCompletionRequest, b'{"temperature": 1e999}')


def test_out_of_range_ints_and_bad_text_are_codec_errors():
    with pytest.raises(CodecError, match="64-bit"):
        encode(GraphRagQuery(entity_limit=2**70))
    with pytest.raises(CodecError):
        decode(GraphRagQuery, b'{"entity_limit": 1180591620717411303424}')
    with pytest.raises(CodecError, match="cannot encode GraphRagQuery"):
        encode(GraphRagQuery(query="unpaired \ud800 surrogate"))


def test_bytes_are_base64_and_checked():
    req = LibrarianRequest(operation="add-document", content=b"\x00\xffbinary")
    wire = encode(req)
    assert b'"content":"AP9iaW5hcnk="' in wire
    assert decode(LibrarianRequest, wire) == req
    with pytest.raises(CodecError, match="LibrarianRequest.content: invalid base64"):
        decode(LibrarianRequest, b'{"content": "not base64!"}')


def test_hostile_text_travels_verbatim():
    """The codec is no validator: it carries any text exactly, and JSON escaping keeps it one value."""
    from trustgraph_base.rdf.terms import TermError, validate_term

    texts = ["".join(chr(c) for c in range(32)) + "\x7f", '"> ; <x> <y> <z> .', '{"value": "injected"}',
             "x" * 5_000_000, "é漢字😀\u2028\ufeff"]
    for text in texts:
        msg = Triples(triples=[Triple(iri("urn:x:s"), iri("urn:x:p"), literal(text))])
        assert decode(Triples, encode(msg)) == msg
    bad_iri = Triples(triples=[Triple(iri("urn:x:has space"), iri("urn:x:p"), literal("o"))])
    back = decode(Triples, encode(bad_iri))
    assert back == bad_iri
    with pytest.raises(TermError, match="forbidden character ' '"):  # ... and the receiver's validation says why
        validate_term(back.triples[0].s)
