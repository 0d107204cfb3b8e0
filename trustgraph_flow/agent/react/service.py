"""agent-manager-react: the ReAct agent service with explainable iterations and linked sub-traces."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator

from trustgraph_base.processor import Processor, ServiceError, launch, raise_on_error
from trustgraph_base.processor.specs import ConsumerSpec, ProducerSpec
from trustgraph_base.schema import (
    AgentCancel,
    AgentRequest,
    AgentResponse,
    DocumentRagQuery,
    Error,
    GraphRagQuery,
    TextCompletionRequest,
)

from ...common.ports import BusPorts
from ...common.query_session import NO_ANSWER_ERROR, cancel_with_reason
from ...common.services import agent_cancel_queue, client_spec, explain_producer_specs, request_spec
from ..patterns import AgentOrchestrator
from .agent import AgentSettings, ReactAgent, ToolOutcome
from .tools import DEFAULT_TOOLS, Tool, load_tools

log = logging.getLogger(__name__)


def _llm_configured() -> bool:
    return bool(os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY")) or \
        os.environ.get("LLM_BACKEND", "").lower() == "openai"


def _answer(text: str) -> str:
    """A tool's answer; an empty one (or only whitespace) is the tool's failure, never an observation."""
    if not text.strip():
        raise ValueError(NO_ANSWER_ERROR)
    return text


class AgentPorts(BusPorts):
    """Bus ports plus tool execution through the graph-rag, document-rag and text-completion services, and
    sub-agents as agent requests."""

    async def run_subagent(self, request: AgentRequest) -> AsyncIterator[AgentResponse]:
        """The response stream of ``request`` sent to the agent service (any replica may take it)."""
        async for resp in self.p.client("agent").stream(request):
            yield resp

    async def cancel_subagents(self, user: str, collection: str, session_ids: list[str], reason: str) -> None:
        """Tell every agent replica to stop these sub-agent sessions of ``user``'s ``collection``."""
        await self.p.producer("cancel").send(AgentCancel(user=user, collection=collection,
                                                         session_ids=list(session_ids), reason=reason))

    async def run_tool(self, tool: Tool, query: str, req: AgentRequest, parent_uri: str, explain_collection: str,
                       on_explain) -> ToolOutcome:
        try:
            if tool.kind == "text-completion":
                resp = raise_on_error("text-completion", await self.p.client("text-completion").request(
                    TextCompletionRequest(prompt=query)))
                return ToolOutcome(_answer(resp.response))
            request: GraphRagQuery | DocumentRagQuery
            if tool.kind == "graph-rag":
                client = self.p.client("graph-rag")
                request = GraphRagQuery(query=query, user=req.user, collection=req.collection, parent_uri=parent_uri,
                                        explainable=bool(parent_uri), explain_collection=explain_collection)
            else:
                client = self.p.client("document-rag")
                request = DocumentRagQuery(query=query, user=req.user, collection=req.collection,
                                           parent_uri=parent_uri, explainable=bool(parent_uri),
                                           explain_collection=explain_collection)
            parts = []
            async for resp in client.stream(request):
                if resp.error is not None:
                    raise ServiceError(tool.kind, resp.error.type, resp.error.message)
                if resp.message_type == "explain":
                    await on_explain(resp.explain_id, resp.explain_triples)
                elif resp.response:
                    parts.append(resp.response)
            return ToolOutcome(_answer("".join(parts)).strip())
        except Exception as e:  # noqa: BLE001 - a tool failure is an observation, not the end of the dialog
            return ToolOutcome(f"Error: the {tool.name} tool failed: {e}", error=str(e))


#: Seconds a notice about a session this instance is not running is remembered: its request, still on the bus,
#: is refused when taken within them (the agent service's client deadline).
STOPPED_FOR = 900.0

#: Agent requests one service instance handles at once (at least): a supervisor and its sub-agents.
SUBAGENT_HANDLERS = 16


