"""Documents as people have them, on both deployments: every format loads with its natural page unit, the
library lists what it holds, and removing a document is provenance-exact.

Removal is checked against the user's *whole* stored contents (every table of the SQLite files, every
table of the Cassandra keyspace; ``store_snapshot``): loading a document and removing it again
gives back exactly what was stored before (other collections and documents untouched, nothing
orphaned), while an edge also extracted from another document stays with that document's provenance.
"""

from __future__ import annotations

import uuid

import document_samples as samples
import pytest
from store_snapshot import difference, snapshot

from trustgraph_base.processor import ServiceError
from trustgraph_base.schema import LibrarianRequest
from trustgraph_flow.embedded import INGEST

pytestmark = pytest.mark.timeout(900)

#: Shares one fact (Otto Hahn discovered nuclear fission) with REMOVED, and keeps its own.
KEPT = (b"Otto Hahn discovered nuclear fission in 1938. Otto Hahn worked in Berlin.\n"
        b"Fritz Strassmann worked with Otto Hahn.\n")
#: The shared fact, plus facts only this document holds.
REMOVED = (b"# Meitner\n\nOtto Hahn discovered nuclear fission in 1938. Lise Meitner explained nuclear fission.\n"
           b"Meitnerium is named after Lise Meitner. Lise Meitner was born in Vienna.\n")


async def _load(stack, user, collection, docs):
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.load import load_documents

    async with Connection.attach(stack, timeout=180) as conn:
        await load_documents(conn, user, collection, docs, idle_timeout=180, show=False)
    await stack.wait_idle()


async def _request(stack, **fields):
    from trustgraph_cli.connection import Connection

    async with Connection.attach(stack, timeout=180) as conn:
        return await conn.request("librarian", LibrarianRequest(**fields))


async def _tree(stack, user, collection, doc_id, **options):
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.library import document_tree

    async with Connection.attach(stack, timeout=180) as conn:
        return await document_tree(conn, user, collection, doc_id, **options)


def _edges(tree) -> dict[tuple[str, str, str], str]:
    """(s, p, o) labels → the label of the page it was extracted from."""
    return {(e["s"], e["p"], e["o"]): page["label"] for page in tree["pages"] for c in page["chunks"]
            for e in c["edges"]}


EXPECTED = {
    "pioneers.html": (["Section 1: Computing pioneers", "Section 2: Babbage", "Section 3: Lovelace"],
                      ("Ada Lovelace", "wrote", "first published algorithm"), "Section 3: Lovelace"),
    "biology.docx": (["Section 1: Structural biology", "Section 2: Franklin", "Section 3: Hodgkin"],
                     ("Rosalind Franklin", "photographed", "DNA"), "Section 2: Franklin"),
    "astronomy.pptx": (["Slide 1: Astronomy", "Slide 2: Hubble", "Slide 3: Leavitt"],
                       ("Edwin Hubble", "discovered", "expansion of universe"), "Slide 2: Hubble"),
    "elements.xlsx": (["Sheet: Elements", "Sheet: Discoverers"], ("William Ramsay", "discovered", "neon"),
                      "Sheet: Discoverers"),
    "chemists.epub": (["Chapter 1: Mendeleev", "Chapter 2: Meitner"],
                      ("Dmitri Mendeleev", "published", "periodic table"), "Chapter 1: Mendeleev"),
}


async def test_every_format_loads_with_its_page_units_and_is_listed(deployment):
    user, coll = deployment.user, f"formats-{uuid.uuid4().hex[:6]}"
    docs = {name: (f"https://trustgraph.ai/doc/fmt-{uuid.uuid4().hex[:8]}", make())
            for name, (make, _kind) in samples.ALL.items()}
    docs["LICENSE"] = (f"https://trustgraph.ai/doc/fmt-{uuid.uuid4().hex[:8]}", samples.latin1_text())
    stack = await deployment.start(tuple(dict.fromkeys(INGEST)), llm="extractive")
    try:
        # no kind given: the librarian detects each one from its content
        await _load(stack, user, coll, [(doc_id, name, "", content) for name, (doc_id, content) in docs.items()])
        for name, (labels, edge, page) in EXPECTED.items():
            tree = await _tree(stack, user, coll, docs[name][0])
            assert tree["kind"] == samples.ALL[name][1]
            assert [p["label"] for p in tree["pages"]] == labels, tree
            assert [p["number"] for p in tree["pages"]] == list(range(1, len(labels) + 1))
            assert _edges(tree).get(edge) == page, (name, sorted(_edges(tree)))
        csv_tree = await _tree(stack, user, coll, docs["discoveries.csv"][0], show_content=True)
        assert "Marie Curie | polonium | 1898" in csv_tree["pages"][0]["chunks"][0]["content"]
        license_tree = await _tree(stack, user, coll, docs["LICENSE"][0])
        assert license_tree["kind"] == "text/plain" and license_tree["pages"][0]["label"] == "Page 1"

        listed = (await _request(stack, operation="list-library", user=user, collection=coll)).summaries
        by_id = {s.metadata.id: s for s in listed}
        assert set(by_id) == {doc_id for doc_id, _content in docs.values()}
        for name, (labels, _edge, _page) in EXPECTED.items():
            summary = by_id[docs[name][0]]
            assert (summary.pages, summary.chunks) == (len(labels), len(labels))  # one short chunk per unit
            assert summary.metadata.size == len(docs[name][1]) and summary.metadata.title == name
    finally:
        await stack.stop()


