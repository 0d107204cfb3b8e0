"""Prompt templates: a system text, a user text rendered from the terms, and a response type.

Every system prompt starts with the line ``task: <template-id>``. A rendered user prompt carries the
terms twice: as readable text for a model, then as one line of JSON between ``<data>`` and ``</data>``
lines (the *terms block*, followed at most by a one-line closing instruction), from which the
project's test server answers with the extractive algorithms. The terms block never reaches a
model: the text-completion client removes it (:func:`without_terms`) for every endpoint whose
``/v1/models`` list does not declare :data:`TERMS_CAPABILITY`, and only the test server declares it.
Terms are checked against each template's contract before rendering, so a caller's
mistake is reported as a clear :class:`PromptError` rather than a confusing LLM answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .jsonl import Validator, require_strings
from .structured import edge_selection_schema

TEXT = "text"
JSONL = "jsonl"
DATA_OPEN = "<data>"
DATA_CLOSE = "</data>"
#: The line that introduces the terms block in a rendered user prompt.
TERMS_HEADING = "The same input as JSON:"
#: The field of a ``/v1/models`` card by which an endpoint asks to be sent the terms block.
TERMS_CAPABILITY = "trustgraph_prompt_terms"
_TASK_LINE = re.compile(r"^task:\s*([a-z0-9][a-z0-9-]*)\s*$", re.MULTILINE)


class PromptError(ValueError):
    """Unknown template, terms that break its contract, or a template the backend cannot run."""


@dataclass(frozen=True)
class RenderedPrompt:
    """The two messages sent to the model."""

    system: str
    user: str


@dataclass(frozen=True)
class PromptTemplate:
    """One prompt: id, system text, user-text renderer, response type and JSONL object validator."""

    id: str
    system: str
    response_type: str
    check_terms: Callable[[dict], None]
    render_user: Callable[[dict], str]
    validate: Validator | None = None
    closing: str = ""
    #: the JSON schema of the answer for these terms, for endpoints that support structured output
    schema: Callable[[dict], dict] | None = None

    def render(self, terms: dict, *, terms_block: bool = True) -> RenderedPrompt:
        """Check ``terms`` and render both messages.

        :param terms: plain Python values following the template's contract.
        :param terms_block: False leaves the terms block out, giving the user text :func:`without_terms` would
            (what a model is sent) without serialising the terms, e.g. to measure a prompt; the terms are then
            not checked to be JSON-serialisable.
        :raises PromptError: the terms break the contract or are not JSON-serialisable.
        """
        if not isinstance(terms, dict):
            raise PromptError(f"template {self.id!r}: terms must be a dict, got {type(terms).__name__}")
        self.check_terms(terms)
        user = f"{self.render_user(terms).rstrip()}\n"
        if terms_block:
            try:
                data = json.dumps(terms, ensure_ascii=False, sort_keys=True)
            except (TypeError, ValueError) as exc:
                raise PromptError(f"template {self.id!r}: terms are not JSON-serialisable: {exc}") from exc
            user += f"\n{TERMS_HEADING}\n{DATA_OPEN}\n{data}\n{DATA_CLOSE}\n"
        if self.closing:
            user += f"\n{self.closing}\n"
        return RenderedPrompt(system=self.system, user=user)


# ------------------------------------------------------------------ term checks
def _fail(template: str, message: str) -> None:
    raise PromptError(f"template {template!r}: {message}")


def _check_str(template: str, terms: dict, name: str, *, required: bool = True) -> None:
    if name not in terms:
        if required:
            _fail(template, f"missing term {name!r}")
        return
    if not isinstance(terms[name], str):
        _fail(template, f"term {name!r} must be a string, got {type(terms[name]).__name__}")


def _check_records(
    template: str, terms: dict, name: str, fields: dict[str, tuple[type, ...]], *, required: bool = True
) -> None:
    """``terms[name]`` must be a list of dicts whose listed fields have the listed types."""
    if name not in terms:
        if required:
            _fail(template, f"missing term {name!r}")
        return
    records = terms[name]
    if not isinstance(records, list):
        _fail(template, f"term {name!r} must be a list, got {type(records).__name__}")
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            _fail(template, f"{name}[{index}] must be an object, got {type(record).__name__}")
        for field_name, types in fields.items():
            if field_name not in record:
                _fail(template, f"{name}[{index}] lacks field {field_name!r}")
            if not isinstance(record[field_name], types):
                wanted = " or ".join(t.__name__ for t in types)
                got = type(record[field_name]).__name__
                _fail(template, f"{name}[{index}].{field_name} must be {wanted}, got {got}")


def _check_edge_selection(terms: dict) -> None:
    tid = "kg-edge-selection"
    _check_str(tid, terms, "query")
    _check_records(tid, terms, "knowledge", {"id": (str,), "s": (str,), "p": (str,), "o": (str,)})
    ids = [edge["id"] for edge in terms["knowledge"]]
    if len(set(ids)) != len(ids):
        _fail(tid, "knowledge contains duplicate edge ids")
    scores = terms.get("entity_scores")
    if scores is not None and (not isinstance(scores, dict) or not all(
        isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) for k, v in scores.items()
    )):
        _fail(tid, "entity_scores must map entity labels to numbers")
    limit = terms.get("limit")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        _fail(tid, f"limit must be a positive integer, got {limit!r}")


def _check_synthesis(terms: dict) -> None:
    tid = "kg-synthesis"
    _check_str(tid, terms, "query")
    _check_records(tid, terms, "knowledge", {"s": (str,), "p": (str,), "o": (str,)})
    for index, edge in enumerate(terms["knowledge"]):
        if "reasoning" in edge and not isinstance(edge["reasoning"], str):
            _fail(tid, f"knowledge[{index}].reasoning must be str")


def _check_document(terms: dict) -> None:
    tid = "document-prompt"
    _check_str(tid, terms, "query")
    _check_records(tid, terms, "documents", {"text": (str,)})
    for index, doc in enumerate(terms["documents"]):
        if "id" in doc and not isinstance(doc["id"], str):
            _fail(tid, f"documents[{index}].id must be str")
        score = doc.get("score")
        if score is not None and (not isinstance(score, (int, float)) or isinstance(score, bool)):
            _fail(tid, f"documents[{index}].score must be a number")


def _check_react(terms: dict) -> None:
    tid = "agent-react"
    _check_str(tid, terms, "question")
    _check_records(tid, terms, "tools", {"name": (str,), "description": (str,)})
    for index, tool in enumerate(terms["tools"]):
        arguments = tool.get("arguments", [])
        if not isinstance(arguments, list) or not all(
            isinstance(a, dict) and isinstance(a.get("name"), str) for a in arguments
        ):
            _fail(tid, f"tools[{index}].arguments must be a list of {{'name', 'description'}} objects")
    _check_records(tid, terms, "history", {}, required=False)
    for index, step in enumerate(terms.get("history", [])):
        for key in ("thought", "action", "observation"):
            if key in step and not isinstance(step[key], str):
                _fail(tid, f"history[{index}].{key} must be str")
        if "arguments" in step and not isinstance(step["arguments"], (dict, str)):
            _fail(tid, f"history[{index}].arguments must be an object or a JSON string")


def _check_text(template: str) -> Callable[[dict], None]:
    def check(terms: dict) -> None:
        _check_str(template, terms, "text")

    return check


# -------------------------------------------------------------------- renderers
def _edge_line(edge: dict, with_id: bool) -> str:
    if with_id:
        return f"({edge['s']})-[{edge['p']} {{id: \"{edge['id']}\"}}]->({edge['o']})"
    return f"({edge['s']})-[{edge['p']}]->({edge['o']})"


def _render_edge_selection(terms: dict) -> str:
    edges = "\n".join(_edge_line(edge, True) for edge in terms["knowledge"]) or "(no edges)"
    limit = terms.get("limit")
    limit_line = f"\n\nSelect at most {limit} edges." if limit else ""
    return f"Question: {terms['query']}\n\nKnowledge-graph edges:\n{edges}{limit_line}"


def _render_synthesis(terms: dict) -> str:
    edges = "\n".join(_edge_line(edge, False) for edge in terms["knowledge"]) or "(no statements)"
    return (
        f"Knowledge statements:\n{edges}\n\n"
        f"Use only the provided knowledge statements to respond to the following: {terms['query']}"
    )


def _render_document(terms: dict) -> str:
    parts = []
    for index, doc in enumerate(terms["documents"]):
        label = doc.get("id") or f"doc-{index}"
        score = doc.get("score")
        header = f"[{label}]" + (f" (score {score:.3f})" if isinstance(score, (int, float)) else "")
        parts.append(f"{header}\n{doc['text'].strip()}")
    documents = "\n\n".join(parts) or "(no documents)"
    return f"Documents:\n{documents}\n\nQuestion: {terms['query']}"


def _render_react(terms: dict) -> str:
    tool_lines = []
    for tool in terms["tools"]:
        arguments = ", ".join(
            f"{a['name']} ({a.get('description', '')})" if a.get("description") else a["name"]
            for a in tool.get("arguments", [])
        )
        described = f"- {tool['name']}: {tool['description']}"
        tool_lines.append(described + (f" Arguments: {arguments}." if arguments else ""))
    history_lines = []
    for step in terms.get("history", []):
        arguments = step.get("arguments", {})
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments, ensure_ascii=False)
        history_lines.append(
            f"Thought: {step.get('thought', '')}\nAction: {step.get('action', '')}\n"
            f"Args: {arguments}\nObservation: {step.get('observation', '')}"
        )
    tools = "\n".join(tool_lines) or "(no tools)"
    history = "\n\n".join(history_lines) or "(none yet)"
    return f"Question: {terms['question']}\n\nTools:\n{tools}\n\nPrevious steps:\n{history}"


def _render_text(terms: dict) -> str:
    return f"Text:\n{terms['text']}"


# ------------------------------------------------------------------ system texts
#: The reasoning of the edge-selection prompt's example, on a topic no bundled corpus is about: a reasoning
#: that copies it says nothing of the edge it is given for (graph_rag.selection flags it unusable).
EDGE_SELECTION_EXAMPLE_REASONING = "Gives the year the bridge opened, which is what the question asks."

_EDGE_SELECTION_SYSTEM = ("""task: kg-edge-selection
You select the knowledge-graph edges needed to answer a question.
Each edge is written as (subject)-[predicate {id: "<edge id>"}]->(object).
Rules:
- Select the edges that help answer the question, directly or as one step of a chain of facts.
- Use only ids that appear in the list; never invent ids or edges.
- Output JSONL: one JSON object per line and nothing else (no code fences, no prose).
- Each line has these fields: "id" (the edge id), "reasoning" (one short sentence: why this edge is relevant),
  "score" (a number from 0 to 1: how relevant the edge is) and "concept" (the entity or concept of the question
  that leads to this edge, as written in the edge or the question).
