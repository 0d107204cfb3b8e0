"""Attributes of model-call spans: OpenTelemetry's GenAI semantic conventions, and OpenInference's for Phoenix.

Prompt and completion texts go on a span only when the user opts in with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (the variable of OpenTelemetry's GenAI
instrumentations): they may hold what users asked and what the documents say.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from .tracing import AttributeValue, set_attributes

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = ["CAPTURE_CONTENT_ENV", "capture_content", "request_attributes", "set_inputs", "set_response"]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"  # the older name of the provider attribute, which some tools still read
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TEMPERATURE = "gen_ai.request.temperature"
MAX_TOKENS = "gen_ai.request.max_tokens"
EMBEDDING_COUNT = "trustgraph.embeddings.count"


def capture_content() -> bool:
    """Whether prompt and completion texts go on spans (the user's opt-in)."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def request_attributes(operation: str, provider: str, model: str, *, temperature: float | None = None,
                       max_tokens: int | None = None, inputs: list[dict[str, str]] | None = None,
                       ) -> dict[str, AttributeValue]:
    """The attributes of a model call known before it runs (``inputs``: chat messages, kept on opt-in only)."""
    kind = "LLM" if operation == "chat" else "EMBEDDING"
    attrs: dict[str, AttributeValue] = {OPERATION: operation, PROVIDER: provider, SYSTEM: provider,
                                        REQUEST_MODEL: model, "openinference.span.kind": kind,
                                        "llm.model_name" if kind == "LLM" else "embedding.model_name": model}
    if temperature is not None:
        attrs[TEMPERATURE] = temperature
    if max_tokens is not None:
        attrs[MAX_TOKENS] = max_tokens
    if inputs and capture_content():
        attrs.update(_input_attributes(inputs))
    return attrs


def set_inputs(s: Span | None, messages: list[dict[str, str]]) -> None:
    """Record a chat call's messages once the request as sent is known (it may differ from the caller's: a
    client can rewrite the prompt for its endpoint); on opt-in only, like :func:`request_attributes`."""
    if s is None or not messages or not capture_content():
        return
    set_attributes(_input_attributes(messages), s)


def _input_attributes(messages: list[dict[str, str]]) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {
        INPUT_MESSAGES: json.dumps([{"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]}
                                    for m in messages], ensure_ascii=False),
        "input.value": messages[-1]["content"],
    }
    for i, m in enumerate(messages):
        attrs[f"llm.input_messages.{i}.message.role"] = m["role"]
        attrs[f"llm.input_messages.{i}.message.content"] = m["content"]
    return attrs


def set_response(s: Span | None, *, model: str, input_tokens: int | None, output_tokens: int | None,
                 finish_reason: str = "", output: str | None = None) -> None:
    """Record what a chat call answered: model, token counts, finish reason (and, on opt-in, the text)."""
    if s is None:
        return
    attrs: dict[str, AttributeValue] = {RESPONSE_MODEL: model}
    if input_tokens is not None:
        attrs[INPUT_TOKENS] = input_tokens
        attrs["llm.token_count.prompt"] = input_tokens
    if output_tokens is not None:
        attrs[OUTPUT_TOKENS] = output_tokens
        attrs["llm.token_count.completion"] = output_tokens
    if input_tokens is not None and output_tokens is not None:
        attrs["llm.token_count.total"] = input_tokens + output_tokens
    if finish_reason:
        attrs[FINISH_REASONS] = [finish_reason]
    if output is not None and capture_content():
        attrs[OUTPUT_MESSAGES] = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": output}],
                                              "finish_reason": finish_reason or "stop"}], ensure_ascii=False)
        attrs["output.value"] = output
        attrs["llm.output_messages.0.message.role"] = "assistant"
        attrs["llm.output_messages.0.message.content"] = output
    set_attributes(attrs, s)
