"""The LLM the service benchmarks talk to, and the processor settings of a benchmark stack.

The LLM is the project's OpenAI-compatible test server in a process of its own (so its CPU
is not the benchmark's), with a fixed latency per answer; every stack of a run shares one
loaded local embedder with its cache off, and runs its handlers with :data:`CONCURRENCY`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from functools import lru_cache
from typing import Any

from .deployment import CONCURRENCY

LLM_LATENCY_MS = 50.0


class LlmEndpoint:
    """The project's OpenAI-compatible server in its own process (so its CPU is not ours).

    :param mode: ``extractive`` (deterministic answers) or ``scripted`` (``script``: a list, or
        replies per template id, see :mod:`trustgraph_flow.model.testserver`).
    :param latency_ms: fixed delay of every answer.
    """

    def __init__(self, mode: str = "extractive", latency_ms: float = LLM_LATENCY_MS, script: Any = None):
        import json

        self._script_file = None
        cmd = [sys.executable, "-m", "trustgraph_flow.model.testserver", "--mode", mode,
               "--latency-ms", str(latency_ms), "--log-level", "WARNING"]
        if script is not None:
            fd, self._script_file = tempfile.mkstemp(prefix="tg-bench-script-", suffix=".json")
            with os.fdopen(fd, "w") as f:
                json.dump(script, f)
            cmd += ["--script", self._script_file]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        stdout = self.proc.stdout
        if stdout is None:  # stdout=PIPE always gives one
            raise RuntimeError("the LLM test server has no stdout pipe")
        line = stdout.readline().strip()
        if not line.startswith("http://127.0.0.1:"):
            self.proc.kill()
            raise RuntimeError(f"the LLM test server did not start (said {line!r})")
        self.base_url = line
        self.latency_ms = latency_ms

    def settings(self, **extra: dict) -> dict[str, dict]:
        """Processor settings: text-completion pointed at this endpoint, plus ``extra`` per processor."""
        out = {"text-completion": {"base_url": self.base_url, "api_key": "bench", "model": "bench",
                                   "max_retries": 1, "timeout": 60.0}}
        for pid, params in extra.items():
            out.setdefault(pid, {}).update(params)
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self._script_file:
            os.unlink(self._script_file)

    def __enter__(self) -> LlmEndpoint:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@lru_cache(maxsize=1)
def shared_embedder():
    """One loaded local embedder for every stack of this process, cache off (repeated questions are embedded again)."""
    from trustgraph_flow.model.embeddings import LocalEmbedder

    embedder = LocalEmbedder(cache_size=0)
    embedder.load()
    return embedder


def stack_settings(llm: LlmEndpoint, concurrency: bool = True, **extra: dict) -> dict[str, dict]:
    """Settings for a benchmark stack: the LLM endpoint, the shared embedder, handler concurrency."""
    settings = llm.settings(embeddings={"embedder": shared_embedder()})
    if concurrency:
        for pid, n in CONCURRENCY.items():
            settings.setdefault(pid, {})["concurrency"] = n
    for pid, params in extra.items():
        settings.setdefault(pid, {}).update(params)
    return settings
