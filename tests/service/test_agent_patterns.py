"""The agent's plan-then-execute and supervisor patterns and its router, on real processors, on both deployments.

Supervisor: Question ← Decomposition ← (sub-agent Questions, each a react trace of its own) ; Finding i ← the
Decomposition and sub-agent i's Conclusion ; Synthesis ← every Finding ; Conclusion ← Synthesis, with the
sub-agents running at the same time (their recorded start and end times overlap).  Plan: Question ← Plan ←
StepResult i (← the steps it depends on) ← Synthesis, steps run in dependency order.  A failing sub-agent or
step is a recorded result with its error, the synthesis is told what is missing, and the trace ends complete.
The router records its choice and why.  The extractive backend runs every pattern without a model.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from datetime import datetime

import pytest
from test_document_rag_and_agent import by_subject, stored_trace, stream, trace_documents, triples_store

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.rdf.validation import validate_trace
from trustgraph_base.schema import AgentRequest
from trustgraph_flow.embedded import QUERY_STACK

pytestmark = pytest.mark.timeout(600)

GOALS = ["Who discovered polonium?", "Who discovered radium?", "Where was Marie Curie born?"]


def types_of(by: dict, node: str) -> set:
    return set(by.get(node, {}).get(ns.RDF_TYPE, []))


def parents(by: dict, node: str) -> set:
    return set(by[node].get(ns.PROV_WAS_DERIVED_FROM, []))


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def supervisor_script(goals=GOALS, *, delay: dict | None = None, failing: str = "", calls: list | None = None):
    """Decompose into ``goals``; each sub-agent answers at once, after ``delay[goal]`` seconds (the one asked
    ``failing`` makes the model fail); the synthesis lists what it was given."""
    def script(template_id, terms, messages):
        if calls is not None:
            calls.append(template_id)
        if template_id == "agent-pattern-select":
            return json.dumps({"pattern": "supervisor", "reason": "three independent questions"})
        if template_id == "agent-decompose":
            return "\n".join(json.dumps({"goal": g}) for g in goals)
        if template_id == "agent-react":
            if terms["question"] == failing:
                raise RuntimeError("injected: this sub-agent's model fails")
            time.sleep((delay or {}).get(terms["question"], 0.0))
            return f"Thought: known\nFinal Answer: the answer to {terms['question']}"
        if template_id == "agent-synthesise":
            parts = [f"{r['goal']} -> {r['error'] or r['result']}" for r in terms["results"]]
            missing = [r["goal"] for r in terms["results"] if r["error"]]
            return "; ".join(parts) + (f". Missing: {', '.join(missing)}" if missing else "")
        raise AssertionError(template_id)

    return script


async def ask(deployment, settings, question: str, sid: str, pattern: str, stack=None):
    own = stack is None
    if own:
        stack = await deployment.start(QUERY_STACK, llm="openai", settings=settings)
    try:
        msgs = await stream(stack, "agent", AgentRequest(question=question, user=deployment.user,
                                                         collection=deployment.collection, session_id=sid,
                                                         pattern=pattern))
        stored = await stored_trace(stack, deployment, f"urn:trustgraph:agent:{sid}")
        docs = trace_documents(stack, deployment, stored)
    finally:
        if own:
            await stack.stop()
    return msgs, stored, docs


async def test_supervisor_runs_subagents_in_parallel_and_joins_their_findings(deployment, llm_server, llm_settings):
    # the first sub-goal is the slowest, the last the fastest: their Findings come in the reverse order
    llm_server.set_script(supervisor_script(delay={GOALS[0]: 1.5, GOALS[1]: 1.0, GOALS[2]: 0.5}))
    sid = f"sup-{uuid.uuid4().hex[:8]}"
    root = f"urn:trustgraph:agent:{sid}"
    msgs, stored, docs = await ask(deployment, llm_settings(llm_server),
                                   "Three questions about the Curies", sid, "supervisor")
    assert msgs[-1].end_of_dialog and msgs[-1].error is None, msgs[-1]
    by = by_subject(stored)
    decomposition, synthesis, final = f"{root}/decompose", f"{root}/synthesis", f"{root}/final"
    findings = [f"{root}/finding/{n}" for n in (1, 2, 3)]
    subs = [f"{root}-g{n}" for n in (1, 2, 3)]
    assert ns.TG_DECOMPOSITION in types_of(by, decomposition) and parents(by, decomposition) == {root}
    assert sorted(by[decomposition][ns.TG_SUBAGENT_GOAL]) == sorted(GOALS)
    for n, (finding, sub) in enumerate(zip(findings, subs, strict=True)):
        assert ns.TG_FINDING in types_of(by, finding)
        # each sub-agent is a react run of its own, linked to the Decomposition, and its Finding joins both
        assert ns.TG_AGENT_QUESTION in types_of(by, sub) and parents(by, sub) == {decomposition}
        assert parents(by, finding) == {decomposition, f"{sub}/final"}
        assert docs[finding][0] == f"the answer to {GOALS[n]}"
    assert ns.TG_SYNTHESIS in types_of(by, synthesis) and parents(by, synthesis) == set(findings)
    assert parents(by, final) == {synthesis}
    assert by[final][ns.TG_TERMINATION_REASON] == ["subagents-complete"]
    answer = next(m.content for m in msgs if m.message_type == "answer" and m.content)
    assert docs[by[synthesis][ns.TG_DOCUMENT][0]][0] == answer and "Missing" not in answer
    # the sub-agents overlapped: each started before any of them ended, and the fastest (the third, 0.5 s of
    # model time) ended before the slowest (the first, 1.5 s) was half done
    starts = [when(by[sub][ns.PROV_STARTED_AT_TIME][0]) for sub in subs]
    ends = [when(by[f"{sub}/final"][ns.PROV_GENERATED_AT_TIME][0]) for sub in subs]
    assert max(starts) < min(ends), (starts, ends)
    assert ends[2] < ends[1] < ends[0], ends
    # an explain event per node: each Finding as its sub-agent finished, the Synthesis after all of them
    events = [m.explain_id for m in msgs if m.message_type == "explain"]
    assert events[:2] == [root, decomposition]
    assert [e for e in events if "/finding/" in e] == findings[::-1]  # in completion order
    assert all(events.index(f) < events.index(synthesis) for f in findings)
    assert events[-2:] == [synthesis, final]
    assert {f"{sub}/final" for sub in subs} <= set(events)  # the sub-agents' ends, forwarded
    report = validate_trace(stored)
    assert report.conforms, [v.message for v in report.violations]


async def test_supervisor_with_a_failing_subagent_says_what_is_missing(deployment, llm_server, llm_settings):
    llm_server.set_script(supervisor_script(failing=GOALS[1]))
    sid = f"supf-{uuid.uuid4().hex[:8]}"
    root = f"urn:trustgraph:agent:{sid}"
    msgs, stored, docs = await ask(deployment, llm_settings(llm_server), "Three questions about the Curies",
                                   sid, "supervisor")
    assert msgs[-1].end_of_dialog and msgs[-1].error is None
    by = by_subject(stored)
    failed = f"{root}/finding/2"
    assert "injected" in by[failed][ns.TG_TOOL_ERROR][0]
    assert docs[failed][0].startswith("Error:")
    # the failed sub-agent's trace ends with its Error, which the Finding is derived from
    assert parents(by, failed) == {f"{root}/decompose", f"{root}-g2/error"}
    assert ns.TG_ERROR in types_of(by, f"{root}-g2/error")
    answer = next(m.content for m in msgs if m.message_type == "answer" and m.content)
    assert f"Missing: {GOALS[1]}" in answer
    assert by[f"{root}/final"][ns.TG_TERMINATION_REASON] == ["subagents-complete"]
    assert validate_trace(stored).conforms


def plan_script(order: list, lock: threading.Lock):
    """A three-step plan: 1 and 2 independent, 3 after both; every tool answer is logged in ``order`` as it
    starts and ends."""
    plan = [{"goal": "Who discovered polonium?", "tool": "knowledge-query", "depends_on": []},
            {"goal": "Why is polonium named so?", "tool": "document-query", "depends_on": []},
            {"goal": "When was polonium discovered?", "tool": "knowledge-query", "depends_on": [1, 2]}]

    def log(event):
        with lock:
            order.append(event)

    def script(template_id, terms, messages):
        if template_id == "agent-plan":
            return "\n".join(json.dumps(s) for s in plan)
        if template_id == "kg-edge-selection":
            chosen = [k for k in terms["knowledge"] if "polonium" in (k["s"] + k["o"]).lower()][:2]
            return "\n".join(json.dumps({"id": k["id"], "reasoning": "about polonium"}) for k in chosen)
        if template_id in ("kg-synthesis", "document-prompt"):
            log(("start", terms["query"]))
            time.sleep(0.3)
            log(("end", terms["query"]))
            return f"answer to {terms['query']}"
        if template_id == "agent-synthesise":
            return " ".join(r["result"] for r in terms["results"])
        raise AssertionError(template_id)

    return script


async def test_plan_runs_steps_in_dependency_order(deployment, llm_server, llm_settings):
    order: list = []
    llm_server.set_script(plan_script(order, threading.Lock()))
    sid = f"plan-{uuid.uuid4().hex[:8]}"
    root = f"urn:trustgraph:agent:{sid}"
    msgs, stored, docs = await ask(deployment, llm_settings(llm_server), "Who discovered polonium, why the name, "
                                   "and when?", sid, "plan-then-execute")
    assert msgs[-1].end_of_dialog and msgs[-1].error is None, msgs[-1]
    by = by_subject(stored)
    plan, steps = f"{root}/plan", [f"{root}/step/{n}" for n in (1, 2, 3)]
    assert ns.TG_PLAN in types_of(by, plan) and parents(by, plan) == {root}
    assert sorted(by[plan][ns.TG_PLAN_STEP]) == ["1. Who discovered polonium?", "2. Why is polonium named so?",
                                                 "3. When was polonium discovered?"]
    assert parents(by, steps[0]) == {plan} and parents(by, steps[1]) == {plan}
    assert parents(by, steps[2]) == {plan, steps[0], steps[1]}  # the plan and both steps it depends on
    assert parents(by, f"{root}/synthesis") == set(steps)
    assert docs[steps[2]][0] == "answer to When was polonium discovered?"
    # steps 1 and 2 ran at the same time (both started before either ended), step 3 only after both ended
    started = [m.message_id for m in msgs if m.message_type == "action"]
    ended = [m.message_id for m in msgs if m.message_type == "observation"]
    position = {(m.message_type, m.message_id): k for k, m in enumerate(msgs)
                if m.message_type in ("action", "observation")}
    assert sorted(started) == steps and sorted(ended) == steps
    assert max(position["action", steps[0]], position["action", steps[1]]) < min(
        position["observation", steps[0]], position["observation", steps[1]])
    assert position["action", steps[2]] > max(position["observation", steps[0]], position["observation", steps[1]])
    third = "When was polonium discovered?"
    assert order.index(("start", third)) > max(k for k, (_, q) in enumerate(order) if q != third)
    # each step's tool sub-trace is linked to its step result
    sub_questions = [s for s, p in by.items() if ns.TG_QUERY in p and s != root]
    assert {next(iter(parents(by, q))) for q in sub_questions} == set(steps)
    events = [m.explain_id for m in msgs if m.message_type == "explain" and m.explain_id.startswith(root)]
    assert events.index(steps[2]) > max(events.index(steps[0]), events.index(steps[1]))
    report = validate_trace(stored)
    assert report.conforms, [v.message for v in report.violations]


async def test_router_records_its_choice_and_reason(deployment, llm_server, llm_settings):
    """No pattern: a question of several clauses goes to the model's router (here: supervisor), a one-clause
    question is react by rule; both decisions are recorded with their reason; the Decomposition is derived
    from the Question and the decision, a react run's stages from the Question as ever."""
    calls: list = []
    llm_server.set_script(supervisor_script(calls=calls))
    settings = llm_settings(llm_server)
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=settings)
    try:
        sid, one = f"route-{uuid.uuid4().hex[:8]}", f"route1-{uuid.uuid4().hex[:8]}"
        msgs, stored, _ = await ask(deployment, settings, "Who discovered polonium and who discovered radium?",
                                    sid, "", stack=stack)
        react_msgs, react_trace, _ = await ask(deployment, settings, "Who discovered polonium?", one, "", stack=stack)
    finally:
        await stack.stop()
    root = f"urn:trustgraph:agent:{sid}"
    by = by_subject(stored)
    decision = f"{root}/pattern-decision"
    assert by[decision][ns.TG_PATTERN] == ["supervisor"]
    assert by[decision][ns.TG_REASONING] == ["three independent questions"]
    assert parents(by, f"{root}/decompose") == {root, decision}  # both its inputs
    assert calls.count("agent-pattern-select") == 1  # the one-clause question was routed without the model
    by1 = by_subject(react_trace)
    root1 = f"urn:trustgraph:agent:{one}"
    assert by1[f"{root1}/pattern-decision"][ns.TG_PATTERN] == ["react"]
    assert "one clause" in by1[f"{root1}/pattern-decision"][ns.TG_REASONING][0]
    # react is today's loop: its stages are derived from the Question, the decision recorded beside them
    assert parents(by1, f"{root1}/pattern-decision") == {root1} and parents(by1, f"{root1}/final") == {root1}
    for trace in (stored, react_trace):
        report = validate_trace(trace)
        assert report.conforms, [v.message for v in report.violations]
    assert msgs[-1].error is None and react_msgs[-1].error is None


