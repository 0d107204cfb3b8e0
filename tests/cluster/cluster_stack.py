"""The services of the cluster tier: two replicas each of graph-rag, triples-write and triples-query, as OS processes.

The stack of ``tests/reliability/fault_stack.py`` (one process per service under test, the others
in one group process, the corpus loaded by the real ingestion processors), on the private
Cassandra cluster (every node a contact point) and the integration tier's Pulsar (a flow and a
user of its own).  ``graph-rag``, ``triples-write`` and ``triples-query`` run twice, as two
processes with the same processor id, so Pulsar's shared subscriptions split their work; each
process serves its Prometheus metrics, whose ``tg_messages_total`` says how much of the work
each replica did.
"""

from __future__ import annotations

import asyncio
import socket
import time
import urllib.request
from dataclasses import dataclass, field

from cluster_servers import TestCluster
from fault_stack import FaultStack, ServiceProcess

#: Services that run as two replicas, and the processor id each replica's metrics are labelled with.
REPLICATED = {"graph-rag": "graph-rag", "triples-write": "triples-write", "triples-query": "triples-query"}


@dataclass(frozen=True)
class ClusterServers:
    """Pulsar (shared, from the environment) and the private cluster, in the shape FaultStack expects."""

    pulsar_url: str
    admin_url: str
    cluster: TestCluster

    @property
    def cassandra_host(self) -> str:
        return ",".join(self.cluster.hosts)

    @property
    def cassandra_port(self) -> int:
        return self.cluster.port


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ClusterStack(FaultStack):
    """FaultStack on the cluster, with two replicas of each replicated service and metrics on every process."""

    metrics: dict[str, int] = field(default_factory=dict)

    @property
    def cluster(self) -> TestCluster:
        return self.pair.cluster

    def cassandra_config(self, consistency: str = "LOCAL_QUORUM"):
        return self.cluster.config(consistency)

    def _watched(self, process: ServiceProcess) -> ServiceProcess:
        self.metrics[process.name] = free_port()
        process.argv += ["--metrics-port", str(self.metrics[process.name])]
        return process

    def build(self) -> None:
        services = {"core": self._core(triples_query=False), "librarian": self._single("librarian")}
        for n in (1, 2):
            rag = self._graph_rag(f"graph-rag-{n}")
            services[rag.name] = rag
            for name in ("triples-write", "triples-query"):
                process = self.replica(name, n)
                services[process.name] = process
        self.services = {name: self._watched(p) for name, p in services.items()}

    def handled(self, name: str) -> float:
        """Messages the process ``name`` handled successfully so far (its replicated processor's, or all)."""
        base = name.rsplit("-", 1)[0]
        processor = REPLICATED.get(base)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics[name]}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return float("nan")
        from prometheus_client.parser import text_string_to_metric_families

        return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                   if s.name == "tg_messages_total" and s.labels.get("outcome") == "ok"
                   and (processor is None or s.labels.get("processor") == processor))

    def work_by_replica(self) -> dict[str, float]:
        """Messages handled by each replica of each replicated service."""
        return {f"{base}-{n}": self.handled(f"{base}-{n}") for base in REPLICATED for n in (1, 2)}

    async def wait_ready_again(self, name: str) -> float:
        """Restart a killed replica and wait until it is subscribed again; returns the seconds it took."""
        t0 = time.monotonic()
        process = self.services[name]
        process.start()
        await asyncio.to_thread(process.wait_ready)
        return time.monotonic() - t0
