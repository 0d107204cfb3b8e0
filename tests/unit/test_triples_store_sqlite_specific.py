"""What only the embedded (SQLite) triple store has: its file, its indexes, threads, locks and term interning.

The shared semantics are in ``tests/integration/test_triples_store.py`` (run on both backends);
here the store is opened on real SQLite files in a temp directory and looked at from outside
with a plain ``sqlite3`` connection.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
from functools import partial

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustgraph_base.schema import Triple, TriplePattern, iri, literal, triple_term
from trustgraph_base.store.errors import StoreError, StoreUnavailable
from trustgraph_base.store.names import user_file
from trustgraph_base.store.sqlite import triples as sqlite_triples
from trustgraph_base.store.sqlite.triples import PAGE_SIZE, SqliteTriplesStore, _matching_rows
from trustgraph_base.store.triples import open_triples_store, prepare_triples

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


def stored_rows(conn: sqlite3.Connection, table: str) -> int:
    """Rows of ``table``, its write buffer included if it has one."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in (table, f"{table}_recent")
               if t in tables)


def test_one_wal_file_per_user_under_home(store, tmp_path):
    store.insert("alice", "c", [Triple(A, P, B)])
    store.insert("Alice", "c", [Triple(A, P, A)])
    files = sorted(p.name for p in (tmp_path / "triples").iterdir() if p.suffix == ".sqlite")
    assert files == sorted([user_file("triples", "alice").name, user_file("triples", "Alice").name])
    assert len(set(files)) == 2
    with raw(tmp_path, "alice") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert [stored_rows(conn, t) for t in ("quads", "quads_o", "quads_p")] == [1, 1, 1]


def test_new_files_get_16k_pages_and_older_files_keep_theirs(tmp_path):
    """New files use PAGE_SIZE; a file made with SQLite's default 4 KiB pages still opens and works."""
    s = SqliteTriplesStore(tmp_path)
    s.insert("new", "c", [Triple(A, P, B)])
    old = user_file("triples", "old", home=tmp_path)
    old.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(old) as conn:
        conn.execute("PRAGMA page_size=4096")
        conn.execute("PRAGMA journal_mode=WAL")
    s.insert("old", "c", [Triple(A, P, B), Triple(B, P, A)])
    assert s.query("old", "c", TriplePattern(s=B)) == [Triple(B, P, A)]
    s.close()
    with raw(tmp_path, "new") as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE == 16384
    with raw(tmp_path, "old") as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096


def test_default_home_is_tg_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TG_HOME", str(tmp_path / "home"))
    s = SqliteTriplesStore()
    s.insert("u", "c", [Triple(A, P, B)])
    s.close()
    assert user_file("triples", "u", home=tmp_path / "home").exists()


