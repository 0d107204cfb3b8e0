"""LLM call settings, cancellation and ``--show-usage`` through the installed commands.

The commands run as subprocesses on the embedded deployment, with ``OPENAI_BASE_URL`` pointing at
the project's OpenAI-compatible test server, which runs in this test process so that the test can
make a generation slow and see whether the command's LLM call disconnected from it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time

import pytest
from e2e_support import EXIT_FAILED, EXIT_USAGE, GRAPH_QUESTION, assert_clean_failure, parse_explain, start_gateway

from trustgraph_flow.model.testserver import start_server

pytestmark = pytest.mark.e2e

MODEL = "e2e-usage-model"
ANSWER = "The scripted model says: Marie Curie discovered radium."
STEP = ('Thought: I should ask the knowledge graph.\nAction: knowledge-query\n'
        'Args: {"question": "Who discovered radium?"}')
FINAL = "Thought: I know it now.\nFinal Answer: Marie Curie discovered radium."
TOTALS = re.compile(r"^Input tokens: (\d+) Output tokens: (\d+) Model: (.+)$")
CALL = re.compile(r"^  (.+): Input tokens: (\d+) Output tokens: (\d+) Model: (.+)  \((\S+)\)$")


def script(template_id, terms, messages):
    if template_id == "kg-edge-selection":
        chosen = [k for k in terms["knowledge"] if "radium" in (k["s"] + " " + k["o"]).lower()][:2]
        return "\n".join(json.dumps({"id": k["id"], "reasoning": "names radium"}) for k in chosen)
    if template_id == "kg-synthesis":
        return ANSWER
    if template_id == "document-prompt":
        return "The documents say: the curie."
    if template_id == "agent-react":
        return FINAL if terms.get("history") else STEP
    raise AssertionError(f"unexpected template {template_id}")


@pytest.fixture
def llm():
    with start_server("scripted", script=script, model=MODEL) as server:
        yield server


def llm_env(server) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "e2e-key", "OPENAI_MODEL": MODEL}


def usage_lines(stderr: str) -> tuple[list[tuple[str, int, int, str, str]], tuple[int, int, str]]:
    calls = [(m[1], int(m[2]), int(m[3]), m[4], m[5]) for m in map(CALL.match, stderr.splitlines()) if m]
    totals = [TOTALS.match(line) for line in stderr.splitlines() if TOTALS.match(line)]
    assert len(totals) == 1, stderr
    t = totals[0]
    return calls, (int(t[1]), int(t[2]), t[3])


def trace_usage(d, root: str) -> list[tuple[str, int, int, str]]:
    trace = d.trace_json(root)
    stages = []
    if trace["type"] == "agent":
        for a in trace["analyses"]:
            stages.append(a)
            for sub in a["sub_traces"]:
                stages += [sub["focus"], sub["synthesis"]]
        stages.append(trace["conclusion"])
    else:
        stages += [trace.get("focus"), trace["synthesis"]]
    return [(s["uri"], s["usage"]["in_token"], s["usage"]["out_token"], s["usage"]["model"])
            for s in stages if s and s.get("usage")]


@pytest.mark.parametrize("command, args, stages", [
    ("tg-invoke-graph-rag", ["-q", GRAPH_QUESTION], ["edge selection", "synthesis"]),
    ("tg-invoke-document-rag", ["-q", "What is the curie?"], ["synthesis"]),
    ("tg-invoke-agent", ["-q", GRAPH_QUESTION], ["step 1", "GraphRAG edge selection", "GraphRAG synthesis", "answer"]),
], ids=["graph-rag", "document-rag", "agent"])
def test_show_usage_prints_each_call_and_the_totals_as_the_trace_records_them(embedded_deployment, llm, command,
                                                                               args, stages):
    d = embedded_deployment
    r = d.ok(command, *args, "-x", "--show-usage", env=llm_env(llm))
    calls, (in_total, out_total, model) = usage_lines(r.stderr)
    assert [c[0] for c in calls] == stages, r.explain()
    assert model == MODEL and all(c[3] == MODEL and c[1] > 0 and c[2] > 0 for c in calls)
    assert (in_total, out_total) == (sum(c[1] for c in calls), sum(c[2] for c in calls))
    blocks, _answer = parse_explain(r.stdout)
    root = blocks[0].uri
    assert trace_usage(d, root) == [(c[4], c[1], c[2], c[3]) for c in calls]
    assert "Input tokens" not in r.stdout  # stdout keeps the answer (and the explain blocks asked for)


def test_show_usage_without_explain_leaves_stdout_to_the_answer(embedded_deployment, llm):
    r = embedded_deployment.ok("tg-invoke-graph-rag", "-q", GRAPH_QUESTION, "--show-usage", env=llm_env(llm))
    assert r.stdout.strip() == ANSWER
    calls, totals = usage_lines(r.stderr)
    assert len(calls) == 2 and totals[2] == MODEL


def test_show_usage_through_the_gateway(embedded_deployment, llm, tmp_path):
    d = dataclasses.replace(embedded_deployment, env={**embedded_deployment.env, **llm_env(llm)})
    gateway = start_gateway(d, tmp_path)
    try:
        r = d.ok("tg-invoke-graph-rag", "-q", GRAPH_QUESTION, "--show-usage", "--api-url", gateway.url)
    finally:
        gateway.stop()
    assert r.stdout.strip() == ANSWER
    calls, (in_total, _out, model) = usage_lines(r.stderr)
    assert [c[0] for c in calls] == ["edge selection", "synthesis"] and model == MODEL and in_total > 0


def test_a_timed_out_llm_call_is_cancelled_at_the_server_and_names_the_setting(embedded_deployment, llm):
    d = embedded_deployment
    llm.slow_next(1, 60.0)
    t0 = time.monotonic()
    r = d.run("tg-invoke-graph-rag", "-q", GRAPH_QUESTION, "--llm-timeout", "2", "--llm-max-retries", "0",
              env=llm_env(llm))
    assert_clean_failure(r, EXIT_FAILED, contains="--llm-timeout")
    assert "timed out after 2s" in r.stderr, r.explain()
    assert time.monotonic() - t0 < 50
    deadline = time.monotonic() + 10
    while not llm.disconnects and time.monotonic() < deadline:
        time.sleep(0.1)
    [gone] = llm.disconnects
    assert gone.template_id == "kg-edge-selection" and gone.after_seconds < 30
    # the server is free again: the next question does not wait behind the abandoned generation
    t1 = time.monotonic()
    again = d.ok("tg-invoke-graph-rag", "-q", GRAPH_QUESTION, env=llm_env(llm))
    assert again.stdout.strip() == ANSWER
    assert time.monotonic() - t1 < 45


@pytest.mark.parametrize("args, env, contains", [
    (["--timeout", "10", "--llm-timeout", "300"], {}, "--timeout 10 is shorter than an LLM call may take"),
    (["--llm-max-tokens", "0"], {}, "'--llm-max-tokens'"),
    (["--llm-max-retries", "-1"], {}, "'--llm-max-retries'"),
    (["--llm-timeout", "nan"], {}, "'--llm-timeout'"),
    ([], {"TG_LLM_TIMEOUT": "soon"}, "TG_LLM_TIMEOUT='soon' is not a number"),
    ([], {"TG_LLM_MAX_TOKENS": "0"}, "TG_LLM_MAX_TOKENS must be a whole number from 1"),
], ids=["timeout-below-llm", "max-tokens", "max-retries", "timeout-nan", "env-timeout", "env-max-tokens"])
def test_bad_llm_settings_are_refused(embedded_deployment, llm, args, env, contains):
    r = embedded_deployment.run("tg-invoke-graph-rag", "-q", GRAPH_QUESTION, *args, env={**llm_env(llm), **env})
    assert_clean_failure(r, EXIT_USAGE, contains=contains)
    assert llm.chat_requests() == []


def test_show_usage_needs_the_agents_trace(embedded_deployment, llm):
    r = embedded_deployment.run("tg-invoke-agent", "-q", GRAPH_QUESTION, "--show-usage", "--no-trace",
                                env=llm_env(llm))
    assert_clean_failure(r, EXIT_USAGE, contains="leave out --no-trace")
    assert llm.chat_requests() == []


def test_the_llm_max_tokens_setting_reaches_the_request(embedded_deployment, llm):
    embedded_deployment.ok("tg-invoke-document-rag", "-q", "What is the curie?", "--llm-max-tokens", "77",
                           env=llm_env(llm))
    assert [r.body["max_tokens"] for r in llm.chat_requests()] == [77]


def test_an_interrupted_command_disconnects_its_llm_call(embedded_deployment, llm):
    """Ctrl-C cancels the embedded query at once: its LLM call closes its connection and the server stops."""
    import signal

    from e2e_support import script, start_at_a_terminal

    d = embedded_deployment
    llm.slow_next(1, 60.0)
    argv = [script("tg-invoke-graph-rag"), "-U", d.user, "-q", GRAPH_QUESTION]
    proc = start_at_a_terminal(argv, {**d.env, **llm_env(llm)})
    try:
        deadline = time.monotonic() + 60
        while not llm.chat_requests() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert llm.chat_requests(), "the command never called the LLM"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        # generous bounds: on a loaded CI machine the command's shutdown and the server's notice are slower, and
        # the generation it interrupts lasts 60 s, so any disconnect recorded at all came before its end
        _out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and "Error: interrupted" in err, (proc.returncode, err)
    deadline = time.monotonic() + 30
    while not llm.disconnects and time.monotonic() < deadline:
        time.sleep(0.1)
    gone = llm.disconnects
    requests = [r.template_id for r in llm.chat_requests()]
    assert len(gone) == 1, (gone, requests, err)
    assert gone[0].template_id == "kg-edge-selection" and gone[0].after_seconds < 60, (gone, requests)


def test_load_document_passes_the_settings_to_llm_extraction(embedded_deployment, tmp_path):
    """tg-load-document's LLM extractor (kg-extract -> prompt -> text-completion) runs with the command's settings."""

    def extraction(template_id, terms, messages):
        if template_id == "extract-relationships":
            return json.dumps({"subject": "Irène Joliot-Curie", "predicate": "discovered",
                               "object": "artificial radioactivity", "object-entity": True})
        if template_id == "extract-definitions":
            return json.dumps({"entity": "artificial radioactivity", "definition": "radioactivity made in a lab"})
        raise AssertionError(f"unexpected template {template_id}")

    doc = tmp_path / "joliot.txt"
    doc.write_text("Irène Joliot-Curie discovered artificial radioactivity in 1934 with Frédéric Joliot.\n")
    with start_server("scripted", script=extraction, model=MODEL) as server:
        embedded_deployment.ok("tg-load-document", str(doc), "-C", "llmload", "--llm-max-tokens", "99",
                               "--llm-timeout", "30", env=llm_env(server))
        requests = server.chat_requests()
    assert {r.template_id for r in requests} == {"extract-relationships", "extract-definitions"}
    assert {r.body["max_tokens"] for r in requests} == {99}
