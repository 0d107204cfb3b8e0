"""Trace explorer benchmark: how fast its pages are, measured in headless Chromium (the system's).

* A GraphRAG trace page with 50 and with 150 selected edges, each edge with its source chain (chunk, page,
  document) and its chunk's text: time until the page is interactive (``domInteractive`` of the browser's
  navigation timing; the page has no script, so it is usable from then on) and the server's time (request
  sent to first byte).  Target: < 1 s interactive for 150 edges.
* The trace list's first page over many stored traces (100,000; 2,000 in quick mode): the server's time.
  Target: < 300 ms.

Everything runs on the embedded stack (SQLite under a temporary home), in open mode (no tokens); the
traces are written straight into the stores with the provenance builders, then read through the gateway
as a browser reads them.  Needs Chromium (``CHROMIUM`` or ``/usr/bin/chromium``) and Playwright.

    python -m bench.explorer [--quick] [--json out.json]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import time
import urllib.parse
from pathlib import Path

from trustgraph_base.provenance import EdgeSelection, LlmUsage, uris
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance.triples import (
    chunk_triples,
    document_triples,
    exploration_triples,
    focus_triples,
    grounding_triples,
    page_triples,
    question_triples,
    subgraph_triples,
    synthesis_triples,
)
from trustgraph_base.schema import DocumentMetadata, Triple, iri, literal
from trustgraph_base.schema.library import ANSWER, SOURCE

from .common import Figure, Results, spread
from .harness import Suite, bench_parser, load_note, report, run_on_suite

USER, COLLECTION = "explorer", "default"
#: Chunks the edges of one trace were extracted from, and documents those chunks are in.
CHUNKS, DOCUMENTS = 20, 4
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]
NAVIGATION_TIMING = """() => { const n = performance.getEntriesByType('navigation')[0];
  return {interactive: n.domInteractive, complete: n.domComplete, server: n.responseStart - n.requestStart}; }"""


def big_trace(session: str, edges: int) -> tuple[list[Triple], list[tuple[str, str, str]]]:
    """A GraphRAG trace with ``edges`` selected edges, the knowledge graph they are in (with labels) and their
    extraction provenance; and the librarian documents it names: ``(id, kind, text)``."""
    ents = [iri(f"http://trustgraph.ai/e/bench-{i}") for i in range(edges + 1)]
    rel = [iri(f"http://trustgraph.ai/e/relation-{i % 7}") for i in range(7)]
    kg = [Triple(ents[i // 2], rel[i % 7], ents[i + 1]) for i in range(edges)]
    out: list[Triple] = list(kg)
    out += [Triple(e, iri(ns.RDFS_LABEL), literal(f"Entity {i}")) for i, e in enumerate(ents)]
    out += [Triple(r, iri(ns.RDFS_LABEL), literal(f"relation {i}")) for i, r in enumerate(rel)]
    docs: list[tuple[str, str, str]] = []
    chunk_of: list[str] = []
    for d in range(DOCUMENTS):
        doc = f"urn:bench:explorer:doc-{d}"
        out += document_triples(doc, f"Benchmark document {d}", "text/plain", 1)
        page = uris.page_uri(doc, 1)
        out += page_triples(page, doc, 1)
        docs.append((doc, SOURCE, f"The text of benchmark document {d}. " * 40))
        for c in range(CHUNKS // DOCUMENTS):
            chunk = uris.chunk_uri(doc, 1, c)
            out += chunk_triples(chunk, page, c, c * 1000, 1000)
            chunk_of.append(chunk)
            docs.append((chunk, SOURCE, f"Chunk {c} of document {d}: " + "some extracted sentence. " * 40))
    for i, chunk in enumerate(chunk_of):
        out += subgraph_triples(uris.subgraph_uri(chunk), chunk, kg[i::len(chunk_of)])
    q = uris.question_uri(session)
    g, e, f, s = (uris.grounding_uri(session), uris.exploration_uri(session), uris.focus_uri(session),
                  uris.synthesis_uri(session))
    answer = uris.answer_document_uri(session)
    out += question_triples(q, f"Which entities are linked to entity 0 ({edges} edges)?")
    out += grounding_triples(g, q, [f"Entity {i}" for i in range(10)])
    out += exploration_triples(e, q, edges * 3, ents[:10], grounding_uri=g)
    out += focus_triples(f, e, [EdgeSelection(t, f"edge {i} links entity {i // 2} onwards", score=0.9 - i / 1000,
                                              concept=f"Entity {i // 2}") for i, t in enumerate(kg)],
                         session, usage=LlmUsage(2400, 180, "bench"))
    out += synthesis_triples(s, f, answer, usage=LlmUsage(900, 120, "bench"))
    docs.append((answer, ANSWER, "Entity 0 is linked to many entities. " * 20))
    return out, docs


def store_trace(triples_store, librarian, session: str, edges: int) -> None:
    triples, docs = big_trace(session, edges)
    triples_store.insert(USER, COLLECTION, triples)
    for doc_id, kind, text in docs:
        librarian.add_document(USER, COLLECTION, DocumentMetadata(
            id=doc_id, time=time.time(), kind="text/plain", title=doc_id.rsplit(":", 1)[-1], document_type=kind),
            text.encode())


async def measure(page, url: str, runs: int, check: str) -> tuple[list[float], list[float], list[float]]:
    """Load ``url`` ``runs`` times (after one untimed load); interactive, complete and server times in ms."""
    interactive, complete, server = [], [], []
    for i in range(runs + 1):
        response = await page.goto(url)
        if response is None or response.status != 200 or await page.locator(check).count() == 0:
            raise AssertionError(f"{url} did not load ({response.status if response else 'no response'})")
        t = await page.evaluate(NAVIGATION_TIMING)
        if i:
            interactive.append(t["interactive"])
            complete.append(t["complete"])
            server.append(t["server"])
    return interactive, complete, server


async def bench(suite: Suite, traces: int | None = None) -> Results:
    from playwright.async_api import async_playwright

    from bench.cli import TRACE_COLLECTION, insert_traces
    from trustgraph_flow.embedded import start_embedded
    from trustgraph_flow.gateway.service import ApiGateway

    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        raise RuntimeError(f"no Chromium at {chromium} (apt-get install chromium)")
    n = traces or (2_000 if suite.quick else 100_000)
    runs = 5 if suite.quick else 20
    results = Results()
    with tempfile.TemporaryDirectory(prefix="tg-bench-explorer-") as home:
        stack = await start_embedded(Path(home), only=("triples-query", "triples-write", "librarian", "trace-admin"))
        gateway = ApiGateway(backend=stack.backend, flow=stack.flow, port=0)
        try:
            triples_store = next(s for s in stack.stores if hasattr(s, "list_traces"))
            librarian = next(s for s in stack.stores if hasattr(s, "add_document"))
            sizes = (50, 150)
            for edges in sizes:
                await asyncio.to_thread(store_trace, triples_store, librarian, f"bench-explorer-{edges}", edges)
            print(f"  explorer: inserting {n:,} traces ...", flush=True)
            await asyncio.to_thread(insert_traces, triples_store, librarian, USER, n)
            await gateway.start()
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
                page = await browser.new_page()
                for edges in sizes:
                    uri = uris.question_uri(f"bench-explorer-{edges}")
                    url = gateway.url + "explorer/trace?" + urllib.parse.urlencode({"uri": uri, "user": USER})
                    interactive, complete, server = await measure(page, url, runs, "li.edge")
                    drawn = await page.locator("li.edge").count()
                    if drawn != edges:
                        raise AssertionError(f"the {edges}-edge trace page shows {drawn} edges")
                    results.add(
                        Figure(f"trace page, {edges} edges with source chains: interactive",
                               statistics.median(interactive), "ms", 1000 if edges == 150 else None,
                               spread=spread(interactive),
                               note=f"domInteractive, median of {runs}; load complete "
                                    f"{statistics.median(complete):.0f} ms; {load_note()}"),
                        Figure(f"trace page, {edges} edges: server time", statistics.median(server), "ms",
                               spread=spread(server), note="request sent to first byte: the trace read, its labels, "
                                                           "chains and chunk texts, the page rendered"))
                url = gateway.url + "explorer?" + urllib.parse.urlencode({"user": USER, "collection": TRACE_COLLECTION})
                interactive, _complete, server = await measure(page, url, runs, "tr.trace-row")
                results.add(Figure(f"trace list, first page of {n:,} traces: server time", statistics.median(server),
                                   "ms", 300, spread=spread(server),
                                   note=f"50 rows with their status; interactive {statistics.median(interactive):.0f} "
                                        f"ms; median of {runs}"))
                await browser.close()
        finally:
            await gateway.stop()
            await stack.stop()
    return results


def run(quick: bool = False, suite: Suite | None = None, traces: int | None = None) -> Results:
    return run_on_suite(quick, suite, lambda s: bench(s, traces))


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "2,000 stored traces, 5 loads per page")
    parser.add_argument("--traces", type=int, help="stored traces behind the list (default 100,000)")
    args = parser.parse_args(argv)
    return report(run(args.quick, traces=args.traces), "trace explorer", args.json)


if __name__ == "__main__":
    main()
