"""The one conformance suite of the triple store, run on both backends.

Every test is parametrised over ``sqlite`` (marked ``unit``: a real SQLite file in a temp
directory, runs everywhere) and ``cassandra`` (marked ``integration``: the real server named
by ``CASSANDRA_HOST``/``CASSANDRA_PORT``; skipped without it, a failure with ``CI=true``).
Tests that concern one backend only carry their own mark.  Each test gets users of its own
(so, on Cassandra, keyspaces of its own), dropped when the module ends.

Results are compared as sets of canonical quads against a brute-force filter of the inserted
data, so a backend that under-returns (a graph filter applied after ``LIMIT``), over-returns
(another collection leaking in) or mangles a term (datatype, language, triple term) fails.
"""

from __future__ import annotations

import itertools
import socket
import threading
import uuid
import zlib

import pytest

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance.agent import agent_session_triples
from trustgraph_base.provenance.triples import docrag_question_triples, question_triples
from trustgraph_base.rdf.terms import MAX_TRIPLE_DEPTH, serialize_term
from trustgraph_base.schema import Term, Triple, TriplePattern, blank, iri, literal, triple_term
from trustgraph_base.store.errors import InvalidQuery, StoreUnavailable
from trustgraph_base.store.names import storage_name, user_file
from trustgraph_base.store.triples import MAX_LIMIT, TracePage, TriplesStore, open_triples_store

BACKENDS = [
    pytest.param("sqlite", marks=pytest.mark.unit, id="sqlite"),
    pytest.param("cassandra", marks=pytest.mark.integration, id="cassandra"),
]

EX = "http://example.org/"
A, B, C, D = (iri(EX + x) for x in "abcd")
P, Q = iri(EX + "p"), iri(EX + "q")
G1, G2 = "http://example.org/graph/1", "http://example.org/graph/2"
SOURCE, RETRIEVAL = ns.GRAPH_SOURCE, ns.GRAPH_RETRIEVAL
CONTAINS = iri(ns.TG_CONTAINS)
XSD_INT = ns.XSD_INTEGER


def key(t: Triple) -> tuple[str, str, str, str]:
    """A triple as comparable canonical strings."""
    return serialize_term(t.s), serialize_term(t.p), serialize_term(t.o), t.g or ""


def keys(triples) -> set:
    return {key(t) for t in triples}


def matches(t: Triple, pattern: TriplePattern) -> bool:
    """The reference semantics of a pattern, by brute force."""
    for pos in ("s", "p", "o"):
        want = getattr(pattern, pos)
        if want is not None and serialize_term(want) != serialize_term(getattr(t, pos)):
            return False
    return pattern.g is None or pattern.g == t.g


# ---------------------------------------------------------------- fixtures

class Users:
    """Hands out fresh user names and remembers them for clean-up."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def new(self, prefix: str = "u") -> str:
        name = f"{prefix}{uuid.uuid4().hex[:10]}"
        self.names.append(name)
        return name


@pytest.fixture(scope="module")
def _keyspaces_to_drop():
    """Keyspaces created by this module's Cassandra tests, dropped (concurrently) at the end."""
    made: list = []
    yield made
    if made:
        session, names = made[0][0], {ks for _, ks in made}
        futures = [session.execute_async(f"DROP KEYSPACE IF EXISTS {ks}", timeout=120) for ks in names]
        for f in futures:
            f.result()


@pytest.fixture(params=BACKENDS)
def store(request, tmp_path, _keyspaces_to_drop):
    """A store of the parametrised backend, with ``store.users`` handing out fresh users."""
    users = Users()
    if request.param == "sqlite":
        s = open_triples_store("sqlite", home=tmp_path)
    else:
        svc = request.getfixturevalue("cassandra_service")
        from trustgraph_base.store.cassandra.connection import CassandraConfig

        s = open_triples_store("cassandra", config=CassandraConfig(hosts=(svc.host,), port=svc.port))
    s.users = users
    yield s
    if request.param == "cassandra":
        _keyspaces_to_drop.extend((s._session, storage_name("tg", u)) for u in users.names)
    s.close()


@pytest.fixture
def user(store) -> str:
    return store.users.new()


def _data() -> list[Triple]:
    """A small graph spanning the default and two named graphs, with literals, blanks and triple terms."""
    t_apb = triple_term(A, P, B)
    return [
        Triple(A, P, B), Triple(A, P, B, G1), Triple(A, P, C), Triple(A, Q, B, G2), Triple(B, P, A, G1),
        Triple(A, P, literal("x")), Triple(A, P, literal("x", language="en"), G1),
        Triple(C, Q, literal("5", datatype=XSD_INT), G2), Triple(C, Q, literal("5"), G2),
        Triple(t_apb, Q, literal("said"), G1), Triple(iri("urn:sg:1"), CONTAINS, t_apb, SOURCE),
        Triple(A, P, t_apb), Triple(blank("b1"), P, A), Triple(D, P, D, G2),
    ]


# ---------------------------------------------------------------- the protocol itself

def test_backends_open_by_name_and_satisfy_the_protocol(store):
    assert store.backend in ("sqlite", "cassandra")
    assert type(store).__module__ == f"trustgraph_base.store.{store.backend}.triples"
    assert isinstance(store, TriplesStore)


@pytest.mark.unit
def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown triple-store backend 'oxigraph'.*cassandra, sqlite"):
        open_triples_store("oxigraph")


# ---------------------------------------------------------------- patterns and graphs

def test_every_pattern_and_graph_selection_matches_the_reference(store, user):
    data = _data()
    assert store.insert(user, "c", data) == len(data)
    other = iri(EX + "nowhere")
    patterns = {}
    for t in data + [Triple(other, other, other, "urn:graph:none")]:
        for bound in itertools.product((False, True), repeat=3):
            for g in (None, "", t.g, G2, "urn:graph:none"):
                pat = TriplePattern(s=t.s if bound[0] else None, p=t.p if bound[1] else None,
                                    o=t.o if bound[2] else None, g=g)
                patterns[(bound, key(t), g)] = pat
    assert len(patterns) > 300
    for pat in patterns.values():
        expected = {key(t) for t in data if matches(t, pat)}
        got = store.query(user, "c", pat)
        assert keys(got) == expected, pat
        assert len(got) == len(expected), f"duplicates in {pat}"
    # the same patterns batched give the same answers, in order
    some = list(patterns.values())[:60]
    batched = store.query_many(user, "c", some)
    assert [keys(r) for r in batched] == [{key(t) for t in data if matches(t, p)} for p in some]


def _many_nodes() -> list[Triple]:
    """120 nodes with 0-8 rows each over two graphs, each contained by a subgraph (a walk's shape)."""
    data = []
    for i in range(120):
        node = iri(f"{EX}node/{i:03d}")
        for j in range(i % 9):
            data.append(Triple(node, P if j % 2 else Q, literal(f"v{j}"), G1 if j % 3 else G2))
        data.append(Triple(iri(f"urn:sg:{i % 7}"), CONTAINS, triple_term(node, P, A), SOURCE))
    long_node = iri(EX + "long/" + "x" * 2000)                 # a key stored by its hash on Cassandra
    return data + [Triple(long_node, P, literal("far"), G1), Triple(long_node, Q, A, G1)]


