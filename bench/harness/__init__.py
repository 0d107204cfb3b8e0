"""The harness the service benchmarks share: stacks, the LLM endpoint, instruments, interleaved measurement.

Every service benchmark (GraphRAG, DocumentRAG, agent, ingestion, CLI, memory, scaling) runs
the real processors on the same kinds of stack and measures them the same way; this package
is that common part, split by concept (:mod:`.deployment`, :mod:`.llm`, :mod:`.suite`,
:mod:`.recording`, :mod:`.interleaving`, :mod:`.graph_target`), and re-exports what the
benchmark modules use.
"""

from __future__ import annotations

from .deployment import (
    CONCURRENCY,
    STORE_SERVICES,
    Deployment,
    Servers,
    ServiceProcesses,
    pulsar_service_argv,
    settle,
    stores_of,
)
from .graph_target import (
    OWN_PROCESSES,
    QUERY_PROCESSORS,
    GraphRagTarget,
    ask_on_off,
    close_target,
    graph_for,
    load_graph,
    open_target,
)
from .interleaving import DEFAULT_CPU_WHAT, Variants, interleaved_order, on_off_figures
from .llm import LLM_LATENCY_MS, LlmEndpoint, shared_embedder, stack_settings
from .recording import (
    Answer,
    Call,
    CountingStore,
    ProcessLookups,
    QueryRecord,
    RecordingPorts,
    dependent_rounds,
    stream_request,
)
from .suite import Suite, bench_parser, load_note, report, run_on_suite

__all__ = [
    "CONCURRENCY", "DEFAULT_CPU_WHAT", "LLM_LATENCY_MS", "OWN_PROCESSES", "QUERY_PROCESSORS", "STORE_SERVICES",
    "Answer", "Call", "ask_on_off",
    "CountingStore", "Deployment", "GraphRagTarget", "LlmEndpoint", "ProcessLookups", "QueryRecord",
    "RecordingPorts", "Servers", "ServiceProcesses", "Suite", "Variants", "bench_parser", "close_target",
    "dependent_rounds", "graph_for", "interleaved_order", "load_graph", "load_note", "on_off_figures",
    "open_target", "pulsar_service_argv", "report", "run_on_suite", "settle", "shared_embedder", "stack_settings",
    "stores_of", "stream_request",
]