async def test_unknown_pattern_is_refused(deployment, llm_server, llm_settings):
    llm_server.set_script(supervisor_script())
    sid = f"bad-{uuid.uuid4().hex[:8]}"
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        msgs = await stream(stack, "agent", AgentRequest(question="Who?", user=deployment.user,
                                                         collection=deployment.collection, session_id=sid,
                                                         pattern="swarm"))
        found = triples_store(stack).get_trace(deployment.user, deployment.collection, f"urn:trustgraph:agent:{sid}")
    finally:
        await stack.stop()
    assert [m.message_type for m in msgs] == ["error"] and "unknown agent pattern 'swarm'" in msgs[0].error.message
    assert found is None


@pytest.mark.parametrize("pattern", ["plan-then-execute", "supervisor", ""])
async def test_extractive_backend_runs_every_pattern(deployment, pattern):
    """Without a model: the plan is one step per clause, the decomposition one goal per clause, the router a
    rule; each run ends with an answer from the steps' or sub-agents' results."""
    stack = await deployment.start(QUERY_STACK)
    sid = f"ext-{uuid.uuid4().hex[:8]}"
    root = f"urn:trustgraph:agent:{sid}"
    try:
        msgs, stored, docs = await ask(deployment, {}, "Who discovered polonium and who discovered radium?", sid,
                                       pattern, stack=stack)
    finally:
        await stack.stop()
    assert msgs[-1].end_of_dialog and msgs[-1].error is None, msgs[-1]
    by = by_subject(stored)
    if pattern == "plan-then-execute":
        branches = [f"{root}/step/1", f"{root}/step/2"]
    else:
        branches = [f"{root}/finding/1", f"{root}/finding/2"]
    if not pattern:
        assert by[f"{root}/pattern-decision"][ns.TG_PATTERN] == ["supervisor"]
    assert parents(by, f"{root}/synthesis") == set(branches)
    answer = next(m.content for m in msgs if m.message_type == "answer" and m.content)
    assert "polonium" in answer.lower() and "radium" in answer.lower(), answer
    report = validate_trace(stored)
    assert report.conforms, [v.message for v in report.violations]


