"""Prompters run a template with terms: through an LLM, or with the extractive algorithms.

Services depend only on the :class:`Prompter` protocol, so the same GraphRAG, DocumentRAG
and agent code runs against a real model or the deterministic ``extractive`` backend.
:func:`get_prompter` picks one from configuration and logs which.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..extractive import DESCRIPTION as EXTRACTIVE_DESCRIPTION
from ..extractive import MODEL_ID as EXTRACTIVE_MODEL_ID
from ..extractive import pattern_policy
from ..extractive.answers import compose_document_answer, compose_graph_answer
from ..extractive.edge_selection import select_edges
from ..extractive.react_policy import next_step
from .jsonl import parse_jsonl
from .structured import parse_structured, rejects_response_format, response_formats
from .templates import JSONL, PromptError, get_template

log = logging.getLogger(__name__)

BACKENDS = ("auto", "extractive", "openai")


@dataclass
class PromptResult:
    """Outcome of one template run.

    ``objects`` holds the parsed objects of JSONL templates (empty for text templates);
    ``dropped``/``reasons`` count and explain the JSONL lines that were skipped; token
    counts are 0 when no model tokens were spent (the extractive backend) and None when the endpoint
    reported no usage (unknown, not 0).
    """

    text: str
    objects: list[dict] = field(default_factory=list)
    dropped: int = 0
    reasons: list[str] = field(default_factory=list)
    in_token: int | None = 0
    out_token: int | None = 0
    model: str = ""


@dataclass
class StreamUsage:
    """Filled in by :meth:`Prompter.stream` once the stream has ended (token counts None: not reported)."""

    in_token: int | None = 0
    out_token: int | None = 0
    model: str = ""


@runtime_checkable
class Prompter(Protocol):
    """Runs prompt templates; ``model_id`` is what traces record as ``tg:llmModel``."""

    model_id: str

    async def run(self, template_id: str, terms: dict) -> PromptResult:
        """Run a template and return its text (and objects for JSONL templates)."""
        ...

    def stream(self, template_id: str, terms: dict, usage: StreamUsage | None = None) -> AsyncIterator[str]:
        """Stream the answer of a text template piece by piece (``async for``)."""
        ...


def _text_template(template_id: str) -> None:
    if get_template(template_id).response_type == JSONL:
        raise PromptError(f"template {template_id!r} returns JSONL and cannot be streamed; use run()")


class LlmPrompter:
    """Renders a template, calls the completion endpoint and parses the answer."""

    def __init__(self, completion: Any) -> None:
        """:param completion: an :class:`~trustgraph_flow.model.text_completion.OpenAICompletion`."""
        self.completion = completion
        self.model_id = completion.model
        #: ``response_format`` shapes this prompter's endpoint rejected (:mod:`.structured`): not asked again
        self.rejected_formats: set[str] = set()

    async def _complete(self, template: Any, terms: dict, system: str, user: str) -> Any:
        """One completion, with structured output in the first shape the endpoint has not rejected."""
        formats = response_formats(template.id, template.schema(terms)) if template.schema else []
        for fmt in formats:
            if fmt["type"] in self.rejected_formats:
                continue
            try:
                return await self.completion.complete(system, user, response_format=fmt)
            except Exception as e:
                if not rejects_response_format(e):
                    raise
                self.rejected_formats.add(fmt["type"])
                log.warning("%s: the endpoint rejects response_format %r; not asked again: %s",
                            template.id, fmt["type"], e)
        return await self.completion.complete(system, user)

    async def run(self, template_id: str, terms: dict) -> PromptResult:
        """Run ``template_id`` with ``terms`` through the LLM.

        :param template_id: template id.
        :param terms: the template's terms.
        :raises PromptError: unknown template or bad terms.
        :raises LlmError: the endpoint failed.
        """
        template = get_template(template_id)
        prompt = template.render(terms)
        completion = await self._complete(template, terms, prompt.system, prompt.user)
        result = PromptResult(
            text=completion.text, in_token=completion.in_token,
            out_token=completion.out_token, model=completion.model,
        )
        if template.response_type == JSONL:
            parsed = parse_structured(completion.text, template.validate) or parse_jsonl(completion.text,
                                                                                        template.validate)
            result.objects, result.dropped, result.reasons = parsed.objects, parsed.dropped, parsed.reasons
            if parsed.dropped:
                log.warning("%s: dropped %d line(s) of the %s answer: %s",
                            template_id, parsed.dropped, completion.model, "; ".join(parsed.reasons[:3]))
        return result

    async def stream(self, template_id: str, terms: dict, usage: StreamUsage | None = None) -> AsyncIterator[str]:
        """Stream a text template's answer from the LLM.

        :param template_id: a text template id.
        :param terms: the template's terms.
        :param usage: receives token usage and model name when the stream ends.
        :raises PromptError: unknown, JSONL or mis-used template.
        :raises LlmError: the endpoint failed.
        """
        _text_template(template_id)
        prompt = get_template(template_id).render(terms)
        async for chunk in self.completion.stream(prompt.system, prompt.user):
            if chunk.text:
                yield chunk.text
            if chunk.end_of_stream and usage is not None:
                usage.in_token = chunk.in_token
                usage.out_token = chunk.out_token
                usage.model = chunk.model or self.model_id


#: The extractive answers to the agent-pattern templates: ``(terms, embedder) -> reply``.
_PATTERN_POLICIES: dict[str, Callable[[dict, Any], str]] = {
    "agent-pattern-select": lambda terms, embedder: pattern_policy.select_pattern(terms["question"]),
    "agent-plan": lambda terms, embedder: pattern_policy.plan(terms["question"], terms["tools"], embedder=embedder),
    "agent-decompose": lambda terms, embedder: pattern_policy.decompose(terms["question"]),
    "agent-synthesise": lambda terms, embedder: pattern_policy.synthesise(terms["question"], terms["results"]),
}


class ExtractivePrompter:
    """Answers the retrieval and agent templates with the deterministic extractive algorithms.

    It refuses the ``extract-*`` templates: ingestion without an LLM uses the pattern
    extractor instead.
    """

    model_id = EXTRACTIVE_MODEL_ID

    def __init__(self, embedder: Any = None, *, embed_predicates: bool = False) -> None:
        """:param embedder: optional Embedder for document sentence re-ranking, tool matching and
            (with ``embed_predicates``) predicate similarity in edge selection.
        :param embed_predicates: score predicate labels by embedding in edge selection.
        """
        self.embedder = embedder
        self.embed_predicates = embed_predicates

    def run_sync(self, template_id: str, terms: dict) -> PromptResult:
        """Run a template synchronously (for threads, e.g. the test server).

        :param template_id: template id.
        :param terms: the template's terms.
        :raises PromptError: unknown template, bad terms, or an extract-* template.
        """
        template = get_template(template_id)
        if not isinstance(terms, dict):
            raise PromptError(f"template {template_id!r}: terms must be a dict, got {type(terms).__name__}")
        template.check_terms(terms)
        if template_id == "kg-edge-selection":
            selected = select_edges(
                terms["query"], terms["knowledge"], terms.get("entity_scores"), terms.get("limit"),
                embedder=self.embedder, embed_predicates=self.embed_predicates,
            )
            objects = [edge.as_object() for edge in selected]
            text = "\n".join(json.dumps(obj, ensure_ascii=False) for obj in objects)
            return PromptResult(text=text, objects=objects, model=self.model_id)
        if template_id == "kg-synthesis":
            return PromptResult(text=compose_graph_answer(terms["query"], terms["knowledge"]), model=self.model_id)
        if template_id == "document-prompt":
            text = compose_document_answer(terms["query"], terms["documents"], embedder=self.embedder)
            return PromptResult(text=text, model=self.model_id)
        if template_id == "agent-react":
            text = next_step(terms["question"], terms["tools"], terms.get("history", []), embedder=self.embedder)
            return PromptResult(text=text, model=self.model_id)
        if template_id in _PATTERN_POLICIES:
            return PromptResult(text=_PATTERN_POLICIES[template_id](terms, self.embedder), model=self.model_id)
        raise PromptError(
            f"the extractive backend does not run {template_id!r}: without an LLM, ingestion uses the "
            "pattern extractor (trustgraph_flow.ingest.extraction.pattern); configure an OpenAI-compatible "
            "endpoint to extract with an LLM"
        )

    async def run(self, template_id: str, terms: dict) -> PromptResult:
        """Run a template; embedding work happens in a worker thread.

        :param template_id: template id.
        :param terms: the template's terms.
        :raises PromptError: unknown template, bad terms, or an extract-* template.
        """
        if self.embedder is None:
            return self.run_sync(template_id, terms)
        return await asyncio.to_thread(self.run_sync, template_id, terms)

    async def stream(self, template_id: str, terms: dict, usage: StreamUsage | None = None) -> AsyncIterator[str]:
        """Stream a text template's answer line by line (the answer is computed at once).

        :param template_id: a text template id.
        :param terms: the template's terms.
        :param usage: receives model ``extractive`` and zero token counts at the end.
        :raises PromptError: unknown, JSONL or extract-* template, or bad terms.
        """
        _text_template(template_id)
        result = await self.run(template_id, terms)
        for piece in re.findall(r"[^\n]*\n|[^\n]+$", result.text):
            yield piece
        if usage is not None:
            usage.in_token, usage.out_token, usage.model = 0, 0, self.model_id


def get_prompter(backend: str = "auto", **opts: Any) -> Prompter:
    """Build the prompter named by ``backend`` and log which one runs.

    ``auto`` honours ``LLM_BACKEND`` when set, else picks ``openai`` when ``OPENAI_BASE_URL``
    or ``OPENAI_API_KEY`` is set, else ``extractive``.

    :param backend: ``auto``, ``extractive`` or ``openai``.
    :param opts: for openai, OpenAICompletion arguments (base_url, api_key, model, timeout, ...);
        for extractive, ``embedder`` (default: the shared local embedder; None for lexical only)
        and ``embed_predicates`` (both ignored by openai, so callers may pass them regardless).
    :raises PromptError: unknown backend.
    """
    if backend not in BACKENDS:
        raise PromptError(f"unknown LLM backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "auto":
        configured = os.environ.get("LLM_BACKEND", "").strip().lower()
        if configured in ("extractive", "openai"):
            backend = configured
        elif configured:
            raise PromptError(f"LLM_BACKEND={configured!r} is not one of extractive, openai")
        else:
            has_endpoint = bool(os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"))
            backend = "openai" if has_endpoint else "extractive"
    if backend == "openai":
        from ..text_completion import OpenAICompletion

        for extractive_only in ("embedder", "embed_predicates"):
            opts.pop(extractive_only, None)
        completion = OpenAICompletion(**opts)
        log.info("LLM backend: openai-compatible endpoint %s", completion.endpoint)
        return LlmPrompter(completion)
    if "embedder" in opts:
        embedder = opts.pop("embedder")
    else:
        from ..embeddings import get_embedder

        embedder = get_embedder("local")
    prompter = ExtractivePrompter(embedder, **opts)
    log.info("LLM backend: %s", EXTRACTIVE_DESCRIPTION)
    return prompter
