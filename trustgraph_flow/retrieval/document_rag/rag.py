"""One DocumentRAG query against abstract ports, with explain events.

Order on the response stream: explain(question) -> explain(exploration: the chunks used, by
their extraction-provenance URIs) -> chunk... -> explain(synthesis: the answer text and its
librarian copy) -> final ``end_of_session=True``.  Errors end the session too, and the trace
records how far the query got.  The librarian copy and the Synthesis travel in one queued
message: the librarian stores the copy, then passes the Synthesis on to the triple store.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from trustgraph_base.provenance import uris
from trustgraph_base.provenance.namespaces import GRAPH_RETRIEVAL
from trustgraph_base.store.triples import check_names
from trustgraph_base.provenance.triples import (
    docrag_exploration_triples, docrag_question_triples, docrag_synthesis_triples, error_triples,
)
from trustgraph_base.schema import DocumentRagQuery, DocumentRagResponse, Error, Source, Triple

from ...common.background_writes import BackgroundWrites, stage_write
from ...common.response_stream import ResponseStream
from ..graph_rag.rag import NO_ANSWER_ERROR, PromptOutcome, query_size_error

log = logging.getLogger(__name__)

NO_DOCUMENTS_ANSWER = "I found no relevant passages in the documents to answer this question."


@dataclass
class DocumentRagSettings:
    doc_limit: int = 10
    explain_collection: str = ""


class DocumentRag:
    """Runs DocumentRAG queries; ports as for GraphRAG plus ``find_chunks`` and ``get_content``."""

    def __init__(self, ports, settings: DocumentRagSettings | None = None):
        self.ports = ports
        self.settings = settings or DocumentRagSettings()

    async def query(self, req: DocumentRagQuery, emit) -> None:
        s = self.settings
        explain = req.explainable
        collection = req.explain_collection or s.explain_collection or req.collection
        session = uris.new_id()
        q_uri = uris.docrag_question_uri(session)
        stage = "question"
        usage = PromptOutcome()
        writes = BackgroundWrites()  # explain triples on their way to storage
        stream = ResponseStream(emit)  # explain events are queued, other messages follow them

        async def explain_stage(uri: str, triples: list[Triple], answer: tuple[str, str] | None = None) -> None:
            """Send a stage to the client and to storage; ``answer`` = (document URI, text) it points at."""
            if not explain:
                return
            msg = DocumentRagResponse(message_type="explain", explain_id=uri, explain_collection=collection,
                                      explain_graph=GRAPH_RETRIEVAL, explain_triples=triples)
            # To storage and to the client at once, neither awaited here; the final message waits for both.
            writes.start(uri, stage_write(self.ports, req.user, collection, uri, triples, answer))
            stream.send_soon(msg)

        try:
            if not req.query.strip():
                raise ValueError("the query is empty")
            if query_size_error(req.query):
                raise ValueError(query_size_error(req.query))
            check_names(req.user, req.collection)  # before anything is stored
            await explain_stage(q_uri, docrag_question_triples(q_uri, req.query, parent_uri=req.parent_uri))
            stage = "exploration"
            vector = await self.ports.embed(req.query)
            matches = await self.ports.find_chunks(req.user, req.collection, vector, req.doc_limit or s.doc_limit)
            texts = await asyncio.gather(*(self.ports.get_content(req.user, m.chunk_id, req.collection)
                                           for m in matches))
            docs = [{"id": m.chunk_id, "text": t.decode("utf-8", "replace"), "score": round(float(m.score), 4)}
                    for m, t in zip(matches, texts)]
            exp_uri = uris.docrag_exploration_uri(session)
            await explain_stage(exp_uri, docrag_exploration_triples(exp_uri, q_uri, [m.chunk_id for m in matches]))
            stage = "synthesis"
            answer = []
            if not docs:
                answer.append(NO_DOCUMENTS_ANSWER)
                if req.streaming:
                    await stream.send(DocumentRagResponse(message_type="chunk", response=NO_DOCUMENTS_ANSWER))
            else:
                leading = ""  # whitespace before the first text: sent with it, never alone
                async for item in self.ports.prompt_stream("document-prompt", {"query": req.query, "documents": docs}):
                    if isinstance(item, PromptOutcome):
                        usage = item
                    elif item:
                        answer.append(item)
                        if req.streaming:
                            if leading is not None and not item.strip():
                                leading += item  # only whitespace so far: not an answer yet
                                continue
                            await stream.send(DocumentRagResponse(message_type="chunk",
                                                                  response=(leading or "") + item))
                            leading = None
            text = "".join(answer)
            if not text.strip():  # an empty answer is a failed synthesis, never an answer
                raise ValueError(NO_ANSWER_ERROR)
            await stream.send(DocumentRagResponse(message_type="chunk", response="" if req.streaming else text,
                                                  end_of_stream=True))
            if explain:
                doc_uri = uris.docrag_answer_uri(session)
                syn_uri = uris.docrag_synthesis_uri(session)
                await explain_stage(syn_uri, docrag_synthesis_triples(syn_uri, exp_uri, text, doc_uri,
                                                                      llm_model=usage.model),
                                    answer=(doc_uri, text))
                await writes.wait()  # end_of_session means: the whole trace is on its way to storage
            sources = {}
            for m in matches:
                sources.setdefault(m.document_id, Source(uri=m.document_id))
            await stream.send(DocumentRagResponse(message_type="chunk", end_of_session=True,
                                                  in_token=usage.in_token, out_token=usage.out_token,
                                                  model=usage.model, sources=[v for k, v in sources.items() if k]))
        except Exception as e:  # noqa: BLE001 - every failure ends the session with an error
            message = str(e) or type(e).__name__
            log.warning("document-rag query %s failed at %s: %s", q_uri, stage, message)
            await writes.settle()
            last_uri = writes.last_written  # the Error follows the last stage that reached storage
            if explain and last_uri:
                err_uri = uris.docrag_error_uri(session)
                try:
                    await explain_stage(err_uri, error_triples(err_uri, last_uri, message, stage))
                except Exception as e2:  # noqa: BLE001
                    log.error("could not record the error of %s: %s", q_uri, e2)
                await writes.settle()
            await stream.settle()  # the queued explain events first; one that failed is logged
            await stream.send(DocumentRagResponse(message_type="chunk", error=Error("document-rag-error", message),
                                                  end_of_stream=True, end_of_session=True,
                                                  explain_id=q_uri if last_uri else "",
                                                  explain_collection=collection if last_uri else "",
                                                  explain_graph=GRAPH_RETRIEVAL if last_uri else ""))
