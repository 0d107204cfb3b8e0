"""llama.cpp's OpenAI-compatible server for one test session, driven by ``scripts/llama.sh``, and a recorder.

:class:`LlamaServer` starts the server in a run directory of its own on a free port (so it never meets a
server a user runs), waits for ``/v1/models`` and stops it by PID at the end; a watchdog in its own session
stops it if the test process dies first.  :class:`RecordingProxy` sits between the services and the server
and keeps every request and reply, so a test can compare what the model was offered (the candidate edges of
an edge-selection prompt) with what the trace says was selected.  It forwards bytes as they come (streamed
answers stay streamed) and answers nothing itself.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
LLAMA_SH = REPO / "scripts" / "llama.sh"


class LlamaUnavailable(RuntimeError):
    """The server cannot run here: not built, no model, or it did not start."""


@dataclass
class LlamaServer:
    """One llama.cpp server for a session.

    :param run_dir: pid, log and settings (``LLAMA_RUN`` of ``scripts/llama.sh``).
    :param model: ``0.5b`` or ``1.5b``.
    :param ctx: the server's context size in tokens.
    """

    run_dir: Path
    model: str
    ctx: int = 8192
    base_url: str = ""
    alias: str = ""
    start_seconds: float = 0.0
    events: list[str] = field(default_factory=list)

    def _env(self) -> dict[str, str]:
        return {**os.environ, "LLAMA_RUN": str(self.run_dir), "LLAMA_PORT": "0", "LLAMA_CTX": str(self.ctx),
                "LLAMA_MODEL": self.model}

    def script(self, *args: str, timeout: float = 300) -> str:
        """Run ``scripts/llama.sh args``; raise :class:`LlamaUnavailable` with its output on failure."""
        try:
            r = subprocess.run(["bash", str(LLAMA_SH), *args], env=self._env(), capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise LlamaUnavailable(f"llama.sh {' '.join(args)} did not finish within {timeout:.0f} s") from e
        if r.returncode != 0:
            raise LlamaUnavailable(f"llama.sh {' '.join(args)} failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
        return r.stdout + r.stderr

    def missing(self) -> str | None:
        """Why the server cannot start (not built, model not assembled), or None."""
        r = subprocess.run(["bash", str(LLAMA_SH), "status"], env=self._env(), capture_output=True, text=True,
                           timeout=60)
        out = r.stdout + r.stderr
        if "build: missing" in out:
            return "llama-cpp-python is not built: run bash scripts/llama.sh ensure " + self.model
        if "models:" in out and self.model not in out.split("models:", 1)[1]:
            return f"the {self.model} model is not assembled: run bash scripts/llama.sh model {self.model}"
        return None

    def start(self) -> None:
        """Start the server, wait until it answers, and read its URL and model name."""
        t0 = time.monotonic()
        self.script("start")
        self._guard()
        self.script("wait")
        self.start_seconds = time.monotonic() - t0
        line = self.script("env").strip().splitlines()[0]
        values = dict(item.split("=", 1) for item in line.removeprefix("export ").split())
        self.base_url, self.alias = values["OPENAI_BASE_URL"], values["OPENAI_MODEL"]
        self.events.append(f"started in {self.start_seconds:.1f} s at {self.base_url} ({self.alias})")

    def _guard(self) -> None:
        """Stop the server if this process dies without calling :meth:`stop` (own session: survives Ctrl-C)."""
        watchdog = f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 2; done; exec bash {str(LLAMA_SH)!r} stop"
        self._watchdog = subprocess.Popen(["bash", "-c", watchdog], env=self._env(), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True)

    def stop(self) -> None:
        """Stop the server by PID (``llama.sh stop`` escalates to SIGKILL); never raises."""
        watchdog = getattr(self, "_watchdog", None)
        if watchdog is not None:
            watchdog.kill()
            watchdog.wait()
        try:
            self.script("stop", timeout=60)
            self.events.append("stopped")
        except LlamaUnavailable as e:
            self.events.append(f"stop failed: {e}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join((self.run_dir / "llama.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass
class Exchange:
    """One request through the proxy: its JSON body, the reply's status and text, and how long it took."""

    path: str
    request: dict[str, Any]
    status: int
    reply: str
    seconds: float


def usage_of(e: Exchange) -> dict | None:
    """The usage a reply reported (the last SSE chunk's, for a streamed one), or None."""
    if e.request.get("stream"):
        for line in reversed(e.reply.splitlines()):
            if line.startswith("data: {"):
                usage = json.loads(line[6:]).get("usage")
                if usage:
                    return usage
        return None
    try:
        return json.loads(e.reply).get("usage")
    except ValueError:
        return None


class RecordingProxy:
    """A loopback HTTP proxy to ``upstream`` (``http://127.0.0.1:<port>``) that records every exchange."""

    def __init__(self, upstream: str):
        host_port = upstream.split("://", 1)[1].split("/", 1)[0]
        self.upstream_host, _, port = host_port.partition(":")
        self.upstream_port = int(port)
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet: pytest shows failures, not every request
                pass

            def do_GET(self) -> None:
                proxy._forward(self, b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                proxy._forward(self, self.rfile.read(length))

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="recording-proxy", daemon=True)
        self._thread.start()

    def url(self, path: str = "/v1") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        t0 = time.monotonic()
        upstream = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=1800)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host", "connection",
                                                                                  "accept-encoding")}
        upstream.request(handler.command, handler.path, body=body or None, headers=headers)
        resp = upstream.getresponse()
        handler.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                handler.send_header(k, v)
        handler.send_header("Connection", "close")
        handler.end_headers()
        received = bytearray()
        try:
            while True:  # passed on as it arrives: a streamed answer stays streamed
                piece = resp.read1(65536)
                if not piece:
                    break
                received += piece
                handler.wfile.write(piece)
                handler.wfile.flush()
        finally:
            upstream.close()
            handler.close_connection = True
            try:
                request = json.loads(body) if body else {}
            except ValueError:
                request = {"raw": body.decode(errors="replace")}
            with self._lock:
                self.exchanges.append(Exchange(handler.path, request, resp.status, received.decode(errors="replace"),
                                               time.monotonic() - t0))

    def chats(self) -> list[Exchange]:
        with self._lock:
            return [e for e in self.exchanges if e.path.endswith("/chat/completions")]

    def summary(self) -> list[str]:
        """One line per exchange: path, task, streamed or not, status, tokens, seconds."""
        lines = []
        for e in list(self.exchanges):
            task = ""
            for m in e.request.get("messages", []):
                if m.get("role") == "system" and str(m.get("content", "")).startswith("task: "):
                    task = str(m["content"]).split("\n", 1)[0].removeprefix("task: ")
            lines.append(f"{e.path} {task or '-'} stream={bool(e.request.get('stream'))} {e.status} "
                         f"{usage_of(e) or ''} {e.seconds:.1f} s")
        return lines

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
