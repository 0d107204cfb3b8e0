"""Chunking: exact offsets, boundary preference, overlap, option validation; invariants by hypothesis."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustgraph_flow.ingest.chunking import TextChunk, check_chunk_options, chunk_text

pytestmark = pytest.mark.unit

SENTENCE = "Marie Curie measured the rays of uranium with an electrometer. "


def assert_invariants(text: str, chunks: list[TextChunk], size: int, overlap: int) -> None:
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert text[chunk.char_offset:chunk.char_offset + chunk.char_length] == chunk.text
        assert 0 < chunk.char_length <= size
        assert chunk.text == chunk.text.strip()
    for before, after in pairwise(chunks):
        assert after.char_offset > before.char_offset
        shared = before.char_offset + before.char_length - after.char_offset
        assert shared <= overlap
    covered = set()
    for chunk in chunks:
        covered.update(range(chunk.char_offset, chunk.char_offset + chunk.char_length))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


@pytest.mark.parametrize("size, overlap, message", [
    (0, 0, "chunk_size must be positive"),
    (-5, 0, "chunk_size must be positive"),
    (100, -1, "must not be negative"),
    (100, 100, "must be smaller"),
    (100, 150, "must be smaller"),
    (100.0, 10, "must be an integer"),
    (100, True, "must be an integer"),
])
def test_invalid_options(size, overlap, message):
    with pytest.raises(ValueError, match=message):
        chunk_text("some text", size, overlap)
    with pytest.raises(ValueError, match=message):
        check_chunk_options(size, overlap)


def test_empty_and_whitespace_text_give_no_chunks():
    assert chunk_text("") == []
    assert chunk_text(" \n\n\t ") == []


def test_short_text_is_one_trimmed_chunk_with_exact_offsets():
    text = "\n\n  Polonium was discovered in 1898.  \n"
    chunks = chunk_text(text, 1000, 100)
    assert chunks == [TextChunk(0, 4, 32, "Polonium was discovered in 1898.")]


def test_chunks_end_at_paragraph_breaks_when_possible():
    paragraphs = [(SENTENCE * 5).strip() for _ in range(6)]   # ~315 characters each
    text = "\n\n".join(paragraphs)
    chunks = chunk_text(text, 700, 0)
    assert_invariants(text, chunks, 700, 0)
    for chunk in chunks[:-1]:
        end = chunk.char_offset + chunk.char_length
        assert text[end:end + 2] == "\n\n", "a chunk should end where a paragraph ends"


def test_chunks_end_at_sentence_ends_when_there_is_no_paragraph_break():
    text = SENTENCE * 40
    chunks = chunk_text(text, 500, 0)
    assert_invariants(text, chunks, 500, 0)
    assert len(chunks) > 4
    assert all(c.text.endswith(".") for c in chunks)


def test_overlap_is_honoured_and_starts_at_a_sentence_or_word():
    text = SENTENCE * 40
    chunks = chunk_text(text, 500, 100)
    assert_invariants(text, chunks, 500, 100)
    for before, after in pairwise(chunks):
        shared = before.char_offset + before.char_length - after.char_offset
        assert 0 < shared <= 100
        assert text[after.char_offset - 1].isspace(), "overlap starts at a word boundary"
    # a whole sentence (63 characters) fits in the window, so overlaps start at a sentence
    assert all(c.text.startswith("Marie Curie") for c in chunks)


def test_words_are_split_only_when_a_single_word_exceeds_the_size():
    text = "x" * 2500
    chunks = chunk_text(text, 1000, 100)
    assert_invariants(text, chunks, 1000, 100)
    assert [(c.char_offset, c.char_length) for c in chunks] == [(0, 1000), (900, 1000), (1800, 700)]


def test_zero_overlap_chunks_tile_the_text():
    text = "alpha beta gamma delta " * 100
    chunks = chunk_text(text, 120, 0)
    assert_invariants(text, chunks, 120, 0)
    rebuilt = " ".join(c.text for c in chunks)
    assert rebuilt.split() == text.split()


def test_unicode_text_offsets_are_character_offsets():
    text = ("Maria Skłodowska urodziła się w Warszawie. " * 30).strip()
    chunks = chunk_text(text, 200, 40)
    assert_invariants(text, chunks, 200, 40)


def test_default_options_are_1000_and_100():
    text = SENTENCE * 100
    assert chunk_text(text) == chunk_text(text, 1000, 100)


TEXT_ALPHABET = st.sampled_from(list("abcde XYZ.,!?\n\t") + ["\n\n", ". ", "é", "ł"])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(TEXT_ALPHABET, max_size=400), size=st.integers(1, 120), data=st.data())
def test_invariants_hold_for_any_text(parts, size, data):
    text = "".join(parts)
    overlap = data.draw(st.integers(0, size - 1))
    chunks = chunk_text(text, size, overlap)
    assert_invariants(text, chunks, size, overlap)
    assert chunk_text(text, size, overlap) == chunks, "chunking is deterministic"


@settings(max_examples=100, deadline=None)
@given(words=st.lists(st.text(alphabet="abcdefghij", min_size=1, max_size=12), min_size=1, max_size=300),
       seps=st.sampled_from([" ", ". ", "\n", "\n\n"]), size=st.integers(20, 300), data=st.data())
def test_words_are_never_cut_when_they_fit(words, seps, size, data):
    text = seps.join(words)
    overlap = data.draw(st.integers(0, size // 2))
    chunks = chunk_text(text, size, overlap)
    assert_invariants(text, chunks, size, overlap)
    for chunk in chunks:
        start, end = chunk.char_offset, chunk.char_offset + chunk.char_length
        assert start == 0 or not text[start - 1].isalpha()
        assert end == len(text) or not text[end].isalpha()
