"""Producers a query waits for are unbatched; ingestion producers keep the backend's batching."""

from __future__ import annotations

import pytest

from trustgraph_base.pubsub.memory import MemoryBackend
from trustgraph_flow.agent.react.service import AgentService
from trustgraph_flow.ingest.services import KgExtractService
from trustgraph_flow.librarian.service import LibrarianService
from trustgraph_flow.retrieval.document_rag.service import DocumentRagService
from trustgraph_flow.retrieval.graph_rag.service import GraphRagService

pytestmark = pytest.mark.unit


def producers(processor) -> dict[str, object]:
    return {spec.name: spec.batching for spec in processor._producer_specs}


@pytest.mark.parametrize("service, expected", [
    (GraphRagService, {"explainability": False, "answers": False}),
    (DocumentRagService, {"explainability": False, "answers": False}),
    # and the agent's cancel notice to its supervisor's sub-agents: a batch delay would let them run on
    (AgentService, {"explainability": False, "answers": False, "cancel": False}),
])
def test_a_query_service_stores_its_trace_through_unbatched_producers(service, expected):
    # the session's last message waits for the broker to accept each stage: a batch delay is pure latency
    assert producers(service(backend=MemoryBackend())) == expected


def test_ingestion_and_the_librarian_keep_the_backend_default():
    assert set(producers(KgExtractService(backend=MemoryBackend())).values()) == {None}
    assert set(producers(LibrarianService(backend=MemoryBackend(), librarian_store=None)).values()) == {None}
