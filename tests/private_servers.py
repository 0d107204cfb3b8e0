"""Private servers that a test tier starts for itself with ``scripts/servers.sh``: free ports, start, crash, relaunch.

The reliability tier's Pulsar + Cassandra pair (``tests/reliability/fault_servers.py``) and the
cluster tier's three Cassandra nodes (``tests/cluster/cluster_servers.py``) both run on
127.0.0.1 with their own ``IT_HOME`` and free, non-default ports, so they never meet the shared
servers.  A server is crashed with a signal and relaunched with its identical command line in its
run directory, on its data (``servers.sh start`` would begin with fresh data); the new PID is
recorded where ``servers.sh`` looks for it, so ``servers.sh wait`` and ``stop`` keep working.
Each server ``name`` keeps its files in ``$IT_HOME/run/<name>/`` (``<name>.pid``, ``<name>.log``).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest

REPO = Path(__file__).resolve().parents[1]
SERVERS_SH = REPO / "scripts" / "servers.sh"
CASSANDRA_DIR = "cassandra-5.0.8"
JAVA_17 = Path(os.environ.get("JAVA_HOME_17", "/usr/lib/jvm/java-17-openjdk-amd64")) / "bin" / "java"
#: Ports of the shared servers: never taken by private ones.
DEFAULT_PORTS = {6650, 8080, 3181, 9042, 7000, 7001}


class ServersUnavailable(RuntimeError):
    """Private servers cannot be started here (no Java 17, no fetched jars, a failed start)."""


def shared_cache() -> Path:
    """Where ``servers.sh fetch`` put the jars: ``$IT_HOME`` (as ``.ci/run`` sets it) or ``~/.cache/tg-servers``."""
    return Path(os.environ.get("IT_HOME") or Path.home() / ".cache" / "tg-servers")


def _port_free(address: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def free_port_block(width: int, step: int, addresses: Iterable[str] = ("127.0.0.1",)) -> int | None:
    """The first of ``width`` consecutive ports, free on every address and none a shared server's, or None."""
    addresses = tuple(addresses)
    for _ in range(200):
        base = random.randrange(21000, 59000, step)
        wanted = range(base, base + width)
        if not DEFAULT_PORTS & set(wanted) and all(_port_free(a, p) for a in addresses for p in wanted):
            return base
    return None


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def required() -> bool:
    """True when servers a tier cannot start fail the run instead of skipping it (``CI``, ``REQUIRE_INTEGRATION``)."""
    return _truthy("CI") or _truthy("REQUIRE_INTEGRATION")


def unavailable(what: str, reason: str) -> None:
    """Skip, or fail under :func:`required`, because ``what`` cannot run: ``reason``."""
    if required():
        pytest.fail(f"{what}: {reason} (CI=true makes this a failure; see docs/servers.md)", pytrace=False)
    pytest.skip(reason)


