"""The contracts of the request/response services and flows: schemas, timeouts, error replies, idempotency.

A processor that calls a service adds ``client_spec("triples", flow)`` instead of spelling out
queues and schemas; a processor that answers one uses ``request_spec(...)`` for its consumer.
Which processor answers, calls, consumes or feeds what is declared in the service manifest
(:mod:`trustgraph_flow.manifest`, checked against these tables by ``tests/unit/test_manifest.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trustgraph_base.processor.specs import ConsumerSpec, ProducerSpec, RequestResponseSpec
from trustgraph_base.pubsub.topics import flow_queue, notify_queue, request_queue, response_queue
from trustgraph_base.schema import (
    AgentCancel,
    AgentRequest,
    AgentResponse,
    Chunk,
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    DocumentRagQuery,
    DocumentRagResponse,
    DocumentRef,
    EmbeddingsRequest,
    EmbeddingsResponse,
    EntityContexts,
    Error,
    GraphEmbeddingsRequest,
    GraphEmbeddingsResponse,
    GraphRagQuery,
    GraphRagResponse,
    IngestProgress,
    LibrarianRequest,
    LibrarianResponse,
    PromptRequest,
    PromptResponse,
    StoredAnswer,
    TextCompletionRequest,
    TextCompletionResponse,
    TextPage,
    TraceAdminRequest,
    TraceAdminResponse,
    TraceClaimRequest,
    TraceClaimResponse,
    TraceListRequest,
    TraceListResponse,
    Triples,
    TriplesQueryRequest,
    TriplesQueryResponse,
)


@dataclass(frozen=True)
class Service:
    """A request/response service: its name, schemas, default client timeout and error reply.

    ``idempotent`` services (reads, embeddings) may get a request twice: their clients send a
    request again when no reply came within a third of the timeout (a lost non-persistent message).
    """

    name: str
    request: type
    response: type
    timeout: float
    error_reply: Callable[[Error], Any]
    idempotent: bool = False
    #: Bus hops between a client of this service and an LLM call that may come before its next reply
    #: (0: none); such a client waits at least the LLM timeout plus a margin per hop (:meth:`deadline`).
    llm_hops: int = 0

    def deadline(self, llm_timeout: float | None = None) -> float:
        """Seconds a client waits for each reply: :attr:`timeout`, or longer when an LLM call may take
        longer (``llm_timeout``, default the environment's ``TG_LLM_TIMEOUT``; see
        :func:`~trustgraph_flow.model.llm_settings.reply_deadline`)."""
        if not self.llm_hops:
            return self.timeout
        from ..model.llm_settings import LlmSettings, reply_deadline

        if llm_timeout is None:
            llm_timeout = LlmSettings.from_env().timeout
        return max(self.timeout, reply_deadline(llm_timeout, self.llm_hops))

    def resend_after(self, timeout: float | None = None) -> float | None:
        """Seconds a client waits for a first reply before sending again (``None``: never)."""
        return (timeout or self.deadline()) / SEND_ATTEMPTS if self.idempotent else None


#: How many times a client of an idempotent service sends a request before its timeout.
SEND_ATTEMPTS = 3


SERVICES: dict[str, Service] = {s.name: s for s in [
    Service("triples", TriplesQueryRequest, TriplesQueryResponse, 30.0,
            lambda e: TriplesQueryResponse(error=e, is_final=True), idempotent=True),
    Service("trace-list", TraceListRequest, TraceListResponse, 30.0, lambda e: TraceListResponse(error=e),
            idempotent=True),
    Service("trace-admin", TraceAdminRequest, TraceAdminResponse, 600.0, lambda e: TraceAdminResponse(error=e)),
    # Not idempotent: a request sent again would find its own claim and be refused.
    Service("trace-claim", TraceClaimRequest, TraceClaimResponse, 30.0, lambda e: TraceClaimResponse(error=e)),
    Service("graph-embeddings", GraphEmbeddingsRequest, GraphEmbeddingsResponse, 30.0,
            lambda e: GraphEmbeddingsResponse(error=e), idempotent=True),
    Service("document-embeddings", DocumentEmbeddingsRequest, DocumentEmbeddingsResponse, 30.0,
            lambda e: DocumentEmbeddingsResponse(error=e), idempotent=True),
    Service("embeddings", EmbeddingsRequest, EmbeddingsResponse, 120.0, lambda e: EmbeddingsResponse(error=e),
            idempotent=True),
    Service("text-completion", TextCompletionRequest, TextCompletionResponse, 600.0,
            lambda e: TextCompletionResponse(error=e, end_of_stream=True), llm_hops=1),
    Service("prompt", PromptRequest, PromptResponse, 600.0, lambda e: PromptResponse(error=e, end_of_stream=True),
            llm_hops=2),
    Service("librarian", LibrarianRequest, LibrarianResponse, 60.0,
            lambda e: LibrarianResponse(error=e, is_final=True)),
    Service("graph-rag", GraphRagQuery, GraphRagResponse, 600.0,
            lambda e: GraphRagResponse(error=e, end_of_stream=True, end_of_session=True), llm_hops=3),
    Service("document-rag", DocumentRagQuery, DocumentRagResponse, 600.0,
            lambda e: DocumentRagResponse(error=e, end_of_stream=True, end_of_session=True), llm_hops=3),
    # An agent's tool call is a GraphRAG or DocumentRAG query, one hop further from the LLM.
    Service("agent", AgentRequest, AgentResponse, 900.0,
            lambda e: AgentResponse(message_type="error", content=e.message, error=e, end_of_message=True,
                                    end_of_dialog=True), llm_hops=4),
]}

# Flow (work) queues and what they carry.
FLOWS: dict[str, type] = {
    "triples-store": Triples,
    "document-load": DocumentRef,
    "text-pages": TextPage,
    "chunks": Chunk,
    "entity-contexts": EntityContexts,
    "answer-store": StoredAnswer,
}

#: Broadcast of ingestion progress (for load progress bars).
INGEST_PROGRESS = "ingest-progress"


def client_spec(service: str, flow: str, *, name: str | None = None, timeout: float | None = None,
                is_final: Callable[[Any], bool] | None = None) -> RequestResponseSpec:
    """A typed client spec for ``service`` (named ``name``, default the service name); ``timeout`` defaults
    to the service's :meth:`Service.deadline`, which follows the LLM timeout."""
    s = SERVICES[service]
    return RequestResponseSpec(name or service, service, request_queue(service, flow), response_queue(service, flow),
                               s.request, s.response, timeout=timeout or s.deadline(), is_final=is_final,
                               resend_after=s.resend_after(timeout))


