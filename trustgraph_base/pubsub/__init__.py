"""Pub/sub backends by name: ``memory`` (in-process, embedded default) and ``pulsar`` (Apache Pulsar)."""

from __future__ import annotations

from typing import Any

from .base import Backend, BackendError, BackendUnavailable, Consumer, Message, Producer, ReceiveTimeout
from .topics import (
    dead_letter_queue,
    flow_queue,
    notify_queue,
    parse_queue,
    pulsar_topic,
    request_queue,
    response_queue,
)

_BACKENDS = {
    "memory": ("trustgraph_base.pubsub.memory", "MemoryBackend"),
    "pulsar": ("trustgraph_base.pubsub.pulsar", "PulsarBackend"),
}


def open_backend(name: str = "memory", **options: Any) -> Backend:
    """Create a backend by name (lazy import, so the memory bus never loads pulsar-client)."""
    import importlib

    try:
        module, cls = _BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown pub/sub backend {name!r}; choose one of {sorted(_BACKENDS)}") from None
    backend: Backend = getattr(importlib.import_module(module), cls)(**options)
    return backend


__all__ = [
    "Backend", "BackendError", "BackendUnavailable", "Consumer", "Message", "Producer", "ReceiveTimeout",
    "dead_letter_queue", "flow_queue", "notify_queue", "open_backend", "parse_queue", "pulsar_topic",
    "request_queue", "response_queue",
]
