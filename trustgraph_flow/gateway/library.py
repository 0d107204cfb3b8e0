"""TrustGraph's librarian operations on this project's librarian, whose documents live in collections.

TrustGraph's librarian requests name a workspace but **no collection**; here every document
belongs to a user *and* a collection.  So:

* a look-up by id (``get-document-content``, ``get-document-metadata``) asks the librarian
  which of the user's collections hold the id (``find-document``, within that one user) and
  reads it there; an id held by several collections with different content is refused as
  ambiguous rather than answered from a guess;
* ``add-document`` stages the document in the gateway's library collection (``default``
  unless configured otherwise), where ``list-documents`` and ``remove-document`` work too;
* ``add-processing`` names the flow and the target collection: a document not yet in that
  collection is copied there (same id, same content), then ``process-document`` runs the
  ingestion pipeline in the target collection.  The staged copy stays in the library.

Operations TrustGraph has and this gateway does not serve (chunked uploads, processing
records) are refused with ``request-error`` naming the operation.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from typing import Any

from trustgraph_base.schema import DocumentMetadata, LibrarianRequest, LibrarianResponse
from trustgraph_base.schema.library import SOURCE

from .terms import quad_from_wire, quad_to_wire
from .translate import collection_of
from .wire import GATEWAY_ERROR, GatewayRequestError

LibrarianCall = Callable[[LibrarianRequest], Awaitable[LibrarianResponse]]

OPERATIONS = ("get-document-content", "get-document-metadata", "get-document", "list-documents", "add-document",
              "add-processing", "remove-document")
#: The most metadata triples one document may carry.
MAX_METADATA_TRIPLES = 10_000


def _text(data: dict, key: str, what: str, required: bool = False, limit: int = 4096) -> str:
    value = data.get(key, "")
    if value is None:
        value = ""
    if type(value) is not str or len(value) > limit:
        raise GatewayRequestError(f"{what}: '{key}' must be a string of at most {limit} characters")
    if required and not value:
        raise GatewayRequestError(f"{what}: '{key}' is required")
    return value


def document_id_of(body: dict) -> str:
    return _text(body, "document-id", "librarian", required=True, limit=1024)


def metadata_from_wire(data: Any) -> DocumentMetadata:
    """TrustGraph's ``document-metadata`` -> :class:`DocumentMetadata` (a source document)."""
    what = "document-metadata"
    if type(data) is not dict:
        raise GatewayRequestError(f"'{what}' must be an object")
    doc_id = _text(data, "id", what, limit=1024) or _text(data, "document-id", what, required=True, limit=1024)
    time = data.get("time", 0)
    if type(time) not in (int, float) or not 0 <= time < 1e11:
        raise GatewayRequestError(f"{what}: 'time' must be seconds since 1970")
    triples = data.get("metadata") or []
    if type(triples) is not list or len(triples) > MAX_METADATA_TRIPLES:
        raise GatewayRequestError(f"{what}: 'metadata' must be a list of at most {MAX_METADATA_TRIPLES} triples")
    tags = data.get("tags") or []
    if type(tags) is not list or not all(type(t) is str and len(t) <= 256 for t in tags) or len(tags) > 256:
        raise GatewayRequestError(f"{what}: 'tags' must be a list of strings")
    return DocumentMetadata(id=doc_id, time=float(time), kind=_text(data, "kind", what, limit=256),
                            title=_text(data, "title", what), comments=_text(data, "comments", what),
                            metadata=[quad_from_wire(t, f"{what}.metadata[{i}]") for i, t in enumerate(triples)],
                            tags=list(tags), document_type=SOURCE)


def metadata_to_wire(meta: DocumentMetadata) -> dict:
    """:class:`DocumentMetadata` -> TrustGraph's ``document-metadata``."""
    out = {"id": meta.id, "time": int(meta.time), "kind": meta.kind, "title": meta.title,
           "comments": meta.comments, "metadata": [quad_to_wire(t) for t in meta.metadata], "tags": list(meta.tags)}
    if meta.parent_id:
        out["parent-id"] = meta.parent_id
    return out


def content_of(body: dict) -> bytes:
    value = body.get("content")
    if type(value) is not str:
        raise GatewayRequestError("add-document: 'content' must be the document, base64-encoded")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise GatewayRequestError("add-document: 'content' is not valid base64") from None