- If no edge is relevant, output nothing.
Example: for the question "When did the Golden Gate Bridge open?" and the edge
(Golden Gate Bridge)-[opened in {id: "7c1e04d2"}]->(1937), one line is:
{"id": "7c1e04d2", "reasoning": "REASONING", "score": 0.9, "concept": "Golden Gate Bridge"}
Write your own reasoning for each edge: say what that edge states and how it helps answer this question."""
                          .replace("REASONING", EDGE_SELECTION_EXAMPLE_REASONING))

_SYNTHESIS_SYSTEM = """task: kg-synthesis
You answer a question from knowledge-graph statements written as (subject)-[predicate]->(object).
Base the answer only on the provided statements; do not add outside knowledge.
If the statements do not answer the question, say that the knowledge graph does not contain the answer.
Answer concisely in plain prose."""

_DOCUMENT_SYSTEM = """task: document-prompt
You answer a question from the document excerpts given, each introduced by its id in square brackets.
Base the answer only on the excerpts; do not add outside knowledge.
Cite the ids of the excerpts you used in square brackets, e.g. [chunk-3].
If the excerpts do not answer the question, say so."""

_REACT_SYSTEM = """task: agent-react
You are an agent that answers a question step by step, using the tools listed.
Each reply must have exactly one of these two forms.
To use a tool:
Thought: <what you know so far and what you need next>
Action: <one tool name from the list>
Args: <a JSON object with the tool's arguments, on one line>
To give the answer:
Thought: <why you can now answer>
Final Answer: <the answer to the question>
Never write "Observation:" yourself: the tool's result comes back to you in the next turn."""

