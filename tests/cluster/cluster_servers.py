"""A private three-node Cassandra cluster for the cluster tier: started, nodes killed and revived, stopped.

The cluster runs with ``scripts/servers.sh start cassandra-cluster`` on 127.0.0.1, 127.0.0.2 and
127.0.0.3, with its own ``IT_HOME`` (a temporary directory whose ``cassandra-5.0.8`` links to the
already fetched jars) and free ports, so it never meets the shared single node (127.0.0.1:9042)
or a developer's own cluster.  A node is killed with ``SIGKILL`` (a real crash) and revived by
launching its identical command line again in its run directory, on its data, as
``tests/reliability/fault_servers.py`` does for the private pair; its new PID is recorded where
``servers.sh`` looks for it, so ``servers.sh wait`` and ``stop`` keep working.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVERS_SH = REPO / "scripts" / "servers.sh"
CASSANDRA_DIR = "cassandra-5.0.8"
NODES = 3
JAVA_17 = Path(os.environ.get("JAVA_HOME_17", "/usr/lib/jvm/java-17-openjdk-amd64")) / "bin" / "java"
#: Ports the shared single node and pair use: never taken by the cluster.
DEFAULT_PORTS = {6650, 8080, 3181, 9042, 7000, 7001}


class ClusterUnavailable(RuntimeError):
    """The cluster cannot be started here (no Java 17, no fetched jars, a failed start)."""


def shared_cache() -> Path:
    """Where ``servers.sh fetch`` put the jars: ``$IT_HOME`` (as ``.ci/run`` sets it) or ``~/.cache/tg-servers``."""
    return Path(os.environ.get("IT_HOME") or Path.home() / ".cache" / "tg-servers")


def missing_prerequisites() -> str | None:
    """Why the cluster cannot start on this machine, or None."""
    if not JAVA_17.exists():
        return f"no JDK 17 at {JAVA_17} (set JAVA_HOME_17)"
    if not (shared_cache() / CASSANDRA_DIR / ".ready").exists():
        return f"{CASSANDRA_DIR} is not fetched into {shared_cache()} (run: scripts/servers.sh fetch cassandra)"
    return None


def _free(address: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def free_ports(nodes: int = NODES) -> dict[str, int]:
    """CQL, gossip, TLS gossip and ``nodes`` JMX ports, free on every node's address."""
    addresses = [f"127.0.0.{i}" for i in range(1, nodes + 1)]
    for _ in range(200):
        base = random.randrange(21000, 59000, 20)
        ports = {"CASSANDRA_CLUSTER_PORT": base, "CASSANDRA_CLUSTER_STORAGE_PORT": base + 1,
                 "CASSANDRA_CLUSTER_SSL_STORAGE_PORT": base + 2, "CASSANDRA_CLUSTER_JMX_PORT": base + 3}
        wanted = [base, base + 1, base + 2] + [base + 3 + i for i in range(nodes)]
        if not DEFAULT_PORTS & set(wanted) and all(_free(a, p) for a in addresses for p in wanted):
            return ports
    raise ClusterUnavailable("found no free block of cluster ports")