async def test_deleting_a_supervisor_trace_leaves_nothing_behind(deployment, llm_server, llm_settings):
    """Deleting the supervisor's trace removes every node of it, of its sub-agents' traces and of their tool
    sub-traces, and every librarian document they stored: the collection's retrieval graph is empty after."""
    from test_answer_store import stores
    from test_trace_retention import admin, retrieval_quads

    from trustgraph_base.provenance.walk import trace_documents as named
    from trustgraph_base.store.errors import NotFound
    from trustgraph_cli.connection import Connection

    def script(template_id, terms, messages):
        if template_id == "agent-react" and not terms.get("history"):
            return f'Thought: ask\nAction: knowledge-query\nArgs: {{"question": "{terms["question"]}"}}'
        if template_id == "agent-react":
            return f"Thought: known\nFinal Answer: {terms['history'][-1]['observation']}"
        if template_id == "kg-edge-selection":
            chosen = [k for k in terms["knowledge"] if "polonium" in (k["s"] + k["o"]).lower()][:2]
            return "\n".join(json.dumps({"id": k["id"], "reasoning": "about polonium"}) for k in chosen)
        if template_id == "kg-synthesis":
            return f"graph answer to {terms['query']}"
        return supervisor_script(GOALS[:2])(template_id, terms, messages)

    llm_server.set_script(script)
    coll = f"sup{uuid.uuid4().hex[:8]}"
    sid = f"del-{uuid.uuid4().hex[:8]}"
    root = f"urn:trustgraph:agent:{sid}"
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        async with Connection.attach(stack, timeout=120) as conn:
            msgs = [m async for m in (await conn.client("agent")).stream(AgentRequest(
                question="Two questions", user=deployment.user, collection=coll, session_id=sid,
                pattern="supervisor"))]
        await stack.wait_idle()
        assert msgs[-1].end_of_dialog and msgs[-1].error is None, msgs[-1]
        triples, librarian = stores(stack)

        async def q(patterns):
            return [x for r in triples.query_many(deployment.user, coll, patterns) for x in r]

        from trustgraph_base.provenance.walk import collect_trace

        trace = await collect_trace(q, root)
        documents = set(named(trace))
        by = by_subject(trace)
        tool_questions = [s for s in by if s.startswith("urn:trustgraph:question:")]
        assert len(tool_questions) == 2 and {f"{root}-g1", f"{root}-g2"} <= set(by)
        assert {f"{root}/finding/1", f"{root}-g1/answer", f"{root}-g1/i1/observation"} <= documents
        r = await admin(stack, operation="delete", user=deployment.user, collection=coll, uri=root)
        assert r.skipped_documents == 0 and r.documents >= len(documents), r
        assert retrieval_quads(stack, deployment, coll) == set()
        left = []
        for doc in documents:
            try:
                librarian.get_metadata(deployment.user, coll, doc)
                left.append(doc)
            except NotFound:
                pass
        assert left == []
        await stack.wait_idle()
    finally:
        await stack.stop()


