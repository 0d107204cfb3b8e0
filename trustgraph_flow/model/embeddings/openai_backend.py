"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint, through the openai client.

The model id is ``openai:<model>`` so an index built from a remote model is never mixed
with one built by the local ONNX embedder, even when both claim the same model name.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from . import EmbeddingError

DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"


class OpenAIEmbedder:
    """Embedder backed by an OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp, our test server)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        *,
        dimension: int | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        """Configure the endpoint; arguments fall back to the environment.

        :param base_url: endpoint base URL (``OPENAI_BASE_URL``), e.g. ``http://127.0.0.1:8000/v1``.
        :param api_key: API key (``OPENAI_API_KEY``); a placeholder is used for keyless local servers.
        :param model: embedding model name (``OPENAI_EMBEDDING_MODEL``, default text-embedding-3-small).
        :param dimension: vector size if known; otherwise learned from the first call.
        :param timeout: seconds per HTTP request.
        :param max_retries: retries (with the client's exponential backoff) on 429/5xx/connection errors.
        """
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if self.base_url is None and self.api_key is None:
            raise EmbeddingError(
                "openai embedder: no endpoint configured; pass base_url/api_key or set "
                "OPENAI_BASE_URL / OPENAI_API_KEY"
            )
        self.model = model or os.environ.get("OPENAI_EMBEDDING_MODEL") or DEFAULT_EMBEDDING_MODEL
        self.model_id = f"openai:{self.model}"
        self.timeout = timeout
        self.max_retries = max_retries
        self._dimension = dimension
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        """Human-readable name of the endpoint, used in error messages."""
        return f"{self.base_url or 'default OpenAI endpoint'} (model {self.model})"

    @property
    def dimension(self) -> int:
        """Vector size; probes the endpoint once when it was not given."""
        if self._dimension is None:
            self.embed(["dimension probe"])
        assert self._dimension is not None
        return self._dimension

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                import openai

                self._client = openai.OpenAI(
                    base_url=self.base_url,
                    api_key=self.api_key or "unused",
                    timeout=self.timeout,
                    max_retries=self.max_retries,
                )
            return self._client

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Embed ``texts`` with one request.

        :param texts: the texts to embed.
        :raises EmbeddingError: bad input, endpoint failure, or an inconsistent response.
        """
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise EmbeddingError("openai embedder: embed() takes a list of strings")
        if not texts:
            return []
        import openai

        try:
            response = self._get_client().embeddings.create(model=self.model, input=list(texts))
        except openai.APIStatusError as exc:
            raise EmbeddingError(
                f"embeddings endpoint {self.endpoint} failed: HTTP {exc.status_code}: {exc.message}"
            ) from exc
        except openai.APITimeoutError as exc:
            raise EmbeddingError(
                f"embeddings endpoint {self.endpoint} failed: timed out after {self.timeout}s"
            ) from exc
        except openai.APIConnectionError as exc:
            raise EmbeddingError(
                f"embeddings endpoint {self.endpoint} failed: connection error: {exc}"
            ) from exc
        except openai.OpenAIError as exc:
            raise EmbeddingError(f"embeddings endpoint {self.endpoint} failed: {exc}") from exc
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(texts):
            raise EmbeddingError(
                f"embeddings endpoint {self.endpoint} returned {len(data)} vectors for {len(texts)} texts"
            )
        vectors = [list(map(float, item.embedding)) for item in data]
        sizes = {len(v) for v in vectors}
        if len(sizes) != 1:
            raise EmbeddingError(f"embeddings endpoint {self.endpoint} returned vectors of sizes {sorted(sizes)}")
        size = sizes.pop()
        if self._dimension is None:
            self._dimension = size
        elif size != self._dimension:
            raise EmbeddingError(
                f"embeddings endpoint {self.endpoint} returned {size}-dimensional vectors, "
                f"expected {self._dimension}"
            )
        return vectors
