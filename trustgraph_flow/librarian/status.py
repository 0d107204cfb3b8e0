"""How far ingestion got with source documents, read from the stores (the librarian's ``ingest-status``).

Progress events are best-effort (on Pulsar they travel on a non-persistent topic, which drops
what a consumer cannot take and what is sent while it reconnects), so a loader that has heard
nothing about a document for a while asks here instead.  What each stage leaves in the stores:

* the decoder: the Document's ``tg:pageCount`` and its Pages (``prov:wasDerivedFrom`` the
  Document), in the provenance graph;
* the chunker: per Page, its Activity (``prov:used`` the Page) and its Chunks, stored with the
  Chunks' own triples after every Chunk is in the librarian;
* the extractor: per Chunk, its Subgraph (``prov:wasDerivedFrom`` the Chunk, ``tg:contains``
  every extracted edge);
* the vector writers: the Chunk's vector in the document index, and a vector for every entity of
  the Chunk's extraction (the IRIs its Subgraph's edges connect) in the graph index.

The document is ``complete`` when all of that is stored.  An entity's vector may have been written
for another chunk that mentions it; the one this chunk's extraction would write may still come.
Every look-up starts from the documents' own nodes with a bounded limit (as removal's do), so the
cost follows the documents, not the collection.
"""

from __future__ import annotations

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance import uris
from trustgraph_base.schema import IRI, TRIPLE, Term, TriplePattern
from trustgraph_base.schema.library import SOURCE, IngestStatus
from trustgraph_base.store.errors import NotFound

__all__ = ["MAX_STATUS_DOCUMENTS", "ingest_status"]

#: Most documents one ``ingest-status`` request may name.
MAX_STATUS_DOCUMENTS = 1000
#: Most rows one node's look-up may return (as in removal).
NODE_LIMIT = 1_000_000

_DERIVED = Term(IRI, ns.PROV_WAS_DERIVED_FROM)
_USED = Term(IRI, ns.PROV_USED)
_PAGE_COUNT = Term(IRI, ns.TG_PAGE_COUNT)


def _iri(value: str) -> Term:
    return Term(IRI, value)


def ingest_status(user: str, collection: str, document_ids: list[str], librarian, triples, document_index,
                  graph_index) -> list[IngestStatus]:
    """The status of each of ``document_ids``, in order (synchronous: run it in a worker thread).

    :raises ValueError: more than :data:`MAX_STATUS_DOCUMENTS` documents.
    """
    if len(document_ids) > MAX_STATUS_DOCUMENTS:
        raise ValueError(f"ingest-status takes at most {MAX_STATUS_DOCUMENTS} documents, not {len(document_ids)}")
    statuses = [IngestStatus(document_id=d) for d in document_ids]
    for s in statuses:
        try:
            s.found = librarian.get_metadata(user, collection, s.document_id).document_type == SOURCE
        except NotFound:
            s.found = False
    found = [s for s in statuses if s.found]

    def rows(patterns: list[TriplePattern]) -> list[list]:
        return triples.query_many(user, collection, patterns) if patterns else []

    # the decoder: page count and pages
    docs = [uris.document_uri(s.document_id) for s in found]
    counts = rows([TriplePattern(s=_iri(d), p=_PAGE_COUNT, g=ns.GRAPH_SOURCE, limit=1) for d in docs])
    pages_of = rows([TriplePattern(p=_DERIVED, o=_iri(d), g=ns.GRAPH_SOURCE, limit=NODE_LIMIT) for d in docs])
    pages: dict[int, list[str]] = {}
    for i, s in enumerate(found):
        s.pages = int(counts[i][0].o.value) if counts[i] else 0
        pages[i] = [t.s.value for t in pages_of[i] if t.s.type == IRI]

    # the chunker: per page its activity and its chunks
    all_pages = [(i, p) for i, ps in pages.items() for p in ps]
    page_rows = rows([pattern for _i, p in all_pages for pattern in (
        TriplePattern(s=_iri(uris.activity_uri("chunker", p)), p=_USED, o=_iri(p), g=ns.GRAPH_SOURCE, limit=1),
        TriplePattern(p=_DERIVED, o=_iri(p), g=ns.GRAPH_SOURCE, limit=NODE_LIMIT))])
    chunks: dict[int, list[str]] = {i: [] for i in pages}
    for k, (i, _p) in enumerate(all_pages):
        if page_rows[2 * k]:
            found[i].pages_chunked += 1
            chunks[i] += [t.s.value for t in page_rows[2 * k + 1] if t.s.type == IRI]
    for i, s in enumerate(found):
        s.chunks = len(chunks[i])

    # the extractor: per chunk its subgraph, with the edges it contains and their entities
    all_chunks = [(i, c) for i, cs in chunks.items() for c in cs]
    subgraphs = rows([TriplePattern(s=_iri(uris.subgraph_uri(c)), g=ns.GRAPH_SOURCE, limit=NODE_LIMIT)
                      for _i, c in all_chunks])
    entities_of: list[set[str]] = []
    for k, (i, c) in enumerate(all_chunks):
        own = subgraphs[k]
        edges = [t.o.triple for t in own if t.p.value == ns.TG_CONTAINS and t.o.type == TRIPLE]
        if any(t.p.value == ns.PROV_WAS_DERIVED_FROM and t.o.value == c for t in own):
            found[i].extracted += 1
            found[i].extracted_triples += len(edges)
        predicates = {e.p.value for e in edges}
        entities_of.append({x.value for e in edges for x in (e.s, e.o) if x.type == IRI} - predicates)

    # the vector writers
    ids = [c for _i, c in all_chunks]
    chunk_vectors = document_index.existing_ids(user, collection, ids) if ids else set()
    entities = sorted(set().union(*entities_of)) if entities_of else []
    entity_vectors = graph_index.existing_ids(user, collection, entities) if entities else set()
    for k, (i, c) in enumerate(all_chunks):
        found[i].chunk_vectors += int(c in chunk_vectors)
        found[i].entities_embedded += int(entities_of[k] <= entity_vectors)

    for s in found:
        s.complete = (s.pages > 0 and s.pages_chunked == s.pages and s.extracted == s.chunks
                      and s.chunk_vectors == s.chunks and s.entities_embedded == s.chunks)
    return statuses
