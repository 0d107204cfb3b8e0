"""``--show-usage``: the model, prompt and completion tokens of every LLM call of a query, and the totals.

The numbers are the trace's: each stage that asked a model records ``tg:inToken``,
``tg:outToken`` and ``tg:llmModel`` (docs/trace-model.md), and its explain event carries them
while the query runs.  An agent's tool calls are GraphRAG or DocumentRAG queries with traces of
their own, of which the agent forwards only the Question: their calls are read from the stored
sub-traces once the agent has answered.  Printed on stderr, so stdout keeps just the answer, in
TrustGraph's form for the totals (``Input tokens: N Output tokens: M Model: X``).

A call whose endpoint reported no usage (llama.cpp's server sends none with a streamed answer)
recorded its model but no token counts: it is printed as ``tokens not reported by the endpoint``,
and the totals, which then sum only the calls that reported, say how many calls did not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .common import err_line

__all__ = ["LlmCall", "UsageLog"]

#: What a call without token counts prints instead of them.
NOT_REPORTED = "tokens not reported by the endpoint"

#: Seconds to wait for an agent's sub-trace to be stored (the distributed stores write asynchronously).
SUB_TRACE_WAIT = 20.0

_STAGES = {"focus": "edge selection", "synthesis": "synthesis", "analysis": "step", "conclusion": "answer"}


@dataclass(frozen=True)
class LlmCall:
    """One model call as a stage of the trace recorded it."""

    stage: str  # e.g. "edge selection", "synthesis", "step 2", "answer"
    uri: str
    in_token: int | None
    out_token: int | None
    model: str

    @property
    def reported(self) -> bool:
        """Whether the endpoint reported the call's token counts."""
        return self.in_token is not None or self.out_token is not None


@dataclass
class UsageLog:
    """The LLM calls of one query, collected from its explain events (and an agent's sub-traces)."""

    calls: list[LlmCall] = field(default_factory=list)
    #: Sub-trace Questions an agent asked, with the Analysis that asked each.
    sub_questions: list[tuple[str, str]] = field(default_factory=list)

    def event(self, uri: str, triples: Iterable[Any]) -> None:
        """Record the model call an explain event's stage carries (if any), or a sub-trace's Question."""
        from trustgraph_base.provenance import namespaces as ns

        from .trace_model import TraceIndex

        idx = TraceIndex(list(triples))
        if ns.TG_QUESTION in idx.types(uri):
            parent = idx.text(uri, ns.PROV_WAS_DERIVED_FROM)
            if parent:
                self.sub_questions.append((uri, parent))
            return
        call = _call(idx, uri)
        if call is not None and all(c.uri != call.uri for c in self.calls):
            self.calls.append(call)

    async def add_sub_traces(self, conn, user: str, collection: str) -> None:
        """Add the calls of each sub-trace an agent asked, read from the store, after the call that asked it."""
        from trustgraph_base.provenance.trace_reading import load_trace_triples
        from trustgraph_base.provenance.uris import final_stage_uris

        from .trace_model import TraceIndex

        if not self.sub_questions:
            return
        await conn.settle()
        loop = asyncio.get_running_loop()
        for question, parent in self.sub_questions:
            deadline = loop.time() + SUB_TRACE_WAIT
            final = final_stage_uris(question)
            while True:
                triples = await load_trace_triples(conn, user, collection, question)
                idx = TraceIndex(triples)
                if any(uri in idx.props for uri in final) or loop.time() >= deadline:
                    break
                await asyncio.sleep(0.2)
            calls = [c for c in (_call(idx, s, prefix=_kind(question)) for s in sorted(idx.props)) if c is not None]
            calls.sort(key=lambda c: (c.stage != f"{_kind(question)} edge selection", c.uri))
            at = next((i + 1 for i, c in enumerate(self.calls) if c.uri == parent), len(self.calls))
            self.calls[at:at] = calls

    def totals(self) -> tuple[int, int, list[str]]:
        """Prompt tokens, completion tokens (over the calls that reported them: see :meth:`unreported`) and
        the models (in order of first use) over every call."""
        models = list(dict.fromkeys(c.model for c in self.calls if c.model))
        return (sum(c.in_token or 0 for c in self.calls), sum(c.out_token or 0 for c in self.calls), models)

    def unreported(self) -> int:
        """How many calls reported no token counts (the totals leave them out)."""
        return sum(1 for c in self.calls if not c.reported)

    def print(self) -> None:
        """One line per call, then the totals, on stderr."""
        for c in self.calls:
            line = (_tokens(c.in_token, c.out_token, c.model) if c.reported
                    else f"{NOT_REPORTED}, Model: {c.model or '-'}")
            err_line(f"  {c.stage}: {line}  ({c.uri})")
        in_token, out_token, models = self.totals()
        line = _tokens(in_token, out_token, ", ".join(models) or "-")
        if missing := self.unreported():
            line += f" ({missing} of {len(self.calls)} calls: {NOT_REPORTED}; the totals leave them out)"
        err_line(line)


def _tokens(in_token: int | None, out_token: int | None, model: str) -> str:
    show = lambda n: "-" if n is None else str(n)  # noqa: E731 - one-line formatter
    return f"Input tokens: {show(in_token)} Output tokens: {show(out_token)} Model: {model or '-'}"


def _kind(question: str) -> str:
    from trustgraph_base.provenance.uris import parse_trace_uri

    parsed = parse_trace_uri(question)
    return {"graphrag": "GraphRAG", "docrag": "DocumentRAG"}.get(parsed.kind if parsed else "", "sub-query")


def _call(idx, uri: str, prefix: str = "") -> LlmCall | None:
    """The model call stage ``uri`` recorded, or None when it recorded none."""
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.provenance.uris import parse_trace_uri

    in_token, out_token = idx.integer(uri, ns.TG_IN_TOKEN), idx.integer(uri, ns.TG_OUT_TOKEN)
    model = idx.text(uri, ns.TG_LLM_MODEL)
    if in_token is None and out_token is None and model is None:
        return None
    parsed = parse_trace_uri(uri)
    stage = _STAGES.get(parsed.stage, parsed.stage) if parsed else "call"
    if parsed and parsed.stage == "analysis" and parsed.index is not None:
        stage = f"step {parsed.index}"
    return LlmCall(f"{prefix} {stage}".strip(), uri, in_token, out_token, model or "")
