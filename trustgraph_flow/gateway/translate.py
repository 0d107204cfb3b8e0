"""Request bodies and responses of the flow services: TrustGraph's JSON <-> this project's dataclasses.

TrustGraph's client writes hyphenated keys (``entity-limit``, ``doc-limit``, ``batch-size``)
where this project's fields use underscores; responses keep the field names both sides share
(``message_type``, ``explain_id``, ``end_of_session``, ...) and re-encode the explain quads.
Keys a service here has no use for (``edge-score-limit``, ``max-reranker-input``,
``fetch-limit``) are accepted and ignored; options whose meaning this project cannot honour
(GraphRAG seeds, languages, traversal instructions, a named graph; an agent pattern other than
react, plan-then-execute and supervisor) are refused with ``request-error`` rather than silently
answered differently.  Unknown keys are ignored, as TrustGraph's own translators do.

``g`` of a triples query follows TrustGraph's server: absent with something bound = the
default graph, absent with nothing bound = all graphs, ``"*"`` = all graphs; this project
writes the default graph ``""`` and all graphs ``None`` (``docs/gateway.md``).  One exception:
a label look-up (``s`` and ``p = rdfs:label`` bound, no ``g``) reads every graph, because this
project keeps the labels of documents, pages, chunks and subgraphs with their extraction
provenance in ``urn:graph:source``, and TrustGraph's explain tools name provenance hops by label.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from trustgraph_base.provenance.namespaces import RDFS_LABEL
from trustgraph_base.schema import (
    AgentRequest,
    AgentResponse,
    AgentStep,
    DocumentRagQuery,
    DocumentRagResponse,
    GraphRagQuery,
    GraphRagResponse,
    TriplesQueryRequest,
    TriplesQueryResponse,
)
from trustgraph_base.store.names import InvalidName, check_collection

from .terms import quad_to_wire, term_from_wire
from .wire import GatewayRequestError

#: Services reached on a flow (``flow`` in the frame, ``/api/v1/flow/{flow}/service/{kind}``).
FLOW_SERVICES = ("graph-rag", "document-rag", "agent", "triples")
#: The most triples one query may ask for (TrustGraph's default is 10,000).
MAX_TRIPLES_LIMIT = 100_000
DEFAULT_TRIPLES_LIMIT = 10_000
#: Largest value a numeric RAG limit may take, unless :data:`RAG_LIMITS` says less.
MAX_RAG_LIMIT = 100_000
#: Bounds of the RAG limits a client may set (0 = the service's default): the vector indexes
#: return at most 1,000 matches, and paths, subgraphs and edge selections beyond these sizes
#: only make a query slower, so a network client cannot ask for more.
RAG_LIMITS = {"entity-limit": 1000, "doc-limit": 1000, "triple-limit": 1000, "max-subgraph-size": 10_000,
              "max-path-length": 5, "edge-limit": 1000}
#: Longest question accepted here (the services refuse the same length, after the gateway).
MAX_QUESTION_CHARS = 100_000

_GRAPH_RAG_INTS = {"entity-limit": "entity_limit", "triple-limit": "triple_limit",
                   "max-subgraph-size": "max_subgraph_size", "max-path-length": "max_path_length",
                   "edge-limit": "edge_limit"}
_GRAPH_RAG_IGNORED_INTS = ("edge-score-limit", "max-reranker-input")
_GRAPH_RAG_REFUSED = ("grounding-seeds", "graph-seeds", "languages", "traversal-instructions", "graph",
                      "user-context")


# ------------------------------------------------------------------------------- field readers

def _int(body: dict, key: str, default: int, lo: int = 0, hi: int | None = None) -> int:
    hi = RAG_LIMITS.get(key, MAX_RAG_LIMIT) if hi is None else hi
    value = body.get(key, default)
    if type(value) is not int or not lo <= value <= hi:
        raise GatewayRequestError(f"'{key}' must be an integer from {lo} to {hi}, got {str(value)[:40]!r}")
    return value


def _bool(body: dict, key: str, default: bool = False) -> bool:
    value = body.get(key, default)
    if type(value) is not bool:
        raise GatewayRequestError(f"'{key}' must be true or false, got {str(value)[:40]!r}")
    return value


def _str(body: dict, key: str, default: str = "", required: bool = False, limit: int = 1024) -> str:
    value = body.get(key, default)
    if value is None and not required:
        value = default
    if type(value) is not str:
        raise GatewayRequestError(f"'{key}' must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise GatewayRequestError(f"'{key}' is required and must not be empty")
    if len(value) > limit:
        raise GatewayRequestError(f"'{key}' is longer than {limit} characters")
    return value


def collection_of(body: dict) -> str:
    """The request's collection (``default`` when absent), validated like every name here."""
    value = _str(body, "collection", "default", limit=64)
    try:
        return check_collection(value)
    except InvalidName as e:
        raise GatewayRequestError(str(e)) from None


