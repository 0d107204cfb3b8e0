"""Triple-store benchmark: bulk insert, pattern look-ups and trace listing on SQLite and Cassandra.

Targets (issue 5), with 1,000,000 stored triples: bulk insert from one writer process
>= 100,000 triples/s (SQLite) and >= 10,000 triples/s (Cassandra); triple-term look-up
``?sg tg:contains <<( s p o )>>`` in ``urn:graph:source`` p99 < 5 ms (SQLite) and < 10 ms
(Cassandra); newest 50 of 100,000 traces < 50 ms on both.  Also measured: an s-bound and a
po-bound (label) query.

    python -m bench.stores [--quick] [--triples N] [--traces N] [--batch N] [--backends sqlite,cassandra]
                           [--json out.json]

``--quick`` uses ~20,000 triples and 2,000 traces; ``--triples`` lets a suite measure scaling
(10k, 100k, 1M).  Triples go in as ``insert`` calls of ``--batch`` triples (default 10,000;
tg-load-turtle sends 1,000 per message by default and at most 100,000, and triples-write stores
each message with one ``insert``, i.e. one transaction).  Cassandra runs when ``CASSANDRA_HOST``
(or ``--cassandra-host``) is set; its keyspaces are dropped afterwards.  Before the timed insert,
:data:`WARMUP_TRIPLES` triples with IRIs of their own go to a throwaway user (its rate is in the
note): a just-started Cassandra is far slower until its JIT has compiled the write path, and
the figure is meant to be the steady rate of a running server.  Every timed query is
checked to return what it should, so a fast wrong answer cannot pass.  The data set is synthetic
and deterministic: per entity a label, a type, two edges in the default graph and, in
``urn:graph:source``, a subgraph that ``tg:contains`` each edge as a triple term.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance.triples import timestamp_literal
from trustgraph_base.rdf.terms import spo
from trustgraph_base.schema import Triple, TriplePattern, iri, literal, triple_term
from trustgraph_base.store.errors import StoreUnavailable
from trustgraph_base.store.triples import TriplesStore, open_triples_store

from .common import Figure, Results, percentile

EX = "http://example.org/"
RELATIONS = [iri(f"{EX}rel/{k}") for k in range(40)]
CLASSES = [iri(f"{EX}class/{k}") for k in range(20)]
TYPE, LABEL, CONTAINS = iri(ns.RDF_TYPE), iri(ns.RDFS_LABEL), iri(ns.TG_CONTAINS)
TRIPLES_PER_ENTITY = 6
BATCH = 10_000
COLLECTION = "bench"


#: Triples inserted (and not timed) before the insert figure: a freshly started Cassandra runs
#: its write path interpreted until the JIT has compiled it.  Measured on this machine, three
#: inserts of 200,000 triples into a just-started node: 7,300, 9,500, then 10,500 triples/s.
WARMUP_TRIPLES = 200_000


def entity(i: int, prefix: str = EX):
    return iri(f"{prefix}entity/{i}")


def edges(i: int, entities: int, prefix: str = EX) -> list[Triple]:
    """The two edges of entity ``i`` (a pure function of ``i``, so queries can rebuild them)."""
    rnd = random.Random(i * 1_000_003 + 17)
    return [Triple(entity(i, prefix), RELATIONS[rnd.randrange(40)], entity(rnd.randrange(entities), prefix))
            for _ in range(2)]


def graph_batches(n: int, batch: int = BATCH, prefix: str = EX) -> Iterator[list[Triple]]:
    """``n`` triples of the synthetic graph, in batches (entity IRIs start with ``prefix``)."""
    entities = max(1, n // TRIPLES_PER_ENTITY)
    out: list[Triple] = []
    for i in range(entities):
        e = entity(i, prefix)
        sg = iri(f"urn:trustgraph:subgraph:{i // 10}" if prefix == EX else f"{prefix}subgraph/{i // 10}")
        out.append(Triple(e, LABEL, literal(f"Entity {i}")))
        out.append(Triple(e, TYPE, CLASSES[i % 20]))
        for edge in edges(i, entities, prefix):
            out.append(edge)
            out.append(Triple(sg, CONTAINS, triple_term(*spo(edge)), ns.GRAPH_SOURCE))
        if len(out) >= batch:
            yield out
            out = []
    if out:
        yield out


def trace_batches(n: int, batch: int = 1000) -> Iterator[list[Triple]]:
    """``n`` GraphRAG Questions (type, query text, start time), inserted in shuffled time order."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    order = list(range(n))
    random.Random(5).shuffle(order)
    kind, query, started = iri(ns.TG_GRAPH_RAG_QUESTION), iri(ns.TG_QUERY), iri(ns.PROV_STARTED_AT_TIME)
    for i in range(0, n, batch):
        out = []
        for j in order[i:i + batch]:
            q = iri(f"urn:trustgraph:question:bench-{j}")
            out += [Triple(q, TYPE, kind, ns.GRAPH_RETRIEVAL),
                    Triple(q, query, literal(f"question number {j}"), ns.GRAPH_RETRIEVAL),
                    Triple(q, started, timestamp_literal(start + timedelta(seconds=j)), ns.GRAPH_RETRIEVAL)]
        yield out


