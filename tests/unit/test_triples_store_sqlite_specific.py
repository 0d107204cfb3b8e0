"""What only the embedded (SQLite) triple store has: its file, its indexes, threads, locks and term interning.

The shared semantics are in ``tests/integration/test_triples_store.py`` (run on both backends);
here the store is opened on real SQLite files in a temp directory and looked at from outside
with a plain ``sqlite3`` connection.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading

import pytest

from trustgraph_base.schema import Triple, TriplePattern, iri, literal, triple_term
from trustgraph_base.store.errors import StoreError, StoreUnavailable
from trustgraph_base.store.names import user_file
from trustgraph_base.store.sqlite.triples import SqliteTriplesStore
from trustgraph_base.store.triples import open_triples_store

pytestmark = pytest.mark.unit

EX = "http://example.org/"
A, B, P = iri(EX + "a"), iri(EX + "b"), iri(EX + "p")


@pytest.fixture
def store(tmp_path):
    s = open_triples_store("sqlite", home=tmp_path)
    yield s
    s.close()


def raw(tmp_path, user: str) -> sqlite3.Connection:
    """A plain connection to a user's file, to look at what the store wrote."""
    return sqlite3.connect(user_file("triples", user, home=tmp_path))


def test_one_wal_file_per_user_under_home(store, tmp_path):
    store.insert("alice", "c", [Triple(A, P, B)])
    store.insert("Alice", "c", [Triple(A, P, A)])
    files = sorted(p.name for p in (tmp_path / "triples").iterdir() if p.suffix == ".sqlite")
    assert files == sorted([user_file("triples", "alice").name, user_file("triples", "Alice").name])
    assert len(set(files)) == 2
    with raw(tmp_path, "alice") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT count(*) FROM quads").fetchone()[0] == 1


def test_default_home_is_tg_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TG_HOME", str(tmp_path / "home"))
    s = SqliteTriplesStore()
    s.insert("u", "c", [Triple(A, P, B)])
    s.close()
    assert user_file("triples", "u", home=tmp_path / "home").exists()


def test_every_bound_pattern_is_an_index_search_never_a_scan(store, tmp_path):
    """Each pattern with s, p or o bound seeks an index on a bound leading column; none scans quads.

    The other bound positions (e.g. the graph) may be checked on the rows of that range rather
    than in the seek: the embedded store keeps three B-trees, not six (see the module docstring).
    """
    store.insert("u", "c", [Triple(A, P, B, "urn:g")])
    conn = store._conn("u")
    pk = {"s": A, "p": P, "o": B}
    for n in range(1, 5):
        for bound in itertools.combinations("spog", n):
            pattern = TriplePattern(**{x: pk[x] for x in bound if x != "g"}, g="urn:g" if "g" in bound else None)
            from trustgraph_base.store.triples import check_pattern

            hint, where, params = store._where(1, check_pattern(pattern))
            plan = " | ".join(r[3] for r in conn.execute(
                f"EXPLAIN QUERY PLAN SELECT 1 FROM quads AS q {hint} WHERE {where}", params))
            if bound == ("g",):
                continue  # graph-only: a scan of the collection's rows, like an unbound pattern
            assert "SEARCH q USING" in plan and "SCAN q" not in plan, (bound, plan)
            equalities = plan.split("SEARCH q USING", 1)[1].split(")")[0]
            leading = [x for x in bound if x != "g"]
            assert any(f"{x}=?" in equalities for x in leading), (bound, plan)  # a bound term is in the seek
            if "s" in leading:  # the subject is the most selective position: never left to a filter
                assert "s=?" in equalities, (bound, plan)
            if len(leading) >= 2 and "o" in leading and "p" in leading:
                assert "o=?" in equalities and "p=?" in equalities, (bound, plan)
    for sql in ("SELECT uri FROM traces INDEXED BY traces_time WHERE c = 1 AND (ts, uri) < (1, 'u') "
                "ORDER BY ts DESC, uri DESC LIMIT 51",
                "SELECT uri FROM traces INDEXED BY traces_type_time WHERE c = 1 AND type = 'agent' "
                "ORDER BY ts DESC, uri DESC LIMIT 51"):
        plan = " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "SEARCH traces USING COVERING INDEX" in plan and "TEMP B-TREE" not in plan, plan


