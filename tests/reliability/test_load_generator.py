"""The load generator (bench/load.py) against the distributed stack: a few seconds, then the counts.

It runs as the script a user would run (``python -m bench.load``), against this session's own
services on its own Pulsar and Cassandra (loopback), and must stop by itself.  The check is the
one the issue asks for: the number of stored (complete) traces equals the number of successful
responses, and a healthy stack answers every query.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from trace_audit import FAULT_MATRIX

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]


def test_load_generator_on_the_distributed_stack(fault_stack, tmp_path):
    out = tmp_path / "load.json"
    fault_stack.llm.set_latency(0)
    r = subprocess.run([sys.executable, "-m", "bench.load", "--pulsar-url", fault_stack.pair.pulsar_url,
                        "--flow", fault_stack.flow, "--user", fault_stack.user,
                        "--collection", fault_stack.collection, "--seconds", "6", "--concurrency", "4",
                        "--timeout", "60", "--settle", "120", "--json", str(out)],
                       cwd=REPO, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    print("\n" + r.stdout)
    d = json.loads(out.read_text())["load"]
    assert d["stack"] == "distributed" and d["concurrency"] == 4
    assert d["answered"] > 0 and d["errors"] == 0, d
    assert d["traces_complete"] == d["answered"] == d["traces_listed"], d
    assert d["traces_match"] is True
    FAULT_MATRIX.append(f"[load] distributed, {d['concurrency']} concurrent for 6 s: {d['answered']} answered, "
                        f"{d['errors']} errors, {d['traces_complete']} complete traces stored; "
                        + ", ".join(f"{f['name'].removeprefix('load: ')} {f['value']:.3g} {f['unit']}"
                                    for f in json.loads(out.read_text())["figures"]
                                    if "throughput" in f["name"] or "latency" in f["name"]))
    figures = {f["name"] for f in json.loads(out.read_text())["figures"]}
    assert {"load: throughput (answered queries)", "load: latency p50", "load: latency p99", "load: errors"} <= figures
