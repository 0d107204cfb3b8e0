"""tg-load-document, tg-load-turtle, tg-show-extraction-provenance, tg-quickstart.

Loading a document stores it in the librarian (refused whole if it cannot be decoded), starts
the pipeline, and follows its progress events with progress bars until every chunk is
extracted, stored and embedded.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import click

from .common import CliError, EXIT_FAILED, EXIT_USAGE, check_names, connection_options, out, quiet_logging, run_async

INGEST_NEEDS = ("triples-write", "triples-query", "librarian", "decoder", "chunker", "kg-extract",
                "graph-embeddings-write", "document-embeddings-write", "embeddings", "prompt", "text-completion")
CHUNK_STAGES = ("extracted", "stored", "graph-embedded", "doc-embedded")


@dataclass
class DocumentProgress:
    """What the pipeline has reported for one document."""

    pages: int | None = None
    chunk_totals: dict[str, int] = field(default_factory=dict)
    done: dict[str, set] = field(default_factory=lambda: {s: set() for s in CHUNK_STAGES})
    error: str = ""

    @property
    def chunks(self) -> int | None:
        if self.pages is None or len(self.chunk_totals) < self.pages:
            return None
        return sum(self.chunk_totals.values())

    def update(self, ev) -> None:
        if ev.error:
            self.error = ev.error
        elif ev.stage == "decoded":
            self.pages = ev.total
        elif ev.stage == "chunked":
            self.chunk_totals[ev.item_id] = ev.total
        elif ev.stage in self.done:
            self.done[ev.stage].add(ev.item_id)

    @property
    def complete(self) -> bool:
        n = self.chunks
        if n is None:
            return False
        extracted = self.done["extracted"]
        return (len(extracted) >= n and extracted <= self.done["stored"]
                and all(len(self.done[s]) >= n for s in ("graph-embedded", "doc-embedded")))


class ProgressFeed:
    """An exclusive subscription to ``notify:tg:ingest-progress`` (opened before processing starts)."""

    def __init__(self, backend):
        self.backend = backend
        self.consumer = None

    async def __aenter__(self):
        from trustgraph_flow.common.services import progress_queue

        self.consumer = await self.backend.subscribe(progress_queue(), f"cli-progress-{uuid.uuid4().hex[:12]}",
                                                     shared=False)
        return self

    async def next(self, timeout: float):
        from trustgraph_base.codec import decode
        from trustgraph_base.schema import IngestProgress

        msg = await self.consumer.receive(timeout=timeout)
        await self.consumer.ack(msg)
        return decode(IngestProgress, msg.data)

    async def __aexit__(self, *exc):
        if self.consumer is not None:
            await self.consumer.close()


async def follow_progress(feed: ProgressFeed, user: str, collection: str, documents: dict[str, str],
                          idle_timeout: float, show: bool = True) -> None:
    """Wait (with rich progress bars on stderr) until every document in ``documents`` (id → name) is done."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from trustgraph_base.pubsub import ReceiveTimeout

    state = {d: DocumentProgress() for d in documents}
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=not show, transient=False) as bars:
        # names are data, not console markup: a title like "[/]" must not break (or style) the bars
        tasks = {d: bars.add_task(f"{escape(name[:40])}: decoding", total=None) for d, name in documents.items()}
        while not all(s.complete for s in state.values()):
            try:
                ev = await feed.next(idle_timeout)
            except ReceiveTimeout:
                pending = [documents[d] for d, s in state.items() if not s.complete]
                raise CliError(f"no progress for {idle_timeout:g} s while loading {', '.join(pending)}; "
                               f"are the pipeline services running?", 3) from None
            if ev.user != user or ev.collection != collection or ev.document_id not in state:
                continue
            s = state[ev.document_id]
            s.update(ev)
            if s.error:
                raise CliError(f"{documents[ev.document_id]}: {s.error}", EXIT_FAILED)
            n = s.chunks
            finished = min((len(s.done[st]) for st in CHUNK_STAGES), default=0)
            label = "extracting" if n is None or finished < n else "done"
            bars.update(tasks[ev.document_id], total=n, completed=finished,
                        description=f"{escape(documents[ev.document_id][:40])}: {label}")


