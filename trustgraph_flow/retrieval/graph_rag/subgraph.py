"""Subgraph exploration: which patterns to ask for at each hop, and the growing edge set.

Exploration is breadth-first from the seed entities over the **default graph** (the
knowledge; provenance lives in named graphs and is never explored).  Each hop is one
batched request: for every frontier node, its outgoing (``s = node``) and incoming
(``o = node``) edges, ``triple_limit`` each.  The number of store round trips therefore
grows with the path length, not with the number of edges.  ``rdfs:label`` edges are kept
aside as labels rather than shown to the LLM as knowledge.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from trustgraph_base.provenance.namespaces import RDFS_LABEL
from trustgraph_base.rdf.terms import serialize_term, spo
from trustgraph_base.schema import IRI, LITERAL, Term, Triple, TriplePattern

__all__ = ["Subgraph", "exploration_patterns", "label_patterns", "edge_key"]

_DEFAULT_GRAPH = ""


def edge_key(t: Triple) -> tuple[str, str, str]:
    """Identity of an edge regardless of graph: the canonical strings of s, p, o."""
    s, p, o = spo(t)
    return (serialize_term(s), serialize_term(p), serialize_term(o))


def exploration_patterns(nodes: Iterable[Term], triple_limit: int) -> list[TriplePattern]:
    """Outgoing and incoming edge patterns (default graph) for every node."""
    patterns = []
    for n in nodes:
        patterns.append(TriplePattern(s=n, g=_DEFAULT_GRAPH, limit=triple_limit))
        patterns.append(TriplePattern(o=n, g=_DEFAULT_GRAPH, limit=triple_limit))
    return patterns


def label_patterns(iris: Iterable[str]) -> list[TriplePattern]:
    """One ``?x rdfs:label ?l`` lookup per IRI (default graph), for a single batched request."""
    label = Term(IRI, RDFS_LABEL)
    return [TriplePattern(s=Term(IRI, i), p=label, g=_DEFAULT_GRAPH, limit=4) for i in iris]


@dataclass
class Subgraph:
    """The edges found so far, in discovery order, capped at ``max_size``.

    :param max_size: most edges kept (TrustGraph's ``max_subgraph_size``).
    """

    max_size: int
    edges: list[Triple] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    visited: set[str] = field(default_factory=set)
    _keys: set[tuple[str, str, str]] = field(default_factory=set)

    @property
    def full(self) -> bool:
        return len(self.edges) >= self.max_size

    def mark_visited(self, nodes: Iterable[Term]) -> None:
        self.visited.update(serialize_term(n) for n in nodes)

    def add(self, results: Sequence[Sequence[Triple]]) -> list[Term]:
        """Add query results; return the new frontier (IRI nodes not yet visited), in order found.

        Label triples are recorded as labels, not edges.  Once ``max_size`` edges are held, the
        rest is ignored (but labels are still collected).
        """
        frontier: dict[str, Term] = {}
        for triples in results:
            for t in triples:
                s, p, o = spo(t)
                if p.type == IRI and p.value == RDFS_LABEL:
                    if s.type == IRI and o.type == LITERAL:
                        self.labels.setdefault(s.value, o.value)
                    continue
                if self.full:
                    continue
                k = edge_key(t)
                if k in self._keys:
                    continue
                self._keys.add(k)
                self.edges.append(Triple(s, p, o, _DEFAULT_GRAPH))
                for node in (s, o):
                    if node.type == IRI:
                        key = serialize_term(node)
                        if key not in self.visited and key not in frontier:
                            frontier[key] = node
        return list(frontier.values())

    def iris(self) -> list[str]:
        """Every IRI used by the edges (subjects, predicates, IRI objects), in first-seen order."""
        seen: dict[str, None] = {}
        for t in self.edges:
            for term in spo(t):
                if term.type == IRI:
                    seen.setdefault(term.value, None)
        return list(seen)

    def unlabelled(self) -> list[str]:
        return [i for i in self.iris() if i not in self.labels]
