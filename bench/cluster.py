"""Cluster benchmark: GraphRAG on a three-node Cassandra cluster (RF 3, LOCAL_QUORUM) against one node, and two
``graph-rag`` replicas against one, with the CPU every service spends per query.

Needs the distributed stack (``PULSAR_URL``, ``CASSANDRA_HOST``: the single node) and a cluster
(``CLUSTER_CASSANDRA_HOST``, comma-separated, and ``CLUSTER_CASSANDRA_PORT``), e.g.::

    scripts/servers.sh start cassandra-cluster && scripts/servers.sh wait cassandra-cluster
    export CLUSTER_CASSANDRA_HOST=127.0.0.1,127.0.0.2,127.0.0.3 CLUSTER_CASSANDRA_PORT=19142

Without a cluster it reports that it measured nothing (``python -m bench`` runs it anyway).

Figures:

* **cluster / one node**: the same synthetic graph in both, the storage services in processes of
  their own (:data:`bench.harness.OWN_PROCESSES`), queries interleaved between the two stacks and
  between explainability on and off, so the latency ratio cluster / one node and the on / off
  ratio on each (target <= 1.05) come from the same minutes.
* **replicas**: every query service in a process of its own on the cluster, ``graph-rag`` as one
  and then two processes (Pulsar's shared subscription splits the requests), 16 concurrent
  clients: queries/s, latency, and the CPU time per query of every service process, which is
  what a real cluster scales by (on this 2-core machine two replicas can hardly run faster).

    python -m bench.cluster [--quick] [--json out.json]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import Figure, Results, percentile, spread
from .harness import (
    LLM_LATENCY_MS,
    QUERY_PROCESSORS,
    Deployment,
    GraphRagTarget,
    Servers,
    ServiceProcesses,
    Suite,
    ask_on_off,
    bench_parser,
    close_target,
    graph_for,
    load_graph,
    load_note,
    on_off_figures,
    open_target,
    report,
    run_on_suite,
)
from .synthetic import Question

if TYPE_CHECKING:
    from trustgraph_base.processor.client import RequestResponseClient

#: Stack names of the two Cassandra set-ups (the single node is the suite's distributed stack).
ONE_NODE, CLUSTER = "distributed", "cluster"
CLIENTS = 16


def cluster_servers(base: Servers) -> Servers | None:
    """The cluster's addresses (``CLUSTER_CASSANDRA_HOST``/``_PORT``) with the suite's Pulsar; None without them."""
    hosts = os.environ.get("CLUSTER_CASSANDRA_HOST", "").strip()
    if not hosts or not base.pulsar_url:
        return None
    return Servers(base.pulsar_url, base.pulsar_admin_url, hosts, int(os.environ.get("CLUSTER_CASSANDRA_PORT", "9042")))


def cluster_description(servers: Servers) -> str:
    """``3 nodes, RF {'dc1': 3}, LOCAL_QUORUM``: what the cluster stack runs on."""
    from trustgraph_base.store.cassandra.connection import connect, replication

    config = servers.cassandra_config()
    session = connect(config)
    return (f"{len(session.cluster.metadata.all_hosts())} nodes, replicas {replication(session, None)}, "
            f"{config.consistency}")


# ================================================================== cluster vs one node
async def cluster_vs_one_node(targets: Sequence[GraphRagTarget], questions: Sequence[Question],
                              reps: int) -> list[Figure]:
    """Explainability on/off on both stacks, all four variants interleaved."""
    v, cpu, _ = await ask_on_off(targets, questions, reps)
    out = []
    for t in targets:
        out += on_off_figures(v, t.name, "GraphRAG", reps, cpu=cpu,
                              unit_note=f", LLM {LLM_LATENCY_MS:g} ms per answer (2 answers per query)",
                              cpu_what="this process + triples-write, triples-query, librarian")
    for var in ("on", "off"):
        ratio, per_rep = v.ratio((CLUSTER, var), (ONE_NODE, var))
        out.append(Figure(f"GraphRAG latency, cluster / one node, explainability {var}", ratio, "x", stack="both",
                          spread=spread(per_rep), note=f"{reps} interleaved reps"))
    c_ratio, c_rep = cpu.ratio((CLUSTER, "on"), (ONE_NODE, "on"))
    out.append(Figure("GraphRAG CPU per query (client side), cluster / one node", c_ratio, "x", stack="both",
                      spread=spread(c_rep), note="token-aware routing and replica-set batching cost driver CPU"))
    return out


# ================================================================== replicas
def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class QueryServices:
    """Every GraphRAG query service as a process of its own on ``servers``, ``graph-rag`` as ``replicas`` processes."""

    def __init__(self, servers: Servers, llm_url: str, replicas: int):
        self.flow = f"bench{uuid.uuid4().hex[:8]}"
        self.logs = Path(tempfile.mkdtemp(prefix="tg-bench-cluster-"))
        os.environ.update({"OPENAI_BASE_URL": llm_url, "OPENAI_API_KEY": "bench", "OPENAI_MODEL": "bench"})
        others = [p for p in QUERY_PROCESSORS if p != "graph-rag"]
        self.groups = [ServiceProcesses(others, self.flow, servers, self.logs)]
        for n in range(replicas):
            logs = self.logs / f"graph-rag-{n + 1}"
            logs.mkdir()
            self.groups.append(ServiceProcesses(["graph-rag"], self.flow, servers, logs))

    def named(self) -> dict[str, int]:
        """Process name (``graph-rag-1``, ``graph-rag-2``, or the service) -> pid."""
        out = {name: p.pid for name, p in self.groups[0].procs.items()}
        for n, g in enumerate(self.groups[1:], start=1):
            out[f"graph-rag-{n}"] = g.procs["graph-rag"].pid
        return out

    def cpu(self) -> dict[str, float]:
        return {name: process_cpu(pid) for name, pid in self.named().items()}

    async def wait_started(self) -> None:
        for g in self.groups:
            await g.wait_started(180.0)

    async def graph_rag_client(self, backend: Any, owner: str) -> RequestResponseClient:
        """A started request/response client of this flow's graph-rag on ``backend``."""
        from trustgraph_base.processor.client import RequestResponseClient
        from trustgraph_base.pubsub.topics import request_queue, response_queue
        from trustgraph_flow.common.services import SERVICES

        s = SERVICES["graph-rag"]
        client = RequestResponseClient(backend, "graph-rag", request_queue("graph-rag", self.flow),
                                       response_queue("graph-rag", self.flow), s.request, s.response,
                                       timeout=120, owner=owner)
        await client.start()
        return client

    def busy(self) -> bool:
        return any(g.busy() for g in self.groups)

    def stop_replica(self) -> None:
        """Stop the last graph-rag process (its queue then goes to the others)."""
        self.groups.pop().stop()

    def stop(self) -> None:
        for g in self.groups:
            g.stop()


