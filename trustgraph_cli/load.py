"""tg-load-document, tg-load-turtle, tg-quickstart.

Loading a document stores it in the librarian (refused whole if it cannot be decoded), starts
the pipeline, and follows its progress events with progress bars until every chunk is
extracted, stored and embedded.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, cast

import click

from .common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliError,
    TgCommand,
    check_names,
    connection_options,
    err_line,
    error_line,
    exit_code_for,
    llm_options,
    out,
    quiet_logging,
    run_async,
)
from .terminal_text import clip, is_utf8, printable, quoted

#: What loading documents uses: the librarian, and the ingestion flow its process-document starts.
INGEST_USES = ("librarian", "document-load")
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

    def stages(self) -> str:
        """How far each stage got: ``pages 40/300 chunked · extracted 95/120 · stored 90 · embedded 80``."""
        if self.pages is None:
            return "decoding"
        total = f"/{self.chunks}" if self.chunks is not None else ""
        embedded = min(len(self.done["graph-embedded"]), len(self.done["doc-embedded"]))
        return (f"pages {len(self.chunk_totals)}/{self.pages} chunked · extracted {len(self.done['extracted'])}"
                f"{total} · stored {len(self.done['stored'])} · embedded {embedded}")

    def finished_stages(self) -> list[tuple[str, str]]:
        """The stages this document has finished, in pipeline order, each with what it did
        (``("chunked", "300 pages into 312 chunks")``)."""
        if self.pages is None:
            return []
        done = [("decoded", f"{self.pages} page(s)")]
        n = self.chunks
        if n is None:
            return done
        done.append(("chunked", f"{self.pages} page(s) into {n} chunk(s)"))
        extracted = self.done["extracted"]
        if len(extracted) >= n:
            done.append(("extracted", f"{n}/{n} chunks"))
            if extracted <= self.done["stored"]:
                done.append(("stored", f"{n}/{n} chunks"))
        if all(len(self.done[s]) >= n for s in ("graph-embedded", "doc-embedded")):
            done.append(("embedded", f"{n}/{n} chunks"))
        return done

    @property
    def complete(self) -> bool:
        n = self.chunks
        if n is None:
            return False
        extracted = self.done["extracted"]
        return (len(extracted) >= n and extracted <= self.done["stored"]
                and all(len(self.done[s]) >= n for s in ("graph-embedded", "doc-embedded")))


class ProgressFeed:
    """An exclusive subscription to ``notify:tg:ingest-progress``, opened before processing starts and
    read from then on, while the command is still sending its requests.

    On Pulsar the topic is non-persistent: the broker drops what a subscription has no room for
    (the client holds at most 1,000 messages it was not asked for yet), so a load of many
    documents that read nothing until its last request was sent lost every event past the first
    thousand and waited for them.  Events are therefore taken off the subscription as they arrive
    and kept here; only those of ``user`` / ``collection`` (the topic carries everyone's), and an
    undecodable one is skipped.  A feed that is gone for good (the gateway carrying it went away)
    is raised by :meth:`next`.
    """

    def __init__(self, backend, user: str | None = None, collection: str | None = None):
        self.backend = backend
        self.user = user
        self.collection = collection
        self.consumer = None
        self._events: asyncio.Queue = asyncio.Queue()
        self._reader: asyncio.Task | None = None

    async def __aenter__(self):
        from trustgraph_flow.common.services import progress_queue

        self.consumer = await self.backend.subscribe(progress_queue(), f"cli-progress-{uuid.uuid4().hex[:12]}",
                                                     shared=False)
        self._reader = asyncio.create_task(self._read(), name="progress-feed")
        return self

    async def _read(self) -> None:
        from trustgraph_base.codec import CodecError, decode
        from trustgraph_base.pubsub import BackendError, BackendUnavailable
        from trustgraph_base.schema import IngestProgress

        consumer = self.consumer
        if consumer is None:
            raise RuntimeError("the progress feed is not open")
        while True:
            try:
                msg = await consumer.receive()
            except BackendUnavailable as e:
                self._events.put_nowait(e)
                return
            except BackendError:  # a broker's client reconnects by itself
                await asyncio.sleep(0.5)
                continue
            await consumer.ack(msg)
            try:
                ev = decode(IngestProgress, msg.data)
            except CodecError:
                continue
            if (self.user is None or ev.user == self.user) and (self.collection is None
                                                                 or ev.collection == self.collection):
                self._events.put_nowait(ev)

    async def next(self, timeout: float):
        """The next event; :class:`~trustgraph_base.pubsub.ReceiveTimeout` after ``timeout`` seconds without one."""
        from trustgraph_base.pubsub import ReceiveTimeout

        try:
            async with asyncio.timeout(timeout):
                ev = await self._events.get()
        except TimeoutError:
            raise ReceiveTimeout(f"no progress event within {timeout:g} s") from None
        if isinstance(ev, BaseException):
            self._events.put_nowait(ev)  # and for every later call
            raise ev
        return ev

    async def __aexit__(self, *exc):
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        if self.consumer is not None:
            await self.consumer.close()


#: Seconds without an event about a pending document after which the stores are asked how far the
#: documents got (at most a quarter of the idle time-out).
QUIET_SECONDS = 5.0


def stored_status(conn, user: str, collection: str):
    """``status(document_ids)`` for :func:`follow_progress`: the librarian's ``ingest-status`` (id → status)."""

    async def status(document_ids: list[str]) -> dict:
        from trustgraph_base.schema import IngestStatus, LibrarianRequest
        from trustgraph_flow.librarian.status import MAX_STATUS_DOCUMENTS

        found: dict[str, IngestStatus] = {}
        for i in range(0, len(document_ids), MAX_STATUS_DOCUMENTS):
            resp = await conn.request("librarian", LibrarianRequest(
                operation="ingest-status", user=user, collection=collection,
                document_ids=document_ids[i:i + MAX_STATUS_DOCUMENTS]))
            found.update((st.document_id, st) for st in resp.statuses)
        return found

    return status


async def follow_progress(feed: ProgressFeed, user: str, collection: str, documents: dict[str, str],
                          idle_timeout: float, show: bool = True, status=None) -> dict[str, str]:
    """Wait (with rich progress bars on stderr) until every document in ``documents`` (id → name) is done
    or failed; returns the failed ones (id → the pipeline's error).  Where stderr is not a terminal (a log,
    a pipe), the bars show only at the end, so a line is printed per stage as each document finishes it
    (``report.pdf: chunked 300 page(s) into 312 chunk(s)``).

    Progress events are best-effort (a non-persistent topic on Pulsar), so completion does not rest
    on seeing every one: after :data:`QUIET_SECONDS` without an event about a pending document,
    ``status(document_ids)`` (:func:`stored_status`) is asked how far they got in the stores, and
    again every :data:`QUIET_SECONDS` while it stays quiet; a document the stores show complete in
    two answers in a row, unchanged, is done.  The wait fails (exit 3) after ``idle_timeout``
    seconds in which neither an event about one of these documents arrived nor their stored state
    changed; events about other documents do not count.
    """
    import dataclasses

    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from trustgraph_base.processor import ServiceError
    from trustgraph_base.pubsub import BackendError, ReceiveTimeout

    state = {d: DocumentProgress() for d in documents}
    announced: dict[str, set[str]] = {d: set() for d in documents}
    failed: dict[str, str] = {}
    confirmed: set[str] = set()
    stored: dict[str, tuple] = {}  # document id -> its last status, as a tuple
    console = Console(stderr=True)
    loop = asyncio.get_running_loop()
    quiet = min(QUIET_SECONDS, idle_timeout / 4)
    last_news = last_event = loop.time()

    def bar_name(doc_id: str) -> str:
        # names are data: neither console markup (a title like "[/]") nor control characters
        return escape(printable(clip(documents[doc_id], 40)))

    def announce(doc_id: str, finished: list[tuple[str, str]]) -> None:
        """A line per stage a document finished, where no live bar shows them (stderr is not a terminal)."""
        if not show or console.is_terminal:
            return
        for stage, what in finished:
            if stage not in announced[doc_id]:
                announced[doc_id].add(stage)
                console.print(f"{bar_name(doc_id)}: {stage} {what}", highlight=False, soft_wrap=True)

    def pending() -> list[str]:
        return [d for d, s in state.items() if not s.complete and d not in failed and d not in confirmed]

    async def confirm_from_stores() -> bool:
        """Ask the stores about the pending documents; whether their stored state changed."""
        try:
            found = await status(pending())
        except (ServiceError, BackendError, TimeoutError):  # a librarian without ingest-status, or busy
            return False
        changed = False
        for doc_id, st in found.items():
            if doc_id not in state:
                continue
            now = dataclasses.astuple(st)
            if st.complete and stored.get(doc_id) == now:
                confirmed.add(doc_id)
                announce(doc_id, stored_stages(st))
                bars.update(tasks[doc_id], total=st.chunks, completed=st.chunks,
                            description=f"{bar_name(doc_id)}: done")
            changed |= stored.get(doc_id) != now
            stored[doc_id] = now
        return changed

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=not show, transient=False) as bars:
        tasks = {d: bars.add_task(f"{bar_name(d)}: decoding", total=None) for d in documents}
        while pending():
            now = loop.time()
            if now - last_news >= idle_timeout:
                names = [documents[d] for d in pending()]
                raise CliError(f"no progress for {idle_timeout:g} s while loading {', '.join(names)}; "
                               f"are the pipeline services running?", 3)
            if status is not None and now - last_event >= quiet:
                if await confirm_from_stores():
                    last_news = loop.time()
                last_event = loop.time()  # the next look comes after another quiet spell
                continue
            wait = min(last_news + idle_timeout, last_event + quiet if status is not None else float("inf")) - now
            try:
                ev = await feed.next(max(wait, 0.0))
            except ReceiveTimeout:
                continue
            if ev.user != user or ev.collection != collection or ev.document_id not in state:
                continue
            last_news = last_event = loop.time()
            s = state[ev.document_id]
            s.update(ev)
            if s.error:
                failed[ev.document_id] = s.error
                bars.update(tasks[ev.document_id], description=f"{bar_name(ev.document_id)}: failed")
                continue
            if ev.document_id in confirmed:
                continue
            announce(ev.document_id, s.finished_stages())
            n = s.chunks
            finished = min((len(s.done[st]) for st in CHUNK_STAGES), default=0)
            label = s.stages() if n is None or finished < n else "done"
            bars.update(tasks[ev.document_id], total=n, completed=finished,
                        description=f"{bar_name(ev.document_id)}: {label}")
    return failed


