"""The load generator on the embedded stack (a short run) and its safety limits (loopback only, bounded)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.service, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]


def load(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.load", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def test_short_embedded_run_stores_one_complete_trace_per_answer(tmp_path):
    out = tmp_path / "load.json"
    r = load("--seconds", "2", "--concurrency", "3", "--json", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(out.read_text())["load"]
    assert d["stack"] == "embedded" and d["answered"] > 0 and d["errors"] == 0, d
    assert d["traces_complete"] == d["traces_listed"] == d["answered"] and d["traces_match"] is True
    assert d["latency_p50_s"] <= d["latency_p99_s"]


@pytest.mark.parametrize("url", ["pulsar://10.1.2.3:6650", "pulsar://192.0.2.7:6650,127.0.0.1:6650",
                                 "http://127.0.0.1:6650", "pulsar://"])
def test_refuses_anything_but_loopback_pulsar(url):
    r = load("--pulsar-url", url, "--seconds", "1", timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "loopback" in r.stderr or "invalid Pulsar URL" in r.stderr


@pytest.mark.parametrize("args", [["--seconds", "0"], ["--seconds", "100000"], ["--concurrency", "0"],
                                  ["--concurrency", "65"], ["--seconds", "abc"]])
def test_refuses_unbounded_runs(args):
    r = load(*args, timeout=60)
    assert r.returncode == 2 and ("must be between" in r.stderr or "invalid" in r.stderr), r.stderr
