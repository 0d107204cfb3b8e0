"""Unit tests of GraphRAG's pure parts: exploration plan, label graph, selection, source chains."""

from __future__ import annotations

import pytest

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance import uris
from trustgraph_base.provenance.sources import build_source_chains, source_documents, source_patterns
from trustgraph_base.provenance.triples import chunk_triples, document_triples, edge_id, page_triples, subgraph_triples
from trustgraph_base.rdf.labels import fallback_label
from trustgraph_base.schema import IRI, LITERAL, Term, Triple, iri, literal
from trustgraph_flow.retrieval.graph_rag.labels import get_labelgraph
from trustgraph_flow.retrieval.graph_rag.selection import resolve_selection
from trustgraph_flow.retrieval.graph_rag.subgraph import Subgraph, exploration_patterns, label_patterns

pytestmark = pytest.mark.unit

E = "http://trustgraph.ai/e/"
LABEL = iri(ns.RDFS_LABEL)


def t(s, p, o) -> Triple:
    return Triple(iri(E + s), iri(E + p), iri(E + o) if not isinstance(o, Term) else o)


def test_exploration_patterns_cover_both_directions_in_the_default_graph():
    pats = exploration_patterns([iri(E + "a"), iri(E + "b")], 30)
    assert len(pats) == 4
    assert all(p.g == "" and p.limit == 30 for p in pats)
    assert pats[0].s.value == E + "a" and pats[0].o is None
    assert pats[1].o.value == E + "a" and pats[1].s is None
    labels = label_patterns([E + "a"])
    assert labels[0].p.value == ns.RDFS_LABEL and labels[0].g == ""


def test_subgraph_dedupes_caps_and_keeps_labels_aside():
    sg = Subgraph(max_size=3)
    sg.mark_visited([iri(E + "curie")])
    frontier = sg.add([[
        t("curie", "discovered", "polonium"),
        t("curie", "discovered", "polonium"),  # duplicate
        Triple(iri(E + "curie"), LABEL, literal("Marie Curie")),
        t("curie", "born-in", "warsaw"),
        Triple(iri(E + "curie"), iri(E + "born"), literal("1867")),
        t("pierre", "married", "curie"),  # over the cap of 3
    ]])
    assert len(sg.edges) == 3 and sg.full
    assert sg.labels[E + "curie"] == "Marie Curie"
    assert [n.value for n in frontier] == [E + "polonium", E + "warsaw"]  # literals and visited nodes excluded
    assert E + "discovered" in sg.unlabelled() and E + "curie" not in sg.unlabelled()


def test_labelgraph_ids_follow_the_spec_and_map_to_original_terms():
    edges = [t("curie", "discovered", "polonium")]
    labels = {E + "curie": "Marie Curie", E + "discovered": "discovered", E + "polonium": "Polonium"}
    g = get_labelgraph(edges, labels)
    eid = edge_id("Marie Curie", "discovered", "Polonium")
    assert g.ids == [eid] and g.labeled_edges == [("Marie Curie", "discovered", "Polonium")]
    assert g.uri_map[eid].s.value == E + "curie" and g.uri_map[eid].o.value == E + "polonium"
    assert g.knowledge() == [{"id": eid, "s": "Marie Curie", "p": "discovered", "o": "Polonium"}]


def test_labelgraph_never_merges_edges_that_share_labels():
    # Two different entities both labelled "Paris" and two literals that print alike.
    edges = [t("victor", "lived-in", "paris-france"), t("victor", "lived-in", "paris-texas"),
             Triple(iri(E + "x"), iri(E + "value"), literal("1")),
             Triple(iri(E + "x"), iri(E + "value"), Term(LITERAL, "1", "http://www.w3.org/2001/XMLSchema#integer"))]
    labels = {E + "paris-france": "Paris", E + "paris-texas": "Paris", E + "victor": "Victor Hugo"}
    g = get_labelgraph(edges, labels)
    assert len(g.ids) == 4 and len(set(g.ids)) == 4
    objs = {g.uri_map[i].o.value for i in g.ids if g.uri_map[i].o.type == IRI}
    assert objs == {E + "paris-france", E + "paris-texas"}
    shown = {g.label_map[i][2] for i in g.ids if g.uri_map[i].o.type == IRI}
    assert shown == {"Paris [paris-france]", "Paris [paris-texas]"}


def test_fallback_label_uses_the_last_segment():
    assert fallback_label("http://trustgraph.ai/e/marie-curie") == "marie curie"
    assert fallback_label("urn:x:abc") == "abc"


