"""Model layer: text completion, embeddings, prompt templates and the extractive backend.

Backends are picked by configuration: an OpenAI-compatible endpoint when one is
configured, otherwise the deterministic ``extractive`` backend (see ``docs/models.md``).
"""
