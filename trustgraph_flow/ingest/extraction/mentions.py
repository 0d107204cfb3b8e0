"""From tokens to items: names, dates and numbers become single arguments, everything else stays a word.

The rules read a sentence as a list of :class:`Item`: a relation's subject and object are
whole mentions ("University of Paris", "26 July 1895", "1,000"), not tokens.  This module
finds them (runs of capitalised words with initials and name connectors, day-month-year and
month-year dates, years, numbers), tells a sentence-initial common noun ("Polonium is ...",
"Doctors used ...") from a name, and marks names and years used as modifiers ("French
physicist", "the 1903 Nobel Prize"), which are not arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

from .lexicon import (
    DETERMINERS,
    MONTHS,
    NAME_CONNECTORS,
    NOT_NAME,
    PLURAL_ENDINGS,
    PRONOUNS,
    is_cap,
    is_nounish,
    is_year,
)
from .sentences import SPACES, Sentence, Token

QUOTES = {'"', "\u201c", "\u201d", "\u2018", "\u2019", "'", "`", "\u00ab", "\u00bb", "*", "_"}
OPEN_BRACKETS = {"(": ")", "[": "]", "{": "}"}
MAX_NAME_TOKENS = 8


@dataclass(slots=True)
class Item:
    """A word, punctuation mark or grouped argument (name, date, number) of one sentence."""

    kind: str            # "word", "punct", "name", "date", "num"
    text: str            # surface text (label for arguments)
    lower: str
    start: int           # character span in the sentence
    end: int
    modifier: bool = False   # a name used as an adjective or possessive ("French", "Curie's")
    possessive: bool = False
    single: bool = False     # a one-word name

    @property
    def is_argument(self) -> bool:
        return self.kind in ("name", "date", "num") and not self.modifier


def lowercase_words(sentences: list[Sentence]) -> set[str]:
    """Words the text uses in lower case after a sentence's first word."""
    return {tok[1] for sent in sentences for tok in sent.tokens[1:] if tok[0] == "word" and tok[1][:1].islower()}


def capitalised_inside(sentences: list[Sentence]) -> set[str]:
    """Words (lower-cased) the text capitalises alone inside a sentence: names, even when they start one."""
    return {tokens[i][1].lower() for tokens in (sent.tokens for sent in sentences) for i in range(1, len(tokens))
            if tokens[i][0] == "word" and is_cap(tokens[i][1]) and not is_cap(tokens[i - 1][1])
            and not (i + 1 < len(tokens) and tokens[i + 1][0] == "word" and is_cap(tokens[i + 1][1]))}


def group_items(sent: Sentence, lowercase: set[str], capitalised: set[str]) -> list[Item]:
    """Group tokens into items: names, dates and numbers become single argument items.

    :param lowercase: the text's :func:`lowercase_words`.
    :param capitalised: the text's :func:`capitalised_inside`.
    """
    tokens = drop_brackets_and_quotes(sent.tokens)
    items: list[Item] = []
    i, n = 0, len(tokens)
    while i < n:
        kind, word, start, end = tokens[i]
        if kind == "num":
            item, i = number_or_date(tokens, i)
        elif kind == "word" and word.lower() in MONTHS and is_cap(word):
            item, i = month_date(tokens, i)
        elif name_word(tokens, i, first=True):
            item, i = _name_or_common_noun(sent.text, tokens, i, lowercase, capitalised)
        elif kind == "poss":
            if items:
                items[-1].possessive = True
                items[-1].modifier = True
            i += 1
            continue
        else:
            item, i = Item(kind if kind == "word" else "punct", word, word.lower(), start, end), i + 1
        items.append(item)
    mark_modifiers(items)
    return items


def drop_brackets_and_quotes(tokens: list[Token]) -> list[Token]:
    out = []
    closing: list[str] = []
    for tok in tokens:
        kind, text = tok[0], tok[1]
        if kind == "punct" and text in OPEN_BRACKETS:
            closing.append(OPEN_BRACKETS[text])
            continue
        if closing:
            if kind == "punct" and text == closing[-1]:
                closing.pop()
            continue
        if kind == "punct" and text in QUOTES:
            continue
        out.append(tok)
    return out


def name_word(tokens: list[Token], i: int, first: bool) -> bool:
    kind, text, _, _ = tokens[i]
    if kind != "word" or not is_cap(text):
        return False
    lower = text.lower()
    if lower in MONTHS:
        return False
    if first and lower in NOT_NAME:
        return False
    return not (not first and lower in PRONOUNS | DETERMINERS)


