"""Text completion through the ``openai`` client against any OpenAI-compatible endpoint."""

from .openai_client import Completion, CompletionChunk, LlmError, OpenAICompletion

__all__ = ["Completion", "CompletionChunk", "LlmError", "OpenAICompletion"]