def test_every_bound_pattern_is_an_index_search_never_a_scan(store, tmp_path):
    """Each pattern with s, p or o bound seeks one of the three quad tables on a bound leading column; none scans.

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

            table, where, params = store._where(1, check_pattern(pattern))
            sql, params = _matching_rows("SELECT 1", table, where, params)
            plan = " | ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
            if bound == ("g",):
                continue  # graph-only: a scan of the collection's rows, like an unbound pattern
            assert "SEARCH q USING" in plan and "SCAN" not in plan, (bound, plan)
            # the main table and, for the two orders with one, its write buffer: both searched
            assert plan.count("SEARCH q USING") == (1 if table == "quads" else 2), (bound, plan)
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


def in_threads(count: int, work) -> list[BaseException]:
    """Run ``work(n)`` for n in ``range(count)``, each on its own thread; the exceptions they raised."""
    errors: list[BaseException] = []

    def guarded(n: int) -> None:
        try:
            work(n)
        except BaseException as e:  # noqa: BLE001 - reported to the caller
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(n,)) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_threads_insert_and_query_concurrently(store):
    def work(n: int) -> None:
        for k in range(20):
            batch = [Triple(iri(f"{EX}t{n}/{k}/{i}"), P, literal(f"{n}-{k}-{i}")) for i in range(50)]
            store.insert("u", "c", batch)
            assert len(store.query("u", "c", TriplePattern(s=batch[7].s))) == 1

    assert in_threads(4, work) == []
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


def _no_duplicate_terms(tmp_path, user: str = "u") -> int:
    with raw(tmp_path, user) as conn:
        total, distinct = conn.execute("SELECT count(*), count(DISTINCT text) FROM terms").fetchone()
    assert total == distinct, "a term was interned twice"
    return total


def _graph(n: int) -> list[Triple]:
    """Entities with labels, edges to earlier and later entities, and triple terms in a named graph."""
    out = []
    for i in range(n):
        e, other = iri(f"{EX}e/{i}"), iri(f"{EX}e/{(i * 7919) % n}")
        out += [Triple(e, P, literal(f"label {i}")), Triple(e, P, other),
                Triple(iri(f"urn:sg:{i // 10}"), P, triple_term(e, P, other), "urn:graph:source")]
    return out


def test_one_large_insert_stores_what_many_small_ones_do(tmp_path):
    """The process term cache must not change what is stored, whatever the batching."""
    data = _graph(3000)
    big, small = SqliteTriplesStore(home=tmp_path / "big"), SqliteTriplesStore(home=tmp_path / "small")
    assert big.insert("u", "c", data + data[:100]) == len(data)
    for i in range(0, len(data), 700):
        small.insert("u", "c", data[i:i + 700])
    small.insert("u", "c", data[:1500])  # re-inserting is a no-op
    for s in (big, small):
        assert s.count("u", "c", TriplePattern()) == len(data)

    def key(t: Triple) -> tuple:
        return (t.s.type, str(t.s.value), t.p.value, t.o.type, str(t.o.value), t.g)

    everything = TriplePattern(limit=len(data))
    assert sorted(map(key, big.query("u", "c", everything))) == sorted(map(key, small.query("u", "c", everything)))
    assert sorted(map(key, big.query("u", "c", everything))) == sorted(map(key, data))
    edge = data[4]
    assert [t.s.value for t in small.query("u", "c", TriplePattern(
        o=triple_term(edge.s, edge.p, edge.o), g="urn:graph:source"))] == ["urn:sg:0"]
    assert _no_duplicate_terms(tmp_path / "big") == _no_duplicate_terms(tmp_path / "small")
    big.close()
    small.close()


def test_a_writer_finds_terms_another_writer_added(tmp_path):
    """A term another writer stored is found (not interned again) although this writer's cache never saw it."""
    first, second = SqliteTriplesStore(home=tmp_path), SqliteTriplesStore(home=tmp_path)
    first.insert("u", "c", [Triple(A, P, literal("first"))])
    second.insert("u", "c", [Triple(B, P, literal(f"second {i}")) for i in range(50)])
    first.insert("u", "c", [Triple(A, P, literal(f"second {i}")) for i in range(50)])
    assert _no_duplicate_terms(tmp_path) == 4 + 50  # A, P, B, "first"
    second.insert("u", "c", [Triple(B, P, literal(f"third {i}")) for i in range(50)])
    first.insert("u", "c", [Triple(A, P, literal("new"))])
    first.insert("u", "c", [Triple(A, P, literal(f"third {i}")) for i in range(50)])  # its cache never saw them
    assert _no_duplicate_terms(tmp_path) == 4 + 50 + 50 + 1
    assert second.delete_collection("u", "c") == 1 + 50 + 50 + 50 + 51
    second.insert("u", "d", [Triple(B, P, literal("after gc"))])
    first.insert("u", "d", [Triple(A, P, literal("after gc")), Triple(A, P, literal("first"))])  # epoch moved
    assert _no_duplicate_terms(tmp_path) == 5
    assert {t.s.value for t in first.query("u", "d", TriplePattern(o=literal("after gc")))} == {A.value, B.value}
    first.close()
    second.close()


