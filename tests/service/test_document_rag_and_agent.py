"""DocumentRAG and the ReAct agent on real processors, on both deployments.

DocumentRAG: event order, chunks in the trace are extraction-provenance chunk URIs, stored ==
streamed, SHACL-valid, errors end the session.  Agent: Question ← Analysis 1 ← Observation 1 ←
Analysis 2 ← Observation 2 ← Conclusion with a linked GraphRAG sub-trace, each Analysis streamed
as soon as the model chose its action and each Observation when its tool answered, the texts of
thoughts, observations and the answer stored in the librarian, max-iterations stops cleanly with
a trace that says so, a tool error becomes an observation, a parse failure is recoverable,
requests without a session id record nothing.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from trace_checks import assert_failed_without_answer

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance.walk import collect_trace
from trustgraph_base.rdf.terms import serialize_term
from trustgraph_base.rdf.validation import validate_trace
from trustgraph_base.schema import AgentRequest, DocumentRagQuery, TriplePattern
from trustgraph_flow.embedded import QUERY_STACK

pytestmark = pytest.mark.timeout(600)


def triples_store(stack):
    return next(s for s in stack.stores if hasattr(s, "list_traces"))


async def stored_trace(stack, deployment, uri):
    store = triples_store(stack)

    async def q(patterns):
        return [t for r in store.query_many(deployment.user, deployment.collection, patterns) for t in r]

    return await collect_trace(q, uri)


def keys(triples):
    return {(serialize_term(t.s), serialize_term(t.p), serialize_term(t.o)) for t in triples}


def trace_documents(stack, deployment, trace) -> dict:
    """``document id -> (text, metadata)`` of every librarian document the trace names with ``tg:document``."""
    from trustgraph_base.provenance.walk import trace_documents as named

    librarian = next(s for s in stack.stores if hasattr(s, "stream_content"))
    return {d: (librarian.get_content(deployment.user, deployment.collection, d).decode(),
                librarian.get_metadata(deployment.user, deployment.collection, d)) for d in named(trace)}


def by_subject(trace) -> dict:
    by: dict = {}
    for t in trace:
        by.setdefault(t.s.value, {}).setdefault(t.p.value, []).append(t.o.value)
    return by


def text_of(by: dict, docs: dict, node: str) -> str:
    """The text of the librarian document ``node`` names."""
    return docs[by[node][ns.TG_DOCUMENT][0]][0]


async def stream(stack, service, request, timeout=90):
    from trustgraph_cli.connection import Connection

    async with Connection.attach(stack, timeout=timeout) as conn:
        msgs = [m async for m in (await conn.client(service)).stream(request)]
    await stack.wait_idle()
    return msgs


# ------------------------------------------------------------------ DocumentRAG
async def test_document_rag_explains_which_chunks(deployment, llm_server, llm_settings):
    seen: dict = {}

    def script(template_id, terms, messages):
        assert template_id == "document-prompt"
        seen["documents"] = terms["documents"]
        return "Polonium was discovered in 1898 by Marie and Pierre Curie."

    llm_server.set_script(script)
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        msgs = await stream(stack, "document-rag", DocumentRagQuery(
            query="When was polonium discovered?", user=deployment.user, collection=deployment.collection,
            doc_limit=4, streaming=True))
        q_uri = msgs[0].explain_id
        stored = await stored_trace(stack, deployment, q_uri)
        source = triples_store(stack)
        chunk_types = {}
        for c in (d["id"] for d in seen["documents"]):
            found = source.query(deployment.user, deployment.collection, TriplePattern(
                s=next(t.o for t in stored if t.p.value == ns.TG_SELECTED_CHUNK and t.o.value == c),
                p=None, g=ns.GRAPH_SOURCE))
            chunk_types[c] = {t.o.value for t in found if t.p.value == ns.RDF_TYPE}
    finally:
        await stack.stop()
    kinds = [("explain", m.explain_id.rsplit("/", 1)[-1] if "/" in m.explain_id else "question")
             if m.message_type == "explain" else ("final" if m.end_of_session else "chunk") for m in msgs]
    assert kinds[:3] == [("explain", "question"), ("explain", "grounding"), ("explain", "exploration")], kinds
    assert kinds[-2:] == [("explain", "synthesis"), "final"], kinds
    by = by_subject(stored)
    # the grounding: the question itself, which the chunk search embeds; the exploration is derived from it
    assert by[f"{q_uri}/grounding"][ns.TG_CONCEPT] == ["When was polonium discovered?"]
    assert by[f"{q_uri}/exploration"][ns.PROV_WAS_DERIVED_FROM] == [f"{q_uri}/grounding"]
    assert int(by[f"{q_uri}/synthesis"][ns.TG_OUT_TOKEN][0]) == len(
        "Polonium was discovered in 1898 by Marie and Pierre Curie.".split())
    assert by[f"{q_uri}/synthesis"][ns.TG_LLM_MODEL]
    assert q_uri.startswith("urn:trustgraph:docrag:")
    assert len(seen["documents"]) == 4
    # selected chunks are the chunk entities of extraction provenance
    assert all(ns.TG_CHUNK_TYPE in types for types in chunk_types.values()) and len(chunk_types) == 4
    streamed = [t for m in msgs if m.message_type == "explain" for t in m.explain_triples]
    assert keys(stored) == keys(streamed)
    report = validate_trace(stored)
    assert report.conforms, [v.message for v in report.violations]
    content = next(t.o.value for t in stored if t.p.value == ns.TG_CONTENT)
    assert content == "Polonium was discovered in 1898 by Marie and Pierre Curie."
    assert msgs[-1].sources and {s.uri for s in msgs[-1].sources} <= {d.id for d in deployment.documents}


async def test_document_rag_error_ends_session(deployment, llm_server, llm_settings):
    llm_server.set_script(lambda *a: "unused")
    llm_server.fail_next(20, status=503, message="overloaded")
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        msgs = await stream(stack, "document-rag", DocumentRagQuery(
            query="When was polonium discovered?", user=deployment.user, collection=deployment.collection))
        stored = await stored_trace(stack, deployment, msgs[0].explain_id)
    finally:
        llm_server.clear_faults()
        await stack.stop()
    assert msgs[-1].error is not None and msgs[-1].end_of_session and msgs[-1].end_of_stream
    assert any(t.o.value == ns.TG_ERROR for t in stored if t.p.value == ns.RDF_TYPE)
    assert validate_trace(stored).conforms


async def test_document_rag_empty_answer_is_an_error_not_an_answer(deployment, llm_server, llm_settings):
    """The model answers with nothing (or only whitespace, streamed in several pieces): the client gets an
    Error and no answer text; the trace ends with an Error at the synthesis stage, derived from the
    Exploration, with no Synthesis and no answer document."""
    blank = {"When was polonium discovered?": "", "Why is polonium named so?": "\n \t" * 12}
    llm_server.set_script(lambda template_id, terms, messages: blank[terms["query"]])
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        runs = [await stream(stack, "document-rag", DocumentRagQuery(
            query=query, user=deployment.user, collection=deployment.collection, streaming=streaming))
            for query, streaming in (("When was polonium discovered?", False), ("Why is polonium named so?", True))]
        stored = [await stored_trace(stack, deployment, msgs[0].explain_id) for msgs in runs]
    finally:
        await stack.stop()
    for msgs, trace in zip(runs, stored, strict=True):
        assert_failed_without_answer(msgs, trace, ns.TG_EXPLORATION, (ns.TG_DOCUMENT, ns.TG_CONTENT))
        report = validate_trace(trace)
        assert report.conforms, [v.message for v in report.violations]


# ------------------------------------------------------------------ agent
def agent_script(steps: list[str], graph_answer: str = "Marie Curie and Pierre Curie discovered polonium."):
    """Agent replies in order; GraphRAG sub-queries get a selection of polonium edges and a fixed answer."""
    replies = iter(steps)

    def script(template_id, terms, messages):
        if template_id == "agent-react":
            return next(replies)
        if template_id == "kg-edge-selection":
            chosen = [k for k in terms["knowledge"] if "polonium" in (k["s"] + k["o"]).lower()][:2]
            return "\n".join(json.dumps({"id": k["id"], "reasoning": "about polonium"}) for k in chosen)
        if template_id == "kg-synthesis":
            return graph_answer
        if template_id == "document-prompt":
            return "The documents say polonium was named after Poland."
        raise AssertionError(template_id)

    return script


async def ask_agent(deployment, settings, question: str, sid: str):
    """Ask the agent ``question`` in session ``sid`` on a query stack of its own: the streamed messages, the
    stored trace and the trace's documents."""
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=settings)
    try:
        msgs = await stream(stack, "agent", AgentRequest(question=question, user=deployment.user,
                                                         collection=deployment.collection, session_id=sid))
        stored = await stored_trace(stack, deployment, f"urn:trustgraph:agent:{sid}")
        docs = trace_documents(stack, deployment, stored)
    finally:
        await stack.stop()
    return msgs, stored, docs


