"""A document's whole lifecycle with the tg-* commands, on both deployments: load files of every kind (the
type told by the content), list the library, show a document's hierarchy, ask about it, remove it, and see
the stored trace say that the source of an edge it used was removed."""

from __future__ import annotations

import json
import re
import uuid

import document_samples as samples
import pytest
from e2e_support import EXIT_FAILED, EXIT_USAGE, assert_clean_failure, focus_edges, parse_explain

pytestmark = pytest.mark.e2e


def _loaded(result) -> dict[str, str]:
    return dict(re.fullmatch(r"Loaded (\S+) as (\S+)", line).groups() for line in result.stdout.splitlines())


def test_load_list_show_ask_remove(deployment, tmp_path):
    d = deployment
    collection = "lib" + uuid.uuid4().hex[:6]
    files = {"astronomy.pptx": samples.pptx(), "LICENSE": samples.latin1_text(), "pioneers.html": samples.html(),
             "notes": b"# Curies\n\nPierre Curie discovered piezoelectricity.\n"}
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    loaded = _loaded(d.ok("tg-load-document", "-C", collection, *(str(tmp_path / n) for n in files)))
    assert set(loaded) == set(files)

    listing = json.loads(d.ok("tg-show-library-documents", "-C", collection, "--format", "json").stdout)
    rows = {r["title"]: r for r in listing["documents"]}
    assert set(rows) == set(files)
    assert rows["astronomy.pptx"]["kind"].endswith("presentationml.presentation")
    assert (rows["astronomy.pptx"]["pages"], rows["astronomy.pptx"]["chunks"]) == (3, 3)
    assert rows["LICENSE"]["kind"] == "text/plain" and rows["notes"]["kind"] == "text/markdown"
    assert rows["pioneers.html"]["kind"] == "text/html" and rows["pioneers.html"]["pages"] == 3
    assert all(r["size"] > 0 and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["loaded_at"])
               for r in rows.values())
    table = d.ok("tg-show-library-documents", "-C", collection).stdout.splitlines()
    assert table[0].split()[:3] == ["ID", "Title", "Kind"]
    assert any("astronomy.pptx" in line and "PowerPoint (PPTX)" in line for line in table)

    deck = loaded["astronomy.pptx"]
    tree = d.ok("tg-show-document-hierarchy", deck, "-C", collection).stdout.splitlines()
    assert tree[1] == f"└─ astronomy.pptx — Slide 1: Astronomy  {tree[1].split()[-1]}"
    assert "      • (Edwin Hubble, discovered, expansion of universe)" in tree
    data = json.loads(d.ok("tg-show-document-hierarchy", deck, "-C", collection, "--format", "json").stdout)
    assert [p["label"] for p in data["pages"]] == ["Slide 1: Astronomy", "Slide 2: Hubble", "Slide 3: Leavitt"]
    assert data == json.loads(d.ok("tg-show-extraction-provenance", deck, "-C", collection, "--format",
                                   "json").stdout)

    asked = d.ok("tg-invoke-graph-rag", "-x", "-C", collection, "-q", "Who discovered the expansion of the universe?")
    blocks, _answer = parse_explain(asked.stdout)
    edge = next(e for e in focus_edges(next(b for b in blocks if b.stage == "focus"))
                if e.labels == ("Edwin Hubble", "discovered", "expansion of universe"))
    assert edge.sources == ["Chunk 0 → Slide 2: Hubble → astronomy.pptx"], asked.stdout
    question = blocks[0].uri
    d.trace_json(question, collection=collection)  # stored whole

    removed = d.ok("tg-remove-library-document", deck, "-C", collection).stdout
    assert re.fullmatch(rf"Removed {re.escape(deck)}: 3 page\(s\), 3 chunk\(s\), \d+ extracted edge\(s\) \(\d+ kept: "
                        r"other documents support them\), \d+ provenance triple\(s\), 3 chunk vector\(s\), "
                        r"\d+ entity vector\(s\)\n", removed), removed
    after = json.loads(d.ok("tg-show-library-documents", "-C", collection, "--format", "json").stdout)
    assert {r["title"] for r in after["documents"]} == set(files) - {"astronomy.pptx"}

    shown = d.ok("tg-show-explain-trace", question, "-C", collection, "--show-provenance").stdout
    assert "Source: source removed (the document it came from is no longer loaded)" in shown, shown
    trace = d.trace_json(question, collection=collection)
    hubble = next(e for e in trace["focus"]["selected_edges"] if e["labels"]["s"].lower() == "edwin hubble")
    assert hubble["source_removed"] is True and hubble["sources"] == []

    assert_clean_failure(d.run("tg-remove-library-document", deck, "-C", collection), EXIT_FAILED,
                         contains="not found")
    assert_clean_failure(d.run("tg-remove-library-document", "not an iri", "-C", collection), EXIT_USAGE,
                         contains="invalid document id")
    assert_clean_failure(d.run("tg-show-document-hierarchy", deck, "-C", collection), EXIT_FAILED,
                         contains="not found")


def test_an_empty_library_is_not_an_error(deployment):
    collection = "empty" + uuid.uuid4().hex[:6]
    r = deployment.ok("tg-show-library-documents", "-C", collection)
    assert r.stdout == f"No documents in collection {collection} of user {deployment.user}.\n"
    assert json.loads(deployment.ok("tg-show-library-documents", "-C", collection, "--format", "json").stdout) == {
        "documents": []}


def test_a_damaged_file_fails_alone_among_several(deployment, tmp_path):
    collection = "dmg" + uuid.uuid4().hex[:6]
    good = tmp_path / "biology.docx"
    good.write_bytes(samples.docx())
    damaged = tmp_path / "elements.xlsx"
    damaged.write_bytes(samples.xlsx()[:3000])
    book = tmp_path / "chemists.epub"
    book.write_bytes(samples.epub())
    r = deployment.run("tg-load-document", "-C", collection, str(good), str(damaged), str(book))
    assert r.returncode in (EXIT_FAILED, EXIT_USAGE), r.explain()
    errors = [line for line in r.stderr_lines if line.startswith("Error: ")]
    assert len(errors) == 1 and "elements.xlsx" in errors[0], r.explain()
    assert set(_loaded(r)) == {"biology.docx", "chemists.epub"}
