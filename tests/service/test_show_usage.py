"""``--show-usage``'s numbers are the trace's: every LLM call of a GraphRAG, DocumentRAG and agent query.

The query services run on both stacks with the project's OpenAI-compatible test server as the
LLM (it reports usage: word counts).  The CLI's :class:`~trustgraph_cli.usage.UsageLog` collects
the calls from the streamed explain events (and an agent's stored sub-traces); they must equal
the usage each stage of the stored trace records, and the totals their sums.
"""

from __future__ import annotations

import uuid

import pytest
from test_document_rag_and_agent import agent_script
from test_graph_rag_service import polonium_script

from trustgraph_base.schema import AgentRequest, DocumentRagQuery, GraphRagQuery
from trustgraph_cli.connection import Connection
from trustgraph_cli.usage import UsageLog
from trustgraph_flow.embedded import QUERY_STACK


def trace_calls(trace: dict) -> list[tuple[str, int | None, int | None, str | None]]:
    """``(stage uri, in, out, model)`` of every stage of a built trace that recorded a model call, in trace order."""
    stages = []
    if trace["type"] == "agent":
        for a in trace["analyses"]:
            stages.append(a)
            for sub in a["sub_traces"]:
                stages += [sub.get("focus"), sub.get("synthesis")]
        stages.append(trace["conclusion"])
    else:
        stages += [trace.get("focus"), trace.get("synthesis")]
    return [(s["uri"], s["usage"]["in_token"], s["usage"]["out_token"], s["usage"]["model"])
            for s in stages if s and s.get("usage")]


async def ask(stack, deployment, service: str, request) -> tuple[UsageLog, dict, list]:
    """Send ``request`` as the command does, collecting usage from its explain events; then read the stored trace."""
    from trustgraph_base.provenance.trace_reading import read_trace

    usage = UsageLog()
    async with Connection.attach(stack, timeout=120) as conn:
        msgs = []
        async for msg in (await conn.client(service)).stream(request):
            assert msg.error is None, msg.error
            msgs.append(msg)
            if msg.message_type == "explain":
                usage.event(msg.explain_id, msg.explain_triples)
        await usage.add_sub_traces(conn, deployment.user, deployment.collection)
        root = next(m.explain_id for m in msgs if m.message_type == "explain")
        read = None
        for _ in range(100):  # the distributed stores write asynchronously
            read = await read_trace(conn, deployment.user, deployment.collection, root, sources=False)
            if read is not None and read.trace["status"] == "complete" and len(trace_calls(read.trace)) >= len(
                    usage.calls):
                break
            await stack.wait_idle()
    assert read is not None
    return usage, read.trace, msgs


def assert_equal_to_trace(usage: UsageLog, trace: dict, expected_calls: int) -> None:
    recorded = trace_calls(trace)
    shown = [(c.uri, c.in_token, c.out_token, c.model) for c in usage.calls]
    assert shown == recorded
    assert len(shown) == expected_calls
    assert all(c.in_token and c.in_token > 0 and c.out_token and c.out_token > 0 and c.model == "scripted"
               for c in usage.calls), usage.calls
    in_total, out_total, models = usage.totals()
    assert (in_total, out_total, models) == (sum(r[1] for r in recorded), sum(r[2] for r in recorded), ["scripted"])


async def test_graph_rag_usage_equals_the_trace(deployment, llm_server, llm_settings, capsys):
    llm_server.set_script(polonium_script({}))
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        usage, trace, msgs = await ask(stack, deployment, "graph-rag", GraphRagQuery(
            query="Who discovered polonium?", user=deployment.user, collection=deployment.collection,
            streaming=True))
    finally:
        await stack.stop()
    assert_equal_to_trace(usage, trace, 2)
    assert [c.stage for c in usage.calls] == ["edge selection", "synthesis"]
    # the final message's usage (the sum over the query) agrees
    final = msgs[-1]
    assert (final.in_token, final.out_token) == usage.totals()[:2]
    usage.print()
    err = capsys.readouterr().err.splitlines()
    in_total, out_total, _ = usage.totals()
    assert err[-1] == f"Input tokens: {in_total} Output tokens: {out_total} Model: scripted"
    assert err[0].startswith("  edge selection: Input tokens: ") and trace["focus"]["uri"] in err[0]


async def test_document_rag_usage_equals_the_trace(deployment, llm_server, llm_settings):
    llm_server.set_script(lambda template_id, terms, messages: "Polonium is named after Poland, the documents say.")
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        usage, trace, _ = await ask(stack, deployment, "document-rag", DocumentRagQuery(
            query="Why is it called polonium?", user=deployment.user, collection=deployment.collection,
            doc_limit=3, streaming=False))
    finally:
        await stack.stop()
    assert_equal_to_trace(usage, trace, 1)
    assert [c.stage for c in usage.calls] == ["synthesis"]


async def test_agent_usage_includes_its_tool_queries_and_equals_the_trace(deployment, llm_server, llm_settings):
    llm_server.set_script(agent_script([
        'Thought: I should ask the knowledge graph.\nAction: knowledge-query\n'
        'Args: {"question": "Who discovered polonium?"}',
        "Thought: I know it now.\nFinal Answer: Marie and Pierre Curie discovered polonium.",
    ]))
    sid = f"usage-{uuid.uuid4().hex[:8]}"
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        usage, trace, _ = await ask(stack, deployment, "agent", AgentRequest(
            question="Who discovered polonium?", user=deployment.user, collection=deployment.collection,
            session_id=sid))
    finally:
        await stack.stop()
    # step 1, the GraphRAG query it asked (edge selection, synthesis), and the answer
    assert_equal_to_trace(usage, trace, 4)
    assert [c.stage for c in usage.calls] == ["step 1", "GraphRAG edge selection", "GraphRAG synthesis", "answer"]