async def test_cancelling_a_plan_run_cancels_every_running_step(deployment, llm_server, llm_settings):
    """Two independent steps are running when the run is cancelled: both tool calls are cancelled with it (and
    the dependent third step never starts)."""
    release = threading.Event()
    plan = [{"goal": "Who discovered polonium?", "tool": "knowledge-query", "depends_on": []},
            {"goal": "Why is polonium named so?", "tool": "document-query", "depends_on": []},
            {"goal": "When?", "tool": "knowledge-query", "depends_on": [1, 2]}]

    def script(template_id, terms, messages):
        if template_id == "agent-plan":
            return "\n".join(json.dumps(s) for s in plan)
        if template_id == "kg-edge-selection":
            return ""
        release.wait(60)  # every answer waits until the test is over
        return "too late"

    llm_server.set_script(script)
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        orchestrator = stack.get("agent-manager-react").orchestrator
        ports = orchestrator.ports
        real_run_tool = ports.run_tool
        started, cancelled = [], []

        async def observed_run_tool(tool, query, *args):  # records what happens to each tool call
            started.append(query)
            try:
                return await real_run_tool(tool, query, *args)
            except asyncio.CancelledError:
                cancelled.append(query)
                raise

        ports.run_tool = observed_run_tool
        sent: list = []

        async def emit(message):
            sent.append(message)

        run = asyncio.create_task(orchestrator.run(AgentRequest(
            question="Three steps", user=deployment.user, collection=deployment.collection,
            session_id=f"cancel-{uuid.uuid4().hex[:8]}", pattern="plan-then-execute"), emit))
        deadline = time.monotonic() + 60
        while len(started) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert sorted(started) == sorted(s["goal"] for s in plan[:2]), started
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        deadline = time.monotonic() + 10
        while len(cancelled) < len(started) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # each step task is told at once and stops at its next wait
        assert sorted(cancelled) == sorted(started) and "When?" not in started
        assert not [m for m in sent if m.message_type == "answer"]
    finally:
        release.set()
        await stack.stop()


