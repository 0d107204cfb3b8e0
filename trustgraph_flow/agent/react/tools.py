"""Agent tools are configuration, not code: a name, a kind, a description and arguments.

Kinds: ``graph-rag`` (a GraphRAG query), ``document-rag`` (a DocumentRAG query) and
``text-completion`` (a plain LLM prompt).  The default set mirrors TrustGraph's
``knowledge-query``, ``document-query`` and ``text-completion`` tools; a JSON file (``--tools``)
replaces it, e.g.::

    [{"name": "knowledge-query", "kind": "graph-rag",
      "description": "Ask the knowledge graph a question about entities and their relations",
      "arguments": [{"name": "question", "description": "the question"}]}]
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

KINDS = ("graph-rag", "document-rag", "text-completion")


@dataclass(frozen=True)
class ToolArgument:
    name: str
    description: str = ""


@dataclass(frozen=True)
class Tool:
    """One configured tool; ``argument`` is the argument whose value becomes the query text."""

    name: str
    kind: str
    description: str
    arguments: tuple[ToolArgument, ...] = field(default_factory=lambda: (ToolArgument("question", "the question"),))

    @property
    def argument(self) -> str:
        return self.arguments[0].name if self.arguments else "question"

    def as_prompt_term(self) -> dict:
        return {"name": self.name, "description": self.description,
                "arguments": [{"name": a.name, "description": a.description} for a in self.arguments]}


DEFAULT_TOOLS: tuple[Tool, ...] = (
    Tool("knowledge-query", "graph-rag",
         "Ask the knowledge graph a question about people, places, organisations, discoveries and how they are "
         "related. Returns an answer built from selected knowledge-graph edges."),
    Tool("document-query", "document-rag",
         "Search the loaded documents for passages that answer a question. Returns an answer quoting the "
         "most relevant passages."),
    Tool("text-completion", "text-completion",
         "Ask the language model directly, without retrieval. Use for rephrasing or general reasoning.",
         (ToolArgument("question", "the prompt"),)),
)


def load_tools(spec: str | Path | list | None) -> tuple[Tool, ...]:
    """Tools from a JSON file path, a JSON string, a parsed list, or the defaults when ``None``."""
    if spec is None or spec == "":
        return DEFAULT_TOOLS
    if isinstance(spec, (str, Path)):
        text = str(spec)
        data = json.loads(text) if text.lstrip().startswith("[") else json.loads(Path(text).read_text())
    else:
        data = spec
    if not isinstance(data, list) or not data:
        raise ValueError("tool configuration must be a non-empty JSON list")
    tools = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise ValueError(f"tool {i}: a non-empty 'name' is required")
        if item.get("kind") not in KINDS:
            raise ValueError(f"tool {item['name']}: 'kind' must be one of {', '.join(KINDS)}")
        args = tuple(ToolArgument(a["name"], a.get("description", "")) for a in item.get("arguments") or
                     [{"name": "question", "description": "the question"}])
        tools.append(Tool(item["name"], item["kind"], item.get("description", ""), args))
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ValueError("tool names must be unique")
    return tuple(tools)
