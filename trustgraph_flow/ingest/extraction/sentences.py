"""From chunk text to tokenised sentences: Markdown structure, wrapped lines, sentence ends, tokens.

Chunk text arrives as Markdown or as text taken from PDF pages, with lines wrapped anywhere.
The rules read one sentence at a time, so this module decides where sentences start and end
(joining wrapped lines, honouring headings, list items, fences and tables, not ending a
sentence at an initial or an abbreviation), which lines are titles rather than prose, and
how a sentence splits into words, numbers and punctuation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .lexicon import ABBREVIATIONS, FUNCTION_WORDS, is_cap

#: A token: (kind, text, start, end); kind is "word", "num", "punct" or "poss" (a possessive 's).
Token = tuple[str, str, int, int]

TOKEN = re.compile(
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"|(?P<word>[^\W\d_](?:[\w]|[-'\u2019](?=[^\W\d_]))*)"
    r"|(?P<punct>[^\w\s])"
)
SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*\s+")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
BULLET = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+")
EMPHASIS = re.compile(r"(\*{1,3}|_{2,3})(?=\S)(.+?)(?<=\S)\1")
LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
CODE = re.compile(r"`+")
SPACES = re.compile(r"\s+")


@dataclass(slots=True)
class Sentence:
    text: str
    heading: bool
    tokens: list[Token]


def read_sentences(text: str) -> list[Sentence]:
    """The sentences of ``text``, tokenised, each marked as heading or prose."""
    return [Sentence(s, heading, tokenize(s)) for s, heading in text_sentences(text)]


def clean_inline(line: str) -> str:
    line = LINK.sub(r"\1", line)
    line = EMPHASIS.sub(r"\2", line)
    return CODE.sub("", line)


class _SentenceCollector:
    """Sentences in text order; consecutive prose lines gather into one paragraph until a break."""

    def __init__(self) -> None:
        self.sentences: list[tuple[str, bool]] = []
        self.block: list[str] = []

    def flush(self) -> None:
        if self.block:
            self.sentences.extend((s, False) for s in split_sentences(" ".join(self.block)))
            self.block.clear()

    def heading(self, text: str) -> None:
        self.flush()
        self.sentences.append((text, True))

    def standalone(self, line: str) -> None:
        self.flush()
        self.sentences.extend((s, False) for s in split_sentences(line))

    def line(self, line: str) -> None:
        self._title_before()
        self.block.append(line)

    def finish(self) -> list[tuple[str, bool]]:
        self._title_before()
        self.flush()
        return self.sentences

    def _title_before(self) -> None:
        """A short line without final punctuation, standing alone, is a title (common in PDF text)."""
        block = self.block
        if block and looks_like_title(block[-1]) and (len(block) == 1 or block[-2][-1:] in ".!?:"):
            self.heading(block.pop())


def _is_break(line: str) -> bool:
    """A blank line, a table row or a rule ends a paragraph."""
    return not line or line.startswith("|") or set(line) <= set("-=*_ ")


def text_sentences(text: str) -> list[tuple[str, bool]]:
    """Split text into (sentence, is_heading), joining wrapped lines and honouring Markdown structure."""
    out = _SentenceCollector()
    in_fence = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("```") or line.startswith("~~~"):
            in_fence = not in_fence
            out.flush()
            continue
        if in_fence:
            continue
        if _is_break(line):
            out.flush()
            continue
        heading = HEADING.match(line)
        if heading:
            out.heading(clean_inline(heading.group(1)))
            continue
        bullet = BULLET.match(line)
        line = clean_inline((line[bullet.end():] if bullet else line).lstrip("> ").strip())
        if not line:
            continue
        if bullet:      # a list item is read on its own, never as a title
            out.standalone(line)
        else:
            out.line(line)
    return out.finish()


def looks_like_title(line: str) -> bool:
    words = line.split()
    return (len(line) < 70 and line[-1:] not in ".!?:;,)\"'\u201d-" and len(words) <= 7
            and words[-1].lower() not in FUNCTION_WORDS and is_cap(words[0]))


def split_sentences(paragraph: str) -> list[str]:
    paragraph = SPACES.sub(" ", paragraph).strip()
    sentences = []
    start = 0
    for match in SENTENCE_END.finditer(paragraph):
        nxt = paragraph[match.end():match.end() + 1]
        if not (nxt.isupper() or nxt.isdigit() or nxt in "\"'\u201c\u2018(["):
            continue
        before = paragraph[start:match.start()].rsplit(" ", 1)[-1].lower().lstrip("(\"'")
        if paragraph[match.start()] == "." and (before in ABBREVIATIONS or
                                                (len(before) == 1 and before.isalpha())):
            continue
        sentences.append(paragraph[start:match.start() + 1].strip())
        start = match.end()
    tail = paragraph[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


def tokenize(sentence: str) -> list[Token]:
    tokens: list[Token] = []
    for match in TOKEN.finditer(sentence):
        kind = match.lastgroup or "punct"
        text = match.group()
        start, end = match.span()
        if kind == "word" and len(text) > 2 and text[-2:] in ("'s", "\u2019s"):
            tokens.append(("word", text[:-2], start, end - 2))
            tokens.append(("poss", text[-2:], end - 2, end))
            continue
        tokens.append((kind, text, start, end))
    return tokens