def test_batched_patterns_of_one_shape_answer_exactly_like_single_queries(store, user):
    """query_many over many patterns that differ only in one term (Cassandra reads them as one
    multi-partition request per shape) gives each pattern exactly its own query's rows, limit
    and order included; duplicates, empty partitions and hashed keys too."""
    data = _many_nodes()
    store.insert(user, "c", data)
    nodes = [iri(f"{EX}node/{i:03d}") for i in range(125)] + [iri(EX + "long/" + "x" * 2000)]
    patterns = ([TriplePattern(s=n, limit=3) for n in nodes]
                + [TriplePattern(s=n, g=G1, limit=2) for n in nodes]
                + [TriplePattern(s=n, p=P, g=G1) for n in nodes]
                + [TriplePattern(p=CONTAINS, o=triple_term(n, P, A), g=SOURCE, limit=5) for n in nodes]
                + [TriplePattern(s=nodes[4], limit=3), TriplePattern(s=nodes[4], limit=3),
                   TriplePattern(s=nodes[8]), TriplePattern(o=A)])
    batched = store.query_many(user, "c", patterns)
    single = [store.query(user, "c", pat) for pat in patterns]
    assert [[key(t) for t in r] for r in batched] == [[key(t) for t in r] for r in single]
    assert [len(r) for r in batched[:9]] == [0, 1, 2, 3, 3, 3, 3, 3, 3]          # per-pattern limits
    for pat, got in zip(patterns, batched, strict=True):
        assert keys(got) <= {key(t) for t in data if matches(t, pat)}, pat
        if pat.limit == 0:
            assert keys(got) == {key(t) for t in data if matches(t, pat)}, pat
    assert {t.o.value for t in batched[len(nodes) - 1]} == {"far", A.value}


def test_graph_filter_is_applied_before_the_limit(store, user):
    """Rows of another graph sort first in every layout; a post-LIMIT filter would return nothing."""
    early = [Triple(A, P, iri(f"{EX}o/{i:03d}"), "http://example.org/graph/a") for i in range(60)]
    late = [Triple(A, P, iri(f"{EX}o/{i:03d}"), "http://example.org/graph/z") for i in range(60)]
    store.insert(user, "c", early + late)
    for pat in (TriplePattern(s=A, g="http://example.org/graph/z", limit=25),
                TriplePattern(s=A, p=P, g="http://example.org/graph/z", limit=25),
                TriplePattern(p=P, g="http://example.org/graph/z", limit=25),
                TriplePattern(g="http://example.org/graph/z", limit=25)):
        got = store.query(user, "c", pat)
        assert len(got) == 25, pat
        assert {t.g for t in got} == {"http://example.org/graph/z"}
    assert len(store.query(user, "c", TriplePattern(s=A, g="", limit=25))) == 0


# ---------------------------------------------------------------- terms

def test_triple_terms_in_subject_and_object_position_match_exactly(store, user):
    edge = triple_term(A, P, literal("5", datatype=XSD_INT))
    same_edge_plain = triple_term(A, P, literal("5"))
    data = [Triple(iri("urn:sg:1"), CONTAINS, edge, SOURCE), Triple(iri("urn:sg:2"), CONTAINS, same_edge_plain, SOURCE),
            Triple(edge, iri(ns.PROV_WAS_DERIVED_FROM), iri("urn:chunk:1"), SOURCE)]
    store.insert(user, "c", data)
    # ?sg tg:contains <<( s p o )>> in urn:graph:source: exactly the subgraph holding that edge
    got = store.query(user, "c", TriplePattern(p=CONTAINS, o=triple_term(A, P, literal("5", datatype=XSD_INT)),
                                               g=SOURCE))
    assert [t.s.value for t in got] == ["urn:sg:1"]
    assert got[0].o.type == "t" and got[0].o.triple.o.datatype == XSD_INT
    assert key(got[0]) == key(data[0])
    got = store.query(user, "c", TriplePattern(s=triple_term(A, P, literal("5", datatype=XSD_INT))))
    assert keys(got) == {key(data[2])}
    assert store.query(user, "c", TriplePattern(o=edge, g="")) == []
    assert store.query(user, "c", TriplePattern(o=triple_term(A, P, literal("6", datatype=XSD_INT)))) == []


def test_nested_triple_terms_round_trip_and_match(store, user):
    inner = triple_term(A, P, literal("deep", language="de"))
    nested = inner
    for i in range(MAX_TRIPLE_DEPTH - 1):
        nested = triple_term(nested, Q, iri(f"{EX}n{i}")) if i % 2 else triple_term(iri(f"{EX}n{i}"), Q, nested)
    data = [Triple(nested, P, nested, G1), Triple(A, P, triple_term(inner, Q, inner))]
    store.insert(user, "c", data)
    assert keys(store.query(user, "c", TriplePattern(s=nested))) == {key(data[0])}
    assert keys(store.query(user, "c", TriplePattern(o=nested, g=G1))) == {key(data[0])}
    got = store.query(user, "c", TriplePattern(o=triple_term(inner, Q, inner)))
    assert keys(got) == {key(data[1])}
    assert got[0].o.triple.s.triple.o.language == "de"
    too_deep = triple_term(nested, Q, nested)
    too_deep = triple_term(too_deep, Q, A)
    with pytest.raises(InvalidQuery, match="nested deeper"):
        store.insert(user, "c", [Triple(too_deep, P, A)])


def test_literals_keep_datatype_language_escapes_and_non_ascii(store, user):
    objects = [
        literal("42", datatype=XSD_INT), literal("42"), literal("42", datatype="http://www.w3.org/2001/XMLSchema#string"),
        literal("2024-05-01T12:00:00.123Z", datatype=ns.XSD_DATETIME), literal("colour", language="en-GB"),
        literal("Farbe", language="de"), literal("東京タワー 🗼 naïve e\u0301"), literal('quote " back \\ slash'),
        literal("line\nbreak\ttab\r"), literal("", datatype=EX + "empty"), literal("3.5", datatype=EX + "custom"),
        iri("http://example.org/π/東京"), blank("node_1"),
    ]
    data = [Triple(iri(f"{EX}s/{i}"), P, o) for i, o in enumerate(objects)]
    store.insert(user, "c", data)
    got = {t.s.value: t for t in store.query(user, "c", TriplePattern(p=P))}
    for t in data:
        back = got[t.s.value]
        assert serialize_term(back.o) == serialize_term(t.o)
        assert back.o.type == t.o.type and back.o.value == t.o.value
    assert got[f"{EX}s/0"].o.datatype == XSD_INT
    assert got[f"{EX}s/4"].o.language == "en-gb"
    # "42"^^xsd:integer and "42" are different terms; "42"^^xsd:string is "42"
    assert {t.s.value for t in store.query(user, "c", TriplePattern(o=literal("42")))} == {f"{EX}s/1", f"{EX}s/2"}
    assert {t.s.value for t in store.query(user, "c", TriplePattern(o=literal("42", datatype=XSD_INT)))} == {f"{EX}s/0"}
    assert {t.s.value for t in store.query(user, "c", TriplePattern(o=literal("colour", language="EN-gb")))} == {
        f"{EX}s/4"}
    for o in objects:
        assert sorted(t.s.value for t in store.query(user, "c", TriplePattern(p=P, o=o))) == sorted(
            t.s.value for t in data if serialize_term(t.o) == serialize_term(o))


