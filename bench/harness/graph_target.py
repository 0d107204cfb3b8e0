"""A running GraphRAG stack over a synthetic graph, with its client and instruments attached.

The GraphRAG, memory and scaling benchmarks all load a synthetic graph straight into the
stores and query it through the real services; this module starts those services on a
suite's deployment (the storage services apart on the distributed stack), attaches the
request and look-up instruments, and asks one recorded query at a time.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..common import Figure
from ..synthetic import Question, SyntheticGraph, insert_graph
from .deployment import Deployment, ServiceProcesses, settle
from .interleaving import Variants, interleaved_order
from .llm import shared_embedder, stack_settings
from .recording import CountingStore, ProcessLookups, QueryRecord, RecordingPorts, stream_request
from .suite import Suite

#: Processors a GraphRAG query uses.
QUERY_PROCESSORS = ("triples-write", "triples-query", "graph-embeddings-query", "document-embeddings-query",
                    "embeddings", "prompt", "text-completion", "librarian", "graph-rag")
#: Services the distributed stack runs as processes of their own, as deployed (README, *Distributed set-up*):
#: the stores' side of a query and of its trace.  The query path stays in this process, where its requests
#: are recorded.  Run here too, their CPU (reading source chains, writing traces) would hold this process's
#: GIL while the query path waits for it, a cost no deployment of separate services pays.
OWN_PROCESSES = ("triples-write", "triples-query", "librarian")


@dataclass
class GraphRagTarget:
    """A running stack with the synthetic graph loaded, its client and its instruments."""

    name: str
    deployment: Deployment
    stack: Any
    conn: Any
    client: Any
    ports: RecordingPorts
    store: Any  # CountingStore, or ProcessLookups when triples-query runs apart
    collection: str
    processes: ServiceProcesses | None = None

    def cpu_seconds(self) -> float:
        """CPU time so far of this process and of the services running apart."""
        return time.process_time() + (self.processes.cpu_seconds() if self.processes else 0.0)

    async def ask(self, question: str, explainable: bool = True, settle_after: bool = True,
                  **limits) -> QueryRecord:
        """One query, read to its end; then (by default) wait until its trace is stored."""
        from trustgraph_base.schema import GraphRagQuery

        self.ports.reset()
        self.store.reset()
        req = GraphRagQuery(query=question, user=self.deployment.user, collection=self.collection, streaming=True,
                            explainable=explainable, **limits)
        c0 = self.cpu_seconds()
        answer = await stream_request(self.client, req)
        calls, lookups = list(self.ports.calls), self.store.lookups
        if settle_after:
            await settle(self.stack, processes=self.processes)
        return QueryRecord(answer, calls, lookups, (self.cpu_seconds() - c0) * 1000)


async def load_graph(suite: Suite, stack: str, graph: SyntheticGraph, collection: str, real: set[int] | None,
                     vector_limit: int | None = None) -> Figure:
    """Insert ``graph`` into ``collection`` of the suite's deployment on ``stack`` (straight into the stores)."""
    d = suite.deployment(stack)
    triples, index, librarian = await asyncio.to_thread(d.open_stores)
    try:
        t0 = time.perf_counter()
        load = await asyncio.to_thread(insert_graph, graph, triples, index, d.user, collection, shared_embedder(),
                                       real, vector_limit)
    finally:
        for s in (triples, index, librarian):
            s.close()
    how = "all labels embedded" if real is None else f"{len(real)} labels embedded, the rest random"
    return Figure(f"load synthetic graph: {load['triples']:,} triples, {load['vectors']:,} vectors",
                  time.perf_counter() - t0, "s", stack=stack,
                  note=f"{load['triples'] / load['triple_seconds']:,.0f} triples/s, "
                       f"{load['vectors'] / max(load['vector_seconds'], 1e-9):,.0f} vectors/s ({how})")


async def open_target(suite: Suite, stack: str, collection: str, processors: Sequence[str] = QUERY_PROCESSORS,
                      own: Sequence[str] = OWN_PROCESSES) -> GraphRagTarget:
    """Start the query processors of the suite's deployment on ``stack``, attach instruments and a client.

    :param own: processors that run in processes of their own on the distributed stack (``()``: none).
    """
    from trustgraph_cli.connection import Connection

    d = suite.deployment(stack)
    running, processes = await d.start_with_processes(processors, own, settings=stack_settings(suite.llm))
    try:
        rag = running.get("graph-rag")
        ports = RecordingPorts(rag.rag.ports)
        rag.rag.ports = ports
        if processes is not None and "triples-query" in processes.procs:
            store: Any = ProcessLookups(processes)
        else:
            query = running.get("triples-query")
            store = CountingStore(query.store)
            query.store = store
        conn = await Connection.attach(running, timeout=120).__aenter__()
        client = await conn.client("graph-rag")
    except BaseException:
        await running.stop()
        if processes is not None:
            processes.stop()
        raise
    return GraphRagTarget(stack, d, running, conn, client, ports, store, collection, processes)


async def close_target(t: GraphRagTarget) -> None:
    await t.conn.__aexit__(None, None, None)
    await t.stack.stop()
    if t.processes is not None:
        t.processes.stop()


def graph_for(quick: bool, entities: int | None = None, edges: int | None = None) -> SyntheticGraph:
    """The anchor graph: 10,000 entities / 50,000 edges (quick: 1,000 / 5,000)."""
    e = entities or (1_000 if quick else 10_000)
    return SyntheticGraph(e, edges or 5 * e)


async def ask_on_off(targets: Sequence[GraphRagTarget], questions: Sequence[Question],
                     reps: int) -> tuple[Variants, Variants, dict[str, list[QueryRecord]]]:
    """Every question on every target with explainability on and off, in interleaved order, ``reps`` times.

    :returns: latency (ms) and client-side CPU (ms) per ``(target, variant)``, and the records of the
        queries asked with explainability on, by target.
    """
    v, cpu = Variants(), Variants()
    on: dict[str, list[QueryRecord]] = defaultdict(list)
    keys = [(t.name, var) for t in targets for var in ("on", "off")]
    by_name = {t.name: t for t in targets}
    for rep in range(reps):
        v.new_rep(keys)
        cpu.new_rep(keys)
        for qi, q in enumerate(questions):
            for name, var in interleaved_order(keys, rep + qi):
                r = await by_name[name].ask(q.text, explainable=(var == "on"))
                v.add(name, var, r.answer.latency * 1000)
                cpu.add(name, var, r.cpu_ms)
                if var == "on":
                    on[name].append(r)
    return v, cpu, on
