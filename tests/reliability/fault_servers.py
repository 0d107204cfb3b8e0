"""A private Apache Pulsar + Apache Cassandra pair for fault tests: started, crashed, restarted, stopped.

Fault and load tests must only touch servers they started themselves on 127.0.0.1, so this
module runs a *second* pair with ``scripts/servers.sh`` on free, non-default ports and its
own ``IT_HOME`` (a temporary directory).  The fetched server folders (``pulsar-4.0.8``,
``cassandra-5.0.8``) are symlinked from the shared cache, so nothing is downloaded.

``servers.sh start`` always begins with fresh data, which is right for a new pair but not
for a restart: a restarted server must keep its data.  :meth:`ServerPair.restart` therefore
kills the JVM (``SIGKILL`` by default: a real crash) and launches the identical command line
again, in the same run directory, then records the new PID where ``servers.sh`` looks for it,
so ``servers.sh wait`` and ``servers.sh stop`` keep working (``tests/private_servers.py``, which the
cluster tier's private cluster shares).
"""

from __future__ import annotations

import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from private_servers import (
    CASSANDRA_DIR,
    JAVA_17,
    PrivateServers,
    ServersUnavailable,
    free_port_block,
    shared_cache,
)

PULSAR_DIR = "pulsar-4.0.8"
PORT_NAMES = ("PULSAR_PORT", "PULSAR_HTTP_PORT", "PULSAR_BOOKIE_PORT",
              "CASSANDRA_PORT", "CASSANDRA_STORAGE_PORT", "CASSANDRA_SSL_STORAGE_PORT")


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


def free_ports() -> dict[str, int]:
    """Six free, distinct loopback ports, none of them a default port of the shared pair."""
    base = free_port_block(len(PORT_NAMES), 10)
    if base is None:
        raise ServersUnavailable("found no block of six free loopback ports")
    return {name: base + i for i, name in enumerate(PORT_NAMES)}


@dataclass
class ServerPair(PrivateServers):
    """One private Pulsar + Cassandra pair on 127.0.0.1.

    :param it_home: the pair's own ``IT_HOME`` (run dirs, pids, logs; server folders are symlinks).
    :param ports: ``PULSAR_PORT`` ... ``CASSANDRA_SSL_STORAGE_PORT``.
    """

    TARGET = "all"
    SCRIPT_TIMEOUT = 400.0
    STOP_TIMEOUT = 180.0

    cassandra_heap: str = "1g"

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

    # ------------------------------------------------------------------ servers.sh
    def settings(self) -> dict[str, str]:
        return {"CASSANDRA_HEAP": self.cassandra_heap}

    def server_names(self) -> list[str]:
        return ["pulsar", "cassandra"]

    @classmethod
    def create(cls, root: Path) -> ServerPair:
        """A pair under ``root`` whose server folders link to the shared cache (no download)."""
        problem = missing_prerequisites()
        if problem:
            raise ServersUnavailable(problem)
        pair = cls(root, free_ports())
        pair.link_servers(PULSAR_DIR, CASSANDRA_DIR)
        return pair

    def start(self) -> None:
        """Start both JVMs and wait until they really answer (``servers.sh start all`` + ``wait all``)."""
        t0 = time.monotonic()
        self.script("start", "all")
        self.script("wait", "all")
        self.events.append(f"pair started in {time.monotonic() - t0:.0f} s")

    # ------------------------------------------------------------------ faults
    def restart(self, name: str, *, hard: bool = True, down_seconds: float = 0.0) -> float:
        """Crash (``SIGKILL``, or ``SIGTERM`` when not ``hard``) and relaunch one server with its data.

        :param name: ``pulsar`` or ``cassandra``.
        :param down_seconds: extra time to stay down before the relaunch.
        :returns: seconds from the kill until the server answered again.
        """
        t0 = time.monotonic()
        launch = self.crash(name, signal.SIGKILL if hard else signal.SIGTERM)
        if down_seconds:
            time.sleep(down_seconds)
        self.relaunch(name, launch, f"relaunched by the fault tests after {'SIGKILL' if hard else 'SIGTERM'}")
        self.script("wait", name)
        took = time.monotonic() - t0
        self.events.append(f"{name} {'killed' if hard else 'stopped'} and back in {took:.0f} s")
        return took
