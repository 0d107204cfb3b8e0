"""CQL injection through user and collection names, on this session's own Cassandra (and services over Pulsar).

Names are validated before they reach CQL (keyspaces are derived, injective storage names;
collections are bound parameters).  Hostile names must be refused by every store call and every
service request with a clear error, and nothing in the database may change: the set of
keyspaces, and the owner's data, are read before and after.
"""

from __future__ import annotations

import pytest
from fuzz_inputs import NAME_ATTACKS, count
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.filter_too_much])


def invalid(user: str, collection: str) -> bool:
    from trustgraph_base.store.names import InvalidName, check_collection, check_user

    try:
        check_user(user)
        check_collection(collection)
    except InvalidName:
        return True
    return False


@pytest.fixture(scope="module")
def stores(fault_stack):
    """The three Cassandra stores, opened in this process; the database's state to compare against."""
    from trustgraph_base.store.cassandra.connection import connect
    from trustgraph_base.store.librarian import open_librarian_store
    from trustgraph_base.store.triples import open_triples_store
    from trustgraph_base.store.vectors import open_vector_index

    config = fault_stack.cassandra_config()
    opened = {"triples": open_triples_store("cassandra", config=config),
              "librarian": open_librarian_store("cassandra", config=config),
              "vectors": open_vector_index("cassandra", kind="graph", config=config)}
    session = connect(config)
    opened["keyspaces"] = lambda: {r.keyspace_name for r in session.execute(
        "SELECT keyspace_name FROM system_schema.keyspaces")}
    yield opened
    for name in ("triples", "librarian", "vectors"):
        opened[name].close()


def database_state(stores, fault_stack) -> tuple:
    from trustgraph_base.schema import TriplePattern

    return (stores["keyspaces"](),
            stores["triples"].count(fault_stack.user, fault_stack.collection, TriplePattern()),
            len(stores["librarian"].list_documents(fault_stack.user, fault_stack.collection, "source", 1000)))


@fuzz(120)
@given(user=NAME_ATTACKS | st.just("trustgraph"), collection=NAME_ATTACKS | st.just("default"), data=st.data())
def test_store_calls_with_hostile_names_are_refused_before_cql(stores, fault_stack, user, collection, data):
    from trustgraph_base.schema import DocumentMetadata, Triple, TriplePattern, iri, literal
    from trustgraph_base.store.errors import InvalidQuery

    assume(invalid(user, collection))
    count("cassandra: hostile names, store calls")
    before = database_state(stores, fault_stack)
    t, lib, vec = stores["triples"], stores["librarian"], stores["vectors"]
    calls = [
        lambda: t.insert(user, collection, [Triple(iri("urn:x:s"), iri("urn:x:p"), literal("o"))]),
        lambda: t.query(user, collection, TriplePattern(limit=1)),
        lambda: t.list_traces(user, collection, "", 10, ""),
        lambda: t.delete_collection(user, collection),
        lambda: lib.add_document(user, collection, DocumentMetadata(id="urn:x:d", document_type="answer"), b"x"),
        lambda: lib.get_content(user, collection, "urn:x:d"),
        lambda: lib.list_documents(user, collection, "source", 10),
        lambda: lib.remove_document(user, collection, "urn:x:d"),
        lambda: vec.search(user, collection, "all-MiniLM-L6-v2-onnx-int8", [0.1] * 384, 3),
    ]
    call = data.draw(st.sampled_from(calls))
    with pytest.raises(InvalidQuery):
        call()
    assert database_state(stores, fault_stack) == before


@fuzz(60)
@given(user=NAME_ATTACKS | st.just("trustgraph"), collection=NAME_ATTACKS | st.just("default"),
       service=st.sampled_from(["triples", "trace-list", "trace-admin", "librarian", "graph-rag", "graph-embeddings"]))
def test_service_requests_with_hostile_names_are_refused(stores, fault_stack, user, collection, service):
    import asyncio

    from trustgraph_base.processor import ServiceError
    from trustgraph_base.schema import (
        GraphEmbeddingsRequest,
        GraphRagQuery,
        LibrarianRequest,
        TraceAdminRequest,
        TraceListRequest,
        TriplePattern,
        TriplesQueryRequest,
    )
    from trustgraph_cli.connection import Connection

    assume(invalid(user, collection))
    count("cassandra: hostile names, service requests over Pulsar")
    request = {
        "triples": TriplesQueryRequest(user=user, collection=collection, patterns=[TriplePattern(limit=1)]),
        "trace-list": TraceListRequest(user=user, collection=collection),
        "trace-admin": TraceAdminRequest(operation="prune", user=user, collection=collection, older_than_seconds=1),
        "librarian": LibrarianRequest(operation="list-documents", user=user, collection=collection),
        "graph-rag": GraphRagQuery(query="Who discovered polonium?", user=user, collection=collection),
        "graph-embeddings": GraphEmbeddingsRequest(user=user, collection=collection, vector=[0.1] * 384, limit=3,
                                                   model="all-MiniLM-L6-v2-onnx-int8"),
    }[service]
    before = database_state(stores, fault_stack)

    async def ask():
        async with Connection(fault_stack.pair.pulsar_url, None, (), 60.0, fault_stack.flow) as conn:
            with pytest.raises(ServiceError) as e:
                await conn.request(service, request)
            return e.value

    try:
        error = asyncio.run(ask())
    except UnicodeEncodeError:
        assume(False)  # an unpaired surrogate cannot even be sent
    assert "invalid" in error.message, error
    assert database_state(stores, fault_stack) == before


def test_unusual_valid_names_get_distinct_safe_keyspaces(stores, fault_stack):
    """Names that differ only in case or punctuation never share a keyspace or see each other's data."""
    from trustgraph_base.schema import Triple, TriplePattern, iri, literal
    from trustgraph_base.store.names import storage_name

    count("cassandra: unusual valid names")
    names = ["x.y@z", "X.y@z", "x_y-z"]
    t = stores["triples"]
    for n in names:
        t.insert(n, "c.1", [Triple(iri("urn:x:who"), iri("urn:x:is"), literal(n))])
    keyspaces = stores["keyspaces"]()
    assert {storage_name("tg", n) for n in names} <= keyspaces and len({storage_name("tg", n) for n in names}) == 3
    for n in names:
        assert [x.o.value for x in t.query(n, "c.1", TriplePattern(limit=10))] == [n]