async def test_a_failing_step_is_recorded_its_dependant_is_not_run_and_an_unusable_plan_is_an_error(
        deployment, llm_server, llm_settings):
    """Step 1's tool fails (its model answers nothing): its StepResult carries the error, step 2 (which depends on
    it) is recorded as not run, step 3 runs, and the synthesis is told what is missing; the trace is complete.
    A plan naming an unknown tool fails the run: an Error derived from the Question, no Plan stored."""
    plans = iter([
        [{"goal": "Who discovered polonium?", "tool": "knowledge-query", "depends_on": []},
         {"goal": "When was that?", "tool": "knowledge-query", "depends_on": [1]},
         {"goal": "Why is polonium named so?", "tool": "document-query", "depends_on": []}],
        [{"goal": "Who?", "tool": "crystal-ball", "depends_on": []}]])
    seen: dict = {}

    def script(template_id, terms, messages):
        if template_id == "agent-plan":
            return "\n".join(json.dumps(s) for s in next(plans))
        if template_id == "kg-edge-selection":
            chosen = [k for k in terms["knowledge"] if "polonium" in (k["s"] + k["o"]).lower()][:2]
            return "\n".join(json.dumps({"id": k["id"], "reasoning": "about polonium"}) for k in chosen)
        if template_id == "kg-synthesis":
            return "  "  # an empty answer: the knowledge-query tool fails
        if template_id == "document-prompt":
            return "Polonium is named after Poland."
        if template_id == "agent-synthesise":
            seen["results"] = terms["results"]
            return "Polonium is named after Poland; who discovered it is missing."
        raise AssertionError(template_id)

    llm_server.set_script(script)
    settings = llm_settings(llm_server)
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=settings)
    try:
        sid, bad = f"stepf-{uuid.uuid4().hex[:8]}", f"badplan-{uuid.uuid4().hex[:8]}"
        msgs, stored, docs = await ask(deployment, settings, "Three things", sid, "plan-then-execute", stack=stack)
        bad_msgs, bad_trace, _ = await ask(deployment, settings, "Who?", bad, "plan-then-execute", stack=stack)
    finally:
        await stack.stop()
    root = f"urn:trustgraph:agent:{sid}"
    assert msgs[-1].end_of_dialog and msgs[-1].error is None
    by = by_subject(stored)
    assert "no answer" in by[f"{root}/step/1"][ns.TG_TOOL_ERROR][0]
    assert by[f"{root}/step/2"][ns.TG_TOOL_ERROR] == ["not run: step 1 it depends on failed"]
    assert ns.TG_TOOL_ERROR not in by[f"{root}/step/3"]
    assert [bool(r["error"]) for r in seen["results"]] == [True, True, False]
    assert by[f"{root}/final"][ns.TG_TERMINATION_REASON] == ["plan-complete"]
    assert validate_trace(stored).conforms
    bad_root = f"urn:trustgraph:agent:{bad}"
    assert bad_msgs[-1].error is not None and "crystal-ball" in bad_msgs[-1].error.message
    bad_by = by_subject(bad_trace)
    assert bad_by[f"{bad_root}/error"][ns.PROV_WAS_DERIVED_FROM] == [bad_root]
    assert bad_by[f"{bad_root}/error"][ns.TG_STAGE] == ["plan"] and f"{bad_root}/plan" not in bad_by
    report = validate_trace(bad_trace)
    assert report.conforms, [v.message for v in report.violations]


