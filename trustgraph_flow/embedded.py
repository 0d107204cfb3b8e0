"""The embedded deployment: every processor in one process, on the in-process bus, over SQLite.

The CLI runs this when no ``--pulsar-url`` is given; tests and benchmarks use it too.  The
stores are opened once and shared by the processors that need them (one SQLite file per
user and kind under ``$TG_HOME``).  The same processors, unchanged, run as separate
processes over Pulsar in the distributed set-up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trustgraph_base.processor import Processor
from trustgraph_base.pubsub import open_backend

__all__ = ["EmbeddedStack", "start_embedded"]


def _llm_configured() -> bool:
    backend = os.environ.get("LLM_BACKEND", "").lower()
    if backend:
        return backend == "openai"
    return bool(os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"))


@dataclass
class EmbeddedStack:
    """A running embedded deployment; ``backend`` is the in-process bus clients talk to."""

    backend: Any
    processors: list[Processor] = field(default_factory=list)
    stores: list[Any] = field(default_factory=list)

    def get(self, processor_id: str) -> Processor:
        for p in self.processors:
            if p.id == processor_id:
                return p
        raise KeyError(processor_id)

    async def wait_idle(self, settle: float = 0.05, timeout: float = 600.0) -> None:
        """Wait until no processor is handling a message and the bus is quiet for ``settle`` seconds."""
        import asyncio

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        quiet_since = None
        while loop.time() < deadline:
            busy = any(p.in_flight for p in self.processors) or self.backend.pending() > 0
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
        for p in reversed(self.processors):
            await p.stop()
        for s in self.stores:
            s.close()
        await self.backend.close()


async def start_embedded(home: Path | None = None, *, flow: str = "default", ingest: bool = True,
                         services: tuple[str, ...] = ("graph-rag", "document-rag", "agent"),
                         llm: str = "auto", settings: dict[str, dict] | None = None,
                         backend=None) -> EmbeddedStack:
    """Start the embedded stack and return it.

    :param home: data directory (default ``$TG_HOME`` or ``~/.trustgraph``).
    :param ingest: also run the ingestion pipeline (librarian processing, decoder, chunker, extractor, writers).
    :param services: which query services to run (``graph-rag``, ``document-rag``, ``agent``).
    :param llm: ``auto`` | ``extractive`` | ``openai`` for the prompt service.
    :param settings: extra constructor parameters per processor id.
    """
    from trustgraph_base.store.librarian import open_librarian_store
    from trustgraph_base.store.triples import open_triples_store
    from trustgraph_base.store.vectors import open_vector_index

    from .agent.react.service import AgentService
    from .ingest.services import ChunkerService, DecoderService, KgExtractService
    from .librarian.service import LibrarianService
    from .model.services import EmbeddingsService, PromptService, TextCompletionService
    from .query.triples.service import TriplesQueryService
    from .query.vectors.service import DocumentEmbeddingsQuery, GraphEmbeddingsQuery
    from .retrieval.document_rag.service import DocumentRagService
    from .retrieval.graph_rag.service import GraphRagService
    from .storage.triples.service import TriplesWriteService
    from .storage.vectors.service import DocumentEmbeddingsWriter, GraphEmbeddingsWriter

    options = {"home": Path(home)} if home else {}
    triples = open_triples_store("sqlite", **options)
    librarian = open_librarian_store("sqlite", **options)
    graph_index = open_vector_index("sqlite", kind="graph", **options)
    document_index = open_vector_index("sqlite", kind="document", **options)
    backend = backend or open_backend("memory")
    extra = settings or {}
    common = {"backend": backend, "flow": flow}

    def make(cls, **kw) -> Processor:
        return cls(**common, **kw, **extra.get(cls.default_id, {}))

    use_llm = llm == "openai" or (llm == "auto" and _llm_configured())
    procs = [
        make(TriplesWriteService, triples_store=triples),
        make(TriplesQueryService, triples_store=triples),
        make(GraphEmbeddingsQuery, vector_index=graph_index),
        make(DocumentEmbeddingsQuery, vector_index=document_index),
        make(EmbeddingsService),
        make(PromptService, llm="openai" if use_llm else "extractive"),
        make(LibrarianService, librarian_store=librarian, triples_store=triples, document_index=document_index,
             graph_index=graph_index),
    ]
    if use_llm:
        procs.append(make(TextCompletionService))
    if ingest:
        procs += [
            make(DecoderService), make(ChunkerService),
            make(KgExtractService, extractor="llm" if use_llm else "pattern"),
            make(GraphEmbeddingsWriter, vector_index=graph_index),
            make(DocumentEmbeddingsWriter, vector_index=document_index),
        ]
    if "graph-rag" in services:
        procs.append(make(GraphRagService))
    if "document-rag" in services:
        procs.append(make(DocumentRagService))
    if "agent" in services:
        procs.append(make(AgentService))
    stack = EmbeddedStack(backend, [], [triples, librarian, graph_index, document_index])
    try:
        for p in procs:
            await p.start()
            stack.processors.append(p)
    except BaseException:
        await stack.stop()
        raise
    return stack
