"""parse_react: the agent-react grammar, lenient where models are sloppy, helpful where they are wrong."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustgraph_flow.agent.react import FinalAnswer, ReactParseError, ReactStep, parse_react

pytestmark = pytest.mark.unit


def test_tool_step():
    step = parse_react('Thought: I need the graph.\nAction: knowledge-query\nArgs: {"question": "Who?"}')
    assert step == ReactStep(thought="I need the graph.", action="knowledge-query", arguments={"question": "Who?"})


def test_final_answer_spans_lines():
    reply = "Thought: The graph answered.\nFinal Answer: Marie Curie discovered polonium.\nShe also found radium."
    assert parse_react(reply) == FinalAnswer(
        thought="The graph answered.",
        answer="Marie Curie discovered polonium.\nShe also found radium.",
    )


def test_multiline_thought():
    step = parse_react('Thought: first line\nsecond line\nAction: calculator\nArgs: {"expression": "1+1"}')
    assert step.thought == "first line\nsecond line"


def test_action_input_and_fenced_multiline_json():
    reply = 'Thought: compute\nAction: calculator\nAction Input:\n```json\n{\n  "expression": "17 * 23"\n}\n```\n'
    step = parse_react(reply)
    assert step.action == "calculator" and step.arguments == {"expression": "17 * 23"}


def test_nested_json_arguments_with_braces_in_strings():
    args = {"question": "what is {x}?", "options": {"limit": 3, "tags": ["a", "b"]}}
    step = parse_react(f"Thought: t\nAction: tool\nArgs: {json.dumps(args)} trailing words")
    assert step.arguments == args


def test_keywords_are_case_insensitive_and_may_be_bold():
    step = parse_react('**Thought:** go\n**action**: knowledge-query\nARGS: {"question": "q"}')
    assert step.action == "knowledge-query" and step.thought == "go"


def test_missing_args_means_no_arguments():
    assert parse_react("Thought: list\nAction: list-tools").arguments == {}


def test_hallucinated_observation_and_later_text_are_ignored():
    reply = 'Thought: a\nAction: calculator\nArgs: {"expression": "2+2"}\nObservation: 4\nThought: b\nFinal Answer: 4'
    step = parse_react(reply)
    assert isinstance(step, ReactStep) and step.arguments == {"expression": "2+2"}


def test_first_decision_wins():
    reply = 'Thought: done\nFinal Answer: 42\nAction: calculator\nArgs: {"expression": "6*7"}'
    assert parse_react(reply) == FinalAnswer(thought="done", answer="42")


def test_thought_is_optional():
    assert parse_react("Final Answer: yes") == FinalAnswer(thought="", answer="yes")


@pytest.mark.parametrize(
    "reply, fragment",
    [
        ("", "empty"),
        ("   \n ", "empty"),
        ("I think the answer is 4.", "neither an 'Action:' line nor a 'Final Answer:' line"),
        ("Thought: hmm", "neither"),
        ('Thought: t\nArgs: {"a": 1}', "no 'Action:' line"),
        ("Thought: t\nAction:\nArgs: {}", "does not name a tool"),
        ("Thought: t\nAction: calculator(17*23)", "must be just a tool name"),
        ("Thought: t\nAction: calculator\nAction Input: 17 * 23", "must hold a JSON object"),
        ('Thought: t\nAction: calculator\nArgs: {"expression": 1', "not valid JSON"),
        ("Thought: t\nAction: calculator\nArgs: {'expression': '1'}", "not valid JSON"),
        ("Thought: t\nFinal Answer:   ", "'Final Answer:' is empty"),
        ("Thought: t\nAction: calculator\n17 * 23", "Unexpected text after the tool name"),
    ],
)
def test_errors_explain_what_to_fix(reply, fragment):
    with pytest.raises(ReactParseError) as info:
        parse_react(reply)
    message = str(info.value)
    assert fragment in message
    assert "Final Answer: <the answer>" in message  # the format reminder the agent feeds back


def test_policy_output_round_trips():
    from trustgraph_flow.model.extractive.react_policy import next_step

    tools = [{"name": "calculator", "description": "Evaluate arithmetic.", "arguments": [{"name": "expression"}]}]
    step = parse_react(next_step("What is 6 * 7?", tools))
    assert step.action == "calculator" and step.arguments == {"expression": "6 * 7"}
    history = [{"thought": step.thought, "action": step.action, "arguments": step.arguments, "observation": "42"}]
    assert parse_react(next_step("What is 6 * 7?", tools, history)).answer == "42"


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_arbitrary_text_parses_or_raises_react_parse_error(text):
    try:
        result = parse_react(text)
    except ReactParseError as exc:
        assert str(exc)
    else:
        assert isinstance(result, (ReactStep, FinalAnswer))


_KEYWORDS = st.sampled_from(["Thought:", "Action:", "Args:", "Action Input:", "Final Answer:", "Observation:",
                             "```", "{", "}", '"q": "v"', "calculator", "\n"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_KEYWORDS, st.text(max_size=10)), max_size=25))
def test_grammar_shaped_noise_parses_or_raises_react_parse_error(parts):
    try:
        result = parse_react(" ".join(parts))
    except ReactParseError:
        return
    if isinstance(result, ReactStep):
        assert result.action and isinstance(result.arguments, dict)
    else:
        assert result.answer


@settings(max_examples=200, deadline=None)
@given(
    thought=st.text(alphabet=st.characters(blacklist_characters="\r\n:`", blacklist_categories=("Cs",)),
                    max_size=40).map(str.strip).filter(lambda t: t and t[0].isalnum()),
    action=st.from_regex(r"[a-z][a-z0-9_\-]{0,15}", fullmatch=True),
    arguments=st.dictionaries(st.text(max_size=8), st.one_of(st.text(max_size=20), st.integers()), max_size=4),
)
def test_well_formed_steps_round_trip(thought, action, arguments):
    reply = f"Thought: {thought}\nAction: {action}\nArgs: {json.dumps(arguments)}"
    assert parse_react(reply) == ReactStep(thought=thought, action=action, arguments=arguments)
