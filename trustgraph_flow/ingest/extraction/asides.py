"""Asides after a name: appositions, relative clauses and participle clauses between commas.

"Pierre Curie, a French physicist, ..." defines Pierre Curie; "Paris, the capital of France,"
relates Paris to France; ", who taught at X," and ", born in Warsaw," are predicates of the
name before them.  They are read first and cut out of the sentence, so the clause readers see
"Pierre Curie married Marie" instead of a subject separated from its verb.
"""

from __future__ import annotations

from dataclasses import dataclass

from .lexicon import AUXILIARIES, DETERMINERS, PREPOSITIONS, WH, is_nounish, is_verb
from .mentions import Item, next_comma
from .names import canonical
from .predicates import read_predicate
from .state import TextState, add_definition, add_relationship


@dataclass(slots=True)
class _Aside:
    label: str          # the entity the aside is about (the name before its comma)
    first: Item         # the item right after the comma
    words: list[Item]   # the items between the commas
    closed: bool        # a comma closes it (it does not run to the sentence's end)


def read_asides(sentence: str, items: list[Item], state: TextState) -> list[Item]:
    """Read and remove appositions (", a French physicist,") and relative clauses (", who ...,")."""
    k = 0
    while k + 2 < len(items):
        head, comma = items[k], items[k + 1]
        close = next_comma(items, k + 2) if head.is_argument and head.kind == "name" and comma.text == "," else -1
        if close >= 0:
            aside = _Aside(canonical(head, state), items[k + 2], items[k + 2:close], close < len(items))
            if any(read(sentence, aside, state) for read in ASIDE_READERS):
                del items[k + 1:close + 1 if close < len(items) else close]
        k += 1
    return items


def _apposition(sentence: str, aside: _Aside, state: TextState) -> bool:
    """", a French physicist," (a definition) or ", the capital of France," (a relation)."""
    words = aside.words
    if not (aside.first.lower in ("a", "an", "the") and len(words) > 1
            and (words[1].kind == "word" or (words[1].kind == "name" and words[1].modifier))):
        return False
    if any(it.kind == "word" and (is_verb(it.lower) or it.lower in AUXILIARIES | WH) for it in words):
        return False
    relation = noun_of_relation(words, state)
    if relation is not None:
        add_relationship(state, aside.label, relation[0], relation[1], True)
    else:
        add_definition(state, aside.label, sentence[aside.first.start:words[-1].end])
    return True


def _relative_clause(sentence: str, aside: _Aside, state: TextState) -> bool:
    """", who taught at the Sorbonne," / ", which glows,"."""
    if aside.first.lower not in ("who", "which"):
        return False
    read_predicate(sentence, aside.words, 1, [aside.label], state, allow_definition=True)
    return True


def _participle_clause(sentence: str, aside: _Aside, state: TextState) -> bool:
    """"Marie Curie, born in Warsaw, moved ..." / "Geiger, working under Rutherford, fired ..." (the latter is
    cut out but not read)."""
    first = aside.first
    if not (first.kind == "word" and aside.closed and first.lower not in AUXILIARIES
            and (is_verb(first.lower) or (first.lower.endswith("ing") and len(first.lower) > 5))):
        return False
    if is_verb(first.lower):
        read_predicate(sentence, aside.words, 0, [aside.label], state, allow_definition=False,
                       passive_participle=True)
    return True


ASIDE_READERS = (_apposition, _relative_clause, _participle_clause)


def noun_of_relation(aside: list[Item], state: TextState) -> tuple[str, str] | None:
    """'the capital of France' → ('capital of', 'France')."""
    words = [it for it in aside if not (it.kind == "word" and it.lower in DETERMINERS)]
    if len(words) < 3 or not words[-1].is_argument or words[-1].kind != "name":
        return None
    if words[-2].kind != "word" or words[-2].lower not in PREPOSITIONS:
        return None
    nouns = words[:-2]
    if not nouns or len(nouns) > 3 or not all(it.kind == "word" and is_nounish(it.lower) for it in nouns):
        return None
    return " ".join(it.lower for it in nouns) + " " + words[-2].lower, canonical(words[-1], state)
