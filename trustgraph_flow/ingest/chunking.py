"""Split page text into overlapping chunks with exact character offsets.

Chunks are what get embedded and what the extractor reads, and each one is recorded in
the provenance chain with its ``charOffset``/``charLength`` into the page, so offsets must
be exact: ``text[chunk.char_offset:chunk.char_offset + chunk.char_length] == chunk.text``.

Boundaries are chosen like a recursive character splitter: a chunk ends at a paragraph
break if one lies in the second half of the window, else at a line break, else at a
sentence end, else between words, and only as a last resort inside a word.  Unlike a
split-then-merge splitter, the chunk positions are computed directly on the original text,
so no offset is ever recovered by searching for the chunk's text.  The next chunk starts
inside the previous one, at most ``chunk_overlap`` characters before its end, at the best
boundary in that window (sentence before word), so overlaps are whole sentences or words (a
start is only taken if the next chunk can still end between words).
Leading and trailing whitespace is trimmed from every chunk; whitespace-only text yields
no chunks.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

DEFAULT_CHUNK_SIZE = 1000
DEFAULT_CHUNK_OVERLAP = 100

# Boundary kinds, strongest first.  A boundary is the position where a new piece starts.
_BOUNDARY_PATTERNS = (
    re.compile(r"\n[ \t\f\v]*\n\s*"),                     # paragraph break
    re.compile(r"\n\s*"),                                 # line break
    re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+"),    # end of a sentence
    re.compile(r"\s+"),                                   # between words
)
_NON_SPACE = re.compile(r"\S")


@dataclass(frozen=True, slots=True)
class TextChunk:
    """One chunk: its 0-based ``index`` and its exact span in the page text."""

    index: int
    char_offset: int
    char_length: int
    text: str


def check_chunk_options(chunk_size: int, chunk_overlap: int) -> None:
    """Validate chunking options.

    :param chunk_size: maximum characters per chunk; must be a positive integer.
    :param chunk_overlap: maximum characters shared by consecutive chunks; ``0 <= overlap < size``.
    :raises ValueError: with the reason when the options are invalid.
    """
    for name, value in (("chunk_size", chunk_size), ("chunk_overlap", chunk_overlap)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer, not {value!r}")
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, not {chunk_size}")
    if chunk_overlap < 0:
        raise ValueError(f"chunk_overlap must not be negative, not {chunk_overlap}")
    if chunk_overlap >= chunk_size:
        raise ValueError(f"chunk_overlap ({chunk_overlap}) must be smaller than chunk_size ({chunk_size})")


def chunk_text(text: str, chunk_size: int = DEFAULT_CHUNK_SIZE,
               chunk_overlap: int = DEFAULT_CHUNK_OVERLAP) -> list[TextChunk]:
    """Split ``text`` into chunks of at most ``chunk_size`` characters.

    :param text: the page text.
    :param chunk_size: maximum length of a chunk, in characters.
    :param chunk_overlap: maximum number of characters a chunk shares with the previous one.
    :returns: the chunks in text order, indexed from 0, with exact offsets.
    :raises ValueError: when the options are invalid (see :func:`check_chunk_options`).
    """
    check_chunk_options(chunk_size, chunk_overlap)
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, not {type(text).__name__}")
    boundaries = _boundaries(text)
    length = len(text)
    chunks: list[TextChunk] = []
    start = _skip_space(text, 0)
    previous_end = start
    while start < length:
        end, cut_inside_word = _choose_end(boundaries, start, chunk_size, length, previous_end)
        stripped_end = len(text[start:end].rstrip()) + start
        if stripped_end > start:
            chunks.append(TextChunk(len(chunks), start, stripped_end - start, text[start:stripped_end]))
        if end >= length:
            break
        previous_end = end
        start = _skip_space(text, _choose_next_start(boundaries, start, end, chunk_overlap, chunk_size, length,
                                                     cut_inside_word))
    return chunks


def _boundaries(text: str) -> list[list[int]]:
    """Sorted boundary positions per kind (strongest kind first)."""
    length = len(text)
    return [[end for end in (m.end() for m in pattern.finditer(text)) if 0 < end < length]
            for pattern in _BOUNDARY_PATTERNS]


def _skip_space(text: str, position: int) -> int:
    match = _NON_SPACE.search(text, position)
    return match.start() if match else len(text)


def _last_in(positions: list[int], low: int, high: int) -> int | None:
    """The largest position with ``low < p <= high``, if any."""
    i = bisect.bisect_right(positions, high)
    if i and positions[i - 1] > low:
        return positions[i - 1]
    return None


def _choose_end(boundaries: list[list[int]], start: int, size: int, length: int,
                previous_end: int) -> tuple[int, bool]:
    """Where the chunk starting at ``start`` ends (the strongest boundary late in the window), and
    whether it had to cut inside a word."""
    limit = start + size
    if limit >= length:
        return length, False
    for kind, positions in enumerate(boundaries):
        # Strong boundaries must leave the chunk at least half full; word breaks anywhere.
        low = max(previous_end, start + size // 2 if kind < len(boundaries) - 1 else start)
        found = _last_in(positions, low, limit)
        if found is not None:
            return found, False
    return max(limit, previous_end + 1), True


def _choose_next_start(boundaries: list[list[int]], start: int, end: int, overlap: int, size: int,
                       length: int, cut_inside_word: bool) -> int:
    """Where the next chunk starts: the earliest strong boundary within the overlap window.

    A start is only taken if the next chunk can still end at a boundary after ``end`` (so
    the overlap never forces a word to be cut).  Without such a boundary, a chunk that was
    cut inside a word overlaps by characters; one that ended between words is not overlapped.
    """
    if overlap == 0:
        return end
    low = max(start + 1, end - overlap)
    every_break = boundaries[-1]       # word breaks include every stronger boundary
    for positions in boundaries:
        i = bisect.bisect_left(positions, low)
        while i < len(positions) and positions[i] < end:
            candidate = positions[i]
            if candidate + size >= length or _last_in(every_break, end, candidate + size) is not None:
                return candidate
            i += 1
    return low if cut_inside_word else end
