"""LLM call settings: flags and environment, validation, and the deadlines of the layers between caller and LLM."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from trustgraph_base.processor import ConfigurationError
from trustgraph_cli import common
from trustgraph_flow.common.services import SERVICES
from trustgraph_flow.model import llm_settings
from trustgraph_flow.model.llm_settings import LlmSettings, LlmSettingsError, reply_deadline
from trustgraph_flow.model.services import TextCompletionService

pytestmark = pytest.mark.unit


def test_environment_settings_and_defaults():
    assert LlmSettings.from_env({}) == LlmSettings(120.0, 3, 2048)
    s = LlmSettings.from_env({"TG_LLM_TIMEOUT": "900", "TG_LLM_MAX_RETRIES": "0", "TG_LLM_MAX_TOKENS": "512"})
    assert s == LlmSettings(900.0, 0, 512)
    assert LlmSettings.from_env(s.env()) == s


@pytest.mark.parametrize("env, named", [
    ({"TG_LLM_TIMEOUT": "soon"}, "TG_LLM_TIMEOUT"),
    ({"TG_LLM_TIMEOUT": "0"}, "TG_LLM_TIMEOUT"),
    ({"TG_LLM_TIMEOUT": "nan"}, "TG_LLM_TIMEOUT"),
    ({"TG_LLM_TIMEOUT": "1e9"}, "TG_LLM_TIMEOUT"),
    ({"TG_LLM_MAX_RETRIES": "-1"}, "TG_LLM_MAX_RETRIES"),
    ({"TG_LLM_MAX_RETRIES": "2.5"}, "TG_LLM_MAX_RETRIES"),
    ({"TG_LLM_MAX_TOKENS": "0"}, "TG_LLM_MAX_TOKENS"),
])
def test_bad_environment_values_name_the_variable(env, named):
    with pytest.raises(LlmSettingsError, match=named):
        LlmSettings.from_env(env)


def test_every_client_between_a_caller_and_the_llm_waits_longer_than_the_layer_inside(monkeypatch):
    """The inner deadline fires first, whatever the LLM timeout: the caller sees the LLM's own error."""
    monkeypatch.setenv("LLM_BACKEND", "openai")
    chain = ["text-completion", "prompt", "graph-rag", "agent"]  # each calls the one before it
    for llm_timeout in (1.0, 120.0, 590.0, 900.0, 3600.0):
        waits = [SERVICES[name].deadline(llm_timeout) for name in chain]
        assert waits[0] > llm_timeout
        assert all(outer > inner or outer == inner == 600.0 for inner, outer in zip(waits, waits[1:], strict=False)), \
            (llm_timeout, waits)
        assert all(w >= reply_deadline(llm_timeout, SERVICES[n].llm_hops) for n, w in zip(chain, waits, strict=True))
        # a command (one hop beyond the agent) waits longer than any deadline the LLM timeout sets inside
        cli = common.reply_wait(1.0, False, LlmSettings(timeout=llm_timeout))
        assert cli > max(reply_deadline(llm_timeout, SERVICES[n].llm_hops) for n in chain)
    # unchanged where the LLM timeout is short: the services' own defaults
    assert SERVICES["graph-rag"].deadline(120.0) == 600.0
    assert SERVICES["triples"].deadline(3600.0) == SERVICES["triples"].timeout


def test_client_deadlines_follow_the_environment(monkeypatch):
    from trustgraph_flow.common.services import client_spec

    monkeypatch.setenv("TG_LLM_TIMEOUT", "1800")
    assert client_spec("prompt", "default").timeout == 1800 + 2 * llm_settings.HOP_MARGIN
    assert client_spec("graph-rag", "default").timeout == 1800 + 3 * llm_settings.HOP_MARGIN
    assert client_spec("triples", "default").timeout == SERVICES["triples"].timeout


def _service_args(*argv: str) -> dict:
    parser = argparse.ArgumentParser()
    TextCompletionService.add_args(parser)
    params = TextCompletionService.params_from_args(parser.parse_args(list(argv)))
    return {**params, "base_url": "http://127.0.0.1:9/v1"}


