"""OpenTelemetry spans for queries across services, configured the OpenTelemetry way (docs/observability.md).

Off by default and optional: without the ``[otel]`` extra installed, or with no OTLP endpoint set
(``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), or with
``OTEL_SDK_DISABLED=true``, nothing is set up and every helper here returns at once.  When the
application configured a global tracer provider itself (``opentelemetry-instrument``), spans go
there.  On, the SDK's :class:`TracerProvider` (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_TRACES_SAMPLER``/``_ARG``) exports over OTLP HTTP/protobuf through a ``BatchSpanProcessor``
(``OTEL_BSP_*``), on a thread of its own: an exporter that fails logs and drops spans, a query never
sees it.

The W3C trace context (``traceparent``, ``tracestate``) and baggage travel in message properties,
on the in-process bus and on Pulsar alike (:func:`inject`, :func:`extract`).  The explain id of a
query (its Question URI) travels as baggage, so every span of the query downstream of the service
that minted it carries ``trustgraph.explain_id``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger(__name__)

__all__ = ["EXPLAIN_ID", "INSTRUMENTATION", "SERVICE", "configure", "consumer_span", "current_explain_id",
           "current_trace_id", "enabled", "end_span", "extract", "flush", "inject", "install_state", "set_attributes",
           "set_explain_id", "shutdown", "span", "span_context", "start_span"]

#: The attribute (and baggage key) naming the Question of an explainable query.
EXPLAIN_ID = "trustgraph.explain_id"
#: The attribute naming the processor (or client) a span ran in.
SERVICE = "trustgraph.service"
#: The instrumentation scope of every span of the suite.
INSTRUMENTATION = "trustgraph"

AttributeValue = str | bool | int | float | list[str] | list[int] | list[float]


@dataclass
class _State:
    tracer: Tracer | None = None
    provider: TracerProvider | None = None  # ours, when this module set the SDK up


_state: _State | None = None


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _endpoint_configured() -> bool:
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def install_state(default_service_name: str = "trustgraph", *, endpoint: str | None = None) -> bool:
    """Set tracing up from the environment (or ``endpoint``, an OTLP/HTTP traces URL); True when it is on.

    Replaces an earlier set-up (whose spans are flushed first).  ``default_service_name`` names the
    service when ``OTEL_SERVICE_NAME`` does not.
    """
    global _state
    shutdown()
    _state = _State()
    if _truthy("OTEL_SDK_DISABLED"):
        return False
    if endpoint is None and not _endpoint_configured():
        # Someone else's provider (auto-instrumentation) is used as it is; else tracing stays off, and nothing
        # of OpenTelemetry is imported (whoever set a provider up has imported it already).
        trace = sys.modules.get("opentelemetry.trace")
        if trace is not None and not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            _state.tracer = trace.get_tracer(INSTRUMENTATION)
            return True
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as e:
        log.warning("OpenTelemetry tracing is configured but its SDK or OTLP exporter is missing (%s): "
                    "install the [otel] extra; tracing stays off", e)
        return False
    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: default_service_name}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    _state.provider = provider
    _state.tracer = provider.get_tracer(INSTRUMENTATION)
    return True


def configure(default_service_name: str = "trustgraph") -> bool:
    """Set tracing up from the environment once per process (later calls keep the first set-up)."""
    if _state is None:
        return install_state(default_service_name)
    return _state.tracer is not None


def _tracer() -> Tracer | None:
    if _state is None:
        configure()
    return _state.tracer if _state is not None else None


def enabled() -> bool:
    """Whether spans are being recorded."""
    return _tracer() is not None


def flush(timeout_millis: int = 30000) -> bool:
    """Export the spans queued so far (True when they went out, or there is nothing to export)."""
    if _state is None or _state.provider is None:
        return True
    return _state.provider.force_flush(timeout_millis)


def shutdown() -> None:
    """Export the spans still queued and stop the exporter this module started (if any)."""
    global _state
    if _state is not None and _state.provider is not None:
        _state.provider.shutdown()
    _state = None


# ------------------------------------------------------------------ context in message properties
def inject(properties: dict[str, str], context: Context | None = None) -> dict[str, str]:
    """Add the current (or ``context``'s) trace context and baggage to ``properties``; returns them."""
    if _tracer() is not None:
        from opentelemetry import propagate

        propagate.inject(properties, context=context)
    return properties


def extract(properties: Mapping[str, str]) -> Context | None:
    """The trace context and baggage carried by ``properties`` (None when tracing is off)."""
    if _tracer() is None:
        return None
    from opentelemetry import propagate

    return propagate.extract(properties)


# ------------------------------------------------------------------ spans
def _explain_id(context: Context | None) -> str:
    from opentelemetry import baggage

    value = baggage.get_baggage(EXPLAIN_ID, context)
    return str(value) if value else ""


def start_span(name: str, *, kind: str = "internal", attributes: Mapping[str, AttributeValue] | None = None,
               ) -> Span | None:
    """A span that is not made current (for async generators, whose context the caller shares); ``end()`` it.

    Its parent is the current span; :func:`inject` with ``span_context(span)`` sends it along.
    """
    tracer = _tracer()
    if tracer is None:
        return None
    from opentelemetry.trace import SpanKind

    s = tracer.start_span(name, kind=SpanKind[kind.upper()], attributes=attributes)
    explain_id = _explain_id(None)
    if explain_id:
        s.set_attribute(EXPLAIN_ID, explain_id)
    return s


def end_span(s: Span | None, error: BaseException | None = None) -> None:
    """End a span from :func:`start_span`; ``error`` (not a cancellation) marks it failed."""
    if s is None:
        return
    if error is not None and isinstance(error, Exception):
        from opentelemetry.trace import Status, StatusCode

        s.record_exception(error)
        s.set_status(Status(StatusCode.ERROR, str(error) or type(error).__name__))
    s.end()


def span_context(s: Span | None) -> Context | None:
    """A context whose current span is ``s`` (to inject into a message sent on its behalf)."""
    if s is None:
        return None
    from opentelemetry import trace

    return trace.set_span_in_context(s)


@contextlib.contextmanager
def span(name: str, *, kind: str = "internal", attributes: Mapping[str, AttributeValue] | None = None,
         context: Context | None = None) -> Iterator[Span | None]:
    """Run the block in a new current span (child of ``context``'s span, else of the current one).

    With ``context`` (extracted from a message) the block also runs under its baggage.  Yields None
    when tracing is off.  An exception leaving the block is recorded on the span and goes on.
    """
    tracer = _tracer()
    if tracer is None:
        yield None
        return
    from opentelemetry import context as otel_context
    from opentelemetry.trace import SpanKind

    token = otel_context.attach(context) if context is not None else None
    try:
        with tracer.start_as_current_span(name, kind=SpanKind[kind.upper()], attributes=attributes) as s:
            explain_id = _explain_id(None)
            if explain_id:
                s.set_attribute(EXPLAIN_ID, explain_id)
            yield s
    finally:
        if token is not None:
            otel_context.detach(token)


def consumer_span(name: str, properties: Mapping[str, str], *, kind: str = "consumer",
                  attributes: Mapping[str, AttributeValue] | None = None) -> contextlib.AbstractContextManager[Any]:
    """The span of handling one message: child of the span that sent it (its ``traceparent``)."""
    if _tracer() is None:
        return contextlib.nullcontext()
    return span(name, kind=kind, attributes=attributes, context=extract(properties))


def set_attributes(attributes: Mapping[str, AttributeValue], s: Span | None = None) -> None:
    """Set attributes on ``s`` (default: the current span); nothing when tracing is off."""
    if _tracer() is None:
        return
    if s is None:
        from opentelemetry import trace

        s = trace.get_current_span()
    s.set_attributes(attributes)


def set_explain_id(uri: str) -> None:
    """Name the query's Question on the current span and, as baggage, on every span after it downstream.

    The baggage stays attached until the enclosing :func:`span` (the message's) ends.
    """
    if _tracer() is None or not uri:
        return
    from opentelemetry import baggage, trace
    from opentelemetry import context as otel_context

    trace.get_current_span().set_attribute(EXPLAIN_ID, uri)
    otel_context.attach(baggage.set_baggage(EXPLAIN_ID, uri))


def current_explain_id() -> str:
    """The Question URI the current context carries as baggage ("" when none, or tracing is off)."""
    if _tracer() is None:
        return ""
    return _explain_id(None)


def current_trace_id() -> str:
    """The current span's trace id as 32 hex digits ("" when tracing is off or nothing is sampled)."""
    if _tracer() is None:
        return ""
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid and ctx.trace_flags.sampled else ""
