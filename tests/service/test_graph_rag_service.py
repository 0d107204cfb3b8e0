"""GraphRAG end to end on real processors: event order, faithful focus edges, synthesis from the
selected edges only, stored trace == streamed trace, SHACL-valid traces, source chains, failures.

Runs on the in-process bus with SQLite and (integration tier) on real Pulsar with Cassandra.
The LLM is the project's local OpenAI-compatible server, spoken to by the real openai client.
"""

from __future__ import annotations

import json

import pytest
from trace_checks import assert_failed_without_answer

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance.walk import collect_trace
from trustgraph_base.rdf.terms import serialize_term
from trustgraph_base.rdf.validation import validate_trace
from trustgraph_base.schema import GraphRagQuery, TriplePattern
from trustgraph_flow.embedded import QUERY_STACK
from trustgraph_flow.retrieval.graph_rag.rag import NO_KNOWLEDGE_ANSWER, NO_SELECTION_ANSWER

pytestmark = pytest.mark.timeout(600)


def polonium_script(calls: dict, malformed_extra: bool = True):
    """Select the edges that mention polonium (plus junk lines the parser must drop); answer from the edges."""

    def script(template_id, terms, messages):
        calls.setdefault(template_id, []).append(terms)
        if template_id == "kg-edge-selection":
            chosen = [k for k in terms["knowledge"] if "polonium" in (k["s"] + " " + k["o"]).lower()][:4]
            lines = [json.dumps({"id": k["id"], "reasoning": f"{k['s']} {k['p']} {k['o']} is about polonium",
                                 "score": round(0.9 - i / 10, 2), "concept": "polonium"})
                     for i, k in enumerate(chosen)]
            if malformed_extra:
                lines = ["```json"] + lines + ["not json at all", '{"id": "ffffffff", "reasoning": "unknown id"}',
                                               "```"]
            return "\n".join(lines)
        if template_id == "kg-synthesis":
            return "From the graph: " + "; ".join(f"{k['s']} {k['p']} {k['o']}" for k in terms["knowledge"]) + "."
        raise AssertionError(f"unexpected template {template_id}")

    return script


async def ask(stack, deployment, query: str, streaming: bool = True, collection: str | None = None):
    from trustgraph_cli.connection import Connection

    async with Connection.attach(stack, timeout=60) as conn:
        client = await conn.client("graph-rag")
        msgs = [m async for m in client.stream(GraphRagQuery(query=query, user=deployment.user,
                                                             collection=collection or deployment.collection,
                                                             streaming=streaming))]
    await stack.wait_idle()
    return msgs


async def stored_trace(stack, deployment, uri: str, collection: str | None = None):
    triples_store = next(s for s in stack.stores if hasattr(s, "list_traces"))

    async def q(patterns):
        return [t for r in triples_store.query_many(deployment.user, collection or deployment.collection, patterns)
                for t in r]

    return await collect_trace(q, uri)


def keys(triples):
    return {(serialize_term(t.s), serialize_term(t.p), serialize_term(t.o)) for t in triples}


def kinds(msgs):
    out = []
    for m in msgs:
        if m.message_type == "explain":
            out.append("explain:" + m.explain_id.split(":")[-2 if ":prov:" in m.explain_id else 2])
        elif m.end_of_session:
            out.append("final")
        else:
            out.append("chunk")
    return out