def stored_stages(st) -> list[tuple[str, str]]:
    """:meth:`DocumentProgress.finished_stages` of a document the stores show complete (its ``IngestStatus``)."""
    n = st.chunks
    return [("decoded", f"{st.pages} page(s)"), ("chunked", f"{st.pages} page(s) into {n} chunk(s)"),
            ("extracted", f"{n}/{n} chunks"), ("stored", f"{n}/{n} chunks"), ("embedded", f"{n}/{n} chunks")]


def document_id_for(content: bytes) -> str:
    """The default id of a document: derived from its content, so loading it twice is idempotent."""
    return f"https://trustgraph.ai/doc/{hashlib.sha256(content).hexdigest()[:24]}"


async def load_documents(conn, user: str, collection: str, docs: list[tuple[str, str, str, bytes]],
                         idle_timeout: float, show: bool = True) -> None:
    """Store and process documents ``(id, title, kind, content)``, following progress until done."""
    from trustgraph_base.schema import DocumentMetadata, LibrarianRequest

    async with ProgressFeed(conn.backend, user, collection) as feed:
        for doc_id, title, kind, content in docs:
            await conn.request("librarian", LibrarianRequest(
                operation="add-document", user=user, collection=collection, document_id=doc_id, content=content,
                document_metadata=DocumentMetadata(id=doc_id, time=time.time(), kind=kind, title=title)))
            await conn.request("librarian", LibrarianRequest(operation="process-document", user=user,
                                                             collection=collection, document_id=doc_id))
        failed = await follow_progress(feed, user, collection, {d[0]: d[1] for d in docs}, idle_timeout, show,
                                       status=stored_status(conn, user, collection))
    if failed:
        doc_id, error = next(iter(failed.items()))
        raise CliError(f"{dict((d[0], d[1]) for d in docs)[doc_id]}: {error}", EXIT_FAILED)