async def test_removal_is_provenance_exact_and_leaves_everything_else_as_it_was(deployment):
    user, coll = deployment.user, f"removal-{uuid.uuid4().hex[:6]}"
    kept_id, removed_id = (f"https://trustgraph.ai/doc/{n}-{uuid.uuid4().hex[:8]}" for n in ("kept", "removed"))
    stack = await deployment.start(tuple(dict.fromkeys(INGEST)), llm="extractive")
    try:
        empty = snapshot(deployment)
        await _load(stack, user, coll, [(kept_id, "Otto Hahn", "text/plain", KEPT)])
        before = snapshot(deployment)

        await _load(stack, user, coll, [(removed_id, "Lise Meitner", "text/markdown", REMOVED)])
        loaded = snapshot(deployment)
        assert difference(before, loaded), "the second document stored something"
        shared = ("Otto Hahn", "discovered", "nuclear fission")
        assert shared in _edges(await _tree(stack, user, coll, removed_id))
        await _load(stack, user, coll, [(removed_id, "Lise Meitner", "text/markdown", REMOVED)])
        assert difference(loaded, snapshot(deployment)) == {}, "re-loading the same content is idempotent"

        reply = await _request(stack, operation="remove-document", user=user, collection=coll,
                               document_id=removed_id, document_type="source")
        await stack.wait_idle()
        report = reply.removal
        assert report.documents == 1 + report.pages + report.chunks and report.pages == 1
        assert report.kept_triples >= 1, "the shared fact (and the labels of its entities) stay"
        assert report.knowledge_triples > 0 and report.provenance_triples > 0
        assert report.chunk_vectors == report.chunks and report.entity_vectors > 0
        assert difference(before, snapshot(deployment)) == {}
        # the shared fact keeps the other document's provenance
        assert shared in _edges(await _tree(stack, user, coll, kept_id))

        with pytest.raises(ServiceError, match="not found"):
            await _request(stack, operation="remove-document", user=user, collection=coll, document_id=removed_id,
                           document_type="source")
        # removing the last document leaves only the collection's registrations (its name, its vector models)
        await _request(stack, operation="remove-document", user=user, collection=coll, document_id=kept_id,
                       document_type="source")
        left = difference(empty, snapshot(deployment))
        registrations = {"triples.collections", "vectors.vector_index", "tg.collections", "tg.vector_index_info",
                         "tgv.vector_index_info"}
        assert set(left) <= registrations, left
        assert all(not only_before for only_before, _only_after in left.values()), left
    finally:
        await stack.stop()


async def test_only_source_documents_are_removed_through_the_source_guard(deployment):
    user, coll = deployment.user, f"guard-{uuid.uuid4().hex[:6]}"
    doc_id = f"https://trustgraph.ai/doc/guard-{uuid.uuid4().hex[:8]}"
    stack = await deployment.start(tuple(dict.fromkeys(INGEST)), llm="extractive")
    try:
        await _load(stack, user, coll, [(doc_id, "Otto Hahn", "text/plain", KEPT)])
        page = (await _request(stack, operation="list-children", user=user, collection=coll,
                               document_id=doc_id)).document_metadatas[0].id
        before = snapshot(deployment)
        with pytest.raises(ServiceError, match="is a page document, not 'source'"):
            await _request(stack, operation="remove-document", user=user, collection=coll, document_id=page,
                           document_type="source")
        assert difference(before, snapshot(deployment)) == {}
    finally:
        await stack.stop()