def test_resolve_selection_skips_unknown_duplicate_and_excess_ids():
    edges = [t("a", "p", "b"), t("b", "p", "c"), t("c", "p", "d")]
    g = get_labelgraph(edges, {})
    i0, i1, i2 = g.ids
    objects = [{"id": i0, "reasoning": "because"}, {"id": "deadbeef", "reasoning": "?"}, {"id": i0},
               "not an object", {"reasoning": "no id"}, {"id": i1, "reasoning": 7}, {"id": i2, "reasoning": "x"}]
    r = resolve_selection(objects, g.uri_map, limit=2, parser_dropped=1, parser_reasons=["malformed JSON"])
    assert [s.edge_id for s in r.selections] == [i0, i1]
    assert r.selections[0].reasoning == "because" and r.selections[1].reasoning == ""
    assert r.selections[0].edge.s.value == E + "a"
    assert r.dropped == 6  # 1 from the parser + unknown + duplicate + non-object + no id + over the limit
    assert any("unknown edge id" in x for x in r.reasons) and any("twice" in x for x in r.reasons)


def test_resolve_selection_keeps_a_valid_score_and_concept_and_ignores_malformed_ones():
    edges = [t("a", "p", "b"), t("b", "p", "c"), t("c", "p", "d"), t("d", "p", "e")]
    g = get_labelgraph(edges, {})
    objects = [{"id": g.ids[0], "reasoning": "r", "score": 0.8, "concept": " polonium "},
               {"id": g.ids[1], "reasoning": "r", "score": "high", "concept": 7},
               {"id": g.ids[2], "reasoning": "r", "score": float("nan")},
               {"id": g.ids[3], "reasoning": "r", "score": True}]
    r = resolve_selection(objects, g.uri_map)
    assert [(s.score, s.concept) for s in r.selections] == [(0.8, "polonium"), (None, ""), (None, ""), (None, "")]
    assert r.dropped == 0  # a malformed optional field never costs the selection


def test_source_chain_reaches_the_document_and_sources_are_deduplicated():
    doc = "https://trustgraph.ai/doc/curie"
    page = uris.page_uri(doc, 2)
    chunk = uris.chunk_uri(doc, 2, 3)
    sg = uris.subgraph_uri(chunk)
    edge = t("curie", "discovered", "polonium")
    other = t("curie", "born-in", "warsaw")
    store = (document_triples(doc, "The Curies", "text/markdown", 3) + page_triples(page, doc, 2)
             + chunk_triples(chunk, page, 3, 100, 900) + subgraph_triples(sg, chunk, [edge, other]))
    pats = source_patterns([edge])
    assert pats[0].g == ns.GRAPH_SOURCE and pats[0].p.value == ns.TG_CONTAINS and pats[0].o.type == "t"
    chains = build_source_chains([edge, other, t("x", "y", "z")], store)
    assert len(chains) == 2
    links = chains[0].chain
    assert [link.type for link in links] == ["subgraph", "chunk", "page", "document"]
    assert [link.label for link in links[1:]] == ["Chunk 3", "Page 2", "The Curies"]
    docs = source_documents(chains)
    assert [(d.uri, d.title) for d in docs] == [(doc, "The Curies")]


def test_model_requests_leave_before_the_explain_work_that_does_not_need_them():
    """The edge-selection request is sent before the Exploration is stored, and the synthesis request
    before the source chains are walked: that work only competes with the request for the CPU."""
    import asyncio

    from trustgraph_base.schema import EntityMatch, GraphRagQuery
    from trustgraph_flow.retrieval.graph_rag.rag import GraphRag, PromptOutcome

    order: list[str] = []
    edge = t("curie", "discovered", "polonium")

    class Ports:
        async def embed(self, text):
            return [0.1]

        async def find_entities(self, user, collection, vector, limit):
            return [EntityMatch(entity=iri(E + "curie"), label="Curie", score=0.9)]

        async def query(self, user, collection, patterns, **walk):
            order.append("source walk" if walk.get("follow") else "explore")
            await asyncio.sleep(0)  # a request's wait: the stages queued before it are written meanwhile
            order.append("answered")
            return [] if walk.get("follow") else [edge]

        async def prompt(self, template, terms):
            order.append(template)
            await asyncio.sleep(0.01)
            return PromptOutcome(objects=[{"id": terms["knowledge"][0]["id"], "reasoning": "it answers"}])

        async def prompt_stream(self, template, terms):
            order.append(template)
            await asyncio.sleep(0.01)
            yield "Curie discovered polonium."
            yield PromptOutcome()

        async def store_explain(self, user, collection, uri, triples):
            order.append("store " + uri.split(":")[-2])

        async def store_answer(self, user, collection, document_id, text, stage_uri, stage_triples):
            order.append("store answer")

    sent = []

    async def emit(msg):
        sent.append(msg)

    asyncio.run(GraphRag(Ports()).query(GraphRagQuery(query="Who discovered polonium?", user="u", collection="c",
                                                      explainable=True), emit))
    assert sent[-1].error is None, sent[-1].error
    assert order.index("kg-edge-selection") < order.index("store exploration")
    assert order.index("kg-synthesis") < order.index("source walk")
    # the Grounding goes out as soon as the seed entities are known: while the exploration's first hop is asked
    assert order[:4] == ["explore", "store question", "store grounding", "answered"], order
    explain = [m.explain_id.split(":")[-2] for m in sent if m.message_type == "explain"]
    assert explain == ["question", "grounding", "exploration", "focus", "synthesis"]