async def test_cancelling_a_supervisor_run_stops_its_subagents(deployment, llm_server, llm_settings):
    """The supervisor is cancelled while its three sub-agents wait on a slow model: it broadcasts an
    ``agent-cancel`` notice, the replicas running them stop them (no model request of theirs follows), and each
    sub-agent's trace ends complete with an Error saying its supervisor cancelled it.  A notice for the same
    sessions of another user, or of another collection, stops nothing.  On Pulsar a second agent replica (another
    embedded group on the same bus) takes sub-agents too."""
    from trustgraph_base.schema import AgentCancel
    from trustgraph_flow.agent.patterns.orchestrator import CANCELLED_BY_SUPERVISOR
    from trustgraph_flow.embedded import start_embedded

    def script(template_id, terms, messages):
        if template_id == "agent-decompose":
            return "\n".join(json.dumps({"goal": g}) for g in GOALS)
        if template_id == "agent-react":  # never done: each sub-agent would go on with a tool call
            return f'Thought: look it up\nAction: knowledge-query\nArgs: {json.dumps({"question": terms["question"]})}'
        return ""

    llm_server.set_script(script)
    llm_server.set_latency(4000)  # every model answer takes 4 s
    settings = llm_settings(llm_server)
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=settings)
    replica = None
    try:
        if deployment.kind == "distributed":
            replica = await start_embedded(only=("agent-manager-react",), llm="openai", settings=settings,
                                           backend=deployment.backend(), flow=stack.flow, **deployment.store_kwargs())
        service = stack.get("agent-manager-react")
        replicas = [service] + ([replica.get("agent-manager-react")] if replica is not None else [])

        def runs() -> set:
            """The runs every agent replica is handling."""
            return {key for r in replicas for key in r.running}
        sid = f"supc-{uuid.uuid4().hex[:8]}"
        root = f"urn:trustgraph:agent:{sid}"
        subs = [f"{sid}-g{n}" for n in (1, 2, 3)]
        sent: list = []

        async def emit(message):
            sent.append(message)

        run = asyncio.create_task(service.orchestrator.run(AgentRequest(
            question="Three questions about the Curies", user=deployment.user, collection=deployment.collection,
            session_id=sid, pattern="supervisor"), emit))
        deadline = time.monotonic() + 60
        while llm_server.template_ids().count("agent-react") < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert llm_server.template_ids().count("agent-react") == 3, llm_server.template_ids()
        running = {(deployment.user, deployment.collection, s) for s in subs}
        assert running <= runs()  # every sub-agent is a run of one of the agent replicas

        # notices for the same session ids of another user and of another collection stop nothing
        for user, collection in (("someone-else", deployment.collection), (deployment.user, "another")):
            await service.producer("cancel").send(AgentCancel(user=user, collection=collection,
                                                              session_ids=subs, reason="not yours"))
        await asyncio.sleep(1.0)
        assert running <= runs() and not run.done()

        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        requests_at_cancel = len(llm_server.chat_requests())
        deadline = time.monotonic() + 10
        while running & runs() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not running & runs(), "a sub-agent is still running"
        # each sub-agent's model call in flight ends (4 s); none of them asks the model anything more
        await asyncio.sleep(6.0)
        assert llm_server.template_ids()[requests_at_cancel:] == []
        assert not [m for m in sent if m.message_type == "answer"]

        for s in subs:
            stored = await stored_trace(stack, deployment, f"urn:trustgraph:agent:{s}")
            by = by_subject(stored)
            error = f"urn:trustgraph:agent:{s}/error"
            assert ns.TG_ERROR in types_of(by, error), sorted(by)
            assert by[error][ns.TG_ERROR_MESSAGE] == [CANCELLED_BY_SUPERVISOR]
            assert parents(by, error) == {f"urn:trustgraph:agent:{s}"}
            assert parents(by, f"urn:trustgraph:agent:{s}") == {f"{root}/decompose"}
            assert validate_trace(stored).conforms
    finally:
        llm_server.set_latency(0)
        if replica is not None:
            await replica.stop()
        await stack.stop()


