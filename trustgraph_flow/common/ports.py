"""Bus-backed implementations of the ports the retrieval and agent algorithms use.

Each method is one request to a standard service through a typed client; errors in a reply
become :class:`~trustgraph_base.processor.ServiceError` naming the service.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from trustgraph_base.processor import Processor, raise_on_error
from trustgraph_base.provenance.uris import parse_trace_uri
from trustgraph_base.schema import (
    DocumentEmbeddingsRequest,
    DocumentMetadata,
    EmbeddingsRequest,
    EntityMatch,
    GraphEmbeddingsRequest,
    LibrarianRequest,
    Metadata,
    PromptRequest,
    StoredAnswer,
    TraceClaimRequest,
    Triple,
    TriplePattern,
    Triples,
    TriplesQueryRequest,
)
from trustgraph_base.schema.library import ANSWER

#: Titles of the librarian documents a trace stores, by the stage their id names.
_DOCUMENT_TITLES = {"answer": "Answer", "thought": "Agent thought", "observation": "Agent observation"}


@dataclass
class PromptOutcome:
    """What a prompt call returned (parsed objects for JSONL templates, text otherwise)."""

    objects: list[Any] = field(default_factory=list)
    text: str = ""
    dropped: int = 0
    reasons: list[str] = field(default_factory=list)
    model: str = ""
    #: None: the model call's endpoint reported no usage
    in_token: int | None = None
    out_token: int | None = None


def prompt_terms(terms: dict[str, Any]) -> dict[str, str]:
    """Prompt request terms are JSON-encoded values (as in TrustGraph)."""
    return {k: json.dumps(v, ensure_ascii=False) for k, v in terms.items()}


class BusPorts:
    """Ports over the bus, for a processor that declared the matching client specs.

    Client names used: ``embeddings``, ``graph-embeddings``, ``document-embeddings``, ``triples``,
    ``prompt``, ``librarian``, ``trace-claim``; producers ``explainability`` (explain triples) and ``answers``
    (``answer-store``, answers for the librarian).  ``stats`` counts requests per
    service (benchmarks report store round trips from it).
    """

    def __init__(self, processor: Processor):
        self.p = processor
        self.stats: dict[str, int] = {}
        self.embedding_model = ""

    def _count(self, service: str) -> None:
        self.stats[service] = self.stats.get(service, 0) + 1

    async def embed(self, text: str) -> list[float]:
        self._count("embeddings")
        resp = raise_on_error("embeddings", await self.p.client("embeddings").request(EmbeddingsRequest(texts=[text])))
        if not resp.vectors:
            raise RuntimeError("embeddings service returned no vector")
        self.embedding_model = resp.model
        return resp.vectors[0]

    async def find_entities(self, user: str, collection: str, vector: list[float], limit: int) -> list[EntityMatch]:
        self._count("graph-embeddings")
        resp = raise_on_error("graph-embeddings", await self.p.client("graph-embeddings").request(
            GraphEmbeddingsRequest(user=user, collection=collection, vector=vector, limit=limit,
                                   model=self.embedding_model)))
        return resp.entities

    async def find_chunks(self, user: str, collection: str, vector: list[float], limit: int):
        self._count("document-embeddings")
        resp = raise_on_error("document-embeddings", await self.p.client("document-embeddings").request(
            DocumentEmbeddingsRequest(user=user, collection=collection, vector=vector, limit=limit,
                                      model=self.embedding_model)))
        return resp.chunks

    async def query(self, user: str, collection: str, patterns: Sequence[TriplePattern], *,
                    follow: Sequence[str] = (), follow_depth: int = 0, describe: Sequence[str] = (),
                    describe_types: Sequence[str] = ()) -> list[Triple]:
        self._count("triples")
        resp = raise_on_error("triples", await self.p.client("triples").request(TriplesQueryRequest(
            user=user, collection=collection, patterns=list(patterns), follow=list(follow),
            follow_depth=follow_depth, describe=list(describe), describe_types=list(describe_types))))
        return resp.triples

    @staticmethod
    def _outcome(resp) -> PromptOutcome:
        objects = json.loads(resp.object) if resp.object else []
        return PromptOutcome(objects=objects if isinstance(objects, list) else [objects], text=resp.text,
                                dropped=resp.dropped, reasons=list(resp.dropped_reasons), model=resp.model,
                                in_token=resp.in_token, out_token=resp.out_token)

    async def prompt(self, template: str, terms: dict[str, Any]) -> PromptOutcome:
        self._count("prompt")
        resp = raise_on_error("prompt", await self.p.client("prompt").request(
            PromptRequest(id=template, terms=prompt_terms(terms))))
        return self._outcome(resp)

    async def prompt_stream(self, template: str, terms: dict[str, Any]) -> AsyncIterator[str | PromptOutcome]:
        self._count("prompt")
        async for resp in self.p.client("prompt").stream(PromptRequest(id=template, terms=prompt_terms(terms),
                                                                        streaming=True)):
            raise_on_error("prompt", resp)
            if resp.text:
                yield resp.text
            if resp.end_of_stream:
                yield PromptOutcome(model=resp.model, in_token=resp.in_token, out_token=resp.out_token)

    async def store_answer(self, user: str, collection: str, document_id: str, text: str, stage_uri: str,
                           stage_triples: list[Triple]) -> None:
        """Queue the answer for the librarian, with the explain stage that points at it (stored after it).

        An agent's thoughts and observations go the same way, as answers titled after what they are.
        """
        trace = parse_trace_uri(document_id)
        title = _DOCUMENT_TITLES.get(trace.stage if trace else "", "Answer")
        meta = DocumentMetadata(id=document_id, time=time.time(), kind="text/plain", title=title,
                                document_type=ANSWER)
        await self.p.producer("answers").send(StoredAnswer(
            user=user, collection=collection, metadata=meta, content=text.encode("utf-8"),
            explain_id=stage_uri, explain_triples=stage_triples))

    async def get_content(self, user: str, document_id: str, collection: str = "default") -> bytes:
        self._count("librarian")
        resp = raise_on_error("librarian", await self.p.client("librarian").request(LibrarianRequest(
            operation="get-document-content", user=user, collection=collection, document_id=document_id)))
        return resp.content

    async def claim_trace(self, user: str, collection: str, triples: list[Triple]) -> bool:
        """Store a Question unless a trace with its URI is stored (``False``: another run holds it; nothing stored)."""
        resp = raise_on_error("trace-claim", await self.p.client("trace-claim").request(
            TraceClaimRequest(user=user, collection=collection, triples=triples)))
        return resp.claimed

    async def store_explain(self, user: str, collection: str, stage_uri: str, triples: list[Triple]) -> None:
        await self.p.producer("explainability").send(Triples(
            metadata=Metadata(id=stage_uri, user=user, collection=collection), triples=triples))
