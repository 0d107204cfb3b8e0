"""Helpers of the e2e tier: run the tg-* console scripts, start the services as OS processes, read output.

Nothing here imitates a component: commands and services are the installed console scripts,
run as subprocesses; this module only starts them, waits for them and parses what they print.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from trustgraph_flow.manifest import PROCESSORS

#: The questions the ``asked`` fixture puts to every deployment (answerable from the sample corpus).
GRAPH_QUESTION = "Who discovered radium?"
DOC_QUESTION = "What is the unit of radioactivity?"
AGENT_QUESTION = "Who discovered polonium?"

#: The directory holding the console scripts of the interpreter running the tests (the venv).
BIN = Path(sys.executable).parent


def script(name: str) -> str:
    """Absolute path of console script ``name`` (the venv's own, never a stray one on PATH)."""
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"console script {name} is not installed (pip install -e . in the venv)")
    return found


@dataclass
class CliResult:
    """What one command did."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    pgid: int = 0

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]

    def explain(self) -> str:
        """A readable summary for assertion messages."""
        return (f"$ {' '.join(self.args)}\nexit {self.returncode} after {self.seconds:.1f} s\n"
                f"--- stdout ---\n{self.stdout[-3000:]}\n--- stderr ---\n{self.stderr[-3000:]}")


def start_at_a_terminal(args: Sequence[str], env: dict[str, str]) -> subprocess.Popen:
    """Start a command in its own session with Ctrl-C (SIGINT) as a terminal delivers it.

    A test run started in the background of a non-interactive shell ignores SIGINT, children
    inherit that, and a command then keeps ignoring it (as it should in a shell's background):
    it would never see the Ctrl-C a test sends.
    """
    return subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def base_env(extra: dict[str, str] | None = None, drop: Sequence[str] = ()) -> dict[str, str]:
    """The environment of a command: the test's, minus server/LLM settings a command must not inherit."""
    env = dict(os.environ)
    for key in ("PULSAR_URL", "TG_HOME", "TG_FLOW", "TG_STORE", "OPENAI_BASE_URL", "OPENAI_API_KEY", "LLM_BACKEND",
                "TG_DEBUG", "TRUSTGRAPH_URL", "TRUSTGRAPH_TOKEN", *drop):
        env.pop(key, None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def run_cli(command: str, *args: str, env: dict[str, str], timeout: float = 180.0) -> CliResult:
    """Run console script ``command`` with ``args`` and wait for it (killing its process group on timeout)."""
    argv = [script(command), *args]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        out, err = proc.communicate()
        raise AssertionError(f"{command} did not finish within {timeout} s\n"
                             + CliResult(argv, -1, out, err, time.monotonic() - t0).explain()) from None
    return CliResult(argv, proc.returncode, out, err, time.monotonic() - t0, proc.pid)


EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 1, 2, 3, 130


def assert_clean_failure(r: CliResult, code: int | None = None, *, contains: str = "") -> None:
    """The bad-input promise: non-zero exit, exactly one ``Error:`` line on stderr, empty stdout."""
    assert r.returncode != 0, r.explain()
    if code is not None:
        assert r.returncode == code, r.explain()
    assert r.stdout == "", r.explain()
    assert "Traceback" not in r.stderr, r.explain()
    assert len(r.stderr_lines) == 1 and r.stderr_lines[0].startswith("Error: "), r.explain()
    assert contains in r.stderr_lines[0], r.explain()
    assert processes_in_group(r.pgid) == [], r.explain()


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def processes_in_group(pgid: int) -> list[int]:
    """Pids of the live (non-zombie) processes of a process group."""
    import psutil

    out = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.info["pid"]) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p.info["pid"])
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


# --------------------------------------------------------------------------- output parsing

_HEADER = re.compile(r"^\[(question|grounding|exploration|focus|synthesis|analysis|observation|conclusion|error)\] "
                     r"(\S+)$")


