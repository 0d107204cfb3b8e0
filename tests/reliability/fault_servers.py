"""A private Apache Pulsar + Apache Cassandra pair for fault tests: started, crashed, restarted, stopped.

Fault and load tests must only touch servers they started themselves on 127.0.0.1, so this
module runs a *second* pair with ``scripts/servers.sh`` on free, non-default ports and its
own ``IT_HOME`` (a temporary directory).  The fetched server folders (``pulsar-4.0.8``,
``cassandra-5.0.8``) are symlinked from the shared cache, so nothing is downloaded.

``servers.sh start`` always begins with fresh data, which is right for a new pair but not
for a restart: a restarted server must keep its data.  :meth:`ServerPair.restart` therefore
kills the JVM (``SIGKILL`` by default: a real crash) and launches the identical command line
again, in the same run directory, then records the new PID where ``servers.sh`` looks for it,
so ``servers.sh wait`` and ``servers.sh stop`` keep working.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVERS_SH = REPO / "scripts" / "servers.sh"
PULSAR_DIR = "pulsar-4.0.8"
CASSANDRA_DIR = "cassandra-5.0.8"
PORT_NAMES = ("PULSAR_PORT", "PULSAR_HTTP_PORT", "PULSAR_BOOKIE_PORT",
              "CASSANDRA_PORT", "CASSANDRA_STORAGE_PORT", "CASSANDRA_SSL_STORAGE_PORT")
#: Default ports of the shared pair: never used by a private pair.
DEFAULT_PORTS = {6650, 8080, 3181, 9042, 7000, 7001}
JAVA_17 = Path(os.environ.get("JAVA_HOME_17", "/usr/lib/jvm/java-17-openjdk-amd64")) / "bin" / "java"


class ServersUnavailable(RuntimeError):
    """The pair cannot be started here (no Java 17, no fetched jars, or a start that failed)."""


def shared_cache() -> Path:
    """Where ``servers.sh fetch`` put the jars: ``$IT_HOME`` (as ``.ci/run`` sets it) or ``~/.cache/tg-servers``."""
    return Path(os.environ.get("IT_HOME") or Path.home() / ".cache" / "tg-servers")


def missing_prerequisites() -> str | None:
    """Why a private pair cannot start on this machine, or None."""
    if not JAVA_17.exists():
        return f"no JDK 17 at {JAVA_17} (set JAVA_HOME_17)"
    cache = shared_cache()
    for name in (PULSAR_DIR, CASSANDRA_DIR):
        if not (cache / name / ".ready").exists():
            return f"{name} is not fetched into {cache} (run: scripts/servers.sh fetch all)"
    if shutil.which("setsid") is None:
        return "setsid (util-linux) is not installed"
    return None


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports() -> dict[str, int]:
    """Six free, distinct loopback ports, none of them a default port of the shared pair."""
    for _ in range(200):
        base = random.randrange(21000, 59000, 10)
        ports = {name: base + i for i, name in enumerate(PORT_NAMES)}
        if not DEFAULT_PORTS & set(ports.values()) and all(_port_free(p) for p in ports.values()):
            return ports
    raise ServersUnavailable("found no block of six free loopback ports")


@dataclass
class ServerPair:
    """One private Pulsar + Cassandra pair on 127.0.0.1.

    :param it_home: the pair's own ``IT_HOME`` (run dirs, pids, logs; server folders are symlinks).
    :param ports: ``PULSAR_PORT`` ... ``CASSANDRA_SSL_STORAGE_PORT``.
    """

    it_home: Path
    ports: dict[str, int]
    cassandra_heap: str = "1g"
    relaunched: list[subprocess.Popen] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    # ------------------------------------------------------------------ addresses
    @property
    def pulsar_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.ports['PULSAR_PORT']}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['PULSAR_HTTP_PORT']}"

    @property
    def cassandra_host(self) -> str:
        return "127.0.0.1"

    @property
    def cassandra_port(self) -> int:
        return self.ports["CASSANDRA_PORT"]

    def run_dir(self, name: str) -> Path:
        return self.it_home / "run" / name

    def log_path(self, name: str) -> Path:
        return self.run_dir(name) / f"{name}.log"

    # ------------------------------------------------------------------ servers.sh
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({k: str(v) for k, v in self.ports.items()})
        env.update({"IT_HOME": str(self.it_home), "IT_RUN": str(self.it_home / "run"), "PYTHON": sys.executable,
                    "CASSANDRA_HEAP": self.cassandra_heap, "IT_KEEP_DATA": "0"})
        return env

    def script(self, *args: str, timeout: float = 400.0) -> str:
        """Run ``scripts/servers.sh args`` for this pair.

        :raises ServersUnavailable: with the script's output, when it fails.
        """
        try:
            r = subprocess.run(["bash", str(SERVERS_SH), *args], env=self._env(), capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise ServersUnavailable(f"servers.sh {' '.join(args)} did not finish within {timeout:.0f} s") from e
        if r.returncode != 0:
            raise ServersUnavailable(f"servers.sh {' '.join(args)} failed (exit {r.returncode}):\n"
                                     f"{r.stderr[-4000:]}")
        return r.stdout + r.stderr

    @classmethod
    def create(cls, root: Path) -> ServerPair:
        """A pair under ``root`` whose server folders link to the shared cache (no download)."""
        problem = missing_prerequisites()
        if problem:
            raise ServersUnavailable(problem)
        root.mkdir(parents=True, exist_ok=True)
        for name in (PULSAR_DIR, CASSANDRA_DIR):
            link = root / name
            if not link.exists():
                link.symlink_to(shared_cache() / name, target_is_directory=True)
        return cls(root, free_ports())

    def start(self) -> None:
        """Start both JVMs and wait until they really answer (``servers.sh start all`` + ``wait all``)."""
        t0 = time.monotonic()
        self.script("start", "all")
        self.script("wait", "all")
        self.events.append(f"pair started in {time.monotonic() - t0:.0f} s")

    def guard(self, owner_pid: int) -> None:
        """Start a watchdog that stops this pair if process ``owner_pid`` dies without calling :meth:`stop`.

        It runs in its own session, so a Ctrl-C or kill of the test run's process group does not
        take it along before it has done its job.
        """
        env = self._env()
        watchdog = (f"while kill -0 {int(owner_pid)} 2>/dev/null; do sleep 2; done; "
                    f"exec bash {str(SERVERS_SH)!r} stop all")
        self._watchdog = subprocess.Popen(["bash", "-c", watchdog], env=env, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True)

    def stop(self) -> None:
        """Stop both JVMs (``servers.sh stop all``) and reap relaunched ones; never raises."""
        watchdog = getattr(self, "_watchdog", None)
        if watchdog is not None:
            watchdog.kill()
            watchdog.wait()
        try:
            self.script("stop", "all", timeout=180)
        except ServersUnavailable as e:
            self.events.append(f"stop: {e}")
            for name in ("pulsar", "cassandra"):
                pid = self.pid(name)
                if pid:
                    _kill_group(pid)
        for p in self.relaunched:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _kill_group(p.pid)

    # ------------------------------------------------------------------ faults
    def pid(self, name: str) -> int | None:
        try:
            pid = int((self.run_dir(name) / f"{name}.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if Path(f"/proc/{pid}").exists() else None

    def restart(self, name: str, *, hard: bool = True, down_seconds: float = 0.0) -> float:
        """Crash (``SIGKILL``, or ``SIGTERM`` when not ``hard``) and relaunch one server with its data.

        :param name: ``pulsar`` or ``cassandra``.
        :param down_seconds: extra time to stay down before the relaunch.
        :returns: seconds from the kill until the server answered again.
        """
        pid = self.pid(name)
        if pid is None:
            raise ServersUnavailable(f"{name} is not running")
        proc = Path(f"/proc/{pid}")
        argv = [a for a in (proc / "cmdline").read_bytes().decode().split("\0") if a]
        environ = dict(item.split("=", 1) for item in (proc / "environ").read_bytes().decode().split("\0")
                       if "=" in item)
        t0 = time.monotonic()
        os.kill(pid, signal.SIGKILL if hard else signal.SIGTERM)
        _wait_gone(pid, 60)
        _kill_group(pid)  # anything the JVM left in its process group
        self._reap()
        if down_seconds:
            time.sleep(down_seconds)
        run = self.run_dir(name)
        with open(self.log_path(name), "ab") as log:
            log.write(f"\n==== relaunched by the fault tests after {'SIGKILL' if hard else 'SIGTERM'} ====\n".encode())
            log.flush()
            p = subprocess.Popen(argv, cwd=run, env=environ, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        self.relaunched.append(p)
        (run / f"{name}.pid").write_text(f"{p.pid}\n")
        self.script("wait", name)
        took = time.monotonic() - t0
        self.events.append(f"{name} {'killed' if hard else 'stopped'} and back in {took:.0f} s")
        return took

    def _reap(self) -> None:
        for p in self.relaunched:
            p.poll()


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/status") as f:
                if any(line.startswith("State:") and "Z" in line.split()[1] for line in f):
                    return
        except OSError:
            return
        time.sleep(0.1)
    raise ServersUnavailable(f"process {pid} survived its kill for {timeout:.0f} s")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
