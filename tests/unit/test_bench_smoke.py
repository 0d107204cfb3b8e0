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