async def idle(services: QueryServices, timeout: float = 120.0) -> None:
    """Until no service process handles a message for 0.5 s (the traces of the last queries are stored)."""
    deadline, since = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        if await asyncio.to_thread(services.busy):
            since = None
        elif since is None:
            since = time.monotonic()
        elif time.monotonic() - since >= 0.5:
            return
        await asyncio.sleep(0.05)


async def clients_run(client, user: str, collection: str, questions: Sequence[Question], services: QueryServices,
                      per_client: int) -> dict:
    """``CLIENTS`` concurrent clients, ``per_client`` explainable queries each; throughput and CPU per query."""
    from trustgraph_base.schema import GraphRagQuery

    from .harness import stream_request

    latencies: list[float] = []

    async def one_client(k: int) -> None:
        for i in range(per_client):
            q = questions[(k + i) % len(questions)]
            a = await stream_request(client, GraphRagQuery(query=q.text, user=user, collection=collection,
                                                           streaming=True, explainable=True))
            latencies.append(a.latency * 1000)

    await idle(services)
    c0, own0, t0 = services.cpu(), time.process_time(), time.perf_counter()
    await asyncio.gather(*(one_client(k) for k in range(CLIENTS)))
    elapsed = time.perf_counter() - t0
    await idle(services)
    c1, own1 = services.cpu(), time.process_time()
    n = CLIENTS * per_client
    cpu = {name: (c1[name] - c0.get(name, 0.0)) * 1000 / n for name in c1}
    cpu["client (this process)"] = (own1 - own0) * 1000 / n
    return {"qps": n / elapsed, "n": n, "p50": percentile(latencies, 50), "p95": percentile(latencies, 95),
            "cpu": cpu}


