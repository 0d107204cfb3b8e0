"""trace-admin: retention of explain traces — delete one trace, or prune those older than a duration.

A trace is deleted whole and alone: every triple reachable from its Question in
``urn:graph:retrieval`` (stages, edge selections, agent iterations with their thoughts and
observations, sub-traces; never a node named after another trace, see
:mod:`trustgraph_base.provenance.walk`), the trace index rows of its Questions, and its own
documents in the librarian (answers, an agent's thought and observation texts).  Knowledge and
extraction provenance are never touched.  Everything happens inside one user and collection, so
one tenant can never delete another's traces.

Stored traces may be forged, so a librarian document is removed only when all of these hold
(anything else the trace points at is left alone and counted in ``skipped_documents``):

* its id is, by the URI scheme, a document of one of the trace's own Questions: its answer, or
  one of its agent's thoughts or observations (:func:`~.uris.document_owner`);
* the librarian holds it as an ``answer`` (the removal request says so, and the librarian
  refuses to remove a document of another type);
* the stage its metadata names (:mod:`trustgraph_base.provenance.answers`) is a node of this
  trace.  Answers stored before that marker existed carry none; they are removed on the first
  two rules, which already confine removal to a document that never has anything derived from it.

A trace is *finished* when every one of its Questions reaches a final stage along stored
derivation links.  An unfinished trace that started less than the grace period ago is still
being written: ``delete`` refuses it, ``prune`` skips and counts it, so a prune racing a query
can never remove the first stages of a trace whose later stages are yet to be stored.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from datetime import UTC, datetime, timedelta

from trustgraph_base.processor import Processor, launch, raise_on_error
from trustgraph_base.provenance.answers import marked_stages
from trustgraph_base.provenance.uris import trace_root_of
from trustgraph_base.provenance.walk import TraceWalker, trace_answers, trace_documents
from trustgraph_base.rdf.terms import serialize_term, spo
from trustgraph_base.schema import LibrarianRequest, TraceAdminRequest, TraceAdminResponse, TraceSummary, Triple
from trustgraph_base.schema.library import ANSWER
from trustgraph_base.store.errors import NotFound
from trustgraph_base.store.names import check_collection, check_user
from trustgraph_base.store.triples import timestamp_micros

from ...common.services import client_spec, request_spec
from ...common.stores import StoreBackedProcessor

log = logging.getLogger(__name__)

#: Longest duration a request may name (``older_than_seconds``, ``grace_seconds``): 100 years.
MAX_DURATION_SECONDS = 100 * 365.25 * 86400
#: How far in the future a Question's start time may lie (clock skew); later ones count as unknown.
CLOCK_SKEW = timedelta(days=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class TraceBeingWritten(Exception):
    """The trace has not reached its final stage and is younger than the grace period."""

    error_type = "trace-being-written"


def check_duration(value: float, what: str, *, positive: bool) -> float:
    """Return ``value`` if it is a finite number of seconds within bounds, else raise ValueError saying so."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (positive and value == 0) or value > MAX_DURATION_SECONDS:
        low = "positive" if positive else "zero or positive"
        raise ValueError(f"{what} must be a {low} number of seconds of at most {MAX_DURATION_SECONDS:.0f} "
                         f"(100 years), got {str(value)[:40]}")
    return float(value)


def started_at(summary: TraceSummary, now: datetime) -> datetime | None:
    """When a trace started, from its index row; ``None`` when its time is missing, unreadable or more than
    :data:`CLOCK_SKEW` in the future: such a (malformed, forged) trace counts as older than any age, never young."""
    micros = timestamp_micros(summary.time) if summary.time else None
    if micros is None:
        return None
    try:
        when = _EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        return None
    return when if when <= now + CLOCK_SKEW else None


def _key(t: Triple) -> tuple[str, str, str]:
    s, p, o = spo(t)
    return serialize_term(s), serialize_term(p), serialize_term(o)