def test_long_literals_and_long_triple_terms_round_trip(store, user):
    long_text = "Lorem ipsum 東京 " * 6000          # ~100 KB of UTF-8: beyond any Cassandra key limit
    long_edge = triple_term(A, P, literal(long_text))
    data = [Triple(A, iri(ns.TG_CONTENT), literal(long_text), RETRIEVAL),
            Triple(iri("urn:sg:long"), CONTAINS, long_edge, SOURCE), Triple(long_edge, Q, literal("x"))]
    store.insert(user, "c", data)
    got = store.query(user, "c", TriplePattern(o=literal(long_text)))
    assert len(got) == 1 and got[0].o.value == long_text
    assert keys(store.query(user, "c", TriplePattern(p=CONTAINS, o=triple_term(A, P, literal(long_text))))) == {
        key(data[1])}
    assert keys(store.query(user, "c", TriplePattern(s=long_edge))) == {key(data[2])}
    assert keys(store.query(user, "c", TriplePattern(g=""))) == {key(data[2])}
    assert store.query(user, "c", TriplePattern(o=literal(long_text + "!"))) == []


# ---------------------------------------------------------------- limits and paging

def test_limits_paging_and_count(store, user):
    data = [Triple(A, P, literal(f"v{i:04d}")) for i in range(2500)]
    data += [Triple(iri(f"{EX}x/{i}"), Q, B, G1) for i in range(300)]
    store.insert(user, "c", data)
    assert len(store.query(user, "c", TriplePattern(s=A, limit=10))) == 10
    assert len(store.query(user, "c", TriplePattern(s=A))) == 2500
    assert len(store.query(user, "c", TriplePattern(p=Q, limit=7))) == 7
    assert len(store.query(user, "c", TriplePattern(limit=2600))) == 2600
    assert len(store.query(user, "c", TriplePattern(g=G1, limit=299))) == 299
    pages = list(store.iter_query(user, "c", TriplePattern(s=A), page_size=1000))
    assert [len(p) for p in pages] == [1000, 1000, 500]
    assert keys(t for page in pages for t in page) == keys(data[:2500])
    pages = list(store.iter_query(user, "c", TriplePattern(s=A, limit=1200), page_size=1000))
    assert sum(len(p) for p in pages) == 1200
    assert all(len(p) <= 1000 for p in pages)
    everything = [t for page in store.iter_query(user, "c", TriplePattern(), page_size=700) for t in page]
    assert len(everything) == 2800 and keys(everything) == keys(data)
    assert store.count(user, "c", TriplePattern()) == 2800
    assert store.count(user, "c", TriplePattern(o=B, g=G1, limit=3)) == 300
    assert store.count(user, "c", TriplePattern(s=B)) == 0
    assert list(store.iter_query(user, "c", TriplePattern(s=B))) == []


def test_default_limit_caps_unbounded_queries(store, user):
    from trustgraph_base.store.triples import DEFAULT_LIMIT

    data = [Triple(iri(f"{EX}e/{i}"), P, A) for i in range(DEFAULT_LIMIT + 5)]
    store.insert(user, "c", data)
    assert len(store.query(user, "c", TriplePattern(o=A))) == DEFAULT_LIMIT
    assert len(store.query(user, "c", TriplePattern(o=A, limit=DEFAULT_LIMIT + 5))) == DEFAULT_LIMIT + 5
    assert store.count(user, "c", TriplePattern(p=P)) == DEFAULT_LIMIT + 5


@pytest.mark.parametrize("limit", [-1, MAX_LIMIT + 1, 10**12, "10", 2.5, None])
def test_absurd_limits_are_rejected(store, user, limit):
    with pytest.raises(InvalidQuery, match="limit must be an integer"):
        store.query(user, "c", TriplePattern(s=A, limit=limit))
    with pytest.raises(InvalidQuery):
        store.query_many(user, "c", [TriplePattern(s=A), TriplePattern(s=A, limit=limit)])
    with pytest.raises(InvalidQuery):
        store.iter_query(user, "c", TriplePattern(s=A, limit=limit))


def test_page_sizes_and_maximum_limit(store, user):
    store.insert(user, "c", [Triple(A, P, B)])
    for bad in (0, -5, 10**9, "100"):
        with pytest.raises(InvalidQuery, match="page_size"):
            store.iter_query(user, "c", TriplePattern(s=A), page_size=bad)
    assert keys(store.query(user, "c", TriplePattern(s=A, limit=MAX_LIMIT))) == {key(Triple(A, P, B))}


# ---------------------------------------------------------------- idempotency, isolation, delete

def test_reinsert_is_a_no_op(store, user):
    data = _data()
    assert store.insert(user, "c", data + data[:3]) == len(data)       # duplicates inside one batch
    assert store.insert(user, "c", data) == len(data)
    assert store.insert(user, "c", list(reversed(data))) == len(data)
    assert store.count(user, "c", TriplePattern()) == len(data)
    assert len(store.query(user, "c", TriplePattern(s=A, p=P, o=B))) == 2  # default graph and G1
    assert store.list_collections(user) == ["c"]


def test_collections_and_users_are_isolated(store):
    alice, bob = store.users.new("alice"), store.users.new("bob")
    store.insert(alice, "one", [Triple(A, P, B), Triple(A, P, literal("alice-one"))])
    store.insert(alice, "two", [Triple(A, P, C)])
    store.insert(bob, "one", [Triple(A, P, D, G1)])
    assert keys(store.query(alice, "one", TriplePattern(s=A))) == {key(Triple(A, P, B)),
                                                                     key(Triple(A, P, literal("alice-one")))}
    assert keys(store.query(alice, "two", TriplePattern())) == {key(Triple(A, P, C))}
    assert keys(store.query(bob, "one", TriplePattern(s=A))) == {key(Triple(A, P, D, G1))}
    assert store.query(bob, "two", TriplePattern()) == []
    assert store.query(bob, "one", TriplePattern(o=literal("alice-one"))) == []
    assert store.list_collections(alice) == ["one", "two"]
    assert store.list_collections(bob) == ["one"]
    assert store.list_collections(store.users.new("nobody")) == []
    assert store.query(store.users.new("nobody"), "one", TriplePattern()) == []


def test_names_that_differ_only_in_case_or_punctuation_never_share_storage(store):
    base = uuid.uuid4().hex[:8]
    names = [f"Ann{base}", f"ann{base}", f"a.nn{base}", f"a-nn{base}", f"a_nn{base}"]
    store.users.names.extend(names)
    for name in names:
        store.insert(name, "c", [Triple(A, P, literal(name))])
    for name in names:
        assert [t.o.value for t in store.query(name, "c", TriplePattern(s=A))] == [name]


