"""GraphRAG's source chains are those of extraction provenance: :mod:`trustgraph_base.provenance.sources`."""

from trustgraph_base.provenance.sources import (
    SOURCE_DEPTH, SOURCE_DESCRIBE, SOURCE_FOLLOW, SOURCE_TYPES, build_source_chains, source_documents,
    source_patterns, source_walk,
)

__all__ = ["source_patterns", "build_source_chains", "source_documents", "SOURCE_FOLLOW", "SOURCE_DESCRIBE",
           "SOURCE_DEPTH", "SOURCE_TYPES", "source_walk"]
