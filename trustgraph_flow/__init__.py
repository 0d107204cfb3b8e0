"""The services: retrieval (GraphRAG, DocumentRAG), the ReAct agent, storage, query, librarian, ingestion, models."""
