"""A ``tg-load-document`` killed part-way (``kill -9`` of the embedded process, which *is* the whole stack) and
run again finishes the load without duplicates: what is stored afterwards equals what an uninterrupted
load stores, in the librarian, the triple store and both vector indexes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import document_samples as samples
import pytest

pytestmark = [pytest.mark.service, pytest.mark.timeout(900)]

BIN = Path(sys.executable).parent
USER = "trustgraph"
#: Pages of the generated PDF: enough chunks that the load is still running when it is killed.
PAGES = 120


def _pdf() -> bytes:
    page = ("Scientist {n} discovered element {n} in Laboratory {n}. Scientist {n} worked with Scientist {m}. "
            "Element {n} was named after City {n}. Laboratory {n} is located in City {m}. ") * 6
    return samples.pdf([page.format(n=i, m=i + 1) for i in range(PAGES)])


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PULSAR_URL", "TG_FLOW", "OPENAI_BASE_URL",
                                                           "OPENAI_API_KEY")}
    return {**env, "TG_HOME": str(home)}


def _stored_chunks(home: Path) -> int:
    from trustgraph_base.store.names import user_file

    path = user_file("librarian", USER, home=home)
    if not path.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
        try:
            return conn.execute("SELECT count(*) FROM library_documents WHERE document_type = 'chunk'").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:  # the schema is being created
        return 0


def _contents(home: Path) -> dict:
    """What the user's stores hold, as text (term ids and write times differ between two files)."""
    from trustgraph_base.rdf.terms import serialize_term
    from trustgraph_base.schema import TriplePattern
    from trustgraph_base.store.names import user_file
    from trustgraph_base.store.sqlite.triples import SqliteTriplesStore

    store = SqliteTriplesStore(home=home)
    try:
        quads = [(serialize_term(t.s), serialize_term(t.p), serialize_term(t.o), t.g)
                 for page in store.iter_query(USER, "default", TriplePattern()) for t in page]
    finally:
        store.close()
    with sqlite3.connect(user_file("librarian", USER, home=home)) as conn:
        documents = conn.execute("SELECT id, parent_id, document_type, size, sha256, n_parts "
                                 "FROM library_documents").fetchall()
    with sqlite3.connect(user_file("vectors", USER, home=home)) as conn:
        vectors = conn.execute("SELECT kind, collection, id, document_id FROM vectors").fetchall()
    return {"quads": quads, "documents": documents, "vectors": vectors}


def test_a_killed_load_finishes_without_duplicates_when_run_again(tmp_path):
    path = tmp_path / "long-report.pdf"
    path.write_bytes(_pdf())
    home, clean = tmp_path / "home", tmp_path / "clean"
    proc = subprocess.Popen([str(BIN / "tg-load-document"), str(path)], env=_env(home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 300
    while _stored_chunks(home) < 20 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the load finished before it could be interrupted"
    interrupted = _stored_chunks(home)

    again = subprocess.run([str(BIN / "tg-load-document"), str(path)], env=_env(home), capture_output=True,
                           text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("Loaded long-report.pdf as ")
    whole = subprocess.run([str(BIN / "tg-load-document"), str(path)], env=_env(clean), capture_output=True,
                           text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr

    resumed, expected = _contents(home), _contents(clean)
    assert 20 <= interrupted < len([d for d in expected["documents"] if d[2] == "chunk"])
    for part in ("quads", "documents", "vectors"):
        assert len(resumed[part]) == len(set(resumed[part])), f"duplicated {part}"
        assert sorted(resumed[part]) == sorted(expected[part]), part
