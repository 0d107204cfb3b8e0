"""The extractive backend: deterministic retrieval and templated composition, not generation.

It implements the same prompt interfaces as an LLM (edge selection, graph and document
answers, a ReAct policy) from lexical overlap, anchor entities and embedding similarity,
and says so: its model id is :data:`MODEL_ID`. Answers are composed only from the edges or
chunks it is given. This module holds the small lexical vocabulary the algorithms share.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from collections.abc import Set as AbstractSet

#: Model id reported by the extractive backend (``tg:llmModel`` in traces).
MODEL_ID = "extractive"
#: One-line statement of what the backend is, logged at start-up.
DESCRIPTION = (
    "extractive backend (model id 'extractive'): deterministic retrieval and templated composition "
    "from the given edges/chunks; it does not generate text"
)

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")

STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing done down during each else ever few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just let me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own please same she should
    so some such tell than that the their theirs them themselves then there these they this those through to too
    under until up upon us very was we were what whatever when where which while who whom whose why will with
    would you your yours yourself yourselves know give find show list describe explain""".split()
)


def words(text: str) -> list[str]:
    """Casefolded word tokens of ``text`` (letters and digits; possessive ``'s`` removed).

    :param text: any text.
    """
    tokens = []
    for match in _WORD.finditer(text.casefold()):
        token = match.group(0).replace("\u2019", "'")
        if token.endswith("'s"):
            token = token[:-2]
        token = token.replace("'", "")
        if token:
            tokens.append(token)
    return tokens


def stem(word: str) -> str:
    """Light suffix stripping so "discovered", "discovers" and "discover" meet.

    Deliberately small (plural, -ed, -ing, final -e); numbers and short words are kept.

    :param word: a casefolded word.
    """
    if len(word) <= 3 or word.isdigit():
        return word
    if len(word) == 4 and word.endswith("ied"):  # died, lied, tied -> die, lie, tie
        return word[:-1]
    if word.endswith(("ies", "ied")) and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses") or (word.endswith("es") and word[-3:-2] in ("s", "x", "z")) \
            or word.endswith(("ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    elif word.endswith("ing") and len(word) > 5:
        word = word[:-3]
        if len(word) > 2 and word[-1] == word[-2] and word[-1] not in "aeiouls":
            word = word[:-1]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
        if len(word) > 2 and word[-1] == word[-2] and word[-1] not in "aeiouls":
            word = word[:-1]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def content_terms(text: str) -> list[tuple[str, str]]:
    """``(word, stem)`` pairs of the content words of ``text`` (stop words removed), in order.

    :param text: any text.
    """
    return [(w, stem(w)) for w in words(text) if w not in STOP_WORDS]


def content_stems(text: str) -> set[str]:
    """The set of content-word stems of ``text``.

    :param text: any text.
    """
    return {s for _, s in content_terms(text)}


def idf_table(documents: Iterable[AbstractSet[str]]) -> tuple[dict[str, int], int]:
    """Document frequencies of stems over ``documents`` and the number of documents.

    :param documents: one set of stems per document.
    """
    frequencies: dict[str, int] = {}
    count = 0
    for document in documents:
        count += 1
        for term in document:
            frequencies[term] = frequencies.get(term, 0) + 1
    return frequencies, count


def idf(term: str, frequencies: dict[str, int], count: int) -> float:
    """Smoothed inverse document frequency (always > 0; unseen terms weigh most).

    :param term: a stem.
    :param frequencies: document frequencies from :func:`idf_table`.
    :param count: number of documents.
    """
    return math.log((count + 1) / (frequencies.get(term, 0) + 1)) + 1.0


def cosine(a: list[float], b: list[float]) -> float:
    """Cosine similarity of two vectors (0 when either is all zeros).

    :param a: first vector.
    :param b: second vector.
    """
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def mentions(text: str, phrase: str) -> bool:
    """True when ``phrase`` occurs in ``text`` as whole words (casefolded).

    :param text: the text searched, e.g. a question.
    :param phrase: an entity label.
    """
    needle = " ".join(words(phrase))
    if len(needle) < 3:
        return False
    return f" {needle} " in f" {' '.join(words(text))} "
