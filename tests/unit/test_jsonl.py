"""parse_jsonl: keep every valid object, count and explain every dropped line, never raise."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustgraph_flow.model.prompts import get_template, parse_jsonl, require_strings

pytestmark = pytest.mark.unit

EDGE_VALIDATOR = get_template("kg-edge-selection").validate


def test_plain_jsonl_is_parsed_in_order():
    text = '{"id": "e1", "reasoning": "a"}\n{"id": "e2", "reasoning": "b"}\n'
    result = parse_jsonl(text, EDGE_VALIDATOR)
    assert [o["id"] for o in result.objects] == ["e1", "e2"]
    assert result.dropped == 0 and result.reasons == []


@pytest.mark.parametrize("fence", ["```", "```json", "```jsonl", "``` JSON", "  ```python"])
def test_code_fences_with_any_tag_are_stripped(fence):
    text = f'{fence}\n{{"id": "e1", "reasoning": "a"}}\n```\n'
    result = parse_jsonl(text, EDGE_VALIDATOR)
    assert result.objects == [{"id": "e1", "reasoning": "a"}]
    assert result.dropped == 0


def test_blank_lines_and_crlf_are_skipped_silently():
    text = '\r\n{"id": "e1", "reasoning": "a"}\r\n\r\n   \n{"id": "e2", "reasoning": "b"}'
    result = parse_jsonl(text)
    assert [o["id"] for o in result.objects] == ["e1", "e2"]
    assert result.dropped == 0


def test_malformed_non_object_and_invalid_lines_are_counted_with_reasons():
    text = "\n".join([
        "Sure, here are the edges:",           # chatter: malformed JSON
        '{"id": "e1", "reasoning": "good"}',
        '{"id": "e2", "reasoning": ',          # truncated
        '["e3"]',                               # not an object
        '{"id": "e4"}',                         # fails validation: no reasoning
        '{"id": 5, "reasoning": "x"}',          # fails validation: id not a string
        '{"id": "e6", "reasoning": "fine"},',   # trailing comma tolerated
    ])
    result = parse_jsonl(text, EDGE_VALIDATOR)
    assert [o["id"] for o in result.objects] == ["e1", "e6"]
    assert result.dropped == 5
    assert len(result.reasons) == 5
    assert result.reasons[0].startswith("line 1: malformed JSON")
    assert result.reasons[1].startswith("line 3: malformed JSON")
    assert result.reasons[2] == "line 4: expected a JSON object, got list"
    assert "reasoning" in result.reasons[3] and result.reasons[3].startswith("line 5")
    assert "'id'" in result.reasons[4] and result.reasons[4].startswith("line 6")


def test_top_level_array_fallback_validates_each_element():
    text = '```json\n[{"id": "e1", "reasoning": "a"}, 7, {"id": "e2"}]\n```'
    result = parse_jsonl(text, EDGE_VALIDATOR)
    assert result.objects == [{"id": "e1", "reasoning": "a"}]
    assert result.dropped == 2
    assert result.reasons[0] == "array element 1: expected a JSON object, got int"
    assert result.reasons[1].startswith("array element 2:")


def test_multiline_array_is_accepted():
    objects = [{"id": f"e{i}", "reasoning": "r"} for i in range(3)]
    result = parse_jsonl(json.dumps(objects, indent=2), EDGE_VALIDATOR)
    assert result.objects == objects and result.dropped == 0


def test_a_broken_array_falls_back_to_line_parsing():
    text = '[\n{"id": "e1", "reasoning": "a"},\n{"id": "e2", "reasoning": "b"'
    result = parse_jsonl(text, EDGE_VALIDATOR)
    assert [o["id"] for o in result.objects] == ["e1"]
    assert result.dropped == 2  # "[" and the truncated last line


def test_a_raising_validator_drops_the_object_instead_of_failing():
    def explode(obj):
        raise KeyError("boom")

    result = parse_jsonl('{"a": 1}', explode)
    assert result.objects == [] and result.dropped == 1
    assert "validator raised KeyError" in result.reasons[0]


def test_non_text_input_is_one_drop():
    result = parse_jsonl(None)
    assert result.objects == [] and result.dropped == 1 and "NoneType" in result.reasons[0]


def test_deep_nesting_does_not_raise():
    result = parse_jsonl("[" * 100_000)
    assert result.objects == [] and result.dropped == 1


def test_reasons_are_capped_but_the_count_is_exact():
    result = parse_jsonl("\n".join(["nope"] * 120))
    assert result.dropped == 120
    assert len(result.reasons) == 51 and result.reasons[-1] == "further reasons omitted"


def test_require_strings_validator():
    check = require_strings("entity", "definition")
    assert check({"entity": "Radium", "definition": "an element"}) is None
    assert check({"entity": "Radium"}) == "field 'definition' missing or not a string"
    assert check({"entity": " ", "definition": "x"}) == "field 'entity' is empty"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_never_raises_and_accounts_for_every_line(text):
    result = parse_jsonl(text, EDGE_VALIDATOR)
    assert result.dropped >= 0
    assert all(isinstance(o, dict) for o in result.objects)
    candidates = [line for line in text.split("\n") if line.strip() and not line.lstrip().startswith("```")]
    if not any(line.strip().startswith("[") for line in candidates):  # no array fallback possible
        assert len(result.objects) + result.dropped == len(candidates)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.fixed_dictionaries({"id": st.text(min_size=1).filter(str.strip), "reasoning": st.text()}),
                max_size=8),
       st.lists(st.text(alphabet="{}[]\",:abc 0123", max_size=20), max_size=5))
def test_valid_objects_survive_surrounding_noise(objects, noise):
    lines = [json.dumps(o) for o in objects] + [n for n in noise]
    result = parse_jsonl("```jsonl\n" + "\n".join(lines) + "\n```", EDGE_VALIDATOR)
    for obj in objects:
        assert obj in result.objects
