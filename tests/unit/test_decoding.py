"""Decoding documents into pages: text, Markdown and PDF, and every kind of bad input (the other formats and
detection by content: ``test_formats.py``)."""

from __future__ import annotations

import gc
import io
import random
import tracemalloc

import document_samples as samples
import pypdf
import pytest

from trustgraph_flow.ingest import decoding
from trustgraph_flow.ingest.decoding import (
    DEFAULT_MAX,
    BinaryContent,
    BrokenPdf,
    DecodedPage,
    DecodeError,
    DocumentTooLarge,
    EmptyDocument,
    EncryptedPdf,
    InvalidEncoding,
    UnknownKind,
    decode_document,
    detect_kind,
    normalize_kind,
    stream_document,
)

pytestmark = pytest.mark.unit


def encrypt(pdf_bytes: bytes, user_password: str, owner_password: str | None = None) -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(pdf_bytes)))
    writer.encrypt(user_password, owner_password=owner_password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


# ---------------------------------------------------------------- good input
def test_plain_text_is_one_page_with_the_whole_text():
    pages = decode_document("First line.\nSecond line, with ünïcode.\n".encode(), "text/plain", "a.txt")
    assert pages == [DecodedPage(1, "First line.\nSecond line, with ünïcode.\n")]


def test_markdown_is_kept_verbatim_with_headings_as_lines():
    text = "# Title\n\nSome *emphasis* and a [link](http://example.org).\n\n## Section\n- item one\n"
    pages = decode_document(text.encode(), "text/markdown")
    assert len(pages) == 1
    assert pages[0].text == text
    assert "# Title" in pages[0].text.splitlines()


def test_crlf_and_bom_are_normalised():
    pages = decode_document(b"\xef\xbb\xbfline one\r\nline two\rline three", "text/plain")
    assert pages[0].text == "line one\nline two\nline three"


def test_kind_parameters_and_aliases_are_accepted():
    assert normalize_kind("Text/Markdown; charset=utf-8") == "text/markdown"
    assert normalize_kind("text/x-markdown") == "text/markdown"
    assert normalize_kind("application/x-pdf") == "application/pdf"


def test_pdf_gives_one_page_per_pdf_page_and_keeps_blank_pages():
    pdf = samples.pdf(["Polonium was discovered in 1898.", "", "Radium was announced in December 1898."])
    pages = decode_document(pdf, "application/pdf", "elements.pdf")
    assert [p.page_number for p in pages] == [1, 2, 3]
    assert "Polonium was discovered in 1898." in pages[0].text
    assert pages[1].text == ""
    assert "Radium was announced in December 1898." in pages[2].text


def test_pdf_encrypted_with_an_empty_user_password_is_readable():
    pdf = encrypt(samples.pdf(["Readable without a password."]), "", owner_password="owner-secret")
    pages = decode_document(pdf, "application/pdf")
    assert "Readable without a password." in pages[0].text


def test_empty_kind_means_detect():
    pdf = samples.pdf(["Detected by magic bytes."])
    assert "Detected by magic bytes." in decode_document(pdf, "", "upload.bin")[0].text
    assert decode_document(b"# Heading\n", "", "notes.md")[0].text == "# Heading\n"


def test_explicit_encoding_override_decodes_latin1():
    content = "Marie Curie était à Paris.".encode("latin-1")
    assert decode_document(content, "text/plain", encoding="latin-1")[0].text == "Marie Curie était à Paris."


def test_utf16_with_explicit_encoding_is_not_taken_for_binary():
    content = "Polonium and radium.".encode("utf-16")
    assert decode_document(content, "text/plain", encoding="utf-16")[0].text == "Polonium and radium."


# ---------------------------------------------------------------- detect_kind
@pytest.mark.parametrize("filename, content, kind", [
    ("notes.txt", b"hello", "text/plain"),
    ("README.TEXT", b"hello", "text/plain"),
    ("notes.md", b"# hi", "text/markdown"),
    ("notes.markdown", b"# hi", "text/markdown"),
    ("paper.pdf", b"%PDF-1.7 ...", "application/pdf"),
    ("misnamed.txt", b"%PDF-1.4 ...", "application/pdf"),
    ("README", b"plain words without an extension", "text/plain"),
    ("data.xyz", b"some text", "text/plain"),
    ("LICENSE", b"Apache License\n   1. Definitions.\n   2. Grant of Copyright License.\n", "text/plain"),
])
def test_detect_kind(filename, content, kind):
    assert detect_kind(filename, content) == kind


@pytest.mark.parametrize("filename, content, words", [
    ("report.docx", b"PK\x03\x04rest-of-zip", "ZIP archive"),
    ("picture.png", b"\x89PNG\r\n\x1a\n....", "PNG image"),
    ("notes.txt", b"\x89PNG\r\n\x1a\n....", "PNG image"),
    ("blob", b"\x00\x01\x02\x03binary", "binary data"),
])
def test_detect_kind_refuses_unknown_types_by_name(filename, content, words):
    with pytest.raises(UnknownKind) as info:
        detect_kind(filename, content)
    assert words in str(info.value)


# ---------------------------------------------------------------- bad input
def test_empty_file():
    with pytest.raises(EmptyDocument, match="empty"):
        decode_document(b"", "text/plain", "empty.txt")


def test_whitespace_only_text_is_empty():
    with pytest.raises(EmptyDocument, match="only whitespace"):
        decode_document(b" \n\t\n  ", "text/markdown", "blank.md")


def test_binary_garbage_given_as_text():
    garbage = random.Random(7).randbytes(4096)
    with pytest.raises(BinaryContent, match="binary"):
        decode_document(garbage, "text/plain", "garbage.txt")


def test_nul_bytes_are_binary_and_the_offset_is_named():
    with pytest.raises(BinaryContent, match="NUL byte at offset 5"):
        decode_document(b"hello\x00world", "text/plain")


def test_high_ratio_of_control_characters_is_binary():
    content = b"ab\x01\x02\x03\x04cd\x05\x06" * 50
    with pytest.raises(BinaryContent, match="control characters"):
        decode_document(content, "text/plain")


def test_pdf_sent_as_text_is_refused():
    with pytest.raises(BinaryContent, match="is a PDF"):
        decode_document(samples.pdf(["x"]), "text/plain", "doc.txt")


def test_invalid_utf8_names_the_byte_offset():
    content = "Curie é".encode() + b" and \xff broken"
    with pytest.raises(InvalidEncoding) as info:
        decode_document(content, "text/plain", "bad.txt")
    offset = content.index(b"\xff")
    assert f"offset {offset}" in str(info.value)
    assert "0xff" in str(info.value)


def test_unknown_encoding_name():
    with pytest.raises(InvalidEncoding, match="unknown text encoding"):
        decode_document(b"text", "text/plain", encoding="no-such-codec")


def test_text_invalid_in_the_explicit_encoding():
    with pytest.raises(InvalidEncoding, match="not valid ascii"):
        decode_document("é".encode(), "text/plain", encoding="ascii")


def test_unknown_kind():
    with pytest.raises(UnknownKind, match="application/msword"):
        decode_document(b"some bytes", "application/msword", "old.doc")


def test_fifty_megabyte_text_is_refused_before_decoding():
    content = b"a" * (50 * 1024 * 1024)
    with pytest.raises(DocumentTooLarge) as info:
        decode_document(content, "text/plain", "huge.txt")
    message = str(info.value)
    assert "52,428,800 bytes" in message and "10,485,760 bytes" in message
    assert DEFAULT_MAX == 10 * 1024 * 1024


def test_size_limit_is_configurable():
    assert decode_document(b"x" * 100, "text/plain", max_bytes=100)[0].text == "x" * 100
    with pytest.raises(DocumentTooLarge, match="101 bytes"):
        decode_document(b"x" * 101, "text/plain", max_bytes=100)


def test_encrypted_pdf_says_it_is_encrypted():
    pdf = encrypt(samples.pdf(["Secret notes on radium."]), "secret")
    with pytest.raises(EncryptedPdf, match="encrypted"):
        decode_document(pdf, "application/pdf", "secret.pdf")


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_truncated_pdf(cut):
    pdf = samples.pdf(["Page one text.", "Page two text."])
    with pytest.raises(BrokenPdf, match="truncated"):
        decode_document(pdf[: int(len(pdf) * cut)], "application/pdf", "cut.pdf")


def test_pdf_with_a_damaged_body_is_broken_not_partially_read():
    pdf = samples.pdf(["Text that will be damaged."])
    damaged = pdf[:300] + b"garbage" * 40 + pdf[-200:]
    with pytest.raises(BrokenPdf, match="broken PDF"):
        decode_document(damaged, "application/pdf", "damaged.pdf")


def test_not_a_pdf_at_all():
    with pytest.raises(BrokenPdf, match="does not start with %PDF-"):
        decode_document(b"just some text", "application/pdf", "fake.pdf")


def test_pdf_without_any_text():
    with pytest.raises(EmptyDocument, match="no extractable text"):
        decode_document(samples.pdf(["", ""]), "application/pdf", "scan.pdf")


def test_error_classes_carry_distinct_reasons_and_are_value_errors():
    classes = [EmptyDocument, DocumentTooLarge, UnknownKind, BinaryContent, InvalidEncoding, EncryptedPdf, BrokenPdf,
               decoding.BrokenDocument]
    assert len({cls.reason for cls in classes}) == len(classes)
    assert all(issubclass(cls, DecodeError) and issubclass(cls, ValueError) for cls in classes)


def test_content_must_be_bytes():
    with pytest.raises(DecodeError, match="bytes"):
        decode_document("a str", "text/plain")  # type: ignore[arg-type]


def test_supported_kinds():
    assert set(decoding.SUPPORTED_KINDS) == {
        "text/plain", "text/markdown", "application/pdf", "text/html", "text/csv", "text/tab-separated-values",
        "application/epub+zip", "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"}


def test_damage_is_detected_whatever_the_root_log_level():
    """A CLI that quiets the root logger must not turn a broken PDF into an 'empty' one."""
    import logging

    root = logging.getLogger()
    old = root.level
    root.setLevel(logging.ERROR)
    try:
        test_pdf_with_a_damaged_body_is_broken_not_partially_read()
    finally:
        root.setLevel(old)


def _long_pdf(pages: int) -> bytes:
    """``pages`` pages of about 2,600 characters each (one PDF page per text), each starting with its number."""
    body = " ".join(f"Marie Curie measured sample {i} of pitchblende in Paris." for i in range(45))
    return samples.pdf([f"Page {n}. {body}" for n in range(1, pages + 1)])


def _peak_reading_pages(content: bytes) -> tuple[int, int]:
    """(peak traced memory, pages seen) while the pages are decoded one at a time and each is dropped,
    as the decoder service stores and passes on each page before it takes the next."""
    gc.collect()
    tracemalloc.start()
    try:
        stream = stream_document(content, "application/pdf", "long.pdf")
        seen = 0
        for page in stream:
            seen += 1
            assert page.page_number == seen and page.text.startswith(f"Page {seen}.")
        return tracemalloc.get_traced_memory()[1], seen
    finally:
        tracemalloc.stop()


def test_a_300_page_pdf_is_decoded_a_page_at_a_time_in_memory_that_grows_with_a_page():
    """Holding every page (text and pypdf's parsed objects) made the peak grow with the document: 300
    pages took 5.2x the memory of 30; a page at a time, 2.3x (what grows is pypdf's page index, ~2.5 KB a page)."""
    small, large = _long_pdf(30), _long_pdf(300)
    stream = stream_document(large, "application/pdf", "long.pdf")
    assert stream.count == 300  # known before any page is decoded: the decoder announces it first
    peak_small, pages_small = _peak_reading_pages(small)
    peak_large, pages_large = _peak_reading_pages(large)
    assert (pages_small, pages_large) == (30, 300)
    assert peak_large < 4 * peak_small, (peak_small, peak_large)
    assert len(decode_document(small, "application/pdf", "long.pdf")) == 30  # the whole-document form agrees


def test_a_pdf_without_text_fails_its_stream_after_its_last_page():
    content = _long_pdf(3)
    stream = stream_document(content, "application/pdf", "long.pdf")
    assert [p.page_number for p in stream] == [1, 2, 3]
    with pytest.raises(EmptyDocument, match="no extractable text"):
        list(stream_document(samples.pdf(["", ""]), "application/pdf", "blank.pdf"))