@dataclass
class SourceFile:
    """A file to load, read and checked: its document id, title, kind and the bytes to store."""

    path: Path
    doc_id: str
    title: str
    kind: str
    content: bytes

    @property
    def shown(self) -> str:
        return shown_path(self.path)


def shown_path(path: Path) -> str:
    """A path as messages show it: cut (keeping its end) to a readable length."""
    return clip(str(path), 120, tail=True)


def read_limited(path: Path, limit: int) -> bytes:
    """The bytes of ``path``, refused (exit 2) when more than ``limit`` without reading them all.

    A regular file is judged by its size before anything is read; anything else (a pipe,
    ``/dev/zero``) by reading at most ``limit + 1`` bytes.
    """
    shown = shown_path(path)
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if stat.S_ISREG(st.st_mode) and st.st_size > limit:
                raise CliError(f"{shown} is {st.st_size:,} bytes; documents can be at most {limit:,} bytes "
                               f"({limit / 2 ** 20:g} MiB)", EXIT_USAGE)
            content = fh.read(limit + 1)
    except OSError as e:
        raise CliError(f"cannot read {shown}: {e.strerror or e}", EXIT_USAGE) from None
    if len(content) > limit:
        raise CliError(f"{shown} holds more than {limit:,} bytes; documents can be at most {limit:,} bytes "
                       f"({limit / 2 ** 20:g} MiB)", EXIT_USAGE)
    return content