async def test_agent_two_tool_calls_with_linked_subtrace(deployment, llm_server, llm_settings):
    llm_server.set_script(agent_script([
        'Thought: I should ask the knowledge graph.\nAction: knowledge-query\n'
        'Args: {"question": "Who discovered polonium?"}',
        'Thought: Now the documents, for the name.\nAction: document-query\n'
        'Args: {\n  "question": "Why is it called polonium?"\n}',
        "Thought: I have both facts.\nFinal Answer: Marie and Pierre Curie discovered polonium, named after Poland.",
    ]))
    sid = f"test-{uuid.uuid4().hex[:8]}"
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        msgs = await stream(stack, "agent", AgentRequest(question="Who discovered polonium and why the name?",
                                                         user=deployment.user, collection=deployment.collection,
                                                         session_id=sid, pattern="react"))
        root = f"urn:trustgraph:agent:{sid}"
        stored = await stored_trace(stack, deployment, root)
        docs = trace_documents(stack, deployment, stored)
        listed = triples_store(stack).list_traces(deployment.user, deployment.collection, "", 50, "")
    finally:
        await stack.stop()
    explain_ids = [m.explain_id for m in msgs if m.message_type == "explain"]
    own = [e for e in explain_ids if e.startswith(root)]
    assert own == [root, f"{root}/i1", f"{root}/i1/thought", f"{root}/i1/observation", f"{root}/i2",
                   f"{root}/i2/thought", f"{root}/i2/observation", f"{root}/final"]
    # each Analysis is streamed once the model chose its action (before the tool runs, so before the sub-query it
    # asks), each Observation once the tool answered (before the next thought)
    order = [(m.message_type, m.explain_id) for m in msgs]
    i1, o1 = order.index(("explain", f"{root}/i1")), order.index(("explain", f"{root}/i1/observation"))
    sub_question = next(k for k, (t, e) in enumerate(order)
                        if t == "explain" and e.startswith("urn:trustgraph:question:"))
    obs = [k for k, (t, _) in enumerate(order) if t == "observation"]
    thoughts = [k for k, (t, _) in enumerate(order) if t == "thought"]
    assert thoughts[0] < i1 < sub_question < obs[0] < o1 < thoughts[1]
    assert msgs[-1].end_of_dialog
    answer = next(m.content for m in msgs if m.message_type == "answer" and m.content)
    assert "polonium" in answer.lower()
    # structure of the stored trace: Question <- i1 <- i1/observation <- i2 <- i2/observation <- final
    by = by_subject(stored)
    assert by[f"{root}/i1"][ns.PROV_WAS_DERIVED_FROM] == [root]
    assert by[f"{root}/i1/observation"][ns.PROV_WAS_DERIVED_FROM] == [f"{root}/i1"]
    assert by[f"{root}/i2"][ns.PROV_WAS_DERIVED_FROM] == [f"{root}/i1/observation"]
    assert by[f"{root}/final"][ns.PROV_WAS_DERIVED_FROM] == [f"{root}/i2/observation"]
    assert json.loads(by[f"{root}/i1"][ns.TG_ARGUMENTS][0]) == {"question": "Who discovered polonium?"}
    # the texts are librarian documents, each stored as an answer marked with the node that names it
    assert by[f"{root}/i1"][ns.TG_THOUGHT] == [f"{root}/i1/thought"]
    assert text_of(by, docs, f"{root}/i1/thought") == "I should ask the knowledge graph."
    assert "discovered polonium" in text_of(by, docs, f"{root}/i1/observation")
    assert text_of(by, docs, f"{root}/final") == answer
    own_docs = sorted(d for d in docs if d.startswith(root))  # the sub-traces' answers are theirs
    assert own_docs == sorted([f"{root}/answer", f"{root}/i1/thought", f"{root}/i1/observation",
                               f"{root}/i2/thought", f"{root}/i2/observation"])
    from trustgraph_base.provenance.answers import marked_stages

    for doc in own_docs:
        meta = docs[doc][1]
        assert meta.document_type == "answer" and marked_stages(meta) == [doc if "/i" in doc else f"{root}/final"]
    assert not [t for t in stored if t.p.value in (ns.TG_OBSERVATION, ns.TG_ANSWER)]
    # every model call is on the stage it made: the two Analyses and the Conclusion
    for node in (f"{root}/i1", f"{root}/i2", f"{root}/final"):
        assert int(by[node][ns.TG_IN_TOKEN][0]) > 0 and by[node][ns.TG_LLM_MODEL], node
    # the GraphRAG sub-trace records the Analysis that asked, and is stored with the agent's trace
    subs = [s for s, p in by.items() if ns.TG_QUERY in p and s != root]
    assert len(subs) == 2
    graph_sub = next(s for s in subs if s.startswith("urn:trustgraph:question:"))
    assert by[graph_sub][ns.PROV_WAS_DERIVED_FROM] == [f"{root}/i1"]
    doc_sub = next(s for s in subs if s.startswith("urn:trustgraph:docrag:"))
    assert by[doc_sub][ns.PROV_WAS_DERIVED_FROM] == [f"{root}/i2"]
    report = validate_trace(stored)
    assert report.conforms, [v.message for v in report.violations]
    parents = {t.uri: t.parent for t in listed.traces}
    assert parents[root] == "" and parents[graph_sub] == f"{root}/i1"


