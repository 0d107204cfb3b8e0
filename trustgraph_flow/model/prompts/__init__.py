"""Prompt templates, tolerant JSONL parsing and the prompters that run templates."""

from .jsonl import JsonlResult, parse_jsonl, require_strings
from .prompter import (
    ExtractivePrompter,
    LlmPrompter,
    Prompter,
    PromptResult,
    StreamUsage,
    get_prompter,
)
from .templates import TEMPLATES, PromptError, PromptTemplate, RenderedPrompt, get_template, parse_rendered, render

__all__ = [
    "TEMPLATES",
    "ExtractivePrompter",
    "JsonlResult",
    "LlmPrompter",
    "PromptError",
    "PromptResult",
    "PromptTemplate",
    "Prompter",
    "RenderedPrompt",
    "StreamUsage",
    "get_prompter",
    "get_template",
    "parse_jsonl",
    "parse_rendered",
    "render",
    "require_strings",
]
