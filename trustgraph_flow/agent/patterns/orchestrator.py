"""The agent orchestrator: react, plan-then-execute and supervisor runs, and the router that picks one.

``react`` is the ReAct loop of :mod:`..react.agent`, unchanged.  ``plan-then-execute``: the model writes a plan
(``agent-plan``), every step runs its tool as soon as the steps it depends on are done (independent steps at
the same time), and ``agent-synthesise`` answers from the step results.  ``supervisor``: the model splits the
question into sub-goals (``agent-decompose``); one sub-agent per goal runs at the same time, each a separate
``react`` agent request (over Pulsar any agent replica may take it; embedded, a concurrent task of the
in-process bus) with its own session linked to the Decomposition; their answers become Findings and
``agent-synthesise`` joins them.  No pattern given: the router chooses (a one-clause question is ``react`` by
rule; otherwise ``agent-pattern-select``) and records the choice and its reason as a PatternDecision.

A failed step or sub-agent is a recorded result carrying its error (``tg:toolError``), a step that depends on
it is not run (its result says why), and the synthesis is told what is missing; the run still ends with a
Synthesis and a Conclusion.  A cancelled run cancels every branch with it; a supervisor's sub-agents, which
may run on any replica, are stopped by an ``agent-cancel`` broadcast (each sub-agent's trace ends with an Error).
The trace is a DAG (docs/trace-model.md): every node is derived from each of its inputs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from trustgraph_base.provenance import uris
from trustgraph_base.provenance.agent import agent_final_triples
from trustgraph_base.provenance.agent_patterns import (
    decomposition_triples,
    finding_triples,
    pattern_decision_triples,
    pattern_synthesis_triples,
    plan_triples,
    step_result_triples,
)
from trustgraph_base.provenance.triples import LlmUsage
from trustgraph_base.schema import AgentRequest, AgentResponse, Error, Triple
from trustgraph_base.store.triples import check_names
from trustgraph_flow.model.extractive.pattern_policy import clauses

from ...common.query_session import NO_ANSWER_ERROR, QuerySession, check_question
from ..react.agent import Emit, ReactAgent, _failed
from ..react.tools import Tool
from .replies import PATTERNS, PlanStep, parse_goals, parse_pattern_choice, parse_plan

log = logging.getLogger(__name__)

PATTERN_DESCRIPTIONS = {
    "react": "one line of reasoning with tool calls, for a single question",
    "plan-then-execute": "a plan of steps where later steps need the results of earlier ones",
    "supervisor": "independent sub-questions researched in parallel by sub-agents, then joined",
}


class SubagentPorts(Protocol):
    def run_subagent(self, request: AgentRequest) -> AsyncIterator[AgentResponse]: ...

    async def cancel_subagents(self, user: str, collection: str, session_ids: list[str], reason: str) -> None: ...


#: The Error a sub-agent records when its supervisor's run is cancelled or fails.
CANCELLED_BY_SUPERVISOR = "cancelled by its supervisor"


@dataclass
class BranchResult:
    """What one plan step or sub-agent produced: its text, or the error it failed with."""

    goal: str
    uri: str
    text: str = ""
    error: str = ""

    def as_term(self) -> dict:
        return {"goal": self.goal, "result": self.text, "error": self.error}


class AgentOrchestrator:
    """Runs each request with its pattern (or the router's choice).

    :param react: the ReAct agent (its ports, tools and settings are the orchestrator's too); its ports also
        ``run_subagent(request)`` → the response stream of an agent request sent over the bus.
    """

    def __init__(self, react: ReactAgent):
        self.react = react
        self.ports = react.ports

    async def run(self, req: AgentRequest, emit: Emit) -> None:
        """Answer ``req`` with its pattern; an unknown pattern is an error reply before anything is stored."""
        if req.pattern == "react":
            await self.react.run(req, emit)
            return
        if req.pattern and req.pattern not in PATTERNS:
            message = f"unknown agent pattern {req.pattern[:40]!r}; use one of {', '.join(PATTERNS)} (or none)"
            await emit(AgentResponse(message_type="error", content=message, error=Error("agent-error", message),
                                     end_of_message=True, end_of_dialog=True))
            return
        s = self.react.settings
        tools = [t for t in self.react.tools.values() if not req.group or t.name in req.group]
        check_names(req.user, req.collection)
        explain = bool(req.session_id)
        session = QuerySession(self.ports, emit, response=AgentResponse, user=req.user,
                               collection=s.explain_collection or req.collection,
                               question_uri=uris.agent_session_uri(req.session_id) if explain else "",
                               explainable=explain, subject=f"agent session {req.session_id or '-'}",
                               failure=_failed, queue_events=False)
        await session.run(lambda: self._orchestrate(req, session, tools, req.max_iterations or s.max_iterations))

    def _uri(self, req: AgentRequest, session: QuerySession, stage: str, index: int | None = None) -> str:
        return uris.agent_pattern_uri(req.session_id, stage, index) if session.explainable else ""

    async def _orchestrate(self, req: AgentRequest, session: QuerySession, tools: list[Tool], max_iter: int) -> None:
        check_question(req.question, "question")
        if not tools:
            raise ValueError(f"no tools available (group {req.group!r} matches none)")
        if session.explainable:
            await self.react._claim(req, session)
        inputs = [session.question_uri] if session.explainable else []  # what the first node is derived from
        pattern = req.pattern
        if not pattern:
            session.stage = "pattern-decision"
            pattern, reason, usage = await self._route(req)
            _note(session, AgentResponse(message_type="thought", content=f"Pattern {pattern}: {reason}",
                                         end_of_message=True))
            if session.explainable:
                decision = self._uri(req, session, "pattern-decision")
                await session.explain(decision, pattern_decision_triples(decision, session.question_uri, pattern,
                                                                         reason, usage=usage))
                inputs.append(decision)
        # plan and supervisor runs send their explain events and progress messages in the background, in order
        # (a react run sends each before it goes on, as it always did)
        session.queue_events = pattern != "react"
        if pattern == "react":
            # today's loop, unchanged: its first Analysis is derived from the Question, the decision beside it
            await self.react._dialog(req, session, tools, list(req.history), max_iter,
                                     start=session.question_uri if session.explainable else "")
        elif pattern == "plan-then-execute":
            await self._plan(req, session, tools, inputs)
        else:
            await self._supervise(req, session, inputs, max_iter)

    async def _route(self, req: AgentRequest) -> tuple[str, str, LlmUsage | None]:
        """The pattern for ``req`` and why; a one-clause question is ``react`` without asking the model."""
        if len(clauses(req.question)) == 1:
            return "react", "the question is one clause: a single line of reasoning answers it", None
        outcome = await self.ports.prompt("agent-pattern-select", {
            "question": req.question,
            "patterns": [{"name": p, "description": d} for p, d in PATTERN_DESCRIPTIONS.items()]})
        pattern, reason = parse_pattern_choice(outcome.text)
        return pattern, reason, LlmUsage(outcome.in_token, outcome.out_token, outcome.model)

    # ------------------------------------------------------------ plan-then-execute
    async def _plan(self, req: AgentRequest, session: QuerySession, tools: list[Tool], inputs: list[str]) -> None:
        session.stage = "plan"
        outcome = await self.ports.prompt("agent-plan", {"question": req.question,
                                                         "tools": [t.as_prompt_term() for t in tools]})
        steps = parse_plan(outcome.text, {t.name for t in tools})
        plan_uri = self._uri(req, session, "plan")
        _note(session, AgentResponse(message_type="thought", content="Plan:\n" + "\n".join(
            f"{s.number}. {s.goal} [{s.tool}]" + (f" after {', '.join(map(str, s.depends_on))}" if s.depends_on
                                                  else "") for s in steps), end_of_message=True))
        if session.explainable:
            await session.explain(plan_uri, plan_triples(plan_uri, inputs, [s.goal for s in steps],
                                                         usage=LlmUsage(outcome.in_token, outcome.out_token,
                                                                        outcome.model)))
        session.stage = "step"
        by_name = {t.name: t for t in tools}
        tasks: dict[int, asyncio.Task[BranchResult]] = {}
        #: each step's result, set as soon as its tool answered (and the client was told): a step that depends
        #: on it starts then, while its StepResult is still being recorded
        done: dict[int, asyncio.Future[BranchResult]] = {
            s.number: asyncio.get_running_loop().create_future() for s in steps}

        async def run_step(step: PlanStep) -> BranchResult:
            deps = [await asyncio.shield(done[d]) for d in step.depends_on]
            uri = self._uri(req, session, "step", step.number)
            result = BranchResult(step.goal, uri)
            failed = [str(d) for d, r in zip(step.depends_on, deps, strict=True) if r.error]
            if failed:
                result.error = f"not run: step {', '.join(failed)} it depends on failed"
            else:
                _note(session, AgentResponse(message_type="action", content=json.dumps(
                    {"step": step.number, "action": step.tool, "arguments": {"question": step.goal}},
                    ensure_ascii=False), end_of_message=True, message_id=uri))
                outcome = await self.ports.run_tool(by_name[step.tool], step.goal, req, uri, session.collection,
                                                    self._forward(session))
                result.text, result.error = outcome.text, outcome.error
            text = result.text if not result.error else f"Error: {result.error}"
            _note(session, AgentResponse(message_type="observation", content=text, end_of_message=True,
                                         message_id=uri))
            done[step.number].set_result(result)
            if session.explainable:
                await session.explain(uri, step_result_triples(
                    uri, plan_uri, [tasks_uri[d] for d in step.depends_on], step.number, step.goal, step.tool,
                    tool_error=result.error), answer=(uri, text))
            return result

        tasks_uri = {s.number: self._uri(req, session, "step", s.number) for s in steps}
        for step in steps:
            tasks[step.number] = asyncio.ensure_future(run_step(step))
        results = await _all(list(tasks.values()))
        await self._synthesise(req, session, results, "plan-complete")

    # ------------------------------------------------------------ supervisor
    async def _supervise(self, req: AgentRequest, session: QuerySession, inputs: list[str], max_iter: int) -> None:
        session.stage = "decomposition"
        outcome = await self.ports.prompt("agent-decompose", {"question": req.question})
        goals = parse_goals(outcome.text)
        decomposition = self._uri(req, session, "decomposition")
        _note(session, AgentResponse(message_type="thought", content="Sub-goals:\n" + "\n".join(
            f"{n}. {g}" for n, g in enumerate(goals, 1)), end_of_message=True))
        if session.explainable:
            await session.explain(decomposition, decomposition_triples(
                decomposition, inputs, goals, usage=LlmUsage(outcome.in_token, outcome.out_token, outcome.model)))
        session.stage = "finding"

        async def run_goal(n: int, goal: str) -> BranchResult:
            uri = self._uri(req, session, "finding", n)
            sub_sid = f"{req.session_id}-g{n}" if session.explainable else ""
            sub = AgentRequest(question=goal, state=req.state, group=list(req.group), user=req.user,
                               collection=req.collection, session_id=sub_sid, max_iterations=max_iter,
                               pattern="react", parent_uri=decomposition)
            result, last_stage = BranchResult(goal, uri), ""
            ends = uris.final_stage_uris(uris.agent_session_uri(sub_sid)) if sub_sid else ("", "")
            try:
                async for msg in self.ports.run_subagent(sub):
                    if msg.message_type == "explain":
                        if msg.explain_id in ends:
                            last_stage = msg.explain_id
                        if msg.explain_id in ends or msg.explain_id == uris.agent_session_uri(sub_sid):
                            await session.show(msg.explain_id, msg.explain_triples)  # the link and the end
                    elif msg.message_type == "answer" and msg.content:
                        result.text = msg.content
                    if msg.error is not None:
                        result.error = msg.error.message or msg.error.type
            except Exception as e:  # noqa: BLE001 - a failed sub-agent is a finding that says so
                result.error = str(e) or type(e).__name__
            if not result.error and not result.text.strip():
                result.error = "the sub-agent gave no answer"
            text = result.text if not result.error else f"Error: {result.error}"
            _note(session, AgentResponse(message_type="observation", content=text, end_of_message=True,
                                         message_id=uri))
            if session.explainable:
                await session.explain(uri, finding_triples(uri, decomposition, last_stage, n, goal,
                                                           error=result.error), answer=(uri, text))
            return result

        branches = [asyncio.ensure_future(run_goal(n, g)) for n, g in enumerate(goals, 1)]
        try:
            results = await _all(branches)
        except BaseException:
            # a sub-agent request runs wherever a replica took it: tell every replica to stop those still running
            running = [f"{req.session_id}-g{n}" for n, b in enumerate(branches, 1) if not b.done() or b.cancelled()]
            if session.explainable and running:
                try:
                    await self.ports.cancel_subagents(req.user, req.collection, running, CANCELLED_BY_SUPERVISOR)
                except Exception as e:  # noqa: BLE001 - the run's own failure or cancellation goes on
                    log.error("could not cancel the sub-agents of agent session %s: %s", req.session_id, e)
            raise
        await self._synthesise(req, session, results, "subagents-complete")

    # ------------------------------------------------------------ the end
    async def _synthesise(self, req: AgentRequest, session: QuerySession, results: list[BranchResult],
                          termination: str) -> None:
        session.stage = "synthesis"
        outcome = await self.ports.prompt("agent-synthesise", {"question": req.question,
                                                               "results": [r.as_term() for r in results]})
        answer = outcome.text.strip()
        if not answer:
            raise ValueError(NO_ANSWER_ERROR)
        if session.explainable:
            synthesis = self._uri(req, session, "synthesis")
            document = uris.agent_answer_uri(req.session_id)
            await session.explain(synthesis, pattern_synthesis_triples(
                synthesis, [r.uri for r in results], document,
                usage=LlmUsage(outcome.in_token, outcome.out_token, outcome.model)), answer=(document, answer))
        await session.send(AgentResponse(message_type="answer", content=answer, end_of_message=True))
        if session.explainable:
            final = uris.agent_final_uri(req.session_id)
            await session.explain(final, agent_final_triples(final, synthesis, document,
                                                             termination_reason=termination))
        await session.close(AgentResponse(message_type="answer", content="", end_of_message=True, end_of_dialog=True))

    def _forward(self, session: QuerySession):
        async def forward(uri: str, triples: list[Triple]) -> None:
            sub = uris.parse_trace_uri(uri)
            if sub is not None and sub.stage == "question" and sub.kind in ("graphrag", "docrag"):
                await session.show(uri, triples)

        return forward


def _note(session: QuerySession, message: AgentResponse) -> None:
    """Send a progress message (thought, action, observation) after everything before it, without waiting: the
    run depends on none of them; a failed send fails the run at its next awaited message (the answer)."""
    session.stream.send_soon(message)


async def _all(tasks: Sequence[asyncio.Future[BranchResult]]) -> list[BranchResult]:
    """Every branch's result; when the run fails or is cancelled, every branch still running is cancelled."""
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
