"""tg-load-document (text, Markdown, PDF), tg-load-turtle, tg-show-extraction-provenance, tg-quickstart."""

from __future__ import annotations

import json
import re
import uuid

import document_samples as samples
import pytest
from e2e_support import focus_edges, parse_explain

pytestmark = pytest.mark.e2e

DOC_ID = re.compile(r"https://trustgraph\.ai/doc/[0-9a-f]{24}")


def _pdf(path, text: str) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 10, text)
    pdf.output(str(path))


@pytest.fixture
def documents(tmp_path):
    """A text, a Markdown and a PDF file, each with one fact the sample corpus does not hold."""
    txt = tmp_path / "meitner.txt"
    txt.write_text("Lise Meitner discovered nuclear fission. Lise Meitner worked in Berlin.\n")
    md = tmp_path / "mendeleev.md"
    md.write_text("# Mendeleev\n\nDmitri Mendeleev created the periodic table.\n")
    pdf = tmp_path / "wu.pdf"
    _pdf(pdf, "Chien-Shiung Wu discovered parity violation.")
    return {"text/plain": txt, "text/markdown": md, "application/pdf": pdf}


def _loaded(result) -> dict[str, str]:
    """File name -> document id from ``Loaded <name> as <id>`` lines."""
    out = {}
    for line in result.stdout.splitlines():
        m = re.fullmatch(r"Loaded (\S+) as (\S+)", line)
        assert m, result.explain()
        out[m.group(1)] = m.group(2)
    return out


def _provenance(d, doc_id: str, collection: str) -> dict:
    return json.loads(d.ok("tg-show-extraction-provenance", doc_id, "-C", collection, "--format", "json").stdout)


def test_load_text_markdown_pdf_with_progress_and_idempotent_reload(deployment, documents):
    d = deployment
    collection = "loads" + uuid.uuid4().hex[:6]
    files = [str(p) for p in documents.values()]
    first = d.ok("tg-load-document", "-C", collection, *files)
    ids = _loaded(first)
    assert set(ids) == {p.name for p in documents.values()}
    assert all(DOC_ID.fullmatch(i) for i in ids.values())
    for p in documents.values():  # a progress line per document, finished
        assert re.search(rf"{re.escape(p.name)}: done .* (\d+)/\1", first.stderr), first.explain()

    trees = {}
    for kind, p in documents.items():
        tree = _provenance(d, ids[p.name], collection)
        assert tree["document"] == ids[p.name] and tree["kind"] == kind and tree["title"] == p.name
        assert tree["pages"] and all(page["chunks"] for page in tree["pages"])
        edges = [e for page in tree["pages"] for c in page["chunks"] for e in c["edges"]]
        assert edges, tree
        trees[p.name] = tree
    wu = trees["wu.pdf"]
    assert wu["pages"][0]["title"] == "wu.pdf page 1"
    assert ("Chien-Shiung Wu", "discovered", "parity violation") in {
        (e["s"], e["p"], e["o"]) for page in wu["pages"] for c in page["chunks"] for e in c["edges"]}

    again = d.ok("tg-load-document", "-C", collection, *files)
    assert _loaded(again) == ids
    for p in documents.values():
        assert _provenance(d, ids[p.name], collection) == trees[p.name]

    r = d.ok("tg-invoke-graph-rag", "-x", "-C", collection, "-q", "Who discovered nuclear fission?")
    blocks, answer = parse_explain(r.stdout)
    focus = next(b for b in blocks if b.stage == "focus")
    edges = focus_edges(focus)
    meitner = [e for e in edges if e.labels == ("Lise Meitner", "discovered", "nuclear fission")]
    assert meitner and meitner[0].sources == ["Chunk 0 → Page 1 → meitner.txt"], r.stdout
    assert "Lise Meitner" in answer


LONG_PAGES = 300


def test_a_300_page_pdf_loads_with_a_line_per_stage_and_every_page_and_chunk_stored(deployment, tmp_path):
    """The decoder passes a long PDF on a page at a time (its memory: ``tests/unit/test_decoding.py``); the
    command, its stderr not a terminal, reports each stage as the document finishes it."""
    d = deployment
    collection = "long" + uuid.uuid4().hex[:6]
    path = tmp_path / "long-report.pdf"
    path.write_bytes(samples.pdf([f"Page {n}. Scientist Number{n} worked in City{n}."
                                  for n in range(1, LONG_PAGES + 1)]))
    r = d.ok("tg-load-document", "-C", collection, str(path), timeout=900)
    doc_id = _loaded(r)["long-report.pdf"]
    stages = [line.removeprefix("long-report.pdf: ") for line in r.stderr_lines
              if line.startswith("long-report.pdf: ") and "done" not in line]
    assert stages and stages[0] == f"decoded {LONG_PAGES} page(s)", r.explain()
    assert sorted(stages) == sorted([f"decoded {LONG_PAGES} page(s)",
                                     f"chunked {LONG_PAGES} page(s) into {LONG_PAGES} chunk(s)",
                                     *(f"{stage} {LONG_PAGES}/{LONG_PAGES} chunks"
                                       for stage in ("extracted", "stored", "embedded"))]), r.explain()
    assert re.search(rf"long-report\.pdf: done .* {LONG_PAGES}/{LONG_PAGES}", r.stderr), r.explain()

    listed = json.loads(d.ok("tg-show-library-documents", "-C", collection, "--format", "json").stdout)
    assert [(doc["id"], doc["pages"], doc["chunks"]) for doc in listed["documents"]] == [
        (doc_id, LONG_PAGES, LONG_PAGES)]
    tree = _provenance(d, doc_id, collection)
    assert [(page["number"], page["title"], len(page["chunks"])) for page in tree["pages"]] == [
        (n, f"long-report.pdf page {n}", 1) for n in range(1, LONG_PAGES + 1)]
    for page in tree["pages"]:
        n = page["number"]
        edges = {(e["s"], e["p"], e["o"]) for e in page["chunks"][0]["edges"]}
        assert (f"Scientist Number{n}", "worked in", f"City{n}") in edges, (n, edges)


