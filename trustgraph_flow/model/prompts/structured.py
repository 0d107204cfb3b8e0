"""Structured output: a JSON schema the endpoint constrains the answer to, where it can.

A template with a schema (``kg-edge-selection``) asks for ``response_format`` in the shapes
endpoints accept, in order:

1. OpenAI's ``{"type": "json_schema", "json_schema": {"name", "schema", "strict": true}}``;
2. llama.cpp's (llama-cpp-python 0.3.36 accepts only ``"text"`` and ``"json_object"``, the latter
   with an optional ``"schema"`` it turns into a grammar): ``{"type": "json_object", "schema": ...}``.

An endpoint that rejects a shape (HTTP 400 or 422 whose message names ``response_format``, or
llama-cpp-python's HTTP 500 "validation error" at ``('body', 'response_format', ...)``) is
asked in the next shape, and the rejection is remembered by the prompter (one prompter talks to one
endpoint), so later calls start with the shape that worked, or with none.  The answer is parsed as
the schema's object ``{"edges": [...]}``; an answer that is not (a server that ignored the format)
goes to the tolerant JSONL parser, which also reads a JSON array.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .jsonl import JsonlResult, Validator, _accept

__all__ = ["EDGES", "edge_selection_schema", "parse_structured", "rejects_response_format", "response_formats"]

#: The field of the structured answer that holds the selected edges.
EDGES = "edges"
_REJECTED = re.compile(r"\b(400|422)\b")
#: llama-cpp-python's server refuses an unsupported shape with HTTP 500 and pydantic's message for the field.
_VALIDATION = re.compile(r"validation error.*['\"]body['\"],\s*['\"]response_format['\"]", re.DOTALL)


def edge_selection_schema(terms: dict) -> dict:
    """The JSON schema of a kg-edge-selection answer: ``{"edges": [{id, reasoning, score, concept}]}``, ids
    limited to the candidate edges' ids.

    :param terms: the kg-edge-selection terms (``knowledge`` gives the ids).
    """
    ids = [edge["id"] for edge in terms.get("knowledge", [])]
    item = {
        "type": "object",
        "properties": {"id": {"type": "string", "enum": ids} if ids else {"type": "string"},
                       "reasoning": {"type": "string"}, "score": {"type": "number"}, "concept": {"type": "string"}},
        "required": ["id", "reasoning", "score", "concept"],
        "additionalProperties": False,
    }
    return {"type": "object", "properties": {EDGES: {"type": "array", "items": item}},
            "required": [EDGES], "additionalProperties": False}


def response_formats(name: str, schema: dict) -> list[dict]:
    """The ``response_format`` values to try, OpenAI's shape first, then llama.cpp's.

    :param name: the schema's name (letters, digits, ``_`` and ``-``).
    :param schema: a JSON schema.
    """
    return [{"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}},
            {"type": "json_object", "schema": schema}]


def rejects_response_format(error: BaseException) -> bool:
    """Whether ``error`` is an endpoint refusing the request's ``response_format`` (HTTP 400 or 422 naming it, or
    a request validation error naming it whatever the status).

    :param error: an :class:`~trustgraph_flow.model.text_completion.LlmError`, or the ``ServiceError`` the
        text-completion service's reply becomes over the bus (its message carries the HTTP status).
    """
    text = str(error)
    if "response_format" not in text:
        return False
    status = getattr(error, "status", None)
    if _VALIDATION.search(text):
        return True
    return status in (400, 422) or (status is None and _REJECTED.search(text) is not None)


def parse_structured(text: Any, validate: Validator | None = None) -> JsonlResult | None:
    """Parse a structured answer ``{"edges": [...]}``; None when ``text`` is not one (then parse it as JSONL).

    :param text: the completion text.
    :param validate: check of each object (as for JSONL lines).
    """
    if not isinstance(text, str) or not text.strip().startswith("{"):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get(EDGES), list):
        return None
    result = JsonlResult()
    for index, element in enumerate(value[EDGES]):
        _accept(result, element, f"{EDGES}[{index}]", validate)
    return result
