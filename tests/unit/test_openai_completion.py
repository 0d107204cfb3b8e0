"""OpenAICompletion driven through the real openai client against the project's local server over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from trustgraph_base.telemetry import genai, tracing
from trustgraph_flow.model.prompts import LlmPrompter, render
from trustgraph_flow.model.prompts.templates import TERMS_HEADING, without_terms
from trustgraph_flow.model.testserver import MALFORMED_EXTRA_LINES, start_server
from trustgraph_flow.model.text_completion import Completion, LlmError, OpenAICompletion

pytestmark = pytest.mark.unit

SYNTHESIS = render("kg-synthesis", {
    "query": "Who discovered polonium?",
    "knowledge": [{"s": "Marie Curie", "p": "discovered", "o": "polonium", "reasoning": "shares 'discovered'"}],
})
EXPECTED = "According to the knowledge graph: Marie Curie discovered polonium."
EDGES = [
    {"id": "e1", "s": "Marie Curie", "p": "discovered", "o": "polonium"},
    {"id": "e2", "s": "Paris", "p": "capital of", "o": "France"},
]


@pytest.fixture(scope="module")
def module_server():
    with start_server(model="extractive") as handle:
        yield handle


@pytest.fixture
def server(module_server):
    module_server.clear_faults()
    module_server.clear_log()
    module_server.set_latency(0)
    module_server.omit_stream_usage(False)
    yield module_server
    module_server.clear_faults()
    module_server.omit_stream_usage(False)


@pytest.fixture
async def client(server):
    completion = OpenAICompletion(server.base_url, "test-key", "any-model", timeout=10, max_retries=3,
                                  backoff_initial=0.01, backoff_max=0.05, seed=7)
    yield completion
    await completion.aclose()


# ------------------------------------------------------------------------------- normal
async def test_complete_returns_text_usage_and_model(client, server):
    result = await client.complete(SYNTHESIS.system, SYNTHESIS.user, temperature=0.2, max_tokens=123)
    assert isinstance(result, Completion)
    assert result.text == EXPECTED
    assert result.model == "extractive"
    assert result.out_token == len(EXPECTED.split())
    assert result.in_token == len(SYNTHESIS.system.split()) + len(SYNTHESIS.user.split())
    body = server.chat_requests()[-1].body
    assert body["messages"] == [{"role": "system", "content": SYNTHESIS.system},
                                {"role": "user", "content": SYNTHESIS.user}]
    assert body["temperature"] == 0.2 and body["max_tokens"] == 123 and body["model"] == "any-model"
    assert server.template_ids() == ["kg-synthesis"]


async def test_empty_system_prompt_sends_only_the_user_message(client, server):
    await client.complete("", SYNTHESIS.system + "\n" + SYNTHESIS.user)
    assert [m["role"] for m in server.chat_requests()[-1].body["messages"]] == ["user"]


async def test_stream_yields_pieces_then_usage(client, server):
    chunks = [chunk async for chunk in client.stream(SYNTHESIS.system, SYNTHESIS.user)]
    assert len(chunks) > 2
    assert "".join(c.text for c in chunks) == EXPECTED
    assert all(not c.end_of_stream for c in chunks[:-1])
    final = chunks[-1]
    assert final.end_of_stream and final.text == ""
    assert final.model == "extractive" and final.out_token == len(EXPECTED.split()) and final.in_token > 0
    body = server.chat_requests()[-1].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_stream_without_usage(server):
    async with OpenAICompletion(server.base_url, "k", "m", stream_usage=False) as completion:
        chunks = [c async for c in completion.stream(SYNTHESIS.system, SYNTHESIS.user)]
    assert "".join(c.text for c in chunks) == EXPECTED
    assert chunks[-1].end_of_stream and chunks[-1].in_token is None and chunks[-1].out_token is None
    assert "stream_options" not in server.chat_requests()[-1].body


async def test_an_endpoint_that_sends_no_usage_gives_unknown_counts_not_zero(client, server):
    server.omit_stream_usage()  # as llama-cpp-python's server: include_usage is ignored
    result = await client.complete(SYNTHESIS.system, SYNTHESIS.user)
    assert result.text == EXPECTED and result.model == "extractive"
    assert (result.in_token, result.out_token) == (None, None)
    chunks = [chunk async for chunk in client.stream(SYNTHESIS.system, SYNTHESIS.user)]
    assert "".join(c.text for c in chunks) == EXPECTED
    assert chunks[-1].end_of_stream and (chunks[-1].in_token, chunks[-1].out_token) == (None, None)
    assert server.chat_requests()[-1].body["stream_options"] == {"include_usage": True}
    # a plain (not streamed) answer carries usage from the same server
    async with OpenAICompletion(server.base_url, "k", "m", stream_completions=False) as plain:
        result = await plain.complete(SYNTHESIS.system, SYNTHESIS.user)
    assert result.out_token == len(EXPECTED.split()) and result.in_token


async def test_a_reported_zero_stays_zero():
    with start_server("scripted", ["", ""]) as scripted:
        async with OpenAICompletion(scripted.base_url, "k", "m") as completion:
            result = await completion.complete("", "say nothing")
            chunks = [chunk async for chunk in completion.stream("", "say nothing")]
    assert result.text == "" and result.out_token == 0 and result.in_token == 2
    assert chunks[-1].out_token == 0 and chunks[-1].in_token == 2


# ------------------------------------------------------------------------------ retries
async def test_429_twice_then_success(client, server):
    server.fail_next(2, 429, "slow down")
    result = await client.complete(SYNTHESIS.system, SYNTHESIS.user)
    assert result.text == EXPECTED
    assert len(server.chat_requests()) == 3


async def test_retry_after_is_honoured_and_capped():
    completion = OpenAICompletion("http://127.0.0.1:9/v1", "k", "m", backoff_initial=0.5, backoff_max=4, seed=1)
    assert completion.backoff_delay(0, retry_after=2.5) == 2.5
    assert completion.backoff_delay(0, retry_after=60) == 4
    for attempt, ceiling in ((0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (6, 4.0)):
        delays = {completion.backoff_delay(attempt) for _ in range(20)}
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(delays) > 1  # jitter


async def test_500_exhausting_retries_names_the_endpoint(client, server):
    server.fail_next(10, 500, "database on fire")
    with pytest.raises(LlmError) as info:
        await client.complete(SYNTHESIS.system, SYNTHESIS.user)
    error = info.value
    assert error.retryable is True and error.status == 500
    assert error.endpoint == f"{server.base_url} (model any-model)"
    message = str(error)
    assert message.startswith(f"LLM endpoint {server.base_url} (model any-model) failed: HTTP 500 server error")
    assert "database on fire" in message and "(after 4 attempts)" in message
    assert len(server.chat_requests()) == 4  # first try + max_retries=3


async def test_503_then_success_while_streaming(client, server):
    server.fail_next(1, 503)
    chunks = [c async for c in client.stream(SYNTHESIS.system, SYNTHESIS.user)]
    assert "".join(c.text for c in chunks) == EXPECTED
    assert len(server.chat_requests()) == 2


async def test_client_errors_are_not_retried(client, server):
    server.fail_next(1, 400, "bad request body")
    with pytest.raises(LlmError) as info:
        await client.complete(SYNTHESIS.system, SYNTHESIS.user)
    assert info.value.retryable is False and info.value.status == 400
    assert "HTTP 400 request rejected" in str(info.value)
    assert len(server.chat_requests()) == 1


async def test_wrong_api_key_is_a_non_retryable_error():
    with start_server(api_key="right") as secured:
        async with OpenAICompletion(secured.base_url, "wrong", "m", max_retries=3) as completion:
            with pytest.raises(LlmError) as info:
                await completion.complete("s", "u")
            assert info.value.status == 401 and not info.value.retryable
            assert len(secured.chat_requests()) == 1
        async with OpenAICompletion(secured.base_url, "right", "m") as completion:
            assert (await completion.complete(SYNTHESIS.system, SYNTHESIS.user)).text == EXPECTED


# ------------------------------------------------------------------------------ timeouts
async def test_hanging_server_times_out_with_llm_error(server):
    server.hang_next(1, seconds=10)
    async with OpenAICompletion(server.base_url, "k", "slow-model", timeout=0.5, max_retries=2) as completion:
        with pytest.raises(LlmError) as info:
            await completion.complete(SYNTHESIS.system, SYNTHESIS.user)
    assert info.value.retryable is True
    assert "timed out after 0.5s" in str(info.value) and "(model slow-model)" in str(info.value)


async def test_hanging_stream_open_times_out(server):
    server.hang_next(1, seconds=10)
    async with OpenAICompletion(server.base_url, "k", "m", timeout=0.5, max_retries=0) as completion:
        with pytest.raises(LlmError, match="timed out after 0.5s"):
            async for _ in completion.stream(SYNTHESIS.system, SYNTHESIS.user):
                pass


async def test_latency_below_the_timeout_is_fine(server):
    server.set_latency(50)
    async with OpenAICompletion(server.base_url, "k", "m", timeout=5) as completion:
        assert (await completion.complete(SYNTHESIS.system, SYNTHESIS.user)).text == EXPECTED


async def test_connection_refused_is_retryable_and_named():
    async with OpenAICompletion("http://127.0.0.1:9/v1", "k", "m", max_retries=1, backoff_initial=0.01) as completion:
        with pytest.raises(LlmError) as info:
            await completion.complete("s", "u")
    assert info.value.retryable is True
    assert str(info.value).startswith("LLM endpoint http://127.0.0.1:9/v1 (model m) failed: connection error")


# ------------------------------------------------------------------------ configuration
def test_configuration_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1234/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_MODEL", "qwen-0.5b")
    completion = OpenAICompletion()
    assert (completion.base_url, completion.api_key, completion.model) == ("http://127.0.0.1:1234/v1", "sk-test",
                                                                          "qwen-0.5b")
    assert completion.endpoint == "http://127.0.0.1:1234/v1 (model qwen-0.5b)"


def test_missing_endpoint_and_bad_options_are_clear(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="no LLM endpoint configured"):
        OpenAICompletion()
    with pytest.raises(ValueError, match="temperature"):
        OpenAICompletion("http://127.0.0.1:9/v1", temperature=3)
    with pytest.raises(ValueError, match="max_tokens"):
        OpenAICompletion("http://127.0.0.1:9/v1", max_tokens=0)


async def test_per_call_overrides_are_validated(client):
    with pytest.raises(ValueError, match="temperature"):
        await client.complete("s", "u", temperature=-1)


# ---------------------------------------------------------------- prompter over HTTP
async def test_llm_prompter_counts_malformed_jsonl_as_dropped(client, server):
    prompter = LlmPrompter(client)
    terms = {"query": "Who discovered polonium?", "knowledge": EDGES}
    clean = await prompter.run("kg-edge-selection", terms)
    assert [o["id"] for o in clean.objects] == ["e1"] and clean.dropped == 0
    server.malform_next(1)
    dirty = await prompter.run("kg-edge-selection", terms)
    assert dirty.objects == clean.objects
    assert dirty.dropped == MALFORMED_EXTRA_LINES == 3
    assert dirty.reasons[0].startswith("line 1: malformed JSON")
    assert dirty.reasons[-1].endswith("expected a JSON object, got list")
    assert dirty.model == "extractive" and dirty.in_token > 0


async def test_llm_prompter_with_replaced_garbage(client, server):
    server.malform_next(1, text="I think edge e1 is relevant because it mentions polonium.")
    result = await LlmPrompter(client).run("kg-edge-selection", {"query": "q", "knowledge": EDGES})
    assert result.objects == [] and result.dropped == 1


# --------------------------------------------------------------------- scripted mode
async def test_scripted_replies_by_template_and_in_order():
    script = {"kg-edge-selection": ['{"id": "e2", "reasoning": "scripted"}'], "kg-synthesis": "Scripted answer."}
    with start_server("scripted", script) as scripted:
        async with OpenAICompletion(scripted.base_url, "k", "gpt-test", max_retries=0) as completion:
            prompter = LlmPrompter(completion)
            selection = await prompter.run("kg-edge-selection", {"query": "q", "knowledge": EDGES})
            assert selection.objects == [{"id": "e2", "reasoning": "scripted"}]
            assert selection.model == "gpt-test"
            for _ in range(2):
                assert (await completion.complete(SYNTHESIS.system, SYNTHESIS.user)).text == "Scripted answer."
            with pytest.raises(LlmError, match="no reply left for template 'kg-edge-selection'"):
                await prompter.run("kg-edge-selection", {"query": "q", "knowledge": EDGES})
    with start_server("scripted", ["one", "two"]) as ordered:
        async with OpenAICompletion(ordered.base_url, "k", "m", max_retries=0) as completion:
            assert [(await completion.complete("", "x")).text for _ in range(2)] == ["one", "two"]
            with pytest.raises(LlmError, match="script is exhausted"):
                await completion.complete("", "x")


async def test_scripted_callable_sees_the_parsed_template():
    seen = []

    def reply(template_id, terms, messages):
        seen.append((template_id, terms["query"], len(messages)))
        return "ok"

    with start_server("scripted", reply) as scripted:
        async with OpenAICompletion(scripted.base_url, "k", "m") as completion:
            assert (await completion.complete(SYNTHESIS.system, SYNTHESIS.user)).text == "ok"
    assert seen == [("kg-synthesis", "Who discovered polonium?", 2)]


async def test_a_model_server_is_sent_the_readable_prompt_without_the_terms_block():
    with start_server("scripted", {"kg-synthesis": ["one", "two"]}) as model_server:
        model_server.declare_terms(False)  # as llama.cpp, vLLM, Ollama or a hosted API list their models
        async with OpenAICompletion(model_server.base_url, "k", "m") as completion:
            assert (await completion.complete(SYNTHESIS.system, SYNTHESIS.user)).text == "one"
            assert [c.text async for c in completion.stream(SYNTHESIS.system, SYNTHESIS.user)][0] == "two"
        sent = [r.body["messages"][-1]["content"] for r in model_server.chat_requests()]
        assert sent == [without_terms(SYNTHESIS.user)] * 2 and "<data>" not in sent[0]
        assert sent[0].startswith("Knowledge statements:") and model_server.template_ids() == ["kg-synthesis"] * 2
        # asked once, on the first call
        assert [r.path for r in model_server.requests].count("/v1/models") == 1


async def test_the_test_server_is_sent_the_terms_block_it_answers_from(client, server):
    await client.complete(SYNTHESIS.system, SYNTHESIS.user)
    assert server.chat_requests()[-1].body["messages"][-1]["content"] == SYNTHESIS.user
    assert "<data>" in SYNTHESIS.user


@pytest.fixture
def spans(monkeypatch):
    """Tracing on with prompts captured (the user's opt-in), finished spans kept in memory instead of exported."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # the set-up install_state makes, with this provider; monkeypatch puts the previous one back
    monkeypatch.setattr(tracing, "_state", tracing._State(provider.get_tracer(tracing.INSTRUMENTATION), provider))
    monkeypatch.setenv(genai.CAPTURE_CONTENT_ENV, "true")
    yield exporter
    provider.shutdown()


def _span_inputs(span) -> dict:
    """The input messages a chat span records, as (role, content) pairs, under each convention it follows."""
    attrs = span.attributes
    gen_ai = [(m["role"], m["parts"][0]["content"]) for m in json.loads(attrs[genai.INPUT_MESSAGES])]
    openinference = [(attrs[f"llm.input_messages.{i}.message.role"], attrs[f"llm.input_messages.{i}.message.content"])
                     for i in range(len(gen_ai))]
    return {"gen_ai": gen_ai, "openinference": openinference, "input.value": attrs["input.value"]}


def _as_received(request) -> dict:
    """What :func:`_span_inputs` gives for a span that records exactly what the server received."""
    pairs = [(m["role"], m["content"]) for m in request.body["messages"]]
    return {"gen_ai": pairs, "openinference": pairs, "input.value": pairs[-1][1]}


async def test_a_span_records_the_prompt_a_model_server_is_sent_without_the_terms_block(spans):
    with start_server("scripted", {"kg-synthesis": ["one", "two", "three"]}) as model_server:
        model_server.declare_terms(False)
        async with OpenAICompletion(model_server.base_url, "k", "m") as completion:
            await completion.complete(SYNTHESIS.system, SYNTHESIS.user)
            [c async for c in completion.stream(SYNTHESIS.system, SYNTHESIS.user)]
        async with OpenAICompletion(model_server.base_url, "k", "m", stream_completions=False) as plain:
            await plain.complete(SYNTHESIS.system, SYNTHESIS.user)
        received = model_server.chat_requests()
    finished = [s for s in spans.get_finished_spans() if s.name == "chat m"]
    assert len(finished) == len(received) == 3
    for span, request in zip(finished, received, strict=True):
        recorded = _span_inputs(span)
        assert recorded == _as_received(request)
        assert recorded["input.value"] == without_terms(SYNTHESIS.user)
        texts = [str(v) for k, v in span.attributes.items() if "input" in k]
        assert not any("<data>" in t or TERMS_HEADING in t for t in texts), texts


async def test_a_span_keeps_the_terms_block_an_endpoint_that_declares_it_is_sent(spans, client, server):
    await client.complete(SYNTHESIS.system, SYNTHESIS.user)
    [c async for c in client.stream(SYNTHESIS.system, SYNTHESIS.user)]
    finished = [s for s in spans.get_finished_spans() if s.name == "chat any-model"]
    received = server.chat_requests()
    assert len(finished) == len(received) == 2
    for span, request in zip(finished, received, strict=True):
        assert _span_inputs(span) == _as_received(request)
        assert _span_inputs(span)["input.value"] == SYNTHESIS.user and "<data>" in SYNTHESIS.user


async def test_without_the_opt_in_a_span_records_no_prompt(spans, client, server, monkeypatch):
    monkeypatch.delenv(genai.CAPTURE_CONTENT_ENV)
    await client.complete(SYNTHESIS.system, SYNTHESIS.user)
    [c async for c in client.stream(SYNTHESIS.system, SYNTHESIS.user)]
    finished = [s for s in spans.get_finished_spans() if s.name == "chat any-model"]
    assert len(finished) == 2
    for span in finished:
        assert span.attributes[genai.REQUEST_MODEL] == "any-model"
        assert not any("input" in k and "token" not in k for k in span.attributes), dict(span.attributes)


@pytest.mark.parametrize("fault, asked", [("dropped", 2), ("404", 1)])
async def test_a_model_list_that_cannot_be_read_means_a_model_server(fault, asked):
    with start_server("scripted", {"kg-synthesis": ["one", "two"]}) as test_server:
        if fault == "dropped":  # asked again on the next call: the connection broke, the endpoint never answered
            test_server.hang_next(1, 0.1, endpoint="models")
        else:  # an answer: the endpoint has no model list, and is not asked again
            test_server.fail_next(1, 404, endpoint="models")
        async with OpenAICompletion(test_server.base_url, "k", "m", max_retries=0) as completion:
            assert (await completion.complete(SYNTHESIS.system, SYNTHESIS.user)).text == "one"
            assert (await completion.complete(SYNTHESIS.system, SYNTHESIS.user)).text == "two"
        sent = [r.body["messages"][-1]["content"] for r in test_server.chat_requests()]
        assert sent == [without_terms(SYNTHESIS.user), SYNTHESIS.user if fault == "dropped"
                        else without_terms(SYNTHESIS.user)]
        assert [r.path for r in test_server.requests].count("/v1/models") == asked


async def test_extractive_mode_rejects_prompts_without_a_template(client):
    with pytest.raises(LlmError) as info:
        await client.complete("You are helpful.", "Hello there")
    assert info.value.status == 400 and "no 'task: <template-id>' line" in str(info.value)


# ------------------------------------------------------------------------- raw HTTP
def test_models_errors_and_json_mode_over_raw_http(server):
    with urllib.request.urlopen(f"{server.base_url}/models") as response:
        listing = json.load(response)
    assert [m["id"] for m in listing["data"]] == ["extractive", "all-MiniLM-L6-v2-onnx-int8"]
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{server.base_url}/nothing")
    assert info.value.code == 404
    assert json.load(info.value)["error"]["type"] == "invalid_request_error"
    request = urllib.request.Request(f"{server.base_url}/chat/completions", data=b"{not json",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request)
    assert info.value.code == 400 and "not valid JSON" in json.load(info.value)["error"]["message"]
    body = {"model": "m", "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": render("kg-edge-selection", {
                "query": "Who discovered polonium?", "knowledge": EDGES}).system},
                {"role": "user", "content": render("kg-edge-selection", {
                    "query": "Who discovered polonium?", "knowledge": EDGES}).user}]}
    request = urllib.request.Request(f"{server.base_url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        content = json.load(response)["choices"][0]["message"]["content"]
    assert [o["id"] for o in json.loads(content)["objects"]] == ["e1"]


def test_server_binds_loopback_only(server):
    assert server.base_url.startswith("http://127.0.0.1:")
    assert server._httpd.server_address[0] == "127.0.0.1"


def test_command_line_prints_the_base_url_and_serves():
    process = subprocess.Popen(
        [sys.executable, "-m", "trustgraph_flow.model.testserver", "--port", "0", "--latency-ms", "50"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        with urllib.request.urlopen(f"{base_url}/models", timeout=10) as response:
            assert json.load(response)["data"][0]["id"] == "extractive"
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert process.returncode == 0
    assert "extractive backend (model id 'extractive')" in process.stderr.read()


def test_command_line_rejects_a_bad_script(tmp_path):
    bad = tmp_path / "script.json"
    bad.write_text("{oops")
    result = subprocess.run([sys.executable, "-m", "trustgraph_flow.model.testserver", "--mode", "scripted",
                             "--script", str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "cannot read --script" in result.stderr
