"""The phrases a relation is built from: verb groups, noun phrases, argument lists, predicate wording.

Subjects, asides, clauses and predicates all need to know where a verb group or a noun phrase
starts and ends ("was later awarded", "the element polonium", "X, Y and Z"); these readers
are shared by all of them and only recognise, never record anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from .lexicon import (
    AUXILIARIES,
    CLASSIFIERS,
    COPULA,
    DETERMINERS,
    HAVE,
    MODALS,
    NEGATIONS,
    NP_ADJECTIVES,
    NUMBER_WORDS,
    POSSESSIVE_PRONOUNS,
    PREPOSITIONS,
    is_adverb,
    is_cap,
    is_nounish,
    is_verb,
)
from .mentions import Item
from .names import canonical
from .state import TextState

MAX_NP_WORDS = 4


@dataclass(slots=True)
class VerbGroup:
    head: list[str]        # the main verb (and what follows it), without auxiliaries; [] for a bare copula
    end: int               # index after the group
    copula_only: bool      # "is", "was" with no other verb
    passive: bool          # "was awarded"
    copula: str = "was"    # the form of "be" in a passive ("is called", "was awarded")


def skip_determiners(items: list[Item], j: int) -> int:
    """The index of the first item at or after ``j`` that is not an article."""
    while j < len(items) and items[j].kind == "word" and items[j].lower in DETERMINERS:
        j += 1
    return j


# ---------------------------------------------------------------------------- verb groups
def verb_group(items: list[Item], k: int) -> VerbGroup | None:
    """The verb group at ``k`` ("discovered", "was born", "has later become"); None if there is none, or if it
    has a modal or a negation (what may or did not happen is not a fact)."""
    scanned = _verb_words(items, k)
    if scanned is None:
        return None
    words, main, j = scanned
    while j < len(items) and items[j].kind == "word" and is_adverb(items[j].lower) \
            and items[j].lower not in PREPOSITIONS:
        j += 1
    if j < len(items) and items[j].kind == "word" and items[j].lower in NEGATIONS:
        return None
    return _group_of(words, main, j)


def _group_of(words: list[str], main: str, end: int) -> VerbGroup | None:
    """The group's head and voice: a main verb (passive after a form of "be"), a bare "have", or a bare copula."""
    if main:
        copulas = [w for w in words[:-1] if w in COPULA]
        copula = copulas[0] if copulas and copulas[0] in ("is", "are", "was", "were") else "was"
        return VerbGroup([main], end, False, bool(copulas), copula)
    if words[-1] in HAVE:
        return VerbGroup([words[-1]], end, False, False)
    if any(w in COPULA for w in words):
        return VerbGroup([], end, True, False)
    return None


def _verb_words(items: list[Item], k: int) -> tuple[list[str], str, int] | None:
    """Auxiliaries and the main verb at ``k`` (adverbs between them skipped): (words, main verb or '', end)."""
    words: list[str] = []
    j = k
    while j < len(items) and items[j].kind == "word":
        w = items[j].lower
        if w in MODALS or w in NEGATIONS:
            return None
        if w in AUXILIARIES:
            words.append(w)
            j += 1
            continue
        if _adverb_inside_group(items, j, bool(words)):
            j += 1
            continue
        if is_verb(w):
            words.append(w)
            return words, w, j + 1
        break
    return (words, "", j) if words else None


def _adverb_inside_group(items: list[Item], j: int, after_auxiliary: bool) -> bool:
    """An adverb after an auxiliary ("was later awarded") or right before the verb ("later isolated")."""
    if not is_adverb(items[j].lower):
        return False
    return after_auxiliary or (j + 1 < len(items) and items[j + 1].kind == "word" and is_verb(items[j + 1].lower))


def normalise_predicate(words: list[str]) -> str:
    """Lower-case phrase without articles, possessives or adverbs.

    "became the director of" → "became director of".
    """
    return " ".join(w for w in words if w not in DETERMINERS and w not in POSSESSIVE_PRONOUNS
                    and (w in NP_ADJECTIVES or not is_adverb(w)))


