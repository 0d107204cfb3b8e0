"""Which LLM backend the suite uses: ``openai`` (an OpenAI-compatible endpoint) or ``extractive``.

The one resolution every part reads (the prompt service, ``kg-extract``'s ``auto`` extractor,
the embedded stack's ``llm="auto"``): an explicit choice wins; else ``LLM_BACKEND``
(``openai`` | ``extractive``); else ``openai`` when ``OPENAI_BASE_URL`` or ``OPENAI_API_KEY``
is set, ``extractive`` otherwise.
"""

from __future__ import annotations

import os

__all__ = ["LLM_BACKENDS", "resolve_llm"]

#: The backends a choice may name (``auto`` resolves to one of them).
LLM_BACKENDS = ("extractive", "openai")


def resolve_llm(choice: str = "auto") -> str:
    """``openai`` or ``extractive`` for ``choice`` (``auto``, ``openai`` or ``extractive``).

    :raises ValueError: ``choice`` is none of those.
    """
    if choice in LLM_BACKENDS:
        return choice
    if choice != "auto":
        raise ValueError(f"unknown LLM backend {choice!r}: use auto, {' or '.join(LLM_BACKENDS)}")
    configured = os.environ.get("LLM_BACKEND", "").strip().lower()
    if configured in LLM_BACKENDS:
        return configured
    return "openai" if (os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY")) else "extractive"