@dataclass
class PrivateServers:
    """Servers on a private ``IT_HOME``, driven by ``scripts/servers.sh`` with :attr:`TARGET` as its target.

    :param it_home: run dirs, pids and logs; the server folders in it are symlinks to the shared cache.
    :param ports: the ``servers.sh`` port variables of these servers.
    """

    #: What ``servers.sh start``/``wait``/``stop`` are given.
    TARGET: ClassVar[str]
    #: How long ``servers.sh`` may take, and how long its ``stop``.
    SCRIPT_TIMEOUT: ClassVar[float]
    STOP_TIMEOUT: ClassVar[float]
    #: The error these servers raise (a subclass of :class:`ServersUnavailable`).
    error: ClassVar[type[ServersUnavailable]] = ServersUnavailable

    it_home: Path
    ports: dict[str, int]
    relaunched: list[subprocess.Popen] = field(default_factory=list, kw_only=True)
    events: list[str] = field(default_factory=list, kw_only=True)

    def start(self) -> object:
        """Start the servers and wait until they answer."""
        raise NotImplementedError

    def settings(self) -> dict[str, str]:
        """``servers.sh`` variables of these servers beyond the ports and ``IT_HOME``."""
        return {}

    def server_names(self) -> list[str]:
        """The servers' names (run directories), for a stop that ``servers.sh`` could not do."""
        raise NotImplementedError

    def server_dir(self, name: str) -> Path:
        return self.it_home / "run" / name

    def server_log(self, name: str) -> Path:
        return self.server_dir(name) / f"{name}.log"

    def server_pid(self, name: str) -> int | None:
        """PID of the running server ``name``, or None."""
        try:
            pid = int((self.server_dir(name) / f"{name}.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if Path(f"/proc/{pid}").exists() else None

    # ------------------------------------------------------------------ servers.sh
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({k: str(v) for k, v in self.ports.items()})
        env.update({"IT_HOME": str(self.it_home), "IT_RUN": str(self.it_home / "run"), "PYTHON": sys.executable,
                    **self.settings(), "IT_KEEP_DATA": "0"})
        return env

    def script(self, *args: str, timeout: float | None = None) -> str:
        """Run ``scripts/servers.sh args``; raise :attr:`error` with its output on failure."""
        timeout = self.SCRIPT_TIMEOUT if timeout is None else timeout
        try:
            r = subprocess.run(["bash", str(SERVERS_SH), *args], env=self._env(), capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise self.error(f"servers.sh {' '.join(args)} did not finish within {timeout:.0f} s") from e
        if r.returncode != 0:
            raise self.error(f"servers.sh {' '.join(args)} failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
        return r.stdout + r.stderr

    def link_servers(self, *folders: str) -> None:
        """Link the fetched server ``folders`` of the shared cache into :attr:`it_home` (no download)."""
        self.it_home.mkdir(parents=True, exist_ok=True)
        for name in folders:
            link = self.it_home / name
            if not link.exists():
                link.symlink_to(shared_cache() / name, target_is_directory=True)

    def guard(self, owner_pid: int) -> None:
        """Start a watchdog that stops these servers if process ``owner_pid`` dies without calling :meth:`stop`.

        It runs in its own session, so a Ctrl-C or kill of the test run's process group does not
        take it along before it has done its job.
        """
        watchdog = (f"while kill -0 {int(owner_pid)} 2>/dev/null; do sleep 2; done; "
                    f"exec bash {str(SERVERS_SH)!r} stop {self.TARGET}")
        self._watchdog = subprocess.Popen(["bash", "-c", watchdog], env=self._env(), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True)

    def stop(self) -> None:
        """Stop every server (``servers.sh stop``) and reap relaunched ones; never raises."""
        watchdog = getattr(self, "_watchdog", None)
        if watchdog is not None:
            watchdog.kill()
            watchdog.wait()
        try:
            self.script("stop", self.TARGET, timeout=self.STOP_TIMEOUT)
        except self.error as e:
            self.events.append(f"stop: {e}")
            for name in self.server_names():
                pid = self.server_pid(name)
                if pid:
                    _kill_group(pid)
        for p in self.relaunched:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _kill_group(p.pid)

    # ------------------------------------------------------------------ faults
    def crash(self, name: str, sig: int = signal.SIGKILL, label: str | None = None) -> tuple[list[str], dict[str, str]]:
        """Send ``sig`` to the server ``name`` (``label`` in messages) and wait until it is gone; returns its
        command line and environment, for :meth:`relaunch`."""
        pid = self.server_pid(name)
        if pid is None:
            raise self.error(f"{label or name} is not running")
        proc = Path(f"/proc/{pid}")
        argv = [a for a in (proc / "cmdline").read_bytes().decode().split("\0") if a]
        environ = dict(item.split("=", 1) for item in (proc / "environ").read_bytes().decode().split("\0")
                       if "=" in item)
        os.kill(pid, sig)
        self._wait_gone(pid, 60)
        _kill_group(pid)  # anything the JVM left in its process group
        for p in self.relaunched:
            p.poll()
        return argv, environ

    def relaunch(self, name: str, launch: tuple[list[str], dict[str, str]], banner: str) -> None:
        """Launch a crashed server again, on its data, with the command line :meth:`crash` returned."""
        argv, environ = launch
        run = self.server_dir(name)
        with open(self.server_log(name), "ab") as log:
            log.write(f"\n==== {banner} ====\n".encode())
            log.flush()
            p = subprocess.Popen(argv, cwd=run, env=environ, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        self.relaunched.append(p)
        (run / f"{name}.pid").write_text(f"{p.pid}\n")

    def _wait_gone(self, pid: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/status") as f:
                    if any(line.startswith("State:") and "Z" in line.split()[1] for line in f):
                        return
            except OSError:
                return
            time.sleep(0.1)
        raise self.error(f"process {pid} survived its kill for {timeout:.0f} s")


@dataclass(frozen=True)
class OptInTier:
    """A test tier that runs only when its environment variable asks for it (``short`` or ``full``).

    Without the variable its tests are deselected, so ``pytest`` alone never starts its servers; in the
    short form the tests marked ``<marker>_full`` are deselected too.  The cluster and real-model tiers use it.
    """

    env: str  # e.g. TG_CLUSTER
    marker: str  # e.g. cluster (and cluster_full)
    title: str  # e.g. "the cluster tier"
    directory: Path  # the tier's tests

    def form(self) -> str:
        """``short``, ``full`` or ``""`` (the tier does not run)."""
        value = os.environ.get(self.env, "").strip().lower()
        return {"1": "short", "true": "short", "yes": "short"}.get(value, value)

    def configure(self, config) -> None:
        """Register the tier's two markers (pytest_configure)."""
        config.addinivalue_line("markers", f"{self.marker}: {self.title} ({self.env}=short|full)")
        config.addinivalue_line("markers", f"{self.marker}_full: only in {self.title}'s full form ({self.env}=full)")

    def select(self, config, items: list) -> None:
        """Deselect the tier's tests without the variable, and the full-form ones in the short form."""
        mine = [item for item in items if Path(str(item.fspath)).resolve().is_relative_to(self.directory)]
        if not mine:
            return
        form = self.form()
        if form not in ("short", "full"):
            config.hook.pytest_deselected(items=mine)
            items[:] = [item for item in items if item not in mine]
            return
        # the full form's own tests are deselected in the short form, not skipped: under CI=true a selected
        # integration test that skips fails the run
        full_only = [item for item in mine if form == "short" and item.get_closest_marker(f"{self.marker}_full")]
        if full_only:
            config.hook.pytest_deselected(items=full_only)
            items[:] = [item for item in items if item not in full_only]
        for item in mine:
            item.add_marker(getattr(pytest.mark, self.marker))


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@contextmanager
def running(servers: PrivateServers, what: str) -> Iterator[PrivateServers]:
    """``servers`` started (a failed start fails the test) and watched by a watchdog; stopped at the end."""
    servers.guard(os.getpid())
    try:
        try:
            servers.start()
        except servers.error as e:
            pytest.fail(f"could not start {what}: {e}", pytrace=False)
        yield servers
    finally:
        servers.stop()