def test_delete_removes_exactly_those_triples_from_every_pattern(store, user):
    data = _data()
    store.insert(user, "c", data)
    gone = [Triple(A, P, B, G1), Triple(iri("urn:sg:1"), CONTAINS, triple_term(A, P, B), SOURCE)]
    absent = [Triple(A, P, D), Triple(A, P, B, G2)]
    assert store.delete(user, "c", gone + absent) == 2
    assert store.delete(user, "c", gone) == 0
    remaining = [t for t in data if key(t) not in keys(gone)]
    for t in data:
        for bound in itertools.product((False, True), repeat=3):
            for g in (None, t.g):
                pat = TriplePattern(s=t.s if bound[0] else None, p=t.p if bound[1] else None,
                                    o=t.o if bound[2] else None, g=g)
                assert keys(store.query(user, "c", pat)) == {key(r) for r in remaining if matches(r, pat)}, pat
    assert store.delete(user, "other", data) == 0
    assert store.delete(store.users.new(), "c", data) == 0


def test_delete_collection_removes_everything_and_only_that(store, user):
    data = _data() + [Triple(A, iri(ns.TG_CONTENT), literal("long " * 20000))]
    store.insert(user, "gone", data + question_triples("urn:trustgraph:question:del", "q?", "2024-01-01T00:00:00Z"))
    store.insert(user, "kept", data[:4])
    assert store.delete_collection(user, "gone") == len(data) + 6
    assert store.list_collections(user) == ["kept"]
    for t in data:
        assert store.query(user, "gone", TriplePattern(s=t.s)) == []
        assert store.query(user, "gone", TriplePattern(p=t.p)) == []
        assert store.query(user, "gone", TriplePattern(o=t.o)) == []
    assert store.count(user, "gone", TriplePattern()) == 0
    assert store.list_traces(user, "gone").traces == []
    assert store.get_trace(user, "gone", "urn:trustgraph:question:del") is None
    assert keys(store.query(user, "kept", TriplePattern())) == keys(data[:4])
    assert store.delete_collection(user, "gone") == 0
    assert store.delete_collection(store.users.new(), "gone") == 0
    store.insert(user, "gone", data[:2])                           # the name can be used again
    assert keys(store.query(user, "gone", TriplePattern())) == keys(data[:2])


# ---------------------------------------------------------------- bad input

BAD_USERS = ["a'; DROP KEYSPACE system; --", "../../etc/passwd", "..", "", "a b", "x" * 65, "ü", "a/b", None]
BAD_COLLECTIONS = ["c'; DROP TABLE quads; --", "../x", "", "a b", "x" * 65, "@c", None]


def test_invalid_names_are_rejected_before_anything_is_touched(store, tmp_path):
    good = store.users.new()
    for bad in BAD_USERS:
        with pytest.raises(InvalidQuery, match="invalid user name"):
            store.insert(bad, "c", [Triple(A, P, B)])
        with pytest.raises(InvalidQuery, match="invalid user name"):
            store.query(bad, "c", TriplePattern())
        with pytest.raises(InvalidQuery, match="invalid user name"):
            store.list_collections(bad)
        with pytest.raises(InvalidQuery, match="invalid user name"):
            store.list_traces(bad, "c")
    for bad in BAD_COLLECTIONS:
        with pytest.raises(InvalidQuery, match="invalid collection name"):
            store.insert(good, bad, [Triple(A, P, B)])
        with pytest.raises(InvalidQuery, match="invalid collection name"):
            store.delete_collection(good, bad)
        with pytest.raises(InvalidQuery, match="invalid collection name"):
            store.query(good, bad, TriplePattern())
    assert store.list_collections(good) == []
    if store.backend == "sqlite":
        assert not (tmp_path / "triples").exists() or list((tmp_path / "triples").iterdir()) == []
        assert not user_file("triples", good, home=tmp_path).exists()
    else:
        found = store._session.execute("SELECT keyspace_name FROM system_schema.keyspaces "
                                       "WHERE keyspace_name = %s", (storage_name("tg", good),)).one()
        assert found is None


def _bad_triples() -> list[tuple[str, Triple]]:
    no_triple = Term(type="t")
    return [
        ("IRI", Triple(iri("not an iri"), P, B)),
        ("scheme", Triple(iri("relative/path"), P, B)),
        ("predicate must be an IRI", Triple(A, literal("p"), B)),
        ("triple term without a triple", Triple(no_triple, P, B)),
        ("predicate must be an IRI", Triple(triple_term(A, literal("x"), B), P, B)),
        ("language tag", Triple(A, P, literal("x", language="not a tag"))),
        ("unknown term type", Triple(A, P, Term(type="z", value="x"))),
        ("missing", Triple(A, P, None)),
        ("graph", Triple(A, P, B, "not a graph")),
        ("blank node", Triple(blank("has space"), P, B)),
    ]


def test_a_bad_term_anywhere_in_a_batch_writes_nothing(store, user):
    good = [Triple(iri(f"{EX}g/{i}"), P, B) for i in range(50)]
    for message, bad in _bad_triples():
        with pytest.raises(InvalidQuery, match=f"triple 50: .*{message}"):
            store.insert(user, "c", good + [bad] + good[:3])
    assert store.list_collections(user) == []
    assert store.query(user, "c", TriplePattern(o=B)) == []
    with pytest.raises(InvalidQuery, match="expected a Triple"):
        store.insert(user, "c", [Triple(A, P, B), "<a> <b> <c>"])
    with pytest.raises(InvalidQuery):
        store.insert(user, "c", "<a> <b> <c> .")
    with pytest.raises(InvalidQuery, match="invalid pattern"):
        store.query(user, "c", TriplePattern(s=iri("no scheme")))
    with pytest.raises(InvalidQuery, match="invalid pattern"):
        store.query(user, "c", TriplePattern(s=A, g="not a graph"))
    with pytest.raises(InvalidQuery, match="invalid pattern"):
        store.query(user, "c", TriplePattern(o=Term(type="t")))
    with pytest.raises(InvalidQuery, match="TriplePattern"):
        store.query(user, "c", {"s": A})
    store.insert(user, "c", good)                                   # the retry without the bad triple completes
    assert store.count(user, "c", TriplePattern(o=B)) == 50


# ---------------------------------------------------------------- trace index

def _question_batches() -> list[list[Triple]]:
    return [
        question_triples("urn:trustgraph:question:q1", "What is A?", "2024-03-01T10:00:00Z"),
        docrag_question_triples("urn:trustgraph:docrag:d1", "Summarise the report", "2024-03-01T11:00:00.250Z"),
        agent_session_triples("urn:trustgraph:agent:s1", "Plan a trip", "2024-03-02T09:30:00+02:00"),
        question_triples("urn:trustgraph:question:q2", "Sub-question", "2024-03-02T09:30:00+02:00",
                         parent_uri="urn:trustgraph:agent:s1/i1"),
        question_triples("urn:trustgraph:question:q3", "Newest ‽ 東京", "2024-03-03T00:00:00.000001Z"),
        question_triples("urn:trustgraph:question:q0", "Same time as q2", "2024-03-02T07:30:00Z"),
    ]