async def test_a_subagent_request_taken_after_its_cancel_notice_is_refused(deployment, llm_server, llm_settings):
    """A notice can come before any replica took the sub-agent's request (it waits on the bus): the request is
    refused when taken, with the notice's reason, and asks the model nothing."""
    from trustgraph_base.schema import AgentCancel
    from trustgraph_flow.agent.patterns.orchestrator import CANCELLED_BY_SUPERVISOR

    llm_server.set_script(supervisor_script())
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        service = stack.get("agent-manager-react")
        sid = f"supq-{uuid.uuid4().hex[:8]}-g1"
        key = (deployment.user, deployment.collection, sid)
        await service.producer("cancel").send(AgentCancel(user=deployment.user, collection=deployment.collection,
                                                          session_ids=[sid], reason=CANCELLED_BY_SUPERVISOR))
        deadline = time.monotonic() + 10
        while key not in service.stopped and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert key in service.stopped
        msgs = await stream(stack, "agent", AgentRequest(question=GOALS[0], user=deployment.user,
                                                         collection=deployment.collection, session_id=sid,
                                                         pattern="react"))
        assert msgs[-1].end_of_dialog and msgs[-1].error is not None
        assert msgs[-1].error.message == CANCELLED_BY_SUPERVISOR
        assert llm_server.template_ids() == [] and key not in service.stopped
        assert await stored_trace(stack, deployment, f"urn:trustgraph:agent:{sid}") == []
    finally:
        await stack.stop()
