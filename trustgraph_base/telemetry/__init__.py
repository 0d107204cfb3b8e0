"""OpenTelemetry tracing beside the PROV-O traces: where a query's time and tokens went (docs/observability.md)."""

from .tracing import (
    EXPLAIN_ID,
    SERVICE,
    configure,
    consumer_span,
    current_explain_id,
    current_trace_id,
    enabled,
    end_span,
    extract,
    flush,
    inject,
    install_state,
    set_attributes,
    set_explain_id,
    shutdown,
    span,
    span_context,
    start_span,
)

__all__ = ["EXPLAIN_ID", "SERVICE", "configure", "consumer_span", "current_explain_id", "current_trace_id", "enabled",
           "end_span", "extract", "flush", "inject", "install_state", "set_attributes", "set_explain_id", "shutdown",
           "span", "span_context", "start_span"]