def test_trace_index_lists_newest_first_with_type_filter_and_cursor(store, user):
    batches = _question_batches()
    for batch in batches:
        store.insert(user, "c", batch + [Triple(A, P, B)])
    page = store.list_traces(user, "c")
    assert isinstance(page, TracePage) and page.next_cursor == ""
    # q2, s1 and q0 start at the same instant (09:30+02:00 = 07:30Z): ties are ordered by URI, descending
    assert [t.uri for t in page.traces] == [
        "urn:trustgraph:question:q3", "urn:trustgraph:question:q2", "urn:trustgraph:question:q0",
        "urn:trustgraph:agent:s1", "urn:trustgraph:docrag:d1", "urn:trustgraph:question:q1"]
    by_uri = {t.uri: t for t in page.traces}
    assert by_uri["urn:trustgraph:docrag:d1"].type == "docrag"
    assert by_uri["urn:trustgraph:docrag:d1"].question == "Summarise the report"
    assert by_uri["urn:trustgraph:docrag:d1"].time == "2024-03-01T11:00:00.250Z"
    assert by_uri["urn:trustgraph:agent:s1"].type == "agent"
    assert by_uri["urn:trustgraph:question:q2"].parent == "urn:trustgraph:agent:s1/i1"
    assert by_uri["urn:trustgraph:question:q3"].question == "Newest ‽ 東京"
    assert [t.uri for t in store.list_traces(user, "c", type="graphrag").traces] == [
        "urn:trustgraph:question:q3", "urn:trustgraph:question:q2", "urn:trustgraph:question:q0",
        "urn:trustgraph:question:q1"]
    assert [t.uri for t in store.list_traces(user, "c", type="agent").traces] == ["urn:trustgraph:agent:s1"]
    # paging with a cursor walks the same order without gaps or repeats
    for kind, limit in (("", 1), ("", 2), ("", 4), ("graphrag", 3)):
        seen, cursor = [], ""
        while True:
            p = store.list_traces(user, "c", type=kind, limit=limit, cursor=cursor)
            assert len(p.traces) <= limit
            seen += [t.uri for t in p.traces]
            if not p.next_cursor:
                break
            cursor = p.next_cursor
        assert seen == [t.uri for t in store.list_traces(user, "c", type=kind).traces]
    assert store.get_trace(user, "c", "urn:trustgraph:question:q2") == by_uri["urn:trustgraph:question:q2"]
    assert store.get_trace(user, "c", "urn:trustgraph:question:nope") is None


def test_trace_index_is_idempotent_and_removable(store, user):
    batches = _question_batches()
    for batch in batches + batches:
        store.insert(user, "c", batch)
    assert len(store.list_traces(user, "c").traces) == 6
    assert len(store.list_traces(user, "other").traces) == 0
    store.remove_trace(user, "c", "urn:trustgraph:question:q3")
    store.remove_trace(user, "c", "urn:trustgraph:question:q3")          # removing twice is fine
    assert store.get_trace(user, "c", "urn:trustgraph:question:q3") is None
    assert "urn:trustgraph:question:q3" not in [t.uri for t in store.list_traces(user, "c", type="graphrag").traces]
    assert store.count(user, "c", TriplePattern(s=iri("urn:trustgraph:question:q3"))) == 6   # triples stay
    # deleting the Question's type triple takes it out of the index too
    store.delete(user, "c", [Triple(iri("urn:trustgraph:docrag:d1"), iri(ns.RDF_TYPE), iri(ns.TG_DOC_RAG_QUESTION),
                                    RETRIEVAL)])
    assert [t.uri for t in store.list_traces(user, "c", type="docrag").traces] == []
    assert len(store.list_traces(user, "c").traces) == 4


def test_trace_listing_rejects_bad_arguments(store, user):
    store.insert(user, "c", _question_batches()[0])
    for bad in ("GraphRAG", "all", "x"):
        with pytest.raises(InvalidQuery, match="unknown trace type"):
            store.list_traces(user, "c", type=bad)
    for bad in (-1, 1001, "5"):
        with pytest.raises(InvalidQuery, match="trace limit"):
            store.list_traces(user, "c", limit=bad)
    for bad in ("garbage!", "bm90IGEgY3Vyc29y", "MTIz"):
        with pytest.raises(InvalidQuery, match="invalid trace cursor"):
            store.list_traces(user, "c", cursor=bad)
    with pytest.raises(InvalidQuery, match="question URI"):
        store.get_trace(user, "c", "not a uri")
    assert len(store.list_traces(user, "c", limit=0).traces) == 1


def test_question_without_start_time_is_listed_as_newest(store, user):
    store.insert(user, "c", _question_batches()[4])
    store.insert(user, "c", [Triple(iri("urn:trustgraph:question:untimed"), iri(ns.RDF_TYPE),
                                    iri(ns.TG_GRAPH_RAG_QUESTION), RETRIEVAL)])
    first = store.list_traces(user, "c").traces[0]
    assert (first.uri, first.time, first.question) == ("urn:trustgraph:question:untimed", "", "")


def test_only_questions_typed_in_the_retrieval_graph_are_traces(store, user):
    """A knowledge or TriG load that types a Question outside urn:graph:retrieval creates no trace, and removing
    it removes none."""
    q = "urn:trustgraph:question:loaded"
    for graph in ("", SOURCE, "urn:graph:other"):
        store.insert(user, "c", question_triples(q, "Loaded, not asked", "2000-01-01T00:00:00Z", graph=graph))
    # nor is a Question whose URI no trace service makes (a trace's nodes are found by its URI scheme)
    store.insert(user, "c", question_triples("urn:x:question", "Made up", "2000-01-01T00:00:00Z"))
    assert store.list_traces(user, "c").traces == [] and store.get_trace(user, "c", q) is None
    # the same Question asked for real is a trace; deleting the knowledge copy of its type leaves it listed
    store.insert(user, "c", question_triples(q, "Asked", "2024-01-01T00:00:00Z"))
    assert [t.question for t in store.list_traces(user, "c").traces] == ["Asked"]
    store.delete(user, "c", [Triple(iri(q), iri(ns.RDF_TYPE), iri(ns.TG_GRAPH_RAG_QUESTION), g)
                             for g in ("", SOURCE, "urn:graph:other")])
    assert store.get_trace(user, "c", q) is not None


# ---------------------------------------------------------------- trace claims

def _another(store):
    """A second store object on the same data (its own connections, as another process would have)."""
    if store.backend == "sqlite":
        return open_triples_store("sqlite", home=store.home)
    return open_triples_store("cassandra", config=store.config)


