"""Reading a sentence clause by clause: where clauses start, what introduces them, who they are about.

A sentence is read as one or more clauses ("X did Y; Z did W", "X did Y, and Z did W",
"When X did Y, Z did W"), each with an optional introduction ("In 1898,", "Later,") and a
subject, followed by a predicate (:mod:`.predicates`).  A clause without a subject of its own
continues the sentence's subject, and the sentence's main subjects become the antecedents of
the next sentence's pronouns.
"""

from __future__ import annotations

from .asides import read_asides
from .lexicon import ADVERBS, AUXILIARIES, PREPOSITIONS, PRONOUNS, SUBORDINATORS, is_adverb, is_verb
from .mentions import Item, next_comma
from .names import could_be_person
from .phrases import skip_determiners, verb_group
from .predicates import Intro, read_predicate
from .state import TextState
from .subjects import read_subjects

#: Conjunctions after a comma that may start a new clause (", and Pierre Curie isolated radium").
CLAUSE_CONJUNCTIONS = ("and", "but", "while", "whereas", "where", "when", "yet", "so")


def read_sentence(sentence: str, items: list[Item], state: TextState) -> None:
    """Read every clause of one sentence, and keep its main subjects for the next sentence's pronouns."""
    items = read_asides(sentence, items, state)
    main_subjects: list[str] | None = None
    for clause, subordinate in split_clauses(items):
        subjects = read_clause(sentence, clause, state, main_subjects)
        if subjects and not subordinate:
            main_subjects = subjects
    if main_subjects:
        state.previous_subjects = main_subjects
        if len(main_subjects) == 1 and could_be_person(main_subjects[0]):
            state.person = main_subjects[0]


def read_clause(sentence: str, clause: list[Item], state: TextState,
                sentence_subjects: list[str] | None) -> list[str] | None:
    """Read one clause; returns its explicit subjects (for pronoun resolution), if any."""
    k, intro = skip_intro(clause)
    if k >= len(clause):
        return None
    subjects, k, explicit = read_subjects(clause, k, state, sentence_subjects)
    if not subjects:
        # A clause that starts with a verb continues the sentence's subject ("..., and later isolated radium").
        if sentence_subjects and verb_group(clause, k) is not None:
            subjects, explicit = sentence_subjects, False
        else:
            return None
    read_predicate(sentence, clause, k, subjects, state, allow_definition=True, intro=intro)
    return subjects if explicit else None


# ---------------------------------------------------------------------------- where clauses start
def split_clauses(items: list[Item]) -> list[tuple[list[Item], bool]]:
    """Split a sentence into (clause, is_subordinate) parts at '; ', ', and <clause>', ', where ...'."""
    parts: list[list[Item]] = []
    current: list[Item] = []
    k = 0
    while k < len(items):
        boundary = _clause_boundary(items, k, current)
        if boundary:
            parts.append(current)
            current = []
            k += boundary
            continue
        current.append(items[k])
        k += 1
    if current:
        parts.append(current)
    return [part for clause in parts for part in split_subordinate(clause)]


def _semicolon(items: list[Item], k: int, current: list[Item]) -> int:
    """'X did Y; Z did W': the semicolon goes."""
    return 1 if items[k].kind == "punct" and items[k].text == ";" else 0


def _comma_conjunction(items: list[Item], k: int, current: list[Item]) -> int:
    """'X did Y, and Z did W' / ', where Z did W': comma and conjunction go, when a clause follows."""
    return 2 if (items[k].kind == "punct" and items[k].text == "," and k + 1 < len(items)
                 and items[k + 1].kind == "word" and items[k + 1].lower in CLAUSE_CONJUNCTIONS
                 and has_verb(current) and starts_clause(items, k + 2)) else 0


def _and_pronoun(items: list[Item], k: int, current: list[Item]) -> int:
    """'X did Y and he did W': "and" goes, the pronoun starts the next clause."""
    return 1 if (items[k].kind == "word" and items[k].lower == "and" and current and has_verb(current)
                 and k + 1 < len(items) and items[k + 1].kind == "word" and items[k + 1].lower in PRONOUNS
                 and verb_group(items, k + 2) is not None) else 0


#: Clause boundaries, tried in order at each item: how many items each consumes (0: not there).
CLAUSE_BOUNDARIES = (_semicolon, _comma_conjunction, _and_pronoun)


def _clause_boundary(items: list[Item], k: int, current: list[Item]) -> int:
    """How many items a clause boundary at ``k`` consumes (0: none is there)."""
    for at_boundary in CLAUSE_BOUNDARIES:
        length = at_boundary(items, k, current)
        if length:
            return length
    return 0


def split_subordinate(clause: list[Item]) -> list[tuple[list[Item], bool]]:
    """'When X did Y, Z did W' → [(X did Y, subordinate), (Z did W, main)]."""
    if clause and clause[0].kind == "word" and clause[0].lower in SUBORDINATORS - {"as"}:
        comma = next_comma(clause, 1, limit=20)
        if 0 < comma < len(clause):
            return [(clause[1:comma], True), (clause[comma + 1:], False)]
    return [(clause, False)]


def has_verb(items: list[Item]) -> bool:
    return any(it.kind == "word" and (is_verb(it.lower) or it.lower in AUXILIARIES) for it in items)


def starts_clause(items: list[Item], k: int) -> bool:
    """Whether a subject and a verb group (or just a verb group) start at ``k``."""
    if k >= len(items):
        return False
    if items[k].kind == "word" and items[k].lower in PRONOUNS:
        return verb_group(items, k + 1) is not None
    if items[k].is_argument and items[k].kind == "name":
        j = k + 1
        while j + 1 < len(items) and (items[j].text == "," or items[j].lower == "and") and items[j + 1].is_argument:
            j += 2
        return verb_group(items, j) is not None
    return verb_group(items, k) is not None


# ---------------------------------------------------------------------------- introductions
def skip_intro(clause: list[Item]) -> tuple[int, Intro | None]:
    """Skip "In 1898," / "Later," / "In the same year," and return the attachable intro, if any."""
    if not clause or clause[0].kind != "word":
        return 0, None
    first = clause[0].lower
    if first in PREPOSITIONS and first not in ("of", "as", "like"):
        return _prepositional_intro(clause, first)
    if (first in ADVERBS or is_adverb(first)) and len(clause) > 1:
        if clause[1].text == ",":
            return 2, None
        if clause[1].kind == "name" or clause[1].lower in PRONOUNS:
            return 1, None
    return 0, None


def _prepositional_intro(clause: list[Item], preposition: str) -> tuple[int, Intro | None]:
    """"In 1898," / "In Paris," (attachable), "In 1898 X ..." (a date needs no comma), "In the same year,"."""
    j = skip_determiners(clause, 1)
    argument = clause[j] if j < len(clause) and clause[j].is_argument else None
    if argument is not None and j + 1 < len(clause) and clause[j + 1].text == ",":
        return j + 2, (preposition, argument, argument.kind == "name")
    if argument is not None and argument.kind == "date" and j + 1 < len(clause):
        return j + 1, (preposition, argument, False)
    comma = next_comma(clause, 1, limit=10)
    if 0 < comma < len(clause):
        return comma + 1, None
    return 0, None
