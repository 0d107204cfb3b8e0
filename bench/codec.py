"""Trace cost benchmark: provenance builders, wire codec and RDF export of one GraphRAG trace.

Targets (issue 3): build + encode + decode of one GraphRAG trace with 50
selected edges under 2 ms on one core; provenance builders <= 1 us per triple.  Also reports
messages per second for encoding and decoding a 50-triple ``Triples`` message, and (for
information) Turtle/TriG export and SHACL validation of the same trace.

Each figure is the median of several timed repeats (the spread is printed beside it),
measured as CPU time of this single-threaded process, i.e. the cost on one core.

    python -m bench.codec [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

from trustgraph_base.codec import decode, encode
from trustgraph_base.provenance import (
    EdgeSelection,
    LlmUsage,
    exploration_triples,
    focus_triples,
    grounding_triples,
    question_triples,
    synthesis_triples,
    uris,
)
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.schema import GraphRagResponse, Metadata, Triple, Triples, iri, literal

from .common import Figure, Results, spread

EDGES_PER_TRACE = 50
TRIPLES_PER_MESSAGE = 50


def knowledge_edges(n: int) -> list[Triple]:
    """``n`` knowledge-graph edges like GraphRAG selects: IRIs, plain and language-tagged literals."""
    out = []
    for i in range(n):
        s = iri(f"http://trustgraph.ai/e/entity-{i}")
        if i % 3 == 0:
            out.append(Triple(s, iri(ns.RDFS_LABEL), literal(f"Entity number {i}", language="en")))
        elif i % 3 == 1:
            out.append(Triple(s, iri("http://trustgraph.ai/e/related-to"),
                              iri(f"http://trustgraph.ai/e/entity-{i + 1}")))
        else:
            out.append(Triple(s, iri("http://trustgraph.ai/e/founded"),
                              literal(str(1800 + i), datatype=ns.XSD_INTEGER)))
    return out


EDGES = knowledge_edges(EDGES_PER_TRACE)
REASONS = [f"Edge {i} links the question's entity to the answer" for i in range(EDGES_PER_TRACE)]
#: The seed entities a query starts from (GraphRAG's Grounding names them, its Exploration lists them).
SEEDS = 10
USAGE = LlmUsage(2400, 180, "bench-model")


def build_trace(session: str) -> list[list[Triple]]:
    """One GraphRAG trace, as the five explain stages a query emits (trace model v2: with its Grounding, a score
    and concept on every edge selection, the token usage of the two model calls)."""
    q, g, e, f = (uris.question_uri(session), uris.grounding_uri(session), uris.exploration_uri(session),
                  uris.focus_uri(session))
    seeds = [iri(f"http://trustgraph.ai/e/entity-{i}") for i in range(SEEDS)]
    return [
        question_triples(q, "Which entities are related to entity 7?", "2025-06-01T09:30:00.000Z"),
        grounding_triples(g, q, [f"Entity number {i}" for i in range(SEEDS)]),
        exploration_triples(e, q, 150, seeds, grounding_uri=g),
        focus_triples(f, e, [EdgeSelection(edge, r, score=0.9 - i / 100, concept=f"Entity number {i % SEEDS}")
                             for i, (edge, r) in enumerate(zip(EDGES, REASONS, strict=True))], session, usage=USAGE),
        synthesis_triples(uris.synthesis_uri(session), f, uris.answer_document_uri(session), usage=USAGE),
    ]


def explain_messages(stages: list[list[Triple]], session: str) -> list[GraphRagResponse]:
    """The explain messages a GraphRAG service sends for those stages."""
    return [GraphRagResponse(explain_id=uris.question_uri(session), explain_collection="default",
                             explain_graph=ns.GRAPH_RETRIEVAL, explain_triples=stage, message_type="explain")
            for stage in stages]


def timed(fn: Callable[[], object], loops: int, repeats: int) -> list[float]:
    """CPU microseconds per call of ``fn``, one figure per repeat (``loops`` calls each).

    CPU time of this process, not wall time: on a machine shared with other work, wall
    time measures the neighbours; the code under test is single-threaded, so CPU time is
    its cost on one core.
    """
    fn()  # warm caches (compiled codec converters, interned constants)
    out = []
    for _ in range(repeats):
        gc.collect()
        start = time.process_time()
        for _ in range(loops):
            fn()
        out.append((time.process_time() - start) / loops * 1e6)
    return out


def run(quick: bool = False) -> Results:
    loops, repeats = (20, 3) if quick else (200, 7)
    session = "3f2b9c1e-0000-4000-8000-000000000001"
    stages = build_trace(session)
    n_triples = sum(len(s) for s in stages)
    messages = explain_messages(stages, session)
    wires = [encode(m) for m in messages]
    assert [decode(GraphRagResponse, w) for w in wires] == messages

    def build() -> None:
        build_trace(session)

    def encode_all() -> None:
        for m in messages:
            encode(m)

    def decode_all() -> None:
        for w in wires:
            decode(GraphRagResponse, w)

    def end_to_end() -> None:
        for m in explain_messages(build_trace(session), session):
            decode(GraphRagResponse, encode(m))

    results = Results()
    b, enc, dec, total = (timed(fn, loops, repeats) for fn in (build, encode_all, decode_all, end_to_end))
    med = statistics.median
    results.add(
        Figure("GraphRAG trace build+encode+decode (50 edges)", med(total), "us", target=2000, spread=spread(total),
               note=f"{n_triples} triples in {len(stages)} explain messages"),
        Figure("  of which build", med(b), "us", spread=spread(b)),
        Figure("  of which encode", med(enc), "us", spread=spread(enc)),
        Figure("  of which decode", med(dec), "us", spread=spread(dec)),
        Figure("provenance builders per triple", med(b) / n_triples, "us", target=1.0,
               spread=spread([x / n_triples for x in b])),
    )

    # A 50-triple Triples message (the triples-store flow message), encode and decode rates.
    batch = Triples(metadata=Metadata(id="urn:x:batch", user="u1", collection="c1"),
                    triples=[t for stage in stages for t in stage][:TRIPLES_PER_MESSAGE])
    batch_wire = encode(batch)
    assert decode(Triples, batch_wire) == batch
    e50 = timed(lambda: encode(batch), loops * 5, repeats)
    d50 = timed(lambda: decode(Triples, batch_wire), loops * 5, repeats)
    results.add(
        Figure("encode 50-triple Triples message", 1e6 / med(e50), "msg/s", better="higher",
               spread=spread([1e6 / x for x in e50]), note=f"{len(batch_wire)} bytes"),
        Figure("decode 50-triple Triples message", 1e6 / med(d50), "msg/s", better="higher",
               spread=spread([1e6 / x for x in d50])),
    )

    # For information: exporting and validating the same trace.
    from trustgraph_base.rdf.export import serialize
    from trustgraph_base.rdf.validation import validate_trace

    flat = [t for stage in stages for t in stage]
    ttl = timed(lambda: serialize(flat, "turtle"), max(loops // 10, 2), repeats)
    results.add(Figure("Turtle export of the trace", med(ttl), "us", spread=spread(ttl)))
    report = validate_trace(flat)
    assert report.conforms, report.text()
    shacl = timed(lambda: validate_trace(flat), 1 if quick else 3, 3)
    results.add(Figure("SHACL validation of the trace (pyshacl)", med(shacl) / 1000, "ms", spread=spread(
        [x / 1000 for x in shacl]), note="offline check, not on the query path"))
    return results


def main(argv=None) -> Results:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer loops: a smoke run, noisier figures")
    parser.add_argument("--json", help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    results = run(quick=args.quick)
    results.print_table("trace builders, codec and export")
    if args.json:
        results.write_json(args.json)
    return results


if __name__ == "__main__":
    main()