def test_a_trace_claim_is_won_once_and_a_refused_claim_writes_nothing(store, user):
    uri = "urn:trustgraph:agent:claimed"
    first = agent_session_triples(uri, "First run?", "2024-03-01T10:00:00Z")
    assert store.claim_trace(user, "c", first) is True
    assert store.claim_trace(user, "c", agent_session_triples(uri, "Second run?", "2024-03-01T10:00:01Z")) is False
    assert store.claim_trace(user, "c", first) is False  # the same Question again is another run too
    assert keys(store.query(user, "c", TriplePattern(s=iri(uri), limit=100))) == keys(first)
    assert [(t.uri, t.question, t.type) for t in store.list_traces(user, "c").traces] == [
        (uri, "First run?", "agent")]
    assert store.get_trace(user, "c", uri).question == "First run?"
    # the same URI in another collection is another trace
    assert store.claim_trace(user, "other", agent_session_triples(uri, "Elsewhere?")) is True
    # a trace stored by a plain insert (e.g. before claims existed) holds its URI as well
    old = "urn:trustgraph:agent:inserted"
    store.insert(user, "c", agent_session_triples(old, "Inserted run?", "2024-03-01T09:00:00Z"))
    assert store.claim_trace(user, "c", agent_session_triples(old, "Later run?")) is False
    assert [t.o.value for t in store.query(user, "c", TriplePattern(s=iri(old), p=iri(ns.TG_QUERY)))] == [
        "Inserted run?"]
    # a deleted trace frees its URI
    store.delete(user, "c", first)
    assert store.get_trace(user, "c", uri) is None
    assert store.claim_trace(user, "c", agent_session_triples(uri, "After the deletion?")) is True


def test_a_trace_claim_holds_exactly_one_question(store, user):
    two = agent_session_triples("urn:trustgraph:agent:a", "A?") + agent_session_triples("urn:trustgraph:agent:b",
                                                                                       "B?")
    for bad in ([Triple(A, P, B)], two):
        with pytest.raises(InvalidQuery, match="exactly one Question"):
            store.claim_trace(user, "c", bad)
    assert store.count(user, "c", TriplePattern()) == 0 and store.list_traces(user, "c").traces == []


def test_concurrent_claims_of_one_uri_have_one_winner(store, user):
    """Claims racing from several threads over two store objects (connections of their own): per URI
    exactly one wins, and its Question alone is stored and listed."""
    others = _another(store)

    def claim(i: int, uri: str, gate: threading.Barrier, won: dict[int, bool]) -> None:
        target = store if i % 2 else others
        batch = agent_session_triples(uri, f"Run {i}?")
        gate.wait()
        won[i] = target.claim_trace(user, "c", batch)

    try:
        for round_ in range(4):
            uri = f"urn:trustgraph:agent:race{round_}"
            gate = threading.Barrier(8)
            won: dict[int, bool] = {}
            threads = [threading.Thread(target=claim, args=(i, uri, gate, won)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            winners = [i for i, ok in won.items() if ok]
            assert len(won) == 8 and len(winners) == 1, won
            stored = store.query(user, "c", TriplePattern(s=iri(uri), p=iri(ns.TG_QUERY)))
            assert [t.o.value for t in stored] == [f"Run {winners[0]}?"]
            assert [t.uri for t in store.list_traces(user, "c").traces].count(uri) == 1
    finally:
        others.close()


# ---------------------------------------------------------------- Cassandra only: faults, keyspaces

class CuttingProxy:
    """A TCP forwarder to Cassandra that can be cut: the injected fault of "Cassandra went away".

    ``cut_after(n)`` closes every connection (and refuses new ones) once ``n`` more bytes have
    gone from the client to the server, so the cut lands in the middle of a write.
    """

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.sent = 0
        self.budget: int | None = None
        self.cut = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.cut.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, counted: bool) -> None:
        try:
            while not self.cut.is_set():
                data = src.recv(65536)
                if not data:
                    break
                if counted:
                    with self.lock:
                        self.sent += len(data)
                        over = self.budget is not None and self.sent > self.budget
                    if over:
                        self.stop()
                        return
                dst.sendall(data)
        except OSError:
            pass

    def cut_after(self, n: int) -> None:
        with self.lock:
            self.budget = self.sent + n

    def stop(self) -> None:
        self.cut.set()
        try:
            self.server.close()
        except OSError:
            pass
        with self.lock:
            for s in self.sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()


@pytest.mark.integration
def test_cassandra_down_during_a_write_raises_store_unavailable_and_a_retry_completes(
        cassandra_service, _keyspaces_to_drop):
    from trustgraph_base.store.cassandra.connection import CassandraConfig

    healthy = open_triples_store("cassandra", config=CassandraConfig(hosts=(cassandra_service.host,),
                                                                       port=cassandra_service.port))
    user = f"fault{uuid.uuid4().hex[:10]}"
    _keyspaces_to_drop.append((healthy._session, storage_name("tg", user)))
    healthy.insert(user, "c", [Triple(A, P, B)])                    # schema exists before the fault
    proxy = CuttingProxy(cassandra_service.host, cassandra_service.port)
    flaky = open_triples_store("cassandra", config=CassandraConfig(
        hosts=("127.0.0.1",), port=proxy.port, connect_timeout=5, request_timeout=5))
    try:
        assert flaky.query(user, "c", TriplePattern(s=A))[0].o.value == B.value
        batch = [Triple(iri(f"{EX}bulk/{i}"), P, literal(f"value {i}")) for i in range(4000)]
        proxy.cut_after(200_000)                                   # well inside this batch's requests
        with pytest.raises(StoreUnavailable, match="Cassandra unavailable during insert"):
            flaky.insert(user, "c", batch)
        with pytest.raises(StoreUnavailable):
            flaky.query(user, "c", TriplePattern(s=A))
        # the cut really was half-way: some rows of the batch landed, but not all of them
        assert healthy.count(user, "c", TriplePattern(p=P)) > 1
        assert healthy.count(user, "c", TriplePattern(g="")) < len(batch) + 1
        assert healthy.insert(user, "c", batch) == len(batch)      # redelivery completes it
        assert healthy.count(user, "c", TriplePattern(p=P)) == len(batch) + 1
        for pat in (TriplePattern(o=literal("value 3999")), TriplePattern(s=iri(f"{EX}bulk/0"), g="")):
            assert len(healthy.query(user, "c", pat)) == 1
    finally:
        proxy.stop()
        flaky._session.cluster.shutdown()


@pytest.mark.integration
def test_cassandra_unreachable_at_start_raises_store_unavailable(cassandra_service):
    from trustgraph_base.store.cassandra.connection import CassandraConfig

    with socket.socket() as s:                                     # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreUnavailable, match=f"cannot reach Cassandra at 127.0.0.1:{port}"):
        open_triples_store("cassandra", config=CassandraConfig(hosts=("127.0.0.1",), port=port, connect_timeout=2))


@pytest.mark.integration
def test_cassandra_batches_fit_the_server_thresholds_and_never_draw_its_size_warning(
        cassandra_service, _keyspaces_to_drop, caplog):
    """Batches are sized from the server's own thresholds (read at connect), and a bulk insert of
    big and small rows never makes the server warn that a batch is too large."""
    from trustgraph_base.store.cassandra.connection import CassandraConfig, parse_size

    store = open_triples_store("cassandra", config=CassandraConfig(hosts=(cassandra_service.host,),
                                                                     port=cassandra_service.port))
    settings = {r.name: parse_size(r.value) for r in store._session.execute(
        "SELECT name, value FROM system_views.settings WHERE name IN "
        "('batch_size_warn_threshold', 'batch_size_fail_threshold')")}
    assert 1024 <= store.batch_bytes <= settings["batch_size_warn_threshold"]
    assert store.batch_bytes <= settings["batch_size_fail_threshold"] // 2
    user = f"batch{uuid.uuid4().hex[:10]}"
    _keyspaces_to_drop.append((store._session, storage_name("tg", user)))
    triples = [Triple(iri(f"{EX}e/{i}"), iri(f"{EX}p/{i % 7}"), literal(("x" * (i % 250)) + str(i)),
                      G1 if i % 3 else "")
               for i in range(6000)]
    with caplog.at_level("WARNING", logger="cassandra"):
        assert store.insert(user, "c", triples) == 6000
    size_warnings = [r.getMessage() for r in caplog.records if "threshold" in r.getMessage()]
    assert size_warnings == []
    assert store.count(user, "c", TriplePattern()) == 6000


@pytest.mark.integration
def test_cassandra_keyspace_per_user_with_configured_replication(cassandra_service, _keyspaces_to_drop):
    from trustgraph_base.store.cassandra.connection import CassandraConfig

    store = open_triples_store("cassandra", config=CassandraConfig(hosts=(cassandra_service.host,),
                                                                     port=cassandra_service.port,
                                                                     replication_factor=1))
    user = f"Rf.User-{uuid.uuid4().hex[:8]}"
    ks = storage_name("tg", user)
    _keyspaces_to_drop.append((store._session, ks))
    store.insert(user, "c", [Triple(A, P, B)])
    row = store._session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                                 (ks,)).one()
    assert row.replication["class"] == "org.apache.cassandra.locator.NetworkTopologyStrategy"
    assert set(row.replication.values()) == {row.replication["class"], "1"}  # one replica in each datacenter
    tables = {r.table_name for r in store._session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (ks,))}
    assert {"quads", "quads_scan", "collections", "trace_list", "trace_days", "trace_keys", "long_terms"} <= tables
    assert not {"traces", "trace_uris"} & tables  # the trace index before it was bucketed


