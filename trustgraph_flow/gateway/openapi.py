"""The OpenAPI 3.0 document of the gateway's REST part (served at ``/api/v1/openapi.json``).

It describes what the gateway accepts, field by field, so that a client generator or a fuzzer
(``schemathesis``, in the tests) can drive it; keys not listed are ignored, as TrustGraph's
own translators ignore them.
"""

from __future__ import annotations

from .translate import MAX_QUESTION_CHARS, MAX_RAG_LIMIT, MAX_TRIPLES_LIMIT, RAG_LIMITS

_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"}
_WORKSPACE = {"type": "string", "description": "'default' = the token's user (or the default user)"}
_LIMIT = {"type": "integer", "minimum": 0, "maximum": MAX_RAG_LIMIT}


def _limit(key: str) -> dict:
    return {"type": "integer", "minimum": 0, "maximum": RAG_LIMITS.get(key, MAX_RAG_LIMIT)}


_QUERY = {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS}

_TERM = {
    "type": "object",
    "description": "An RDF term: t = i (IRI in 'i'), l (literal 'v', 'dt', 'ln'), b (blank 'd'), t (triple 'tr')",
    "properties": {"t": {"type": "string", "enum": ["i", "l", "b", "t"]}, "i": {"type": "string"},
                   "v": {"type": "string"}, "dt": {"type": "string"}, "ln": {"type": "string"},
                   "d": {"type": "string"}, "tr": {"type": "object"}},
    "required": ["t"],
}
_QUAD = {"type": "object", "properties": {"s": {"$ref": "#/components/schemas/Term"},
                                          "p": {"$ref": "#/components/schemas/Term"},
                                          "o": {"$ref": "#/components/schemas/Term"},
                                          "g": {"type": "string", "description": "absent = the default graph"}}}
_ERROR = {"type": "object", "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
          "required": ["type", "message"]}

_REQUESTS = {
    "graph-rag": {
        "type": "object", "required": ["query"],
        "properties": {"workspace": _WORKSPACE, "query": _QUERY, "collection": _NAME,
                       **{k: _limit(k) for k in ("entity-limit", "triple-limit", "max-subgraph-size",
                                                 "max-path-length", "edge-limit")},
                       "edge-score-limit": _LIMIT, "max-reranker-input": _LIMIT, "streaming": {"type": "boolean"},
                       "explainable": {"type": "boolean"}},
    },
    "document-rag": {
        "type": "object", "required": ["query"],
        "properties": {"workspace": _WORKSPACE, "query": _QUERY, "collection": _NAME,
                       "doc-limit": _limit("doc-limit"), "fetch-limit": _LIMIT, "streaming": {"type": "boolean"},
                       "explainable": {"type": "boolean"}},
    },
    "agent": {
        "type": "object", "required": ["question"],
        "properties": {"workspace": _WORKSPACE, "question": _QUERY, "collection": _NAME,
                       "state": {"type": "string"}, "group": {"type": "array", "items": {"type": "string"}},
                       "session_id": {"type": "string", "maxLength": 128}, "streaming": {"type": "boolean"},
                       "pattern": {"type": "string", "enum": ["react", "plan-then-execute", "supervisor"]}},
    },
    "triples": {
        "type": "object",
        "properties": {"workspace": _WORKSPACE, "collection": _NAME, "s": {"$ref": "#/components/schemas/Term"},
                       "p": {"$ref": "#/components/schemas/Term"}, "o": {"$ref": "#/components/schemas/Term"},
                       "g": {"type": "string", "description": "absent: default graph when s/p/o is bound, else all "
                                                              "graphs; '*' = all graphs"},
                       "limit": {"type": "integer", "minimum": 1, "maximum": MAX_TRIPLES_LIMIT}},
    },
}

_RESPONSES = {
    "graph-rag": {"type": "object", "properties": {"response": {"type": "string"}, "sources": {"type": "array"},
                                                   "error": {"$ref": "#/components/schemas/Error"}}},
    "document-rag": {"type": "object", "properties": {"response": {"type": "string"},
                                                      "error": {"$ref": "#/components/schemas/Error"}}},
    "agent": {"type": "object", "properties": {"content": {"type": "string"},
                                               "error": {"$ref": "#/components/schemas/Error"}}},
    "triples": {"type": "object", "properties": {"response": {"type": "array",
                                                              "items": {"$ref": "#/components/schemas/Quad"}},
                                                 "error": {"$ref": "#/components/schemas/Error"}}},
}