@dataclass
class TestCluster:
    """A private Cassandra cluster of :data:`NODES` nodes on 127.0.0.1..N."""

    __test__ = False  # a helper, not a test class

    it_home: Path
    ports: dict[str, int]
    heap: str = "1g"
    nodes: int = NODES
    relaunched: list[subprocess.Popen] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    # ------------------------------------------------------------------ addresses
    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(f"127.0.0.{i}" for i in range(1, self.nodes + 1))

    @property
    def port(self) -> int:
        return self.ports["CASSANDRA_CLUSTER_PORT"]

    def config(self, consistency: str = "LOCAL_QUORUM", **kw):
        """A :class:`CassandraConfig` naming every node (the stores' and the services' view of the cluster)."""
        from trustgraph_base.store.cassandra.connection import CassandraConfig

        return CassandraConfig(hosts=self.hosts, port=self.port, consistency=consistency, **kw)

    def run_dir(self, node: int) -> Path:
        return self.it_home / "run" / f"cassandra-node{node}"

    def log_path(self, node: int) -> Path:
        return self.run_dir(node) / f"cassandra-node{node}.log"

    # ------------------------------------------------------------------ servers.sh
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({k: str(v) for k, v in self.ports.items()})
        env.update({"IT_HOME": str(self.it_home), "IT_RUN": str(self.it_home / "run"), "PYTHON": sys.executable,
                    "CASSANDRA_CLUSTER_HEAP": self.heap, "CASSANDRA_CLUSTER_NODES": str(self.nodes),
                    "IT_KEEP_DATA": "0"})
        return env

    def script(self, *args: str, timeout: float = 600.0) -> str:
        """Run ``scripts/servers.sh args``; raise :class:`ClusterUnavailable` with its output on failure."""
        try:
            r = subprocess.run(["bash", str(SERVERS_SH), *args], env=self._env(), capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise ClusterUnavailable(f"servers.sh {' '.join(args)} did not finish within {timeout:.0f} s") from e
        if r.returncode != 0:
            raise ClusterUnavailable(f"servers.sh {' '.join(args)} failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
        return r.stdout + r.stderr

    @classmethod
    def create(cls, root: Path, heap: str = "1g") -> TestCluster:
        """A cluster under ``root`` whose server folder links to the shared cache (no download)."""
        problem = missing_prerequisites()
        if problem:
            raise ClusterUnavailable(problem)
        root.mkdir(parents=True, exist_ok=True)
        link = root / CASSANDRA_DIR
        if not link.exists():
            link.symlink_to(shared_cache() / CASSANDRA_DIR, target_is_directory=True)
        return cls(root, free_ports(), heap)

    def start(self) -> float:
        """``servers.sh start cassandra-cluster`` + ``wait cassandra-cluster``; returns the seconds it took."""
        t0 = time.monotonic()
        self.script("start", "cassandra-cluster")
        self.script("wait", "cassandra-cluster")
        took = time.monotonic() - t0
        self.events.append(f"cluster of {self.nodes} started in {took:.0f} s")
        return took

    def wait(self) -> None:
        """Until every node is up again (``servers.sh wait cassandra-cluster``)."""
        self.script("wait", "cassandra-cluster")

    def nodetool(self, node: int, *args: str) -> str:
        """Cassandra's own ``nodetool`` against ``node``."""
        return self.script("nodetool", str(node), *args, timeout=120)

    def guard(self, owner_pid: int) -> None:
        """A watchdog (own session) that stops the cluster if process ``owner_pid`` dies without :meth:`stop`."""
        watchdog = (f"while kill -0 {int(owner_pid)} 2>/dev/null; do sleep 2; done; "
                    f"exec bash {str(SERVERS_SH)!r} stop cassandra-cluster")
        self._watchdog = subprocess.Popen(["bash", "-c", watchdog], env=self._env(), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True)

    def stop(self) -> None:
        """Stop every node and reap relaunched ones; never raises."""
        watchdog = getattr(self, "_watchdog", None)
        if watchdog is not None:
            watchdog.kill()
            watchdog.wait()
        try:
            self.script("stop", "cassandra-cluster", timeout=300)
        except ClusterUnavailable as e:
            self.events.append(f"stop: {e}")
            for node in range(1, self.nodes + 1):
                pid = self.pid(node)
                if pid:
                    _kill_group(pid)
        for p in self.relaunched:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _kill_group(p.pid)

    def rss_mb(self) -> dict[int, int]:
        """Resident memory of each running node (MB)."""
        out = {}
        for node in range(1, self.nodes + 1):
            pid = self.pid(node)
            if pid:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        out[node] = int(line.split()[1]) // 1024
        return out

    # ------------------------------------------------------------------ faults
    def pid(self, node: int) -> int | None:
        try:
            pid = int((self.run_dir(node) / f"cassandra-node{node}.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if Path(f"/proc/{pid}").exists() else None

    def kill(self, node: int) -> tuple[list[str], dict[str, str]]:
        """``kill -9`` one node; returns its command line and environment, for :meth:`revive`."""
        pid = self.pid(node)
        if pid is None:
            raise ClusterUnavailable(f"node {node} is not running")
        proc = Path(f"/proc/{pid}")
        argv = [a for a in (proc / "cmdline").read_bytes().decode().split("\0") if a]
        environ = dict(item.split("=", 1) for item in (proc / "environ").read_bytes().decode().split("\0")
                       if "=" in item)
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid, 60)
        _kill_group(pid)
        for p in self.relaunched:
            p.poll()
        self.events.append(f"node {node} killed (SIGKILL)")
        return argv, environ

    def revive(self, node: int, launch: tuple[list[str], dict[str, str]], wait: bool = True) -> float:
        """Launch a killed node again on its data; with ``wait``, until the whole cluster is up again.

        :returns: seconds from the launch until the cluster was up (0 without ``wait``).
        """
        argv, environ = launch
        run = self.run_dir(node)
        t0 = time.monotonic()
        with open(self.log_path(node), "ab") as log:
            log.write(b"\n==== relaunched by the cluster tests after SIGKILL ====\n")
            log.flush()
            p = subprocess.Popen(argv, cwd=run, env=environ, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        self.relaunched.append(p)
        (run / f"cassandra-node{node}.pid").write_text(f"{p.pid}\n")
        if not wait:
            return 0.0
        self.wait()
        took = time.monotonic() - t0
        self.events.append(f"node {node} back in {took:.0f} s")
        return took

    def pending_hints(self) -> int:
        """Hints every node still holds for others (``system_views.pending_hints``, asked of each node)."""
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import WhiteListRoundRobinPolicy

        total = 0
        for address in self.hosts:  # a virtual table answers for the node that runs the query: ask each one
            profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([address]), request_timeout=30)
            cluster = Cluster([address], port=self.port, protocol_version=5, connect_timeout=10,
                              execution_profiles={EXEC_PROFILE_DEFAULT: profile})
            try:
                total += sum(r.files for r in cluster.connect().execute("SELECT files FROM system_views.pending_hints"))
            finally:
                cluster.shutdown()
        return total

    def wait_hints_replayed(self, timeout: float = 240.0) -> float:
        """Until no node holds a hint for another (the revived node got what it missed); returns the seconds."""
        t0 = time.monotonic()
        while True:
            pending = self.pending_hints()
            if pending == 0:
                took = time.monotonic() - t0
                self.events.append(f"hints replayed after {took:.0f} s")
                return took
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"{pending} hint file(s) still pending after {timeout:.0f} s")
            time.sleep(2.0)


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
    raise ClusterUnavailable(f"process {pid} survived its kill for {timeout:.0f} s")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
