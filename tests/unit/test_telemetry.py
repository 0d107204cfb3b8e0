"""OpenTelemetry set-up and propagation (docs/observability.md): off by default, configured by the ``OTEL_*``
variables, trace context and the explain id carried in message properties, GenAI content only on opt-in,
and the Question's ``tg:otelTraceId`` (builders, SHACL shapes, ``tg-show-explain-trace``)."""

from __future__ import annotations

import contextlib
import io
import os
import socket

import pytest

from trustgraph_base import telemetry
from trustgraph_base.provenance import grounding_triples, question_triples, uris
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.rdf import validate_trace
from trustgraph_base.schema import Triple, iri, literal
from trustgraph_base.telemetry import genai
from trustgraph_cli.explain import render_text
from trustgraph_cli.trace_model import build_trace

pytestmark = pytest.mark.unit

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
WHEN = "2025-06-01T09:30:00.000Z"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """No OTEL_* setting of the machine leaks in; each test starts and ends with tracing unset."""
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    telemetry.shutdown()
    yield
    telemetry.shutdown()


@pytest.fixture
def dead_endpoint(monkeypatch) -> str:
    """An OTLP endpoint nobody listens on: spans are recorded, their export fails quietly."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    return f"http://127.0.0.1:{port}"


def test_off_by_default_every_helper_is_a_no_op():
    assert not telemetry.install_state()
    assert not telemetry.enabled()
    props = {"id": "r1"}
    assert telemetry.inject(props) == {"id": "r1"}
    incoming = {"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"}
    with telemetry.span("x") as s, telemetry.consumer_span("y", incoming):
        assert s is None
        telemetry.set_explain_id("urn:trustgraph:question:1")
        assert telemetry.current_trace_id() == ""
    assert telemetry.start_span("z") is None


def test_sdk_disabled_wins_over_an_endpoint(monkeypatch, dead_endpoint):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", dead_endpoint)
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not telemetry.install_state()
    monkeypatch.delenv("OTEL_SDK_DISABLED")
    assert telemetry.install_state()


def test_an_endpoint_in_the_environment_turns_tracing_on(monkeypatch, dead_endpoint):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", dead_endpoint + "/v1/traces")
    assert telemetry.configure()
    assert telemetry.enabled()


def test_the_sampler_variable_is_honoured(monkeypatch, dead_endpoint):
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    assert telemetry.install_state(endpoint=dead_endpoint)
    with telemetry.span("not sampled"):
        assert telemetry.current_trace_id() == ""  # nothing recorded: the Question names no trace


def test_context_and_explain_id_cross_message_properties(dead_endpoint):
    assert telemetry.install_state(endpoint=dead_endpoint)
    q = "urn:trustgraph:question:6a1c"
    with telemetry.span("graph-rag request", kind="server") as sender:
        telemetry.set_explain_id(q)
        props = telemetry.inject({"id": "r1"})
        trace_id = telemetry.current_trace_id()
    assert props["id"] == "r1" and props["traceparent"].split("-")[1] == trace_id
    with telemetry.consumer_span("triples-write input", props) as receiver:
        assert receiver.parent.span_id == sender.get_span_context().span_id
        assert telemetry.current_trace_id() == trace_id
        assert receiver.attributes[telemetry.EXPLAIN_ID] == q
        client = telemetry.start_span("call prompt", kind="client")
        assert client.attributes[telemetry.EXPLAIN_ID] == q and client.parent.span_id == receiver.context.span_id
        telemetry.end_span(client, RuntimeError("prompt failed"))
        assert not client.status.is_ok
    # the explain id stayed with the message's span: what runs after it does not inherit it
    with telemetry.span("next message") as other:
        assert telemetry.EXPLAIN_ID not in other.attributes


def test_message_content_goes_on_model_spans_only_on_opt_in(monkeypatch, dead_endpoint):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Who discovered polonium?"}]
    plain = genai.request_attributes("chat", "openai", "m", temperature=0.0, max_tokens=10, inputs=messages)
    assert plain[genai.OPERATION] == "chat" and plain[genai.REQUEST_MODEL] == "m"
    assert not any("polonium" in str(v) for v in plain.values())
    assert telemetry.install_state(endpoint=dead_endpoint)
    with telemetry.span("chat m") as s:
        genai.set_inputs(s, messages)
        genai.set_response(s, model="m-1", input_tokens=7, output_tokens=3, finish_reason="stop", output="Curie")
        assert s.attributes[genai.INPUT_TOKENS] == 7 and s.attributes[genai.OUTPUT_TOKENS] == 3
        assert tuple(s.attributes[genai.FINISH_REASONS]) == ("stop",) and s.attributes[genai.RESPONSE_MODEL] == "m-1"
        assert not any("Curie" in str(v) or "polonium" in str(v) for v in s.attributes.values())

    monkeypatch.setenv(genai.CAPTURE_CONTENT_ENV, "true")
    opted = genai.request_attributes("chat", "openai", "m", inputs=messages)
    assert "polonium" in opted[genai.INPUT_MESSAGES] and opted["input.value"] == messages[-1]["content"]
    with telemetry.span("chat m") as s:
        genai.set_inputs(s, messages)  # the same attributes, set once the request as sent is known
        assert {k: s.attributes[k] for k in opted if "input" in k} == {k: v for k, v in opted.items() if "input" in k}
        genai.set_response(s, model="m", input_tokens=7, output_tokens=3, finish_reason="stop", output="Curie")
        assert "Curie" in s.attributes[genai.OUTPUT_MESSAGES] and s.attributes["output.value"] == "Curie"


# ---------------------------------------------------------------- the Question names the OpenTelemetry trace

def _question(trace_id: str = TRACE_ID) -> list[Triple]:
    q = uris.question_uri("s1")
    return (question_triples(q, "Who?", WHEN, otel_trace_id=trace_id)
            + grounding_triples(uris.grounding_uri("s1"), q, ["Curie"]))


def test_question_records_the_trace_id_and_conforms():
    q = uris.question_uri("s1")
    triples = _question()
    assert [t.o.value for t in triples if t.s.value == q and t.p.value == ns.TG_OTEL_TRACE_ID] == [TRACE_ID]
    assert validate_trace(triples).conforms
    assert not any(t.p.value == ns.TG_OTEL_TRACE_ID for t in question_triples(q, "Who?", WHEN))


@pytest.mark.parametrize("bad", ["4BF92F3577B34DA6A3CE929D0E0E4736", "4bf92f35", "x" * 32])
def test_a_malformed_trace_id_is_refused(bad):
    with pytest.raises(ValueError, match="not an OpenTelemetry trace id"):
        question_triples(uris.question_uri("s1"), "Who?", WHEN, otel_trace_id=bad)


def test_shapes_reject_a_malformed_or_second_trace_id():
    q = uris.question_uri("s1")
    forged = [*_question(), Triple(iri(q), iri(ns.TG_OTEL_TRACE_ID), literal("not-a-trace"), ns.GRAPH_RETRIEVAL)]
    report = validate_trace(forged)
    assert not report.conforms
    assert {v.path for v in report.violations} == {"tg:otelTraceId"}, report.text()


def test_show_explain_trace_prints_the_trace_id():
    trace = build_trace(_question(), uris.question_uri("s1"))
    assert trace["otel_trace_id"] == TRACE_ID
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        render_text(trace, False, 0)
    assert f"OpenTelemetry trace: {TRACE_ID}" in buffer.getvalue()
    assert build_trace(question_triples(uris.question_uri("s2"), "Who?", WHEN),
                       uris.question_uri("s2"))["otel_trace_id"] is None


def _python(code: str, env: dict[str, str] | None = None) -> str:
    import subprocess
    import sys

    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**clean, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_off_nothing_of_opentelemetry_is_even_imported():
    code = ("import sys; from trustgraph_base import telemetry; "
            "print(telemetry.configure(), telemetry.enabled(), telemetry.inject({}), "
            "any(m.startswith('opentelemetry') for m in sys.modules))")
    assert _python(code) == "False False {} False"


def test_a_global_provider_set_by_the_application_receives_the_spans():
    """Under auto-instrumentation (a global provider, no OTLP endpoint of ours) the spans go to that provider."""
    code = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
from trustgraph_base import telemetry
with telemetry.span("graph-rag request"):
    pass
print(telemetry.enabled(), [s.name for s in exporter.get_finished_spans()])
"""
    assert _python(code) == "True ['graph-rag request']"
