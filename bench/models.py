"""Model layer benchmark: local embedder cold load and throughput, extractive edge selection, test server.

Targets (issue 6): local embedder cold load < 1 s; >= 80 sentences/s on 2 cores; extractive
edge selection over 350 candidate edges < 100 ms.

    python -m bench.models [--quick] [--json out.json]

Cold load runs in fresh interpreters (import + sha256 checks + tokenizer + ONNX session).
Throughput embeds one sentence per call with the cache off: sequentially with 1 and 2
intra-op threads, and from 2 worker threads with 1 intra-op thread each. Edge selection
uses the edges the pattern extractor finds in the sample corpus, topped up to exactly 350.
Wall-clock figures depend on what else runs on the machine (the load average is printed
next to them); CPU-time figures say what the code itself costs.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from .common import Figure, Results, percentile, spread

_COLD_LOAD = """
import json, time
t0, c0 = time.perf_counter(), time.process_time()
from trustgraph_flow.model.embeddings import LocalEmbedder
t1 = time.perf_counter()
embedder = LocalEmbedder()
embedder.load()
t2, c2 = time.perf_counter(), time.process_time()
embedder.embed(["Marie Curie discovered polonium in 1898."])
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "first": t3 - t2, "cpu": c2 - c0}))
"""

_SUBJECTS = ["Marie Curie", "Pierre Curie", "Henri Becquerel", "Ernest Rutherford", "Irène Joliot-Curie",
             "Frederick Soddy", "the Radium Institute", "the Sorbonne", "polonium", "radium"]
_PHRASES = ["discovered a new radioactive element in a shed in Paris",
            "measured the faint electric current produced by uranium rays with great care",
            "received the Nobel Prize for research on radiation phenomena",
            "worked for many years in a laboratory that had no proper ventilation",
            "was named after the country where its discoverer had been born"]


def _sentences(count: int) -> list[str]:
    return [f"{_SUBJECTS[i % len(_SUBJECTS)]} {_PHRASES[i % len(_PHRASES)]} (note {i})." for i in range(count)]


def _load_average() -> str:
    """The machine's 1-minute load average: wall-clock figures on a busy machine are not the code's speed."""
    try:
        return f"load avg {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    except OSError:  # pragma: no cover - platforms without getloadavg
        return ""


def cold_load(runs: int) -> list[Figure]:
    """Fresh-interpreter load of the local embedder."""
    samples = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _COLD_LOAD], capture_output=True, text=True, check=True)
        samples.append(json.loads(out.stdout.strip().splitlines()[-1]))
    totals = [s["import"] + s["load"] for s in samples]
    return [
        Figure("local embedder cold load (import + verify + session)", statistics.median(totals), "s", 1.0,
               spread=spread(totals),
               note=f"import {statistics.median(s['import'] for s in samples):.2f} s, "
                    f"load {statistics.median(s['load'] for s in samples):.2f} s; {_load_average()}"),
        Figure("local embedder cold load, CPU time", statistics.median(s["cpu"] for s in samples), "s", 1.0,
               note="what the load costs on an idle core"),
        Figure("first embedding after load", statistics.median(s["first"] for s in samples) * 1000, "ms"),
    ]


def throughput(count: int) -> list[Figure]:
    """Sentences per second, one sentence per call, cache off."""
    from trustgraph_flow.model.embeddings import LocalEmbedder

    sentences = _sentences(count)
    figures = []
    for threads in (1, 2):
        embedder = LocalEmbedder(intra_op_threads=threads, cache_size=0)
        embedder.embed(sentences[:4])
        start, cpu_start = time.perf_counter(), time.process_time()
        for sentence in sentences:
            embedder.embed([sentence])
        rate = count / (time.perf_counter() - start)
        cpu_rate = count / (time.process_time() - cpu_start)
        figures.append(Figure(f"embeddings, sequential, {threads} intra-op thread(s)", rate, "sentences/s",
                              80.0 if threads == 2 else None, better="higher", note=_load_average()))
        if threads == 1:
            figures.append(Figure("embeddings per CPU-second, 1 intra-op thread", cpu_rate, "sentences/s",
                                  note="x2 = expected rate of 2 workers on 2 idle cores"))
            figures.append(Figure("estimated embeddings/s, 2 workers on 2 idle cores", 2 * cpu_rate,
                                  "sentences/s", 80.0, better="higher", note="2 x the CPU-second rate"))
    embedder = LocalEmbedder(intra_op_threads=1, cache_size=0)
    embedder.embed(sentences[:4])
    halves = [sentences[: count // 2], sentences[count // 2:]]
    start = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda part: [embedder.embed([s]) for s in part], halves))
    rate = count / (time.perf_counter() - start)
    figures.append(Figure("embeddings, 2 worker threads x 1 intra-op thread", rate, "sentences/s", 80.0,
                          better="higher"))
    return figures


def corpus_edges(count: int = 350) -> list[dict]:
    """``count`` labelled candidate edges: the pattern extractor's edges of the sample corpus, topped up."""
    from trustgraph_flow.ingest.chunking import chunk_text
    from trustgraph_flow.ingest.extraction import extract
    from trustgraph_flow.ingest.sample_corpus import sample_documents, source_text

    edges: dict[str, dict] = {}
    for document in sample_documents():
        for chunk in chunk_text(source_text(document.id.rsplit("/", 1)[-1]), 1000, 100):
            for rel in extract(chunk.text).relationships:
                edge_id = hashlib.sha256(f"{rel.subject}|{rel.predicate}|{rel.object}".encode()).hexdigest()[:8]
                edges[edge_id] = {"id": edge_id, "s": rel.subject, "p": rel.predicate, "o": rel.object}
    result = sorted(edges.values(), key=lambda e: e["id"])[:count]
    filler = 0
    while len(result) < count:
        subject = _SUBJECTS[filler % len(_SUBJECTS)]
        result.append({"id": f"f{filler:07d}", "s": subject, "p": "mentioned with", "o": f"topic {filler}"})
        filler += 1
    return result


