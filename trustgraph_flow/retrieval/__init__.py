"""Retrieval services: GraphRAG and DocumentRAG, each with query-time explainability."""
