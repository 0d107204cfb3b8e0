"""tg-load-turtle's checks before anything is sent: every refusal names the value, and batches fit a message."""

from __future__ import annotations

import pytest

from trustgraph_base.codec import encode
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.rdf.terms import MAX_LITERAL_LENGTH
from trustgraph_base.schema import Triple, iri, literal
from trustgraph_base.store.vectors import MAX_ID_LENGTH, MAX_LABEL_LENGTH
from trustgraph_cli.rdf_load import ENTITY_BATCH, LoadRefused, entities_message, plan_load, triples_message

pytestmark = pytest.mark.unit

EX = "http://example.org/"


def label(entity: str, text: str, g: str = "") -> Triple:
    return Triple(iri(EX + entity), iri(ns.RDFS_LABEL), literal(text), g)


def fact(i: int, value: str = "v") -> Triple:
    return Triple(iri(f"{EX}s{i}"), iri(EX + "p"), literal(value))


def test_a_quad_in_the_retrieval_graph_is_refused():
    triples = [fact(1), Triple(iri("urn:trustgraph:question:1"), iri(ns.RDF_TYPE), iri(ns.TG_QUESTION),
                               ns.GRAPH_RETRIEVAL)]
    with pytest.raises(LoadRefused, match=r"quad 2 .* graph <urn:graph:retrieval>"):
        plan_load(triples, 1000)


def test_other_named_graphs_load():
    plan = plan_load([Triple(iri(EX + "a"), iri(EX + "p"), iri(EX + "b"), "urn:graph:mine")], 1000)
    assert plan.triple_batches == [[Triple(iri(EX + "a"), iri(EX + "p"), iri(EX + "b"), "urn:graph:mine")]]


def test_a_literal_over_the_store_limit_is_named_with_its_size():
    triples = [fact(1), fact(2, "x" * (MAX_LITERAL_LENGTH + 1))]
    with pytest.raises(LoadRefused) as e:
        plan_load(triples, 1)
    assert f"<{EX}s2> <{EX}p>" in str(e.value)
    assert f"{MAX_LITERAL_LENGTH + 1:,} characters" in str(e.value)


def test_a_literal_at_the_store_limit_loads():
    assert plan_load([fact(1, "x" * MAX_LITERAL_LENGTH)], 1).triple_batches


def test_a_label_over_the_index_limit_is_refused():
    with pytest.raises(LoadRefused, match=rf"rdfs:label of <{EX}big> has {MAX_LABEL_LENGTH + 1:,} characters"):
        plan_load([label("big", "y" * (MAX_LABEL_LENGTH + 1))], 1000)


def test_an_entity_iri_over_the_index_key_limit_is_refused():
    with pytest.raises(LoadRefused, match=f"{len(EX) + MAX_ID_LENGTH:,} characters"):
        plan_load([label("e" * MAX_ID_LENGTH, "long")], 1000)


def test_a_multi_line_label_is_embedded_on_one_line():
    plan = plan_load([label("poem", "first line\nsecond\tline\r\n")], 1000)
    [[entity]] = plan.entity_batches
    assert entity.label == entity.context == "first line second line"
    assert plan.triple_batches[0][0].o.value == "first line\nsecond\tline\r\n"  # the triple keeps it as written


def test_a_label_with_a_terminal_control_is_refused():
    with pytest.raises(LoadRefused, match="rdfs:label of <http://example.org/esc> cannot be embedded"):
        plan_load([label("esc", "a\x1b[2Jb")], 1000)


def test_labels_in_named_graphs_are_not_embedded():
    assert plan_load([label("a", "A", "urn:graph:mine")], 1000).entities == 0


def test_without_a_message_limit_batches_are_cut_by_count():
    plan = plan_load([fact(i) for i in range(25)] + [label(f"e{i}", f"E{i}") for i in range(70)], 10)
    assert [len(b) for b in plan.triple_batches] == [10] * 9 + [5]
    assert [len(b) for b in plan.entity_batches] == [ENTITY_BATCH, 70 - ENTITY_BATCH]


def test_with_a_message_limit_every_message_fits():
    limit = 64 * 1024
    triples = [fact(i, "z" * 9000) for i in range(30)] + [label(f"e{i}", "é" * 3000) for i in range(40)]
    plan = plan_load(triples, 1000, limit)
    assert sum(len(b) for b in plan.triple_batches) == 70
    assert len(plan.triple_batches) > 1 and len(plan.entity_batches) > 1
    for i, b in enumerate(plan.triple_batches):
        assert len(encode(triples_message(b, "urn:load:0123456789abcdef", 10 ** 6 + i, "u" * 64, "c" * 64))) <= limit
    for i, b in enumerate(plan.entity_batches):
        assert len(encode(entities_message(b, "urn:load:0123456789abcdef", 10 ** 6 + i, "u" * 64, "c" * 64))) <= limit


def test_a_triple_too_large_for_one_message_is_refused_only_with_a_limit():
    big = fact(7, "é" * 40_000)  # 80 kB of UTF-8
    assert plan_load([big], 1000).triple_batches == [[big]]
    with pytest.raises(LoadRefused, match=rf"<{EX}s7> <{EX}p> needs a message of [\d,]+ bytes"):
        plan_load([big], 1000, 64 * 1024)
