"""Fixtures of the real-model tier: llama.cpp's OpenAI-compatible server with a small Qwen2.5 model.

Every other tier talks to the project's own OpenAI-compatible test server; this one runs the same services
against a real model, to find what a real model does to them.  ``TG_REAL_LLM=short`` runs the short form
(what ``.ci/run`` runs: one ingestion with LLM extraction, one GraphRAG, one DocumentRAG, one agent question
with a tool call, streaming on, on the embedded stack); ``TG_REAL_LLM=full`` adds the tests marked
``real_llm_full`` (the same on the distributed stack: the integration Pulsar and Cassandra).  Without
``TG_REAL_LLM`` its tests are deselected, so ``pytest`` alone never starts a model.  It needs
``bash scripts/llama.sh ensure`` (the compiled server and the model, cached outside the repository); the
server is this session's own, on a free port, stopped at the end even when tests fail.  Under ``CI=true``
anything missing is a failure, never a skip.  The tests assert structure and faithfulness, never wording.

    TG_REAL_LLM=short CI=true .venv/bin/python -m pytest tests/realmodel

``TG_REAL_LLM_MODEL`` picks the model (``1.5b``, the default, or ``0.5b``); ``TG_REAL_LLM_TIMEOUT`` the
deadline of one model call in seconds (default 600: a 1.5B model on two busy cores prefills about 60
tokens per second).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from private_servers import OptInTier, unavailable

HERE = Path(__file__).resolve().parent

#: The model the tier runs (docs/servers.md says why this one).
MODEL = os.environ.get("TG_REAL_LLM_MODEL", "1.5b")
#: Deadline of one model call (the text-completion service's ``timeout``); no retries: a retried request
#: would queue behind the abandoned one, which llama.cpp keeps computing.
LLM_TIMEOUT = float(os.environ.get("TG_REAL_LLM_TIMEOUT", "600"))


TIER = OptInTier("TG_REAL_LLM", "real_llm", "the real-model tier", HERE)


def tier() -> str:
    """``short``, ``full`` or ``""`` (the tier does not run)."""
    return TIER.form()


def pytest_configure(config) -> None:
    TIER.configure(config)


def pytest_collection_modifyitems(config, items) -> None:
    TIER.select(config, items)


@pytest.fixture(scope="session")
def llama(tmp_path_factory):
    """This session's llama.cpp server, behind a recording proxy; stopped at the end."""
    from llama_server import LlamaServer, LlamaUnavailable, RecordingProxy

    server = LlamaServer(tmp_path_factory.mktemp("llama-run"), MODEL)
    problem = server.missing()
    if problem:
        unavailable("the real-model tier cannot run", problem)
    try:
        try:
            server.start()
        except LlamaUnavailable as e:
            pytest.fail(f"could not start the llama.cpp server: {e}\n{server.log_tail()}", pytrace=False)
        proxy = RecordingProxy(server.base_url)
        try:
            yield RealModel(server, proxy)
        finally:
            print("\n[llama] model calls:\n    " + "\n    ".join(proxy.summary()))
            proxy.close()
    finally:
        server.stop()
        print("\n[llama] " + "; ".join(server.events))


class RealModel:
    """The running model as the services see it: the proxy's URL, the model's name, what was exchanged."""

    def __init__(self, server, proxy):
        self.server = server
        self.proxy = proxy
        self.model = server.alias

    @property
    def base_url(self) -> str:
        return self.proxy.url("/v1")

    def settings(self, **extra: dict) -> dict[str, dict]:
        """Processor settings that point ``text-completion`` at the model (``extra``: more per processor)."""
        settings: dict[str, dict] = {"text-completion": {"base_url": self.base_url, "api_key": "none",
                                                         "model": self.model, "timeout": LLM_TIMEOUT,
                                                         "max_retries": 0}}
        for pid, params in extra.items():
            settings.setdefault(pid, {}).update(params)
        return settings