def _insert_with_redelivery(store: TriplesStore, user: str, batch: list[Triple], attempts: int = 8) -> tuple[int, int]:
    """Insert like the storage service does: on :class:`StoreUnavailable` the batch is delivered again
    after a back-off (inserts are idempotent).  Returns ``(distinct triples, redeliveries)``; the
    time spent waiting counts against the throughput."""
    for attempt in range(attempts):
        try:
            return store.insert(user, COLLECTION, batch), attempt
        except StoreUnavailable as e:
            if attempt == attempts - 1:
                raise
            print(f"  redelivering a batch after: {str(e)[:120]}", flush=True)
            time.sleep(min(30.0, 2.0 ** attempt))
    raise AssertionError("unreachable")


def _latencies(samples: int, run: Callable[[int], None], entities: int, seed: int) -> list[float]:
    """Milliseconds of ``run(i)`` for ``samples`` random entities (after a short warm-up)."""
    rnd = random.Random(seed)
    for _ in range(min(50, samples)):
        run(rnd.randrange(entities))
    out = []
    for _ in range(samples):
        i = rnd.randrange(entities)
        t0 = time.perf_counter()
        run(i)
        out.append((time.perf_counter() - t0) * 1000)
    return out


class _Figures(list):
    """A list of figures that prints each one as it is measured, so a failure later keeps them."""

    def append(self, figure: Figure) -> None:
        super().append(figure)
        print(f"  {figure.name}: {figure.value:,.3f} {figure.unit} {figure.note}".rstrip(), flush=True)


def warm_up(store: TriplesStore, user: str, n: int, batch: int = BATCH) -> str:
    """Insert ``n`` triples with IRIs of their own (no cache of the timed run is filled) for ``user``;
    returns a note with the rate, which is what a cold server gives."""
    t0, inserted = time.perf_counter(), 0
    for triples in graph_batches(n, batch, prefix="http://example.org/warmup/"):
        inserted += _insert_with_redelivery(store, user, triples)[0]
    return f"warm-up first: {inserted:,} triples at {inserted / (time.perf_counter() - t0):,.0f}/s"


