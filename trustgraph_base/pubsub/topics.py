"""Queue names and their Pulsar topics.

A queue id is ``class:topicspace:name`` as in TrustGraph, with class ``flow`` (persistent
work queues), ``request`` / ``response`` (non-persistent request/response) or ``notify``
(non-persistent broadcast).  Flow-scoped names end with ``:<flow>``:

>>> flow_queue("triples-store")
'flow:tg:triples-store:default'
>>> pulsar_topic("flow:tg:triples-store:default")
'persistent://tg/flow/triples-store:default'
>>> pulsar_topic(request_queue("graph-rag"))
'non-persistent://tg/request/graph-rag:default'
"""

from __future__ import annotations

import re

TOPICSPACE = "tg"
QUEUE_CLASSES = ("flow", "request", "response", "notify")
PERSISTENT_CLASSES = ("flow",)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*(:[A-Za-z0-9][A-Za-z0-9_.\-]*)*\Z")


def _queue(cls: str, name: str, flow: str | None) -> str:
    full = f"{name}:{flow}" if flow else name
    if not _NAME.match(full):
        raise ValueError(f"invalid queue name {full!r}")
    return f"{cls}:{TOPICSPACE}:{full}"


def flow_queue(name: str, flow: str | None = "default") -> str:
    """A persistent work queue (at-least-once; shared subscriptions spread the load)."""
    return _queue("flow", name, flow)


def request_queue(name: str, flow: str | None = "default") -> str:
    return _queue("request", name, flow)


def response_queue(name: str, flow: str | None = "default") -> str:
    return _queue("response", name, flow)


def notify_queue(name: str, flow: str | None = None) -> str:
    return _queue("notify", name, flow)


def dead_letter_queue(queue: str) -> str:
    """Where a queue's undeliverable messages go (always persistent, so they can be inspected)."""
    cls, space, name = parse_queue(queue)
    return f"flow:{space}:dead-letter.{cls}.{name}"


def parse_queue(queue: str) -> tuple[str, str, str]:
    """Split ``class:topicspace:name``; raise ValueError when malformed."""
    parts = queue.split(":", 2)
    if len(parts) != 3 or parts[0] not in QUEUE_CLASSES or not parts[1] or not parts[2]:
        raise ValueError(f"invalid queue id {queue!r} (expected class:topicspace:name)")
    return parts[0], parts[1], parts[2]


def pulsar_topic(queue: str) -> str:
    """The Pulsar topic of a queue id: persistent for flow queues, non-persistent otherwise."""
    cls, space, name = parse_queue(queue)
    kind = "persistent" if cls in PERSISTENT_CLASSES else "non-persistent"
    return f"{kind}://{space}/{cls}/{name}"


def is_persistent(queue: str) -> bool:
    return parse_queue(queue)[0] in PERSISTENT_CLASSES