async def test_agent_max_iterations_tool_error_and_parse_failure(deployment, llm_server, llm_settings):
    llm_server.set_script(agent_script([
        "I will just ramble without the grammar.",
        'Thought: try a tool that does not exist\nAction: crystal-ball\nArgs: {"question": "x"}',
        'Thought: graph\nAction: knowledge-query\nArgs: {"question": "Who discovered polonium?"}',
    ]))
    sid = f"test-{uuid.uuid4().hex[:8]}"
    msgs, stored, docs = await ask_agent(
        deployment, llm_settings(llm_server, **{"agent-manager-react": {"max_iterations": 3}}),
        "Who discovered polonium?", sid)
    root = f"urn:trustgraph:agent:{sid}"
    by = by_subject(stored)
    assert by[f"{root}/i1"][ns.TG_ACTION] == ["parse-error"]
    assert ns.TG_THOUGHT not in by[f"{root}/i1"]  # the model gave no thought: none is recorded
    assert "could not be parsed" in text_of(by, docs, f"{root}/i1/observation")
    assert by[f"{root}/i2/observation"][ns.TG_TOOL_ERROR]
    assert "Unknown tool" in text_of(by, docs, f"{root}/i2/observation")
    assert by[f"{root}/final"][ns.TG_TERMINATION_REASON] == ["max-iterations"]
    assert "stopped after 3 steps" in text_of(by, docs, f"{root}/final")
    assert ns.TG_IN_TOKEN not in by[f"{root}/final"]  # giving up asks no model
    assert msgs[-1].end_of_dialog and msgs[-1].error is None
    assert validate_trace(stored).conforms


