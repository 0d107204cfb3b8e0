"""ReAct agent request/response messages."""

from __future__ import annotations

from dataclasses import dataclass, field

from .primitives import Error, Triple


@dataclass
class AgentStep:
    """One completed think/act/observe iteration, as carried in the history."""

    thought: str = ""
    action: str = ""
    arguments: dict[str, str] = field(default_factory=dict)
    observation: str = ""


@dataclass
class AgentRequest:
    """A question for the ReAct agent.

    Provenance is recorded only when ``session_id`` is non-empty; requests without
    ``collection`` or ``session_id`` (older clients) keep working with the defaults.
    """

    question: str = ""
    state: str = ""
    group: list[str] = field(default_factory=list)
    history: list[AgentStep] = field(default_factory=list)
    user: str = "trustgraph"
    collection: str = "default"
    streaming: bool = False
    session_id: str = ""
    max_iterations: int = 0
    #: ``react``, ``plan-then-execute`` or ``supervisor``; empty: the router chooses (docs/trace-model.md).
    pattern: str = ""
    #: A supervisor's sub-agent: the Decomposition its Question is derived from.
    parent_uri: str = ""


@dataclass
class AgentResponse:
    """One message of an agent response stream.

    ``message_type`` is ``thought``, ``action``, ``observation``, ``answer``, ``explain`` or
    ``error``; ``end_of_dialog`` marks the last message.
    """

    message_type: str = ""
    content: str = ""
    end_of_message: bool = False
    end_of_dialog: bool = False
    explain_id: str = ""
    explain_collection: str = ""
    explain_graph: str = ""
    explain_triples: list[Triple] = field(default_factory=list)
    message_id: str = ""
    error: Error | None = None
    #: token counts; None = not reported (the endpoint sent no usage, or no model call)
    in_token: int | None = None
    out_token: int | None = None
    model: str = ""


@dataclass
class AgentCancel:
    """A broadcast to every agent replica: stop the runs of these sessions (a cancelled or failed supervisor's
    sub-agents).  Only runs of the same ``user`` and ``collection`` are stopped."""

    user: str = ""
    collection: str = ""
    session_ids: list[str] = field(default_factory=list)
    #: Why, recorded as the cancelled runs' Error.
    reason: str = ""
