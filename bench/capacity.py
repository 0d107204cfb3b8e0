"""Capacity figures on the Cassandra cluster: the inputs of docs/capacity.md, measured.

* **per GraphRAG query**: CPU of every service (each in a process of its own) and of the
  Cassandra nodes, triple-store requests and look-ups, explain triples and their bytes on the wire;
* **per ingested chunk**: CPU of the ingestion processors and of the nodes, quads, vectors and
  bytes stored;
* **storage** per trace and per knowledge triple on the cluster, flushed and compacted
  (``nodetool flush``, ``compact``, ``tablestats`` on every node), from real traces cloned with
  new session ids and from synthetic triples;
* **the trace index at scale**: ``list`` (newest 50) and ``show`` (a whole trace by URI) latency
  as the stored traces grow (index rows written through the store's own indexing code in big
  batches; the traces shown are real), and the index's bytes per trace.

Needs the distributed stack's Pulsar (``PULSAR_URL``) and a cluster started with
``scripts/servers.sh start cassandra-cluster`` (``CLUSTER_CASSANDRA_HOST``/``_PORT`` as for
``bench.cluster``; ``CLUSTER_IT_HOME``: its ``IT_HOME`` for ``nodetool``, default ``IT_HOME`` or
``~/.cache/tg-servers``).  Without them it reports that it measured nothing.

    python -m bench.capacity [--quick] [--traces N] [--triples N] [--index-sizes 100000,1000000] [--json out.json]
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import subprocess
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from .cluster import CLUSTER, QueryServices, cluster_servers, idle, process_cpu
from .common import Figure, Results, percentile
from .harness import Deployment, Suite, bench_parser, graph_for, load_graph, load_note, report, run_on_suite

SERVERS_SH = Path(__file__).resolve().parents[1] / "scripts" / "servers.sh"
RETRIEVAL = "urn:graph:retrieval"


# ================================================================== the cluster's own instruments
def node_pids(port: int) -> list[int]:
    """PIDs of the processes listening on ``port`` (every node of the cluster listens on its own address)."""
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True).stdout
    return sorted({int(p) for p in re.findall(r"pid=(\d+)", out)})


def nodes_cpu(pids: Sequence[int]) -> float:
    return sum(process_cpu(p) for p in pids)


def nodetool(node: int, *args: str, timeout: float = 1800.0) -> str:
    """``scripts/servers.sh nodetool`` against the cluster's node ``node``."""
    env = dict(os.environ)
    home = os.environ.get("CLUSTER_IT_HOME") or os.environ.get("IT_HOME")
    if home:
        env["IT_HOME"], env["IT_RUN"] = home, str(Path(home) / "run")
    r = subprocess.run(["bash", str(SERVERS_SH), "nodetool", str(node), *args], env=env, capture_output=True,
                       text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"nodetool {node} {' '.join(args)} failed: {(r.stderr or r.stdout)[-800:]}")
    return r.stdout


def live_bytes(nodes: int, keyspace: str, compact: bool = True) -> dict[str, int]:
    """Bytes of live SSTables per table of ``keyspace``, summed over the nodes, after a flush (and a major
    compaction) on every node."""
    for node in range(1, nodes + 1):
        nodetool(node, "flush", keyspace)
    if compact:
        for node in range(1, nodes + 1):
            nodetool(node, "compact", keyspace)
    tables: dict[str, int] = defaultdict(int)
    for node in range(1, nodes + 1):
        table = None
        for line in nodetool(node, "tablestats", keyspace).splitlines():
            line = line.strip()
            if line.startswith("Table: "):
                table = line.split(": ", 1)[1]
            elif line.startswith("Space used (live): ") and table:
                tables[table] += int(line.split(": ", 1)[1])
    return dict(tables)


def quiesce(nodes: int, timeout: float = 900.0) -> None:
    """Flush every node and wait until none has a compaction pending, so the CPU a measurement reads is its own
    and not the background work of an earlier load."""
    for node in range(1, nodes + 1):
        nodetool(node, "flush")
    deadline = time.monotonic() + timeout
    for node in range(1, nodes + 1):
        while re.search(r"pending tasks:?\s+0\b", nodetool(node, "compactionstats")) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {node} still has compactions pending after {timeout:.0f} s")
            time.sleep(2.0)