async def test_agent_without_session_id_records_nothing(deployment, llm_server, llm_settings):
    llm_server.set_script(agent_script(["Thought: easy\nFinal Answer: 42"]))
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        before = triples_store(stack).list_traces(deployment.user, deployment.collection, "agent", 1000, "")
        msgs = await stream(stack, "agent", AgentRequest(question="What is six times seven?", user=deployment.user,
                                                         collection=deployment.collection))
        after = triples_store(stack).list_traces(deployment.user, deployment.collection, "agent", 1000, "")
    finally:
        await stack.stop()
    assert not [m for m in msgs if m.message_type == "explain"]
    assert [m.content for m in msgs if m.message_type == "answer" and m.content] == ["42"]
    assert len(after.traces) == len(before.traces)


# ------------------------------------------------------------------ agent: one run per session id
def echo_agent(calls: list | None = None):
    """The agent concludes at once, naming the question it was asked (so a trace shows which run it holds)."""
    def script(template_id, terms, messages):
        assert template_id == "agent-react", template_id
        if calls is not None:
            calls.append(terms["question"])
        return f"Thought: easy\nFinal Answer: the answer to {terms['question']}"

    return script


def questions_of(trace, root):
    return sorted(t.o.value for t in trace if t.s.value == root and t.p.value == ns.TG_QUERY)