@pytest.mark.parametrize("stage_uri", ["urn:trustgraph:prov:focus:00000000-0000-4000-8000-000000000000"])
def test_a_stage_without_usage_is_no_call(stage_uri):
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.schema import IRI, Term, Triple

    usage = UsageLog()
    usage.event(stage_uri, [Triple(Term(IRI, stage_uri), Term(IRI, ns.RDF_TYPE), Term(IRI, ns.TG_FOCUS))])
    assert usage.calls == [] and usage.totals() == (0, 0, [])


def assert_recorded_as_not_reported(usage: UsageLog, trace: dict, stored: list, expected_calls: int) -> None:
    """Every call recorded its model and no token counts (unknown, never 0), the trace is SHACL-valid, and
    ``--show-usage`` says the tokens were not reported."""
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.rdf.validation import validate_trace

    recorded = trace_calls(trace)
    assert recorded == [(c.uri, None, None, "scripted") for c in usage.calls]
    assert len(recorded) == expected_calls
    assert not [t for t in stored if t.p.value in (ns.TG_IN_TOKEN, ns.TG_OUT_TOKEN)]
    assert {t.s.value for t in stored if t.p.value == ns.TG_LLM_MODEL} == {c.uri for c in usage.calls}
    report = validate_trace(stored)
    assert report.conforms, report


async def stored_trace(stack, deployment, root: str) -> list:
    from trustgraph_base.provenance.trace_reading import load_trace_triples

    async with Connection.attach(stack, timeout=120) as conn:
        return await load_trace_triples(conn, deployment.user, deployment.collection, root)


@pytest.mark.parametrize("streaming", [True, False])
async def test_graph_rag_calls_without_usage_are_not_reported(deployment, llm_server, llm_settings, capsys,
                                                              streaming):
    llm_server.set_script(polonium_script({}))
    llm_server.omit_stream_usage()  # as llama.cpp's server: no usage with a streamed answer
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        usage, trace, msgs = await ask(stack, deployment, "graph-rag", GraphRagQuery(
            query="Who discovered polonium?", user=deployment.user, collection=deployment.collection,
            streaming=streaming))
        stored = await stored_trace(stack, deployment, trace["uri"])
    finally:
        await stack.stop()
    assert_recorded_as_not_reported(usage, trace, stored, 2)
    # the query's total is unknown, not 0, and says how many calls did not report
    final = msgs[-1]
    assert (final.in_token, final.out_token, final.unreported_calls, final.model) == (None, None, 2, "scripted")
    usage.print()
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("  edge selection: tokens not reported by the endpoint, Model: scripted")
    assert err[1].startswith("  synthesis: tokens not reported by the endpoint, Model: scripted")
    assert err[-1] == ("Input tokens: 0 Output tokens: 0 Model: scripted "
                       "(2 of 2 calls: tokens not reported by the endpoint; the totals leave them out)")


async def test_document_rag_call_without_usage_is_not_reported(deployment, llm_server, llm_settings):
    llm_server.set_script(lambda template_id, terms, messages: "Polonium is named after Poland, the documents say.")
    llm_server.omit_stream_usage()
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        usage, trace, msgs = await ask(stack, deployment, "document-rag", DocumentRagQuery(
            query="Why is it called polonium?", user=deployment.user, collection=deployment.collection,
            doc_limit=3, streaming=True))
        stored = await stored_trace(stack, deployment, trace["uri"])
    finally:
        await stack.stop()
    assert_recorded_as_not_reported(usage, trace, stored, 1)
    assert (msgs[-1].in_token, msgs[-1].out_token, msgs[-1].unreported_calls) == (None, None, 1)


async def test_agent_calls_without_usage_are_not_reported(deployment, llm_server, llm_settings):
    llm_server.set_script(agent_script([
        'Thought: I should ask the knowledge graph.\nAction: knowledge-query\n'
        'Args: {"question": "Who discovered polonium?"}',
        "Thought: I know it now.\nFinal Answer: Marie and Pierre Curie discovered polonium.",
    ]))
    llm_server.omit_stream_usage()
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        usage, trace, _ = await ask(stack, deployment, "agent", AgentRequest(
            question="Who discovered polonium?", user=deployment.user, collection=deployment.collection,
            session_id=f"usage-{uuid.uuid4().hex[:8]}"))
        stored = await stored_trace(stack, deployment, trace["uri"])
    finally:
        await stack.stop()
    # step 1, the GraphRAG query it asked (edge selection, synthesis), and the answer: none reported usage
    assert_recorded_as_not_reported(usage, trace, stored, 4)
    assert usage.unreported() == 4 and usage.totals() == (0, 0, ["scripted"])


def test_totals_over_some_unreported_calls_are_partial(capsys):
    from trustgraph_cli.usage import LlmCall

    usage = UsageLog([LlmCall("edge selection", "urn:a", 120, 30, "m"), LlmCall("synthesis", "urn:b", None, None, "m")])
    assert usage.totals() == (120, 30, ["m"]) and usage.unreported() == 1
    usage.print()
    err = capsys.readouterr().err.splitlines()
    assert err == ["  edge selection: Input tokens: 120 Output tokens: 30 Model: m  (urn:a)",
                   "  synthesis: tokens not reported by the endpoint, Model: m  (urn:b)",
                   "Input tokens: 120 Output tokens: 30 Model: m "
                   "(1 of 2 calls: tokens not reported by the endpoint; the totals leave them out)"]