def _age(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 \
        else f"{seconds / 3600:.1f} h"


class TraceAdminService(StoreBackedProcessor, Processor):
    """Deletes and prunes stored traces."""

    default_id = "trace-admin"

    def __init__(self, *, triples_store=None, **params):
        super().__init__(**params)
        self.store = self.use_store(triples_store, "triples")
        self.add(request_spec("trace-admin", self.flow, self.on_request))
        self.add(client_spec("librarian", self.flow))

    async def _query(self, user: str, collection: str, patterns):
        results = await asyncio.to_thread(self.store.query_many, user, collection, patterns)
        return [t for r in results for t in r]

    def _walker(self, user: str, collection: str, uri: str) -> TraceWalker:
        async def accept_subtrace(question: str, parent: str) -> bool:
            # A Question is a sub-trace only if it was stored as one, asked by this very node; one that
            # is not indexed at all is a remnant, and goes with the trace it hangs off.
            row = await asyncio.to_thread(self.store.get_trace, user, collection, question)
            return row is None or row.parent == parent

        return TraceWalker(uri, accept_subtrace)

    async def delete_trace(self, user: str, collection: str, uri: str, dry_run: bool = False,
                           grace_seconds: float = 3600.0) -> TraceAdminResponse:
        summary = await asyncio.to_thread(self.store.get_trace, user, collection, uri)
        if summary is None:
            raise NotFound(f"no trace {uri} in collection {collection} of user {user}")
        walker = self._walker(user, collection, uri)
        query = functools.partial(self._query, user, collection)
        step = await walker.walk(query)
        now = datetime.now(UTC)
        started = started_at(summary, now)
        age = (now - started).total_seconds() if started is not None else math.inf
        if not walker.finished() and age < grace_seconds:
            raise TraceBeingWritten(
                f"trace {uri} is still being written: it started {_age(max(age, 0))} ago and has no final stage "
                f"yet; delete it once it has finished, or once it is older than the grace period "
                f"({_age(grace_seconds)}, set with --grace)")
        resp = TraceAdminResponse(traces=[q for q in walker.questions if q in walker.nodes])
        # Per pass: its answers first, then its triples deepest first; the index rows last.  A deletion
        # cut short leaves a trace that is still listed and reachable from its Question, and is finished
        # by deleting it again.
        seen: set[tuple] = set()  # a dry run deletes nothing, so a pass may find again what an earlier one did
        while True:
            triples = step.triples
            if dry_run:
                triples = [t for t in triples if _key(t) not in seen]
                seen.update(_key(t) for t in triples)
            answers, skipped = await self._own_answers(user, collection, walker, triples)
            resp.triples += len(triples)
            resp.documents += len(answers)
            resp.skipped_documents += len(skipped)
            if skipped:
                log.warning("trace %s in %s/%s points at %d document(s) that are not its answers, left alone: %s",
                            uri, user, collection, len(skipped), ", ".join(d[:200] for d in skipped[:10]))
            if dry_run:
                if not step.more or not triples:
                    return resp
                step = await walker.walk(query)
                continue
            for doc in answers:
                reply = await self.client("librarian").request(LibrarianRequest(
                    operation="remove-document", user=user, collection=collection, document_id=doc,
                    document_type=ANSWER))
                if reply.error is not None and reply.error.type != "not-found":
                    raise_on_error("librarian", reply)
            for level in reversed(step.levels):
                if level:
                    await asyncio.to_thread(self.store.delete, user, collection, level)
            if not step.more or not step.triples:
                break
            step = await walker.walk(query)
        for q in dict.fromkeys([uri, *walker.questions]):
            await asyncio.to_thread(self.store.remove_trace, user, collection, q)
        return resp

    async def _own_answers(self, user: str, collection: str, walker: TraceWalker,
                           triples: list[Triple]) -> tuple[list[str], list[str]]:
        """(answers to remove, documents left alone) among those the trace points at."""
        candidates = trace_answers(walker.questions, triples)
        skipped = [d for d in trace_documents(triples) if d not in candidates]
        answers = []
        for doc in candidates:
            reply = await self.client("librarian").request(LibrarianRequest(
                operation="get-document-metadata", user=user, collection=collection, document_id=doc))
            if reply.error is not None:
                if reply.error.type == "not-found":
                    continue  # never stored, or already removed
                raise_on_error("librarian", reply)
            meta = reply.document_metadata
            stages = marked_stages(meta) if meta is not None else []
            if meta is None or meta.document_type != ANSWER or (stages and not set(stages) & walker.nodes):
                skipped.append(doc)
            else:
                answers.append(doc)
        return answers, skipped

    async def on_request(self, req: TraceAdminRequest, ctx) -> None:
        check_user(req.user)
        check_collection(req.collection)
        grace = check_duration(req.grace_seconds, "grace_seconds", positive=False)
        if req.operation == "delete":
            if not req.uri:
                raise ValueError("delete needs the trace's question URI")
            await ctx.respond(await self.delete_trace(req.user, req.collection, req.uri, req.dry_run, grace))
        elif req.operation == "prune":
            older = check_duration(req.older_than_seconds, "older_than_seconds", positive=True)
            await ctx.respond(await self.prune(req.user, req.collection, older, grace, req.dry_run))
        else:
            raise ValueError(f"unknown trace-admin operation {str(req.operation)[:40]!r}: use delete or prune")

    async def prune(self, user: str, collection: str, older_than: float, grace: float,
                    dry_run: bool) -> TraceAdminResponse:
        now = datetime.now(UTC)
        total = TraceAdminResponse()
        rows = await self._rows(user, collection)
        covered: set[str] = set()  # the traces (sub-traces included) already deleted, or counted by a dry run
        while rows:
            deferred = []
            for row in rows:
                if row.uri in covered:
                    continue
                started = started_at(row, now)
                age = (now - started).total_seconds() if started is not None else math.inf
                if age <= older_than:
                    continue
                if row.parent:
                    if await self._asked_by_a_trace(user, collection, row):
                        deferred.append(row)  # goes with the trace that asked for it, or is an orphan after it
                        continue
                    if age < grace:
                        total.skipped += 1  # an orphan for now: the Question that asked for it may be on its way
                        continue
                try:
                    r = await self.delete_trace(user, collection, row.uri, dry_run, grace)
                except NotFound:
                    continue  # deleted meanwhile, or a sub-trace already removed with its parent
                except TraceBeingWritten:
                    total.skipped += 1
                    continue
                covered.update(r.traces)
                total.traces += r.traces
                total.triples += r.triples
                total.documents += r.documents
                total.skipped_documents += r.skipped_documents
            # A sub-trace its parent's walk did not reach (the node that asked for it was never stored)
            # is an orphan once the parent is gone: look at those again, until none is left over.
            still = [r for r in deferred if not dry_run
                     and await asyncio.to_thread(self.store.get_trace, user, collection, r.uri) is not None
                     and not await self._asked_by_a_trace(user, collection, r)]
            rows = still if len(still) < len(rows) else []
        return total

    async def _asked_by_a_trace(self, user: str, collection: str, row: TraceSummary) -> bool:
        """Whether sub-trace ``row`` hangs, through the Questions that asked for it, off an indexed top-level
        trace (which deletes it); a chain that ends at no trace or runs in a circle makes it an orphan."""
        seen = {row.uri}
        parent = trace_root_of(row.parent)
        while parent and parent not in seen:
            seen.add(parent)
            up = await asyncio.to_thread(self.store.get_trace, user, collection, parent)
            if up is None:
                return False
            if not up.parent:
                return True
            parent = trace_root_of(up.parent)
        return False

    async def _rows(self, user: str, collection: str) -> list[TraceSummary]:
        """Every trace-index row of the collection (the index is newest first: page to the old end)."""
        rows, cursor = [], ""
        while True:
            page = await asyncio.to_thread(self.store.list_traces, user, collection, "", 500, cursor)
            rows += page.traces
            if not page.next_cursor:
                return rows
            cursor = page.next_cursor


def run() -> None:
    launch(TraceAdminService)
