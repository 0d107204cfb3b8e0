"""Storage at a million traces: one real trace cloned a million times, compacted, measured as it grows.

``docs/capacity.md`` takes its storage per trace from a few thousand cloned traces and scales it
up. This benchmark checks that scaling on a real million-trace load:

* one real **DocumentRAG** trace is recorded (the sample corpus on the cluster, the document-rag
  service, the project's extractive LLM server), the smallest kind of trace the services store, so
  that a million of them fit in about an hour on a two-core machine (a GraphRAG trace has about
  five times the triples; ``bench.capacity`` measures it on 2,000 traces);
* it is cloned with a new session id and a start time of its own (one per second from 1 January
  2026, so the trace index spans twelve days) and stored as the services store it, through the
  stores' own write paths: its triples with their trace-index rows, and its answer document in the
  librarian, by several writer threads;
* at each checkpoint (default 10,000, 100,000 and the last) the keyspace is flushed and
  major-compacted on every node and ``nodetool tablestats`` read: the bytes per trace, per table,
  should stay flat as the load grows, which is what a linear capacity model assumes.

Needs Pulsar (``PULSAR_URL``) and a cluster started with ``scripts/servers.sh start
cassandra-cluster`` (``CLUSTER_CASSANDRA_HOST``/``_PORT`` and ``CLUSTER_IT_HOME`` as for
``bench.capacity``). Any number of nodes works; one node (``CASSANDRA_CLUSTER_NODES=1``, RF 1)
is the quickest way to a million, and per-replica bytes are what a node stores whatever the
replication factor.

    python -m bench.storage_load [--quick] [--traces 1000000] [--checkpoints 10000,100000] [--json out.json]
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from .capacity import cloned_traces, live_bytes, mb, not_measured, trace_template
from .cluster import CLUSTER, cluster_servers
from .common import Figure, Results
from .document_rag import PROCESSORS, questions
from .harness import Deployment, Suite, bench_parser, load_note, report, run_on_suite, stack_settings, stream_request
from .ingest import ensure_corpus

#: Cloned traces one writer task stores: their triples in one insert, then their answers one by one.
BLOCK = 100
#: Writer threads: enough requests in flight to keep the nodes busy while Python clones and encodes.
WRITERS = 6
INDEX_TABLES = ("trace_list", "trace_days", "trace_keys")


async def record_trace(suite: Suite) -> tuple:
    """One real, explainable DocumentRAG answer over the sample corpus on the cluster; its trace template."""
    from trustgraph_base.schema import DocumentRagQuery
    from trustgraph_cli.connection import Connection

    collection = await ensure_corpus(suite, CLUSTER)
    d = suite.deployment(CLUSTER)
    running = await d.start(PROCESSORS, settings=stack_settings(suite.llm))
    try:
        async with Connection.attach(running, timeout=120) as conn:
            client = await conn.client("document-rag")
            answer = await stream_request(client, DocumentRagQuery(
                query=questions()[0], user=d.user, collection=collection, doc_limit=10, streaming=True,
                explainable=True))
    finally:
        await running.stop()
    if not answer.text.strip():
        raise AssertionError("document-rag gave an empty answer; nothing to clone")
    return trace_template(answer)


class CloneWriter:
    """Stores cloned traces (triples, trace index, answer documents) under one user, by several threads."""

    def __init__(self, d: Deployment, template: tuple, collection: str, workers: int = WRITERS) -> None:
        """
        :param d: the deployment whose user (and keyspace) receives the traces.
        :param template: a :func:`bench.capacity.trace_template`.
        :param collection: the collection they are stored in.
        :param workers: writer threads.
        """
        self.d, self.template, self.collection, self.workers = d, template, collection, workers
        self.triples, self.index, self.librarian = d.open_stores()
        self.index.close()
        self._lock = threading.Lock()
        self.stored_traces = 0
        self.stored_triples = 0

    def _write_block(self, first: int, n: int, attempts: int = 3) -> None:
        """Store clones ``first`` .. ``first + n - 1``; a failed attempt (a time-out on a saturated node) is
        made again whole, which is safe because both stores take an identical re-write as a no-op."""
        for attempt in range(attempts):
            try:
                return self._write_block_once(first, n)
            except Exception as e:  # reported and retried; the last failure propagates
                if attempt == attempts - 1:
                    raise
                print(f"  storage load: traces {first:,}-{first + n - 1:,} failed ({e}); writing them again",
                      flush=True)
                time.sleep(5.0)

    def _write_block_once(self, first: int, n: int) -> None:
        from trustgraph_base.schema import DocumentMetadata
        from trustgraph_base.schema.library import ANSWER

        batch, answers = [], []
        for triples, doc, text in cloned_traces(self.template, n, first):
            batch += triples
            answers.append((doc, text))
        for doc, text in answers:  # the answer first, then the trace: the order the services store them in
            self.librarian.add_document(self.d.user, self.collection, DocumentMetadata(
                id=doc, time=time.time(), kind="text/plain", title="Answer", document_type=ANSWER), text.encode())
        inserted = self.triples.insert(self.d.user, self.collection, batch)
        with self._lock:
            self.stored_traces += n
            self.stored_triples += inserted

    def write(self, start: int, n: int, progress_every: int = 50_000) -> float:
        """Store clones ``start`` .. ``start + n - 1``; returns the seconds it took.

        :param progress_every: print the rate after about this many traces.
        """
        t0, shown = time.perf_counter(), self.stored_traces
        blocks = [(first, min(BLOCK, start + n - first)) for first in range(start, start + n, BLOCK)]
        with ThreadPoolExecutor(self.workers, thread_name_prefix="clone-writer") as pool:
            for future in [pool.submit(self._write_block, *b) for b in blocks]:
                future.result()
                if self.stored_traces - shown >= progress_every:
                    shown = self.stored_traces
                    elapsed = time.perf_counter() - t0
                    print(f"  storage load: {self.stored_traces:,} traces stored "
                          f"({(self.stored_traces - start) / elapsed:,.0f} traces/s)", flush=True)
        return time.perf_counter() - t0

    def close(self) -> None:
        self.triples.close()
        self.librarian.close()


def checkpoint_figures(traces: int, triples: int, load_s: float, rate: float, sizes: dict[str, int],
                       compact_s: float, nodes: int, replicas: int) -> list[Figure]:
    """The figures of one checkpoint: bytes per trace (all replicas and per replica, per table), load rate."""
    total = sum(sizes.values())
    per_table = ", ".join(f"{k} {v / traces / replicas:,.0f}" for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])
                          if v)
    index = sum(sizes.get(t, 0) for t in INDEX_TABLES)
    return [
        Figure(f"bytes stored per DocumentRAG trace at {traces:,} traces (all replicas, compacted)", total / traces,
               "bytes", stack=CLUSTER,
               note=f"{mb(total)} on {nodes} node(s), {triples // traces} triples per trace; per replica "
                    f"{total / traces / replicas:,.0f} bytes ({per_table}); flush + major compaction "
                    f"{compact_s:.0f} s"),
        Figure(f"trace index bytes per trace at {traces:,} traces (all replicas, compacted)", index / traces, "bytes",
               stack=CLUSTER, note=f"{mb(index)} in {', '.join(INDEX_TABLES)}"),
        Figure(f"storage load to {traces:,} traces", rate, "traces/s", better="higher", stack=CLUSTER,
               note=f"{triples:,} triples and {traces:,} answer documents stored in {load_s:,.0f} s in all; "
                    f"{load_note()}"),
    ]


async def bench(suite: Suite, traces: int | None = None, checkpoints: Sequence[int] | None = None) -> Results:
    results = Results()
    cluster = cluster_servers(suite.servers)
    if cluster is None:
        results.add(not_measured("storage load benchmark"))
        return results
    from trustgraph_base.store.cassandra.connection import connect, replication, replication_from_env
    from trustgraph_base.store.names import storage_name

    traces = traces or (20_000 if suite.quick else 1_000_000)
    marks = sorted({c for c in (checkpoints or ((2_000,) if suite.quick else (10_000, 100_000))) if 0 < c < traces})
    marks.append(traces)
    session = connect(cluster.cassandra_config())
    nodes = len(session.cluster.metadata.all_hosts())
    replicas = sum(replication(session, replication_from_env()).values())
    suite.deployments.setdefault(CLUSTER, Deployment("distributed", cluster))

    print("  storage load: recording a real DocumentRAG trace ...", flush=True)
    template = await record_trace(suite)
    print(f"  storage load: the trace has {len(template[1])} triples; storing {traces:,} clones on {nodes} node(s)",
          flush=True)
    d = Deployment("distributed", cluster)
    writer = CloneWriter(d, template, "traces")
    try:
        ks = storage_name("tg", d.user)
        done, load_s = 0, 0.0
        for mark in marks:
            load_s += await asyncio.to_thread(writer.write, done, mark - done)
            done = mark
            t0 = time.perf_counter()
            sizes = await asyncio.to_thread(live_bytes, nodes, ks)
            compact_s = time.perf_counter() - t0
            figures = checkpoint_figures(done, writer.stored_triples, load_s, done / load_s, sizes, compact_s, nodes,
                                         replicas)
            for f in figures:
                print(f"  storage load: {f.name}: {f.value:,.1f} {f.unit} ({f.note})", flush=True)
            results.add(*figures)
        first = next(f for f in results.figures if f.name.startswith("bytes stored per DocumentRAG trace"))
        last = [f for f in results.figures if f.name.startswith("bytes stored per DocumentRAG trace")][-1]
        results.add(
            Figure("storage per million DocumentRAG traces (all replicas, compacted)", last.value * 1e6 / 1e9, "GB",
                   stack=CLUSTER, note=f"measured on {traces:,} traces"),
            Figure(f"bytes per trace at {traces:,} / at {marks[0]:,} traces", last.value / first.value, "x",
                   stack=CLUSTER, note="1.00 = storage grows linearly with the traces kept"))
    finally:
        writer.close()
        d.close()
    return results


def run(quick: bool = False, suite: Suite | None = None, traces: int | None = None,
        checkpoints: Sequence[int] | None = None) -> Results:
    """Run the storage load (nothing measured without a cluster, see the module docstring)."""
    return run_on_suite(quick, suite, lambda s: bench(s, traces, checkpoints))


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "20,000 traces, a checkpoint at 2,000")
    parser.add_argument("--traces", type=int, help="cloned DocumentRAG traces to store (default 1,000,000)")
    parser.add_argument("--checkpoints", help="trace counts at which storage is measured before the last "
                                              "(default 10000,100000)")
    args = parser.parse_args(argv)
    marks = [int(x) for x in args.checkpoints.split(",")] if args.checkpoints else None
    return report(run(args.quick, traces=args.traces, checkpoints=marks), "Storage load", args.json)


if __name__ == "__main__":
    main()
