"""scripts/llama.sh refuses bad input with a clear message and never touches a real cache here.

Each case runs the script with an empty ``LLAMA_HOME`` of its own (nothing built, no model), so the
checks are instant; building, fetching and serving are the real-model tier's job (tests/realmodel).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

LLAMA_SH = Path(__file__).resolve().parents[2] / "scripts" / "llama.sh"


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(["bash", str(LLAMA_SH), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LLAMA_HOME": str(tmp_path / "llama"), **env})


def test_unknown_command_prints_usage(tmp_path):
    r = run(tmp_path, "launch")
    assert r.returncode == 64 and "scripts/llama.sh build" in r.stderr


def test_unknown_model_is_refused(tmp_path):
    r = run(tmp_path, "model", "7b")
    assert r.returncode == 1 and "unknown model '7b': 0.5b or 1.5b" in r.stderr
    assert not (tmp_path / "llama" / "models").exists()


def test_start_without_a_build_says_what_to_run(tmp_path):
    r = run(tmp_path, "start", "1.5b")
    assert r.returncode == 1 and "llama-cpp-python is not built: run" in r.stderr and "build" in r.stderr


def test_status_and_env_of_a_stopped_server(tmp_path):
    status = run(tmp_path, "status")
    assert status.returncode == 3
    assert status.stdout.startswith("llama      stopped  (build: missing; models: )")
    env = run(tmp_path, "env")
    assert env.returncode == 1 and env.stdout == "" and "not running" in env.stderr


def test_stop_when_nothing_runs_is_a_no_op(tmp_path):
    r = run(tmp_path, "stop")
    assert r.returncode == 0 and "not running" in r.stderr
