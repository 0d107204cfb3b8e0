"""A rule-plus-similarity ReAct policy that writes the agent-react grammar.

First step: arithmetic in the question goes to a calculator-like tool when one is
offered; otherwise the tool whose name and description best match the question
(IDF-weighted word overlap, plus embedding cosine when an embedder is given), with a
preference for the knowledge-graph tool when the question is about named entities.
If the observation is empty or says it found nothing, the next best tool is tried once;
then ``Final Answer:`` repeats the useful observation. At most two tool calls, no
randomness, ties broken by the order of the tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import content_terms, cosine, idf, idf_table

MAX_TOOL_CALLS = 2
W_ENTITY = 0.3
W_EMBEDDING = 0.5

_NUMBER = r"-?\d+(?:[.,]\d+)?"
_SYMBOLIC = re.compile(rf"\(?\s*{_NUMBER}(?:\s*[-+*/×x÷^]\s*\(?\s*{_NUMBER}\s*\)?)+")
_VERBAL_OPERATORS = {
    "plus": "+", "minus": "-", "times": "*", "multiplied by": "*", "divided by": "/",
    "to the power of": "**",
}
_VERBAL = re.compile(
    rf"({_NUMBER})\s+(plus|minus|times|multiplied by|divided by|to the power of)\s+({_NUMBER})", re.IGNORECASE
)
_CALCULATOR = re.compile(r"calc|arithmetic|math|comput|expression|evaluat", re.IGNORECASE)
_KNOWLEDGE = re.compile(r"knowledge", re.IGNORECASE)
_NO_INFORMATION = re.compile(
    r"\bno (?:relevant )?(?:information|answer|data|results?|matches|documents?)\b|\bnot found\b|\bnothing found\b"
    r"|\bcould not\b|\bcannot answer\b|\b(?:do not|don't) know\b|\bdoes not contain\b|\bunknown\b|^\s*error\b",
    re.IGNORECASE,
)
_ENTITY_QUESTION = re.compile(r"^\s*(who|whom|whose|where|when|which)\b", re.IGNORECASE)


@dataclass(frozen=True)
class ToolChoice:
    """A ranked tool and the evidence behind its rank."""

    name: str
    score: float
    basis: str
    argument: str


def find_arithmetic(question: str) -> str | None:
    """The arithmetic expression in ``question`` ("17 * 23", "12 plus 5" -> "12 + 5"), or None.

    :param question: the user's question.
    """
    verbal = _VERBAL.search(question)
    if verbal:
        operator = _VERBAL_OPERATORS[verbal.group(2).lower()]
        return f"{verbal.group(1)} {operator} {verbal.group(3)}"
    symbolic = _SYMBOLIC.search(question)
    if symbolic:
        text = symbolic.group(0).replace("×", "*").replace("÷", "/").replace("^", "**").replace("x", "*")
        tokens = re.findall(r"\d+(?:[.,]\d+)?|\*\*|[-+*/()]", text)
        expression = "".join(f" {t} " if t in ("+", "-", "*", "/", "**") else t for t in tokens)
        return " ".join(expression.split())
    return None


def is_informative(observation: str) -> bool:
    """False for empty observations and those saying nothing was found or an error happened.

    :param observation: a tool's output.
    """
    text = (observation or "").strip()
    return bool(text) and not _NO_INFORMATION.search(text)


def _argument_name(tool: Mapping[str, Any]) -> str:
    arguments = tool.get("arguments") or []
    return str(arguments[0]["name"]) if arguments else "question"


def _tool_text(tool: Mapping[str, Any]) -> str:
    arguments = " ".join(f"{a.get('name', '')} {a.get('description', '')}" for a in tool.get("arguments") or [])
    return f"{tool['name'].replace('-', ' ').replace('_', ' ')} {tool['description']} {arguments}"


def _names_entities(question: str) -> bool:
    """True when the question is about named things: a capitalised word after the first, or who/where/when."""
    tokens = question.split()
    capitalised = any(t[:1].isupper() for t in tokens[1:] if t[:1].isalpha())
    return capitalised or bool(_ENTITY_QUESTION.match(question))


def rank_tools(question: str, tools: Sequence[Mapping[str, Any]], *, embedder: Any = None) -> list[ToolChoice]:
    """Tools ordered by how well they match ``question``, best first.

    :param question: the user's question.
    :param tools: ``{"name", "description", "arguments": [{"name", "description"}]}``.
    :param embedder: optional Embedder; adds the cosine of question and tool description.
    """
    if not tools:
        return []
    question_terms: dict[str, str] = {}
    for word, term in content_terms(question):
        question_terms.setdefault(term, word)
    tool_stems = [{t for _, t in content_terms(_tool_text(tool))} for tool in tools]
    frequencies, count = idf_table(tool_stems)
    weights = {t: idf(t, frequencies, count) for t in question_terms}
    total = sum(weights.values()) or 1.0
    similarities: list[float | None] = [None] * len(tools)
    if embedder is not None:
        vectors = embedder.embed([question] + [tool["description"] for tool in tools])
        similarities = [cosine(vectors[0], v) for v in vectors[1:]]
    about_entities = _names_entities(question)
    choices = []
    for position, (tool, stems, similarity) in enumerate(zip(tools, tool_stems, similarities, strict=True)):
        shared = [t for t in question_terms if t in stems]
        score = sum(weights[t] for t in shared) / total
        basis = []
        if shared:
            basis.append("shares " + ", ".join(f"'{question_terms[t]}'" for t in shared))
        if similarity is not None:
            score += W_EMBEDDING * similarity
            basis.append(f"description cosine {similarity:.2f}")
        if about_entities and (_KNOWLEDGE.search(tool["name"]) or _KNOWLEDGE.search(tool["description"])):
            score += W_ENTITY
            basis.append("the question is about named entities")
        choices.append((-round(score, 6), position, ToolChoice(
            tool["name"], round(score, 6), "; ".join(basis) or "no specific match", _argument_name(tool)
        )))
    return [choice for _, _, choice in sorted(choices, key=lambda c: (c[0], c[1]))]


def _action(thought: str, tool: str, arguments: dict) -> str:
    return f"Thought: {thought}\nAction: {tool}\nArgs: {json.dumps(arguments, ensure_ascii=False)}"


def _final(thought: str, answer: str) -> str:
    return f"Thought: {thought}\nFinal Answer: {answer}"


def next_step(
    question: str,
    tools: Sequence[Mapping[str, Any]],
    history: Sequence[Mapping[str, Any]] = (),
    *,
    embedder: Any = None,
) -> str:
    """The agent's next reply in the agent-react grammar (Thought/Action/Args or Final Answer).

    :param question: the user's question.
    :param tools: the tools on offer.
    :param history: earlier steps ``{"thought", "action", "arguments", "observation"}``.
    :param embedder: optional Embedder used to match tool descriptions.
    """
    for step in reversed(history):
        observation = str(step.get("observation", ""))
        if is_informative(observation):
            tool = step.get("action", "the tool")
            return _final(f"The {tool} tool returned an answer to the question.", observation.strip())

    tried = [str(step.get("action", "")) for step in history]
    if len(tried) >= MAX_TOOL_CALLS:
        return _final(
            f"The tools I tried ({', '.join(tried)}) returned no information.",
            "I could not find an answer: " + ", ".join(tried) + " returned no information.",
        )
    if not tools:
        return _final("No tools are available to look the answer up.", "I cannot answer: no tools are available.")

    expression = find_arithmetic(question)
    if expression and not tried:
        for tool in tools:
            if _CALCULATOR.search(tool["name"]) or _CALCULATOR.search(tool["description"]):
                return _action(
                    f"The question contains the arithmetic expression {expression}; "
                    f"the {tool['name']} tool evaluates it.",
                    tool["name"], {_argument_name(tool): expression},
                )

    ranked = [c for c in rank_tools(question, tools, embedder=embedder) if c.name not in tried]
    if not expression:
        non_calculators = [c for c in ranked if not _CALCULATOR.search(c.name)]
        ranked = non_calculators or ranked
    if not ranked:
        return _final(
            "Every available tool has been tried.",
            "I could not find an answer: " + ", ".join(tried) + " returned no information.",
        )
    choice = ranked[0]
    if tried:
        thought = (
            f"The {tried[-1]} tool returned no information; trying {choice.name}, "
            f"the next best match ({choice.basis})."
        )
    else:
        thought = f"The {choice.name} tool best matches the question ({choice.basis})."
    return _action(thought, choice.name, {choice.argument: question})


__all__ = ["ToolChoice", "find_arithmetic", "is_informative", "next_step", "rank_tools"]
