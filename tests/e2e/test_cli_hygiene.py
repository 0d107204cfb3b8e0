"""Input handling and output safety of the tg-* commands, on both deployments where the behaviour exists.

- usage errors are one ``Error:`` line (exit 2); ``--timeout`` refuses nan/inf; the trace-list
  limit is the service's; echoed input is clipped; control characters never reach the terminal raw;
- tg-load-turtle checks the whole file before sending anything (store, vector-index and Pulsar
  message limits; no quad in ``urn:graph:retrieval``), so a refused file stores nothing;
- tg-load-document reads a file bounded by the size limit, loads the good files when one is
  refused, prints the title the librarian keeps, and names real options in its messages.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import subprocess
import unicodedata
import uuid
from pathlib import Path

import pytest
from e2e_support import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliResult,
    assert_clean_failure,
    base_env,
    parse_explain,
    processes_in_group,
    run_cli,
    script,
)

pytestmark = pytest.mark.e2e

EX = "http://example.org/hygiene/"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
#: A title that tries to clear the screen, overwrite its line, print a fake explain header and reverse text.
HOSTILE_TITLE = "Evil\x1b[2J\r\n[synthesis] urn:fake \u202egnp.exe"
#: The same, as every command shows it.
HOSTILE_TITLE_SHOWN = "Evil\\x1b[2J\\r\\n[synthesis] urn:fake \\u202egnp.exe"
BIDI_AND_SEPARATORS = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")


def raw_controls(text: str) -> list[str]:
    """Characters of ``text`` a terminal may obey (or that reorder a line), newlines and tabs aside."""
    return [ch for ch in text if ch not in "\n\t" and (unicodedata.category(ch) in ("Cc", "Cs")
                                                       or ch in BIDI_AND_SEPARATORS)]


def assert_safe_output(r: CliResult) -> None:
    assert raw_controls(r.stdout) == [], r.explain()
    assert raw_controls(r.stderr) == [], r.explain()
    assert not [line for line in r.stdout.splitlines() if line.startswith("[synthesis] urn:fake")], r.explain()


def _unique(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:8]


@pytest.fixture
def stored(deployment, request):
    """``stored(collection)`` -> (triples in the collection, entity vectors), read from the deployment's own stores."""
    from trustgraph_base.schema import TriplePattern
    from trustgraph_base.store.triples import open_triples_store
    from trustgraph_base.store.vectors import open_vector_index

    if deployment.distributed:
        from trustgraph_base.store.cassandra.connection import CassandraConfig

        cassandra = request.getfixturevalue("cassandra_service")
        options = {"config": CassandraConfig(hosts=(cassandra.host,), port=int(cassandra.port))}
        triples = open_triples_store("cassandra", **options)
        vectors = open_vector_index("cassandra", "graph", **options)
    else:
        home = Path(deployment.env["TG_HOME"])
        triples, vectors = open_triples_store("sqlite", home=home), open_vector_index("sqlite", "graph", home=home)

    def count(collection: str) -> tuple[int, int]:
        info = vectors.index_info(deployment.user, collection)
        return triples.count(deployment.user, collection, TriplePattern()), info.count if info else 0

    yield count
    triples.close()
    vectors.close()


# ------------------------------------------------------------------------------ usage errors

@pytest.mark.parametrize("args, contains", [
    pytest.param(["tg-invoke-graph-rag"], "Missing option '-q'", id="missing-option"),
    pytest.param(["tg-show-explain-trace"], "Missing argument 'URI'", id="missing-argument"),
    pytest.param(["tg-list-explain-traces", "--bogus"], "No such option", id="unknown-option"),
    pytest.param(["tg-list-explain-traces", "--format", "xml"], "'--format'", id="bad-choice"),
    pytest.param(["tg-load-turtle", "/nonexistent/x.ttl"], "does not exist", id="missing-file"),
    pytest.param(["tg-list-explain-traces", "--timeout", "nan"], "'--timeout'", id="timeout-nan"),
    pytest.param(["tg-list-explain-traces", "--timeout", "inf"], "'--timeout'", id="timeout-inf"),
    pytest.param(["tg-list-explain-traces", "--timeout", "1e400"], "'--timeout'", id="timeout-overflow"),
    pytest.param(["tg-list-explain-traces", "--timeout", "-1"], "'--timeout'", id="timeout-negative"),
    pytest.param(["tg-invoke-agent", "-q", "hi", "--timeout", "0"], "'--timeout'", id="timeout-zero"),
    pytest.param(["tg-invoke-graph-rag", "-q", "who \udcff"], "--query 'who \\udcff' is not valid UTF-8",
                 id="not-utf8"),
])
def test_usage_errors_are_one_line(tmp_path, args, contains):
    r = run_cli(args[0], *args[1:], env=base_env({"TG_HOME": str(tmp_path)}), timeout=60)
    assert_clean_failure(r, EXIT_USAGE, contains=contains)
    assert f"see {args[0]} --help" in r.stderr_lines[0], r.explain()


