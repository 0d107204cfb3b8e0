"""The ReAct loop with provenance, against abstract ports.

Each iteration: prompt ``agent-react`` → parse (a parse failure becomes an observation the
agent can recover from) → run the tool → observation.  When ``session_id`` is set, the trace
is Question ← Analysis 1 ← Observation 1 ← Analysis 2 ← ... ← Conclusion (docs/trace-model.md):
each Analysis (the action) and its Thought are emitted and stored as soon as the model chose the
action, each Observation as soon as the tool answered.  The texts of
thoughts, observations and the final answer are librarian documents, each stored before the
stage that names it (as the RAG services store their answers).  A ``knowledge-query`` or
``document-query`` tool call passes its Analysis URI as ``parent_uri`` to the sub-query, whose
Question records it with ``prov:wasDerivedFrom``, and asks for the sub-trace to be stored in the
agent's own explain collection, so one trace leads to the other.

The session id is the client's choice, and it names one run: the Question is stored through a
trace claim, which fails when a trace with that URI is already stored, before anything else is
stored or sent (:class:`SessionInUse`).  A run that fails after its Question was stored ends its
trace with an Error derived from the last stored stage.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from trustgraph_base import telemetry
from trustgraph_base.provenance import uris
from trustgraph_base.provenance.agent import (
    agent_final_triples,
    agent_iteration_triples,
    agent_observation_triples,
    agent_session_triples,
    agent_thought_triples,
)
from trustgraph_base.provenance.triples import LlmUsage
from trustgraph_base.schema import AgentRequest, AgentResponse, AgentStep, Error, Triple
from trustgraph_base.store.triples import check_names

from ...common.query_session import QuerySession, TraceFields, check_question
from .parser import FinalAnswer, ReactParseError, parse_react
from .tools import DEFAULT_TOOLS, Tool

Emit = Callable[[AgentResponse], Awaitable[None]]


class SessionInUse(ValueError):
    """The request's session id already names a stored run (another request's trace)."""

    error_type = "session-in-use"

    def __init__(self, session_id: str, session_uri: str, collection: str):
        super().__init__(f"session id {session_id!r} already names another run ({session_uri} in collection "
                         f"{collection!r}); use a new session id")


@dataclass
class ToolOutcome:
    text: str
    error: str = ""


@dataclass
class AgentSettings:
    max_iterations: int = 8
    explain_collection: str = ""


class ReactAgent:
    """Runs the ReAct loop.

    :param ports: ``prompt(template, terms)`` → outcome with ``.text``/``.model``;
        ``run_tool(tool, query, request, parent_uri, explain_collection, on_explain)`` → ToolOutcome;
        ``claim_trace(user, collection, triples)`` → whether the Question was stored as a new trace;
        ``store_explain(user, collection, uri, triples)``; ``store_answer(...)`` for the texts the trace names.
    """

    def __init__(self, ports, tools: tuple[Tool, ...] = DEFAULT_TOOLS, settings: AgentSettings | None = None):
        self.ports = ports
        self.tools = {t.name: t for t in tools}
        self.settings = settings or AgentSettings()

    async def run(self, req: AgentRequest, emit: Emit) -> None:
        s = self.settings
        tools = [t for t in self.tools.values() if not req.group or t.name in req.group]
        check_names(req.user, req.collection)  # before anything is stored or any tool runs
        explain = bool(req.session_id)
        session = QuerySession(self.ports, emit, response=AgentResponse, user=req.user,
                               collection=s.explain_collection or req.collection,
                               question_uri=uris.agent_session_uri(req.session_id) if explain else "",  # checks the id
                               explainable=explain, subject=f"agent session {req.session_id or '-'}",
                               failure=_failed, queue_events=False)
        await session.run(lambda: self._dialog(req, session, tools, list(req.history),
                                               req.max_iterations or s.max_iterations))

    async def _dialog(self, req: AgentRequest, session: QuerySession, tools: list[Tool], history: list[AgentStep],
                      max_iter: int, start: str = "") -> None:
        """The loop; ``start``: the stage the first Analysis is derived from when the run's Question is already
        claimed (the router's PatternDecision), else the Question is claimed here."""
        if not start:
            check_question(req.question, "question")
            if not tools:
                raise ValueError(f"no tools available (group {req.group!r} matches none)")
            if session.explainable:
                await self._claim(req, session)
        session.stage = "analysis"
        parent = start or session.question_uri  # the step the next one is derived from
        for n in range(len(history) + 1, max_iter + 1):
            final, usage = await self._iteration(req, session, tools, history, n, parent)
            if final is not None:
                session.stage = "conclusion"
                if final.thought:
                    await session.send(AgentResponse(message_type="thought", content=final.thought,
                                                     end_of_message=True))
                await self._conclude(req, session, parent, final.answer, usage=usage)
                return
            if session.explainable:
                parent = uris.agent_observation_uri(req.session_id, n)
        session.stage = "conclusion"
        await self._conclude(req, session, parent, self._give_up(history, max_iter), termination="max-iterations")

    async def _claim(self, req: AgentRequest, session: QuerySession) -> None:
        """Store the Question as a new trace, or refuse the run: its session id names another one."""
        if session.explainable:
            telemetry.set_explain_id(session.question_uri)
        triples = agent_session_triples(session.question_uri, req.question, otel_trace_id=telemetry.current_trace_id(),
                                        parent_uri=req.parent_uri)

        async def claim() -> None:
            if not await self.ports.claim_trace(req.user, session.collection, triples):
                raise SessionInUse(req.session_id, session.question_uri, session.collection)

        await session.claim(session.question_uri, triples, claim)

    async def _iteration(self, req: AgentRequest, session: QuerySession, tools: list[Tool], history: list[AgentStep],
                         n: int, parent: str) -> tuple[FinalAnswer | None, LlmUsage]:
        """Iteration ``n``: prompt, parse, record the Analysis, act, record the Observation; the final answer if the
        model gave one, and the usage of the model call."""
        tool_error = ""
        outcome = await self.ports.prompt("agent-react", {
            "question": req.question, "tools": [t.as_prompt_term() for t in tools],
            "history": [{"thought": h.thought, "action": h.action, "arguments": h.arguments,
                         "observation": h.observation} for h in history]})
        usage = LlmUsage(outcome.in_token, outcome.out_token, outcome.model)
        try:
            step = parse_react(outcome.text)
        except ReactParseError as e:
            step = None
            thought, action, arguments = "", "parse-error", {}
            observation = (f"Your reply could not be parsed: {e}. Reply with Thought/Action/Args "
                           f"or Thought/Final Answer.")
            tool_error = str(e)
        if isinstance(step, FinalAnswer):
            return step, usage
        it_uri = uris.agent_iteration_uri(req.session_id, n) if session.explainable else ""
        if step is not None:
            thought, action, arguments = step.thought, step.action, dict(step.arguments)
            await session.send(AgentResponse(message_type="thought", content=thought, end_of_message=True,
                                             message_id=it_uri))
            await session.send(AgentResponse(message_type="action", content=json.dumps(
                {"action": action, "arguments": arguments}, ensure_ascii=False), end_of_message=True,
                message_id=it_uri))
        if session.explainable:
            thought_uri = uris.agent_thought_uri(req.session_id, n) if thought else ""
            await session.explain(it_uri, agent_iteration_triples(it_uri, parent, action, arguments,
                                                                  thought_uri=thought_uri, usage=usage))
            if thought_uri:
                await session.explain(thought_uri, agent_thought_triples(thought_uri, it_uri),
                                      answer=(thought_uri, thought))
        if step is not None:
            observation, tool_error = await self._act(req, session, tools, action, arguments, it_uri)
        await session.send(AgentResponse(message_type="observation", content=observation, end_of_message=True,
                                         message_id=it_uri))
        history.append(AgentStep(thought=thought, action=action, arguments={k: str(v) for k, v in arguments.items()},
                                 observation=observation))
        if session.explainable:
            obs_uri = uris.agent_observation_uri(req.session_id, n)
            await session.explain(obs_uri, agent_observation_triples(obs_uri, it_uri, tool_error=tool_error),
                                  answer=(obs_uri, observation))
        return None, usage

    async def _act(self, req: AgentRequest, session: QuerySession, tools: list[Tool], action: str, arguments: dict,
                   it_uri: str) -> tuple[str, str]:
        """Run the tool the model chose: its observation and tool error (``""``: none)."""
        tool = self.tools.get(action) if action in {t.name for t in tools} else None
        if tool is None:
            observation = f"Unknown tool {action!r}. Available tools: {', '.join(t.name for t in tools)}."
            return observation, observation

        async def forward_sub_explain(uri: str, triples: list[Triple]) -> None:
            # Let the client see the sub-trace's question (the link target) as it happens.
            sub = uris.parse_trace_uri(uri)
            if sub is not None and sub.stage == "question" and sub.kind in ("graphrag", "docrag"):
                await session.show(uri, triples)

        query = str(arguments.get(tool.argument) or arguments.get("question") or
                    next(iter(arguments.values()), "") or req.question)
        result = await self.ports.run_tool(tool, query, req, it_uri, session.collection, forward_sub_explain)
        return result.text, result.error

    @staticmethod
    def _give_up(history: list[AgentStep], max_iter: int) -> str:
        useful = [h.observation for h in history if h.observation and not h.observation.startswith(
            ("Unknown tool", "Your reply could not", "Error"))]
        base = f"I stopped after {max_iter} steps without reaching a final answer."
        return base + (f" The last useful observation was: {useful[-1]}" if useful else "")

    async def _conclude(self, req: AgentRequest, session: QuerySession, parent: str, answer: str,
                        termination: str = "", usage: LlmUsage | None = None) -> None:
        await session.send(AgentResponse(message_type="answer", content=answer, end_of_message=True))
        if session.explainable:
            final_uri, doc_uri = uris.agent_final_uri(req.session_id), uris.agent_answer_uri(req.session_id)
            await session.explain(final_uri, agent_final_triples(final_uri, parent or session.question_uri, doc_uri,
                                                                 termination_reason=termination, usage=usage),
                                  answer=(doc_uri, answer))
        await session.close(AgentResponse(message_type="answer", content="", end_of_message=True, end_of_dialog=True))


def _failed(error: Exception, message: str, trace: TraceFields) -> AgentResponse:
    """The last message of a failed run; its type is the failure's own (``session-in-use``) or ``agent-error``."""
    return AgentResponse(message_type="error", content=message,
                         error=Error(getattr(error, "error_type", "agent-error"), message),
                         end_of_message=True, end_of_dialog=True)