def test_documents_loaded_by_separate_commands_answer_alike_in_either_order(embedded_deployment, tmp_path):
    """Each embedded ``tg-load-document`` run has vector writers of its own.  An entity's vector is its longest
    definition's, read back from the index, so it does not depend on which run brought which definition: the
    corpus loaded a document per command forwards and backwards answers a question with the same seeds, edges,
    reasons and scores (earlier, the first definition a run saw replaced the stored one; docs/guarantees.md)."""
    from trustgraph_flow.ingest.sample_corpus import sample_documents

    d = embedded_deployment
    suffix = {"text/plain": "txt", "text/markdown": "md", "application/pdf": "pdf"}
    files = []
    for n, doc in enumerate(sample_documents()):
        files.append(tmp_path / f"{n}-{doc.id.rsplit('/', 1)[1]}.{suffix[doc.kind]}")
        files[-1].write_bytes(doc.content)
    tag = uuid.uuid4().hex[:6]
    answers = {}
    for collection, order in ((f"forwards{tag}", files), (f"backwards{tag}", files[::-1])):
        for path in order:
            d.ok("tg-load-document", "-C", collection, str(path))
        answer = d.ok("tg-invoke-graph-rag", "-x", "-q", "Who discovered polonium?", "-C", collection).stdout
        answers[collection] = re.sub(r"urn:trustgraph:[a-z:]+:[0-9a-f-]+", "<urn>", answer)
    forwards, backwards = answers.values()
    assert "Edge: (Marie Curie, discovered, polonium)" in forwards
    assert forwards == backwards


def test_show_extraction_provenance_tree_and_json_agree(deployment):
    from trustgraph_flow.ingest.sample_corpus import sample_documents

    d = deployment
    doc = sample_documents()[0]
    tree = d.ok("tg-show-extraction-provenance", doc.id, "--show-content").stdout.splitlines()
    data = json.loads(d.ok("tg-show-extraction-provenance", doc.id, "--format", "json").stdout)
    assert tree[0] == f"{doc.title} ({doc.id}, {doc.kind})"
    chunk_lines = [line for line in tree if line.startswith("   └─ Chunk ")]
    chunks = [c for page in data["pages"] for c in page["chunks"]]
    assert len(chunk_lines) == len(chunks) > 1
    for line, c in zip(chunk_lines, chunks, strict=True):
        assert line == f"   └─ {c['label']}  {c['uri']}  ({len(c['edges'])} edge(s))"
    assert sum(line.startswith("      • (") for line in tree) == sum(len(c["edges"]) for c in chunks)
    assert sum(line.startswith('      "') for line in tree) == len(chunks)  # --show-content


def test_load_turtle_makes_the_graph_answerable(deployment, tmp_path):
    d = deployment
    collection = "ttl" + uuid.uuid4().hex[:6]
    ttl = tmp_path / "ada.ttl"
    ttl.write_text(
        "@prefix ex: <http://example.org/e2e/> .\n"
        "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        'ex:ada rdfs:label "Ada Lovelace" .\n'
        'ex:engine rdfs:label "Analytical Engine" .\n'
        'ex:wrote rdfs:label "wrote the first program for" .\n'
        "ex:ada ex:wrote ex:engine .\n")
    loaded = d.ok("tg-load-turtle", str(ttl), "-C", collection)
    assert loaded.stdout.strip() == (f"Loaded 4 triple(s) and embedded 3 labelled entit(ies) from {ttl} "
                                     f"into {d.user}/{collection}")
    d.ok("tg-load-turtle", str(ttl), "-C", collection)  # again: idempotent
    r = d.ok("tg-invoke-graph-rag", "-x", "-C", collection, "-q", "Who wrote the first program for the engine?")
    blocks, answer = parse_explain(r.stdout)
    exploration = next(b for b in blocks if b.stage == "exploration")
    # re-loading added nothing; the one edge fits the selection prompt's default token budget
    assert exploration.lines[0].strip() == "Retrieved 1 edge(s), 1 sent to the model (budget 3000 tokens)"
    edges = focus_edges(next(b for b in blocks if b.stage == "focus"))
    assert [e.labels for e in edges] == [("Ada Lovelace", "wrote the first program for", "Analytical Engine")]
    assert edges[0].sources == ["(no extraction provenance found)"]
    assert "Ada Lovelace" in answer


def test_quickstart_loads_the_corpus_once_and_answers_with_explain(deployment):
    d = deployment
    first = d.quickstart
    assert "Loading the sample corpus (5 documents)" in first.stderr
    blocks, answer = parse_explain(first.stdout)
    assert [b.stage for b in blocks] == ["question", "grounding", "exploration", "focus", "synthesis"]
    assert blocks[0].value("Query") == "Who discovered polonium?"
    assert "polonium" in answer.lower()
    again = d.ok("tg-quickstart")
    assert "Loading" not in again.stderr
    blocks2, answer2 = parse_explain(again.stdout)
    assert [b.stage for b in blocks2] == ["question", "grounding", "exploration", "focus", "synthesis"]
    assert blocks2[0].uri != blocks[0].uri
    assert answer2 == answer