async def test_explainable_query_end_to_end(deployment, llm_server, llm_settings):
    calls: dict = {}
    llm_server.set_script(polonium_script(calls))
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        msgs = await ask(stack, deployment, "Who discovered polonium?")
        # 1. event order: question, grounding, exploration, focus, answer chunks, synthesis, final
        seq = kinds(msgs)
        assert seq[:4] == ["explain:question", "explain:grounding", "explain:exploration", "explain:focus"], seq
        assert seq[-2:] == ["explain:synthesis", "final"], seq
        assert set(seq[4:-2]) == {"chunk"}
        assert msgs[-1].end_of_session and sum(m.end_of_session for m in msgs) == 1
        q_uri = msgs[0].explain_id
        assert all(m.explain_collection == deployment.collection and m.explain_graph == ns.GRAPH_RETRIEVAL
                   for m in msgs if m.message_type == "explain")

        # 2. every focus edge exists in the knowledge graph with its original terms
        focus = next(m for m in msgs if m.explain_id.startswith("urn:trustgraph:prov:focus:"))
        edges = [t.o.triple for t in focus.explain_triples if t.p.value == ns.TG_EDGE]
        assert 1 <= len(edges) <= 4
        triples_store = next(s for s in stack.stores if hasattr(s, "list_traces"))
        for e in edges:
            assert e.s.type == "i" and e.p.type == "i" and e.s.value.startswith("http://trustgraph.ai/e/")
            found = triples_store.query(deployment.user, deployment.collection,
                                        TriplePattern(s=e.s, p=e.p, o=e.o, g=""))
            assert len(found) == 1, f"focus edge {e} is not in the knowledge graph"
        dropped = [t for t in focus.explain_triples if t.p.value == ns.TG_DROPPED_COUNT]
        assert dropped and int(dropped[0].o.value) >= 2  # the junk line and the unknown id

        # 2b. v2: the grounding names the seed entities the exploration started from; each selection carries the
        # selector's score (typed) and concept; the Focus and Synthesis record their model calls
        grounding = next(m for m in msgs if m.explain_id.startswith("urn:trustgraph:prov:grounding:"))
        concepts = [t.o.value for t in grounding.explain_triples if t.p.value == ns.TG_CONCEPT]
        exploration = next(m for m in msgs if m.explain_id.startswith("urn:trustgraph:prov:exploration:"))
        seeds = [t.o for t in exploration.explain_triples if t.p.value == ns.TG_ENTITY]
        assert concepts and len(concepts) <= len(seeds)
        assert [t.o.value for t in exploration.explain_triples if t.p.value == ns.PROV_WAS_DERIVED_FROM] \
            == [grounding.explain_id]
        scores = sorted(float(t.o.value) for t in focus.explain_triples if t.p.value == ns.TG_SCORE)
        assert scores == sorted(round(0.9 - i / 10, 2) for i in range(len(edges)))
        assert {t.o.datatype for t in focus.explain_triples if t.p.value == ns.TG_SCORE} == {ns.XSD_DOUBLE}
        assert [t.o.value for t in focus.explain_triples if t.p.value == ns.TG_CONCEPT] == ["polonium"] * len(edges)
        usage = {t.p.value: t.o for t in focus.explain_triples if t.s.value == focus.explain_id}
        assert int(usage[ns.TG_IN_TOKEN].value) > 0 and int(usage[ns.TG_OUT_TOKEN].value) > 0
        assert usage[ns.TG_IN_TOKEN].datatype == ns.XSD_INTEGER and usage[ns.TG_LLM_MODEL].value

        # 3. synthesis saw only the selected edges
        assert len(calls["kg-synthesis"]) == 1
        synth_edges = calls["kg-synthesis"][0]["knowledge"]
        assert len(synth_edges) == len(edges)
        assert all("polonium" in (k["s"] + k["o"]).lower() for k in synth_edges)
        answer = "".join(m.response for m in msgs if m.message_type == "chunk")
        assert answer.startswith("From the graph:") and "polonium" in answer.lower()

        # 4. source chain: edge -> subgraph -> chunk -> page -> loaded document
        doc_ids = {d.id for d in deployment.documents}
        assert focus.edge_sources, "focus event should carry the source chains"
        for es in focus.edge_sources:
            assert [link.type for link in es.chain] == ["subgraph", "chunk", "page", "document"]
            assert es.chain[-1].uri in doc_ids and es.chain[-1].label
        assert {s.uri for s in msgs[-1].sources} <= doc_ids and msgs[-1].sources

        # 5. stored trace == streamed trace, and it validates
        streamed = [t for m in msgs if m.message_type == "explain" for t in m.explain_triples]
        stored = await stored_trace(stack, deployment, q_uri)
        assert keys(stored) == keys(streamed)
        report = validate_trace(stored)
        assert report.conforms, [v.message for v in report.violations]
        synthesis = {t.p.value: t.o.value for t in stored if t.s.value == msgs[-2].explain_id}
        out_tokens = int(synthesis[ns.TG_OUT_TOKEN])
        assert out_tokens == len(answer.split())  # the test server counts words
        assert int(msgs[-1].out_token) == out_tokens + int(usage[ns.TG_OUT_TOKEN].value)  # both calls, summed

        # 5b. every stage after the Question is stamped when it was produced, in the order it was sent
        stages = [m.explain_id for m in msgs if m.message_type == "explain"][1:]
        stamps = {t.s.value: t.o for t in stored if t.p.value == ns.PROV_GENERATED_AT_TIME}
        assert set(stamps) == set(stages) and {o.datatype for o in stamps.values()} == {ns.XSD_DATETIME}
        started = next(t.o.value for t in stored if t.p.value == ns.PROV_STARTED_AT_TIME)
        times = [started] + [stamps[s].value for s in stages]
        assert times == sorted(times), times  # one format (UTC, milliseconds), so text order is time order

        # 6. the answer is in the librarian, linked by tg:document, and the trace is listed
        doc = next(t.o.value for t in stored if t.p.value == ns.TG_DOCUMENT)
        assert doc.startswith("urn:trustgraph:answer:")
        librarian = next(s for s in stack.stores if hasattr(s, "stream_content"))
        assert librarian.get_content(deployment.user, deployment.collection, doc).decode() == answer
        page = triples_store.list_traces(deployment.user, deployment.collection, "graphrag", 10, "")
        assert q_uri in [t.uri for t in page.traces]
    finally:
        await stack.stop()


