"""One DocumentRAG query against abstract ports, with explain events.

Order on the response stream: explain(question) -> explain(grounding: the question, which is what
the chunk search embeds) -> explain(exploration: the chunks used, by their extraction-provenance
URIs) -> chunk... -> explain(synthesis: the answer text and its librarian copy, the model call's
token usage) -> final ``end_of_session=True``.  Errors end the session too, and the trace
records how far the query got (:class:`trustgraph_flow.common.query_session.QuerySession`).  The
librarian copy and the Synthesis travel in one queued message: the librarian stores the copy,
then passes the Synthesis on to the triple store.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from trustgraph_base import telemetry
from trustgraph_base.provenance import uris
from trustgraph_base.provenance.triples import (
    LlmUsage,
    docrag_exploration_triples,
    docrag_question_triples,
    docrag_synthesis_triples,
    grounding_triples,
)
from trustgraph_base.schema import DocumentRagQuery, DocumentRagResponse, Error, Source
from trustgraph_base.store.triples import check_names

from ...common.ports import PromptOutcome
from ...common.query_session import QuerySession, TraceFields, check_question

NO_DOCUMENTS_ANSWER = "I found no relevant passages in the documents to answer this question."


@dataclass
class DocumentRagSettings:
    doc_limit: int = 10
    explain_collection: str = ""


def _failed(error: Exception, message: str, trace: TraceFields) -> DocumentRagResponse:
    """The last message of a failed query (naming its trace when one was stored)."""
    return DocumentRagResponse(message_type="chunk", error=Error("document-rag-error", message), end_of_stream=True,
                               end_of_session=True, **trace)


class DocumentRag:
    """Runs DocumentRAG queries; ports as for GraphRAG plus ``find_chunks`` and ``get_content``."""

    def __init__(self, ports, settings: DocumentRagSettings | None = None):
        self.ports = ports
        self.settings = settings or DocumentRagSettings()

    async def query(self, req: DocumentRagQuery, emit) -> None:
        s = self.settings
        session_id = uris.new_id()
        q_uri = uris.docrag_question_uri(session_id)
        session = QuerySession(self.ports, emit, response=DocumentRagResponse, user=req.user,
                               collection=req.explain_collection or s.explain_collection or req.collection,
                               question_uri=q_uri, explainable=req.explainable, streaming=req.streaming,
                               subject=f"document-rag query {q_uri}", failure=_failed)
        await session.run(lambda: self._answer(req, session, session_id))

    async def _answer(self, req: DocumentRagQuery, session: QuerySession, session_id: str) -> None:
        q_uri = session.question_uri
        check_question(req.query)
        check_names(req.user, req.collection)  # before anything is stored
        if session.explainable:
            telemetry.set_explain_id(q_uri)
        await session.explain(q_uri, docrag_question_triples(q_uri, req.query, parent_uri=req.parent_uri,
                                                             otel_trace_id=telemetry.current_trace_id()))
        g_uri = uris.docrag_grounding_uri(session_id)
        await session.explain(g_uri, grounding_triples(g_uri, q_uri, [req.query]))
        session.stage = "exploration"
        vector = await self.ports.embed(req.query)
        matches = await self.ports.find_chunks(req.user, req.collection, vector,
                                               req.doc_limit or self.settings.doc_limit)
        texts = await asyncio.gather(*(self.ports.get_content(req.user, m.chunk_id, req.collection)
                                       for m in matches))
        docs = [{"id": m.chunk_id, "text": t.decode("utf-8", "replace"), "score": round(float(m.score), 4)}
                for m, t in zip(matches, texts, strict=True)]
        telemetry.set_attributes({"trustgraph.document_rag.chunks_used": len(docs)})
        exp_uri = uris.docrag_exploration_uri(session_id)
        await session.explain(exp_uri, docrag_exploration_triples(exp_uri, q_uri, [m.chunk_id for m in matches],
                                                                  grounding_uri=g_uri))
        session.stage = "synthesis"
        usage = None  # the synthesis model call's (none without chunks: no model is asked)
        if not docs:
            await session.add_answer(NO_DOCUMENTS_ANSWER)
        else:
            async for item in self.ports.prompt_stream("document-prompt", {"query": req.query, "documents": docs}):
                if isinstance(item, PromptOutcome):
                    session.count(item)
                    usage = LlmUsage(item.in_token, item.out_token, item.model)
                elif item:
                    await session.add_answer(item)
        text = session.answer()
        await session.end_answer(text)
        if session.explainable:
            doc_uri = uris.docrag_answer_uri(session_id)
            syn_uri = uris.docrag_synthesis_uri(session_id)
            await session.explain(syn_uri, docrag_synthesis_triples(syn_uri, exp_uri, text, doc_uri, usage=usage),
                                  answer=(doc_uri, text))
        sources: dict[str, Source] = {}
        for m in matches:
            sources.setdefault(m.document_id, Source(uri=m.document_id))
        await session.close(DocumentRagResponse(message_type="chunk", end_of_session=True, **session.usage(),
                                                sources=[v for k, v in sources.items() if k]))