def document_id_for(content: bytes) -> str:
    """The default id of a document: derived from its content, so loading it twice is idempotent."""
    return f"https://trustgraph.ai/doc/{hashlib.sha256(content).hexdigest()[:24]}"


async def load_documents(conn, user: str, collection: str, docs: list[tuple[str, str, str, bytes]],
                         idle_timeout: float, show: bool = True) -> None:
    """Store and process documents ``(id, title, kind, content)``, following progress until done."""
    from trustgraph_base.schema import DocumentMetadata, LibrarianRequest

    async with ProgressFeed(conn.backend) as feed:
        for doc_id, title, kind, content in docs:
            await conn.request("librarian", LibrarianRequest(
                operation="add-document", user=user, collection=collection, document_id=doc_id, content=content,
                document_metadata=DocumentMetadata(id=doc_id, time=time.time(), kind=kind, title=title)))
            await conn.request("librarian", LibrarianRequest(operation="process-document", user=user,
                                                             collection=collection, document_id=doc_id))
        await follow_progress(feed, user, collection, {d[0]: d[1] for d in docs}, idle_timeout, show)


@click.command("tg-load-document")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--title", default=None, help="title (default: the file name); one file only")
@click.option("--kind", default=None, help="MIME type (default: detected): text/plain, text/markdown, application/pdf")
@click.option("--id", "doc_id", default=None, help="document IRI (default: derived from the content); one file only")
@connection_options
@run_async
async def load_document(files, title, kind, doc_id, user, collection, target):
    """Load text, Markdown or PDF documents: store, decode, chunk, extract (with provenance) and embed."""
    from trustgraph_base.provenance.triples import validate_iri
    from trustgraph_flow.ingest.decoding import detect_kind, normalize_kind

    check_names(user, collection)
    if len(files) > 1 and (title or doc_id):
        raise CliError("--title and --id apply to a single file", EXIT_USAGE)
    docs = []
    for f in files:
        content = f.read_bytes()
        if not content:
            raise CliError(f"{f} is empty (0 bytes)", EXIT_USAGE)
        try:
            k = normalize_kind(kind) if kind else detect_kind(f.name, content)
        except ValueError as e:
            raise CliError(f"{f}: {e}", EXIT_USAGE) from None
        did = doc_id or document_id_for(content)
        try:
            validate_iri(did)
        except ValueError as e:
            raise CliError(f"invalid document id: {e}", EXIT_USAGE) from None
        docs.append((did, title or f.name, k, content))
    quiet_logging()
    async with target.connect(INGEST_NEEDS) as conn:
        await load_documents(conn, user, collection, docs, target.timeout)
    for did, name, _k, _c in docs:
        out(f"Loaded {name} as {did}")


@click.command("tg-load-turtle")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["turtle", "trig", "ntriples", "nquads"]), default=None,
              help="default: from the file extension")