def _cassandra_store(cassandra_service, _keyspaces_to_drop, prefix: str):
    from trustgraph_base.store.cassandra.connection import CassandraConfig

    store = open_triples_store("cassandra", config=CassandraConfig(hosts=(cassandra_service.host,),
                                                                     port=cassandra_service.port))
    user = f"{prefix}{uuid.uuid4().hex[:10]}"
    _keyspaces_to_drop.append((store._session, storage_name("tg", user)))
    return store, user


@pytest.mark.integration
def test_cassandra_trace_index_partitions_are_bounded_by_day_and_uri_bucket(cassandra_service, _keyspaces_to_drop):
    """No trace-index partition grows with the traces a collection keeps: listing rows go to one partition per
    kind and UTC day of their start, URI rows to one of TRACE_KEY_BUCKETS; a collection delete removes them all."""
    from trustgraph_base.store.cassandra.triples import TRACE_KEY_BUCKETS

    store, user = _cassandra_store(cassandra_service, _keyspaces_to_drop, "tday")
    days = ["2024-03-01", "2024-03-02", "2024-03-05"]
    uris = [f"urn:trustgraph:question:{d}-{i}" for d in days for i in range(3)]
    for uri in uris:
        store.insert(user, "c", question_triples(uri, "q?", f"{uri.split(':')[-1][:10]}T12:00:0{uri[-1]}Z"))
    ks = storage_name("tg", user)
    session = store._session
    listed = {(r.kind, r.day) for r in session.execute(f"SELECT kind, day FROM {ks}.trace_days")}
    day_numbers = {r.day for r in session.execute(f"SELECT DISTINCT collection, kind, day FROM {ks}.trace_list")}
    assert listed == {(k, d) for k in ("all", "graphrag") for d in day_numbers} and len(day_numbers) == 3
    keys = {r.bucket for r in session.execute(f"SELECT DISTINCT collection, bucket FROM {ks}.trace_keys")}
    assert 1 < len(keys) <= TRACE_KEY_BUCKETS
    # the newest day first, each day newest first, a page crossing days
    expected = sorted(uris, key=lambda u: (u.split(":")[-1][:10], u[-1]), reverse=True)
    seen, cursor = [], ""
    while True:
        page = store.list_traces(user, "c", limit=2, cursor=cursor)
        seen += [t.uri for t in page.traces]
        cursor = page.next_cursor
        if not cursor:
            break
    assert seen == expected
    store.delete_collection(user, "c")
    for table in ("trace_list", "trace_days", "trace_keys"):
        assert list(session.execute(f"SELECT * FROM {ks}.{table} LIMIT 1")) == [], table
    assert store.list_traces(user, "c").traces == [] and store.get_trace(user, "c", uris[0]) is None


@pytest.mark.integration
def test_cassandra_trace_index_written_before_bucketing_is_moved_on_first_use(cassandra_service, _keyspaces_to_drop):
    """A keyspace with the old tables (one partition per collection) lists, finds, removes and claims as before
    once a store opens it; the old tables are gone."""
    from trustgraph_base.store.cassandra.connection import ensure_keyspace

    store, user = _cassandra_store(cassandra_service, _keyspaces_to_drop, "tmove")
    ks = storage_name("tg", user)
    session = store._session
    ensure_keyspace(session, ks, 1)
    session.execute(f"CREATE TABLE {ks}.traces (collection text, kind text, ts bigint, uri text, type text, "
                    "question text, time text, parent text, PRIMARY KEY ((collection, kind), ts, uri)) "
                    "WITH CLUSTERING ORDER BY (ts DESC, uri DESC)")
    session.execute(f"CREATE TABLE {ks}.trace_uris (collection text, uri text, ts bigint, type text, "
                    "question text, time text, parent text, PRIMARY KEY ((collection), uri))")
    old = [("urn:trustgraph:question:old1", "graphrag", 1_709_290_800_000_000, "2024-03-01T11:00:00Z", ""),
           ("urn:trustgraph:agent:old2", "agent", 1_709_463_600_000_000, "2024-03-03T11:00:00Z", ""),
           ("urn:trustgraph:question:old3", "graphrag", 1_709_463_600_000_001, "2024-03-03T11:00:00.000001Z",
            "urn:trustgraph:agent:old2/i1")]
    for uri, kind, ts, when, parent in old:
        for k in ("all", kind):
            session.execute(f"INSERT INTO {ks}.traces (collection, kind, ts, uri, type, question, time, parent) "
                            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                            ("c", k, ts, uri, kind, f"Q {uri}", when, parent))
        session.execute(f"INSERT INTO {ks}.trace_uris (collection, uri, ts, type, question, time, parent) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s)", ("c", uri, ts, kind, f"Q {uri}", when, parent))
    # a claimed Question whose listing rows were never written (an interrupted claim) stays claimed, unlisted
    session.execute(f"INSERT INTO {ks}.trace_uris (collection, uri, ts, type, question, time, parent) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s)", ("c", "urn:trustgraph:question:claimed", 1, "graphrag",
                                                            "", "", ""))
    assert [t.uri for t in store.list_traces(user, "c").traces] == [
        "urn:trustgraph:question:old3", "urn:trustgraph:agent:old2", "urn:trustgraph:question:old1"]
    tables = {r.table_name for r in session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (ks,))}
    assert not {"traces", "trace_uris"} & tables
    assert [t.uri for t in store.list_traces(user, "c", type="agent").traces] == ["urn:trustgraph:agent:old2"]
    found = store.get_trace(user, "c", "urn:trustgraph:question:old3")
    assert (found.type, found.time, found.parent) == ("graphrag", "2024-03-03T11:00:00.000001Z",
                                                      "urn:trustgraph:agent:old2/i1")
    assert store.get_trace(user, "c", "urn:trustgraph:question:claimed") is not None
    store.remove_trace(user, "c", "urn:trustgraph:question:old1")
    assert [t.uri for t in store.list_traces(user, "c", type="graphrag").traces] == ["urn:trustgraph:question:old3"]
    # a second store on the same keyspace finds nothing left to move and lists the same
    again = open_triples_store("cassandra", config=store.config)
    try:
        assert [t.uri for t in again.list_traces(user, "c").traces] == [
            "urn:trustgraph:question:old3", "urn:trustgraph:agent:old2"]
    finally:
        again.close()


