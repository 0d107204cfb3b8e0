"""The library commands: tg-show-library-documents, tg-show-document-hierarchy (and its older name
tg-show-extraction-provenance), tg-remove-library-document.

A document's hierarchy is read from the librarian (its pages and chunks) and the extraction
provenance (each page's number and unit label, each chunk's Subgraph and the edges it contains);
both commands that show it share :func:`document_tree` and :func:`print_tree`.
"""

from __future__ import annotations

import time

import click

from .common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliError,
    TgCommand,
    check_names,
    connection_options,
    out,
    out_json,
    quiet_logging,
    run_async,
)

#: What the library commands use (the service manifest starts the processors behind them).
LIBRARY_USES = ("librarian",)
HIERARCHY_USES = ("triples", "librarian")


def _check_document_id(document_id: str) -> None:
    from trustgraph_base.rdf.terms import validate_iri

    try:
        validate_iri(document_id)
    except ValueError as e:
        raise CliError(f"invalid document id: {e}", EXIT_USAGE) from None


def kind_name(kind: str) -> str:
    """``Word (DOCX)`` for the DOCX MIME type; an unknown kind as it is."""
    from trustgraph_flow.ingest.decoding import KIND_NAMES

    return KIND_NAMES.get(kind, kind)


def _number(title: str) -> int:
    last = title.split()[-1] if title.split() else ""
    return int(last) if last.isdigit() else 0


async def document_tree(conn, user: str, collection: str, document_id: str, *, show_content: bool = False,
                        max_content: int = 200) -> dict:
    """Document → pages (in page order, with their unit labels) → chunks → extracted edges, as the JSON of
    ``tg-show-document-hierarchy --format json``."""
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.provenance import uris
    from trustgraph_base.rdf.labels import term_label
    from trustgraph_base.rdf.terms import spo
    from trustgraph_base.schema import IRI, TRIPLE, LibrarianRequest, Term, TriplePattern

    from .traces import LabelCache, iris_in_terms, query

    def librarian(operation: str, doc: str):
        return conn.request("librarian", LibrarianRequest(operation=operation, user=user, collection=collection,
                                                          document_id=doc))

    meta = (await librarian("get-document-metadata", document_id)).document_metadata
    pages = (await librarian("list-children", document_id)).document_metadatas
    number, label = {}, {}
    for subject, predicate, obj in map(spo, await query(conn, user, collection, [
            TriplePattern(s=Term(IRI, p.id), p=Term(IRI, pred), g=ns.GRAPH_SOURCE, limit=1)
            for p in pages for pred in (ns.TG_PAGE_NUMBER, ns.RDFS_LABEL)])):
        if predicate.value == ns.TG_PAGE_NUMBER and obj.value.isdigit():
            number[subject.value] = int(obj.value)
        elif predicate.value == ns.RDFS_LABEL:
            label[subject.value] = obj.value
    tree = {"document": document_id, "title": meta.title, "kind": meta.kind, "size": meta.size,
            "loaded_at": _iso(meta.time), "pages": []}
    contains = Term(IRI, ns.TG_CONTAINS)
    all_edges = []
    for page in sorted(pages, key=lambda m: (number.get(m.id, _number(m.title)), m.title)):
        chunks = (await librarian("list-children", page.id)).document_metadatas
        chunks = sorted(chunks, key=lambda m: _number(m.title))
        found = await query(conn, user, collection, [
            TriplePattern(s=Term(IRI, uris.subgraph_uri(c.id)), p=contains, g=ns.GRAPH_SOURCE, limit=100000)
            for c in chunks])
        by_sg: dict[str, list] = {}
        for subject, _, obj in map(spo, found):
            if obj.type == TRIPLE:
                by_sg.setdefault(subject.value, []).append(obj.triple)
        page_node = {"uri": page.id, "title": page.title, "number": number.get(page.id),
                     "label": label.get(page.id, ""), "chunks": []}
        for c in chunks:
            edges = by_sg.get(uris.subgraph_uri(c.id), [])
            all_edges += edges
            node = {"uri": c.id, "label": c.title, "edges": edges}
            if show_content:
                content = (await librarian("get-document-content", c.id)).content.decode("utf-8", "replace")
                node["content"] = content[:max_content]
            page_node["chunks"].append(node)
        tree["pages"].append(page_node)
    labels = await LabelCache(conn, user, collection).resolve(
        iris_in_terms([x for e in all_edges for x in (e.s, e.p, e.o)]))
    for p in tree["pages"]:
        for c in p["chunks"]:
            c["edges"] = [{"s": term_label(e.s, labels), "p": term_label(e.p, labels), "o": term_label(e.o, labels),
                           "uris": [e.s.value, e.p.value, e.o.value]} for e in c["edges"]]
    return tree