# ---------------------------------------------------------------------------- arguments
def argument_list(items: list[Item], k: int, state: TextState) -> tuple[list[tuple[str, bool]], int]:
    """Arguments at ``k`` (after optional articles): 'X', 'X and Y', 'X, Y and Z'."""
    args: list[tuple[str, bool]] = []
    j = k
    while True:
        j = skip_determiners(items, j)
        if j >= len(items) or not items[j].is_argument:
            break
        item = items[j]
        args.append((canonical(item, state), item.kind == "name"))
        nxt = _next_list_member(items, j + 1, item.kind)
        if nxt is None:
            j += 1
            break
        j = nxt
    return args, (j if args else k)


def _next_list_member(items: list[Item], j: int, kind: str) -> int | None:
    """Where the next member of a list starts after ``, `` / `` and `` / ``, and `` at ``j``, if it is an argument
    of the same ``kind``."""
    if not (j + 1 < len(items) and (items[j].text == "," or items[j].lower == "and")):
        return None
    nxt = j + 1
    if items[j].text == "," and items[nxt].lower == "and":
        nxt += 1
    look = skip_determiners(items, nxt)
    if look < len(items) and items[look].is_argument and items[look].kind == kind:
        return nxt
    return None


# ---------------------------------------------------------------------------- noun phrases
def np_word(items: list[Item], j: int, started: bool) -> bool:
    """Whether ``items[j]`` can continue a noun phrase (``started``: after an article or a noun)."""
    item = items[j]
    if item.kind == "name":
        # Adjectival names inside a phrase: "the first X-ray photographs", "a French physicist".
        return item.modifier and not item.possessive
    if item.kind != "word":
        return False
    w = item.lower
    if is_nounish(w) or w in NUMBER_WORDS or w in NP_ADJECTIVES:
        return True
    # A participle used as an adjective: "applied physics", "charged particles".
    return (started and w.endswith("ed") and j + 1 < len(items) and items[j + 1].kind == "word"
            and is_nounish(items[j + 1].lower))


def noun_phrase(items: list[Item], k: int) -> tuple[str, int]:
    """A lower-case noun phrase at ``k`` ('the element polonium' → 'polonium'); '' if none."""
    j = k
    while j < len(items) and items[j].kind == "word" and (items[j].lower in DETERMINERS
                                                          or items[j].lower in POSSESSIVE_PRONOUNS):
        j += 1
    had_determiner = j > k
    words: list[str] = []
    while j < len(items) and len(words) < MAX_NP_WORDS and np_word(items, j, had_determiner or bool(words)):
        words.append(items[j].text)
        j += 1
    if not _is_noun_phrase(items, words, j):
        return "", k
    if len(words) > 1 and words[0].lower() in CLASSIFIERS:
        words = words[1:]
    tail, j = _of_tail(items, j)
    return " ".join(words + tail), j


def _of_tail(items: list[Item], j: int) -> tuple[list[str], int]:
    """An "of" phrase that continues a noun phrase ("structure of the atom"); not one that leads to a name."""
    if j + 1 < len(items) and items[j].lower == "of" and items[j + 1].kind == "word":
        tail, after = noun_phrase(items, j + 1)
        if tail and not (after < len(items) and items[after].kind == "name"):
            return ["of", tail], after
    return [], j


def _is_noun_phrase(items: list[Item], words: list[str], j: int) -> bool:
    """Whether ``words`` (ending before ``j``) make a noun phrase of their own."""
    if not words or all(w.lower() in NUMBER_WORDS | NP_ADJECTIVES or is_cap(w) for w in words):
        return False
    if not is_nounish(items[j - 1].lower) or items[j - 1].kind != "word":
        return False            # a phrase ends with a noun
    # "the physicist Pierre Curie": the name is the argument
    return not (j < len(items) and items[j].kind == "name" and not items[j].modifier)