def test_echoed_input_is_clipped(tmp_path):
    env = base_env({"TG_HOME": str(tmp_path)})
    long_id = "a" * 10_000 + "!"
    for args in (["tg-invoke-agent", "-q", "hi", "--session-id", long_id],
                 ["tg-show-explain-trace", "urn:trustgraph:question:" + long_id],
                 ["tg-show-explain-trace", "urn:trustgraph:agent:" + "a" * 10_000],  # no agent makes such an id
                 ["tg-list-explain-traces", "--limit", "9" * 10_000]):
        r = run_cli(args[0], *args[1:], env=env, timeout=60)
        assert_clean_failure(r, EXIT_USAGE)
        assert len(r.stderr_lines[0]) < 300, r.explain()


@pytest.mark.parametrize("name", ["a\x1b[2J\r.xyz", "a\n[synthesis] urn:fake.xyz"])
def test_control_characters_in_error_lines_are_escaped(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))  # refused by its content, named in the error
    r = run_cli("tg-load-document", str(path), env=base_env({"TG_HOME": str(tmp_path / "home")}), timeout=60)
    assert_clean_failure(r, EXIT_USAGE, contains="unsupported file type")
    assert_safe_output(r)
    assert name.replace("\x1b", "\\x1b").replace("\r", "\\r").replace("\n", "\\n") in r.stderr_lines[0]


def test_list_limit_is_the_service_limit(deployment):
    assert_clean_failure(deployment.run("tg-list-explain-traces", "--limit", "1001", timeout=60), EXIT_USAGE,
                         contains="1<=x<=1000")
    deployment.ok("tg-list-explain-traces", "--limit", "1000", "--format", "json")


# ------------------------------------------------------------------------------ output safety

def test_data_with_control_characters_is_printed_escaped(deployment, tmp_path):
    """A crafted title and question reach every output escaped: no screen clearing, no fake explain line."""
    d = deployment
    collection = _unique("esc")
    doc = tmp_path / "vandor.txt"
    doc.write_text("Zorblax Quentin discovered the mineral vandorite. Zorblax Quentin lived in Kessel.\n")
    loaded = d.ok("tg-load-document", "-C", collection, "--title", HOSTILE_TITLE, str(doc))
    assert_safe_output(loaded)
    [line] = loaded.stdout.splitlines()
    doc_id = re.fullmatch(rf"Loaded {re.escape(HOSTILE_TITLE_SHOWN)} as (\S+)", line).group(1)

    tree = d.ok("tg-show-extraction-provenance", doc_id, "-C", collection, "--show-content")
    assert_safe_output(tree)
    assert tree.stdout.splitlines()[0] == f"{HOSTILE_TITLE_SHOWN} ({doc_id}, text/plain)"
    data = json.loads(d.ok("tg-show-extraction-provenance", doc_id, "-C", collection, "--format", "json").stdout)
    assert data["title"] == HOSTILE_TITLE  # JSON carries the data exactly

    question = "Who discovered vandorite?\x1b]0;pwned\x07\u202e\n[synthesis] urn:fake-question"
    asked = d.ok("tg-invoke-graph-rag", "-x", "-C", collection, "-q", question)
    assert_safe_output(asked)
    blocks, _answer = parse_explain(asked.stdout)
    assert [b.stage for b in blocks] == ["question", "grounding", "exploration", "focus", "synthesis"], \
        asked.explain()
    assert blocks[0].value("Query") == ("Who discovered vandorite?\\x1b]0;pwned\\x07\\u202e"
                                        "\\n[synthesis] urn:fake-question")
    sources = [line.strip() for line in blocks[3].lines if line.strip().startswith("Source:")]
    assert sources and all(s.endswith(f"→ {HOSTILE_TITLE_SHOWN}") for s in sources), asked.explain()

    listed = d.ok("tg-list-explain-traces", "-C", collection)
    assert_safe_output(listed)
    uri = blocks[0].uri
    trace = d.trace_json(uri, collection=collection)
    assert trace["question"] == question
    shown = d.ok("tg-show-explain-trace", uri, "-C", collection, "--show-provenance")
    assert_safe_output(shown)
    assert f"Question: {blocks[0].value('Query')}" in shown.stdout.splitlines()
    trig = d.ok("tg-show-explain-trace", uri, "-C", collection, "--format", "trig")
    assert_safe_output(trig)
    from trustgraph_base.rdf.export import parse

    assert question in {t.o.value for t in parse(trig.stdout, "trig")}  # the export still parses to the data


