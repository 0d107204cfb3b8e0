"""The benchmark suite's own logic: the runner, the synthetic graph, the request-round arithmetic.

The benchmarks themselves run in CI as ``python -m bench --quick`` (see ``.ci/run``); these
tests only check the pure pieces they rest on, quickly.
"""

from __future__ import annotations

import json
import sys
from itertools import pairwise
from pathlib import Path

import pytest

# bench/ is a top-level directory of the repository, not an installed package: make it importable
# however pytest was started (``python -m pytest`` adds the working directory, ``pytest`` does not).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.__main__ import BENCHMARKS, main, results_from_json
from bench.common import Figure, Results
from bench.harness import Call, Variants, dependent_rounds, interleaved_order
from bench.synthetic import SyntheticGraph, graph_for_triples
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.rdf.terms import serialize_term

pytestmark = pytest.mark.unit


def test_runner_lists_every_benchmark(capsys):
    assert main(["--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(BENCHMARKS)
    assert {"codec", "bus", "models", "stores", "vectors", "graph-rag", "scaling"} <= set(listed)


def test_runner_refuses_unknown_benchmark_names(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--only", "graph-rag,no-such-bench"])
    assert exc.value.code == 2
    assert "no-such-bench" in capsys.readouterr().err


def test_figures_survive_the_json_round_trip():
    results = Results([Figure("latency", 12.5, "ms", 20.0, stack="distributed", spread="range 1-2", note="n"),
                       Figure("rate", 30.0, "chunks/s", 20.0, "higher")])
    back = results_from_json(json.loads(json.dumps(results.to_json())))
    assert back.figures == results.figures
    assert [f.meets for f in back.figures] == [True, True]


def test_dependent_rounds_count_chains_not_calls():
    # embed -> search -> (hop1 | labels in parallel) -> prompt: 4 rounds, 5 calls
    calls = [Call("embeddings", 0, 1), Call("graph-embeddings", 1, 2), Call("triples", 2, 3),
             Call("triples", 2.1, 2.9), Call("prompt", 3, 5)]
    assert dependent_rounds(calls) == 4
    assert dependent_rounds(calls, "triples") == 1
    assert dependent_rounds([]) == 0


@pytest.mark.parametrize("keys", [["on", "off"], ["a", "b", "c"],
                                  [("embedded", "on"), ("embedded", "off"), ("distributed", "on"),
                                   ("distributed", "off")]])
def test_interleaving_puts_each_variant_first_and_after_each_other_equally_often(keys):
    from collections import Counter

    orders = [interleaved_order(keys, rep) for rep in range(2 * len(keys))]
    assert all(sorted(o) == sorted(keys) for o in orders)
    assert Counter(o[0] for o in orders) == {k: 2 for k in keys}
    follows = Counter((a, b) for o in orders for a, b in pairwise(o))
    if len(keys) == 2:  # "on" right after "off" as often as "off" right after "on"
        assert follows[(keys[0], keys[1])] == follows[(keys[1], keys[0])]


def test_variant_ratio_is_of_medians_with_one_ratio_per_repetition():
    v = Variants()
    for on, off in (([110, 130, 120], [100, 100, 100]), ([220, 200, 210], [200, 200, 200])):
        v.new_rep([("s", "on"), ("s", "off")])
        for a, b in zip(on, off, strict=True):
            v.add("s", "on", a)
            v.add("s", "off", b)
    ratio, per_rep = v.ratio(("s", "on"), ("s", "off"))
    assert per_rep == [1.2, 1.05]
    assert ratio == pytest.approx(165 / 150)


def test_synthetic_graph_is_deterministic_and_fully_traced():
    g = SyntheticGraph(300, 1500)
    again = SyntheticGraph(300, 1500)
    assert [g.edge(j) for j in range(50)] == [again.edge(j) for j in range(50)]
    labels = [g.label(i) for i in range(g.entities)]
    assert len(set(labels)) == g.entities
    triples = [t for batch in g.triple_batches(1000) for t in batch]
    knowledge = {(serialize_term(t.s), serialize_term(t.p), serialize_term(t.o)) for t in triples
                 if t.g == "" and t.p.value != ns.RDFS_LABEL}
    contained = {serialize_term(t.o) for t in triples if t.p.value == ns.TG_CONTAINS and t.g == ns.GRAPH_SOURCE}
    assert len(knowledge) == 1500
    assert all(f"<<( {s} {p} {o} )>>" in contained for s, p, o in knowledge)
    for q in g.questions(4):
        assert all(g.label(i) in q.text for i in q.entities)


def test_graph_for_triples_hits_the_requested_size():
    g = graph_for_triples(20_000)
    assert abs(g.triple_count() - 20_000) / 20_000 < 0.05
    assert g.edges == 5 * g.entities


def _docrag_answer(session: str):
    """A recorded DocumentRAG answer as ``stream_request`` returns it: explain events, then the answer text."""
    from types import SimpleNamespace

    from bench.harness import Answer
    from trustgraph_base.schema import Triple, iri, literal

    q, syn = f"urn:trustgraph:docrag:{session}", f"urn:trustgraph:docrag:{session}/synthesis"
    when = literal("2026-12-06T10:00:00Z", datatype="http://www.w3.org/2001/XMLSchema#dateTime")
    explain = [
        SimpleNamespace(message_type="explain", explain_id=q, response="", explain_triples=[
            Triple(iri(q), iri(ns.PROV_STARTED_AT_TIME), when, ns.GRAPH_RETRIEVAL)]),
        SimpleNamespace(message_type="explain", explain_id=syn, response="", explain_triples=[
            Triple(iri(syn), iri(ns.PROV_WAS_DERIVED_FROM), iri(q), ns.GRAPH_RETRIEVAL),
            Triple(iri(syn), iri(ns.TG_DOCUMENT), iri(f"{q}/answer"), ns.GRAPH_RETRIEVAL)]),
    ]
    chunks = [SimpleNamespace(message_type="chunk", explain_id="", explain_triples=[], response=text)
              for text in ("Mira Olund ", "founded it.")]
    return Answer(0.1, 0.05, explain + chunks)


def test_a_trace_of_any_kind_is_cloned_with_a_session_and_start_time_of_its_own():
    from bench.capacity import cloned_traces, trace_template

    session = "0b6c4c52-8f1e-4a8e-9d55-3f0b8c1c2a11"
    template = trace_template(_docrag_answer(session))
    assert template[0] == session and template[2] == f"urn:trustgraph:docrag:{session}/answer"
    assert template[3] == "Mira Olund founded it." and len(template[1]) == 3
    clones = list(cloned_traces(template, 3, start=7))
    sessions = set()
    for triples, doc, text in clones:
        terms = [t.value for tr in triples for t in (tr.s, tr.o)]
        assert not any(session in v for v in terms)  # nothing of the original trace is left
        own = {v.split(":", 3)[3].split("/")[0] for v in terms if v.startswith("urn:trustgraph:docrag:")}
        assert len(own) == 1 and doc == f"urn:trustgraph:docrag:{own.pop()}/answer"
        sessions.add(doc)
        assert text == template[3]
    assert len(sessions) == 3
    starts = [next(t.o.value for t in triples if t.p.value == ns.PROV_STARTED_AT_TIME) for triples, _, _ in clones]
    assert starts == ["2026-01-01T00:00:07Z", "2026-01-01T00:00:08Z", "2026-01-01T00:00:09Z"]


def test_a_recorded_answer_without_a_question_cannot_be_cloned():
    from bench.capacity import trace_template

    answer = _docrag_answer("0b6c4c52-8f1e-4a8e-9d55-3f0b8c1c2a11")
    answer.messages[0].explain_id = "urn:example:not-a-trace"
    with pytest.raises(AssertionError, match="no Question"):
        trace_template(answer)


def test_storage_checkpoint_figures_divide_by_traces_and_replicas():
    from bench.storage_load import checkpoint_figures

    sizes = {"quads": 30_000, "quads_scan": 6_000, "trace_list": 2_400, "trace_keys": 1_500, "trace_days": 100}
    stored, index, rate = checkpoint_figures(100, 3_900, 10.0, 10.0, sizes, 4.0, nodes=3, replicas=3)
    assert stored.value == 400 and "per replica 133 bytes" in stored.note
    assert "quads 100, quads_scan 20, trace_list 8, trace_keys 5" in stored.note
    assert index.value == 40
    assert rate.value == 10.0 and rate.better == "higher" and "3,900 triples" in rate.note
