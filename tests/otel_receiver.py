"""Arize Phoenix as a real OpenTelemetry receiver for the tracing tests (docs/observability.md).

Phoenix comes from ``scripts/phoenix.sh`` (a venv of its own, cached outside the repository), serves
OTLP over HTTP/protobuf and a REST API on free ports of 127.0.0.1 with a working directory of its own,
and hands spans back through that API.  When it cannot be installed or started a test skips, and
fails under ``CI=true`` / ``REQUIRE_INTEGRATION=1``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PHOENIX_START_SECONDS = 180.0


def _required() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.environ.get("REQUIRE_INTEGRATION") == "1"


def _unavailable(message: str) -> None:
    if _required():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def flat_attributes(attributes: dict, prefix: str = "") -> dict[str, Any]:
    """Phoenix nests dotted attribute names (``gen_ai.usage`` -> {"gen_ai": {"usage": ...}}); flatten them."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat_attributes(value, name + "."))
        else:
            out[name] = value
    return out


@dataclass
class Phoenix:
    """A running Phoenix server: its OTLP/HTTP endpoint and its REST API."""

    url: str
    log: Path

    @property
    def traces_endpoint(self) -> str:
        return f"{self.url}/v1/traces"

    def spans(self, trace_id: str, *, at_least: int = 1, timeout: float = 60.0, root_parent: str = "") -> list[dict]:
        """The spans of ``trace_id`` once the trace is whole: ``at_least`` spans, a root, every parent present,
        and no new span for a second (Phoenix ingests in the background).

        :param root_parent: the span id the root's parent has when the trace began outside (a caller's
            ``traceparent``); that parent is not among the spans.
        """
        deadline = time.monotonic() + timeout
        found: list[dict] = []
        seen = -1
        while True:
            found = [s for s in self._all_spans() if s["context"]["trace_id"] == trace_id]
            ids = {s["context"]["span_id"] for s in found} | ({root_parent} if root_parent else set())
            whole = (len(found) >= at_least and any((s["parent_id"] or "") == root_parent for s in found)
                     and all(s["parent_id"] in ids for s in found if s["parent_id"]))
            if (whole and len(found) == seen) or time.monotonic() > deadline:
                return found
            seen = len(found) if whole else -1
            time.sleep(1.0)

    def _all_spans(self) -> list[dict]:
        out: list[dict] = []
        cursor = ""
        while True:
            query = "limit=1000" + (f"&cursor={cursor}" if cursor else "")
            with urllib.request.urlopen(f"{self.url}/v1/projects/default/spans?{query}", timeout=30) as r:
                page = json.loads(r.read())
            out += page["data"]
            cursor = page.get("next_cursor") or ""
            if not cursor:
                return out


@contextlib.contextmanager
def start_phoenix(workdir: Path) -> Iterator[Phoenix]:
    """Install (once, cached) and run ``phoenix serve`` in ``workdir``; stopped when the block ends."""
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "phoenix.sh"), "ensure"], capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0:
        _unavailable(f"cannot install Arize Phoenix (scripts/phoenix.sh): {proc.stderr.strip()[-1000:]}")
    bin_dir = Path(proc.stdout.strip().splitlines()[-1])
    port = _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(_free_port())}
    for name in [n for n in env if n.startswith("OTEL_")]:
        del env[name]  # Phoenix must not trace itself with the suite's settings
    log = workdir / "phoenix.log"
    with open(log, "wb") as out:
        server = subprocess.Popen([str(bin_dir / "phoenix"), "serve"], env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + PHOENIX_START_SECONDS
        while True:
            if server.poll() is not None:
                _unavailable(f"phoenix serve exited with {server.returncode}: "
                             f"{log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                _unavailable(f"phoenix serve not ready after {PHOENIX_START_SECONDS:.0f} s")
            time.sleep(1)
        yield Phoenix(url, log)
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
