"""Prompt templates and the two prompters (LLM over HTTP, extractive in process)."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustgraph_flow.agent.react import ReactStep, parse_react
from trustgraph_flow.model.prompts import (
    TEMPLATES,
    ExtractivePrompter,
    LlmPrompter,
    Prompter,
    PromptError,
    StreamUsage,
    get_prompter,
    get_template,
    parse_jsonl,
    parse_rendered,
    render,
)
from trustgraph_flow.model.prompts.templates import TERMS_HEADING, without_terms
from trustgraph_flow.model.testserver import start_server
from trustgraph_flow.model.text_completion import OpenAICompletion

pytestmark = pytest.mark.unit

EDGES = [
    {"id": "e1", "s": "Marie Curie", "p": "discovered", "o": "polonium"},
    {"id": "e2", "s": "polonium", "p": "named after", "o": "Poland"},
    {"id": "e3", "s": "Paris", "p": "capital of", "o": "France"},
]
TERMS = {
    "kg-edge-selection": {"query": "Who discovered polonium?", "knowledge": EDGES,
                          "entity_scores": {"Marie Curie": 0.52, "polonium": 0.74}, "limit": 5},
    "kg-synthesis": {"query": "Who discovered polonium?",
                     "knowledge": [{"s": "Marie Curie", "p": "discovered", "o": "polonium", "reasoning": "r"}]},
    "document-prompt": {"query": "Who discovered polonium?",
                        "documents": [{"id": "c1", "text": "Polonium was discovered in 1898 by the Curies.",
                                       "score": 0.8}]},
    "agent-react": {"question": "What is 6 * 7?",
                    "tools": [{"name": "calculator", "description": "Evaluate arithmetic.",
                               "arguments": [{"name": "expression", "description": "e.g. 1 + 1"}]}],
                    "history": []},
    "extract-relationships": {"text": "Marie Curie discovered polonium."},
    "extract-definitions": {"text": "Polonium is a radioactive element."},
    "agent-pattern-select": {"question": "Who discovered polonium and who discovered radium?",
                             "patterns": [{"name": "react", "description": "one line of reasoning"},
                                          {"name": "supervisor", "description": "parallel sub-agents"}]},
    "agent-plan": {"question": "Who discovered polonium, then when?",
                   "tools": [{"name": "knowledge-query", "description": "Ask the knowledge graph."}]},
    "agent-decompose": {"question": "Who discovered polonium and who discovered radium?"},
    "agent-synthesise": {"question": "Who discovered polonium and radium?",
                         "results": [{"goal": "Who discovered polonium?", "result": "Marie Curie.", "error": ""},
                                     {"goal": "Who discovered radium?", "result": "", "error": "timed out"}]},
}


# ---------------------------------------------------------------------------- templates
def test_all_template_ids_and_response_types():
    assert {tid: t.response_type for tid, t in TEMPLATES.items()} == {
        "kg-edge-selection": "jsonl", "kg-synthesis": "text", "document-prompt": "text", "agent-react": "text",
        "extract-relationships": "jsonl", "extract-definitions": "jsonl", "agent-pattern-select": "text",
        "agent-plan": "text", "agent-decompose": "text", "agent-synthesise": "text"}


@pytest.mark.parametrize("template_id", sorted(TERMS))
def test_render_task_line_and_data_block_round_trip(template_id):
    prompt = render(template_id, TERMS[template_id])
    assert prompt.system.split("\n", 1)[0] == f"task: {template_id}"
    lines = prompt.user.split("\n")
    opening = lines.index("<data>")
    assert lines[opening + 2] == "</data>"
    assert parse_rendered(prompt.system, prompt.user) == (template_id, TERMS[template_id])


@pytest.mark.parametrize("template_id", sorted(TERMS))
def test_a_model_is_sent_the_readable_prompt_without_the_terms_block(template_id):
    template = get_template(template_id)
    prompt = render(template_id, TERMS[template_id])
    sent = without_terms(prompt.user)
    readable = template.render_user(TERMS[template_id]).rstrip()
    assert sent == f"{readable}\n" + (f"\n{template.closing}\n" if template.closing else "")
    assert "<data>" not in sent and TERMS_HEADING not in sent
    assert parse_rendered(prompt.system, sent) == (template_id, None)  # nothing left for the test server


@pytest.mark.parametrize("template_id", sorted(TEMPLATES))
def test_rendering_without_the_terms_block_gives_what_a_model_is_sent(template_id):
    terms = TERMS[template_id]  # every registered template has example terms here
    without = render(template_id, terms, terms_block=False)
    assert without.user == without_terms(render(template_id, terms).user)
    assert without.system == render(template_id, terms).system
    assert get_template(template_id).render(terms, terms_block=False) == without


@settings(max_examples=150, deadline=None)
@given(question=st.lists(st.sampled_from(["a", " ", "\n", "{", "<data>", "</data>", TERMS_HEADING, "é"]),
                        max_size=40).map("".join))
def test_only_the_rendered_terms_block_is_removed(question):
    terms = dict(TERMS["kg-synthesis"], query=question)
    user = render("kg-synthesis", terms).user
    sent = without_terms(user)
    assert sent == f"{get_template('kg-synthesis').render_user(terms).rstrip()}\n"
    assert render("kg-synthesis", terms, terms_block=False).user == sent
    typed = f"Question: {question}\n\n{TERMS_HEADING}\n<data>\nnot json\n</data>\n"
    assert without_terms(typed) == typed  # not the rendered shape: left alone


def test_edge_selection_prompt_lists_labelled_edges_with_ids():
    user = render("kg-edge-selection", TERMS["kg-edge-selection"]).user
    assert '(Marie Curie)-[discovered {id: "e1"}]->(polonium)' in user
    assert "Select at most 5 edges." in user
    assert '"reasoning"' in get_template("kg-edge-selection").system


def test_synthesis_prompt_has_only_the_selected_edges():
    user = render("kg-synthesis", TERMS["kg-synthesis"]).user
    assert "(Marie Curie)-[discovered]->(polonium)" in user and "Paris" not in user


def test_react_prompt_shows_history_in_the_grammar():
    terms = dict(TERMS["agent-react"], history=[{"thought": "compute", "action": "calculator",
                                                  "arguments": {"expression": "6 * 7"}, "observation": "42"}])
    user = render("agent-react", terms).user
    assert 'Thought: compute\nAction: calculator\nArgs: {"expression": "6 * 7"}\nObservation: 42' in user
    assert user.rstrip().endswith("Your next step:")


@pytest.mark.parametrize("template_id, terms, message", [
    ("kg-edge-selection", {"knowledge": []}, "missing term 'query'"),
    ("kg-edge-selection", {"query": 1, "knowledge": []}, "term 'query' must be a string, got int"),
    ("kg-edge-selection", {"query": "q", "knowledge": [{"id": "e1", "s": "a", "p": "b"}]},
     "knowledge[0] lacks field 'o'"),
    ("kg-edge-selection", {"query": "q", "knowledge": EDGES + EDGES[:1]}, "duplicate edge ids"),
    ("kg-edge-selection", {"query": "q", "knowledge": EDGES, "entity_scores": {"a": "high"}}, "entity_scores"),
    ("kg-edge-selection", {"query": "q", "knowledge": EDGES, "limit": 0}, "limit must be a positive integer"),
    ("kg-synthesis", {"query": "q", "knowledge": "a-b-c"}, "term 'knowledge' must be a list"),
    ("document-prompt", {"query": "q", "documents": [{"id": "c1"}]}, "documents[0] lacks field 'text'"),
    ("document-prompt", {"query": "q", "documents": [{"text": "t", "score": "high"}]}, "score must be a number"),
    ("agent-react", {"question": "q", "tools": [{"name": "x"}]}, "tools[0] lacks field 'description'"),
    ("agent-react", {"question": "q", "tools": [], "history": [{"observation": 3}]}, "history[0].observation"),
    ("extract-definitions", {}, "missing term 'text'"),
    ("kg-synthesis", {"query": "q", "knowledge": [], "extra": object()}, "not JSON-serialisable"),
])
def test_bad_terms_are_rejected_clearly(template_id, terms, message):
    with pytest.raises(PromptError, match=message.replace("[", r"\[").replace("]", r"\]")):
        render(template_id, terms)


def test_unknown_template():
    with pytest.raises(PromptError, match="unknown prompt template 'kg-magic'; known: agent-decompose, "
                                          "agent-pattern-select, agent-plan, agent-react"):
        get_template("kg-magic")


def test_parse_rendered_without_markers():
    assert parse_rendered("You are helpful.", "hi") == (None, None)
    assert parse_rendered("task: kg-synthesis", "no data here") == ("kg-synthesis", None)


label = st.text(min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(query=st.text(max_size=80), edges=st.lists(st.tuples(label, label, label), max_size=6))
def test_data_block_survives_any_text(query, edges):
    knowledge = [{"id": f"e{i}", "s": s, "p": p, "o": o} for i, (s, p, o) in enumerate(edges)]
    terms = {"query": query, "knowledge": knowledge}
    prompt = render("kg-edge-selection", terms)
    assert parse_rendered(prompt.system, prompt.user) == ("kg-edge-selection", terms)


@pytest.mark.parametrize("template_id, good, bad", [
    ("extract-relationships", {"subject": "Marie Curie", "predicate": "discovered", "object": "polonium",
                               "object-entity": True}, {"subject": "Marie Curie", "predicate": "born in",
                                                        "object": "1867", "object-entity": "no"}),
    ("extract-definitions", {"entity": "polonium", "definition": "a radioactive element"}, {"entity": "polonium"}),
    ("kg-edge-selection", {"id": "e1", "reasoning": ""}, {"id": "", "reasoning": "x"}),
])
def test_jsonl_validators(template_id, good, bad):
    validate = get_template(template_id).validate
    assert validate(good) is None
    assert validate(bad)


# --------------------------------------------------------------------- extractive prompter
@pytest.fixture(scope="module")
def extractive():
    return ExtractivePrompter(None)


async def test_extractive_edge_selection_objects_and_jsonl_text(extractive):
    result = await extractive.run("kg-edge-selection", TERMS["kg-edge-selection"])
    assert isinstance(extractive, Prompter) and extractive.model_id == result.model == "extractive"
    assert result.objects[0]["id"] == "e1" and {o["id"] for o in result.objects} <= {"e1", "e2", "e3"}
    assert "cosine 0.74 to the question (via 'polonium')" in result.objects[0]["reasoning"]
    assert isinstance(result.objects[0]["score"], float) and result.objects[0]["concept"] == "polonium"
    assert parse_jsonl(result.text, get_template("kg-edge-selection").validate).objects == result.objects
    assert (result.in_token, result.out_token, result.dropped) == (0, 0, 0)


async def test_extractive_text_templates(extractive):
    synthesis = await extractive.run("kg-synthesis", TERMS["kg-synthesis"])
    assert synthesis.text == "According to the knowledge graph: Marie Curie discovered polonium."
    document = await extractive.run("document-prompt", TERMS["document-prompt"])
    assert '"Polonium was discovered in 1898 by the Curies." [c1]' in document.text
    step = parse_react((await extractive.run("agent-react", TERMS["agent-react"])).text)
    assert step == ReactStep(thought=step.thought, action="calculator", arguments={"expression": "6 * 7"})


@pytest.mark.parametrize("template_id", ["extract-relationships", "extract-definitions"])
async def test_extractive_refuses_extraction_templates(extractive, template_id):
    with pytest.raises(PromptError, match="ingestion uses the pattern extractor"):
        await extractive.run(template_id, TERMS[template_id])


async def test_extractive_validates_terms(extractive):
    with pytest.raises(PromptError, match="missing term 'query'"):
        await extractive.run("kg-synthesis", {"knowledge": []})


async def test_extractive_stream_matches_run_and_reports_usage(extractive):
    usage = StreamUsage()
    terms = {"query": "Who discovered polonium?", "documents": [
        {"id": "c1", "text": "Polonium was discovered in 1898. Marie Curie discovered polonium with Pierre."}]}
    pieces = [p async for p in extractive.stream("document-prompt", terms, usage)]
    assert len(pieces) > 1
    assert "".join(pieces) == (await extractive.run("document-prompt", terms)).text
    assert usage == StreamUsage(0, 0, "extractive")
    with pytest.raises(PromptError, match="cannot be streamed"):
        async for _ in extractive.stream("kg-edge-selection", TERMS["kg-edge-selection"]):
            pass


async def test_extractive_with_local_embedder_runs_off_the_event_loop():
    from trustgraph_flow.model.embeddings import get_embedder

    prompter = ExtractivePrompter(get_embedder("local"))
    result = await prompter.run("document-prompt", TERMS["document-prompt"])
    assert "[c1]" in result.text


# ----------------------------------------------------------------- LLM prompter over HTTP
@pytest.fixture(scope="module")
def server():
    with start_server() as handle:
        yield handle


async def test_llm_prompter_through_the_extractive_server_agrees_with_the_extractive_prompter(server, extractive):
    async with OpenAICompletion(server.base_url, "k", "remote-model") as completion:
        prompter = LlmPrompter(completion)
        assert isinstance(prompter, Prompter) and prompter.model_id == "remote-model"
        for template_id in ("kg-edge-selection", "kg-synthesis", "document-prompt", "agent-react"):
            remote = await prompter.run(template_id, TERMS[template_id])
            local = await extractive.run(template_id, TERMS[template_id])
            assert remote.objects == local.objects, template_id
            if template_id == "kg-edge-selection":  # asked with a JSON schema: the structured answer
                assert json.loads(remote.text) == {"edges": local.objects}
            else:
                assert remote.text == local.text, template_id
            assert remote.model == "extractive" and remote.in_token > 0 and remote.out_token > 0


async def test_llm_prompter_stream_reports_usage(server):
    async with OpenAICompletion(server.base_url, "k", "m") as completion:
        usage = StreamUsage()
        text = "".join([p async for p in LlmPrompter(completion).stream("kg-synthesis", TERMS["kg-synthesis"], usage)])
    assert text == "According to the knowledge graph: Marie Curie discovered polonium."
    assert usage.model == "extractive" and usage.out_token == len(text.split()) and usage.in_token > 0


async def test_llm_prompter_rejects_bad_terms_before_calling(server):
    server.clear_log()
    async with OpenAICompletion(server.base_url, "k", "m") as completion:
        with pytest.raises(PromptError):
            await LlmPrompter(completion).run("kg-edge-selection", {"query": "q"})
        with pytest.raises(PromptError, match="cannot be streamed"):
            async for _ in LlmPrompter(completion).stream("extract-definitions", {"text": "t"}):
                pass
    assert server.chat_requests() == []


# ----------------------------------------------------------------------------- selection
def test_get_prompter_auto_without_endpoint_is_extractive_and_says_so(monkeypatch, caplog):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LLM_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    with caplog.at_level(logging.INFO, logger="trustgraph_flow.model.prompts.prompter"):
        prompter = get_prompter(embedder=None)
    assert isinstance(prompter, ExtractivePrompter) and prompter.model_id == "extractive"
    assert "LLM backend: extractive backend (model id 'extractive')" in caplog.text
    assert "does not generate text" in caplog.text


def test_get_prompter_auto_with_endpoint_is_openai(monkeypatch, caplog):
    monkeypatch.delenv("LLM_BACKEND", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1234/v1")
    monkeypatch.setenv("OPENAI_MODEL", "qwen")
    with caplog.at_level(logging.INFO, logger="trustgraph_flow.model.prompts.prompter"):
        prompter = get_prompter()
    assert isinstance(prompter, LlmPrompter) and prompter.model_id == "qwen"
    assert "openai-compatible endpoint http://127.0.0.1:1234/v1 (model qwen)" in caplog.text


def test_get_prompter_explicit_and_env_choices(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1234/v1")
    monkeypatch.setenv("LLM_BACKEND", "extractive")
    assert isinstance(get_prompter(embedder=None), ExtractivePrompter)
    assert isinstance(get_prompter("openai"), LlmPrompter)
    default = get_prompter("extractive")
    assert default.embedder is not None and default.embedder.model_id == "all-MiniLM-L6-v2-onnx-int8"
    monkeypatch.setenv("LLM_BACKEND", "gpt")
    with pytest.raises(PromptError, match="LLM_BACKEND='gpt'"):
        get_prompter()
    with pytest.raises(PromptError, match="unknown LLM backend 'llama'"):
        get_prompter("llama")