def read_source(path: Path, *, user: str, collection: str, title: str | None, kind: str | None,
                encoding: str | None, doc_id: str | None, several: bool, max_message_bytes: int | None,
                carrier: str = "Pulsar") -> SourceFile:
    """Read and check one file to load, before anything is stored; a refusal is a :class:`CliError`.

    :param kind: the normalised ``--kind`` (``None``: detected per file).
    :param encoding: ``--encoding`` of text and Markdown files (``None``: UTF-8).
    :param several: more files are loaded (``--title`` is then not available to fix a file name).
    :param max_message_bytes: the transport's message limit (``None``: the in-process bus has none).
    :param carrier: what carries the messages (``Pulsar``, ``the gateway``), for the size error.
    """
    from trustgraph_base.codec import encode
    from trustgraph_base.rdf.terms import validate_iri
    from trustgraph_flow.ingest.decoding import (
        DEFAULT_MAX,
        TEXT_KINDS,
        DecodeError,
        EmptyDocument,
        InvalidEncoding,
        decode_document,
    )
    from trustgraph_flow.ingest.detection import detect

    shown = shown_path(path)
    if title is None:
        title = path.name
        if not is_utf8(title):
            raise CliError(f"{shown}: the file name is not valid UTF-8, so it cannot be the document's title; "
                           f"give one with --title" + (" (loading this file on its own)" if several else ""),
                           EXIT_USAGE)
    content = read_limited(path, DEFAULT_MAX)
    if not content:
        raise CliError(f"{shown} is empty (0 bytes)", EXIT_USAGE)
    try:
        detected = detect(shown, content) if kind is None else None
    except ValueError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    k = kind or (detected.kind if detected is not None else "")
    if k in TEXT_KINDS:  # text is checked here; the librarian checks the other kinds as it stores them
        encoding = encoding or (detected.encoding if detected is not None else None)
        try:
            decode_document(content, k, shown, DEFAULT_MAX, encoding=encoding)
        except InvalidEncoding as e:
            hint = "" if encoding else "; if it uses another encoding, name it: --encoding latin-1, for example"
            raise CliError(f"{e}{hint}", EXIT_USAGE) from None
        except EmptyDocument as e:
            raise CliError(str(e), EXIT_USAGE) from None
        except DecodeError as e:
            raise CliError(str(e), EXIT_FAILED) from None
        if encoding and encoding.replace("_", "-").lower() not in ("utf-8", "utf8", "utf-8-sig", "ascii"):
            # the librarian stores text as UTF-8
            content = content.decode(encoding).removeprefix("\ufeff").encode("utf-8")
    did = doc_id or document_id_for(content)
    try:
        validate_iri(did)
    except ValueError as e:
        raise CliError(f"invalid document id: {e}", EXIT_USAGE) from None
    source = SourceFile(path, did, title, k, content)
    if max_message_bytes is not None:
        size = len(encode(_add_request(user, collection, source)))
        if size > max_message_bytes:
            raise CliError(f"{shown} is {len(content):,} bytes, too large to send over {carrier}: its request would be "
                           f"{size:,} bytes and a message can be at most {max_message_bytes:,} (documents up to "
                           f"about {max_message_bytes * 3 // 4 / 2 ** 20:.1f} MiB fit)", EXIT_USAGE)
    return source


