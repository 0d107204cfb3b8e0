"""The tg-* commands with OpenTelemetry configured the standard way (``OTEL_*`` variables): a query's spans reach
a real receiver (Arize Phoenix, ``tests/otel_receiver.py``) and ``tg-show-explain-trace`` prints the trace id.

The commands run as subprocesses, embedded (the stack runs inside the command, so its spans and the command's
own leave with it when it exits) and, distributed, against services started for this test with the same
variables, each its own process on Pulsar: one trace crosses the processes.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from e2e_support import GRAPH_QUESTION, GROUPS, ServiceProcess, base_env, group_config, script, wait_ready
from otel_receiver import Phoenix, flat_attributes, start_phoenix

pytestmark = pytest.mark.e2e

QUESTION_URI = re.compile(r"urn:trustgraph:question:[0-9a-f-]{36}")


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory) -> Iterator[Phoenix]:
    with start_phoenix(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


def otel_env(phoenix: Phoenix, service: str) -> dict[str, str]:
    """What a user sets to send spans to ``phoenix`` (docs/observability.md)."""
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url, "OTEL_SERVICE_NAME": service,
            "OTEL_TRACES_SAMPLER": "parentbased_always_on"}


def check_query_trace(deployment, phoenix: Phoenix, hops: set[str]) -> None:
    """Ask with tracing on; the stored Question names the trace, and the trace's spans name the Question."""
    asked = deployment.ok("tg-invoke-graph-rag", "-x", "-q", GRAPH_QUESTION, env=otel_env(phoenix, "tg-e2e"))
    q_uri = QUESTION_URI.search(asked.stdout).group(0)
    trace = deployment.trace_json(q_uri)
    trace_id = trace["otel_trace_id"]
    assert re.fullmatch(r"[0-9a-f]{32}", trace_id or ""), trace
    shown = deployment.ok("tg-show-explain-trace", q_uri)
    assert f"OpenTelemetry trace: {trace_id}" in shown.stdout

    spans = phoenix.spans(trace_id, at_least=len(hops) + 1)
    names = {s["name"] for s in spans}
    assert hops <= names, f"missing {sorted(hops - names)}; spans: {sorted(names)}"
    roots = [s["name"] for s in spans if not s["parent_id"]]
    assert roots == ["call graph-rag"], roots  # the command's own call is the root of the whole trace
    ids = {s["context"]["span_id"] for s in spans}
    assert all(s["parent_id"] in ids for s in spans if s["parent_id"])
    unnamed = sorted(s["name"] for s in spans if flat_attributes(s["attributes"]).get("trustgraph.explain_id") != q_uri)
    assert not unnamed, f"spans without the explain id: {unnamed}"


HOPS = {"call graph-rag", "graph-rag request", "embeddings request", "graph-embeddings-query request",
        "triples-query request", "prompt request", "triples-write input", "librarian answers"}


def test_embedded_query_is_traced_and_show_explain_trace_prints_its_id(embedded_deployment, phoenix):
    check_query_trace(embedded_deployment, phoenix, HOPS)


def test_tracing_off_leaves_no_trace_id(embedded_deployment):
    asked = embedded_deployment.ok("tg-invoke-graph-rag", "-x", "-q", GRAPH_QUESTION)
    q_uri = QUESTION_URI.search(asked.stdout).group(0)
    assert embedded_deployment.trace_json(q_uri)["otel_trace_id"] is None
    assert "OpenTelemetry trace:" not in embedded_deployment.ok("tg-show-explain-trace", q_uri).stdout


@pytest.mark.integration
def test_services_in_their_own_processes_on_pulsar_make_one_trace(distributed_deployment, phoenix, pulsar_service,
                                                                  cassandra_service, tmp_path):
    """graph-rag (its console script) and the store and model services (``tg-processor-group``), started with the
    OTEL_* variables on a flow of their own over the session's data: the command's query is one trace across
    the three processes."""
    flow = f"otel{uuid.uuid4().hex[:8]}"
    env = base_env({"PULSAR_ADMIN_URL": pulsar_service.admin_url, "TG_LOG_LEVEL": "INFO",
                    "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url})
    if pulsar_service.listener_name:
        env["PULSAR_LISTENER_NAME"] = pulsar_service.listener_name
    config = tmp_path / "stores.toml"
    config.write_text(group_config("stores", pulsar_service.url, flow, cassandra_service.host,
                                   int(cassandra_service.port)))
    services = [ServiceProcess("stores", [script("tg-processor-group"), "-c", str(config)], tmp_path / "stores.log",
                               GROUPS["stores"]),
                ServiceProcess("graph-rag", [script("graph-rag"), "--pubsub", "pulsar", "--pulsar-url",
                                             pulsar_service.url, "--flow", flow], tmp_path / "graph-rag.log",
                               ["graph-rag"])]
    for s in services:
        s.start(env)
    try:
        wait_ready(services, 240.0)
        d = distributed_deployment
        traced = type(d)(d.kind, d.user, {**d.env, "TG_FLOW": flow}, tmp_path, flow=flow)
        check_query_trace(traced, phoenix, HOPS)
    finally:
        left = [f"{s.name}: {s.stop()}" for s in services]
    assert all(x.endswith(": []") for x in left), left
