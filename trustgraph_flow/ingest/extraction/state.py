"""What the pattern extractor carries from sentence to sentence of one text, and what it has found so far.

Pronouns need the previous sentence's subjects, lone names need the text's full names, and a
sentence-initial word needs to know how the rest of the text writes it; the findings are kept
in text order without duplicates.  Every rule adds its findings through :func:`add_relationship`
and :func:`add_definition`, so the filters that apply to all of them (no self-loops, short
predicates, definitions of a sensible length) are applied in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import Definition, Relationship

MAX_PREDICATE_WORDS = 6
MAX_DEFINITION_WORDS = 40


@dataclass(slots=True)
class TextState:
    """What carries over between sentences of one text."""

    previous_subjects: list[str] = field(default_factory=list)   # for "it" and "they"
    person: str = ""                                              # for "he", "she", "his", "her"
    capitalised_inside: set[str] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)
    lowercase_words: set[str] = field(default_factory=set)
    relationships: dict[tuple[str, str, str], Relationship] = field(default_factory=dict)
    definitions: dict[tuple[str, str], Definition] = field(default_factory=dict)


def add_relationship(state: TextState, subject: str, predicate: str, obj: str, entity: bool) -> None:
    if not subject or not predicate or not obj or subject.casefold() == obj.casefold():
        return
    if len(predicate.split()) > MAX_PREDICATE_WORDS:
        return
    key = (subject, predicate, obj)
    if key not in state.relationships:
        state.relationships[key] = Relationship(subject, predicate, obj, entity)


def add_definition(state: TextState, entity: str, text: str) -> None:
    text = text.strip(" ,;:.")
    words = text.split()
    if len(words) < 2 or len(words) > MAX_DEFINITION_WORDS:
        return
    key = (entity, text)
    state.definitions.setdefault(key, Definition(entity, text))


def emit(state: TextState, subjects: list[str], predicate: str, objects: list[tuple[str, bool]]) -> None:
    """Every subject with every object (``(label, is_entity)``) under ``predicate``."""
    if not predicate:
        return
    for subject in subjects:
        for obj, is_entity in objects:
            add_relationship(state, subject, predicate, obj, is_entity)
