"""Removing a source document and everything derived from it, and nothing else.

What goes (the exact rules are in ``docs/guarantees.md``, *Removing documents*):

* the document, its pages and chunks (librarian) and the chunk vectors;
* its extraction provenance in ``urn:graph:source``: the Document, its Pages, Chunks and
  Subgraphs, the Activities that made them, and a software Agent no Activity is associated
  with any more;
* every knowledge triple that **only** this document's Subgraphs contain: an edge also
  extracted from another document stays, with that document's provenance;
* the vector of every entity the document's extraction mentioned that is left without any
  triple in the knowledge graph.

The cost follows the document, not the collection: every look-up starts from the document's
own nodes (its pages, chunks, subgraphs, extracted triples and their entities), each with a
bounded limit; nothing scans the collection.  Pages and chunks are found both in the
librarian and in the provenance (``?x prov:wasDerivedFrom <parent>``), so what an
interrupted load stored in only one of them goes too.

The order makes a removal cut short repeatable: knowledge and entity vectors first (they are
found through the Subgraphs), then chunk vectors, then the provenance, and the librarian's
document last, so the document stays listed until everything else is gone and removing it
again finishes the job.
"""

from __future__ import annotations

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance import uris
from trustgraph_base.rdf.terms import serialize_triple, spo
from trustgraph_base.schema import IRI, TRIPLE, Term, Triple, TriplePattern
from trustgraph_base.schema.library import DocumentRemoval

__all__ = ["remove_document_data"]

#: Most rows one node's look-up may return (a subgraph's ``tg:contains``, a node's own triples).
NODE_LIMIT = 1_000_000


def _iri(v: str) -> Term:
    return Term(IRI, v)


_CONTAINS = _iri(ns.TG_CONTAINS)
_DERIVED = _iri(ns.PROV_WAS_DERIVED_FROM)
_GENERATED = _iri(ns.PROV_WAS_GENERATED_BY)
_ASSOCIATED = _iri(ns.PROV_WAS_ASSOCIATED_WITH)


def remove_document_data(user: str, collection: str, document_id: str, librarian, triples, document_index=None,
                         graph_index=None) -> DocumentRemoval:
    """Remove a source document and its derived data (synchronous: run it in a worker thread).

    :returns: what was removed, and how many extracted edges stayed because another document supports them.
    """
    report = DocumentRemoval()
    doc_uri = uris.document_uri(document_id)
    pages = _derived(user, collection, triples, [doc_uri], _children(librarian, user, collection, [document_id]))
    chunks = _derived(user, collection, triples, pages, _children(librarian, user, collection, pages))
    subgraphs = _derived(user, collection, triples, chunks, [uris.subgraph_uri(c) for c in chunks])
    report.pages, report.chunks = len(pages), len(chunks)

    # 1. knowledge triples contained only by this document's subgraphs
    own = set(subgraphs)
    extracted: dict[str, Triple] = {}
    for found in triples.query_many(user, collection, [
            TriplePattern(s=_iri(sg), p=_CONTAINS, g=ns.GRAPH_SOURCE, limit=NODE_LIMIT) for sg in subgraphs]):
        for t in found:
            if t.o.type == TRIPLE:
                inner = t.o.triple
                extracted.setdefault(serialize_triple(inner), Triple(inner.s, inner.p, inner.o, ""))
    candidates = list(extracted.values())
    # one holder outside this document is enough to keep an edge: at most len(own) + 1 rows each
    holders = triples.query_many(user, collection, [
        TriplePattern(p=_CONTAINS, o=Term(TRIPLE, triple=Triple(t.s, t.p, t.o)), g=ns.GRAPH_SOURCE,
                      limit=min(len(own) + 1, NODE_LIMIT)) for t in candidates])
    orphaned = [t for t, h in zip(candidates, holders, strict=True) if all(x.s.value in own for x in h)]
    report.kept_triples = len(candidates) - len(orphaned)
    report.knowledge_triples = triples.delete(user, collection, orphaned) if orphaned else 0

    # 2. vectors of the entities this document mentioned that have no triple left
    if graph_index is not None and candidates:
        entities = sorted({x.value for s, _, o in map(spo, candidates) for x in (s, o) if x.type == IRI})
        left = triples.query_many(user, collection, [
            pattern for e in entities for pattern in (TriplePattern(s=_iri(e), g="", limit=1),
                                                      TriplePattern(o=_iri(e), g="", limit=1))])
        gone = [e for i, e in enumerate(entities) if not left[2 * i] and not left[2 * i + 1]]
        report.entity_vectors = graph_index.delete_ids(user, collection, gone) if gone else 0

    # 3. chunk vectors (by chunk, and whatever else names the document)
    if document_index is not None:
        report.chunk_vectors = document_index.delete_ids(user, collection, chunks) if chunks else 0
        report.chunk_vectors += document_index.delete_document(user, collection, document_id)

    # 4. extraction provenance: the nodes, their activities, then agents nothing uses any more
    nodes = [doc_uri, *pages, *chunks, *subgraphs]
    generated = triples.query_many(user, collection, [
        TriplePattern(s=_iri(n), p=_GENERATED, g=ns.GRAPH_SOURCE, limit=100) for n in nodes])
    activities = list(dict.fromkeys(t.o.value for found in generated for t in found if t.o.type == IRI))
    nodes += activities
    prov = [t for found in triples.query_many(user, collection, [
        TriplePattern(s=_iri(n), g=ns.GRAPH_SOURCE, limit=NODE_LIMIT) for n in dict.fromkeys(nodes)]) for t in found]
    agents = sorted({t.o.value for t in prov if t.p.value == ns.PROV_WAS_ASSOCIATED_WITH and t.o.type == IRI})
    report.provenance_triples = triples.delete(user, collection, prov) if prov else 0
    if agents:
        used = triples.query_many(user, collection, [
            TriplePattern(p=_ASSOCIATED, o=_iri(a), g=ns.GRAPH_SOURCE, limit=1) for a in agents])
        unused = [a for a, u in zip(agents, used, strict=True) if not u]
        if unused:
            agent_triples = [t for found in triples.query_many(user, collection, [
                TriplePattern(s=_iri(a), g=ns.GRAPH_SOURCE, limit=100) for a in unused]) for t in found]
            report.provenance_triples += triples.delete(user, collection, agent_triples)

    # 5. the document, its pages and chunks (last: until now the document stays listed)
    report.documents = librarian.remove_document(user, collection, document_id, include_children=True)
    return report


def _children(librarian, user: str, collection: str, parents: list[str]) -> list[str]:
    from trustgraph_base.store.errors import NotFound

    out = []
    for parent in parents:
        try:
            out += [m.id for m in librarian.list_children(user, collection, parent)]
        except NotFound:  # a page the provenance knows but the librarian never stored
            continue
    return out


def _derived(user: str, collection: str, triples, parents: list[str], known: list[str]) -> list[str]:
    """``known`` plus every node ``prov:wasDerivedFrom`` one of ``parents`` in the provenance, in a stable order."""
    found = triples.query_many(user, collection, [
        TriplePattern(p=_DERIVED, o=_iri(p), g=ns.GRAPH_SOURCE, limit=NODE_LIMIT) for p in parents])
    return list(dict.fromkeys([*known, *(t.s.value for rows in found for t in rows if t.s.type == IRI)]))
