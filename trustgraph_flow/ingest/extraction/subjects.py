"""Who a clause is about: the subject readers, pronoun resolution included.

A clause's subject is a name or a list of names ("Marie and Pierre Curie", "Becquerel, Pierre
Curie and Marie Curie"), a pronoun that points back to an earlier subject, a possessive
description ("Her daughter Irène Curie", which also says "daughter of") or a classified noun
("The element polonium").  Each form has its own reader; :func:`read_subjects` tries them in
turn.  Resolving a pronoun is a table from the pronoun to the rule that finds its antecedent.
"""

from __future__ import annotations

from collections.abc import Callable

from .lexicon import CLASSIFIERS, COPULA, POSSESSIVE_PRONOUNS, PREPOSITIONS, PRONOUNS, TITLE_NOUNS, is_nounish
from .mentions import Item
from .names import canonical, could_be_person, expand_names
from .state import TextState, add_relationship

#: (subjects, index after them, whether they were named explicitly rather than through a pronoun).
SubjectReading = tuple[list[str], int, bool]
#: Words that join one more name to a subject list, tried in this order ("X, and Y", "X, Y", "X and Y",
#: "The University of Paris and the Pasteur Institute").
LIST_JOINS = ((",", "and"), (",",), ("and",), ("and", "the"))
MAX_DESCRIPTION_NOUNS = 3


def read_subjects(clause: list[Item], k: int, state: TextState,
                  sentence_subjects: list[str] | None) -> SubjectReading:
    """Parse the subject at ``k``: a name list, a pronoun, a possessive description or "the element X"."""
    for read in _SUBJECT_READERS:
        found = read(clause, k, state, sentence_subjects)
        if found is not None:
            return found
    return [], k, False


def _is_name(item: Item) -> bool:
    return item.is_argument and item.kind == "name"


# ---------------------------------------------------------------------------- pronouns
def _the_person(state: TextState, sentence_subjects: list[str] | None) -> list[str]:
    """He/she: this sentence's subject if it is one person, else the text's last person."""
    person = sentence_subjects[0] if (sentence_subjects and len(sentence_subjects) == 1
                                      and could_be_person(sentence_subjects[0])) else state.person
    return [person] if person else []


def _plural_antecedents(state: TextState, sentence_subjects: list[str] | None) -> list[str]:
    """They: several subjects, or one that looks plural ("The Curies")."""
    antecedents = sentence_subjects or state.previous_subjects
    return list(antecedents) if antecedents and (len(antecedents) > 1 or antecedents[0].endswith("s")) else []


def _one_thing(state: TextState, sentence_subjects: list[str] | None) -> list[str]:
    """It: a single subject that is not a person."""
    antecedents = sentence_subjects or state.previous_subjects
    return list(antecedents) if len(antecedents) == 1 and not could_be_person(antecedents[0]) else []


ANTECEDENTS: dict[str, Callable[[TextState, list[str] | None], list[str]]] = {
    "he": _the_person, "she": _the_person, "they": _plural_antecedents, "it": _one_thing,
}


def _pronoun_subject(clause: list[Item], k: int, state: TextState,
                     sentence_subjects: list[str] | None) -> SubjectReading | None:
    item = clause[k]
    if not (item.kind == "word" and item.lower in PRONOUNS):
        return None
    n = len(clause)
    if item.lower == "it" and k + 2 < n and clause[k + 1].lower in COPULA and (
            clause[k + 2].lower in PREPOSITIONS or clause[k + 2].kind != "word"):
        return [], k, False        # "It was in 1898 that ..." (a cleft, not a reference)
    found = ANTECEDENTS[item.lower](state, sentence_subjects)
    return (found, k + 1, False) if found else ([], k, False)


# ---------------------------------------------------------------------------- descriptions and names
def _possessive_description(clause: list[Item], k: int, state: TextState,
                            sentence_subjects: list[str] | None) -> SubjectReading | None:
    """"Her daughter Irène Curie", "Rutherford's student Frederick Soddy": the name, and "<nouns> of" its owner."""
    item = clause[k]
    if item.kind == "word" and item.lower in POSSESSIVE_PRONOUNS:
        owner = state.person if item.lower in ("his", "her") else None
        if owner is None:
            return [], k, False
    elif item.kind == "name" and item.possessive:
        owner = canonical(item, state)
    else:
        return None
    j, n = k + 1, len(clause)
    nouns: list[str] = []
    while j < n and clause[j].kind == "word" and is_nounish(clause[j].lower) and len(nouns) < MAX_DESCRIPTION_NOUNS:
        nouns.append(clause[j].lower)
        j += 1
    if not (nouns and j < n and _is_name(clause[j])):
        return [], k, False
    name = canonical(clause[j], state)
    add_relationship(state, name, " ".join(nouns) + " of", owner, True)
    # "His father X ..." keeps the topic on its owner; "Rutherford's student X" moves it to X.
    return [name], j + 1, item.kind == "name"


def _name_list_subject(clause: list[Item], k: int, state: TextState,
                       sentence_subjects: list[str] | None) -> SubjectReading | None:
    """Names, possibly a list: "Marie Curie and Pierre Curie", "Becquerel, Pierre Curie and Marie Curie"."""
    if clause[k].kind == "word" and clause[k].lower == "the" and k + 1 < len(clause) and _is_name(clause[k + 1]):
        k += 1     # "The French Academy of Sciences ..."
    if not _is_name(clause[k]):
        return None
    names = [clause[k]]
    j = k + 1
    while (at := _next_listed_name(clause, j)) is not None:
        names.append(clause[at])
        j = at + 1
    return expand_names(names, state), j, True


def _next_listed_name(clause: list[Item], j: int) -> int | None:
    """Where the next name of a list joined at ``j`` is, if one is."""
    for join in LIST_JOINS:
        at = j + len(join)
        if at < len(clause) and all(clause[j + x].lower == word for x, word in enumerate(join)) \
                and _is_name(clause[at]):
            return at
    return None


def _classified_subject(clause: list[Item], k: int, state: TextState,
                        sentence_subjects: list[str] | None) -> SubjectReading | None:
    """"The element polonium", "The physicist Pierre Curie": the noun or name after the classifier."""
    item, n = clause[k], len(clause)
    if not (item.kind == "word" and item.lower == "the" and k + 2 < n
            and clause[k + 1].lower in CLASSIFIERS | TITLE_NOUNS):
        return None
    target = clause[k + 2]
    if _is_name(target):
        return [canonical(target, state)], k + 3, True
    if target.kind == "word" and is_nounish(target.lower):
        return [target.lower], k + 3, True
    return [], k, False


# The name list comes before the classified noun: in "The City is ..." "City" is a name, not the classifier.
_SUBJECT_READERS = (_pronoun_subject, _possessive_description, _name_list_subject, _classified_subject)