@click.option("--batch-size", type=click.IntRange(1, 100000), default=1000, show_default=True)
@connection_options
@run_async
async def load_turtle(file, fmt, batch_size, user, collection, target):
    """Load an existing RDF graph into a collection; labelled entities are embedded for GraphRAG."""
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.pubsub.topics import flow_queue
    from trustgraph_base.rdf.export import parse
    from trustgraph_base.codec import encode
    from trustgraph_base.schema import IRI, LITERAL, EntityContext, EntityContexts, Metadata, Triples, iri

    check_names(user, collection)
    fmt = fmt or {".ttl": "turtle", ".trig": "trig", ".nt": "ntriples", ".nq": "nquads"}.get(file.suffix.lower(),
                                                                                              "turtle")
    try:
        triples = parse(file.read_bytes(), fmt)
    except ValueError as e:
        raise CliError(f"{file}: {e}", EXIT_USAGE) from None
    if not triples:
        raise CliError(f"{file} holds no triples", EXIT_USAGE)
    root = f"urn:load:{hashlib.sha256(file.read_bytes()).hexdigest()[:16]}"
    labels = {t.s.value: t.o.value for t in triples if t.p.value == ns.RDFS_LABEL and t.s.type == IRI
              and t.o.type == LITERAL and not t.g}
    quiet_logging()
    async with target.connect(("triples-write", "triples-query", "graph-embeddings-write",
                                             "embeddings")) as conn:
        from rich.progress import Progress

        batches = [triples[i:i + batch_size] for i in range(0, len(triples), batch_size)]
        ents = list(labels.items())
        ent_batches = [ents[i:i + 64] for i in range(0, len(ents), 64)]
        async with ProgressFeed(conn.backend) as feed:
            store = await conn.backend.create_producer(flow_queue("triples-store", conn.flow))
            entq = await conn.backend.create_producer(flow_queue("entity-contexts", conn.flow))
            for i, b in enumerate(batches):
                await store.send(encode(Triples(metadata=Metadata(id=f"{root}#{i}", root=root, user=user,
                                                                  collection=collection), triples=b)))
            for i, b in enumerate(ent_batches):
                await entq.send(encode(EntityContexts(
                    metadata=Metadata(id=f"{root}#e{i}", root=root, user=user, collection=collection),
                    chunk_id=f"{root}#e{i}",
                    entities=[EntityContext(entity=iri(e), label=l, context=l) for e, l in b])))
            await store.close()
            await entq.close()
            want = {"stored": {f"{root}#{i}" for i in range(len(batches))},
                    "graph-embedded": {f"{root}#e{i}" for i in range(len(ent_batches))}}
            got = {k: set() for k in want}
            with Progress(console=_stderr_console()) as bars:
                task = bars.add_task(f"{file.name}", total=len(batches) + len(ent_batches))
                while any(not want[k] <= got[k] for k in want):
                    ev = await _next_or_fail(feed, target.timeout, file.name)
                    if ev.document_id == root and ev.stage in got:
                        got[ev.stage].add(ev.item_id)
                        bars.update(task, completed=sum(len(v) for v in got.values()))
    out(f"Loaded {len(triples)} triple(s) and embedded {len(labels)} labelled entit(ies) from {file} "
        f"into {user}/{collection}")


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


async def _next_or_fail(feed: ProgressFeed, timeout: float, name: str):
    from trustgraph_base.pubsub import ReceiveTimeout

    try:
        return await feed.next(timeout)
    except ReceiveTimeout:
        raise CliError(f"no progress for {timeout:g} s while loading {name}; are the services running?", 3) from None