def test_text_completion_reads_flags_then_environment(monkeypatch):
    monkeypatch.setenv("TG_LLM_TIMEOUT", "700")
    monkeypatch.setenv("TG_LLM_MAX_TOKENS", "100")
    from trustgraph_base.pubsub import open_backend

    backend = open_backend("memory")
    from_env = TextCompletionService(backend=backend, **_service_args())
    assert (from_env.llm.timeout, from_env.llm.max_retries, from_env.llm.max_tokens) == (700.0, 3, 100)
    flags = _service_args("--timeout", "30", "--max-retries", "1", "--llm-max-tokens", "64")
    from_flags = TextCompletionService(backend=backend, **flags)
    assert (from_flags.llm.timeout, from_flags.llm.max_retries, from_flags.llm.max_tokens) == (30.0, 1, 64)
    with pytest.raises(ConfigurationError, match="LLM timeout"):
        TextCompletionService(backend=backend, **_service_args("--timeout", "-5"))
    monkeypatch.setenv("TG_LLM_MAX_RETRIES", "many")
    with pytest.raises(ConfigurationError, match="TG_LLM_MAX_RETRIES"):
        TextCompletionService(backend=backend, **_service_args())


def test_the_text_completion_console_script_refuses_bad_settings():
    env = {**os.environ, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "TG_LLM_TIMEOUT": "forever"}
    code = "from trustgraph_flow.model.services import run_text_completion as run; run()"
    r = subprocess.run([sys.executable, "-c", code, "--pubsub", "memory"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2, r.stderr
    assert "TG_LLM_TIMEOUT='forever' is not a number" in r.stderr


@pytest.mark.parametrize("timeout, given, llm_timeout, expected", [
    (120.0, False, 120.0, 270.0),    # not given: as long as an LLM call may take
    (120.0, False, 900.0, 1050.0),
    (2000.0, True, 900.0, 2000.0),   # given and long enough: kept
])
def test_command_reply_wait_follows_the_llm_timeout(monkeypatch, timeout, given, llm_timeout, expected):
    monkeypatch.setenv("LLM_BACKEND", "openai")
    assert common.reply_wait(timeout, given, LlmSettings(timeout=llm_timeout)) == expected


def test_a_command_timeout_shorter_than_the_llm_timeout_is_refused(monkeypatch):
    monkeypatch.setenv("LLM_BACKEND", "openai")
    with pytest.raises(common.CliError) as raised:
        common.reply_wait(60.0, True, LlmSettings(timeout=300.0))
    assert raised.value.exit_code == common.EXIT_USAGE
    assert "--timeout 60" in raised.value.message and "--llm-timeout 300" in raised.value.message
    assert "--timeout 450 or more" in raised.value.message


def test_without_an_llm_the_command_timeout_stands(monkeypatch):
    monkeypatch.setenv("LLM_BACKEND", "extractive")
    assert common.reply_wait(5.0, True, LlmSettings(timeout=900.0)) == 5.0


def test_program_flags_win_over_the_environment(monkeypatch):
    parser = argparse.ArgumentParser()
    llm_settings.add_llm_args(parser)
    monkeypatch.setenv("TG_LLM_TIMEOUT", "400")
    monkeypatch.setenv("TG_LLM_MAX_RETRIES", "5")
    assert llm_settings.settings_from_args(parser.parse_args([])) == LlmSettings(400.0, 5, 2048)
    args = parser.parse_args(["--llm-timeout", "900", "--llm-max-tokens", "256"])
    assert llm_settings.settings_from_args(args) == LlmSettings(900.0, 5, 256)
    with pytest.raises(LlmSettingsError, match="--llm-max-retries"):
        llm_settings.settings_from_args(parser.parse_args(["--llm-max-retries", "99"]))


def test_tg_gateway_refuses_bad_llm_settings():
    r = subprocess.run([sys.executable, "-c", "from trustgraph_flow.gateway.service import embedded_main as m; m()",
                        "--llm-timeout", "-3"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--llm-timeout must be a number of seconds" in r.stderr, r.stderr
