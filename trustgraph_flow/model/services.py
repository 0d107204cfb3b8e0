"""The model services: ``text-completion``, ``embeddings`` and ``prompt``.

- ``text-completion`` wraps :class:`~.text_completion.OpenAICompletion` (any OpenAI-compatible
  endpoint); endpoint failures become ``Error(type="llm-error")`` replies that name the endpoint.
- ``embeddings`` runs an :class:`~.embeddings.Embedder` (packaged MiniLM by default) and names
  its model in every reply, so vector indexes never mix models.
- ``prompt`` runs templates: with an LLM it renders the template and calls the
  ``text-completion`` service over the bus (services never call the LLM directly); with the
  ``extractive`` backend it runs the deterministic algorithms.  JSONL answers are parsed here
  and the reply says how many lines were dropped and why.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

from trustgraph_base import telemetry
from trustgraph_base.processor import ConfigurationError, Processor, ServiceError, launch, raise_on_error
from trustgraph_base.schema import (
    EmbeddingsRequest,
    EmbeddingsResponse,
    Error,
    PromptRequest,
    PromptResponse,
    TextCompletionRequest,
    TextCompletionResponse,
)
from trustgraph_base.telemetry import genai

from ..common.services import client_spec, request_spec
from .llm import resolve_llm

log = logging.getLogger(__name__)

#: Requests the model services (``text-completion``, ``prompt``) handle at once, at least: their work is waiting
#: on the LLM endpoint, and a supervisor's sub-agents or a plan's independent steps call them at the same time
#: (with one handler they would queue here and run one after another).  ``--concurrency`` raises it.
MODEL_CALL_HANDLERS = 8


class TextCompletionService(Processor):
    """Chat completion against an OpenAI-compatible endpoint."""

    default_id = "text-completion"

    def __init__(self, *, base_url: str | None = None, api_key: str | None = None, model: str | None = None,
                 temperature: float = 0.0, max_tokens: int | None = None, timeout: float | None = None,
                 max_retries: int | None = None, **params):
        """Configure the endpoint; ``max_tokens``, ``timeout`` and ``max_retries`` left ``None`` come from
        ``TG_LLM_MAX_TOKENS``, ``TG_LLM_TIMEOUT`` and ``TG_LLM_MAX_RETRIES`` (:mod:`..llm_settings`)."""
        super().__init__(**params)
        from .llm_settings import LlmSettings, LlmSettingsError
        from .text_completion import OpenAICompletion

        if not (base_url or api_key or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY")):
            raise ConfigurationError("text-completion: no LLM endpoint configured: pass --base-url (env "
                                     "OPENAI_BASE_URL) and, if it needs one, --api-key (env OPENAI_API_KEY)")
        try:
            env = LlmSettings.from_env()
            self.settings = LlmSettings(timeout=env.timeout if timeout is None else timeout,
                                        max_retries=env.max_retries if max_retries is None else max_retries,
                                        max_tokens=env.max_tokens if max_tokens is None else max_tokens)
            self.llm = OpenAICompletion(base_url, api_key, model, temperature=temperature,
                                        **self.settings.completion_params())  # type: ignore[arg-type]
        except (ValueError, LlmSettingsError) as e:
            raise ConfigurationError(f"text-completion: {e}") from None
        self.add(request_spec("text-completion", self.flow, self.on_request,
                              concurrency=max(self.concurrency, MODEL_CALL_HANDLERS)))

    async def on_start(self) -> None:
        log.info("text-completion: endpoint %s, timeout %gs, %d retries, max %d tokens", self.llm.endpoint,
                 self.settings.timeout, self.settings.max_retries, self.settings.max_tokens)

    async def on_request(self, req: TextCompletionRequest, ctx) -> None:
        from .text_completion import LlmError

        try:
            if req.streaming:
                async for chunk in self.llm.stream(req.system, req.prompt, temperature=req.temperature,
                                                   max_tokens=req.max_tokens or None):
                    await ctx.respond(TextCompletionResponse(
                        response=chunk.text, end_of_stream=chunk.end_of_stream, in_token=chunk.in_token,
                        out_token=chunk.out_token, model=chunk.model or ""))
            else:
                c = await self.llm.complete(req.system, req.prompt, temperature=req.temperature,
                                            max_tokens=req.max_tokens or None,
                                            response_format=_response_format(req.response_format))
                await ctx.respond(TextCompletionResponse(response=c.text, in_token=c.in_token, out_token=c.out_token,
                                                         model=c.model, end_of_stream=True))
        except LlmError as e:
            await ctx.respond(TextCompletionResponse(error=Error("llm-error", str(e)), end_of_stream=True))

    async def on_stop(self) -> None:
        await self.llm.aclose()

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"),
                            help="OpenAI-compatible endpoint (env OPENAI_BASE_URL)")
        parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"))
        parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL"))
        parser.add_argument("--temperature", type=float, default=0.0)
        parser.add_argument("--max-tokens", "--llm-max-tokens", type=int, default=None,
                            help="completion length limit (env TG_LLM_MAX_TOKENS; default 2048)")
        parser.add_argument("--timeout", "--llm-timeout", type=float, default=None,
                            help="seconds per LLM call, retries included (env TG_LLM_TIMEOUT; default 120)")
        parser.add_argument("--max-retries", "--llm-max-retries", type=int, default=None,
                            help="retries of a failed LLM call (env TG_LLM_MAX_RETRIES; default 3)")

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        return {"base_url": args.base_url, "api_key": args.api_key, "model": args.model,
                "temperature": args.temperature, "max_tokens": args.max_tokens, "timeout": args.timeout,
                "max_retries": args.max_retries}


def _response_format(text: str) -> dict | None:
    """A request's ``response_format`` (JSON text; "" for none).

    :raises ValueError: not a JSON object.
    """
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError(f"response_format is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise ValueError(f"response_format must be a JSON object, got {type(value).__name__}")
    return value


#: Requests the ``embeddings`` service handles at once, at least: each vector writer keeps two batches in
#: flight, and a batch's texts are spread over the embedder's threads, so with one handler the two writers'
#: batches would wait here for each other while a core stays idle.  ``--concurrency`` raises it.
EMBEDDINGS_HANDLERS = 4


class EmbeddingsService(Processor):
    """Sentence embeddings (packaged MiniLM via onnxruntime, or an OpenAI-compatible endpoint)."""

    default_id = "embeddings"

    def __init__(self, *, embeddings: str = "local", embeddings_options: dict | None = None, embedder=None,
                 **params):
        super().__init__(**params)
        from .embeddings import get_embedder

        self.embedder = embedder or get_embedder(embeddings, **(embeddings_options or {}))
        self.add(request_spec("embeddings", self.flow, self.on_request,
                              concurrency=max(self.concurrency, EMBEDDINGS_HANDLERS)))

    async def on_request(self, req: EmbeddingsRequest, ctx) -> None:
        if not req.texts:
            raise ValueError("no texts to embed")
        model = self.embedder.model_id
        attributes = {}
        if telemetry.enabled():  # an OpenAI model is named "openai:<model>"; the packaged one runs here
            provider = "openai" if model.startswith("openai:") else "trustgraph"
            attributes = {**genai.request_attributes("embeddings", provider, model),
                          genai.EMBEDDING_COUNT: len(req.texts)}
        with telemetry.span(f"embeddings {model}", kind="client", attributes=attributes):
            vectors = await asyncio.to_thread(self.embedder.embed, list(req.texts))
        await ctx.respond(EmbeddingsResponse(vectors=[list(map(float, v)) for v in vectors],
                                             model=self.embedder.model_id))

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--embeddings", choices=["local", "openai"],
                            default=os.environ.get("TG_EMBEDDINGS", "local"))
        parser.add_argument("--embeddings-model", default=os.environ.get("OPENAI_EMBEDDING_MODEL"))

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        opts = {"model": args.embeddings_model} if args.embeddings == "openai" and args.embeddings_model else {}
        return {"embeddings": args.embeddings, "embeddings_options": opts}


class BusCompletion:
    """The completion interface of :class:`~.text_completion.OpenAICompletion`, over the bus.

    Lets the LLM prompter reach the ``text-completion`` service instead of an endpoint.
    """

    def __init__(self, processor: Processor, model: str = "llm"):
        self.p = processor
        self.model = model

    async def complete(self, system: str, prompt: str, *, response_format: dict | None = None, **_: Any):
        from .text_completion import Completion

        fmt = json.dumps(response_format, ensure_ascii=False) if response_format is not None else ""
        resp = raise_on_error("text-completion", await self.p.client("text-completion").request(
            TextCompletionRequest(system=system, prompt=prompt, response_format=fmt)))
        return Completion(resp.response, resp.in_token, resp.out_token, resp.model)

    async def stream(self, system: str, prompt: str, **_: Any) -> AsyncIterator[Any]:
        from .text_completion import CompletionChunk

        async for resp in self.p.client("text-completion").stream(
                TextCompletionRequest(system=system, prompt=prompt, streaming=True)):
            raise_on_error("text-completion", resp)
            yield CompletionChunk(resp.response, resp.end_of_stream, resp.in_token, resp.out_token, resp.model)


class PromptService(Processor):
    """Runs prompt templates with an LLM (via text-completion) or the extractive backend."""

    default_id = "prompt"

    def __init__(self, *, llm: str = "auto", prompter=None, **params):
        super().__init__(**params)
        self.add(request_spec("prompt", self.flow, self.on_request,
                              concurrency=max(self.concurrency, MODEL_CALL_HANDLERS)))
        if prompter is not None:
            self.prompter = prompter
        else:
            backend = resolve_llm(llm)
            if backend == "openai":
                from .prompts.prompter import LlmPrompter

                self.add(client_spec("text-completion", self.flow))
                self.prompter = LlmPrompter(BusCompletion(self, os.environ.get("OPENAI_MODEL", "llm")))
            else:
                from .prompts.prompter import get_prompter

                self.prompter = get_prompter("extractive")
        log.info("prompt: backend %s (model %s)", type(self.prompter).__name__, self.prompter.model_id)

    async def on_request(self, req: PromptRequest, ctx) -> None:
        from .prompts.prompter import StreamUsage

        telemetry.set_attributes({"trustgraph.prompt.template": req.id})
        try:
            terms = {k: json.loads(v) for k, v in req.terms.items()}
        except (TypeError, ValueError) as e:
            raise ValueError(f"prompt terms must be JSON-encoded values: {e}") from None
        try:
            if req.streaming:
                usage = StreamUsage()
                async for piece in self.prompter.stream(req.id, terms, usage):
                    await ctx.respond(PromptResponse(text=piece, end_of_stream=False))
                await ctx.respond(PromptResponse(end_of_stream=True, in_token=usage.in_token,
                                                 out_token=usage.out_token, model=usage.model))
                return
            result = await self.prompter.run(req.id, terms)
        except ServiceError as e:  # the text-completion service failed: say which and why
            await ctx.respond(PromptResponse(error=Error("llm-error", str(e)), end_of_stream=True))
            return
        await ctx.respond(PromptResponse(
            text=result.text, object=json.dumps(result.objects, ensure_ascii=False) if result.objects else "",
            in_token=result.in_token, out_token=result.out_token, model=result.model, dropped=result.dropped,
            dropped_reasons=list(result.reasons[:20]), end_of_stream=True))

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--llm", choices=["auto", "extractive", "openai"], default="auto",
                            help="auto = openai when OPENAI_BASE_URL/OPENAI_API_KEY is set, else extractive")

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        return {"llm": args.llm}


def run_text_completion() -> None:
    launch(TextCompletionService)


def run_embeddings() -> None:
    launch(EmbeddingsService)


def run_prompt() -> None:
    launch(PromptService)