_LIBRARIAN = {
    "type": "object", "required": ["operation"],
    "properties": {
        "operation": {"type": "string", "enum": ["get-document-content", "get-document-metadata", "get-document",
                                                 "list-documents", "add-document", "add-processing",
                                                 "remove-document"]},
        "workspace": _WORKSPACE,
        "document-id": {"type": "string", "minLength": 1, "maxLength": 1024},
        "collection": _NAME,
        "content": {"type": "string", "format": "byte"},
        "document-metadata": {
            "type": "object", "required": ["id"],
            "properties": {"id": {"type": "string", "minLength": 1, "maxLength": 1024},
                           "time": {"type": "integer", "minimum": 0}, "kind": {"type": "string"},
                           "title": {"type": "string"}, "comments": {"type": "string"},
                           "metadata": {"type": "array", "items": {"$ref": "#/components/schemas/Quad"}},
                           "tags": {"type": "array", "items": {"type": "string"}}}},
        "processing-metadata": {
            "type": "object", "required": ["document-id"],
            "properties": {"id": {"type": "string"}, "document-id": {"type": "string", "minLength": 1},
                           "flow": {"type": "string"}, "collection": _NAME,
                           "time": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}},
    },
}

_WHOAMI = {
    "type": "object", "required": ["user", "flow", "max_frame_bytes", "max_message_bytes", "max_outstanding"],
    "properties": {"user": {"type": "string", "nullable": True}, "flow": {"type": "string"},
                   "max_frame_bytes": {"type": "integer"}, "max_message_bytes": {"type": "integer"},
                   "max_outstanding": {"type": "integer"}},
}


def _json(schema: dict) -> dict:
    return {"content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict:
    return {"description": description, **_json({"type": "object", "properties": {
        "error": {"$ref": "#/components/schemas/Error"}}})}


def _post(summary: str, request: dict, response: dict) -> dict:
    return {"post": {
        "summary": summary,
        "requestBody": {"required": True, **_json(request)},
        "responses": {
            "200": {"description": "the reply; a refused or failed request has 'error' {type, message}",
                    **_json(response)},
            "400": _error("the body is not a JSON object"),
            "401": _error("no token or an unknown token (when the gateway has tokens)"),
            "403": _error("the workspace is not the token's"),
            "413": {"description": "the body is larger than the limit"},
        },
    }}


def openapi_document(flow: str = "default") -> dict:
    """The document; ``flow`` is the one flow this gateway serves."""
    paths = {}
    for kind, request in _REQUESTS.items():
        op = _post(f"{kind}: one request, all replies aggregated into one body", request, _RESPONSES[kind])
        op["post"]["parameters"] = [{"name": "flow", "in": "path", "required": True,
                                     "schema": {"type": "string", "enum": [flow]}}]
        paths[f"/api/v1/flow/{{flow}}/service/{kind}"] = op
    paths["/api/v1/librarian"] = _post("librarian: documents of the workspace's user", _LIBRARIAN,
                                       {"type": "object"})
    paths["/api/v1/whoami"] = {"get": {
        "summary": "whose the token is (null: no tokens configured), the flow served and the largest message a "
                   "frame of /api/v1/native carries; this project's tg-* commands ask before they start",
        "responses": {"200": {"description": "the caller", **_json(_WHOAMI)},
                      "401": _error("no token or an unknown token (when the gateway has tokens)")}}}
    paths["/api/v1/openapi.json"] = {"get": {"summary": "this document", "security": [],
                                             "responses": {"200": {"description": "OpenAPI 3.0 document"}}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "trustgraph-explain api-gateway",
                 "description": "TrustGraph 2.11.1's gateway protocol (REST part); the WebSocket /api/v1/socket "
                                "carries the same requests, and /api/v1/native (with /api/v1/whoami) this "
                                "project's own messages for its tg-* commands; see docs/gateway.md",
                 "version": "1"},
        "paths": paths,
        "components": {"schemas": {"Term": _TERM, "Quad": _QUAD, "Error": _ERROR},
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }
