"""Knowledge-graph extraction from chunk text: what an extractor returns, and how it becomes triples.

Two extractors fill the same :class:`Extraction`: the LLM path (the prompt service returns
JSONL objects, validated by :func:`parse_llm_extraction`) and the deterministic
``pattern-extractor`` of the extractive backend (:func:`extract`).  Either way
:func:`extraction_to_triples` turns the result into knowledge-graph triples plus the
entities to embed.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Relationship:
    """An extracted edge; ``object_entity`` says whether the object is an entity or a literal."""

    subject: str
    predicate: str
    object: str
    object_entity: bool = True


@dataclass(frozen=True, slots=True)
class Definition:
    """A short definition of an entity, in the text's own words."""

    entity: str
    definition: str


@dataclass(slots=True)
class Extraction:
    """What one chunk yielded; ``skipped`` counts extractor outputs rejected as invalid."""

    relationships: list[Relationship] = field(default_factory=list)
    definitions: list[Definition] = field(default_factory=list)
    skipped: int = 0


from .pattern import COMPONENT_NAME, COMPONENT_VERSION, MODEL_ID, extract  # noqa: E402 - it needs Extraction
from .triples import (  # noqa: E402 - it needs Definition, Extraction and Relationship
    ExtractedEntity,
    ExtractedGraph,
    extraction_to_triples,
    parse_llm_extraction,
)

__all__ = [
    "COMPONENT_NAME", "COMPONENT_VERSION", "MODEL_ID", "Definition", "ExtractedEntity", "ExtractedGraph",
    "Extraction", "Relationship", "extract", "extraction_to_triples", "parse_llm_extraction",
]