class Library:
    """Serves TrustGraph's librarian body for one user through ``call`` (a librarian request/response).

    :param call: sends one :class:`LibrarianRequest` and returns the reply, raising
        :class:`~trustgraph_base.processor.ServiceError` for an error reply.
    :param flow: the flow this gateway serves (``add-processing`` must name it).
    :param library_collection: where ``add-document`` stages documents.
    """

    def __init__(self, call: LibrarianCall, flow: str, library_collection: str = "default"):
        self.call = call
        self.flow = flow
        self.library_collection = library_collection

    async def handle(self, body: Any, user: str) -> dict:
        """The reply body for ``body``; raises :class:`GatewayRequestError` or ``ServiceError``."""
        if type(body) is not dict:
            raise GatewayRequestError("librarian: the request must be an object")
        op = body.get("operation")
        handler = self._HANDLERS.get(op) if type(op) is str else None
        if handler is None:
            raise GatewayRequestError(f"librarian: operation {str(op)[:60]!r} is not supported by this gateway; "
                                      f"it serves {', '.join(OPERATIONS)}")
        return await handler(self, body, user)

    async def _request(self, op: str, user: str, collection: str, **kw) -> LibrarianResponse:
        return await self.call(LibrarianRequest(operation=op, user=user, collection=collection, **kw))

    async def _document_metadata(self, user: str, collection: str, document_id: str) -> DocumentMetadata:
        resp = await self._request("get-document-metadata", user, collection, document_id=document_id)
        meta = resp.document_metadata
        if meta is None:
            raise GatewayRequestError(f"the librarian sent no metadata for {document_id[:200]!r}", GATEWAY_ERROR)
        return meta

    async def locate(self, user: str, document_id: str) -> str:
        """The collection of ``user`` holding ``document_id`` (see the module docstring)."""
        found = (await self._request("find-document", user, self.library_collection,
                                     document_id=document_id)).collections
        if not found:
            raise GatewayRequestError(f"document {document_id[:200]!r} not found", "not-found")
        if len(found) == 1:
            return found[0]
        metas = [await self._document_metadata(user, c, document_id) for c in found]
        if len({m.sha256 for m in metas}) > 1:
            raise GatewayRequestError(
                f"document {document_id[:200]!r} exists with different content in collections "
                f"{', '.join(found)}; a request without a collection cannot choose", GATEWAY_ERROR)
        return self.library_collection if self.library_collection in found else found[0]

    async def _content(self, body: dict, user: str) -> dict:
        doc_id = document_id_of(body)
        resp = await self._request("get-document-content", user, await self.locate(user, doc_id), document_id=doc_id)
        return {"content": base64.b64encode(resp.content).decode("ascii")}

    async def _metadata(self, body: dict, user: str) -> dict:
        doc_id = document_id_of(body)
        return {"document-metadata": metadata_to_wire(await self._document_metadata(
            user, await self.locate(user, doc_id), doc_id))}

    async def _list(self, body: dict, user: str) -> dict:
        collection = collection_of(body) if body.get("collection") else self.library_collection
        resp = await self._request("list-documents", user, collection)
        return {"document-metadatas": [metadata_to_wire(m) for m in resp.document_metadatas]}

    async def _add(self, body: dict, user: str) -> dict:
        meta = metadata_from_wire(body.get("document-metadata"))
        content = content_of(body)
        await self._request("add-document", user, self.library_collection, document_metadata=meta, content=content)
        return {}

    async def _remove(self, body: dict, user: str) -> dict:
        await self._request("remove-document", user, self.library_collection, document_id=document_id_of(body))
        return {}

    async def _process(self, body: dict, user: str) -> dict:
        pm = body.get("processing-metadata")
        if type(pm) is not dict:
            raise GatewayRequestError("add-processing: 'processing-metadata' must be an object")
        doc_id = document_id_of(pm)
        flow = _text(pm, "flow", "processing-metadata", limit=64) or self.flow
        if flow != self.flow:
            raise GatewayRequestError(f"add-processing: flow {flow!r} is not served here (this gateway serves "
                                      f"{self.flow!r})")
        target = collection_of(pm)
        found = (await self._request("find-document", user, target, document_id=doc_id)).collections
        if not found:
            raise GatewayRequestError(f"document {doc_id[:200]!r} not found", "not-found")
        if target not in found:
            source = await self.locate(user, doc_id)
            meta = await self._document_metadata(user, source, doc_id)
            if meta.document_type != SOURCE:
                raise GatewayRequestError(f"{doc_id[:200]!r} is a {meta.document_type}, not a source document")
            content = (await self._request("get-document-content", user, source, document_id=doc_id)).content
            await self._request("add-document", user, target, document_metadata=meta, content=content)
        await self._request("process-document", user, target, document_id=doc_id)
        return {}

    _HANDLERS = {"get-document-content": _content, "get-document-metadata": _metadata, "get-document": _metadata,
                 "list-documents": _list, "add-document": _add, "add-processing": _process,
                 "remove-document": _remove}


__all__ = ["Library", "OPERATIONS", "metadata_from_wire", "metadata_to_wire"]