@dataclass
class ExplainBlock:
    """One ``[stage] uri`` block of ``-x`` output and its indented lines."""

    stage: str
    uri: str
    lines: list[str] = field(default_factory=list)

    def value(self, key: str) -> str | None:
        """The text after ``Key:`` on the first line that starts with it (indentation ignored)."""
        for line in self.lines:
            s = line.strip()
            if s.startswith(key + ":"):
                return s[len(key) + 1:].strip()
        return None


@dataclass
class SelectedEdge:
    labels: tuple[str, str, str]
    reason: str
    sources: list[str]


def parse_explain(stdout: str) -> tuple[list[ExplainBlock], str]:
    """Split ``-x`` output into explain blocks and the remaining text (the answer, thoughts)."""
    blocks: list[ExplainBlock] = []
    rest: list[str] = []
    current: ExplainBlock | None = None
    for line in stdout.splitlines():
        m = _HEADER.match(line)
        if m:
            current = ExplainBlock(m.group(1), m.group(2))
            blocks.append(current)
        elif current is not None and line.startswith("    "):
            current.lines.append(line)
        else:
            current = None
            if line.strip():
                rest.append(line)
    return blocks, "\n".join(rest)


_EDGE = re.compile(r"^\s+Edge: \((.*)\)$")


def focus_edges(block: ExplainBlock) -> list[SelectedEdge]:
    """The selected edges of a ``[focus]`` block with their Reason and Source lines."""
    edges: list[SelectedEdge] = []
    for line in block.lines:
        m = _EDGE.match(line)
        if m:
            parts = m.group(1).split(", ")
            # labels may contain ", ": the predicate is the middle part of three only when there are three
            labels = (parts[0], parts[1], ", ".join(parts[2:])) if len(parts) >= 3 else (m.group(1), "", "")
            edges.append(SelectedEdge(labels, "", []))
        elif edges and line.strip().startswith("Reason:"):
            edges[-1].reason = line.strip()[len("Reason:"):].strip()
        elif edges and line.strip().startswith("Source:"):
            edges[-1].sources.append(line.strip()[len("Source:"):].strip())
    return edges


# --------------------------------------------------------------------------- distributed services

#: Processor groups of the distributed fixture: group name -> processor ids of the service manifest (each
#: group's processors log "<id> started" when it is ready).
#:
#: Layout rule (docs/deployment.md): at most one client of a service per OS process.  A
#: service's replies go to one non-persistent response topic that every client subscribes to
#: (filtering by request id); Pulsar drops a non-persistent message for a subscriber whose
#: connection is momentarily not writable, which happens when one process holds two such
#: subscriptions and a reply is large (an embeddings batch is >100 kB).  Clients: embeddings
#: (both vector writers, graph-rag, document-rag), librarian (decoder, chunker, kg-extract,
#: trace-admin, graph-rag, document-rag), prompt (graph-rag, document-rag, agent).
GROUPS: dict[str, list[str]] = {
    "stores": ["triples-write", "triples-query", "trace-admin", "librarian", "graph-embeddings-query",
               "document-embeddings-query", "embeddings", "prompt"],
    "decode": ["decoder", "graph-embeddings-write", "agent-manager-react"],
    "chunk": ["chunker", "document-embeddings-write"],
}
#: Services started as their own console scripts (so that way of launching is exercised too):
#: script -> its own options (the bus options are added by the fixture).
SINGLE: dict[str, list[str]] = {
    "graph-rag": [],
    "document-rag": [],
    "kg-extract": ["--extractor", "pattern"],
}


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def group_config(name: str, pulsar_url: str, flow: str, cassandra_host: str, cassandra_port: int) -> str:
    """The ``tg-processor-group`` TOML of group ``name`` (Pulsar bus, Cassandra stores, extractive LLM)."""
    lines = ['pubsub = "pulsar"', f"pulsar_url = {_toml_str(pulsar_url)}", f"flow = {_toml_str(flow)}", ""]
    for pid in GROUPS[name]:
        lines += ["[[processor]]", f"service = {_toml_str(pid)}"]
        if PROCESSORS[pid].stores:
            lines += ["[processor.params]", 'store = "cassandra"',
                      f"store_options = {{hosts = {_toml_str(cassandra_host)}, port = {int(cassandra_port)}}}"]
        elif pid in ("prompt", "kg-extract"):
            lines += ["[processor.params]", 'llm = "extractive"' if pid == "prompt" else 'extractor = "pattern"']
        lines.append("")
    return "\n".join(lines)