async def test_non_streaming_sends_whole_answer_once(deployment, llm_server, llm_settings):
    calls: dict = {}
    llm_server.set_script(polonium_script(calls, malformed_extra=False))
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        msgs = await ask(stack, deployment, "Who discovered polonium?", streaming=False)
    finally:
        await stack.stop()
    chunks = [m for m in msgs if m.message_type == "chunk" and m.response]
    assert len(chunks) == 1 and chunks[0].end_of_stream
    assert kinds(msgs)[-2:] == ["explain:synthesis", "final"]


async def test_malformed_selection_is_recorded_honestly(deployment, llm_server, llm_settings):
    calls: dict = {}

    def script(template_id, terms, messages):
        calls.setdefault(template_id, []).append(terms)
        return "I think the answer is Marie Curie.\n```\n{broken json\n```"

    llm_server.set_script(script)
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        msgs = await ask(stack, deployment, "Who discovered polonium?")
        stored = await stored_trace(stack, deployment, msgs[0].explain_id)
    finally:
        await stack.stop()
    answer = "".join(m.response for m in msgs if m.message_type == "chunk")
    assert answer == NO_SELECTION_ANSWER
    assert "kg-synthesis" not in calls  # nothing selected: the LLM is not asked to invent an answer
    synthesis = [t for t in stored if t.s.value.startswith("urn:trustgraph:prov:synthesis:")]
    assert synthesis and not [t for t in synthesis if t.p.value in (ns.TG_IN_TOKEN, ns.TG_LLM_MODEL)]
    focus = [t for t in stored if t.s.value.startswith("urn:trustgraph:prov:focus:")]
    assert not [t for t in focus if t.p.value == ns.TG_SELECTED_EDGE]
    assert [t for t in focus if t.p.value == ns.TG_DROPPED_COUNT]
    assert validate_trace(stored).conforms


async def test_llm_failure_ends_session_and_trace_says_how_far(deployment, llm_server, llm_settings):
    llm_server.set_script(polonium_script({}))
    llm_server.fail_next(20, status=500, message="model crashed")
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        msgs = await ask(stack, deployment, "Who discovered polonium?")
        stored = await stored_trace(stack, deployment, msgs[0].explain_id)
    finally:
        llm_server.clear_faults()
        await stack.stop()
    last = msgs[-1]
    assert last.error is not None and last.end_of_session
    assert "500" in last.error.message or "model crashed" in last.error.message
    errors = [t for t in stored if t.p.value == ns.RDF_TYPE and t.o.value == ns.TG_ERROR]
    assert len(errors) == 1
    stage = next(t.o.value for t in stored if t.p.value == ns.TG_STAGE)
    assert stage == "focus"
    report = validate_trace(stored)
    assert report.conforms, [v.message for v in report.violations]


