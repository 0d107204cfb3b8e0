"""trace-admin: retention of explain traces — delete one trace, or prune those older than a duration.

A trace is deleted whole and alone: every triple reachable from its Question in
``urn:graph:retrieval`` (stages, edge selections, agent iterations, sub-traces), the trace index
rows of its Questions, and the answer documents it points at in the librarian.  Knowledge and
extraction provenance are never touched.  Everything happens inside one user and collection,
so one tenant can never delete another's traces.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta, timezone

from trustgraph_base.processor import Processor, launch, raise_on_error
from trustgraph_base.provenance.walk import collect_trace, trace_documents, trace_questions
from trustgraph_base.schema import LibrarianRequest, TraceAdminRequest, TraceAdminResponse
from trustgraph_base.store.errors import NotFound
from trustgraph_base.store.names import check_collection, check_user
from trustgraph_base.store.triples import open_triples_store

from ...common.services import client_spec, request_spec
from ...common.stores import StoreBackedProcessor

log = logging.getLogger(__name__)


class TraceAdminService(StoreBackedProcessor, Processor):
    """Deletes and prunes stored traces."""

    default_id = "trace-admin"

    def __init__(self, *, triples_store=None, **params):
        super().__init__(**params)
        self.store = self.use_store(triples_store, open_triples_store)
        self.add(request_spec("trace-admin", self.flow, self.on_request))
        self.add(client_spec("librarian", self.flow))

    async def _query(self, user: str, collection: str, patterns):
        results = await asyncio.to_thread(self.store.query_many, user, collection, patterns)
        return [t for r in results for t in r]

    async def delete_trace(self, user: str, collection: str, uri: str, dry_run: bool = False) -> TraceAdminResponse:
        summary = await asyncio.to_thread(self.store.get_trace, user, collection, uri)
        if summary is None:
            raise NotFound(f"no trace {uri} in collection {collection} of user {user}")
        triples = await collect_trace(lambda p: self._query(user, collection, p), uri)
        questions = trace_questions(triples)
        documents = trace_documents(triples)
        resp = TraceAdminResponse(traces=questions, triples=len(triples), documents=len(documents))
        if dry_run:
            return resp
        await asyncio.to_thread(self.store.delete, user, collection, triples)
        for q in questions:
            await asyncio.to_thread(self.store.remove_trace, user, collection, q)
        for doc in documents:
            reply = await self.client("librarian").request(LibrarianRequest(
                operation="remove-document", user=user, collection=collection, document_id=doc))
            if reply.error is not None and reply.error.type != "not-found":
                raise_on_error("librarian", reply)
        return resp

    async def on_request(self, req: TraceAdminRequest, ctx) -> None:
        check_user(req.user)
        check_collection(req.collection)
        if req.operation == "delete":
            if not req.uri:
                raise ValueError("delete needs the trace's question URI")
            await ctx.respond(await self.delete_trace(req.user, req.collection, req.uri, req.dry_run))
        elif req.operation == "prune":
            if req.older_than_seconds <= 0:
                raise ValueError("prune needs a positive older_than_seconds")
            cutoff = datetime.now(timezone.utc) - timedelta(seconds=req.older_than_seconds)
            total = TraceAdminResponse()
            for uri in await self._older_than(req.user, req.collection, cutoff):
                try:
                    r = await self.delete_trace(req.user, req.collection, uri, req.dry_run)
                except NotFound:
                    continue  # deleted meanwhile, or a sub-trace already removed with its parent
                total.traces += r.traces
                total.triples += r.triples
                total.documents += r.documents
            await ctx.respond(total)
        else:
            raise ValueError(f"unknown trace-admin operation {req.operation!r}: use delete or prune")

    async def _older_than(self, user: str, collection: str, cutoff: datetime) -> list[str]:
        """Top-level traces started before ``cutoff`` (the index is newest first: page to the old end)."""
        found, cursor = [], ""
        while True:
            page = await asyncio.to_thread(self.store.list_traces, user, collection, "", 500, cursor)
            for t in page.traces:
                try:
                    started = datetime.fromisoformat(t.time.replace("Z", "+00:00"))
                except ValueError:
                    continue
                if started < cutoff and not t.parent:
                    found.append(t.uri)
            if not page.next_cursor:
                return found
            cursor = page.next_cursor


def run() -> None:
    launch(TraceAdminService)