def print_tree(tree: dict, show_content: bool) -> None:
    """The tree form: one line per page and chunk, one per extracted edge."""
    out(f"{tree['title']} ({tree['document']}, {tree['kind']})")
    for p in tree["pages"]:
        out(f"└─ {p['title']}  {p['uri']}")
        for c in p["chunks"]:
            out(f"   └─ {c['label']}  {c['uri']}  ({len(c['edges'])} edge(s))")
            if show_content:
                out(f"      \"{' '.join(c['content'].split())}\"")
            for e in c["edges"]:
                out(f"      • ({e['s']}, {e['p']}, {e['o']})")


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds)) if seconds else ""


def _tree_command(name: str, summary: str):
    @click.command(name, cls=TgCommand, help=summary)
    @click.argument("document_id")
    @click.option("--format", "fmt", type=click.Choice(["tree", "json"]), default="tree", show_default=True)
    @click.option("--show-content", is_flag=True, help="show the text of each chunk")
    @click.option("--max-content", type=click.IntRange(10, 100000), default=200, show_default=True)
    @connection_options
    @run_async
    async def command(document_id, fmt, show_content, max_content, user, collection, target):
        check_names(user, collection)
        _check_document_id(document_id)
        quiet_logging()
        async with target.connect(HIERARCHY_USES) as conn:
            tree = await document_tree(conn, user, collection, document_id, show_content=show_content,
                                       max_content=max_content)
        if fmt == "json":
            out_json(tree)
        else:
            print_tree(tree, show_content)

    return command


show_document_hierarchy = _tree_command(
    "tg-show-document-hierarchy",
    "Show a document's hierarchy: document → pages (slides, sheets, sections) → chunks → extracted edges.")
show_extraction_provenance = _tree_command(
    "tg-show-extraction-provenance",
    "Show a document's extraction provenance: document → pages → chunks → extracted edges "
    "(the same as tg-show-document-hierarchy).")


@click.command("tg-show-library-documents", cls=TgCommand)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(1, 100_000), default=1000, show_default=True,
              help="most documents listed (newest first)")
@connection_options
@run_async
async def show_library_documents(fmt, limit, user, collection, target):
    """List the source documents the librarian holds: id, title, kind, size, pages, chunks, loaded at."""
    from trustgraph_base.schema import LibrarianRequest

    check_names(user, collection)
    quiet_logging()
    async with target.connect(LIBRARY_USES) as conn:
        summaries = (await conn.request("librarian", LibrarianRequest(
            operation="list-library", user=user, collection=collection, limit=limit))).summaries
    rows = [{"id": s.metadata.id, "title": s.metadata.title, "kind": s.metadata.kind, "size": s.metadata.size,
             "pages": s.pages, "chunks": s.chunks, "loaded_at": _iso(s.metadata.time)}
            for s in summaries if s.metadata is not None]
    if fmt == "json":
        out_json({"documents": rows})
        return
    if not rows:
        out(f"No documents in collection {collection} of user {user}.")
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from .terminal_text import printable

    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("ID", "Title", "Kind", "Size", "Pages", "Chunks", "Loaded at"):
        table.add_column(col, overflow="fold" if col == "ID" else "ellipsis", no_wrap=col != "Title",
                         justify="right" if col in ("Size", "Pages", "Chunks") else "left")
    for r in rows:  # a cell is data: neither console markup nor control characters
        table.add_row(*(Text(printable(str(v))) for v in (
            r["id"], r["title"], kind_name(r["kind"]), f"{r['size']:,}", r["pages"], r["chunks"], r["loaded_at"])))
    Console(width=200, soft_wrap=False).print(table)


@click.command("tg-remove-library-document", cls=TgCommand)
@click.argument("document_id")
@connection_options
@run_async
async def remove_library_document(document_id, user, collection, target):
    """Remove a source document: its content, pages, chunks, chunk and entity vectors, extraction provenance, and
    every extracted edge no other loaded document supports (those stay, with that document's provenance)."""
    from trustgraph_base.schema import LibrarianRequest
    from trustgraph_base.schema.library import SOURCE

    check_names(user, collection)
    _check_document_id(document_id)
    quiet_logging()
    async with target.connect(LIBRARY_USES) as conn:
        reply = await conn.request("librarian", LibrarianRequest(
            operation="remove-document", user=user, collection=collection, document_id=document_id,
            document_type=SOURCE))
    r = reply.removal
    if r is None:
        raise CliError(f"the librarian removed {document_id} but reported nothing about it", EXIT_FAILED)
    out(f"Removed {document_id}: {r.pages} page(s), {r.chunks} chunk(s), {r.knowledge_triples} extracted edge(s) "
        f"({r.kept_triples} kept: other documents support them), {r.provenance_triples} provenance triple(s), "
        f"{r.chunk_vectors} chunk vector(s), {r.entity_vectors} entity vector(s)")