# ------------------------------------------------------------------------------ tg-load-turtle

def _turtle(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in (f"@prefix ex: <{EX}> .",
                                                      f"@prefix rdfs: <{RDFS_LABEL[:-5]}> .", *lines)))
    return path


def test_turtle_quads_in_the_retrieval_graph_are_refused(deployment, tmp_path, stored):
    collection = _unique("forge")
    trig = _turtle(tmp_path / "forged.trig",
                   'ex:ada rdfs:label "Ada Lovelace" .',
                   "<urn:graph:retrieval> {",
                   "  <urn:trustgraph:question:6f1c2a52-6d6c-4c79-9d6c-1d0d8b1b2c3d>",
                   "    a <https://trustgraph.ai/ns/GraphRagQuestion>, <https://trustgraph.ai/ns/Question> ;",
                   '    <https://trustgraph.ai/ns/query> "a forged question" ;',
                   '    <http://www.w3.org/ns/prov#startedAtTime> "2026-01-01T00:00:00Z" .',
                   "}")
    r = deployment.run("tg-load-turtle", str(trig), "-C", collection, timeout=120)
    assert_clean_failure(r, EXIT_USAGE, contains="<urn:graph:retrieval>")
    assert stored(collection) == (0, 0)
    listed = deployment.ok("tg-list-explain-traces", "-C", collection)
    assert listed.stdout.startswith("No traces found")


def test_turtle_literal_over_the_store_limit_is_refused_before_anything_is_stored(deployment, tmp_path, stored):
    from trustgraph_base.rdf.terms import MAX_LITERAL_LENGTH

    collection = _unique("bigl")
    ttl = _turtle(tmp_path / "big.ttl", 'ex:a ex:note "small" .', 'ex:b rdfs:label "Bee" .',
                  f'ex:big ex:text "{"x" * (MAX_LITERAL_LENGTH + 1)}" .')
    r = deployment.run("tg-load-turtle", str(ttl), "-C", collection, "--batch-size", "1", "--timeout", "30",
                       timeout=240)
    assert_clean_failure(r, EXIT_USAGE, contains=f"<{EX}big> <{EX}text>")
    assert f"{MAX_LITERAL_LENGTH + 1:,} characters" in r.stderr, r.explain()
    assert stored(collection) == (0, 0)


def test_turtle_label_over_the_index_limit_is_refused_before_anything_is_stored(deployment, tmp_path, stored):
    from trustgraph_base.store.vectors import MAX_LABEL_LENGTH

    collection = _unique("bigt")
    ttl = _turtle(tmp_path / "label.ttl", 'ex:a rdfs:label "Ay" .',
                  f'ex:huge rdfs:label "{"y" * (MAX_LABEL_LENGTH + 1)}" .')
    r = deployment.run("tg-load-turtle", str(ttl), "-C", collection, "--timeout", "30", timeout=240)
    assert_clean_failure(r, EXIT_USAGE, contains=f"rdfs:label of <{EX}huge> has {MAX_LABEL_LENGTH + 1:,} characters")
    assert stored(collection) == (0, 0)


def test_turtle_multi_line_label_is_embedded(deployment, tmp_path, stored):
    collection = _unique("mlab")
    ttl = _turtle(tmp_path / "poem.ttl", 'ex:poem rdfs:label """The Raven,\na poem""" .', "ex:poe ex:wrote ex:poem .")
    r = deployment.run("tg-load-turtle", str(ttl), "-C", collection, "--timeout", "60", timeout=240)
    assert r.returncode == 0, r.explain()
    assert "embedded 1 labelled entit(ies)" in r.stdout
    assert stored(collection) == (2, 1)


def test_turtle_batches_are_cut_to_fit_a_pulsar_message(deployment, tmp_path, stored):
    """Three 2 MiB literals: one message of the default 1000-triple batch would exceed Pulsar's 5 MiB."""
    collection = _unique("mbat")
    ttl = _turtle(tmp_path / "large.ttl", *(f'ex:s{i} ex:text "{str(i) * (2 * 1024 * 1024)}" .' for i in range(3)))
    r = deployment.run("tg-load-turtle", str(ttl), "-C", collection, "--timeout", "60", timeout=240)
    assert r.returncode == 0, r.explain()
    assert stored(collection) == (3, 0)