_RELATIONSHIPS_SYSTEM = """task: extract-relationships
You extract relationships between entities stated in a text.
Output JSONL: one JSON object per line and nothing else (no code fences, no prose). Each line:
{"subject": "<entity>", "predicate": "<relation>", "object": "<entity or value>", "object-entity": true}
- "predicate" is a short lower-case phrase, e.g. "born in", "discovered", "worked at".
- "object-entity" is true when the object is an entity (person, place, organisation, thing), false when it is a
  literal value (a date, number, quantity or description).
Extract only what the text states; skip anything uncertain."""

_DEFINITIONS_SYSTEM = """task: extract-definitions
You extract definitions of entities from a text.
Output JSONL: one JSON object per line and nothing else (no code fences, no prose). Each line:
{"entity": "<entity name>", "definition": "<what the text says the entity is>"}
Extract only definitions the text states; skip anything uncertain."""


def _edge_selection_validator(obj: dict) -> str | None:
    if not isinstance(obj.get("id"), str) or not obj["id"].strip():
        return "field 'id' missing or not a non-empty string"
    if not isinstance(obj.get("reasoning"), str):
        return "field 'reasoning' missing or not a string"
    return None


def _relationship_validator(obj: dict) -> str | None:
    error = require_strings("subject", "predicate", "object")(obj)
    if error:
        return error
    if not isinstance(obj.get("object-entity"), bool):
        return "field 'object-entity' missing or not a boolean"
    return None