async def replicas_figures(suite: Suite, d: Deployment, collection: str, questions: Sequence[Question],
                           per_client: int, reps: int) -> list[Figure]:
    """Two graph-rag replicas vs one at 16 clients on ``d``; the CPU per query of every service."""

    services = QueryServices(d.servers, suite.llm.base_url, 2)
    runs: dict[int, list[dict]] = defaultdict(list)
    backend = d.backend()
    try:
        await services.wait_started()
        client = await services.graph_rag_client(backend, "bench-cluster")
        try:
            for q in questions[:2]:  # warm-up: connections, prepared statements, both replicas
                await clients_run(client, d.user, collection, [q], services, 1)
            order = [2, 1] * reps if reps > 1 else [2, 1]
            for n in order:
                if n == 1 and len(services.groups) == 3:
                    services.stop_replica()
                elif n == 2 and len(services.groups) == 2:
                    (services.logs / "graph-rag-again").mkdir(exist_ok=True)
                    extra = ServiceProcesses(["graph-rag"], services.flow, d.servers, services.logs / "graph-rag-again")
                    services.groups.append(extra)
                    await extra.wait_started(180.0)
                runs[n].append(await clients_run(client, d.user, collection, questions, services, per_client))
        finally:
            await client.stop()
    finally:
        await backend.close()
        services.stop()
    out = []
    for n in (1, 2):
        qps = [r["qps"] for r in runs[n]]
        cpu = defaultdict(list)
        for r in runs[n]:
            for name, ms in r["cpu"].items():
                cpu["graph-rag" if name.startswith("graph-rag") else name].append(ms)
        per_service = {name: sum(v) / len(runs[n]) for name, v in cpu.items()}  # summed over replicas
        total = sum(per_service.values())
        out.append(Figure(f"GraphRAG queries/s, {CLIENTS} clients, {n} graph-rag replica(s)", statistics.median(qps),
                          "queries/s", better="higher", stack=CLUSTER, spread=spread(qps),
                          note=f"{runs[n][0]['n']} queries per run, p50 "
                               f"{statistics.median(r['p50'] for r in runs[n]):.0f} ms, p95 "
                               f"{statistics.median(r['p95'] for r in runs[n]):.0f} ms; {load_note()}"))
        out.append(Figure(f"CPU per GraphRAG query, all services, {n} graph-rag replica(s)", total, "ms",
                          stack=CLUSTER, note="; ".join(f"{k} {v:.1f}" for k, v in sorted(per_service.items(),
                                                                                             key=lambda kv: -kv[1]))))
    ratio = statistics.median(r["qps"] for r in runs[2]) / statistics.median(r["qps"] for r in runs[1])
    out.append(Figure("GraphRAG queries/s, 2 replicas / 1", ratio, "x", better="higher", stack=CLUSTER,
                      note=f"{os.cpu_count()} cores shared by every service, the Cassandra nodes and Pulsar: a "
                           f"replica adds CPU only where there is CPU to add"))
    return out


# ================================================================== the whole benchmark
async def bench(suite: Suite) -> Results:
    results = Results()
    cluster = cluster_servers(suite.servers)
    if cluster is None or not suite.servers.distributed:
        results.add(Figure("cluster benchmark", 0, "", stack=CLUSTER,
                           note="not measured: set PULSAR_URL, CASSANDRA_HOST and CLUSTER_CASSANDRA_HOST/_PORT "
                                "(scripts/servers.sh start cassandra-cluster; see bench/README.md)"))
        return results
    suite.deployments.setdefault(CLUSTER, Deployment("distributed", cluster))
    quick = suite.quick
    graph = graph_for(quick)
    questions = graph.questions(2 if quick else 6)
    real = {i for q in graph.questions(6) for i in q.entities}
    collection = f"cluster-{graph.entities}-{graph.edges}"
    for stack in (ONE_NODE, CLUSTER):
        print(f"  cluster: loading {graph.entities:,} entities / {graph.edges:,} edges ({stack}) ...", flush=True)
        results.add(await load_graph(suite, stack, graph, collection, real))
    results.figures[-1].note += f"; {await asyncio.to_thread(cluster_description, cluster)}"
    targets: list[GraphRagTarget] = []
    try:
        for stack in (ONE_NODE, CLUSTER):
            targets.append(await open_target(suite, stack, collection))
        for t in targets:
            for q in questions[:2]:
                await t.ask(q.text)
        print("  cluster: latency, cluster vs one node, explainability on / off, interleaved ...", flush=True)
        results.add(*await cluster_vs_one_node(targets, questions, 3 if quick else 8))
    finally:
        for t in targets:
            await close_target(t)
    print(f"  cluster: {CLIENTS} clients, two graph-rag replicas vs one ...", flush=True)
    results.add(*await replicas_figures(suite, suite.deployment(CLUSTER), collection, questions,
                                        2 if quick else 6, 1 if quick else 2))
    return results


def run(quick: bool = False, suite: Suite | None = None) -> Results:
    """Run the cluster benchmark (nothing measured without a cluster, see the module docstring)."""
    return run_on_suite(quick, suite, bench)


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "1,000 entities / 5,000 edges, fewer repetitions")
    args = parser.parse_args(argv)
    return report(run(args.quick), "Cluster", args.json)


if __name__ == "__main__":
    main()