@pytest.mark.integration
def test_cassandra_reads_patterns_of_one_shape_in_one_request(cassandra_service, _keyspaces_to_drop):
    """A walk's 126 node look-ups of one shape cost one request per 100 nodes, not one each
    (before: 126 requests)."""
    from trustgraph_base.store.cassandra.connection import CassandraConfig
    from trustgraph_base.store.cassandra.triples import IN_KEYS

    store = open_triples_store("cassandra", config=CassandraConfig(hosts=(cassandra_service.host,),
                                                                     port=cassandra_service.port))
    user = f"inread{uuid.uuid4().hex[:10]}"
    _keyspaces_to_drop.append((store._session, storage_name("tg", user)))
    store.insert(user, "c", _many_nodes())
    nodes = [iri(f"{EX}node/{i:03d}") for i in range(125)] + [iri(EX + "long/" + "x" * 2000)]
    sent = []
    real = store._session.execute_async
    store._session.execute_async = lambda q, *a, **k: sent.append(q) or real(q, *a, **k)
    try:
        got = store.query_many(user, "c", [TriplePattern(s=n, p=P, g=G1) for n in nodes])
    finally:
        store._session.execute_async = real
    assert sum(len(r) for r in got) == sum(1 for t in _many_nodes() if t.p == P and t.g == G1)
    reads = [q for q in sent if ".quads " in getattr(q, "prepared_statement", q).query_string]
    assert len(reads) == -(-len(nodes) // IN_KEYS) == 2
    assert len(sent) == len(reads) + 1                          # and the long key's text, once


@pytest.mark.integration
def test_cassandra_groups_writes_and_reads_by_replica_set_on_a_multi_node_ring(cassandra_service, _keyspaces_to_drop):
    """The one-node fast path aside: with partitions spread over two replica sets (as on a ring
    of nodes), every batch and every multi-partition read stays within one set, routed to it."""
    from trustgraph_base.store.cassandra import triples as cassandra_triples
    from trustgraph_base.store.cassandra.connection import CassandraConfig

    store = open_triples_store("cassandra", config=CassandraConfig(hosts=(cassandra_service.host,),
                                                                     port=cassandra_service.port))
    user = f"ring{uuid.uuid4().hex[:10]}"
    _keyspaces_to_drop.append((store._session, storage_name("tg", user)))

    def two_sets(routing_key: bytes) -> tuple[str]:
        return ("node-a",) if zlib.crc32(routing_key) % 2 else ("node-b",)

    store._one_replica_set = lambda: False
    store._replicas = lambda ks, routing_key: two_sets(routing_key)
    data = _many_nodes()
    store.insert(user, "c", data)
    st = store._prepared(user)
    c = b"c"
    keys = [f"<{EX}node/{i:03d}>".encode() for i in range(40)]
    partitions = [((c, k), [(st.insert_quad.query_id, [c, k], 40)]) for k in keys]
    batches = store._batches(st.keyspace, partitions)
    assert len(batches) == 2
    for batch, _ in batches:
        owners = {two_sets(cassandra_triples._partition_routing_key((c, values[1])))
                  for _, _, values in batch._statements_and_parameters}
        assert owners == {two_sets(batch.routing_key)}
    heads = [f"<{EX}node/{i:03d}>" for i in range(125)]
    groups = list(store._in_groups(st.keyspace, "c", heads))
    assert sorted(h for g in groups for h in g) == sorted(heads)
    assert all(len({two_sets(cassandra_triples._routing_key(c, h.encode())) for h in g}) == 1 for g in groups)
    nodes = [iri(f"{EX}node/{i:03d}") for i in range(125)]
    got = store.query_many(user, "c", [TriplePattern(s=n, limit=3) for n in nodes])
    assert [len(r) for r in got[:9]] == [0, 1, 2, 3, 3, 3, 3, 3, 3]
    assert sum(len(r) for r in store.query_many(user, "c", [TriplePattern(s=n) for n in nodes])) == \
        sum(1 for t in data if t.s.value.startswith(EX + "node/"))


def test_cassandra_every_bound_pattern_is_one_single_partition_read(cassandra_service, _keyspaces_to_drop):
    """Cassandra's own query trace shows each bound pattern reading exactly one partition, never a range."""
    from trustgraph_base.store.cassandra.connection import CassandraConfig
    from trustgraph_base.store.triples import check_pattern

    store = open_triples_store("cassandra", config=CassandraConfig(hosts=(cassandra_service.host,),
                                                                     port=cassandra_service.port))
    user = f"trace{uuid.uuid4().hex[:10]}"
    _keyspaces_to_drop.append((store._session, storage_name("tg", user)))
    edge = triple_term(A, P, literal("5", datatype=XSD_INT))
    store.insert(user, "c", [Triple(iri("urn:sg:1"), CONTAINS, edge, SOURCE), Triple(A, P, B, G1), Triple(A, P, B)])
    statements = store._prepared(user)
    values = {"s": iri("urn:sg:1"), "p": CONTAINS, "o": edge}
    for n in range(1, 5):
        for bound in itertools.combinations("spog", n):
            if bound == ("g",):
                continue                                           # graph-only: the bucketed scan table
            pattern = TriplePattern(**{x: values[x] for x in bound if x != "g"}, g=SOURCE if "g" in bound else None)
            stmt, params, _, _ = store._layout_query(statements, "c", check_pattern(pattern), 100)
            assert "ALLOW FILTERING" not in stmt.query_string.upper()
            result = store._session.execute(stmt, params, trace=True)
            assert len(result.current_rows) == 1, bound
            events = [e.description for e in result.get_query_trace(max_wait_sec=30).events]
            assert any("single-partition query" in e for e in events), (bound, events)
            assert not any("range" in e.lower() or "seq scan" in e.lower() for e in events), (bound, events)
