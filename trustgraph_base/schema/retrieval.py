"""GraphRAG and DocumentRAG request/response messages.

Both response types share the explain fields: a message with ``message_type="explain"``
carries one stage of the trace (``explain_id`` is the stage's URI, ``explain_triples``
the stage's triples); ``"chunk"`` messages carry answer text. ``end_of_session`` marks the
last message of a query, including error replies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .primitives import Error, Triple


@dataclass
class Source:
    """A source document an answer rests on."""

    uri: str = ""
    title: str = ""


@dataclass
class SourceChainLink:
    """One node on the way from an edge back to its document (subgraph, chunk, page, document)."""

    uri: str = ""
    type: str = ""
    label: str = ""


@dataclass
class EdgeSource:
    """The extraction provenance of one selected edge: its chain from subgraph to document."""

    edge: Triple | None = None
    chain: list[SourceChainLink] = field(default_factory=list)


@dataclass
class GraphRagQuery:
    """A question for the GraphRAG service.

    Limits of 0 mean "use the service default".  ``parent_uri`` links the trace to the agent
    Analysis that asked (empty for top-level queries).  ``explainable=False`` skips the trace
    (no explain events, nothing stored) — used to measure what explainability costs.
    ``explain_collection`` stores the trace in another collection of the same user (the agent
    uses it so a sub-trace lands where its own trace is).
    """

    query: str = ""
    user: str = "trustgraph"
    collection: str = "default"
    entity_limit: int = 0
    triple_limit: int = 0
    max_subgraph_size: int = 0
    max_path_length: int = 0
    edge_limit: int = 0
    streaming: bool = False
    parent_uri: str = ""
    explainable: bool = True
    explain_collection: str = ""
    #: most tokens of the edge-selection prompt; None = the service default, 0 = send every candidate
    selection_token_budget: int | None = None


@dataclass
class GraphRagResponse:
    """One message of a GraphRAG response stream."""

    error: Error | None = None
    response: str = ""
    end_of_stream: bool = False
    explain_id: str = ""
    explain_collection: str = ""
    explain_graph: str = ""
    explain_triples: list[Triple] = field(default_factory=list)
    message_type: str = "chunk"
    end_of_session: bool = False
    #: token counts; None = not reported (the endpoint sent no usage, or no model call)
    in_token: int | None = None
    out_token: int | None = None
    #: model calls whose endpoint reported no usage: ``in_token``/``out_token`` sum only the others
    unreported_calls: int = 0
    model: str = ""
    sources: list[Source] = field(default_factory=list)
    edge_sources: list[EdgeSource] = field(default_factory=list)


@dataclass
class DocumentRagQuery:
    """A question for the DocumentRAG service (``doc_limit`` 0 = service default)."""

    query: str = ""
    user: str = "trustgraph"
    collection: str = "default"
    doc_limit: int = 0
    streaming: bool = False
    parent_uri: str = ""
    explainable: bool = True
    explain_collection: str = ""


@dataclass
class DocumentRagResponse:
    """One message of a DocumentRAG response stream."""

    error: Error | None = None
    response: str = ""
    end_of_stream: bool = False
    explain_id: str = ""
    explain_collection: str = ""
    explain_graph: str = ""
    explain_triples: list[Triple] = field(default_factory=list)
    message_type: str = "chunk"
    end_of_session: bool = False
    #: token counts; None = not reported (the endpoint sent no usage, or no model call)
    in_token: int | None = None
    out_token: int | None = None
    #: model calls whose endpoint reported no usage: ``in_token``/``out_token`` sum only the others
    unreported_calls: int = 0
    model: str = ""
    sources: list[Source] = field(default_factory=list)
