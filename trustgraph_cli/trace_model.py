"""A trace as data: the CLI's name for :mod:`trustgraph_base.provenance.trace_model`, which the gateway's
trace explorer reads traces with too (one reading of a trace for every view of it)."""

from trustgraph_base.provenance.trace_model import (
    QUESTION_TYPES,
    TYPE_NAMES,
    TraceIndex,
    build_trace,
    final_stage_uris,
    natural_key,
    term_json,
    trace_status,
    trace_type,
)

__all__ = ["TraceIndex", "build_trace", "trace_type", "trace_status", "final_stage_uris", "term_json",
           "natural_key", "QUESTION_TYPES", "TYPE_NAMES"]
