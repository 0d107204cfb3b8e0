"""The ReAct loop with provenance, against abstract ports.

Each iteration: prompt ``agent-react`` → parse (a parse failure becomes an observation the
agent can recover from) → run the tool → observation.  When ``session_id`` is set, the trace
is Question → Analysis 1 → ... → Conclusion (DESIGN.md 3.3): each Analysis is emitted and
stored **as its iteration completes**.  A ``knowledge-query`` or ``document-query`` tool call
passes its Analysis URI as ``parent_uri`` to the sub-query, whose Question records it with
``prov:wasDerivedFrom``, and asks for the sub-trace to be stored in the agent's own explain
collection, so one trace leads to the other.

The session id is the client's choice, and it names one run: the Question is stored through a
trace claim, which fails when a trace with that URI is already stored, before anything else is
stored or sent (:class:`SessionInUse`).  A run that fails after its Question was stored ends its
trace with an Error derived from the last stored stage.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable

from trustgraph_base.provenance import uris
from trustgraph_base.provenance.agent import agent_final_triples, agent_iteration_triples, agent_session_triples
from trustgraph_base.provenance.namespaces import GRAPH_RETRIEVAL
from trustgraph_base.provenance.triples import error_triples
from trustgraph_base.store.triples import check_names
from trustgraph_base.schema import AgentRequest, AgentResponse, AgentStep, Error, Triple

from ...common.background_writes import BackgroundWrites, stage_write
from ...retrieval.graph_rag.rag import query_size_error
from .parser import FinalAnswer, ReactParseError, parse_react
from .tools import DEFAULT_TOOLS, Tool

log = logging.getLogger(__name__)

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
        ``store_explain(user, collection, uri, triples)``.
    """

    def __init__(self, ports, tools: tuple[Tool, ...] = DEFAULT_TOOLS, settings: AgentSettings | None = None):
        self.ports = ports
        self.tools = {t.name: t for t in tools}
        self.settings = settings or AgentSettings()

    async def run(self, req: AgentRequest, emit: Emit) -> None:
        s = self.settings
        explain = bool(req.session_id)
        collection = s.explain_collection or req.collection
        max_iter = req.max_iterations or s.max_iterations
        history: list[AgentStep] = list(req.history)
        tools = [t for t in self.tools.values() if not req.group or t.name in req.group]

        check_names(req.user, req.collection)  # before anything is stored or any tool runs
        if explain:
            session_uri = uris.agent_session_uri(req.session_id)  # validates the id
        else:
            session_uri = ""
        parent = session_uri
        writes = BackgroundWrites()  # explain triples on their way to storage
        stage = "question"  # how far the run got, for its Error stage

        def explain_event(uri: str, triples: list[Triple]) -> AgentResponse:
            return AgentResponse(message_type="explain", explain_id=uri, explain_collection=collection,
                                 explain_graph=GRAPH_RETRIEVAL, explain_triples=triples)

        async def explain_stage(uri: str, triples: list[Triple]) -> None:
            if not explain:
                return
            # To storage and to the client at once; the end of the dialog waits for the storage writes.
            writes.start(uri, stage_write(self.ports, req.user, collection, uri, triples))
            await emit(explain_event(uri, triples))

        async def claim_session(triples: list[Triple]) -> None:
            """Store the Question as a new trace, or refuse the run: its session id names another one."""
            async def claim() -> None:
                if not await self.ports.claim_trace(req.user, collection, triples):
                    raise SessionInUse(req.session_id, session_uri, collection)

            writes.start(session_uri, claim)
            await writes.wait()  # before the client hears of the run and before anything else is stored
            await emit(explain_event(session_uri, triples))

        async def forward_sub_explain(uri: str, triples: list[Triple]) -> None:
            # Let the client see the sub-trace's question (the link target) as it happens.
            if explain and uri.startswith(("urn:trustgraph:question:", "urn:trustgraph:docrag:")) \
                    and "/" not in uri.split(":", 3)[-1]:
                await emit(AgentResponse(message_type="explain", explain_id=uri, explain_collection=collection,
                                         explain_graph=GRAPH_RETRIEVAL, explain_triples=triples))

        try:
            if not req.question.strip():
                raise ValueError("the question is empty")
            if query_size_error(req.question):
                raise ValueError(query_size_error(req.question))
            if not tools:
                raise ValueError(f"no tools available (group {req.group!r} matches none)")
            if explain:
                await claim_session(agent_session_triples(session_uri, req.question))
            stage = "analysis"
            n = len(history)
            while True:
                if n >= max_iter:
                    stage = "conclusion"
                    answer = self._give_up(history, max_iter)
                    await self._conclude(req, emit, explain_stage, session_uri, parent, answer, writes,
                                         termination="max-iterations")
                    return
                n += 1
                tool_error = ""
                outcome = await self.ports.prompt("agent-react", {
                    "question": req.question, "tools": [t.as_prompt_term() for t in tools],
                    "history": [{"thought": h.thought, "action": h.action, "arguments": h.arguments,
                                 "observation": h.observation} for h in history]})
                try:
                    step = parse_react(outcome.text)
                except ReactParseError as e:
                    step = None
                    thought, action, arguments = "", "parse-error", {}
                    observation = (f"Your reply could not be parsed: {e}. Reply with Thought/Action/Args "
                                   f"or Thought/Final Answer.")
                    tool_error = str(e)
                if isinstance(step, FinalAnswer):
                    stage = "conclusion"
                    if step.thought:
                        await emit(AgentResponse(message_type="thought", content=step.thought, end_of_message=True))
                    await self._conclude(req, emit, explain_stage, session_uri, parent, step.answer, writes)
                    return
                it_uri = uris.agent_iteration_uri(req.session_id, n) if explain else ""
                if step is not None:
                    thought, action, arguments = step.thought, step.action, dict(step.arguments)
                    await emit(AgentResponse(message_type="thought", content=thought, end_of_message=True,
                                             message_id=it_uri))
                    await emit(AgentResponse(message_type="action", content=json.dumps(
                        {"action": action, "arguments": arguments}, ensure_ascii=False), end_of_message=True,
                        message_id=it_uri))
                    tool = self.tools.get(action) if action in {t.name for t in tools} else None
                    if tool is None:
                        observation = (f"Unknown tool {action!r}. Available tools: "
                                       f"{', '.join(t.name for t in tools)}.")
                        tool_error = observation
                    else:
                        query = str(arguments.get(tool.argument) or arguments.get("question") or
                                    next(iter(arguments.values()), "") or req.question)
                        result = await self.ports.run_tool(tool, query, req, it_uri, collection, forward_sub_explain)
                        observation, tool_error = result.text, result.error
                await emit(AgentResponse(message_type="observation", content=observation, end_of_message=True,
                                         message_id=it_uri))
                history.append(AgentStep(thought=thought, action=action,
                                         arguments={k: str(v) for k, v in arguments.items()},
                                         observation=observation))
                if explain:
                    await explain_stage(it_uri, agent_iteration_triples(it_uri, parent, thought, action, arguments,
                                                                        observation, tool_error=tool_error))
                    parent = it_uri
        except Exception as e:  # noqa: BLE001 - every failure ends the dialog with an error
            message = str(e) or type(e).__name__
            log.warning("agent session %s failed at %s: %s", req.session_id or "-", stage, message)
            await writes.settle()
            stored = writes.last_written  # the Error follows the last stored stage ("": nothing of this run stored)
            if explain and stored:
                err_uri = uris.agent_error_uri(req.session_id)
                try:
                    await explain_stage(err_uri, error_triples(err_uri, stored, message, stage))
                    await writes.wait()
                except Exception as e2:  # noqa: BLE001 - the client still gets its error below
                    log.error("could not record the error of agent session %s: %s", req.session_id, e2)
            await emit(AgentResponse(message_type="error", content=message,
                                     error=Error(getattr(e, "error_type", "agent-error"), message),
                                     end_of_message=True, end_of_dialog=True))

    @staticmethod
    def _give_up(history: list[AgentStep], max_iter: int) -> str:
        useful = [h.observation for h in history if h.observation and not h.observation.startswith(
            ("Unknown tool", "Your reply could not", "Error"))]
        base = f"I stopped after {max_iter} steps without reaching a final answer."
        return base + (f" The last useful observation was: {useful[-1]}" if useful else "")

    async def _conclude(self, req: AgentRequest, emit: Emit, explain_stage, session_uri: str, parent: str,
                        answer: str, writes: BackgroundWrites, termination: str = "") -> None:
        await emit(AgentResponse(message_type="answer", content=answer, end_of_message=True))
        if req.session_id:
            final_uri = uris.agent_final_uri(req.session_id)
            await explain_stage(final_uri, agent_final_triples(final_uri, parent or session_uri, answer,
                                                               termination_reason=termination))
            await writes.wait()  # the end of the dialog means: the whole trace is on its way to storage
        await emit(AgentResponse(message_type="answer", content="", end_of_message=True, end_of_dialog=True))