def _add_request(user: str, collection: str, doc: SourceFile):
    from trustgraph_base.schema import DocumentMetadata, LibrarianRequest

    return LibrarianRequest(operation="add-document", user=user, collection=collection, document_id=doc.doc_id,
                            content=doc.content, document_metadata=DocumentMetadata(
                                id=doc.doc_id, time=time.time(), kind=doc.kind, title=doc.title))


def _report_failures(failures: list[tuple[int, CliError]]) -> None:
    """Print every failure (``(position of its file, error)``) on its own ``Error:`` line, in the order the
    files were given: all but the last here, the last by raising it, with the exit code of all of them (their
    common code, or 1 when they differ)."""
    if not failures:
        return
    ordered = [f for _position, f in sorted(failures, key=lambda pf: pf[0])]
    for f in ordered[:-1]:
        error_line(f.message)
    codes = {f.exit_code for f in ordered}
    raise CliError(ordered[-1].message, codes.pop() if len(codes) == 1 else EXIT_FAILED)


@click.command("tg-load-document", cls=TgCommand)
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--title", default=None, help="title (default: the file name); one file only")
@click.option("--kind", default=None, help="override the type detected from the content: a MIME type or one of "
                                           "text, markdown, pdf, html, csv, tsv, docx, pptx, xlsx, epub")
