"""The label graph: what the LLM sees, and the exact way back to the original edges.

:func:`get_labelgraph` turns edges into ``(label_s, label_p, label_o)`` triples with ids
``edge_id(label_s, label_p, label_o)`` and a ``uri_map`` from id to the **original** terms.
Two different edges are never merged: when two different nodes share a label the labels are
disambiguated with a short hint of the IRI (``Paris [paris-texas]``), and if two distinct
label triples still hash to the same 8-hex id the later one gets a longer id.  Terms are labelled
as everywhere else (:mod:`trustgraph_base.rdf.labels`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from trustgraph_base.provenance.triples import edge_id
from trustgraph_base.rdf.labels import fallback_label, term_label
from trustgraph_base.rdf.terms import serialize_term, spo
from trustgraph_base.schema import IRI, Term, Triple

__all__ = ["LabelGraph", "get_labelgraph"]


@dataclass
class LabelGraph:
    """Labelled edges for the prompt and the id → original edge map."""

    labeled_edges: list[tuple[str, str, str]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    uri_map: dict[str, Triple] = field(default_factory=dict)
    label_map: dict[str, tuple[str, str, str]] = field(default_factory=dict)

    def knowledge(self) -> list[dict[str, str]]:
        """The ``knowledge`` term of the kg-edge-selection prompt."""
        return [{"id": i, "s": s, "p": p, "o": o} for i, (s, p, o) in zip(self.ids, self.labeled_edges, strict=True)]



def _disambiguated(edges: Sequence[Triple], labels: Mapping[str, str]) -> dict[str, str]:
    """Node/predicate key -> label, with a hint appended where one label names several IRIs."""
    by_label: dict[str, set[str]] = {}
    for t in edges:
        for term in spo(t):
            if term.type == IRI:
                by_label.setdefault(term_label(term, labels), set()).add(term.value)
    out: dict[str, str] = {}
    for label, iris in by_label.items():
        for iri in iris:
            if len(iris) == 1:
                out[iri] = label
            else:
                hint = fallback_label(iri).replace(" ", "-")
                if hint.casefold() == label.casefold():
                    hint = hashlib.sha256(iri.encode()).hexdigest()[:6]
                out[iri] = f"{label} [{hint}]"
    return out


def get_labelgraph(edges: Sequence[Triple], labels: Mapping[str, str]) -> LabelGraph:
    """Label every edge and give it a stable id; keep the original terms for each id."""
    names = _disambiguated(edges, labels)

    def lab(term: Term) -> str:
        if term.type == IRI:
            return names[term.value]
        return term_label(term, labels)

    graph = LabelGraph()
    seen_keys: dict[str, tuple[str, str, str]] = {}
    for t in edges:
        s, p, o = spo(t)
        triple_labels = (lab(s), lab(p), lab(o))
        eid = edge_id(*triple_labels)
        key = (serialize_term(s), serialize_term(p), serialize_term(o))
        if eid in seen_keys and seen_keys[eid] != key:
            # Same labels (e.g. two literals that print alike) or an 8-hex collision: extend the id
            # with the original terms so the edges stay distinct.
            full = hashlib.sha256("|".join(key).encode("utf-8")).hexdigest()
            n = 12
            eid = full[:n]
            while eid in seen_keys and seen_keys[eid] != key:
                n += 4
                eid = full[:n]
        if eid in seen_keys:
            continue  # the very same edge twice
        seen_keys[eid] = key
        graph.labeled_edges.append(triple_labels)
        graph.ids.append(eid)
        graph.uri_map[eid] = Triple(t.s, t.p, t.o, t.g)
        graph.label_map[eid] = triple_labels
    return graph
