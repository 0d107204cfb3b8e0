"""ZIP containers (DOCX, PPTX, XLSX, EPUB): what a ZIP file holds, and a bound on what it expands to.

Office files and e-books are ZIP archives of XML.  Before a converter opens one, the archive
is checked to expand to at most :data:`MAX_EXPANSION` times its size (and
:data:`MAX_EXPANDED_BYTES` in all) and to hold at most :data:`MAX_MEMBERS` members, so a
small hostile file cannot make the decoder inflate gigabytes.
"""

from __future__ import annotations

import io
import zipfile

from ..decoding import DOCX, EPUB, PPTX, XLSX, BrokenDocument

#: Most bytes the members of one archive may expand to, in all.
MAX_EXPANDED_BYTES = 256 * 1024 * 1024
#: Largest expansion ratio of an archive (uncompressed / compressed size).
MAX_EXPANSION = 100
#: Most members of one archive.
MAX_MEMBERS = 20_000

#: A member that tells an archive's kind, in the order they are looked for.
_MARKERS = (("word/document.xml", DOCX), ("ppt/presentation.xml", PPTX), ("xl/workbook.xml", XLSX))


def open_zip(content: bytes, name: str, what: str) -> zipfile.ZipFile:
    """The archive in ``content``, checked (see the module docstring).

    :param what: how messages name the expected kind ("a Word (DOCX) file").
    :raises BrokenDocument: not a readable ZIP archive, or one that expands too far.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise BrokenDocument(f"{name} is not a readable {what}: damaged ZIP container ({exc})") from None
    if len(members) > MAX_MEMBERS:
        raise BrokenDocument(f"{name} is refused: its ZIP container holds {len(members):,} members "
                             f"(at most {MAX_MEMBERS:,})")
    expanded = sum(m.file_size for m in members)
    if expanded > MAX_EXPANDED_BYTES or expanded > MAX_EXPANSION * max(len(content), 1):
        raise BrokenDocument(f"{name} is refused: its ZIP container expands to {expanded:,} bytes from "
                             f"{len(content):,} (a ZIP bomb?)")
    return archive


def zip_kind(content: bytes) -> tuple[str | None, str]:
    """``(kind, what)`` of a ZIP archive: a supported kind, or ``None`` and what the archive is."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
        names = set(archive.namelist())
        mimetype = archive.read("mimetype")[:100].strip() if "mimetype" in names else b""
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, KeyError, RuntimeError):
        return None, "a damaged ZIP archive (or a damaged DOCX/PPTX/XLSX/EPUB file, which are ZIP archives)"
    for marker, kind in _MARKERS:
        if marker in names:
            return kind, ""
    if mimetype == EPUB.encode():
        return EPUB, ""
    if mimetype.startswith(b"application/vnd.oasis.opendocument"):
        return None, (f"an OpenDocument file ({mimetype.decode('ascii', 'replace')}); save it as "
                      f"DOCX, PPTX or XLSX to load it")
    return None, "a ZIP archive that is not a DOCX, PPTX, XLSX or EPUB file"