async def test_empty_collection_gives_an_honest_empty_answer(deployment, llm_server, llm_settings):
    calls: dict = {}
    llm_server.set_script(polonium_script(calls))
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        msgs = await ask(stack, deployment, "Who discovered polonium?", collection="empty")
        stored = await stored_trace(stack, deployment, msgs[0].explain_id, collection="empty")
    finally:
        await stack.stop()
    answer = "".join(m.response for m in msgs if m.message_type == "chunk")
    assert answer == NO_KNOWLEDGE_ANSWER and msgs[-1].end_of_session and msgs[-1].error is None
    assert not calls  # no LLM call without knowledge
    assert validate_trace(stored).conforms
    exp_count = next(t.o.value for t in stored if t.p.value == ns.TG_EDGE_COUNT)
    assert exp_count == "0"


async def test_store_timeout_is_a_clear_error(deployment, llm_server, llm_settings):
    llm_server.set_script(polonium_script({}))
    without_query = tuple(p for p in QUERY_STACK if p != "triples-query")
    stack = await deployment.start(without_query, llm="openai",
                                   settings=llm_settings(llm_server, **{"graph-rag": {"client_timeouts":
                                                                                      {"triples": 1.0}}}))
    try:
        msgs = await ask(stack, deployment, "Who discovered polonium?")
    finally:
        await stack.stop()
    assert msgs[-1].error is not None and msgs[-1].end_of_session
    assert "triples did not answer within 1 s" in msgs[-1].error.message


async def test_lost_explain_write_ends_the_session_with_an_error_and_no_gap(deployment, llm_server, llm_settings):
    """Injected fault: the explain write of the focus stage fails.  Writes run beside the query, but
    the session still ends in an error, and storage holds question, grounding, exploration and an Error
    derived from the exploration: nothing after the lost stage, so the trace has no hole and validates."""
    llm_server.set_script(polonium_script({}))
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        ports = stack.get("graph-rag").rag.ports
        real_store = ports.store_explain

        async def failing_focus_write(user, collection, stage_uri, triples):
            if stage_uri.startswith("urn:trustgraph:prov:focus:"):
                raise RuntimeError("injected: the explainability queue refused the focus stage")
            await real_store(user, collection, stage_uri, triples)

        ports.store_explain = failing_focus_write
        msgs = await ask(stack, deployment, "Who discovered polonium?")
        stored = await stored_trace(stack, deployment, msgs[0].explain_id)
    finally:
        await stack.stop()
    last = msgs[-1]
    assert last.end_of_session and last.error is not None
    assert "refused the focus stage" in last.error.message
    assert sum(m.end_of_session for m in msgs) == 1
    types = {t.o.value for t in stored if t.p.value == ns.RDF_TYPE}
    assert ns.TG_ERROR in types and ns.TG_FOCUS not in types and ns.TG_SYNTHESIS not in types
    error_parent = next(t.o.value for t in stored
                        if t.p.value == ns.PROV_WAS_DERIVED_FROM and t.s.value.startswith("urn:trustgraph:prov:error:"))
    assert error_parent.startswith("urn:trustgraph:prov:exploration:")
    report = validate_trace(stored)
    assert report.conforms, [v.message for v in report.violations]


async def test_an_empty_synthesis_is_an_error_not_an_answer(deployment, llm_server, llm_settings):
    """The model selects edges, then answers with nothing (or only whitespace): the client gets an Error that
    says so and no answer text; the trace ends with an Error at the synthesis stage, derived from the Focus,
    and holds no Synthesis and no answer document."""
    blank = {"Who discovered polonium?": "", "Which scientists discovered polonium?": " \n\t " * 10}
    selecting = polonium_script({})

    def script(template_id, terms, messages):
        if template_id == "kg-synthesis":
            return blank[terms["query"]]
        return selecting(template_id, terms, messages)

    llm_server.set_script(script)
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        runs = [await ask(stack, deployment, "Who discovered polonium?", streaming=False),
                await ask(stack, deployment, "Which scientists discovered polonium?", streaming=True)]
        stored = [await stored_trace(stack, deployment, msgs[0].explain_id) for msgs in runs]
    finally:
        await stack.stop()
    for msgs, trace in zip(runs, stored, strict=True):
        assert_failed_without_answer(msgs, trace, ns.TG_FOCUS, (ns.TG_DOCUMENT,))
        error_parent = next(t.o.value for t in trace if t.p.value == ns.PROV_WAS_DERIVED_FROM
                            and t.s.value.startswith("urn:trustgraph:prov:error:"))
        assert error_parent.startswith("urn:trustgraph:prov:focus:")
        report = validate_trace(trace)
        assert report.conforms, [v.message for v in report.violations]