@dataclass
class ServiceProcess:
    """One service OS process (a console script), its log file and the ids that must report started."""

    name: str
    argv: list[str]
    log_path: Path
    ready_ids: list[str]
    proc: subprocess.Popen | None = None

    def start(self, env: dict[str, str]) -> None:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def ready(self) -> bool:
        text = self.log_text()
        return all(re.search(rf" {re.escape(pid)} started \(", text) for pid in self.ready_ids)

    def terminate(self) -> None:
        """Ask for a graceful stop (SIGTERM: in-flight messages finish first)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 40.0) -> list[int]:
        """SIGTERM, SIGKILL after ``timeout``; returns pids of the process group still alive after."""
        if self.proc is None:
            return []
        pgid = self.proc.pid
        self.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_group(pgid)
            self.proc.wait(10)
        self._log.close()
        deadline = time.monotonic() + 10
        left = processes_in_group(pgid)
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = processes_in_group(pgid)
        if left:
            kill_group(pgid)
        return left


def wait_ready(services: list[ServiceProcess], timeout: float) -> None:
    """Wait until every service logged that its processors started; fail early when one exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for s in services:
            if s.proc is not None and s.proc.poll() is not None:
                raise RuntimeError(f"service {s.name} exited with {s.proc.returncode}:\n{s.log_text()[-4000:]}")
        if all(s.ready() for s in services):
            return
        time.sleep(0.25)
    late = [s.name for s in services if not s.ready()]
    raise RuntimeError(f"services not ready after {timeout:.0f} s: {late}\n"
                       + "\n".join(f"--- {s.name}\n{s.log_text()[-2000:]}" for s in services if s.name in late))


# --------------------------------------------------------------------------- the gateway

#: Seconds a gateway process may take to answer its index.
GATEWAY_START_SECONDS = 120.0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class GatewayProcess:
    """A gateway OS process (``tg-gateway`` or ``api-gateway``) and its base URL."""

    url: str
    proc: subprocess.Popen
    log_path: Path

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> int:
        """SIGTERM (SIGKILL of its process group after 60 s); returns its exit status."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            kill_group(self.proc.pid)
            return self.proc.wait(10)


def start_gateway(deployment, workdir: Path, *options: str) -> GatewayProcess:
    """The gateway of ``deployment`` (``tg-gateway`` over its ``TG_HOME``, or ``api-gateway`` over its Pulsar and
    flow, next to its services) on a free port, with ``options``; returns once it answers."""
    import json
    import urllib.request

    port = free_port()
    common = ["--port", str(port), "--default-user", deployment.user, "--log-level", "INFO", *options]
    if deployment.distributed:
        argv = [script("api-gateway"), "--pubsub", "pulsar", "--pulsar-url", deployment.env["PULSAR_URL"],
                "--flow", deployment.flow, *common]
    else:
        argv = [script("tg-gateway"), "--home", deployment.env["TG_HOME"], *common]
    log = workdir / f"gateway-{deployment.kind}-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=deployment.env, start_new_session=True)
    gw = GatewayProcess(f"http://127.0.0.1:{port}/", proc, log)
    deadline = time.monotonic() + GATEWAY_START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the gateway exited with {proc.returncode}:\n{gw.log_text()[-3000:]}")
        try:
            with urllib.request.urlopen(gw.url, timeout=2) as resp:
                if json.loads(resp.read())["service"] == "api-gateway":
                    return gw
        except OSError:
            time.sleep(0.25)
    kill_group(proc.pid)
    raise RuntimeError(f"the gateway did not answer within {GATEWAY_START_SECONDS:g} s:\n{gw.log_text()[-3000:]}")


@contextmanager
def running_llm_server(*options: str) -> Iterator[str]:
    """The project's OpenAI-compatible test server (``tg-test-llm-server``) as a subprocess; yields its base URL."""
    proc = subprocess.Popen([script("tg-test-llm-server"), "--port", "0", *options], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()