def assert_one_run(trace, docs, root, question):
    """The trace holds exactly one run: one question, one start time, one Conclusion with that question's answer."""
    assert questions_of(trace, root) == [question]
    assert len([t for t in trace if t.s.value == root and t.p.value == ns.PROV_STARTED_AT_TIME]) == 1
    conclusions = [t.s.value for t in trace if t.p.value == ns.RDF_TYPE and t.o.value == ns.TG_CONCLUSION]
    answers = [text_of(by_subject(trace), docs, c) for c in conclusions]
    assert answers == [f"the answer to {question}"], answers
    report = validate_trace(trace)
    assert report.conforms, [v.message for v in report.violations]


def assert_refused(msgs, sid):
    """One Error reply naming the session id; the client heard nothing of a run."""
    assert msgs[-1].end_of_dialog and msgs[-1].error is not None, msgs[-1]
    assert msgs[-1].error.type == "session-in-use" and repr(sid) in msgs[-1].error.message, msgs[-1].error
    assert "\n" not in msgs[-1].error.message
    assert [m.message_type for m in msgs] == ["error"], [m.message_type for m in msgs]


async def test_agent_refuses_a_session_id_that_names_another_run(deployment, llm_server, llm_settings):
    """A second request with a used session id gets an Error before anything is stored or asked: the trace
    still holds the first run alone (never two questions and two answers)."""
    calls: list = []
    llm_server.set_script(echo_agent(calls))
    sid = f"reuse-{uuid.uuid4().hex[:8]}"
    root = f"urn:trustgraph:agent:{sid}"
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        first = await stream(stack, "agent", AgentRequest(question="Who discovered polonium?", user=deployment.user,
                                                          collection=deployment.collection, session_id=sid))
        before = await stored_trace(stack, deployment, root)
        second = await stream(stack, "agent", AgentRequest(question="Who discovered radium?", user=deployment.user,
                                                           collection=deployment.collection, session_id=sid))
        after = await stored_trace(stack, deployment, root)
        docs = trace_documents(stack, deployment, after)
        listed = [t.uri for t in triples_store(stack).list_traces(deployment.user, deployment.collection, "agent",
                                                                   1000, "").traces]
    finally:
        await stack.stop()
    assert first[-1].end_of_dialog and first[-1].error is None
    assert_refused(second, sid)
    assert calls == ["Who discovered polonium?"]  # the refused run never reached the model
    assert keys(after) == keys(before)
    assert_one_run(after, docs, root, "Who discovered polonium?")
    assert listed.count(root) == 1