def test_a_rolled_back_insert_leaves_no_stale_term_ids(tmp_path):
    """Ids of a failed transaction are reused by the next writer; the first writer must not believe it knows them."""
    first, second = SqliteTriplesStore(home=tmp_path), SqliteTriplesStore(home=tmp_path)
    first.insert("u", "c", [Triple(A, P, literal("x"))])
    with raw(tmp_path, "u") as conn:
        conn.execute("CREATE TRIGGER fail BEFORE INSERT ON quads WHEN NEW.o > 100 BEGIN SELECT RAISE(ABORT, 'no'); END")
    with pytest.raises(StoreError):
        first.insert("u", "c", [Triple(A, P, literal(f"doomed {i}")) for i in range(200)])
    with raw(tmp_path, "u") as conn:
        conn.execute("DROP TRIGGER fail")
    second.insert("u", "c", [Triple(B, P, literal(f"other {i}")) for i in range(200)])
    first.insert("u", "c", [Triple(A, P, literal(f"other {i}")) for i in range(200)])
    assert _no_duplicate_terms(tmp_path) == 4 + 200  # A, P, B, "x" and the 200 others
    assert first.count("u", "c", TriplePattern(s=A)) == 201
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


#: The schema-3 layout (one quads table with two covering indexes), as files written before schema 4 hold it.
_SCHEMA_3 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE collections (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE);
CREATE TABLE terms (id INTEGER PRIMARY KEY, h INTEGER NOT NULL, text TEXT NOT NULL);
CREATE INDEX terms_h ON terms (h);
CREATE TABLE quads (
    c INTEGER NOT NULL, s INTEGER NOT NULL, p INTEGER NOT NULL, o INTEGER NOT NULL, g INTEGER NOT NULL,
    PRIMARY KEY (c, s, p, o, g)) WITHOUT ROWID;
CREATE INDEX quads_ops ON quads (c, o, p, s, g);
CREATE INDEX quads_pgo ON quads (c, p, g, o, s);
CREATE TABLE traces (
    c INTEGER NOT NULL, uri TEXT NOT NULL, type TEXT NOT NULL, question TEXT NOT NULL, time TEXT NOT NULL,
    ts INTEGER NOT NULL, parent TEXT NOT NULL, PRIMARY KEY (c, uri)) WITHOUT ROWID;