def idle_cpu_rate(pids: Sequence[int], seconds: float = 10.0) -> float:
    """CPU seconds per second the nodes spend while nobody uses them (gossip, GC, timers): subtracted from a
    measurement so only the work it caused is counted."""
    c0, t0 = nodes_cpu(pids), time.monotonic()
    time.sleep(seconds)
    return (nodes_cpu(pids) - c0) / (time.monotonic() - t0)


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


# ================================================================== per query
async def per_query(d: Deployment, llm_url: str, collection: str, questions, queries: int, pids: list[int],
                    nodes: int):
    """Sequential explainable queries against every query service in its own process; returns figures and one
    query's trace (explain events and answer) as the template of the cloned traces."""
    from trustgraph_base.codec import encode
    from trustgraph_base.schema import GraphRagQuery

    from .harness import stream_request

    services = QueryServices(d.servers, llm_url, 1)
    backend = d.backend()
    store = services.groups[0]
    try:
        await services.wait_started()
        client = await services.graph_rag_client(backend, "bench-capacity")
        try:
            ask = [GraphRagQuery(query=q.text, user=d.user, collection=collection, streaming=True, explainable=True)
                   for q in questions]
            for req in ask[:2]:
                await stream_request(client, req)
            await idle(services)
            await asyncio.to_thread(quiesce, nodes)
            baseline = await asyncio.to_thread(idle_cpu_rate, pids)
            c0, n0, own0, t0 = services.cpu(), nodes_cpu(pids), time.process_time(), time.monotonic()
            m0 = {k: store._metric(k, "tg_messages_total") for k in store.procs}
            l0 = store._metric("triples-query", "tg_store_pattern_lookups_total")
            triples, wire, latencies, answer = [], [], [], None
            for i in range(queries):
                a = await stream_request(client, ask[i % len(ask)])
                latencies.append(a.latency * 1000)
                explain = [m for m in a.messages if m.message_type == "explain"]
                triples.append(sum(len(m.explain_triples) for m in explain))
                wire.append(sum(len(encode(m)) for m in explain))
                answer = a
            await idle(services)
            c1, n1, own1, t1 = services.cpu(), nodes_cpu(pids), time.process_time(), time.monotonic()
            m1 = {k: store._metric(k, "tg_messages_total") for k in store.procs}
            l1 = store._metric("triples-query", "tg_store_pattern_lookups_total")
        finally:
            await client.stop()
    finally:
        await backend.close()
        services.stop()
    cpu = {name: (c1[name] - c0[name]) * 1000 / queries for name in c1}
    cpu["client"] = (own1 - own0) * 1000 / queries
    node_ms = (n1 - n0 - baseline * (t1 - t0)) * 1000 / queries
    messages = {k: (m1[k] - m0[k]) / queries for k in m1}
    figures = [
        Figure("CPU per GraphRAG query, every service", sum(cpu.values()), "ms", stack=CLUSTER,
               note="; ".join(f"{k} {v:.1f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]))
                    + f"; {queries} sequential queries, LLM in its own process, not counted"),
        Figure("CPU per GraphRAG query, Cassandra nodes", node_ms, "ms", stack=CLUSTER,
               note=f"{len(pids)} nodes, RF 3, LOCAL_QUORUM; idle nodes' {baseline * 1000:.0f} ms/s subtracted; "
                    f"{load_note()}"),
        Figure("GraphRAG latency p50 (sequential, explainable)", percentile(latencies, 50), "ms", stack=CLUSTER,
               note=f"p95 {percentile(latencies, 95):.0f} ms"),
        Figure("triple-store requests per GraphRAG query", messages.get("triples-query", 0), "requests",
               stack=CLUSTER, note=f"{(l1 - l0) / queries:.0f} pattern look-ups inside them; "
                                   + ", ".join(f"{k} {v:.1f}" for k, v in sorted(messages.items()) if v)
                                   + " messages per query"),
        Figure("explain triples per GraphRAG trace", statistics.mean(triples), "triples", stack=CLUSTER,
               note=f"{statistics.mean(wire):,.0f} bytes of explain messages on the wire per query"),
    ]
    return figures, answer


# ================================================================== cloned traces
def _swap(term, old: str, new: str):
    if term is None:
        return None
    if term.triple is not None:
        t = term.triple
        return replace(term, triple=replace(t, s=_swap(t.s, old, new), p=_swap(t.p, old, new), o=_swap(t.o, old, new)))
    if old in term.value:
        return replace(term, value=term.value.replace(old, new))
    return term


def trace_template(answer) -> tuple[str, list, str, str]:
    """(session id, the trace's triples, answer document id, answer text) of one recorded query (any kind)."""
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.provenance.uris import parse_trace_uri

    explain = [m for m in answer.messages if m.message_type == "explain"]
    roots = [t for t in (parse_trace_uri(m.explain_id) for m in explain) if t is not None and t.stage == "question"]
    if not roots:
        raise AssertionError("the recorded answer has no Question among its explain events")
    session = roots[0].session
    triples = [t for m in explain for t in m.explain_triples]
    doc = next(t.o.value for t in triples if t.p.value == ns.TG_DOCUMENT)
    text = "".join(m.response for m in answer.messages if m.message_type == "chunk")
    return session, triples, doc, text


def cloned_traces(template, n: int, start: int = 0) -> Iterator[tuple[list, str, str]]:
    """``n`` copies of the template trace, each with a session id and start time of its own."""
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.schema import literal

    session, triples, doc, text = template
    base = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(start, start + n):
        new = str(uuid.UUID(int=(0xCA << 120) | i))
        when = literal((base + timedelta(seconds=i)).isoformat().replace("+00:00", "Z"),
                       datatype="http://www.w3.org/2001/XMLSchema#dateTime")
        out = []
        for t in triples:
            t = replace(t, s=_swap(t.s, session, new), o=_swap(t.o, session, new))
            if t.p.value == ns.PROV_STARTED_AT_TIME:
                t = replace(t, o=when)
            out.append(t)
        yield out, doc.replace(session, new), text


def store_traces(d: Deployment, template, n: int, collection: str) -> tuple[int, float]:
    """Insert ``n`` cloned traces (triples and answers); returns (triples inserted, seconds)."""
    from trustgraph_base.schema import DocumentMetadata
    from trustgraph_base.schema.library import ANSWER

    triples_store, index, librarian = d.open_stores()
    index.close()
    t0, count, batch = time.perf_counter(), 0, []
    try:
        for triples, doc, text in cloned_traces(template, n):
            batch += triples
            librarian.add_document(d.user, collection, DocumentMetadata(
                id=doc, time=time.time(), kind="text/plain", title="Answer", document_type=ANSWER), text.encode())
            if len(batch) >= 5000:
                count += triples_store.insert(d.user, collection, batch)
                batch = []
        if batch:
            count += triples_store.insert(d.user, collection, batch)
    finally:
        triples_store.close()
        librarian.close()
    return count, time.perf_counter() - t0


# ================================================================== the trace index at scale
def index_rows(store, user: str, collection: str, start: int, n: int, batch: int = 20_000) -> None:
    """Trace-index rows of ``n`` synthetic GraphRAG Questions, through the store's own indexing code."""
    from trustgraph_base.schema.query import TraceSummary
    from trustgraph_base.store.triples import IndexedTrace

    st = store._prepared(user)
    base = int(datetime(2025, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)
    for first in range(start, start + n, batch):
        traces = []
        for i in range(first, min(first + batch, start + n)):
            uri = f"urn:trustgraph:question:{uuid.UUID(int=(0xCB << 120) | i)}"
            ts = base + i * 1_000_000
            when = datetime.fromtimestamp(ts / 1e6, tz=UTC).isoformat().replace("+00:00", "Z")
            traces.append(IndexedTrace(ts, TraceSummary(uri=uri, type="graphrag", question=f"synthetic question {i}",
                                                        time=when, parent="")))
        store._index_traces(st, collection, traces, [()] * len(traces))


def index_latency(d: Deployment, collection: str, newest: str, calls: int) -> tuple[list[float], list[float]]:
    """Milliseconds of ``calls`` list (newest 50) and show (the newest trace, whole) requests to the store."""
    from trustgraph_base.provenance.walk import collect_trace

    triples_store, index, librarian = d.open_stores()
    index.close()
    librarian.close()

    async def q(patterns):
        return [t for r in triples_store.query_many(d.user, collection, patterns) for t in r]

    lists, shows = [], []
    try:
        for _ in range(calls):
            t0 = time.perf_counter()
            page = triples_store.list_traces(d.user, collection, limit=50)
            lists.append((time.perf_counter() - t0) * 1000)
            if page.traces[0].uri != newest or len(page.traces) != 50:
                raise AssertionError(f"list_traces did not list the newest trace first: {page.traces[:2]}")
            t0 = time.perf_counter()
            summary = triples_store.get_trace(d.user, collection, newest)
            trace = asyncio.run(collect_trace(q, newest))
            shows.append((time.perf_counter() - t0) * 1000)
            if summary is None or len(trace) < 10:
                raise AssertionError(f"the newest trace could not be shown ({len(trace)} triples)")
    finally:
        triples_store.close()
    return lists, shows


# ================================================================== per chunk
async def per_chunk(suite: Suite, d: Deployment, collection: str, pids: list[int],
                    nodes: int) -> tuple[list[Figure], int]:
    """The sample corpus through the real ingestion processors (in this process) on the cluster."""
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.schema import IRI, Term, TriplePattern
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.load import load_documents
    from trustgraph_flow.embedded import INGEST
    from trustgraph_flow.ingest.sample_corpus import sample_documents


    docs = [(x.id, x.title, x.kind, x.content) for x in sample_documents()]
    stack = await d.start(tuple(dict.fromkeys(INGEST)), llm="extractive")
    try:
        await asyncio.to_thread(quiesce, nodes)
        baseline = await asyncio.to_thread(idle_cpu_rate, pids)
        c0, n0, t0 = time.process_time(), nodes_cpu(pids), time.perf_counter()
        async with Connection.attach(stack, timeout=300) as conn:
            await load_documents(conn, d.user, collection, docs, idle_timeout=300, show=False)
        await stack.wait_idle()
        c1, t1 = time.process_time(), time.perf_counter()
        await asyncio.to_thread(quiesce, nodes)  # the compactions the load caused are its cost too
        n1, t2 = nodes_cpu(pids), time.perf_counter()
    finally:
        await stack.stop()
    triples_store, index, librarian = d.open_stores()
    try:
        chunks = triples_store.count(d.user, collection, TriplePattern(
            p=Term(IRI, ns.RDF_TYPE), o=Term(IRI, ns.TG_CHUNK_TYPE), g=ns.GRAPH_SOURCE))
        quads = triples_store.count(d.user, collection, TriplePattern())
    finally:
        for s in (triples_store, index, librarian):
            s.close()
    return [
        Figure("CPU per ingested chunk, ingestion processors", (c1 - c0) * 1000 / chunks, "ms", stack=CLUSTER,
               note=f"{chunks} chunks of {len(docs)} documents in {t1 - t0:.0f} s (librarian, decoder, chunker, "
                    f"kg-extract, embeddings, writers in one process); {load_note()}"),
        Figure("CPU per ingested chunk, Cassandra nodes", (n1 - n0 - baseline * (t2 - t0)) * 1000 / chunks, "ms",
               stack=CLUSTER, note=f"{len(pids)} nodes, RF 3, with the flushes and compactions of what was loaded; "
                                   f"idle nodes' {baseline * 1000:.0f} ms/s subtracted"),
        Figure("quads stored per ingested chunk", quads / chunks, "quads", stack=CLUSTER,
               note=f"{quads:,} quads (knowledge + extraction provenance)"),
    ], chunks


# ================================================================== the whole benchmark
def not_measured(what: str) -> Figure:
    """The one figure of a cluster benchmark run without a cluster: why nothing was measured."""
    return Figure(what, 0, "", stack=CLUSTER, note="not measured: set PULSAR_URL and CLUSTER_CASSANDRA_HOST/_PORT "
                                                   "(and CLUSTER_IT_HOME for nodetool); see bench/README.md")


async def bench(suite: Suite, traces: int | None = None, triples: int | None = None,
                index_sizes: Sequence[int] | None = None) -> Results:
    results = Results()
    cluster = cluster_servers(suite.servers)
    if cluster is None:
        results.add(not_measured("capacity benchmark"))
        return results
    from trustgraph_base.store.cassandra.connection import connect
    from trustgraph_base.store.cassandra.triples import TRACE_KEY_BUCKETS
    from trustgraph_base.store.names import storage_name

    from .stores import graph_batches

    quick = suite.quick
    traces = traces or (2_000 if quick else 20_000)
    triples = triples or (100_000 if quick else 1_000_000)
    index_sizes = list(index_sizes or ((10_000, 100_000) if quick else (100_000, 1_000_000, 3_000_000)))
    pids = node_pids(cluster.cassandra_port)
    nodes = len(connect(cluster.cassandra_config()).cluster.metadata.all_hosts())
    d = suite.deployments.setdefault(CLUSTER, Deployment("distributed", cluster))
    ks = storage_name("tg", d.user)

    # ---- per query
    graph = graph_for(True, 2_000)
    questions = graph.questions(6)
    collection = f"capacity-{graph.entities}"
    results.add(await load_graph(suite, CLUSTER, graph, collection, {i for q in questions for i in q.entities}))
    print("  capacity: per GraphRAG query ...", flush=True)
    figures, answer = await per_query(d, suite.llm.base_url, collection, questions, 20 if quick else 60, pids,
                                      nodes)
    results.add(*figures)
    template = trace_template(answer)

    # ---- per chunk
    print("  capacity: per ingested chunk ...", flush=True)
    before = await asyncio.to_thread(live_bytes, nodes, ks)
    figures, chunks = await per_chunk(suite, d, "capacity-ingest", pids, nodes)
    after = await asyncio.to_thread(live_bytes, nodes, ks)
    grown = sum(after.values()) - sum(before.values())
    results.add(*figures, Figure("bytes stored per ingested chunk (all replicas, compacted)", grown / chunks, "bytes",
                                 stack=CLUSTER, note=f"{mb(grown)} for {chunks} chunks on {nodes} nodes (RF 3): "
                                                     f"{grown / chunks / 3:,.0f} bytes per replica"))

    # ---- storage per trace and per triple (users of their own, so the keyspace holds nothing else)
    print(f"  capacity: {traces:,} cloned traces ...", flush=True)
    tr = Deployment("distributed", cluster)
    try:
        count, seconds = await asyncio.to_thread(store_traces, tr, template, traces, "traces")
        sizes = await asyncio.to_thread(live_bytes, nodes, storage_name("tg", tr.user))
        total = sum(sizes.values())
        per_table = ", ".join(f"{k} {v / traces / 3:,.0f}" for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])
                              if v)
        results.add(
            Figure(f"insert {traces:,} cloned GraphRAG traces (triples + answers)", count / seconds, "triples/s",
                   better="higher", stack=CLUSTER, note=f"{count:,} triples in {seconds:.0f} s; {load_note()}"),
            Figure("bytes stored per GraphRAG trace (all replicas, compacted)", total / traces, "bytes", stack=CLUSTER,
                   note=f"{mb(total)} for {traces:,} traces of {count // traces} triples; per replica "
                        f"{total / traces / 3:,.0f} bytes ({per_table})"),
            Figure("storage per million GraphRAG traces (all replicas)", total / traces * 1e6 / 1e9, "GB",
                   stack=CLUSTER, note=f"measured on {traces:,} traces, compacted; linear in traces"))
    finally:
        tr.close()
    print(f"  capacity: {triples:,} knowledge triples ...", flush=True)
    kn = Deployment("distributed", cluster)
    try:
        store, index, librarian = kn.open_stores()
        index.close()
        librarian.close()
        t0, n = time.perf_counter(), 0
        try:
            for batch in graph_batches(triples):
                n += store.insert(kn.user, "knowledge", batch)
        finally:
            store.close()
        seconds = time.perf_counter() - t0
        sizes = await asyncio.to_thread(live_bytes, nodes, storage_name("tg", kn.user))
        total = sum(sizes.values())
        results.add(
            Figure(f"insert {n:,} knowledge triples", n / seconds, "triples/s", better="higher", stack=CLUSTER,
                   note=f"{seconds:.0f} s, RF 3 at LOCAL_QUORUM; {load_note()}"),
            Figure("storage per million knowledge triples (all replicas, compacted)", total / n * 1e6 / 1e9, "GB",
                   stack=CLUSTER, note=f"{mb(total)} for {n:,} triples; {total / n / 3:,.0f} bytes per triple "
                                       f"per replica (7 rows per quad)"))
    finally:
        kn.close()

    # ---- the trace index at scale: list and show as the stored traces grow
    ix = Deployment("distributed", cluster)
    try:
        store, index, librarian = ix.open_stores()
        index.close()
        librarian.close()
        done = 0
        try:
            for size in index_sizes:
                print(f"  capacity: trace index at {size:,} traces ...", flush=True)
                t0 = time.perf_counter()
                await asyncio.to_thread(index_rows, store, ix.user, "index", done, size - done)
                load_s = time.perf_counter() - t0
                rate = (size - done) / load_s
                done = size
                # a real trace, newest of all, is what show reads
                real_triples = next(cloned_traces(template, 1, start=10**9))[0]
                store.insert(ix.user, "index", real_triples)
                newest = next(t.s.value for t in real_triples if t.s.value.startswith("urn:trustgraph:question:"))
                await asyncio.to_thread(nodetool_flush_all, nodes, storage_name("tg", ix.user))
                lists, shows = await asyncio.to_thread(index_latency, ix, "index", newest, 50 if quick else 200)
                sizes = await asyncio.to_thread(live_bytes, nodes, storage_name("tg", ix.user), False)
                index_bytes = sum(sizes.get(t, 0) for t in ("trace_list", "trace_days", "trace_keys"))
                results.add(
                    Figure(f"list newest 50 of {size:,} traces p50", percentile(lists, 50), "ms", stack=CLUSTER,
                           note=f"p99 {percentile(lists, 99):.1f} ms; store call, RF 3 at LOCAL_QUORUM; index rows "
                                f"written at {rate:,.0f} traces/s; {load_note()}"),
                    Figure(f"show one trace among {size:,} traces p50", percentile(shows, 50), "ms", stack=CLUSTER,
                           note=f"p99 {percentile(shows, 99):.1f} ms; index look-up by URI + the whole trace"),
                    Figure(f"trace index bytes per trace at {size:,} traces (all replicas, flushed)",
                           index_bytes / size, "bytes", stack=CLUSTER,
                           note=f"{mb(index_bytes)}; listing partitions by kind and day, URI rows in "
                                f"{TRACE_KEY_BUCKETS} buckets"))
        finally:
            store.close()
    finally:
        ix.close()
    return results


def nodetool_flush_all(nodes: int, keyspace: str) -> None:
    for node in range(1, nodes + 1):
        nodetool(node, "flush", keyspace)


def run(quick: bool = False, suite: Suite | None = None, traces: int | None = None, triples: int | None = None,
        index_sizes: Sequence[int] | None = None) -> Results:
    """Run the capacity benchmark (nothing measured without a cluster, see the module docstring)."""
    return run_on_suite(quick, suite, lambda s: bench(s, traces, triples, index_sizes))


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "2,000 traces, 100,000 triples, index at 10,000 and 100,000 traces")
    parser.add_argument("--traces", type=int, help="cloned GraphRAG traces for the storage figure (default 20,000)")
    parser.add_argument("--triples", type=int, help="knowledge triples for the storage figure (default 1,000,000)")
    parser.add_argument("--index-sizes", help="trace counts at which list/show are timed (default 100000,1000000,"
                                              "3000000)")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.index_sizes.split(",")] if args.index_sizes else None
    return report(run(args.quick, traces=args.traces, triples=args.triples, index_sizes=sizes), "Capacity", args.json)


if __name__ == "__main__":
    main()
