"""The embedded deployment: every processor in one process, on the in-process bus, over SQLite.

The CLI runs this when no ``--pulsar-url`` is given; tests and benchmarks use it too.  The
stores are opened once and shared by the processors that need them (one SQLite file per
user and kind under ``$TG_HOME``).  The same processors, unchanged, run as separate
processes over Pulsar in the distributed set-up.

A data directory that cannot be used (not a directory, read-only, no permission) stops the
stack from starting.  One that fails later (the disk fills up) fails the stack: on the
in-process bus a message lives only in memory, so retrying it until the machine is fixed would
make the command wait for ever.  The first processor to meet such a failure records it
(:attr:`EmbeddedStack.failure`), every processor stops taking messages (nothing written after
the failed write, so a trace stays a prefix of its stages), and :meth:`EmbeddedStack.wait_idle`
and the stack's watchers (:meth:`EmbeddedStack.watch`, the CLI's connection) raise it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trustgraph_base.processor import Processor
from trustgraph_base.pubsub import open_backend

from .manifest import PROCESSORS, STORES, closure

__all__ = ["EmbeddedStack", "start_embedded", "STORAGE", "INGEST", "QUERY_STACK", "ALL"]


@dataclass
class EmbeddedStack:
    """A running embedded deployment; ``backend`` is the in-process bus clients talk to."""

    backend: Any
    processors: list[Processor] = field(default_factory=list)
    stores: list[Any] = field(default_factory=list)
    flow: str = "default"
    #: The first environment failure a processor met (in-process bus only): the stack halted on it.
    failure: BaseException | None = None
    _watchers: list[Callable[[BaseException], None]] = field(default_factory=list, repr=False)

    def watch(self, callback: Callable[[BaseException], None]) -> Callable[[], None]:
        """Call ``callback(failure)`` when the stack fails; returns the function that stops watching."""
        self._watchers.append(callback)
        return lambda: self._watchers.remove(callback) if callback in self._watchers else None

    def fail(self, failure: BaseException) -> None:
        """A processor met an environment failure: halt every processor, then tell the watchers (once)."""
        if self.failure is not None:
            return
        self.failure = failure
        for p in self.processors:
            p.halt()
        for callback in list(self._watchers):
            callback(failure)

    def get(self, processor_id: str) -> Processor:
        for p in self.processors:
            if p.id == processor_id:
                return p
        raise KeyError(processor_id)

    async def wait_idle(self, settle: float = 0.05, timeout: float = 600.0) -> None:
        """Wait until no processor is handling a message and the bus is quiet for ``settle`` seconds.

        :raises StoreEnvironmentError: the stack failed (:attr:`failure`), before or while waiting.
        """
        import asyncio

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        quiet_since = None
        pending = getattr(self.backend, "pending", None)
        if pending is None:  # a real broker: no queue depth to read, so wait for a longer quiet period
            settle = max(settle, 1.0)
        while loop.time() < deadline:
            if self.failure is not None:
                raise self.failure
            busy = any(p.in_flight for p in self.processors) or (pending is not None and pending() > 0)
            now = loop.time()
            if busy:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = now
            elif now - quiet_since >= settle:
                return
            await asyncio.sleep(0.01)
        raise TimeoutError("the embedded pipeline did not become idle")

    async def stop(self) -> None:
        """Stop every processor (in-flight handlers finish first), close the stores and the bus.

        After a store failure the halted processors' in-flight handlers can only wait for
        services that no longer answer, so they get :data:`HALTED_STOP_SECONDS`, not the usual 30 s.
        """
        for p in reversed(self.processors):
            if self.failure is not None:
                await p.stop(timeout=HALTED_STOP_SECONDS)
            else:
                await p.stop()
        for s in self.stores:
            s.close()
        await self.backend.close()


#: How long a halted stack's processors may take to finish their in-flight handlers on stop.
HALTED_STOP_SECONDS = 0.2

#: Processor sets tests and benchmarks start (a ``tg-*`` command starts the :func:`closure` of what it uses).
STORAGE = closure("triples", "triples-store")
INGEST = closure("librarian", "document-load", "triples")
QUERY_STACK = closure("graph-rag", "document-rag", "agent", "trace-admin", "triples")
#: Every processor of the embedded stack.
ALL = tuple(pid for pid, e in PROCESSORS.items() if e.embedded)

#: Constructor parameters that follow the LLM choice: processor id -> (with an LLM, without).
_LLM_PARAMS = {
    "prompt": ({"llm": "openai"}, {"llm": "extractive"}),
    "kg-extract": ({"extractor": "llm"}, {"extractor": "pattern"}),
}


async def start_embedded(home: Path | None = None, *, flow: str = "default", only: tuple[str, ...] = ALL,
                         llm: str = "auto", settings: dict[str, dict] | None = None,
                         backend=None, store: str = "sqlite", store_options: dict | None = None) -> EmbeddedStack:
    """Start the processors named in ``only`` in this process and return the running stack.

    The default is the embedded deployment (in-process bus, SQLite).  Tests and benchmarks
    also run the very same processors over Pulsar (``backend``) and Cassandra (``store``).
    What each processor is and which stores it needs comes from the service manifest
    (:mod:`trustgraph_flow.manifest`); one store object per store is shared by the processors
    that need it.

    :param home: SQLite data directory (default ``$TG_HOME`` or ``~/.trustgraph``).
    :param only: processor ids to run (see :data:`ALL`); a command needing only trace listing
        starts just the triples services.
    :param llm: ``auto`` | ``extractive`` | ``openai`` (:func:`~trustgraph_flow.model.llm.resolve_llm`);
        without an LLM, ``text-completion`` is not started.
    :param settings: extra constructor parameters per processor id (they override the defaults).
    :param backend: a pub/sub backend (default: a new in-process one).
    :param store: a backend name of every store kind; ``store_options`` are passed to the store openers.
    """
    from .common.stores import open_store
    from .model.llm import resolve_llm

    options = dict(store_options or {})
    if store == "sqlite" and home:
        options.setdefault("home", Path(home))
    stores: dict[str, Any] = {}

    def shared(name: str):
        """One store object per store of the manifest, shared by every processor that needs it."""
        if name not in stores:
            kind, open_options = STORES[name]
            stores[name] = open_store(kind, store, options, **open_options)
        return stores[name]

    unknown = [pid for pid in only if pid not in PROCESSORS or not PROCESSORS[pid].embedded]
    if unknown:
        raise ValueError(f"unknown embedded processors: {', '.join(sorted(unknown))}")
    backend = backend or open_backend("memory")
    extra = settings or {}
    with_llm = resolve_llm(llm) == "openai"
    procs = []
    for pid in dict.fromkeys(only):
        entry = PROCESSORS[pid]
        if entry.needs_llm and not with_llm:
            continue
        # classes are imported only when run, so a command that lists traces does not pay for
        # PDF parsing or the embedder
        module, _, name = entry.cls.partition(":")
        cls = getattr(importlib.import_module(module), name)
        params = {param: shared(store_name) for param, store_name in entry.stores.items()}
        params.update(_LLM_PARAMS.get(pid, ({}, {}))[0 if with_llm else 1])
        procs.append(cls(backend=backend, flow=flow, **{**params, **extra.get(pid, {})}))
    stack = EmbeddedStack(backend, [], list(stores.values()), flow)
    if not backend.durable:  # on a broker the messages wait for the machine to be fixed: an outage
        for p in procs:
            p.on_environment_failure = stack.fail
    try:
        for p in procs:
            await p.start()
            stack.processors.append(p)
    except BaseException:
        await stack.stop()
        raise
    return stack
