"""Instruments that record what a request cost, without answering anything themselves.

A query's figures come from transparent proxies: :class:`RecordingPorts` records every
request a service makes (service, start, end, patterns), :class:`CountingStore` and
:class:`ProcessLookups` count store-level pattern look-ups, and :func:`stream_request` times
what the client sees.  :func:`dependent_rounds` turns recorded calls into the number of
round trips a query waited for one after another.
"""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .deployment import ServiceProcesses


@dataclass
class Call:
    """One request a service made: which service, when it started and ended, how many patterns."""

    service: str
    start: float
    end: float
    patterns: int = 0


_PORT_SERVICES = {"embed": "embeddings", "find_entities": "graph-embeddings", "find_chunks": "document-embeddings",
                  "query": "triples", "prompt": "prompt", "prompt_stream": "prompt",
                  "get_content": "librarian", "run_tool": "tool"}


class RecordingPorts:
    """A transparent proxy of a service's ports that records every request (and, optionally, its result).

    Explain triples and answers go out on producers (no reply awaited), so ``store_explain`` and
    ``store_answer`` are not requests.
    """

    def __init__(self, inner: Any, keep_results: bool = False):
        self.inner = inner
        self.keep_results = keep_results
        self.calls: list[Call] = []
        self.results: dict[str, list] = defaultdict(list)

    def reset(self) -> None:
        self.calls = []
        self.results = defaultdict(list)

    def __getattr__(self, name: str):
        attr = getattr(self.inner, name)
        service = _PORT_SERVICES.get(name)
        if service is None:
            return attr
        if name == "prompt_stream":
            async def stream(*args, **kwargs):
                t0, items = time.perf_counter(), []
                try:
                    async for item in attr(*args, **kwargs):
                        if self.keep_results:
                            items.append(copy.deepcopy(item))
                        yield item
                finally:
                    self.calls.append(Call(service, t0, time.perf_counter()))
                    if self.keep_results:
                        self.results[name].append(items)
            return stream

        async def call(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                result = await attr(*args, **kwargs)
            finally:
                patterns = len(args[2]) if name == "query" and len(args) > 2 else 0
                self.calls.append(Call(service, t0, time.perf_counter(), patterns))
            if self.keep_results:
                self.results[name].append(copy.deepcopy(result))
            return result
        return call


def dependent_rounds(calls: Sequence[Call], service: str | None = None) -> int:
    """The longest chain of requests each of which started after the previous one ended.

    That is how many network round trips a query waits for one after another; requests that
    overlap in time (sent together) count once.  Greedy by earliest end is exact for this.
    """
    n, end = 0, float("-inf")
    for c in sorted((c for c in calls if service is None or c.service == service), key=lambda c: c.end):
        if c.start >= end:
            n, end = n + 1, c.end
    return n


class CountingStore:
    """A transparent proxy of a triple store that counts store-level pattern look-ups and the rows they returned."""

    def __init__(self, inner: Any):
        import threading

        self.inner = inner
        self.lookups = 0
        self.requests = 0
        self.rows = 0
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self.lookups = self.requests = self.rows = 0

    def query_many(self, user, collection, patterns):
        found = self.inner.query_many(user, collection, patterns)
        with self._lock:
            self.requests += 1
            self.lookups += len(patterns)
            self.rows += sum(len(f) for f in found)
        return found

    def query(self, user, collection, pattern):
        found = self.inner.query(user, collection, pattern)
        with self._lock:
            self.requests += 1
            self.lookups += 1
            self.rows += len(found)
        return found

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


class ProcessLookups:
    """:class:`CountingStore`'s ``lookups`` for a triples-query running apart, from its look-up counter."""

    def __init__(self, processes: ServiceProcesses):
        self.processes = processes
        self._base = processes.lookups()

    def reset(self) -> None:
        self._base = self.processes.lookups()

    @property
    def lookups(self) -> int:
        return int(self.processes.lookups() - self._base)


@dataclass
class Answer:
    """What one streamed request cost, as the client saw it."""

    latency: float
    first_explain: float | None
    messages: list = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(getattr(m, "response", "") or "" for m in self.messages if m.message_type == "chunk")

    def explain_triples(self, predicate: str) -> list:
        return [t for m in self.messages if m.message_type == "explain" for t in m.explain_triples
                if t.p.value == predicate]


async def stream_request(client, request, timeout: float = 120.0) -> Answer:
    """Send ``request``, read the stream to its end; an error reply raises (a benchmark must not time failures)."""
    t0 = time.perf_counter()
    first, msgs = None, []
    async for m in client.stream(request, timeout=timeout):
        if first is None and m.message_type == "explain":
            first = time.perf_counter() - t0
        if getattr(m, "error", None) is not None:
            raise RuntimeError(f"{client.service}: {m.error.message}")
        msgs.append(m)
    return Answer(time.perf_counter() - t0, first, msgs)


@dataclass
class QueryRecord:
    """One measured query: the client's view, the requests the service made, store look-ups, CPU time
    (of this process and of the services running apart)."""

    answer: Answer
    calls: list[Call]
    lookups: int
    cpu_ms: float

    def requests(self, service: str) -> int:
        return sum(1 for c in self.calls if c.service == service)

    @property
    def edges_explored(self) -> int:
        from trustgraph_base.provenance import namespaces as ns

        found = self.answer.explain_triples(ns.TG_EDGE_COUNT)
        return int(found[0].o.value) if found else 0

    def chain(self) -> str:
        """The services of the longest chain of dependent requests, in order."""
        out, end = [], float("-inf")
        for c in sorted(self.calls, key=lambda c: c.end):
            if c.start >= end:
                out.append(c.service)
                end = c.end
        return " > ".join(out)
