"""A private three-node Cassandra cluster for the cluster tier: started, nodes killed and revived, stopped.

The cluster runs with ``scripts/servers.sh start cassandra-cluster`` on 127.0.0.1, 127.0.0.2 and
127.0.0.3, with its own ``IT_HOME`` (a temporary directory whose ``cassandra-5.0.8`` links to the
already fetched jars) and free ports, so it never meets the shared single node (127.0.0.1:9042)
or a developer's own cluster.  A node is killed with ``SIGKILL`` (a real crash) and revived by
launching its identical command line again in its run directory, on its data, as
``tests/reliability/fault_servers.py`` does for the private pair (both with ``tests/private_servers.py``);
its new PID is recorded where ``servers.sh`` looks for it, so ``servers.sh wait`` and ``stop`` keep working.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from private_servers import CASSANDRA_DIR, JAVA_17, PrivateServers, ServersUnavailable, free_port_block, shared_cache

NODES = 3


class ClusterUnavailable(ServersUnavailable):
    """The cluster cannot be started here (no Java 17, no fetched jars, a failed start)."""


def missing_prerequisites() -> str | None:
    """Why the cluster cannot start on this machine, or None."""
    if not JAVA_17.exists():
        return f"no JDK 17 at {JAVA_17} (set JAVA_HOME_17)"
    if not (shared_cache() / CASSANDRA_DIR / ".ready").exists():
        return f"{CASSANDRA_DIR} is not fetched into {shared_cache()} (run: scripts/servers.sh fetch cassandra)"
    return None


def free_ports(nodes: int = NODES) -> dict[str, int]:
    """CQL, gossip, TLS gossip and ``nodes`` JMX ports, free on every node's address."""
    base = free_port_block(3 + nodes, 20, [f"127.0.0.{i}" for i in range(1, nodes + 1)])
    if base is None:
        raise ClusterUnavailable("found no free block of cluster ports")
    return {"CASSANDRA_CLUSTER_PORT": base, "CASSANDRA_CLUSTER_STORAGE_PORT": base + 1,
            "CASSANDRA_CLUSTER_SSL_STORAGE_PORT": base + 2, "CASSANDRA_CLUSTER_JMX_PORT": base + 3}


@dataclass
class TestCluster(PrivateServers):
    """A private Cassandra cluster of :data:`NODES` nodes on 127.0.0.1..N."""

    __test__ = False  # a helper, not a test class
    TARGET = "cassandra-cluster"
    SCRIPT_TIMEOUT = 600.0
    STOP_TIMEOUT = 300.0
    error = ClusterUnavailable

    heap: str = "1g"
    nodes: int = NODES

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
        return self.server_dir(_name(node))

    def log_path(self, node: int) -> Path:
        return self.server_log(_name(node))

    # ------------------------------------------------------------------ servers.sh
    def settings(self) -> dict[str, str]:
        return {"CASSANDRA_CLUSTER_HEAP": self.heap, "CASSANDRA_CLUSTER_NODES": str(self.nodes)}

    def server_names(self) -> list[str]:
        return [_name(node) for node in range(1, self.nodes + 1)]

    @classmethod
    def create(cls, root: Path, heap: str = "1g") -> TestCluster:
        """A cluster under ``root`` whose server folder links to the shared cache (no download)."""
        problem = missing_prerequisites()
        if problem:
            raise ClusterUnavailable(problem)
        cluster = cls(root, free_ports(), heap)
        cluster.link_servers(CASSANDRA_DIR)
        return cluster

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
        return self.server_pid(_name(node))

    def kill(self, node: int) -> tuple[list[str], dict[str, str]]:
        """``kill -9`` one node; returns its command line and environment, for :meth:`revive`."""
        launch = self.crash(_name(node), label=f"node {node}")
        self.events.append(f"node {node} killed (SIGKILL)")
        return launch

    def revive(self, node: int, launch: tuple[list[str], dict[str, str]], wait: bool = True) -> float:
        """Launch a killed node again on its data; with ``wait``, until the whole cluster is up again.

        :returns: seconds from the launch until the cluster was up (0 without ``wait``).
        """
        t0 = time.monotonic()
        self.relaunch(_name(node), launch, "relaunched by the cluster tests after SIGKILL")
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


def _name(node: int) -> str:
    """The server name (run directory) of ``node``."""
    return f"cassandra-node{node}"
