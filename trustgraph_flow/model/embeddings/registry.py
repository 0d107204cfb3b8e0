"""Embedders by name, so services choose one from configuration (``--embeddings local|openai``).

Instances are shared per (name, options): loading the local model costs time and memory
(``bench/README.md``), so every service in one process should use the same one.  A shared local embedder
starts loading its model in the background when it is created (by the service's
constructor), so the first request does not pay for the load.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from . import Embedder, EmbeddingError
from .local import LocalEmbedder
from .openai_backend import OpenAIEmbedder

_FACTORIES: dict[str, Callable[..., Embedder]] = {
    "local": LocalEmbedder,
    "openai": OpenAIEmbedder,
}
_shared: dict[tuple, Embedder] = {}
_lock = threading.Lock()


def embedder_names() -> list[str]:
    """Names accepted by :func:`get_embedder`."""
    return sorted(_FACTORIES)


def get_embedder(name: str = "local", *, shared: bool = True, **opts: Any) -> Embedder:
    """Return the embedder called ``name``, built with ``opts``.

    :param name: ``"local"`` (packaged MiniLM ONNX) or ``"openai"`` (OpenAI-compatible endpoint).
    :param shared: reuse one instance per (name, options) in this process.
    :param opts: keyword arguments of the backend's constructor.
    :raises EmbeddingError: unknown name or invalid options.
    """
    factory = _FACTORIES.get(name)
    if factory is None:
        raise EmbeddingError(f"unknown embedder {name!r}; choose one of {', '.join(embedder_names())}")
    try:
        key = (name, tuple(sorted(opts.items())))
        hash(key)
    except TypeError:
        key = None
    if not shared or key is None:
        return _build(factory, name, opts)
    with _lock:
        embedder = _shared.get(key)
        if embedder is None:
            embedder = _shared[key] = _build(factory, name, opts)
            start_loading = getattr(embedder, "start_loading", None)
            if start_loading is not None:
                start_loading()
        return embedder


def _build(factory: Callable[..., Embedder], name: str, opts: dict[str, Any]) -> Embedder:
    try:
        return factory(**opts)
    except TypeError as exc:
        raise EmbeddingError(f"invalid options for embedder {name!r}: {exc}") from exc
