"""Model service messages: text completion, embeddings and prompts."""

from __future__ import annotations

from dataclasses import dataclass, field

from .primitives import Error


@dataclass
class TextCompletionRequest:
    system: str = ""
    prompt: str = ""
    streaming: bool = False
    temperature: float | None = None
    max_tokens: int = 0
    #: the OpenAI ``response_format`` object as JSON text ("": none), for structured output
    response_format: str = ""


@dataclass
class TextCompletionResponse:
    error: Error | None = None
    response: str = ""
    #: token counts; None = not reported (the endpoint sent no usage, or no model call)
    in_token: int | None = None
    out_token: int | None = None
    model: str = ""
    end_of_stream: bool = True


@dataclass
class EmbeddingsRequest:
    texts: list[str] = field(default_factory=list)


@dataclass
class EmbeddingsResponse:
    error: Error | None = None
    vectors: list[list[float]] = field(default_factory=list)
    model: str = ""


@dataclass
class PromptRequest:
    """Run prompt template ``id`` with ``terms`` (values are JSON-encoded strings)."""

    id: str = ""
    terms: dict[str, str] = field(default_factory=dict)
    streaming: bool = False


@dataclass
class PromptResponse:
    """``text`` for text templates; ``object`` (JSON) for json/jsonl templates.

    ``dropped`` counts JSONL lines the parser skipped, ``dropped_reasons`` says why.
    """

    error: Error | None = None
    text: str = ""
    object: str = ""
    end_of_stream: bool = True
    #: token counts; None = not reported (the endpoint sent no usage, or no model call)
    in_token: int | None = None
    out_token: int | None = None
    model: str = ""
    dropped: int = 0
    dropped_reasons: list[str] = field(default_factory=list)