def bench_backend(name: str, store: TriplesStore, user: str, n: int, traces: int, samples: int,
                  batch: int = BATCH, warmup_user: str | None = None) -> list[Figure]:
    """Load ``n`` triples and ``traces`` Questions into ``store``, then time the look-ups.

    With ``warmup_user``, :data:`WARMUP_TRIPLES` (at most ``n``) go to that user first, untimed.
    """
    stack = "embedded" if name == "sqlite" else "distributed"
    insert_target = 100_000 if name == "sqlite" else 10_000
    lookup_target = 5.0 if name == "sqlite" else 10.0
    warm = warm_up(store, warmup_user, min(n, WARMUP_TRIPLES), batch) if warmup_user else "no warm-up"
    load = f"load avg {os.getloadavg()[0]:.1f}"

    inserted, elapsed, cpu, retries = 0, 0.0, 0.0, 0
    for triples in graph_batches(n, batch):
        t0, c0 = time.perf_counter(), time.process_time()
        count, tries = _insert_with_redelivery(store, user, triples)
        inserted += count
        retries += tries
        elapsed += time.perf_counter() - t0
        cpu += time.process_time() - c0
    note = f"{elapsed:.1f} s ({cpu:.1f} s CPU), batches of {batch:,}; {warm}; {load}"
    note += f"; {retries} redelivered batches" if retries else ""
    figures = _Figures()
    figures.append(Figure(f"{name}: bulk insert ({inserted:,} triples)", inserted / elapsed, "triples/s",
                          insert_target, "higher", stack=stack, note=note))

    entities = max(1, n // TRIPLES_PER_ENTITY)

    def s_bound(i: int) -> None:
        got = store.query(user, COLLECTION, TriplePattern(s=entity(i)))
        assert len(got) == 4, f"s-bound query for entity {i} returned {len(got)}"

    def po_bound(i: int) -> None:
        got = store.query(user, COLLECTION, TriplePattern(p=LABEL, o=literal(f"Entity {i}")))
        assert [s.value for s, _, _ in map(spo, got)] == [entity(i).value], \
            f"label look-up for entity {i} returned {got}"

    def triple_lookup(i: int) -> None:
        edge = edges(i, entities)[i % 2]
        got = store.query(user, COLLECTION, TriplePattern(p=CONTAINS, o=triple_term(*spo(edge)),
                                                          g=ns.GRAPH_SOURCE))
        assert f"urn:trustgraph:subgraph:{i // 10}" in {s.value for s, _, _ in map(spo, got)}, \
            f"tg:contains look-up {i}: {got}"

    for label, run, target in (("s-bound query", s_bound, None), ("po-bound query (label)", po_bound, None),
                               ("triple-term lookup ?sg tg:contains <<( s p o )>>", triple_lookup, lookup_target)):
        ms = _latencies(samples, run, entities, seed=len(label))
        figures.append(Figure(f"{name}: {label} p50", percentile(ms, 50), "ms", None, stack=stack,
                              note=f"{samples} queries"))
        figures.append(Figure(f"{name}: {label} p99", percentile(ms, 99), "ms", target, stack=stack))

    t0 = time.perf_counter()
    for trace_batch in trace_batches(traces):
        _insert_with_redelivery(store, user, trace_batch)
    trace_seconds = time.perf_counter() - t0
    figures.append(Figure(f"{name}: trace insert ({traces:,} Questions, 3 triples each)", traces / trace_seconds,
                          "traces/s", None, "higher", stack=stack, note=f"{trace_seconds:.1f} s"))
    newest = f"urn:trustgraph:question:bench-{traces - 1}"
    ms = []
    for k in range(max(20, samples // 10)):
        t0 = time.perf_counter()
        page = store.list_traces(user, COLLECTION, limit=50)
        ms.append((time.perf_counter() - t0) * 1000)
        if k == 0:
            assert len(page.traces) == min(50, traces) and page.traces[0].uri == newest, page.traces[:2]
            times = [t.time for t in page.traces]
            assert times == sorted(times, reverse=True)
    figures.append(Figure(f"{name}: newest 50 of {traces:,} traces p50", percentile(ms, 50), "ms", None,
                          stack=stack))
    figures.append(Figure(f"{name}: newest 50 of {traces:,} traces p99", percentile(ms, 99), "ms", 50.0,
                          stack=stack, note=f"{len(ms)} listings"))
    return list(figures)


def run(quick: bool = False, triples: int | None = None, traces: int | None = None,
        backends: tuple[str, ...] = ("sqlite", "cassandra"), cassandra_host: str | None = None,
        samples: int | None = None, batch: int = BATCH) -> Results:
    """Run the benchmark on each available backend; Cassandra only with a host."""
    n = triples or (20_000 if quick else 1_000_000)
    t = traces or (2_000 if quick else 100_000)
    samples = samples or (300 if quick else 2_000)
    results = Results()
    if "sqlite" in backends:
        home = tempfile.mkdtemp(prefix="tg-bench-stores-")
        store = open_triples_store("sqlite", home=home)
        try:
            results.add(*bench_backend("sqlite", store, "bench", n, t, samples, batch, warmup_user="warmup"))
        finally:
            store.close()
            shutil.rmtree(home, ignore_errors=True)
    host = cassandra_host or os.environ.get("CASSANDRA_HOST")
    if "cassandra" in backends:
        if not host:
            print("cassandra: skipped (set CASSANDRA_HOST or --cassandra-host)")
        else:
            from trustgraph_base.store.cassandra.connection import CassandraConfig
            from trustgraph_base.store.cassandra.triples import CassandraTriplesStore

            config = CassandraConfig(hosts=tuple(h.strip() for h in host.split(",")),
                                     port=int(os.environ.get("CASSANDRA_PORT", "9042")))
            cstore = CassandraTriplesStore(config=config)
            user = f"bench{uuid.uuid4().hex[:8]}"
            try:
                results.add(*bench_backend("cassandra", cstore, user, n, t, samples, batch,
                                           warmup_user=f"{user}warmup"))
            finally:
                for u in (user, f"{user}warmup"):
                    cstore._session.execute(f"DROP KEYSPACE IF EXISTS {cstore.keyspace(u)}", timeout=300)
                cstore.close()
    return results


def main(argv=None) -> Results:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="~20k triples and 2k traces")
    parser.add_argument("--triples", type=int, help="triples to load (default 1,000,000)")
    parser.add_argument("--traces", type=int, help="Questions to index (default 100,000)")
    parser.add_argument("--samples", type=int, help="timed queries per kind (default 2,000; quick 300)")
    parser.add_argument("--batch", type=int, default=BATCH, help=f"triples per insert call (default {BATCH:,})")
    parser.add_argument("--backends", default="sqlite,cassandra", help="comma-separated: sqlite,cassandra")
    parser.add_argument("--cassandra-host", default=None, help="default: $CASSANDRA_HOST")
    parser.add_argument("--json", help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    results = run(args.quick, args.triples, args.traces, tuple(b.strip() for b in args.backends.split(",")),
                  args.cassandra_host, args.samples, args.batch)
    results.print_table("triple stores")
    if args.json:
        results.write_json(args.json)
    return results


if __name__ == "__main__":
    main()
