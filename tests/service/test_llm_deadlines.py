"""The layered deadlines on both stacks: a slow LLM within its timeout is not cut by a bus deadline inside,
and a call beyond it fails with the LLM's own error, naming the setting, and is cancelled at the server.

The services' own reply deadlines (600 s and more) are shortened here to 1 s, so that a slow LLM of a few
seconds stands for one of many minutes: the deadlines that follow the LLM timeout must then carry the query.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from test_graph_rag_service import polonium_script

from trustgraph_base.schema import GraphRagQuery
from trustgraph_cli.connection import Connection
from trustgraph_flow.common import services
from trustgraph_flow.embedded import QUERY_STACK

LLM_BOUND = ("text-completion", "prompt", "graph-rag", "document-rag", "agent")


@pytest.fixture
def short_service_deadlines(monkeypatch):
    """Every LLM-bound service's own reply deadline is 1 s (what a slow LLM's minutes are to the real 600 s)."""
    for name in LLM_BOUND:
        monkeypatch.setitem(services.SERVICES, name, dataclasses.replace(services.SERVICES[name], timeout=1.0))


async def ask(stack, deployment) -> list:
    async with Connection.attach(stack, timeout=120) as conn:
        return [m async for m in (await conn.client("graph-rag")).stream(GraphRagQuery(
            query="Who discovered polonium?", user=deployment.user, collection=deployment.collection,
            streaming=False))]


async def test_a_slow_llm_within_its_timeout_is_not_cut_by_an_inner_deadline(
        deployment, llm_server, llm_settings, short_service_deadlines, monkeypatch):
    monkeypatch.setenv("TG_LLM_TIMEOUT", "10")
    llm_server.set_script(polonium_script({}, malformed_extra=False))
    llm_server.slow_next(1, 3.0)  # the edge selection takes 3 s: longer than the services' own 1 s
    stack = await deployment.start(QUERY_STACK, llm="openai",
                                   settings=llm_settings(llm_server, **{"text-completion": {"timeout": None}}))
    try:
        msgs = await ask(stack, deployment)
        await stack.wait_idle()
    finally:
        await stack.stop()
    errors = [m.error for m in msgs if m.error is not None]
    assert errors == []
    answer = "".join(m.response for m in msgs if m.response)
    assert answer.startswith("From the graph: ") and "polonium" in answer
    assert llm_server.template_ids() == ["kg-edge-selection", "kg-synthesis"]


async def test_without_deadlines_that_follow_the_llm_the_inner_bus_deadline_cuts_it(
        deployment, llm_server, llm_settings, short_service_deadlines, monkeypatch):
    """The check above can fail: with the LLM hops taken away, the prompt service's 1 s cuts the 3 s call."""
    for name in LLM_BOUND:
        monkeypatch.setitem(services.SERVICES, name, dataclasses.replace(services.SERVICES[name], llm_hops=0))
    monkeypatch.setenv("TG_LLM_TIMEOUT", "10")
    llm_server.set_script(polonium_script({}, malformed_extra=False))
    llm_server.slow_next(1, 3.0)
    stack = await deployment.start(QUERY_STACK, llm="openai",
                                   settings=llm_settings(llm_server, **{"text-completion": {"timeout": None}}))
    try:
        msgs = await ask(stack, deployment)
    finally:
        await stack.stop()
    errors = [m.error.message for m in msgs if m.error is not None]
    assert errors and "did not answer within 1 s" in errors[0], errors


async def test_a_call_beyond_the_llm_timeout_fails_naming_the_setting_and_is_cancelled(
        deployment, llm_server, llm_settings):
    llm_server.set_script(polonium_script({}, malformed_extra=False))
    llm_server.slow_next(1, 60.0)
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(
        llm_server, **{"text-completion": {"timeout": 2.0, "max_retries": 0}}))
    t0 = time.monotonic()
    try:
        msgs = await ask(stack, deployment)
    finally:
        await stack.stop()
    assert time.monotonic() - t0 < 30
    errors = [m.error.message for m in msgs if m.error is not None]
    assert len(errors) == 1 and "timed out after 2s" in errors[0] and "--llm-timeout" in errors[0], errors
    deadline = time.monotonic() + 10
    while not llm_server.disconnects and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [d.template_id for d in llm_server.disconnects] == ["kg-edge-selection"]