TEMPLATES: dict[str, PromptTemplate] = {
    template.id: template
    for template in (
        PromptTemplate("kg-edge-selection", _EDGE_SELECTION_SYSTEM, JSONL, _check_edge_selection,
                       _render_edge_selection, _edge_selection_validator,
                       closing="Answer with JSONL lines only.", schema=edge_selection_schema),
        PromptTemplate("kg-synthesis", _SYNTHESIS_SYSTEM, TEXT, _check_synthesis, _render_synthesis),
        PromptTemplate("document-prompt", _DOCUMENT_SYSTEM, TEXT, _check_document, _render_document),
        PromptTemplate("agent-react", _REACT_SYSTEM, TEXT, _check_react, _render_react,
                       closing="Your next step:"),
        PromptTemplate("extract-relationships", _RELATIONSHIPS_SYSTEM, JSONL, _check_text("extract-relationships"),
                       _render_text, _relationship_validator, closing="Answer with JSONL lines only."),
        PromptTemplate("extract-definitions", _DEFINITIONS_SYSTEM, JSONL, _check_text("extract-definitions"),
                       _render_text, require_strings("entity", "definition"),
                       closing="Answer with JSONL lines only."),
    )
}


from .agent_pattern_templates import PATTERN_TEMPLATES  # noqa: E402 - they are built from this module's parts

TEMPLATES.update({template.id: template for template in PATTERN_TEMPLATES})


def get_template(template_id: str) -> PromptTemplate:
    """The template called ``template_id``.

    :param template_id: one of :data:`TEMPLATES`.
    :raises PromptError: unknown id.
    """
    template = TEMPLATES.get(template_id)
    if template is None:
        raise PromptError(f"unknown prompt template {template_id!r}; known: {', '.join(sorted(TEMPLATES))}")
    return template


def render(template_id: str, terms: dict, *, terms_block: bool = True) -> RenderedPrompt:
    """Render template ``template_id`` with ``terms``.

    :param template_id: template id.
    :param terms: the template's terms.
    :param terms_block: False leaves the terms block out (see :meth:`PromptTemplate.render`).
    :raises PromptError: unknown template or bad terms.
    """
    return get_template(template_id).render(terms, terms_block=terms_block)


def parse_rendered(system: str, user: str) -> tuple[str | None, Any]:
    """Recover ``(template_id, terms)`` from messages rendered by this module.

    Returns ``(None, None)`` when there is no ``task:`` line, and ``(template_id, None)``
    when the ``<data>`` block is missing or not a JSON object.

    :param system: system message text.
    :param user: user message text (the last ``<data>`` block is used).
    """
    match = _TASK_LINE.search(system or "") or _TASK_LINE.search(user or "")
    if match is None:
        return None, None
    template_id = match.group(1)
    lines = (user or "").split("\n")
    for index in range(len(lines) - 3, -1, -1):
        if lines[index].strip() == DATA_OPEN and lines[index + 2].strip() == DATA_CLOSE:
            try:
                terms = json.loads(lines[index + 1])
            except (ValueError, RecursionError):
                return template_id, None
            return template_id, terms if isinstance(terms, dict) else None
    return template_id, None


def without_terms(user: str) -> str:
    """``user`` without the terms block :meth:`PromptTemplate.render` appends: what a model is sent.

    Only a block in the rendered shape is removed: the heading, ``<data>``, one line of JSON object,
    ``</data>``, then nothing but an optional one-line closing instruction. Any other text, a user's
    own ``<data>`` lines included, is returned unchanged.

    :param user: a user message, rendered by this module or not.
    """
    lines = (user or "").split("\n")
    for index in range(len(lines) - 4, 0, -1):
        if lines[index] != TERMS_HEADING or lines[index + 1] != DATA_OPEN or lines[index + 3] != DATA_CLOSE \
                or lines[index - 1] != "":
            continue
        rest = [line for line in lines[index + 4:] if line.strip()]
        if len(rest) > 1 or not lines[index + 2].startswith("{"):
            return user
        kept = "\n".join(lines[:index - 1]).rstrip("\n") + "\n"
        return kept + (f"\n{rest[0]}\n" if rest else "")
    return user
