"""Which clients send a request again when no reply comes (idempotent services only), and after how long."""

from __future__ import annotations

import pytest

from trustgraph_flow.common.services import SEND_ATTEMPTS, SERVICES, client_spec

pytestmark = pytest.mark.unit

READS = {"triples", "trace-list", "graph-embeddings", "document-embeddings", "embeddings"}


def test_only_idempotent_services_are_resent():
    assert {name for name, s in SERVICES.items() if s.idempotent} == READS
    # an LLM call, a write or a whole RAG query is never sent twice by a client (a trace claim sent again
    # would find its own claim and refuse the run)
    for name in ("prompt", "text-completion", "librarian", "graph-rag", "document-rag", "agent", "trace-admin",
                 "trace-claim"):
        assert SERVICES[name].resend_after() is None
        assert client_spec(name, "f").resend_after is None


def test_resend_after_is_a_share_of_the_timeout_in_force():
    assert SEND_ATTEMPTS == 3
    assert client_spec("triples", "f").resend_after == pytest.approx(SERVICES["triples"].timeout / 3)
    spec = client_spec("triples", "f", timeout=15.0)  # a caller's own timeout (graph-rag's client_timeouts)
    assert spec.timeout == 15.0 and spec.resend_after == pytest.approx(5.0)