def edge_selection(repeats: int) -> list[Figure]:
    """Time of select_edges over 350 candidates for the corpus questions."""
    from trustgraph_flow.ingest.sample_corpus import sample_questions
    from trustgraph_flow.model.embeddings import LocalEmbedder
    from trustgraph_flow.model.extractive.edge_selection import select_edges

    edges = corpus_edges(350)
    questions = [q.question for q in sample_questions()]
    entities = sorted({e["s"] for e in edges})[:12]
    scores = {label: 0.3 + 0.04 * i for i, label in enumerate(entities)}

    def timed(**options) -> list[float]:
        samples = []
        for _ in range(repeats):
            for question in questions:
                start = time.perf_counter()
                select_edges(question, edges, scores, **options)
                samples.append((time.perf_counter() - start) * 1000)
        return samples

    cpu_start = time.process_time()
    plain = timed()
    cpu_per_call = (time.process_time() - cpu_start) * 1000 / len(plain)
    embedder = LocalEmbedder(intra_op_threads=1)
    predicates = len({e["p"] for e in edges})
    start = time.perf_counter()
    select_edges(questions[0], edges, scores, embedder=embedder, embed_predicates=True)
    cold = (time.perf_counter() - start) * 1000
    warm = timed(embedder=embedder, embed_predicates=True)
    return [
        Figure("edge selection, 350 candidates (p50)", percentile(plain, 50), "ms", 100.0,
               note=f"p95 {percentile(plain, 95):.1f} ms over {len(plain)} runs"),
        Figure("edge selection, 350 candidates (p95)", percentile(plain, 95), "ms", 100.0, note=_load_average()),
        Figure("edge selection, 350 candidates, CPU time per call", cpu_per_call, "ms", 100.0),
        Figure("edge selection + predicate embeddings, cold cache", cold, "ms",
               note=f"{predicates} distinct predicates embedded (opt-in)"),
        Figure("edge selection + predicate embeddings, warm cache (p50)", percentile(warm, 50), "ms",
               note="query embedded each time"),
    ]


def server_round_trip(requests: int) -> list[Figure]:
    """kg-edge-selection with 350 edges through the openai client and the local test server."""
    from trustgraph_flow.model.prompts import LlmPrompter
    from trustgraph_flow.model.testserver import start_server
    from trustgraph_flow.model.text_completion import OpenAICompletion

    edges = corpus_edges(350)
    terms = {"query": "Who discovered polonium?", "knowledge": edges}

    async def run(base_url: str) -> list[float]:
        async with OpenAICompletion(base_url, "bench", "bench", max_retries=0) as completion:
            prompter = LlmPrompter(completion)
            await prompter.run("kg-edge-selection", terms)
            samples = []
            for _ in range(requests):
                start = time.perf_counter()
                await prompter.run("kg-edge-selection", terms)
                samples.append((time.perf_counter() - start) * 1000)
            return samples

    start = time.perf_counter()
    with start_server() as server:
        ready = (time.perf_counter() - start) * 1000
        samples = asyncio.run(run(server.base_url))
    return [
        Figure("test server ready", ready, "ms"),
        Figure("kg-edge-selection over HTTP, 350 edges (p50)", percentile(samples, 50), "ms",
               note=f"p95 {percentile(samples, 95):.1f} ms"),
    ]


def run(quick: bool) -> Results:
    """Measure everything; ``quick`` uses fewer repetitions."""
    results = Results()
    results.add(*cold_load(1 if quick else 3))
    results.add(*throughput(48 if quick else 300))
    results.add(*edge_selection(1 if quick else 5))
    results.add(*server_round_trip(5 if quick else 30))
    return results


def main(argv: list[str] | None = None) -> Results:
    """Run the benchmark, print the table and optionally write JSON.

    :param argv: command-line arguments (default: ``sys.argv[1:]``).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (seconds, not a minute)")
    parser.add_argument("--json", help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    results = run(args.quick)
    results.print_table("model layer")
    if args.json:
        results.write_json(args.json)
    return results


if __name__ == "__main__":
    main()