CREATE INDEX traces_time ON traces (c, ts, uri);
CREATE INDEX traces_type_time ON traces (c, type, ts, uri);
INSERT INTO meta (key, value) VALUES ('schema_version', '3'), ('terms_epoch', '0');
"""


def _reference_and_old_file(tmp_path, layout: str, quad_tables: tuple[str, ...]):
    """``_graph(200)`` stored by today's code under ``tmp_path/ref``, and the same rows written in an
    older ``layout`` (its DDL) under ``tmp_path/old``, the quads copied into each of ``quad_tables``."""
    data = _graph(200)
    reference = SqliteTriplesStore(home=tmp_path / "ref")
    reference.insert("u", "c", data)
    old = user_file("triples", "u", home=tmp_path / "old")
    old.parent.mkdir(parents=True)
    with sqlite3.connect(old) as conn:
        conn.executescript(layout)
        ref = raw(tmp_path / "ref", "u")
        conn.executemany("INSERT INTO collections VALUES (?, ?)", ref.execute("SELECT id, name FROM collections"))
        conn.executemany("INSERT INTO terms VALUES (?, ?, ?)", ref.execute("SELECT id, h, text FROM terms"))
        for table in quad_tables:
            conn.executemany(f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?)",
                             ref.execute("SELECT c, s, p, o, g FROM quads"))
        ref.close()
    return data, reference


def _assert_answers_like(converted: SqliteTriplesStore, reference: SqliteTriplesStore, data: list[Triple]) -> None:
    """A converted file answers every kind of pattern (each table, a triple term, a graph) as the reference."""
    edge = data[1]
    for pattern in (TriplePattern(s=edge.s), TriplePattern(o=edge.o), TriplePattern(p=P, limit=5000),
                    TriplePattern(o=triple_term(edge.s, edge.p, edge.o), g="urn:graph:source"),
                    TriplePattern(p=P, o=literal("label 7"))):
        assert converted.query("u", "c", pattern) == reference.query("u", "c", pattern), pattern


def test_a_schema_3_file_is_converted_and_answers_as_before(tmp_path):
    """A file of the one-table layout is converted on first open: same answers on every table, then writable."""
    data, reference = _reference_and_old_file(tmp_path, _SCHEMA_3, ("quads",))
    converted = SqliteTriplesStore(home=tmp_path / "old")
    _assert_answers_like(converted, reference, data)
    assert converted.count("u", "c", TriplePattern()) == len(data)
    converted.insert("u", "c", [Triple(A, P, B)])
    assert converted.query("u", "c", TriplePattern(o=B)) == [Triple(A, P, B)]
    converted.close()
    reference.close()
    with raw(tmp_path / "old", "u") as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "5"
        assert [stored_rows(conn, t) for t in ("quads", "quads_o", "quads_p")] == [len(data) + 1] * 3
        assert stored_rows(conn, "term_hashes") == conn.execute("SELECT count(*) FROM terms").fetchone()[0]
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert not indexes & {"quads_ops", "quads_pgo", "terms_h"}


#: The schema-4 layout (term look-up through the ``terms_h`` index, no write buffers).
_SCHEMA_4 = _SCHEMA_3.replace("CREATE INDEX quads_ops ON quads (c, o, p, s, g);\n"
                              "CREATE INDEX quads_pgo ON quads (c, p, g, o, s);\n", "").replace(
    "INSERT INTO meta", "\n".join(
        f"CREATE TABLE {t} (c INTEGER NOT NULL, s INTEGER NOT NULL, p INTEGER NOT NULL, o INTEGER NOT NULL, "
        f"g INTEGER NOT NULL, PRIMARY KEY (c, {key})) WITHOUT ROWID;"
        for t, key in (("quads_o", "o, p, s, g"), ("quads_p", "p, g, o, s"))) + "\nINSERT INTO meta").replace(
    "('schema_version', '3')", "('schema_version', '4')")


def test_a_schema_4_file_is_converted_and_answers_as_before(tmp_path):
    """A file that finds terms through the ``terms_h`` index gets ``term_hashes`` and empty write buffers."""
    data, reference = _reference_and_old_file(tmp_path, _SCHEMA_4, ("quads", "quads_o", "quads_p"))
    converted = SqliteTriplesStore(home=tmp_path / "old")
    _assert_answers_like(converted, reference, data)
    converted.insert("u", "c", [Triple(A, P, literal("new after conversion"))])
    assert converted.query("u", "c", TriplePattern(o=literal("new after conversion"))) == [
        Triple(A, P, literal("new after conversion"))]
    converted.close()
    reference.close()
    with raw(tmp_path / "old", "u") as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "5"
        terms = conn.execute("SELECT count(*) FROM terms").fetchone()[0]
        assert stored_rows(conn, "term_hashes") == terms and terms > 0
        assert "terms_h" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}


def quad_of(t: Triple) -> tuple:
    """The canonical form of a triple (Triple itself is not hashable)."""
    return prepare_triples([t])[0]


_NODES = [iri(f"{EX}n/{i}") for i in range(6)] + [literal("x"), literal("y", language="en")]
_PREDICATES = [iri(f"{EX}q/{i}") for i in range(3)]
_EDGE_TERM = triple_term(_NODES[0], _PREDICATES[0], _NODES[1])
_ANY_TRIPLE = st.builds(Triple, st.sampled_from(_NODES[:6] + [_EDGE_TERM]),
                        st.sampled_from(_PREDICATES), st.sampled_from(_NODES), st.sampled_from(["", "urn:g"]))
_OPERATION = st.one_of(
    st.tuples(st.just("insert"), st.sampled_from(["c", "d"]), st.lists(_ANY_TRIPLE, max_size=12)),
    st.tuples(st.just("delete"), st.sampled_from(["c", "d"]), st.lists(_ANY_TRIPLE, max_size=6)),
    st.tuples(st.just("drop"), st.sampled_from(["c", "d"]), st.just([])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=st.lists(_OPERATION, min_size=1, max_size=12), buffer_rows=st.integers(1, 30))
def test_write_buffers_and_their_merges_never_change_an_answer(tmp_path_factory, monkeypatch, operations, buffer_rows):
    """Inserts (all new, partly new, repeated), deletes and dropped collections with merges at any point:
    every pattern answers what a plain set of triples would, and each row is in a main table or its
    buffer, never both."""
    monkeypatch.setattr(sqlite_triples, "RECENT_ROWS_MAX", buffer_rows)
    home = tmp_path_factory.mktemp("buffers")
    store = SqliteTriplesStore(home=home)
    model: dict[str, dict] = {"c": {}, "d": {}}  # canonical quad -> triple
    for op, collection, triples in operations:
        if op == "insert":
            store.insert("u", collection, triples)
            model[collection].update((quad_of(t), t) for t in triples)
        elif op == "delete":
            store.delete("u", collection, triples)
            for t in triples:
                model[collection].pop(quad_of(t), None)
        else:
            store.delete_collection("u", collection)
            model[collection] = {}
    for collection, expected in model.items():
        for s_, p_, o_ in itertools.product([None, _NODES[0], _EDGE_TERM],
                                            [None, _PREDICATES[0]], [None, _NODES[1], _NODES[6]]):
            for g in (None, "", "urn:g"):
                pattern = TriplePattern(s=s_, p=p_, o=o_, g=g)
                want = sorted(q for q, t in expected.items() if (s_ is None or t.s == s_) and (p_ is None or t.p == p_)
                              and (o_ is None or t.o == o_) and (g is None or t.g == g))
                got = sorted(map(quad_of, store.query("u", collection, pattern)))
                assert got == want, pattern
                assert store.count("u", collection, pattern) == len(want), pattern
    store.close()
    if not user_file("triples", "u", home=home).exists():
        return  # nothing was ever inserted
    with raw(home, "u") as conn:
        for table, key in (("quads_o", "c, s, p, o, g"), ("quads_p", "c, s, p, o, g"), ("term_hashes", "h, id")):
            both = conn.execute(f"SELECT count(*) FROM {table} JOIN {table}_recent USING ({key})").fetchone()[0]
            assert both == 0, f"rows in both {table} and its write buffer"
        quads = conn.execute("SELECT count(*) FROM quads").fetchone()[0]
        assert stored_rows(conn, "quads_o") == stored_rows(conn, "quads_p") == quads
        assert stored_rows(conn, "term_hashes") == conn.execute("SELECT count(*) FROM terms").fetchone()[0]


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


def test_threads_opening_a_new_file_at_once_all_get_in(tmp_path):
    """``PRAGMA journal_mode=WAL`` fails with "database is locked" when several threads open a new
    file at the same moment (it does not wait for busy_timeout), so it is retried."""
    import sqlite3

    from trustgraph_base.store.sqlite.wal import enable_wal

    def work(n: int, store: SqliteTriplesStore, start: threading.Barrier) -> None:
        start.wait()
        store.insert("u", "c", [Triple(iri(f"{EX}o{n}"), P, literal(str(n)))])

    for round_ in range(30):
        store = SqliteTriplesStore(home=tmp_path / f"r{round_}")
        assert in_threads(6, partial(work, store=store, start=threading.Barrier(6))) == []
        assert store.count("u", "c", TriplePattern(p=P)) == 6
        store.close()
    # the retry gives up after its timeout when the lock is never released
    path = tmp_path / "held.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(path, timeout=0.05)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        enable_wal(other, timeout=0.2)
    holder.execute("ROLLBACK")
    enable_wal(other, timeout=0.2)
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