def _refuse(body: dict, keys: tuple[str, ...], service: str) -> None:
    for key in keys:
        if body.get(key) not in (None, [], "", {}):
            raise GatewayRequestError(f"{service}: '{key}' is not supported by this gateway")


# ------------------------------------------------------------------------------------ requests

def graph_rag_request(body: dict, user: str) -> GraphRagQuery:
    """``graph-rag`` body -> :class:`GraphRagQuery` (always explainable: the client filters explain events)."""
    _refuse(body, _GRAPH_RAG_REFUSED, "graph-rag")
    for key in _GRAPH_RAG_IGNORED_INTS:
        _int(body, key, 0)
    _bool(body, "explainable", True)
    limits = {field: _int(body, key, 0) for key, field in _GRAPH_RAG_INTS.items()}
    return GraphRagQuery(query=_str(body, "query", required=True, limit=MAX_QUESTION_CHARS), user=user,
                         collection=collection_of(body), streaming=_bool(body, "streaming"), explainable=True,
                         entity_limit=limits["entity_limit"], triple_limit=limits["triple_limit"],
                         max_subgraph_size=limits["max_subgraph_size"], max_path_length=limits["max_path_length"],
                         edge_limit=limits["edge_limit"])


def document_rag_request(body: dict, user: str) -> DocumentRagQuery:
    """``document-rag`` body -> :class:`DocumentRagQuery` (``fetch-limit`` has no counterpart here)."""
    _int(body, "fetch-limit", 0)
    _bool(body, "explainable", True)
    _refuse(body, ("user-context",), "document-rag")
    return DocumentRagQuery(query=_str(body, "query", required=True, limit=MAX_QUESTION_CHARS), user=user,
                            collection=collection_of(body), doc_limit=_int(body, "doc-limit", 0),
                            streaming=_bool(body, "streaming"), explainable=True)


def _history(value: Any) -> list[AgentStep]:
    if value in (None, []):
        return []
    if type(value) is not list:
        raise GatewayRequestError("'history' must be a list of steps")
    steps = []
    for i, step in enumerate(value):
        if type(step) is not dict:
            raise GatewayRequestError(f"history[{i}] must be an object")
        args = step.get("arguments", {}) or {}
        if type(args) is not dict or not all(type(k) is str and type(v) is str for k, v in args.items()):
            raise GatewayRequestError(f"history[{i}].arguments must map names to strings")
        steps.append(AgentStep(thought=_str(step, "thought", limit=MAX_QUESTION_CHARS),
                               action=_str(step, "action"), arguments=dict(args),
                               observation=_str(step, "observation", limit=MAX_QUESTION_CHARS)))
    return steps


def _group(value: Any) -> list[str]:
    if value in (None, "", []):
        return []
    if type(value) is str:
        value = [value]
    if type(value) is not list or not all(type(g) is str and 0 < len(g) <= 128 for g in value) or len(value) > 64:
        raise GatewayRequestError("'group' must be a list of tool group names")
    return list(value)


def agent_request(body: dict, user: str) -> AgentRequest:
    """``agent`` body -> :class:`AgentRequest`; a request without ``session_id`` gets a new one, so
    every agent call through the gateway records its trace, as TrustGraph's agent service does."""
    pattern = _str(body, "pattern")
    if pattern not in ("", "react", "plan-then-execute", "supervisor"):
        raise GatewayRequestError(f"agent: pattern {pattern[:40]!r} is not supported "
                                  "(use react, plan-then-execute or supervisor)")
    _refuse(body, ("plan", "conversation_id", "parent_session_id", "subagent_goal"), "agent")
    session_id = _str(body, "session_id", limit=128) or str(uuid.uuid4())
    return AgentRequest(question=_str(body, "question", required=True, limit=MAX_QUESTION_CHARS),
                        state=_str(body, "state"), group=_group(body.get("group")),
                        history=_history(body.get("history")), user=user, collection=collection_of(body),
                        streaming=_bool(body, "streaming"), session_id=session_id, pattern=pattern)


def graph_of(body: dict) -> str | None:
    """This project's ``g`` for TrustGraph's (see the module docstring)."""
    if "g" not in body or body["g"] is None:
        return "" if any(body.get(k) is not None for k in ("s", "p", "o")) else None
    g = body["g"]
    if type(g) is not str or len(g) > 1024:
        raise GatewayRequestError("'g' must be a graph IRI, \"\" or \"*\"")
    return None if g == "*" else g