def request_spec(service: str, flow: str, handler, *, name: str = "request",
                 concurrency: int | None = None) -> ConsumerSpec:
    """The consumer spec of the service that answers ``service`` requests (errors become error replies)."""
    s = SERVICES[service]
    return ConsumerSpec(name, request_queue(service, flow), s.request, handler,
                        response_queue=response_queue(service, flow), response_schema=s.response,
                        error_response=s.error_reply, concurrency=concurrency)


def flow_spec(flow_name: str, flow: str, handler, *, name: str = "input", concurrency: int | None = None,
              max_redeliveries: int = 5) -> ConsumerSpec:
    """The consumer spec of a flow (work queue) stage."""
    return ConsumerSpec(name, flow_queue(flow_name, flow), FLOWS[flow_name], handler, concurrency=concurrency,
                        max_redeliveries=max_redeliveries)


def flow_producer_spec(name: str, flow_name: str, flow: str, *, batching: bool | None = None) -> ProducerSpec:
    """A producer named ``name`` that sends to the ``flow_name`` flow (work) queue (``batching``: see ProducerSpec)."""
    return ProducerSpec(name, flow_queue(flow_name, flow), FLOWS[flow_name], batching=batching)


def explain_producer_specs(flow: str, *, answers: bool = True) -> list[ProducerSpec]:
    """The producers a query service stores its trace with: ``explainability`` and (``answers``) ``answers``.

    Unbatched: a session's last message waits for the broker to accept every stage, so each
    send's latency is on the query's path and a batch delay would only add to it.
    """
    specs = [flow_producer_spec("explainability", "triples-store", flow, batching=False)]
    if answers:
        specs.append(flow_producer_spec("answers", "answer-store", flow, batching=False))
    return specs


def progress_queue() -> str:
    return notify_queue(INGEST_PROGRESS)


#: Broadcast to every agent replica: stop these sub-agent sessions (:class:`AgentCancel`).
AGENT_CANCEL = "agent-cancel"


def agent_cancel_queue() -> str:
    return notify_queue(AGENT_CANCEL)


__all__ = ["SERVICES", "FLOWS", "INGEST_PROGRESS", "Service", "client_spec", "request_spec", "flow_spec",
           "flow_producer_spec", "explain_producer_specs", "progress_queue", "IngestProgress",
           "AGENT_CANCEL", "agent_cancel_queue", "AgentCancel"]