def count_runs(agent, name: str, taken: dict) -> None:
    """Count in ``taken[name]`` the requests this agent replica takes (its orchestrator answers every request)."""
    run = agent.run

    async def counted(req, emit):
        taken[name] = taken.get(name, 0) + 1
        await run(req, emit)

    agent.run = counted


async def test_concurrent_requests_with_one_new_session_id_run_once(deployment, llm_server, llm_settings):
    """Requests sent at once with the same new session id: exactly one runs, the others are refused, and the
    trace holds that one run.  On Pulsar two agent replicas (and two triples-write replicas) share the work,
    so the requests are taken by different processes."""
    from trustgraph_cli.connection import Connection
    from trustgraph_flow.embedded import start_embedded

    llm_server.set_script(echo_agent())
    settings = llm_settings(llm_server)
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=settings)
    replica = None
    if deployment.kind == "distributed":
        replica = await start_embedded(only=("triples-write", "agent-manager-react"), llm="openai", settings=settings,
                                       backend=deployment.backend(), flow=stack.flow, **deployment.store_kwargs())
    taken: dict[str, int] = {}
    for name, running in (("first", stack), ("replica", replica)):
        if running is not None:
            count_runs(running.get("agent-manager-react").orchestrator, name, taken)
    questions = [f"Question {i} about polonium?" for i in range(6)]
    sid = f"race-{uuid.uuid4().hex[:8]}"
    root = f"urn:trustgraph:agent:{sid}"
    try:
        async with Connection.attach(stack, timeout=90) as conn:
            client = await conn.client("agent")

            async def ask(question):
                return [m async for m in client.stream(AgentRequest(
                    question=question, user=deployment.user, collection=deployment.collection, session_id=sid))]

            runs = await asyncio.gather(*(ask(q) for q in questions))
        await stack.wait_idle()
        if replica is not None:
            await replica.wait_idle()
        trace = await stored_trace(stack, deployment, root)
        docs = trace_documents(stack, deployment, trace)
    finally:
        if replica is not None:
            await replica.stop()
        await stack.stop()
    answered = [q for q, msgs in zip(questions, runs, strict=True) if msgs[-1].error is None]
    assert len(answered) == 1, [msgs[-1].error for msgs in runs]
    assert sum(taken.values()) == len(questions)
    if replica is not None:
        assert set(taken) == {"first", "replica"}, taken  # both replicas ran requests with the one session id
    for q, msgs in zip(questions, runs, strict=True):
        if q not in answered:
            assert_refused(msgs, sid)
    assert_one_run(trace, docs, root, answered[0])


async def test_agent_refuses_an_oversized_question_before_storing_anything(deployment, llm_server, llm_settings):
    """The question limit of GraphRAG and DocumentRAG, with the same wording; nothing is stored or asked."""
    calls: list = []
    llm_server.set_script(echo_agent(calls))
    sid = f"big-{uuid.uuid4().hex[:8]}"
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        msgs = await stream(stack, "agent", AgentRequest(question="x" * 100_001, user=deployment.user,
                                                         collection=deployment.collection, session_id=sid))
        found = triples_store(stack).get_trace(deployment.user, deployment.collection, f"urn:trustgraph:agent:{sid}")
    finally:
        await stack.stop()
    assert msgs[-1].end_of_dialog and msgs[-1].error is not None
    assert msgs[-1].error.message == "the query is 100,001 characters long; at most 100,000 are accepted"
    assert found is None and calls == []
    assert not [m for m in msgs if m.message_type == "explain"]


