"""Sentence embeddings behind one small protocol, with a local and an OpenAI-compatible backend.

Every vector index records the ``model_id`` of the embedder that built it, so vectors from
different models are never compared. Importing this package is cheap: the ONNX runtime and
the openai client are imported on first use.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


class EmbeddingError(RuntimeError):
    """An embedder could not produce vectors (bad input, missing or tampered model, endpoint failure)."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into fixed-size vectors; ``model_id`` names the vector space."""

    model_id: str

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


from .local import LOCAL_DIMENSION, LOCAL_MODEL_ID, LocalEmbedder  # noqa: E402 - they need EmbeddingError
from .openai_backend import OpenAIEmbedder  # noqa: E402 - it needs EmbeddingError
from .registry import embedder_names, get_embedder  # noqa: E402 - it needs Embedder and EmbeddingError

__all__ = [
    "LOCAL_DIMENSION",
    "LOCAL_MODEL_ID",
    "Embedder",
    "EmbeddingError",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "embedder_names",
    "get_embedder",
]