class AgentService(Processor):
    """The agent: ReAct, plan-then-execute or supervisor per request, every stage recorded (when the request has
    a session id).  A supervisor's sub-agents are agent requests of their own, which this service (or any replica
    of it) takes, so its request consumer runs several handlers at once: a supervisor waits on its sub-agents.
    Every instance hears the ``agent-cancel`` broadcast and stops the runs it names (of the same user and
    collection) that it is running."""

    default_id = "agent-manager-react"

    def __init__(self, *, tools: str | list | None = None, max_iterations: int = 8, explain_collection: str = "",
                 **params):
        super().__init__(**params)
        configured = load_tools(tools)
        if tools is None and not _llm_configured():
            # Without a language model a text-completion tool can only fail: do not offer it.
            configured = tuple(t for t in DEFAULT_TOOLS if t.kind != "text-completion")
        self.add(request_spec("agent", self.flow, self.on_request,
                              concurrency=max(self.concurrency, SUBAGENT_HANDLERS)))
        for spec in explain_producer_specs(self.flow):
            self.add(spec)
        kinds = {t.kind for t in configured}
        self.add(client_spec("prompt", self.flow))
        self.add(client_spec("trace-claim", self.flow))
        self.add(client_spec("agent", self.flow))
        # the broadcast: every instance has a subscription of its own
        self.add(ConsumerSpec("cancel", agent_cancel_queue(), AgentCancel, self.on_cancel,
                              subscription=f"{self.id}--cancel-{uuid.uuid4().hex[:12]}", shared=False))
        # unbatched: a batch delay would let the sub-agents of a cancelled supervisor run on for its length
        self.add(ProducerSpec("cancel", agent_cancel_queue(), AgentCancel, batching=False))
        #: the runs this instance is handling, by (user, collection, session id)
        self.running: dict[tuple[str, str, str], asyncio.Task] = {}
        #: sessions a notice named before this instance ran them (their request may still be on the bus): when
        #: noticed and why, so one taken later is refused instead of run
        self.stopped: dict[tuple[str, str, str], tuple[float, str]] = {}
        for kind in ("graph-rag", "document-rag", "text-completion"):
            if kind in kinds:
                self.add(client_spec(kind, self.flow))
        self.ports = AgentPorts(self)
        self.agent = ReactAgent(self.ports, configured, AgentSettings(max_iterations, explain_collection))
        self.orchestrator = AgentOrchestrator(self.agent)

    async def on_request(self, req: AgentRequest, ctx) -> None:
        task = asyncio.current_task()
        key = (req.user, req.collection, req.session_id)
        if key in self.stopped:
            reason = self.stopped.pop(key)[1]
            await ctx.respond(AgentResponse(message_type="error", content=reason, error=Error("agent-error", reason),
                                            end_of_message=True, end_of_dialog=True))
            return
        if not req.session_id or task is None or key in self.running:
            await self.orchestrator.run(req, ctx.respond)
            return
        self.running[key] = task
        try:
            await self.orchestrator.run(req, ctx.respond)
        finally:
            if self.running.get(key) is task:
                del self.running[key]

    async def on_cancel(self, notice: AgentCancel, ctx) -> None:
        """Stop the runs ``notice`` names that this instance is handling: only those of its user and collection."""
        reason = notice.reason or "cancelled"
        now = time.monotonic()
        self.stopped = {k: v for k, v in self.stopped.items() if now - v[0] < STOPPED_FOR}
        for sid in notice.session_ids:
            key = (notice.user, notice.collection, sid)
            task = self.running.pop(key, None)
            if task is not None and not task.done():
                log.info("agent session %s: %s", sid, reason)
                cancel_with_reason(task, reason)
            elif sid:
                self.stopped[key] = (now, reason)

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--tools", default=None, help="tool configuration: a JSON file or JSON list")
        parser.add_argument("--max-iterations", type=int, default=8)
        parser.add_argument("--explain-collection", default="")

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        return {"tools": args.tools, "max_iterations": args.max_iterations,
                "explain_collection": args.explain_collection}


def run() -> None:
    launch(AgentService)