async def test_agent_failure_ends_its_trace_with_an_error(deployment, llm_server, llm_settings):
    """The model fails after the Question was stored: the trace says how far the run got (an Error derived
    from the last stored stage), so it lists as failed rather than as cut short."""
    from trustgraph_cli.trace_model import final_stage_uris

    llm_server.set_script(agent_script([
        'Thought: graph\nAction: knowledge-query\nArgs: {"question": "Who discovered polonium?"}']))
    sid = f"fail-{uuid.uuid4().hex[:8]}"
    root = f"urn:trustgraph:agent:{sid}"
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        ports = stack.get("agent-manager-react").agent.ports
        real_prompt = ports.prompt
        asked = []

        async def failing_second_prompt(template, terms):
            asked.append(template)
            if len(asked) == 2:
                raise RuntimeError("injected: the prompt service failed")
            return await real_prompt(template, terms)

        ports.prompt = failing_second_prompt
        msgs = await stream(stack, "agent", AgentRequest(question="Who discovered polonium?", user=deployment.user,
                                                         collection=deployment.collection, session_id=sid))
        stored = await stored_trace(stack, deployment, root)
    finally:
        await stack.stop()
    assert msgs[-1].end_of_dialog and "injected" in msgs[-1].error.message
    by = by_subject(stored)
    error_uri = final_stage_uris(root)[1]
    assert by[error_uri][ns.PROV_WAS_DERIVED_FROM] == [f"{root}/i1/observation"]
    assert by[error_uri][ns.TG_STAGE] == ["analysis"] and "injected" in by[error_uri][ns.TG_ERROR_MESSAGE][0]
    assert f"{root}/final" not in by
    report = validate_trace(stored)
    assert report.conforms, [v.message for v in report.violations]


async def test_agent_tool_with_an_empty_answer_is_a_tool_error(deployment, llm_server, llm_settings):
    """A knowledge-query whose model answers with nothing is a failed tool call (an observation saying so,
    recorded as tg:toolError), never an empty observation the agent takes as the tool's answer."""
    llm_server.set_script(agent_script([
        'Thought: graph\nAction: knowledge-query\nArgs: {"question": "Who discovered polonium?"}',
        "Thought: the graph said nothing\nFinal Answer: I could not find out."], graph_answer="  "))
    sid = f"tool-{uuid.uuid4().hex[:8]}"
    root = f"urn:trustgraph:agent:{sid}"
    msgs, stored, docs = await ask_agent(deployment, llm_settings(llm_server), "Who discovered polonium?", sid)
    assert msgs[-1].end_of_dialog and msgs[-1].error is None
    by = by_subject(stored)
    observation = text_of(by, docs, f"{root}/i1/observation")
    assert observation.startswith("Error: the knowledge-query tool failed") and "no answer" in observation
    assert "the model returned no answer" in by[f"{root}/i1/observation"][ns.TG_TOOL_ERROR][0]
    assert validate_trace(stored).conforms


async def test_agent_empty_final_answer_is_feedback_never_an_answer(deployment, llm_server, llm_settings):
    """An empty 'Final Answer:' is a malformed reply like any other: the model is told to fix it (a parse-error
    Analysis), and the dialog never ends with an empty answer."""
    llm_server.set_script(agent_script(["Thought: done\nFinal Answer:   \n", "Thought: done\nFinal Answer: 42"]))
    sid = f"blank-{uuid.uuid4().hex[:8]}"
    root = f"urn:trustgraph:agent:{sid}"
    msgs, stored, docs = await ask_agent(deployment, llm_settings(llm_server), "What is six times seven?", sid)
    assert [m.content for m in msgs if m.message_type == "answer" and m.content] == ["42"]
    by = by_subject(stored)
    assert by[f"{root}/i1"][ns.TG_ACTION] == ["parse-error"]
    assert "'Final Answer:' is empty" in text_of(by, docs, f"{root}/i1/observation")
    assert text_of(by, docs, f"{root}/final") == "42"