@click.option("--encoding", default=None, help="text encoding of text files (default: UTF-8, else detected)")
@click.option("--id", "doc_id", default=None, help="document IRI (default: derived from the content); one file only")
@llm_options
@connection_options
@run_async
async def load_document(files, title, kind, encoding, doc_id, user, collection, target):
    """Load documents (text, Markdown, PDF, HTML, DOCX, PPTX, XLSX, CSV/TSV, EPUB; the type is detected from the
    content): store, decode, chunk, extract (with provenance) and embed.

    Every file is read and checked first; a file that is refused fails alone (its own ``Error:``
    line) and the others load completely; the exit code is then non-zero.
    """
    from trustgraph_base.processor import ServiceError
    from trustgraph_base.schema import LibrarianRequest
    from trustgraph_flow.ingest.decoding import normalize_kind

    check_names(user, collection)
    if len(files) > 1 and (title or doc_id):
        raise CliError("--title and --id apply to a single file", EXIT_USAGE)
    try:
        kind = normalize_kind(kind) if kind else None
        if encoding:
            b"".decode(encoding)
    except (ValueError, LookupError) as e:
        raise CliError(str(e), EXIT_USAGE) from None
    failures: list[tuple[int, CliError]] = []
    docs: dict[str, tuple[int, SourceFile]] = {}
    for position, f in enumerate(dict.fromkeys(files)):  # a file named twice is loaded (or refused) once
        try:
            doc = read_source(f, user=user, collection=collection, title=title, kind=kind, encoding=encoding,
                              doc_id=doc_id, several=len(files) > 1,
                              max_message_bytes=target.max_message_bytes, carrier=target.carrier)
        except CliError as e:
            failures.append((position, e))
            continue
        docs.setdefault(doc.doc_id, (position, doc))
    loaded: list[tuple[SourceFile, str]] = []
    if docs:
        quiet_logging()
        async with target.connect(INGEST_USES) as conn:
            async with ProgressFeed(conn.backend, user, collection) as feed:
                stored: dict[str, tuple[int, SourceFile, str]] = {}
                for position, doc in docs.values():
                    try:
                        meta = (await conn.request("librarian", _add_request(user, collection, doc))).document_metadata
                        await conn.request("librarian", LibrarianRequest(
                            operation="process-document", user=user, collection=collection, document_id=doc.doc_id))
                    except ServiceError as e:
                        failures.append((position, CliError(
                            str(e) if doc.title == doc.path.name else f"{doc.shown}: {e}", exit_code_for(e))))
                        continue
                    stored[doc.doc_id] = (position, doc, meta.title if meta is not None and meta.title else doc.title)
                failed = await follow_progress(feed, user, collection, {d: t for d, (_p, _doc, t) in stored.items()},
                                               target.timeout, status=stored_status(conn, user, collection))
        for doc_id, (position, doc, stored_title) in stored.items():
            if doc_id in failed:
                failures.append((position, CliError(f"{doc.shown}: stored as {doc_id}, but its processing failed: "
                                                    f"{failed[doc_id]}", EXIT_FAILED)))
            else:
                loaded.append((doc, stored_title))
    for doc, stored_title in loaded:
        out(f"Loaded {stored_title} as {doc.doc_id}")
        if stored_title != doc.title:
            err_line(f"note: {doc.doc_id} was already stored with the title {quoted(stored_title)}, which it keeps "
                     f"({quoted(doc.title)} was not applied)")
    _report_failures(failures)


class _HashingReader:
    """A binary file read through (by the RDF parser) while its sha256 is computed on the way."""

    def __init__(self, fh):
        self.fh = fh
        self.sha256 = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        self.sha256.update(data)
        return data


@click.command("tg-load-turtle", cls=TgCommand)
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["turtle", "trig", "ntriples", "nquads"]), default=None,
              help="default: from the file extension")
