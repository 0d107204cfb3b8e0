"""Provenance vocabulary, URI generators and trace builders (docs/trace-model.md)."""

from . import namespaces, uris
from .agent import agent_final_triples, agent_iteration_triples, agent_session_triples
from .namespaces import GRAPH_DEFAULT, GRAPH_RETRIEVAL, GRAPH_SOURCE, TG
from .triples import (
    EdgeSelection,
    activity_triples,
    chunk_triples,
    docrag_exploration_triples,
    docrag_question_triples,
    docrag_synthesis_triples,
    document_triples,
    edge_id,
    error_triples,
    exploration_triples,
    focus_triples,
    in_graph,
    page_triples,
    question_triples,
    subgraph_triples,
    synthesis_triples,
    timestamp_literal,
)
from .vocabulary import vocabulary_labels, vocabulary_triples

__all__ = [
    "GRAPH_DEFAULT",
    "GRAPH_RETRIEVAL",
    "GRAPH_SOURCE",
    "TG",
    "EdgeSelection",
    "activity_triples",
    "agent_final_triples",
    "agent_iteration_triples",
    "agent_session_triples",
    "chunk_triples",
    "docrag_exploration_triples",
    "docrag_question_triples",
    "docrag_synthesis_triples",
    "document_triples",
    "edge_id",
    "error_triples",
    "exploration_triples",
    "focus_triples",
    "in_graph",
    "namespaces",
    "page_triples",
    "question_triples",
    "subgraph_triples",
    "synthesis_triples",
    "timestamp_literal",
    "uris",
    "vocabulary_labels",
    "vocabulary_triples",
]
