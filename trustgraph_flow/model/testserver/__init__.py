"""The project's own OpenAI-compatible server: LLM endpoint for tests and offline demos."""

from .server import (
    MALFORMED_EXTRA_LINES,
    MALFORMED_WRAPPER,
    LocalOpenAIServer,
    RecordedRequest,
    start_server,
)

__all__ = ["MALFORMED_EXTRA_LINES", "MALFORMED_WRAPPER", "LocalOpenAIServer", "RecordedRequest", "start_server"]