def test_turtle_triple_larger_than_a_pulsar_message(deployment, tmp_path, stored):
    """A literal the store takes (3 M characters) but whose UTF-8 (6 MB) no Pulsar message can carry:
    refused over Pulsar before anything is sent; the in-process bus has no message limit and loads it."""
    collection = _unique("wide")
    ttl = _turtle(tmp_path / "wide.ttl", 'ex:a ex:note "small" .', f'ex:wide ex:text "{"é" * 3_000_000}" .')
    r = deployment.run("tg-load-turtle", str(ttl), "-C", collection, "--timeout", "60", timeout=240)
    if deployment.distributed:
        assert_clean_failure(r, EXIT_USAGE, contains=f"<{EX}wide> <{EX}text> needs a message of")
        assert "Pulsar carries messages of at most" in r.stderr
        assert stored(collection) == (0, 0)
    else:
        assert r.returncode == 0, r.explain()
        assert stored(collection) == (2, 0)


def test_turtle_many_long_labels_are_embedded(deployment, tmp_path, stored):
    """64 labels of 60,000 'é' (120 kB of UTF-8 each): the vector writer embeds them without a request
    larger than a Pulsar message."""
    collection = _unique("llab")
    ttl = _turtle(tmp_path / "labels.ttl", *(f'ex:e{i} rdfs:label "{"é" * 60_000} {i}" .' for i in range(64)))
    r = deployment.run("tg-load-turtle", str(ttl), "-C", collection, "--timeout", "90", timeout=300)
    assert r.returncode == 0, r.explain()
    assert stored(collection) == (64, 64)


# ------------------------------------------------------------------------------ tg-load-document

def _encrypted_pdf(path: Path) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 10, "Secret: Lise Meitner discovered nuclear fission.")
    pdf.set_encryption(owner_password="owner", user_password="secret")
    pdf.output(str(path))
    return path


def _edges(d, doc_id: str, collection: str) -> list:
    tree = json.loads(d.ok("tg-show-extraction-provenance", doc_id, "-C", collection, "--format", "json").stdout)
    return [e for page in tree["pages"] for c in page["chunks"] for e in c["edges"]]


@pytest.mark.parametrize("unsupported", [False, True], ids=["librarian-refuses", "and-one-refused-first"])
def test_several_files_one_refused_the_others_load_completely(deployment, tmp_path, unsupported):
    """The file the librarian refuses sits between two good ones, which still load completely (not
    left stored but unprocessed); a file refused before anything is sent fails alone too."""
    d = deployment
    collection = _unique("multi")
    good1 = tmp_path / "quill.txt"
    good1.write_text("Orla Quill discovered helium.\n")
    good2 = tmp_path / "brass.md"
    good2.write_text("# Brass\n\nTomas Brass invented the steam loom.\n")
    files = [good1, _encrypted_pdf(tmp_path / "locked.pdf"), good2]
    if unsupported:
        files.append(tmp_path / "notes.xyz")
        files[-1].write_bytes(b"GIF89a" + bytes(100))
    r = d.run("tg-load-document", "-C", collection, *map(str, files), timeout=300)
    assert r.returncode == EXIT_FAILED, r.explain()  # the common code (1), or 1 when the codes differ (1 and 2)
    errors = [line for line in r.stderr_lines if line.startswith("Error: ")]
    assert len(errors) == 1 + unsupported, r.explain()
    assert "locked.pdf" in errors[0] and "encrypted" in errors[0], r.explain()
    if unsupported:
        assert "notes.xyz" in errors[1] and "unsupported file type" in errors[1], r.explain()
    loaded = dict(re.fullmatch(r"Loaded (\S+) as (\S+)", line).groups() for line in r.stdout.splitlines())
    assert set(loaded) == {"quill.txt", "brass.md"}, r.explain()
    assert ("Orla Quill", "discovered", "helium") in {(e["s"], e["p"], e["o"]) for e in
                                                       _edges(d, loaded["quill.txt"], collection)}
    assert ("Tomas Brass", "invented", "steam loom") in {(e["s"], e["p"], e["o"]) for e in
                                                         _edges(d, loaded["brass.md"], collection)}
    assert processes_in_group(r.pgid) == []