def _name_or_common_noun(text: str, tokens: list[Token], i: int, lowercase: set[str],
                         capitalised: set[str]) -> tuple[Item, int]:
    """The name starting at ``i``; a lone sentence-initial word the text also uses in lower case, or a plural
    one, is a common noun instead."""
    kind, word, start, end = tokens[i]
    lower = word.lower()
    last = name_end(tokens, i)
    label = text[tokens[i][2]:tokens[last][3]]
    single = last == i
    if single and i == 0 and lower not in capitalised:
        if lower in lowercase:
            label = lower         # a common noun that merely starts the sentence ("Polonium is ...")
        elif lower.endswith(PLURAL_ENDINGS):
            # A plural common noun ("Doctors used radium"), not a name.
            return Item("word", word, lower, start, end), i + 1
    return Item("name", SPACES.sub(" ", label), label.lower(), tokens[i][2], tokens[last][3], single=single), last + 1


def name_end(tokens: list[Token], i: int) -> int:
    """The index of the last word of the name starting at ``i``."""
    j, last = i + 1, i
    while j < len(tokens) and j - i < MAX_NAME_TOKENS:
        if name_word(tokens, j, first=False) and tokens[j - 1][0] != "poss":
            last = j
        elif not (_is_initial_stop(tokens, j) or _is_name_connector(tokens, i, j, last)):
            break
        j += 1
    return last


def _is_initial_stop(tokens: list[Token], j: int) -> bool:
    """The full stop of an initial inside a name: "J. J. Thomson"."""
    return (tokens[j][1] == "." and len(tokens[j - 1][1]) == 1 and tokens[j - 1][1].isupper()
            and j + 1 < len(tokens) and name_word(tokens, j + 1, first=False))


def _is_name_connector(tokens: list[Token], i: int, j: int, last: int) -> bool:
    """A lower-case word inside a name: "University of Paris", "Nobel Prize in Physics",
    "Faculty of Arts and Sciences"."""
    n = len(tokens)
    if not (tokens[j][0] == "word" and j + 1 < n and name_word(tokens, j + 1, first=False)):
        return False
    word = tokens[j][1]
    if word in NAME_CONNECTORS:
        return True
    if word == "in":
        return tokens[last][1].lower() in ("prize", "prizes")
    return (word == "and" and any(t[1] == "of" for t in tokens[i:j])
            and not (j + 2 < n and name_word(tokens, j + 2, first=False)))


def number_or_date(tokens: list[Token], i: int) -> tuple[Item, int]:
    kind, text, start, end = tokens[i]
    n = len(tokens)
    # "26 July 1895"
    if (text.isdigit() and 1 <= int(text) <= 31 and i + 2 < n and tokens[i + 1][1].lower() in MONTHS
            and is_year(tokens[i + 2][1])):
        last = tokens[i + 2]
        return Item("date", f"{text} {tokens[i + 1][1]} {last[1]}", "", start, last[3]), i + 3
    if is_year(text):
        return Item("date", text, text, start, end), i + 1
    return Item("num", text, text, start, end), i + 1


def month_date(tokens: list[Token], i: int) -> tuple[Item, int]:
    _, month, start, end = tokens[i]
    n = len(tokens)
    j = i + 1
    day = ""
    if j < n and tokens[j][0] == "num" and tokens[j][1].isdigit() and 1 <= int(tokens[j][1]) <= 31:
        day = tokens[j][1]
        j += 1
        if j < n and tokens[j][1] == ",":
            j += 1
    if j < n and tokens[j][0] == "num" and is_year(tokens[j][1]):
        label = f"{month} {day}, {tokens[j][1]}" if day else f"{month} {tokens[j][1]}"
        return Item("date", label, label.lower(), start, tokens[j][3]), j + 1
    return Item("word", month, month.lower(), start, end), i + 1


def mark_modifiers(items: list[Item]) -> None:
    """Names used as adjectives ("French physicist") and years before names are not arguments."""
    for k, item in enumerate(items):
        nxt = items[k + 1] if k + 1 < len(items) else None
        if item.kind == "name" and nxt is not None and nxt.kind == "word" and is_nounish(nxt.lower):
            item.modifier = True
        if (item.kind == "date" and nxt is not None and nxt.kind == "name" and item.text.isdigit()
                and k > 0 and items[k - 1].lower in DETERMINERS):
            item.modifier = True     # "the 1903 Nobel Prize"


def next_comma(items: list[Item], start: int, limit: int = 14) -> int:
    """The index of the next comma within ``limit`` items (the end, if it is that near); -1 at a semicolon or none."""
    for k in range(start, min(len(items), start + limit)):
        if items[k].kind == "punct" and items[k].text in ",;":
            return k if items[k].text == "," else -1
    return len(items) if len(items) - start <= limit else -1