def test_threads_insert_and_query_concurrently(store):
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for k in range(20):
                batch = [Triple(iri(f"{EX}t{n}/{k}/{i}"), P, literal(f"{n}-{k}-{i}")) for i in range(50)]
                store.insert("u", "c", batch)
                assert len(store.query("u", "c", TriplePattern(s=batch[7].s))) == 1
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.count("u", "c", TriplePattern(p=P)) == 4 * 20 * 50


def test_a_locked_file_is_store_unavailable_and_the_retry_succeeds(tmp_path):
    s = SqliteTriplesStore(home=tmp_path, busy_timeout=0.2)
    s.insert("u", "c", [Triple(A, P, B)])
    blocker = raw(tmp_path, "u")
    blocker.isolation_level = None
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreUnavailable, match="busy"):
            s.insert("u", "c", [Triple(A, P, A)])
        assert len(s.query("u", "c", TriplePattern(s=A))) == 1     # readers are not blocked (WAL)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    s.insert("u", "c", [Triple(A, P, A)])
    assert len(s.query("u", "c", TriplePattern(s=A))) == 2
    s.close()


def test_delete_collection_garbage_collects_its_terms(store, tmp_path):
    secret = literal("secret-only-in-gone")
    shared = literal("shared-by-both")
    store.insert("u", "gone", [Triple(A, P, secret), Triple(A, P, shared), Triple(triple_term(A, P, secret), P, B)])
    store.insert("u", "kept", [Triple(B, P, shared)])
    assert store.delete_collection("u", "gone") == 3
    with raw(tmp_path, "u") as conn:
        texts = {r[0] for r in conn.execute("SELECT text FROM terms")}
    assert not any("secret-only-in-gone" in t for t in texts)
    assert '"shared-by-both"' in texts and f"<{B.value}>" in texts
    assert len(store.query("u", "kept", TriplePattern(o=shared))) == 1
    assert store.delete_collection("u", "kept") == 1
    with raw(tmp_path, "u") as conn:
        assert conn.execute("SELECT count(*) FROM terms").fetchone()[0] == 0


def test_a_writer_with_a_stale_term_cache_re_interns_after_another_deleted(tmp_path):
    """Two stores on one file (like two processes): ids one cached must not outlive the other's clean-up."""
    first, second = SqliteTriplesStore(home=tmp_path), SqliteTriplesStore(home=tmp_path)
    data = [Triple(A, P, literal("cached")), Triple(triple_term(A, P, B), P, literal("cached too"))]
    first.insert("u", "one", data)                    # first now caches the ids of these terms
    assert second.delete_collection("u", "one") == 2  # ... which second garbage-collects
    second.insert("u", "filler", [Triple(B, P, literal(f"filler {i}")) for i in range(10)])
    first.insert("u", "two", data)
    got = first.query("u", "two", TriplePattern())
    assert {(t.s.type, t.o.value) for t in got} == {("i", "cached"), ("t", "cached too")}
    assert second.count("u", "two", TriplePattern()) == 2
    first.close()
    second.close()


def test_iter_query_reads_one_snapshot_while_the_thread_keeps_writing(store):
    store.insert("u", "c", [Triple(A, P, literal(f"v{i:04d}")) for i in range(2500)])
    pages = store.iter_query("u", "c", TriplePattern(s=A), page_size=1000)
    first = next(pages)
    store.insert("u", "c", [Triple(A, P, literal(f"w{i:04d}")) for i in range(500)])   # same thread writes
    rest = [t for page in pages for t in page]
    assert len(first) + len(rest) == 2500
    assert store.count("u", "c", TriplePattern(s=A)) == 3000


def test_an_abandoned_iterator_does_not_block_writers(store):
    store.insert("u", "c", [Triple(A, P, literal(f"v{i}")) for i in range(50)])
    pages = store.iter_query("u", "c", TriplePattern(s=A), page_size=10)
    next(pages)
    store.insert("u", "c", [Triple(B, P, A)])
    del pages
    assert store.count("u", "c", TriplePattern()) == 51


def test_a_file_of_another_schema_version_is_refused(tmp_path):
    s = SqliteTriplesStore(home=tmp_path)
    s.insert("u", "c", [Triple(A, P, B)])
    s.close()
    with raw(tmp_path, "u") as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 999"):
        SqliteTriplesStore(home=tmp_path).query("u", "c", TriplePattern())


def test_a_closed_store_refuses_work(tmp_path):
    s = SqliteTriplesStore(home=tmp_path)
    s.insert("u", "c", [Triple(A, P, B)])
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.query("u", "c", TriplePattern())
