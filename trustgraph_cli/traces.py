"""Loading a stored trace over the bus, and the lookups that make it readable.

The reading itself is :mod:`trustgraph_base.provenance.trace_reading`, shared with the gateway's
trace explorer; this module gives the CLI its names for it and the CLI's own text of a source chain.
"""

from __future__ import annotations

from trustgraph_base.provenance.trace_reading import (
    LabelCache,
    chunk_chains,
    edge_chains,
    iris_in_terms,
    load_trace_triples,
    query,
    removed_sources,
)

__all__ = ["LabelCache", "chunk_chains", "edge_chains", "iris_in_terms", "load_trace_triples", "query",
           "removed_sources", "chain_text"]


def chain_text(chain: list[dict]) -> str:
    """``Chunk 3 → Page 2 → The Curies`` (the subgraph link is left out)."""
    parts = [link["label"] or link["uri"] for link in chain if link.get("type") != "subgraph"]
    return " → ".join(parts)
