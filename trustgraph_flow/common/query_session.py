"""One explainable query as GraphRAG, DocumentRAG and the agent run it: its stages, their storage, its end.

The three services answer a request the same way (docs/guarantees.md, "Traces"), so the way
lives here once and each service supplies only the shape of its messages:

* each stage of the trace is stored and shown to the client the moment it is done, and neither
  is awaited there: the writes form a chain (:mod:`.background_writes`: storage always holds a
  prefix of the stages the client saw) and the events keep their place among the other
  messages (:mod:`.response_stream`);
* the session's last message waits for the chain, so it means that the whole trace is on its
  way to storage;
* a failure ends the trace with an Error derived from the last stored stage, naming the stage
  the query had reached, and ends the session with one error message;
* a cancellation is not a failure of the query: it goes on up, no Error stage is written and
  the trace stays ``incomplete``, as when the process running the query is killed; a model
  request running beside the query (:func:`alongside`) is cancelled with it.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Generic, Protocol, TypedDict, TypeVar

from trustgraph_base.provenance.namespaces import GRAPH_RETRIEVAL
from trustgraph_base.provenance.triples import error_triples, stage_time_triple
from trustgraph_base.provenance.uris import parse_trace_uri
from trustgraph_base.schema import Triple

from .background_writes import BackgroundWrites
from .ports import PromptOutcome
from .response_stream import ResponseStream

log = logging.getLogger(__name__)

__all__ = ["QuerySession", "ExplainStore", "Failure", "TraceFields", "alongside", "check_question", "query_size_error",
           "MAX_QUERY_CHARS", "NO_ANSWER_ERROR"]

#: Longest question accepted (characters).  A question, not a document: far below the 4 MiB literal
#: limit and Pulsar's 5 MB messages (the question travels in explain events and prompts), so an
#: oversized one gets the same clear refusal on both stacks, before anything is stored.
MAX_QUERY_CHARS = 100_000
#: The failure of a query whose model answered with nothing (or only whitespace): an empty answer is no answer.
NO_ANSWER_ERROR = "the model returned no answer"

R = TypeVar("R")
T = TypeVar("T")



class TraceFields(TypedDict, total=False):
    """The fields of a response message that name its trace (none when nothing was stored)."""

    explain_id: str
    explain_collection: str
    explain_graph: str


#: Makes a failed session's last message from the failure, its one-line message and the fields that name
#: the trace stored so far (:class:`TraceFields`).
Failure = Callable[[Exception, str, TraceFields], R]


class ExplainStore(Protocol):
    """Where the stages of a trace go (:class:`~.ports.BusPorts` over the bus)."""

    async def store_explain(self, user: str, collection: str, stage_uri: str, triples: list[Triple]) -> None: ...

    async def store_answer(self, user: str, collection: str, document_id: str, text: str, stage_uri: str,
                           stage_triples: list[Triple]) -> None:
        """Queue ``text`` for the librarian; the stage that points at it is stored only after it."""
        ...


def query_size_error(query: str) -> str:
    """Why ``query`` is refused for its size (``""``: it is not); the one wording of every query service."""
    if len(query) > MAX_QUERY_CHARS:
        return f"the query is {len(query):,} characters long; at most {MAX_QUERY_CHARS:,} are accepted"
    return ""


def check_question(text: str, noun: str = "query") -> None:
    """Refuse an empty or oversized question (ValueError), before anything is stored."""
    if not text.strip():
        raise ValueError(f"the {noun} is empty")
    if query_size_error(text):
        raise ValueError(query_size_error(text))


@asynccontextmanager
async def alongside(request: Awaitable[T]) -> AsyncIterator[asyncio.Future[T]]:
    """Run ``request`` as a task beside the block; it is cancelled when the block fails or is cancelled.

    The task goes as far as its first wait before the block starts, so a model request leaves
    before the explain work the block does (building and sending a stage, walking source
    chains): that work needs nothing from the request, but it would compete with the request's
    way to the model for the CPU.
    """
    task = asyncio.ensure_future(request)
    await asyncio.sleep(0)
    try:
        yield task
    except BaseException:
        task.cancel()
        raise


class QuerySession(Generic[R]):
    """The response stream, explain stages and outcome of one query.

    :param ports: where the stages are stored.
    :param emit: sends one message to the client (the request context's ``respond``).
    :param response: the service's response type; explain events and answer chunks are made of it.
    :param user: the user the trace is stored for.
    :param collection: the collection the trace is stored in.
    :param question_uri: the Question of the trace; names the query in the Error stage and the last message.
    :param explainable: whether the query records a trace (else stages are neither stored nor shown).
    :param subject: names the query in log lines (``graph-rag query urn:...``).
    :param failure: makes the last message of a failed session.
    :param streaming: answer pieces go out as they come (else the whole answer with its last chunk).
    :param queue_events: explain events go out in the background, in order; else each is sent before
        the query goes on (the agent, whose tool calls forward the events of sub-queries in between).
    """

    def __init__(self, ports: ExplainStore, emit: Callable[[R], Awaitable[None]], *, response: Callable[..., R],
                 user: str, collection: str, question_uri: str, explainable: bool, subject: str,
                 failure: Failure, streaming: bool = False, queue_events: bool = True):
        self.ports = ports
        self.response = response
        self.user = user
        self.collection = collection
        self.question_uri = question_uri
        self.explainable = explainable
        self.subject = subject
        self.failure = failure
        self.streaming = streaming
        self.queue_events = queue_events
        #: How far the query got: the stage its Error names if it fails.
        self.stage = "question"
        self.in_token: int | None = None  # the sum over the calls that reported usage
        self.out_token: int | None = None
        self.unreported_calls = 0  # model calls whose endpoint reported no usage: the sums are partial
        self.model = ""
        self.writes = BackgroundWrites()  # explain triples on their way to storage
        self.stream = ResponseStream(emit)  # queued explain events, then the messages sent after them
        self._answer: list[str] = []
        self._leading: str | None = ""  # whitespace before the first text of the answer, sent with that text
        self._stamps: dict[str, Triple] = {}  # stage URI -> its prov:generatedAtTime, made when it is first stored

    async def run(self, query: Callable[[], Awaitable[None]]) -> None:
        """Run ``query``; a failure ends the session (and its trace) with an error, a cancellation goes on up,
        except one made by :func:`cancel_with_reason`: that ends the session with an error saying why."""
        try:
            await query()
        except Exception as e:  # noqa: BLE001 - every failure ends the session with an error
            await self._fail(e)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            reason = _CANCEL_REASONS.pop(task, None) if task is not None else None
            if task is None or reason is None:
                raise
            task.uncancel()
            await self._fail(Cancelled(reason))

    # ------------------------------------------------------------ messages
    async def send(self, message: R) -> None:
        """Send ``message`` after every explain event queued before it."""
        await self.stream.send(message)

    async def close(self, last: R) -> None:
        """Send the session's last message once every stage is on its way to storage."""
        await self.writes.wait()
        await self.send(last)

    def trace_fields(self) -> TraceFields:
        """The fields of a message that name the trace: where its stages are stored."""
        return {"explain_id": self.question_uri, "explain_collection": self.collection,
                "explain_graph": GRAPH_RETRIEVAL}

    # ------------------------------------------------------------ explain stages
    def store(self, uri: str, triples: list[Triple], answer: tuple[str, str] | None = None) -> None:
        """Start storing a stage; ``answer`` = (document URI, text) of the answer it points at, stored before it.

        Not awaited here: the session's last message waits for every stage's write.
        """
        if not self.explainable:
            return
        triples = self._stamped(uri, triples, new=True)
        if answer is None:
            self.writes.start(uri, lambda: self.ports.store_explain(self.user, self.collection, uri, triples))
        else:
            self.writes.start(uri, lambda: self.ports.store_answer(self.user, self.collection, *answer, uri, triples))

    async def show(self, uri: str, triples: Sequence[Triple], **extra: Any) -> None:
        """Send a stage's explain event to the client (``extra``: more fields of the event)."""
        if not self.explainable:
            return
        triples = self._stamped(uri, triples, new=False)
        event = self.response(message_type="explain", explain_id=uri, explain_collection=self.collection,
                              explain_graph=GRAPH_RETRIEVAL, explain_triples=triples, **extra)
        if self.queue_events:
            self.stream.send_soon(event)
        else:
            await self.send(event)

    def _stamped(self, uri: str, triples: Sequence[Triple], *, new: bool) -> list[Triple]:
        """``triples`` with the stage's ``prov:generatedAtTime`` (docs/trace-model.md, "Timing").

        The time is made when the stage is first stored (``new``) and the same triple goes with its
        explain event, so the stored and the streamed stage agree.  The Question has its
        ``prov:startedAtTime``; an event this session did not store (a sub-query's, which the agent
        forwards) keeps the stamps its own session gave it.
        """
        if uri == self.question_uri:
            return list(triples)
        stamp = self._stamps.get(uri)
        if stamp is None:
            if not new:
                return list(triples)
            stamp = self._stamps[uri] = stage_time_triple(uri)
        return [*triples, stamp]

    async def explain(self, uri: str, triples: list[Triple], answer: tuple[str, str] | None = None,
                      **extra: Any) -> None:
        """Store a stage and show it to the client (see :meth:`store` and :meth:`show`)."""
        self.store(uri, triples, answer)
        await self.show(uri, triples, **extra)

    async def claim(self, uri: str, triples: list[Triple], write: Callable[[], Awaitable[None]]) -> None:
        """Store the Question with ``write`` (a trace claim, which may refuse it), then show it.

        Awaited: nothing else of the query is stored or sent before the claim succeeded.
        """
        self.writes.start(uri, write)
        await self.writes.wait()
        await self.show(uri, triples)

    # ------------------------------------------------------------ the answer
    def count(self, outcome: PromptOutcome) -> None:
        """Add a model call's tokens; its model becomes the query's.  A call without usage adds nothing to the
        sums but is counted in ``unreported_calls``, so a partial sum never passes for a whole one."""
        if outcome.in_token is None and outcome.out_token is None:
            self.unreported_calls += 1
        else:
            self.in_token = (self.in_token or 0) + (outcome.in_token or 0)
            self.out_token = (self.out_token or 0) + (outcome.out_token or 0)
        self.model = outcome.model or self.model

    def usage(self) -> dict[str, Any]:
        """The fields of the last message that report the model calls (sums None: no call reported usage)."""
        return {"in_token": self.in_token, "out_token": self.out_token, "unreported_calls": self.unreported_calls,
                "model": self.model}

    async def add_answer(self, piece: str) -> None:
        """Add a piece of the answer; when streaming it goes out at once, except whitespace before the first
        text, which goes with that text (never alone)."""
        self._answer.append(piece)
        if not self.streaming:
            return
        if self._leading is not None and not piece.strip():
            self._leading += piece  # only whitespace so far: not an answer yet
            return
        await self.send(self.response(message_type="chunk", response=(self._leading or "") + piece))
        self._leading = None

    def answer(self) -> str:
        """The whole answer; an empty one (or only whitespace) is a failed synthesis, never an answer."""
        text = "".join(self._answer)
        if not text.strip():
            raise ValueError(NO_ANSWER_ERROR)
        return text

    async def end_answer(self, text: str) -> None:
        """The answer's last chunk: the whole ``text`` unless it was streamed."""
        await self.send(self.response(message_type="chunk", response="" if self.streaming else text,
                                      end_of_stream=True))

    # ------------------------------------------------------------ failure
    async def _fail(self, error: Exception) -> None:
        message = str(error) or type(error).__name__
        log.warning("%s failed at %s: %s", self.subject, self.stage, message)
        await self.writes.settle()
        stored = self.writes.last_written  # the Error follows the last stage that reached storage
        trace = parse_trace_uri(self.question_uri)
        if self.explainable and stored and trace is not None:
            err_uri = trace.stage_uri("error")
            try:
                await self.explain(err_uri, error_triples(err_uri, stored, message, self.stage))
                await self.writes.wait()
            except Exception as e:  # noqa: BLE001 - the client still gets its error below
                log.error("could not record the error of %s: %s", self.subject, e)
        await self.stream.settle()  # the queued explain events first; one that failed is logged
        await self.send(self.failure(error, message, self.trace_fields() if stored else {}))


class Cancelled(Exception):
    """A session stopped on purpose (:func:`cancel_with_reason`); its message is the reason."""


#: Tasks cancelled with a reason to record, until their session has recorded it.
_CANCEL_REASONS: weakref.WeakKeyDictionary[asyncio.Task, str] = weakref.WeakKeyDictionary()


def cancel_with_reason(task: asyncio.Task, reason: str) -> None:
    """Cancel ``task`` so that the query session running in it ends complete, with an Error saying ``reason``
    (a plain cancellation records nothing more).

    :param task: the task running :meth:`QuerySession.run`.
    :param reason: the Error stage's message.
    """
    _CANCEL_REASONS[task] = reason
    task.cancel()
