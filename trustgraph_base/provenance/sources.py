"""Source chains: from a selected edge back to the document it was extracted from.

Extraction provenance (docs/trace-model.md, "Extraction provenance") lives in ``urn:graph:source``: a Subgraph
``tg:contains <<( s p o )>>`` and ``prov:wasDerivedFrom`` its Chunk, which derives from a
Page, which derives from the Document.  The triples-query service returns all of that in one
request (``follow`` / ``describe``); :func:`build_source_chains` assembles it per edge.  GraphRAG
sends the chains with its Focus, and the CLI finds them for a stored trace, with the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..rdf.terms import serialize_term, spo
from ..schema import IRI, TRIPLE, EdgeSource, Source, SourceChainLink, Term, Triple, TriplePattern
from . import namespaces as ns

__all__ = ["source_patterns", "build_source_chains", "source_documents", "SOURCE_FOLLOW", "SOURCE_DESCRIBE",
           "SOURCE_DEPTH", "SOURCE_TYPES", "source_walk"]

SOURCE_FOLLOW = [ns.PROV_WAS_DERIVED_FROM]
SOURCE_DESCRIBE = [ns.RDFS_LABEL, ns.RDF_TYPE]
SOURCE_DEPTH = 4  # subgraph -> chunk -> page -> document (+ one spare level)

_TYPES = {ns.TG_SUBGRAPH_TYPE: "subgraph", ns.TG_CHUNK_TYPE: "chunk", ns.TG_PAGE_TYPE: "page",
          ns.TG_DOCUMENT_TYPE: "document"}
#: The node classes a chain uses: the walk leaves out every other ``rdf:type`` row (``prov:Entity``,
#: on every node, was a quarter of a GraphRAG query's source-chain response).
SOURCE_TYPES = list(_TYPES)


def source_walk(depth: int = SOURCE_DEPTH) -> dict[str, Any]:
    """The chain-walk arguments of a triples query (``follow``, ``follow_depth``, ``describe``,
    ``describe_types``) that reach the document from the nodes the patterns find, ``depth`` links up."""
    return {"follow": SOURCE_FOLLOW, "follow_depth": depth, "describe": SOURCE_DESCRIBE,
            "describe_types": SOURCE_TYPES}


def source_patterns(edges: Sequence[Triple], per_edge: int = 5) -> list[TriplePattern]:
    """``?sg tg:contains <<( s p o )>>`` in ``urn:graph:source`` for every edge."""
    contains = Term(IRI, ns.TG_CONTAINS)
    return [TriplePattern(p=contains, o=Term(TRIPLE, triple=Triple(e.s, e.p, e.o)), g=ns.GRAPH_SOURCE,
                          limit=per_edge) for e in edges]


def build_source_chains(edges: Sequence[Triple], triples: Sequence[Triple], max_depth: int = 10) -> list[EdgeSource]:
    """One :class:`EdgeSource` per (edge, subgraph) found; chains run subgraph → ... → document."""
    contains: dict[str, list[str]] = {}
    parent: dict[str, str] = {}
    label: dict[str, str] = {}
    kind: dict[str, str] = {}
    for s, predicate, o in map(spo, triples):
        p = predicate.value
        if p == ns.TG_CONTAINS and o.type == TRIPLE and s.type == IRI:
            key = serialize_term(o)
            contains.setdefault(key, [])
            if s.value not in contains[key]:
                contains[key].append(s.value)
        elif p == ns.PROV_WAS_DERIVED_FROM and s.type == IRI and o.type == IRI:
            parent.setdefault(s.value, o.value)
        elif p == ns.RDFS_LABEL and s.type == IRI:
            label.setdefault(s.value, o.value)
        elif p == ns.RDF_TYPE and s.type == IRI and o.value in _TYPES:
            kind[s.value] = _TYPES[o.value]
    out = []
    for e in edges:
        key = serialize_term(Term(TRIPLE, triple=Triple(e.s, e.p, e.o)))
        for sg in contains.get(key, []):
            chain: list[SourceChainLink] = []
            node, seen = sg, set()
            while node and node not in seen and len(chain) < max_depth:
                seen.add(node)
                chain.append(SourceChainLink(uri=node, type=kind.get(node, ""), label=label.get(node, "")))
                node = parent.get(node, "")
            out.append(EdgeSource(edge=Triple(e.s, e.p, e.o), chain=chain))
    return out


def source_documents(edge_sources: Sequence[EdgeSource]) -> list[Source]:
    """The de-duplicated documents at the roots of the chains, in first-seen order."""
    docs: dict[str, Source] = {}
    for es in edge_sources:
        if es.chain and es.chain[-1].type == "document":
            root = es.chain[-1]
            docs.setdefault(root.uri, Source(uri=root.uri, title=root.label))
    return list(docs.values())
