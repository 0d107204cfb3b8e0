"""Ingestion benchmark: pages/s and chunks/s through the whole pipeline, extractive backend.

Each document goes through the real processors (librarian, decoder, chunker, pattern
extractor with extraction provenance, triples-write, entity and chunk embeddings with the
packaged MiniLM model) until the pipeline reports every chunk extracted, stored and
embedded.  Documents alternate between the stacks (embedded; Pulsar + Cassandra when
configured), so both are measured over the same minutes; each stack has an embedder of its own
(as separate deployments do), and one small untimed document warms each stack up first (the
user's keyspace and tables, the flow's topics).  Targets: >= 40 chunks/s embedded, >= 20
chunks/s distributed.

Two figures per stack: documents loaded one at a time (each waits for the one before it to be
done, so a document's start and end, where one core idles, count in full), and the same
documents sent in one load, as ``tg-load-document a.pdf b.docx ...`` sends them (the stages of
one document overlap those of the next).  The one-load run starts fresh processors with an
embedder of their own, so no vector comes from the first run's cache.

The corpus is the bundled sample corpus (5 documents, about 5,000 words; the PDF is
rendered at load time); full mode also loads each document a second time with its
paragraphs in reverse order under another id (different chunks, so nothing is answered
from caches).

    python -m bench.ingest [--quick] [--json out.json]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time

from .common import Figure, Results, spread
from .harness import Suite, bench_parser, interleaved_order, load_note, report, run_on_suite, settle, stores_of

CORPUS_COLLECTION = "corpus"
#: The issue's throughput targets, chunks/s, for both figures of a stack.
TARGETS = {"embedded": 40.0, "distributed": 20.0}
#: Where the documents go when they are sent in one load.
ONE_LOAD_COLLECTION = "corpus-one-load"
#: Loaded on each stack before anything is timed (its words are not the corpus's: no cached vector helps).
WARM_UP_COLLECTION = "warm-up"
WARM_UP_DOCUMENT = ("https://trustgraph.ai/doc/bench-ingest-warm-up", "warm-up", "text/plain",
                    b"Kalomi Mineva discovered the mineral kalomiite. Kalomi Mineva worked in Suvo.\n")


def corpus(variants: bool) -> list[tuple[str, str, str, bytes]]:
    """``(id, title, kind, content)`` of the sample corpus, plus (``variants``) reversed-paragraph copies."""
    from trustgraph_flow.ingest.sample_corpus import render_pdf, sample_documents, source_text

    docs = [(d.id, d.title, d.kind, d.content) for d in sample_documents()]
    if variants:
        for d in sample_documents():
            text = source_text(d.id.rsplit("/", 1)[-1])
            paragraphs = [p for p in text.strip().split("\n\n") if p.strip()]
            reordered = "\n\n".join(paragraphs[:1] + paragraphs[1:][::-1])
            content = render_pdf(d.title, reordered) if d.kind == "application/pdf" else reordered.encode("utf-8")
            docs.append((d.id + "-reversed", d.title + " (reversed)", d.kind, content))
    return docs


def _count(store, user: str, collection: str, cls: str) -> int:
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.schema import TriplePattern, iri

    return store.count(user, collection, TriplePattern(p=iri(ns.RDF_TYPE), o=iri(cls), g=ns.GRAPH_SOURCE))


async def load(stack, user: str, collection: str, docs: list, timeout: float = 600.0) -> None:
    """Load ``docs`` through a running ingest stack and wait until the pipeline is done with them."""
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.load import load_documents

    async with Connection.attach(stack, timeout=timeout) as conn:
        await load_documents(conn, user, collection, docs, idle_timeout=timeout, show=False)


async def start_ingest(suite: Suite, stack: str):
    """The ingestion processors on ``stack``, with an embedder of their own, loaded before anything is timed.

    One process runs both stacks here, and embedders are shared per process: with one embedder, the
    stack that loads a document second found every chunk's vector in the other's cache.
    """
    from trustgraph_flow.embedded import INGEST
    from trustgraph_flow.model.embeddings import LocalEmbedder

    embedder = LocalEmbedder()
    await asyncio.to_thread(embedder.load)
    return await suite.deployment(stack).start(tuple(dict.fromkeys(INGEST)), llm="extractive",
                                               settings={"embeddings": {"embedder": embedder}})


async def ensure_corpus(suite: Suite, stack: str) -> str:
    """The collection holding the sample corpus on ``stack`` (loaded now, untimed, if no benchmark did it)."""
    if stack not in suite.corpus:
        print(f"  loading the sample corpus ({stack}) ...", flush=True)
        running = await start_ingest(suite, stack)
        try:
            await load(running, suite.deployment(stack).user, CORPUS_COLLECTION, corpus(False))
            await settle(running)
        finally:
            await running.stop()
        suite.corpus[stack] = CORPUS_COLLECTION
    return suite.corpus[stack]


async def bench(suite: Suite) -> Results:
    """Time every document on every stack, interleaved; the corpus stays loaded for later benchmarks."""
    docs = corpus(variants=not suite.quick)
    if suite.quick:
        docs = docs[:3]
    stacks = {s: await start_ingest(suite, s) for s in suite.stacks}
    for s, running in stacks.items():  # untimed: the user's keyspace, tables and topics are made on first use
        await load(running, suite.deployment(s).user, WARM_UP_COLLECTION, [WARM_UP_DOCUMENT])
        await settle(running)
    seconds = {s: 0.0 for s in stacks}
    cpu = {s: 0.0 for s in stacks}
    chunks = {s: 0 for s in stacks}
    pages = {s: 0 for s in stacks}
    rates: dict[str, list[float]] = {s: [] for s in stacks}
    try:
        from trustgraph_base.provenance import namespaces as ns

        for i, doc in enumerate(docs):
            for s in interleaved_order(list(stacks), i):
                running, user = stacks[s], suite.deployment(s).user
                store = stores_of(running)[0]
                c0 = await asyncio.to_thread(_count, store, user, CORPUS_COLLECTION, ns.TG_CHUNK_TYPE)
                p0 = await asyncio.to_thread(_count, store, user, CORPUS_COLLECTION, ns.TG_PAGE_TYPE)
                t0, cpu0 = time.perf_counter(), time.process_time()
                await load(running, user, CORPUS_COLLECTION, [doc])
                elapsed = time.perf_counter() - t0
                await settle(running)
                cpu[s] += time.process_time() - cpu0
                c = await asyncio.to_thread(_count, store, user, CORPUS_COLLECTION, ns.TG_CHUNK_TYPE) - c0
                p = await asyncio.to_thread(_count, store, user, CORPUS_COLLECTION, ns.TG_PAGE_TYPE) - p0
                if c <= 0:
                    raise AssertionError(f"{doc[0]} produced no chunks on {s}")
                seconds[s] += elapsed
                chunks[s] += c
                pages[s] += p
                rates[s].append(c / elapsed)
                print(f"  ingest ({s}): {doc[1][:40]}: {p} page(s), {c} chunks in {elapsed:.1f} s", flush=True)
    finally:
        for running in stacks.values():
            await running.stop()
    for s in stacks:
        suite.corpus[s] = CORPUS_COLLECTION
    together = {s: await one_load(suite, s, docs) for s in stacks}
    results = Results()
    for s in stacks:
        results.add(
            Figure("ingest throughput, one document at a time, chunks/s (extractive)", chunks[s] / seconds[s],
                   "chunks/s", TARGETS[s], "higher", stack=s, spread=spread(rates[s]),
                   note=f"{len(docs)} documents, {chunks[s]} chunks, {seconds[s]:.1f} s; {load_note()}"),
            Figure("ingest throughput, pages/s (extractive)", pages[s] / seconds[s], "pages/s", better="higher",
                   stack=s, note=f"{pages[s]} pages (text and Markdown are one page each)"),
            Figure("ingest: chunks per CPU-second of this process", chunks[s] / cpu[s], "chunks/s", better="higher",
                   stack=s, note="what one idle core would sustain" + ("" if s == "embedded" else
                                                                      "; Pulsar and Cassandra not included")),
        )
        n, elapsed, busy = together[s]
        results.add(Figure("ingest throughput, documents in one load, chunks/s (extractive)", n / elapsed, "chunks/s",
                           TARGETS[s], "higher", stack=s,
                           note=f"{len(docs)} documents sent together, {n} chunks, {elapsed:.1f} s; "
                                f"this process busy {busy / elapsed:.2f} of {os.cpu_count()} cores; {load_note()}"))
    if len(stacks) > 1:
        a, b = list(stacks)[1], list(stacks)[0]
        per_doc = [x / y for x, y in zip(rates[b], rates[a], strict=True)]
        results.add(Figure(f"ingest time per chunk, {a} / {b}", statistics.median(per_doc), "x", stack="both",
                           spread=spread(per_doc), note=f"per document, {len(docs)} interleaved documents"))
    return results


async def one_load(suite: Suite, stack: str, docs: list) -> tuple[int, float, float]:
    """Chunks, seconds and this process's CPU seconds of loading ``docs`` in one load on fresh processors."""
    from trustgraph_base.provenance import namespaces as ns

    running = await start_ingest(suite, stack)
    user = suite.deployment(stack).user
    try:
        await load(running, user, WARM_UP_COLLECTION + "-one-load", [WARM_UP_DOCUMENT])
        await settle(running)
        t0, cpu0 = time.perf_counter(), time.process_time()
        await load(running, user, ONE_LOAD_COLLECTION, docs)
        elapsed, busy = time.perf_counter() - t0, time.process_time() - cpu0
        await settle(running)
        chunks = await asyncio.to_thread(_count, stores_of(running)[0], user, ONE_LOAD_COLLECTION, ns.TG_CHUNK_TYPE)
    finally:
        await running.stop()
    if chunks <= 0:
        raise AssertionError(f"the documents sent in one load produced no chunks on {stack}")
    print(f"  ingest ({stack}): {len(docs)} documents in one load: {chunks} chunks in {elapsed:.1f} s", flush=True)
    return chunks, elapsed, busy


def run(quick: bool = False, suite: Suite | None = None) -> Results:
    return run_on_suite(quick, suite, lambda s: bench(s))


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "3 documents instead of 10")
    args = parser.parse_args(argv)
    return report(run(args.quick), "ingestion", args.json)


if __name__ == "__main__":
    main()
