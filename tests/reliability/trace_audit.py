"""What a client saw of each query, what the stores hold for it, and the rules that must link the two.

A fault test sends a stream of explainable GraphRAG queries, injects a fault, and then
compares, query by query, the client's record (:class:`QueryRecord`) with the stored trace
(:class:`StoredTrace`).  Each stored trace gets a status:

``complete``
    Question, Grounding, Exploration, Focus and Synthesis are stored, no Error; the Synthesis points at
    an answer document that the librarian holds.
``failed``
    An Error stage is stored (the service caught the failure and said how far it got), no
    Synthesis.
``incomplete``
    The Question is stored but neither a Synthesis nor an Error: the query was cut short by a
    crash of the service running it (or the store/bus vanished before the end was recorded).
    This is the honest state of a trace a crash interrupted; the CLI reports it as such.
``absent``
    Nothing of the query was stored.

The rules (:func:`violations`):

1. a query the client saw answered (``end_of_session`` without error) has a *complete* trace;
2. a stored Synthesis implies the client was sent the whole answer (``end_of_stream``) and the
   librarian's answer document equals the text the client got: a trace never claims an
   answer its client never got;
3. every stage the client received is stored exactly as streamed (same triples), and stored
   triples are never duplicated (rows read per stage == distinct triples) - idempotent
   redelivery;
4. complete and failed traces are SHACL-valid;
5. every listed trace belongs to exactly one client query, and is listed once: no duplicate
   or foreign trace.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance import uris
from trustgraph_base.rdf.terms import serialize_term
from trustgraph_base.schema import IRI, GraphRagQuery, Term, Triple, TriplePattern

QUESTIONS = ("Who discovered polonium?", "Who discovered radium?", "What did Rutherford discover?",
             "Where did Marie Curie work?", "What is the unit of radioactivity?")

#: One line per fault test that ran: the fault, what it struck, and its outcome matrix; printed
#: in the tier's terminal summary (conftest.py) so CI output carries the fault matrix.
FAULT_MATRIX: list[str] = []


def key(t: Triple) -> tuple[str, str, str]:
    return serialize_term(t.s), serialize_term(t.p), serialize_term(t.o)


# ------------------------------------------------------------------------------------------ client side


@dataclass
class QueryRecord:
    """One query as its client saw it."""

    index: int
    question: str
    started: float = 0.0
    finished: float = 0.0
    question_uri: str = ""
    events: dict[str, list[Triple]] = field(default_factory=dict)
    answer: str = ""
    end_of_stream: bool = False
    outcome: str = "pending"  # answered | error | timeout
    error: str = ""

    @property
    def seconds(self) -> float:
        return self.finished - self.started

    @property
    def in_flight(self) -> bool:
        """The service started the query (the Question event arrived) and has not finished it."""
        return bool(self.question_uri) and self.outcome == "pending"


def unique_question(i: int, tag: str) -> str:
    """A question answerable from the sample corpus, made unique so its stored trace can be found by text."""
    return f"{QUESTIONS[i % len(QUESTIONS)]} (run {tag} query {i})"


async def ask(client, user: str, collection: str, record: QueryRecord, timeout: float,
              explain_collection: str = "") -> QueryRecord:
    """Send one explainable streaming GraphRAG query and record every message until the end (or a failure).

    :param explain_collection: where the trace is stored (default: ``collection``), so each test
        audits only its own traces while querying the collection that holds the corpus.
    """
    from trustgraph_base.processor import RequestTimeout
    from trustgraph_base.pubsub import BackendError

    record.started = time.monotonic()
    try:
        async for msg in client.stream(GraphRagQuery(query=record.question, user=user, collection=collection,
                                                     streaming=True, explain_collection=explain_collection),
                                       timeout=timeout):
            if msg.message_type == "explain":
                if not record.question_uri and msg.explain_id.startswith("urn:trustgraph:question:"):
                    record.question_uri = msg.explain_id
                record.events[msg.explain_id] = list(msg.explain_triples)
            if msg.error is not None:
                record.outcome, record.error = "error", msg.error.message
                if msg.explain_id and not record.question_uri:
                    record.question_uri = msg.explain_id
                break
            if msg.message_type == "chunk":
                record.answer += msg.response
                record.end_of_stream = record.end_of_stream or msg.end_of_stream
            if msg.end_of_session:
                record.outcome = "answered"
                break
        else:
            record.outcome, record.error = "error", "stream ended without end_of_session"
    except RequestTimeout as e:
        record.outcome, record.error = "timeout", str(e)
    except (BackendError, ConnectionError, OSError) as e:
        record.outcome, record.error = "error", f"transport: {e}"
    record.finished = time.monotonic()
    return record


@dataclass
class QueryStream:
    """Queries sent ``concurrency`` at a time; a fault can be injected while some are in flight."""

    client: Any
    user: str
    collection: str
    explain_collection: str = ""
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    timeout: float = 20.0
    records: list[QueryRecord] = field(default_factory=list)

    def new(self) -> QueryRecord:
        r = QueryRecord(len(self.records), unique_question(len(self.records), self.tag))
        self.records.append(r)
        return r

    def batch(self, count: int) -> list[QueryRecord]:
        """``count`` new query records (not sent yet)."""
        return [self.new() for _ in range(count)]

    async def send(self, records: list[QueryRecord], concurrency: int, spacing: float = 0.0) -> list[QueryRecord]:
        """Send ``records``, at most ``concurrency`` at once, starting one every ``spacing`` seconds."""
        gate = asyncio.Semaphore(concurrency)

        async def one(n: int, r: QueryRecord) -> None:
            await asyncio.sleep(n * spacing)
            async with gate:
                await ask(self.client, self.user, self.collection, r, self.timeout, self.explain_collection)

        await asyncio.gather(*(one(n, r) for n, r in enumerate(records)))
        return records

    async def wait_in_flight(self, records: list[QueryRecord], deadline: float = 60.0) -> QueryRecord:
        """Wait until one of ``records`` is in flight (its Question arrived, no end yet) and return it."""
        stop = time.monotonic() + deadline
        while time.monotonic() < stop:
            for r in records:
                if r.in_flight:
                    return r
            await asyncio.sleep(0.01)
        raise AssertionError("no query was ever in flight: " + ", ".join(f"{r.index}:{r.outcome}" for r in records))

    async def until_answered(self, seconds: float) -> QueryRecord:
        """Ask again and again until one query is answered (a recovered stack), at most ``seconds``."""
        stop = time.monotonic() + seconds
        last = None
        while time.monotonic() < stop:
            last = await ask(self.client, self.user, self.collection, self.new(), self.timeout,
                             self.explain_collection)
            if last.outcome == "answered":
                return last
            await asyncio.sleep(1.0)
        raise AssertionError(f"the stack did not recover within {seconds:.0f} s; last query: "
                             f"{last.outcome if last else 'none'} {last.error if last else ''}")


# ------------------------------------------------------------------------------------------ stored side

@dataclass
class StoredTrace:
    """What the stores hold for one Question."""

    uri: str
    triples: list[Triple]
    rows: dict[str, int]          # stage subject -> rows read (not de-duplicated)
    distinct: dict[str, int]      # stage subject -> distinct triples
    answer: str | None            # the librarian's answer document, when the Synthesis points at one
    listed: int = 0

    @property
    def subjects(self) -> set[str]:
        return {t.s.value for t in self.triples if t.s.type == IRI}

    def has(self, stage_uri: str) -> bool:
        return stage_uri in self.subjects

    @property
    def session(self) -> str:
        return self.uri.rsplit(":", 1)[-1]

    @property
    def status(self) -> str:
        s = self.session
        if self.has(uris.synthesis_uri(s)) and not self.has(uris.error_uri(s)):
            return "complete"
        if self.has(uris.error_uri(s)):
            return "failed"
        return "incomplete"

    def stage(self, subject: str) -> set[tuple]:
        return {key(t) for t in self.triples if t.s.type == IRI and t.s.value == subject}


async def load_trace(triples_store, librarian_content: Callable[[str], str | None], user: str, collection: str,
                     uri: str) -> StoredTrace:
    """Read one trace straight from the store: its triples, raw row counts per stage and its answer.

    :param librarian_content: document id -> the librarian's text of it (None when absent).
    """
    from trustgraph_base.provenance.walk import collect_trace

    async def q(patterns):
        results = await asyncio.to_thread(triples_store.query_many, user, collection, patterns)
        return [t for r in results for t in r]

    triples = await collect_trace(q, uri)
    subjects = sorted({t.s.value for t in triples if t.s.type == IRI})
    results = await asyncio.to_thread(triples_store.query_many, user, collection,
                                      [TriplePattern(s=Term(IRI, s), g=ns.GRAPH_RETRIEVAL, limit=100_000)
                                       for s in subjects])
    rows = {s: len(r) for s, r in zip(subjects, results, strict=True)}
    distinct = {s: len({key(t) for t in r}) for s, r in zip(subjects, results, strict=True)}
    answer = None
    doc = next((t.o.value for t in triples if t.p.value == ns.TG_DOCUMENT and t.o.type == IRI), None)
    if doc:
        answer = await asyncio.to_thread(librarian_content, doc)
    return StoredTrace(uri, triples, rows, distinct, answer)


async def stored_traces(triples_store, librarian_content, user: str, collection: str) -> dict[str, StoredTrace]:
    """Every trace listed in a collection, loaded, with how often the index lists it."""
    listed: Counter = Counter()
    cursor = ""
    while True:
        page = await asyncio.to_thread(triples_store.list_traces, user, collection, "", 500, cursor)
        for t in page.traces:
            listed[t.uri] += 1
        cursor = page.next_cursor
        if not cursor:
            break
    out = {}
    for uri, n in listed.items():
        trace = await load_trace(triples_store, librarian_content, user, collection, uri)
        trace.listed = n
        out[uri] = trace
    return out


def question_text(trace: StoredTrace) -> str:
    q = next((t.o.value for t in trace.triples if t.s.value == trace.uri and t.p.value == ns.TG_QUERY), "")
    return q


# ------------------------------------------------------------------------------------------ the rules

@dataclass
class Audit:
    """The outcome of comparing client records with stored traces."""

    pairs: list[tuple[QueryRecord, StoredTrace | None]]
    problems: list[str]
    foreign: list[str]

    def matrix(self) -> Counter:
        """(client outcome, trace status) -> number of queries."""
        return Counter((r.outcome, t.status if t else "absent") for r, t in self.pairs)

    def summary(self) -> str:
        return ", ".join(f"{o}/{s}={n}" for (o, s), n in sorted(self.matrix().items()))


def audit(records: list[QueryRecord], traces: dict[str, StoredTrace], *, validate: bool = True) -> Audit:
    """Check rules 1-5 of the module docstring; every broken rule becomes one line in ``problems``."""
    from trustgraph_base.rdf.validation import validate_trace

    problems: list[str] = []
    by_text: dict[str, list[StoredTrace]] = {}
    for t in traces.values():
        by_text.setdefault(question_text(t), []).append(t)
    known = {r.question for r in records}
    foreign = [t.uri for t in traces.values() if question_text(t) not in known]
    pairs = []
    for r in records:
        found = by_text.get(r.question, [])
        if len(found) > 1:
            problems.append(f"query {r.index}: {len(found)} traces stored for one query: {[t.uri for t in found]}")
        trace = found[0] if found else None
        if trace is None and r.question_uri and r.question_uri in traces:
            trace = traces[r.question_uri]
        pairs.append((r, trace))
        where = f"query {r.index} ({r.outcome}{': ' + r.error[:120] if r.error else ''})"
        if r.outcome == "answered" and (trace is None or trace.status != "complete"):
            problems.append(f"{where}: answered, but its trace is {trace.status if trace else 'absent'}")
        if trace is None:
            continue
        if r.question_uri and trace.uri != r.question_uri:
            problems.append(f"{where}: client saw {r.question_uri}, store holds {trace.uri}")
        if trace.listed != 1:
            problems.append(f"{where}: trace {trace.uri} listed {trace.listed} times")
        s = trace.session
        if trace.has(uris.synthesis_uri(s)):
            if not r.end_of_stream:
                problems.append(f"{where}: the trace has a Synthesis but the client never got the whole answer")
            elif trace.answer != r.answer:
                problems.append(f"{where}: stored answer {trace.answer!r:.80} != the client's {r.answer!r:.80}")
        for subject, n in trace.rows.items():
            if n != trace.distinct[subject]:
                problems.append(f"{where}: {subject} has {n} stored rows for {trace.distinct[subject]} triples")
        for stage_uri, streamed in r.events.items():
            if trace.has(stage_uri):
                stored = trace.stage(stage_uri)
                sent = {key(t) for t in streamed if t.s.type == IRI and t.s.value == stage_uri}
                if stored != sent:
                    problems.append(f"{where}: stored {stage_uri} differs from what was streamed "
                                    f"({len(stored)} vs {len(sent)} triples)")
        # edge selections hang off the Focus; compare every streamed triple that is stored at all
        streamed_keys = {key(t) for ts in r.events.values() for t in ts}
        if r.outcome == "answered" and streamed_keys != {key(t) for t in trace.triples}:
            problems.append(f"{where}: stored trace ({len(trace.triples)} triples) != streamed "
                            f"({len(streamed_keys)} triples)")
        if validate and trace.status in ("complete", "failed"):
            report = validate_trace(trace.triples)
            if not report.conforms:
                problems.append(f"{where}: {trace.status} trace is not SHACL-valid: "
                                f"{[v.message for v in report.violations][:3]}")
    for uri in foreign:
        problems.append(f"trace {uri} ({question_text(traces[uri])!r}) belongs to no query of this run")
    return Audit(pairs, problems, foreign)
