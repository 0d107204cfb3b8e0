"""Removing a document and everything derived from it, and nothing else.

What goes: the document's pages and chunks (librarian), its extraction provenance in
``urn:graph:source`` (document, pages, chunks, subgraphs, activities), the chunk vectors, and
the knowledge triples that **only** this document's subgraphs contain (a fact also extracted
from another document stays), plus entity vectors and labels of entities left without edges.
"""

from __future__ import annotations

from dataclasses import dataclass

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance import uris
from trustgraph_base.rdf.terms import serialize_triple
from trustgraph_base.schema import IRI, TRIPLE, Term, Triple, TriplePattern

__all__ = ["RemovalReport", "remove_document_data"]


@dataclass
class RemovalReport:
    documents: int = 0
    provenance_triples: int = 0
    knowledge_triples: int = 0
    vectors: int = 0


def _iri(v: str) -> Term:
    return Term(IRI, v)


def remove_document_data(user: str, collection: str, document_id: str, librarian, triples, document_index=None,
                         graph_index=None) -> RemovalReport:
    """Remove a document and its derived data (synchronous; run it in a worker thread)."""
    report = RemovalReport()
    doc_uri = uris.document_uri(document_id)
    pages = [m.id for m in librarian.list_children(user, collection, document_id)]
    chunks = [m.id for p in pages for m in librarian.list_children(user, collection, p)]
    subgraphs = [uris.subgraph_uri(c) for c in chunks]
    contains = _iri(ns.TG_CONTAINS)
    own = set(subgraphs)

    # Knowledge triples contained only by this document's subgraphs.
    extracted: dict[str, Triple] = {}
    for found in triples.query_many(user, collection, [
            TriplePattern(s=_iri(sg), p=contains, g=ns.GRAPH_SOURCE, limit=1_000_000) for sg in subgraphs]):
        for t in found:
            if t.o.type == TRIPLE:
                inner = t.o.triple
                extracted.setdefault(serialize_triple(inner), Triple(inner.s, inner.p, inner.o, ""))
    candidates = list(extracted.values())
    holders = triples.query_many(user, collection, [
        TriplePattern(p=contains, o=Term(TRIPLE, triple=Triple(t.s, t.p, t.o)), g=ns.GRAPH_SOURCE, limit=10_000)
        for t in candidates])
    orphaned = [t for t, h in zip(candidates, holders) if all(x.s.value in own for x in h)]
    report.knowledge_triples = triples.delete(user, collection, orphaned) if orphaned else 0

    # Provenance of the document, its pages, chunks and subgraphs, and the activities that made them.
    nodes = [doc_uri, *pages, *chunks, *subgraphs, uris.activity_uri("decoder", doc_uri),
             *(uris.activity_uri("chunker", p) for p in pages)]
    activities = triples.query_many(user, collection, [
        TriplePattern(s=_iri(sg), p=_iri(ns.PROV_WAS_GENERATED_BY), g=ns.GRAPH_SOURCE) for sg in subgraphs])
    nodes += [t.o.value for found in activities for t in found if t.o.type == IRI]
    prov = [t for found in triples.query_many(user, collection, [
        TriplePattern(s=_iri(n), g=ns.GRAPH_SOURCE, limit=1_000_000) for n in dict.fromkeys(nodes)]) for t in found]
    report.provenance_triples = triples.delete(user, collection, prov) if prov else 0

    # Vectors: the document's chunks; entities that no longer have any edge.
    if document_index is not None:
        report.vectors += document_index.delete_document(user, collection, document_id)
    if graph_index is not None and orphaned:
        entities = {t.s.value for t in orphaned if t.s.type == IRI} | {t.o.value for t in orphaned if t.o.type == IRI}
        label = _iri(ns.RDFS_LABEL)
        gone, labels = [], []
        for e in sorted(entities):
            edges = triples.query_many(user, collection, [TriplePattern(s=_iri(e), g="", limit=5),
                                                          TriplePattern(o=_iri(e), g="", limit=1)])
            remaining = [t for t in edges[0] if not (t.p.type == IRI and t.p.value == ns.RDFS_LABEL)] + edges[1]
            if not remaining:
                gone.append(e)
                labels += [t for t in edges[0] if t.p == label]
        if gone:
            report.vectors += graph_index.delete_ids(user, collection, gone)
            triples.delete(user, collection, labels)
    report.documents = librarian.remove_document(user, collection, document_id, include_children=True)
    return report
