"""Text and Markdown: the bytes as one page of text, in UTF-8 or the encoding they are in.

Bytes are text when they hold no NUL byte and few control characters.  Their encoding is
UTF-8 (a byte-order mark allowed, UTF-16/32 too when marked), the one named by the caller,
or, for text that is not UTF-8 at all, a detected one: Windows-1252 (which reads Latin-1
too) when that gives Western text, words of ASCII letters with accented letters among
them; else the one charset-normalizer finds (on short texts its statistics cannot tell
the Western code pages apart, hence the preference).  Text that is
*almost* UTF-8 (valid multi-byte sequences, then a bad byte) is damaged, not in another
encoding, and is refused with the byte's offset.
"""

from __future__ import annotations

import codecs
import re

from ..decoding import APPLICATION_PDF, BinaryContent, DecodedPage, EmptyDocument, InvalidEncoding

#: Share of control characters above which "text" is taken to be binary data.
MAX_CONTROL_RATIO = 0.05
#: Largest share of accented letters in text read as Windows-1252 (Cyrillic or Greek read so is mostly accented).
MAX_ACCENTED_SHARE = 0.3

# Control bytes that never occur in ordinary text (tab, LF, FF, CR are fine).
_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 12, 13)) + b"\x7f"
_CONTROL_CHARS = {b: None for b in _CONTROL_BYTES}
_WIDE_ENCODINGS = {"utf16", "utf16le", "utf16be", "utf32", "utf32le", "utf32be"}
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_MULTIBYTE_UTF8 = re.compile(rb"[\xc2-\xf4][\x80-\xbf]+")


def decode_text(content: bytes, name: str, encoding: str | None) -> list[DecodedPage]:
    """The whole text as page 1 (line ends normalised to ``\\n``)."""
    text = text_of(content, name, encoding)
    if not text.strip():
        raise EmptyDocument(f"{name} contains only whitespace")
    return [DecodedPage(1, text)]


def text_of(content: bytes, name: str, encoding: str | None = None) -> str:
    """The text of ``content`` (see the module docstring), BOM dropped and line ends normalised.

    :raises BinaryContent: a PDF, NUL bytes or too many control characters.
    :raises InvalidEncoding: not decodable in the named encoding, damaged UTF-8, or no encoding detected.
    """
    if content.lstrip()[:5] == b"%PDF-":
        raise BinaryContent(f"{name} was given as text but is a PDF; send it as {APPLICATION_PDF}")
    encoding = encoding or bom_encoding(content)
    wide = (encoding or "").lower().replace("-", "").replace("_", "") in _WIDE_ENCODINGS
    if not wide:  # in byte-oriented encodings a NUL or a control byte is a control character
        check_not_binary(content, name)
    if encoding is None:
        text = _decode_detected(content, name)
    else:
        try:
            text = content.decode(encoding)
        except LookupError:
            raise InvalidEncoding(f"unknown text encoding {encoding!r} for {name}") from None
        except UnicodeDecodeError as exc:
            raise InvalidEncoding(f"{name} is not valid {encoding}: byte 0x{content[exc.start]:02x} at offset "
                                  f"{exc.start} cannot be decoded ({exc.reason})") from None
        if wide:
            _check_controls(len(text), len(text) - len(text.translate(_CONTROL_CHARS)), name)
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def bom_encoding(content: bytes) -> str | None:
    """The encoding a byte-order mark announces, if ``content`` starts with one."""
    for bom, encoding in _BOMS:
        if content.startswith(bom):
            return encoding
    return None


def check_not_binary(content: bytes, name: str) -> None:
    """Refuse bytes with a NUL or too many control characters (:class:`BinaryContent`)."""
    nul = content.find(b"\x00")
    if nul >= 0:
        raise BinaryContent(f"{name} looks like binary data, not text: it contains a NUL byte at offset {nul}")
    _check_controls(len(content), len(content) - len(content.translate(None, _CONTROL_BYTES)), name)


def control_ratio(data: bytes) -> float:
    """Share of control bytes in ``data``."""
    if not data:
        return 0.0
    return (len(data) - len(data.translate(None, _CONTROL_BYTES))) / len(data)


def detect_encoding(content: bytes) -> str | None:
    """``utf-8`` for UTF-8 (or ASCII), else the encoding charset-normalizer finds, else ``None``.

    Damaged UTF-8 (valid multi-byte sequences before the first bad byte) is reported as
    ``None`` too: it is not in another encoding.
    """
    try:
        content.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError as exc:
        if _MULTIBYTE_UTF8.search(content, 0, exc.start):
            return None
    if _western(content):
        return "cp1252"
    from charset_normalizer import from_bytes

    best = from_bytes(content).best()
    return best.encoding if best is not None else None


def _western(content: bytes) -> bool:
    """Whether Windows-1252 decodes ``content`` into mostly ASCII letters with some accented ones."""
    try:
        text = content.decode("cp1252")
    except UnicodeDecodeError:
        return False
    letters = sum(1 for c in text if c.isalpha())
    accented = sum(1 for c in text if c.isalpha() and not c.isascii())
    return letters > 0 and accented <= MAX_ACCENTED_SHARE * letters


def _decode_detected(content: bytes, name: str) -> str:
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as exc:
        first_error = exc
    detected = detect_encoding(content)
    if detected is None:
        # no remedy named here: each caller names its own (tg-load-document: --encoding)
        raise InvalidEncoding(
            f"{name} is not valid UTF-8: byte 0x{content[first_error.start]:02x} at offset {first_error.start} "
            f"({first_error.reason}), and no other encoding fits it") from None
    return content.decode(detected)


def _check_controls(total: int, controls: int, name: str) -> None:
    if total and controls / total > MAX_CONTROL_RATIO:
        raise BinaryContent(f"{name} looks like binary data, not text: {controls:,} of its {total:,} "
                            f"characters are control characters")