@click.command("tg-show-extraction-provenance")
@click.argument("document_id")
@click.option("--format", "fmt", type=click.Choice(["tree", "json"]), default="tree", show_default=True)
@click.option("--show-content", is_flag=True, help="show the text of each chunk")
@click.option("--max-content", type=click.IntRange(10, 100000), default=200, show_default=True)
@connection_options
@run_async
async def show_extraction_provenance(document_id, fmt, show_content, max_content, user, collection, target):
    """Show a document's extraction provenance: document → pages → chunks → extracted edges."""
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.provenance import uris
    from trustgraph_base.rdf.terms import validate_iri
    from trustgraph_base.schema import IRI, TRIPLE, LibrarianRequest, Term, TriplePattern
    from trustgraph_flow.retrieval.graph_rag.labels import term_label

    from .traces import LabelCache, iris_in_terms, query

    check_names(user, collection)
    try:
        validate_iri(document_id)
    except ValueError as e:
        raise CliError(f"invalid document id: {e}", EXIT_USAGE) from None
    quiet_logging()
    async with target.connect(("triples-query", "triples-write", "librarian")) as conn:
        meta = (await conn.request("librarian", LibrarianRequest(operation="get-document-metadata", user=user,
                                                                 collection=collection,
                                                                 document_id=document_id))).document_metadata
        pages = (await conn.request("librarian", LibrarianRequest(operation="list-children", user=user,
                                                                  collection=collection,
                                                                  document_id=document_id))).document_metadatas
        tree = {"document": document_id, "title": meta.title, "kind": meta.kind, "pages": []}
        contains = Term(IRI, ns.TG_CONTAINS)
        all_edges = []
        for page in sorted(pages, key=lambda m: m.title):
            chunks = (await conn.request("librarian", LibrarianRequest(
                operation="list-children", user=user, collection=collection,
                document_id=page.id))).document_metadatas
            chunks = sorted(chunks, key=lambda m: int(m.title.split()[-1]) if m.title.split()[-1].isdigit() else 0)
            found = await query(conn, user, collection, [
                TriplePattern(s=Term(IRI, uris.subgraph_uri(c.id)), p=contains, g=ns.GRAPH_SOURCE, limit=100000)
                for c in chunks])
            by_sg: dict[str, list] = {}
            for t in found:
                if t.o.type == TRIPLE:
                    by_sg.setdefault(t.s.value, []).append(t.o.triple)
            page_node = {"uri": page.id, "title": page.title, "chunks": []}
            for c in chunks:
                edges = by_sg.get(uris.subgraph_uri(c.id), [])
                all_edges += edges
                node = {"uri": c.id, "label": c.title, "edges": edges}
                if show_content:
                    content = (await conn.request("librarian", LibrarianRequest(
                        operation="get-document-content", user=user, collection=collection,
                        document_id=c.id))).content.decode("utf-8", "replace")
                    node["content"] = content[:max_content]
                page_node["chunks"].append(node)
            tree["pages"].append(page_node)
        labels = await LabelCache(conn, user, collection).resolve(
            iris_in_terms([x for e in all_edges for x in (e.s, e.p, e.o)]))
    for p in tree["pages"]:
        for c in p["chunks"]:
            c["edges"] = [{"s": term_label(e.s, labels), "p": term_label(e.p, labels), "o": term_label(e.o, labels),
                           "uris": [e.s.value, e.p.value, e.o.value]} for e in c["edges"]]
    if fmt == "json":
        out(json.dumps(tree, ensure_ascii=False, indent=2))
        return
    out(f"{tree['title']} ({tree['document']}, {tree['kind']})")
    for p in tree["pages"]:
        out(f"└─ {p['title']}  {p['uri']}")
        for c in p["chunks"]:
            out(f"   └─ {c['label']}  {c['uri']}  ({len(c['edges'])} edge(s))")
            if show_content:
                out(f"      \"{' '.join(c['content'].split())}\"")
            for e in c["edges"]:
                out(f"      • ({e['s']}, {e['p']}, {e['o']})")


@click.command("tg-quickstart")
@click.option("-q", "--query", "question", default=None, help="question (default: the sample question)")
@click.option("--reload", is_flag=True, help="load the sample corpus again even if it is loaded")
@connection_options
@run_async
async def quickstart(question, reload, user, collection, target):
    """Load the bundled sample corpus (once) and answer a question with --explainable output."""
    from trustgraph_base.schema import GraphRagQuery, LibrarianRequest
    from trustgraph_flow.ingest.sample_corpus import QUICKSTART_QUESTION, sample_documents

    from .invoke import ExplainPrinter, QUERY_NEEDS, _stream_rag

    check_names(user, collection)
    quiet_logging()
    async with target.connect(tuple(dict.fromkeys(INGEST_NEEDS + QUERY_NEEDS + ("graph-rag",)))) as conn:
        loaded = {m.id for m in (await conn.request("librarian", LibrarianRequest(
            operation="list-documents", user=user, collection=collection))).document_metadatas}
        docs = [d for d in sample_documents() if reload or d.id not in loaded]
        if docs:
            click.echo(f"Loading the sample corpus ({len(docs)} documents) into {user}/{collection} ...", err=True)
            await load_documents(conn, user, collection, [(d.id, d.title, d.kind, d.content) for d in docs],
                                 target.timeout)
            await conn.settle()
        printer = ExplainPrinter(conn, user, collection)
        await _stream_rag(conn, "graph-rag", GraphRagQuery(query=question or QUICKSTART_QUESTION, user=user,
                                                           collection=collection, streaming=True),
                          printer, explainable=True)