@pytest.mark.parametrize("source", ["/dev/zero", "sparse"])
def test_oversized_input_is_refused_without_reading_it(tmp_path, source):
    """/dev/zero never ends and a sparse 5 GB file is mostly holes: with 1.5 GB of address space the
    command must refuse both by the size limit instead of reading them."""
    if source == "sparse":
        path = tmp_path / "huge.txt"
        with open(path, "wb") as fh:
            fh.truncate(5 * 1024 ** 3)
        source = str(path)
    limit = 1536 * 1024 ** 2
    proc = subprocess.run([script("tg-load-document"), source], capture_output=True, text=True, timeout=120,
                          env=base_env({"TG_HOME": str(tmp_path / "home")}),
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
    r = CliResult([source], proc.returncode, proc.stdout, proc.stderr, 0.0)
    assert r.returncode == EXIT_USAGE, r.explain()
    assert r.stdout == "" and len(r.stderr_lines) == 1, r.explain()
    assert re.search(r"(is|holds more than) [\d,]+ bytes; documents can be at most 10,485,760 bytes",
                     r.stderr_lines[0]), r.explain()


@pytest.mark.integration
def test_a_document_too_large_for_a_pulsar_message_is_refused_before_anything_is_sent(distributed_deployment,
                                                                                    tmp_path):
    d = distributed_deployment
    collection = _unique("huge")
    doc = tmp_path / "long.txt"
    doc.write_text("Ada Lovelace wrote the first program.\n" * 130_000)  # 4.9 MB: under 10 MiB, over a message
    r = d.run("tg-load-document", "-C", collection, str(doc), timeout=120)
    assert_clean_failure(r, EXIT_USAGE, contains="too large to send over Pulsar")
    doc_id = "https://trustgraph.ai/doc/" + hashlib.sha256(doc.read_bytes()).hexdigest()[:24]
    assert_clean_failure(d.run("tg-show-extraction-provenance", doc_id, "-C", collection, timeout=60), EXIT_FAILED,
                         contains="not found")


def test_reloading_with_a_new_title_prints_the_title_that_is_kept(deployment, tmp_path):
    d = deployment
    collection = _unique("title")
    doc = tmp_path / "ferro.txt"
    doc.write_text("Ida Ferro discovered the mineral zorite.\n")
    first = d.ok("tg-load-document", "-C", collection, "--title", "First title", str(doc))
    doc_id = re.fullmatch(r"Loaded First title as (\S+)", first.stdout.strip()).group(1)
    again = d.ok("tg-load-document", "-C", collection, "--title", "Second title", str(doc))
    assert again.stdout == f"Loaded First title as {doc_id}\n", again.explain()
    assert "'First title'" in again.stderr and "'Second title' was not applied" in again.stderr, again.explain()
    tree = json.loads(d.ok("tg-show-extraction-provenance", doc_id, "-C", collection, "--format", "json").stdout)
    assert tree["title"] == "First title"


def test_text_in_another_encoding_names_the_encoding_option(deployment, tmp_path):
    """Latin-1 text is detected and loads; damaged UTF-8 (no encoding fits) is refused naming --encoding,
    which then loads it as the encoding named."""
    d = deployment
    collection = _unique("enc")
    latin = tmp_path / "latin.txt"
    latin.write_bytes("Amélie Roux invented the crème pump.\n".encode("latin-1"))
    damaged = tmp_path / "damaged.txt"
    damaged.write_bytes("Zoë Hart found the comet.\n".encode() + "Amélie Roux invented the crème pump.\n"
                        .encode("latin-1"))
    r = d.run("tg-load-document", "-C", collection, str(damaged), timeout=120)
    assert_clean_failure(r, EXIT_USAGE, contains="not valid UTF-8")
    assert "--encoding latin-1" in r.stderr_lines[0], r.explain()
    for doc, extra in ((latin, ()), (damaged, ("--encoding", "latin-1"))):
        loaded = d.ok("tg-load-document", "-C", collection, *extra, str(doc))
        doc_id = re.fullmatch(rf"Loaded {doc.name} as (\S+)", loaded.stdout.strip()).group(1)
        tree = json.loads(d.ok("tg-show-extraction-provenance", doc_id, "-C", collection, "--format", "json",
                               "--show-content").stdout)
        assert "Amélie Roux invented the crème pump." in tree["pages"][0]["chunks"][0]["content"]


def test_a_file_name_that_is_not_utf8_is_named_and_titled_with_title(deployment, tmp_path):
    d = deployment
    collection = _unique("name")
    path = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"caf\xe9.txt")))
    path.write_text("Nils Berg discovered the island Skarv.\n")
    r = d.run("tg-load-document", "-C", collection, str(path), timeout=120)
    assert_clean_failure(r, EXIT_USAGE, contains="caf\\udce9.txt")
    assert "--title" in r.stderr_lines[0], r.explain()
    loaded = d.ok("tg-load-document", "-C", collection, "--title", "Café notes", str(path))
    assert re.fullmatch(r"Loaded Café notes as \S+\n", loaded.stdout), loaded.explain()