@click.option("--batch-size", type=click.IntRange(1, 100000), default=1000, show_default=True)
@connection_options
@run_async
async def load_turtle(file, fmt, batch_size, user, collection, target):
    """Load an existing RDF graph into a collection; labelled entities are embedded for GraphRAG.

    The whole file is parsed and checked before anything is sent (see :mod:`.rdf_load`): a file
    holding a value the services would refuse, or a quad in ``urn:graph:retrieval``, stores nothing.
    """
    from trustgraph_base.codec import encode
    from trustgraph_base.pubsub.topics import flow_queue
    from trustgraph_base.rdf.export import parse

    from .rdf_load import LoadRefused, entities_message, plan_load, triples_message

    check_names(user, collection)
    shown = shown_path(file)
    fmt = fmt or {".ttl": "turtle", ".trig": "trig", ".nt": "ntriples", ".nq": "nquads"}.get(file.suffix.lower(),
                                                                                              "turtle")
    try:
        with open(file, "rb") as fh:
            reader = _HashingReader(fh)
            triples = parse(cast(BinaryIO, reader), fmt)  # the parser only calls read()
            while reader.read(1 << 20):  # whatever the parser left unread still names the load
                pass
    except OSError as e:
        raise CliError(f"cannot read {shown}: {e.strerror or e}", EXIT_USAGE) from None
    except ValueError as e:
        raise CliError(f"{shown}: {e}", EXIT_USAGE) from None
    if not triples:
        raise CliError(f"{shown} holds no triples", EXIT_USAGE)
    try:
        plan = plan_load(triples, batch_size, target.max_message_bytes, target.carrier)
    except LoadRefused as e:
        raise CliError(f"{shown}: {e} (nothing was loaded)", EXIT_USAGE) from None
    root = f"urn:load:{reader.sha256.hexdigest()[:16]}"
    quiet_logging()
    async with target.connect(("triples-store", "entity-contexts")) as conn:
        from rich.markup import escape
        from rich.progress import Progress

        batches, ent_batches = plan.triple_batches, plan.entity_batches
        async with ProgressFeed(conn.backend, user, collection) as feed:
            store = await conn.backend.create_producer(flow_queue("triples-store", conn.flow))
            entq = await conn.backend.create_producer(flow_queue("entity-contexts", conn.flow))
            for i, b in enumerate(batches):
                await store.send(encode(triples_message(b, root, i, user, collection)))
            for i, eb in enumerate(ent_batches):
                await entq.send(encode(entities_message(eb, root, i, user, collection)))
            await store.close()
            await entq.close()
            want = {"stored": {f"{root}#{i}" for i in range(len(batches))},
                    "graph-embedded": {f"{root}#e{i}" for i in range(len(ent_batches))}}
            got: dict[str, set[str]] = {k: set() for k in want}
            with Progress(console=_stderr_console()) as bars:
                task = bars.add_task(escape(printable(clip(file.name, 40))), total=len(batches) + len(ent_batches))
                loop = asyncio.get_running_loop()
                last_news = loop.time()  # events about other loads do not count
                while any(not want[k] <= got[k] for k in want):
                    ev = await _next_or_fail(feed, last_news + target.timeout - loop.time(), target.timeout, shown)
                    if ev.document_id == root and ev.stage in got:
                        last_news = loop.time()
                        got[ev.stage].add(ev.item_id)
                        bars.update(task, completed=sum(len(v) for v in got.values()))
    out(f"Loaded {len(triples)} triple(s) and embedded {plan.entities} labelled entit(ies) from {file} "
        f"into {user}/{collection}")


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


async def _next_or_fail(feed: ProgressFeed, wait: float, timeout: float, name: str):
    """The next event within ``wait`` seconds; else the command fails for ``timeout`` seconds without progress."""
    from trustgraph_base.pubsub import ReceiveTimeout

    try:
        return await feed.next(max(wait, 0.0))
    except ReceiveTimeout:
        raise CliError(f"no progress for {timeout:g} s while loading {name}; are the services running?", 3) from None


@click.command("tg-quickstart", cls=TgCommand)
@click.option("-q", "--query", "question", default=None, help="question (default: the sample question)")
@click.option("--reload", is_flag=True, help="load the sample corpus again even if it is loaded")
@llm_options
@connection_options
@run_async
async def quickstart(question, reload, user, collection, target):
    """Load the bundled sample corpus (once) and answer a question with --explainable output."""
    from trustgraph_base.schema import GraphRagQuery, LibrarianRequest
    from trustgraph_flow.ingest.sample_corpus import QUICKSTART_QUESTION, sample_documents

    from .invoke import QUERY_USES, ExplainPrinter, stream_rag

    check_names(user, collection)
    quiet_logging()
    async with target.connect(INGEST_USES + QUERY_USES + ("graph-rag",)) as conn:
        loaded = {m.id for m in (await conn.request("librarian", LibrarianRequest(
            operation="list-documents", user=user, collection=collection))).document_metadatas}
        docs = [d for d in sample_documents() if reload or d.id not in loaded]
        if docs:
            err_line(f"Loading the sample corpus ({len(docs)} documents) into {user}/{collection} ...")
            await load_documents(conn, user, collection, [(d.id, d.title, d.kind, d.content) for d in docs],
                                 target.timeout)
            await conn.settle()
        printer = ExplainPrinter(conn, user, collection)
        await stream_rag(conn, "graph-rag", GraphRagQuery(query=question or QUICKSTART_QUESTION, user=user,
                                                           collection=collection, streaming=True),
                          printer, explainable=True)