def triples_request(body: dict, user: str) -> TriplesQueryRequest:
    """``triples`` body -> :class:`TriplesQueryRequest`.  The services are always asked for a
    stream (``batch-size`` rows a message), so a large result never becomes one oversized message;
    the gateway joins the batches again for a client that did not ask for streaming."""
    s, p, o = (term_from_wire(body[k], k) if body.get(k) is not None else None for k in ("s", "p", "o"))
    _refuse(body, ("user-context",), "triples")
    streaming = _bool(body, "streaming")
    g = graph_of(body)
    if body.get("g") is None and s is not None and o is None and p is not None and p.value == RDFS_LABEL:
        g = None  # a label look-up: provenance hops keep their labels in urn:graph:source (module docstring)
    return TriplesQueryRequest(user=user, collection=collection_of(body), s=s, p=p, o=o, g=g,
                               limit=_int(body, "limit", DEFAULT_TRIPLES_LIMIT, 1, MAX_TRIPLES_LIMIT),
                               streaming=True, batch_size=_int(body, "batch-size", 20 if streaming else 1000, 1,
                                                               10_000))


REQUESTS = {"graph-rag": graph_rag_request, "document-rag": document_rag_request, "agent": agent_request,
            "triples": triples_request}


def flow_request(service: str, body: Any, user: str):
    """The dataclass request for ``service`` from TrustGraph's body (:class:`GatewayRequestError` if unusable)."""
    translate = REQUESTS.get(service)
    if translate is None:
        raise GatewayRequestError(f"unknown service {str(service)[:60]!r}; this gateway serves "
                                  f"{', '.join(FLOW_SERVICES)} and librarian")
    if type(body) is not dict:
        raise GatewayRequestError(f"{service}: 'request' must be an object")
    return translate(body, user)


# ----------------------------------------------------------------------------------- responses

def _usage(resp, out: dict) -> None:
    """TrustGraph's clients expect numbers: a count the endpoint did not report goes out as 0 (docs/gateway.md)."""
    if resp.in_token or resp.out_token or resp.model:
        out.update(in_token=resp.in_token or 0, out_token=resp.out_token or 0, model=resp.model)


def _explain(resp, out: dict) -> None:
    if resp.explain_id:
        out["explain_id"] = resp.explain_id
        out["explain_graph"] = resp.explain_graph
        out["explain_triples"] = [quad_to_wire(t) for t in resp.explain_triples]


def rag_response(resp: GraphRagResponse | DocumentRagResponse) -> dict:
    """A GraphRAG/DocumentRAG message as TrustGraph's client reads it (``explain_collection`` and
    ``edge_sources`` are this project's own and are left out)."""
    out: dict[str, Any] = {"message_type": resp.message_type}
    if resp.response:
        out["response"] = resp.response
    _explain(resp, out)
    out["end_of_stream"] = resp.end_of_stream
    out["end_of_session"] = resp.end_of_session
    _usage(resp, out)
    if resp.sources:
        out["sources"] = [{"uri": s.uri, "title": s.title} for s in resp.sources]
    return out


def agent_response(resp: AgentResponse) -> dict:
    out: dict[str, Any] = {"message_type": resp.message_type}
    if resp.content:
        out["content"] = resp.content
    out["end_of_message"] = resp.end_of_message
    out["end_of_dialog"] = resp.end_of_dialog
    if resp.message_id:
        out["message_id"] = resp.message_id
    _explain(resp, out)
    _usage(resp, out)
    return out


def triples_response(resp: TriplesQueryResponse) -> dict:
    return {"response": [quad_to_wire(t) for t in resp.triples]}


#: Service -> the ``response`` of its reply frame.
RESPONSES: dict[str, Callable[[Any], dict[str, Any]]] = {
    "graph-rag": rag_response, "document-rag": rag_response, "agent": agent_response, "triples": triples_response}


def is_complete(service: str, resp: Any) -> bool:
    """Whether ``resp`` is the last message of its request (the frame's ``complete`` flag)."""
    if service in ("graph-rag", "document-rag"):
        return resp.end_of_session
    if service == "agent":
        return resp.end_of_dialog
    return resp.is_final


def response_error(resp: Any) -> dict | None:
    """The response's error as TrustGraph's ``{"type", "message"}``, or ``None``."""
    err = getattr(resp, "error", None)
    if err is None or not (err.type or err.message):
        return None
    return {"type": err.type or "unexpected-error", "message": err.message}
