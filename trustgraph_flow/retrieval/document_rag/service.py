"""document-rag: the DocumentRAG service with query-time explainability."""

from __future__ import annotations

import argparse

from trustgraph_base.processor import Processor, launch
from trustgraph_base.schema import DocumentRagQuery

from ...common.ports import BusPorts
from ...common.services import client_spec, explain_producer_specs, request_spec
from .rag import DocumentRag, DocumentRagSettings


class DocumentRagService(Processor):
    """Answers questions from document chunks and explains which chunks it used."""

    default_id = "document-rag"

    def __init__(self, *, doc_limit: int = 10, explain_collection: str = "",
                 client_timeouts: dict[str, float] | None = None, **params):
        super().__init__(**params)
        self.add(request_spec("document-rag", self.flow, self.on_request))
        for spec in explain_producer_specs(self.flow):
            self.add(spec)
        for service in ("embeddings", "document-embeddings", "prompt", "librarian"):
            self.add(client_spec(service, self.flow, timeout=(client_timeouts or {}).get(service)))
        self.ports = BusPorts(self)
        self.rag = DocumentRag(self.ports, DocumentRagSettings(doc_limit, explain_collection))

    async def on_request(self, req: DocumentRagQuery, ctx) -> None:
        await self.rag.query(req, ctx.respond)

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--doc-limit", type=int, default=10)
        parser.add_argument("--explain-collection", default="")

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        return {"doc_limit": args.doc_limit, "explain_collection": args.explain_collection}


def run() -> None:
    launch(DocumentRagService)
