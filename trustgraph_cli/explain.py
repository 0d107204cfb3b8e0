"""tg-list-explain-traces, tg-show-explain-trace, tg-delete-explain-trace, tg-prune-explain-traces."""

from __future__ import annotations

import json
import re

import click

from trustgraph_base.provenance.uris import check_question_uri, parse_trace_uri
from trustgraph_base.store.triples import MAX_TRACE_LIMIT

from .common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliError,
    TgCommand,
    check_names,
    connection_options,
    out,
    out_document,
    out_json,
    quiet_logging,
    run_async,
)
from .terminal_text import printable, quoted

#: What showing a trace uses: its triples and the documents it stores (answers, an agent's thoughts and observations).
TRACE_USES = ("triples", "librarian")
#: What a source line says when the document an edge or chunk came from was removed (tg-remove-library-document).
SOURCE_REMOVED = "source removed (the document it came from is no longer loaded)"
_TYPES = {"graphrag": "GraphRAG", "docrag": "DocRAG", "agent": "Agent"}


@click.command("tg-list-explain-traces", cls=TgCommand)
@click.option("--limit", type=click.IntRange(1, MAX_TRACE_LIMIT), default=50, show_default=True,
              help=f"traces per page (at most {MAX_TRACE_LIMIT}, as the service allows)")
@click.option("--type", "kind", type=click.Choice(["graphrag", "docrag", "agent"]), default=None)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--cursor", default="", help="continue after a previous page (printed as next_cursor in JSON)")
@connection_options
@run_async
async def list_traces(limit, kind, fmt, cursor, user, collection, target):
    """List stored traces, newest first; sub-traces are shown under the trace that asked for them."""
    from trustgraph_base.schema import TraceListRequest

    check_names(user, collection)
    quiet_logging()
    async with target.connect(("trace-list",)) as conn:
        page = await conn.request("trace-list", TraceListRequest(user=user, collection=collection, type=kind or "",
                                                                 limit=limit, cursor=cursor))
        status = await _statuses(conn, user, collection, [t.uri for t in page.traces])
    traces = page.traces
    if fmt == "json":
        out_json({"traces": [{"id": t.uri, "type": _TYPES.get(t.type, t.type), "question": t.question,
                              "time": t.time, "parent": t.parent or None, "status": status[t.uri]}
                             for t in traces],
                  "next_cursor": page.next_cursor or None})
        return
    if not traces:
        out(f"No traces found for user {user}, collection {collection}.")
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def cell(value: str) -> Text:  # a cell is data: neither console markup ("[/x]") nor control characters
        return Text(printable(value))

    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("Session", "Type", "Question", "Time"):
        table.add_column(col, overflow="fold" if col == "Session" else "ellipsis", no_wrap=col != "Question")
    in_page = {t.uri for t in traces}
    # a sub-trace is shown under its parent when the parent is a top-level row of this page; any other
    # (a sub-trace of a sub-trace, or a stored cycle) gets a row of its own, so every listed trace shows
    top = {t.uri for t in traces if not t.parent or _root_question(t.parent) not in in_page
           or _root_question(t.parent) == t.uri}
    children: dict[str, list] = {}
    for t in traces:
        if t.uri not in top and _root_question(t.parent) in top:
            children.setdefault(_root_question(t.parent), []).append(t)
    shown_under = {c.uri for cs in children.values() for c in cs}
    for t in traces:
        if t.uri in shown_under:
            continue
        mark = f" (sub-trace of {t.parent})" if t.parent else ""
        table.add_row(cell(t.uri), cell(_TYPES.get(t.type, t.type)),
                      cell(_status_mark(status[t.uri]) + _truncate(t.question, 60) + mark), cell(t.time))
        for c in children.get(t.uri, []):
            table.add_row(cell(f"  └ {c.uri}"), cell(_TYPES.get(c.type, c.type)),
                          cell(_status_mark(status[c.uri]) + _truncate(c.question, 56)), cell(c.time))
    Console(width=max(160, 40), soft_wrap=False).print(table)
    if page.next_cursor:
        out(f"(more: --cursor {page.next_cursor})")


async def _statuses(conn, user: str, collection: str, uris: list[str]) -> dict[str, str]:
    """``complete`` / ``failed`` / ``incomplete`` of each listed trace, from one batched look-up of final stages."""
    from trustgraph_base.provenance.trace_reading import trace_statuses

    return await trace_statuses(conn, user, collection, uris)


def _status_mark(status: str) -> str:
    """A finished trace needs no mark; the others say so in front of their question."""
    return "" if status == "complete" else f"[{status}] "


def _root_question(analysis_uri: str) -> str:
    """``urn:trustgraph:agent:<sid>/i2`` -> ``urn:trustgraph:agent:<sid>`` (the agent trace that asked a sub-query)."""
    trace = parse_trace_uri(analysis_uri)
    return trace.question if trace is not None and trace.kind == "agent" else analysis_uri


def _truncate(text: str, n: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 3] + "..."


def check_trace_uri(uri: str) -> str:
    """``uri`` if it is a Question URI with an id as the services make them (short enough to echo whole)."""
    try:
        check_question_uri(uri)
    except ValueError:
        raise CliError(f"not a trace URI: {quoted(uri)} (expected urn:trustgraph:question:<uuid>, "
                       f"urn:trustgraph:docrag:<uuid> or urn:trustgraph:agent:<session id>)", EXIT_USAGE) from None
    return uri


@click.command("tg-show-explain-trace", cls=TgCommand)
@click.argument("uri")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "turtle", "trig"]), default="text",
              show_default=True)
@click.option("--show-provenance", is_flag=True, help="show the source chain of every selected edge or chunk")
@click.option("--max-answer", type=click.IntRange(0, 10_000_000), default=2000, show_default=True,
              help="characters of the answer to print (0 = all)")
@connection_options
@run_async
async def show_trace(uri, fmt, show_provenance, max_answer, user, collection, target):
    """Show one stored trace: every stage, edge reasons and sources, the answer; or export it as RDF."""
    from trustgraph_base.provenance.trace_reading import load_trace_triples, read_trace

    from .trace_model import TraceIndex, trace_type

    check_names(user, collection)
    check_trace_uri(uri)
    quiet_logging()
    async with target.connect(TRACE_USES) as conn:
        if fmt in ("turtle", "trig"):
            from trustgraph_base.rdf.export import serialize

            triples = await load_trace_triples(conn, user, collection, uri)
            if not triples or trace_type(TraceIndex(triples), uri) is None:
                raise CliError(_no_trace(uri, user, collection), EXIT_FAILED)
            out_document(serialize(triples, fmt, drop_graphs=False) if fmt == "trig" else
                         serialize(triples, "turtle", drop_graphs=True))
            return
        read = await read_trace(conn, user, collection, uri, sources=show_provenance or fmt == "json")
        if read is None:
            raise CliError(_no_trace(uri, user, collection), EXIT_FAILED)
    if fmt == "json":
        out_json(read.trace)
    else:
        render_text(read.trace, show_provenance, max_answer)


def _no_trace(uri: str, user: str, collection: str) -> str:
    return f"no trace {uri} in collection {collection} of user {user}"


def _usage_text(usage: dict | None) -> str:
    """``Model: m (120 in / 30 out tokens)`` for a stage's model call (``tokens not reported`` when the endpoint
    sent no usage); ``""`` when none was recorded."""
    if not usage:
        return ""
    tokens = " / ".join(f"{usage[k]} {k.split('_')[0]}" for k in ("in_token", "out_token") if usage[k] is not None)
    return f"Model: {usage.get('model') or '?'}" + (f" ({tokens} tokens)" if tokens else " (tokens not reported)")


def _answer(text: str | None, max_answer: int) -> list[str]:
    if text is None:
        return ["  (answer not available)"]
    if max_answer and len(text) > max_answer:
        text = text[:max_answer] + f" … [{len(text) - max_answer} more characters; use --max-answer 0]"
    return ["  " + line for line in text.splitlines()] or ["  "]


_STATUS_TEXT = {
    "complete": "complete",
    "failed": "failed (see Error below)",
    "incomplete": "INCOMPLETE - no final stage and no error were recorded: the query was interrupted (e.g. the "
                  "process running it was killed); the stages below are all that was stored",
}


def render_text(trace: dict, show_provenance: bool, max_answer: int, indent: str = "") -> None:
    """The readable form of a trace (also used for agent sub-traces, indented)."""
    from .traces import chain_text

    def p(line: str = "") -> None:
        out(indent + line if line else "")

    kind = trace["type"]
    p(f"=== {_TYPES[kind]} trace: {trace['uri']} ===")
    p(f"Question: {trace['question']}")
    p(f"Time: {trace['time']}")
    status = trace["status"]
    p(f"Status: {_STATUS_TEXT.get(status, status)}")
    if trace.get("parent"):
        p(f"Asked by: {trace['parent']}")
    if trace.get("otel_trace_id"):
        p(f"OpenTelemetry trace: {trace['otel_trace_id']}")
    if trace.get("grounding"):
        p()
        p("--- Grounding ---")
        p("Concepts: " + ", ".join(trace["grounding"]["concepts"][:20])
          + (" …" if len(trace["grounding"]["concepts"]) > 20 else ""))
    if kind == "graphrag":
        exp, focus, syn = trace["exploration"], trace["focus"], trace["synthesis"]
        if exp:
            p()
            p("--- Exploration ---")
            p(f"Retrieved {exp['edge_count']} edge(s) from the knowledge graph")
            if exp.get("sent_edge_count") is not None:
                budget = exp.get("selection_token_budget")
                p(f"{exp['sent_edge_count']} sent to the model "
                  f"({f'budget {budget} tokens' if budget else 'no token budget'}; "
                  f"prompt about {exp.get('selection_prompt_tokens')} tokens)")
            if exp["seed_entities"]:
                p("Seed entities: " + ", ".join(s["label"] for s in exp["seed_entities"][:20])
                  + (" …" if len(exp["seed_entities"]) > 20 else ""))
        if focus:
            p()
            p("--- Focus (edge selection) ---")
            if _usage_text(focus.get("usage")):
                p(_usage_text(focus["usage"]))
            p(f"Selected {len(focus['selected_edges'])} edge(s):")
            for i, e in enumerate(focus["selected_edges"], 1):
                lab = e["labels"] or {"s": "?", "p": "?", "o": "?"}
                p(f"  {i}. ({lab['s']}, {lab['p']}, {lab['o']})")
                p(f"     Reason: {e['reasoning']}")
                if e.get("reasoning_unusable"):
                    p(f"     Reason unusable: {e['reasoning_unusable']}")
                if e.get("concept") or e.get("score") is not None:
                    score = f"{e['score']:.4f}" if e.get("score") is not None else "-"
                    p(f"     Concept: {e.get('concept') or '-'}  Score: {score}")
                if show_provenance and e.get("source_removed"):
                    p(f"     Source: {SOURCE_REMOVED}")
                elif show_provenance:
                    for chain in e["sources"] or [[]]:
                        p(f"     Source: {chain_text(chain) if chain else '(no extraction provenance found)'}")
            if focus["dropped"]:
                p(f"Skipped {focus['dropped']} unusable line(s) of the selection output")
            if focus.get("unusable_reasoning"):
                p(f"{focus['unusable_reasoning']} reasoning(s) unusable (they say nothing of their edge); "
                  "the edges stay selected")
        if syn:
            p()
            p("--- Synthesis ---")
            if _usage_text(syn.get("usage")):
                p(_usage_text(syn["usage"]))
            p("Answer:")
            for line in _answer(syn["answer"], max_answer):
                p(line)
    elif kind == "docrag":
        exp, syn = trace["exploration"], trace["synthesis"]
        if exp:
            p()
            p("--- Exploration ---")
            p(f"Retrieved {exp['chunk_count']} chunk(s) from the document store")
            for c in exp["chunks"]:
                p(f"  - {c['uri']}")
                if c.get("source_removed"):
                    p(f"    Source: {SOURCE_REMOVED}")
                elif c["chain"]:
                    p(f"    Source: {chain_text(c['chain'])}")
        if syn:
            p()
            p("--- Synthesis ---")
            if _usage_text(syn.get("usage")):
                p(_usage_text(syn["usage"]))
            p("Answer:")
            for line in _answer(syn["answer"], max_answer):
                p(line)
    else:
        _render_pattern(trace, p, show_provenance, max_answer, indent)
        for i, a in enumerate(trace["analyses"], 1):
            p()
            p(f"--- Analysis {i} ({a['uri']}) ---")
            if _usage_text(a.get("usage")):
                p(_usage_text(a["usage"]))
            p(f"Thought: {a['thought'] if a['thought'] is not None else ''}")
            p(f"Action: {a['action']}")
            p(f"Arguments: {json.dumps(a['arguments'], ensure_ascii=False)}")
            p("Observation:")
            for line in _answer(a["observation"], max_answer):
                p(line)
            if a.get("tool_error"):
                p(f"Tool error: {a['tool_error']}")
            for sub in a["sub_traces"]:
                p()
                render_text(sub, show_provenance, max_answer, indent + "    ")
        if trace["conclusion"]:
            c = trace["conclusion"]
            p()
            p("--- Conclusion ---")
            if _usage_text(c.get("usage")):
                p(_usage_text(c["usage"]))
            if c.get("termination_reason"):
                p(f"Stopped: {c['termination_reason']}")
            for line in _answer(c["answer"], max_answer):
                p(line)
    if trace.get("error"):
        e = trace["error"]
        p()
        p("--- Error ---")
        p(f"Stage: {e['stage']}")
        p(f"Message: {e['message']}")


def _render_pattern(trace: dict, p, show_provenance: bool, max_answer: int, indent: str) -> None:
    """The router's decision, a plan's steps or a supervisor's findings, and the synthesis that joins them: each
    node names what it is derived from (``Synthesis ← Finding 1, Finding 2``), so the DAG's joins show."""
    from trustgraph_base.provenance.trace_model import node_name

    root = trace["uri"]

    def joins(name: str, node: dict) -> str:
        return f"{name} ← {', '.join(node_name(i, root) for i in node['inputs'])}"

    if trace.get("pattern"):
        d = trace["pattern"]
        p()
        p(f"--- Pattern decision ({d['uri']}) ---")
        p(f"Pattern: {d['pattern']}")
        p(f"Reason: {d['reason']}")
    if trace.get("plan"):
        p()
        p(f"--- Plan ({trace['plan']['uri']}) ---")
        for step in trace["plan"]["steps"]:
            p(f"  {step}")
    if trace.get("decomposition"):
        d = trace["decomposition"]
        p()
        p(f"--- Decomposition ({d['uri']}) ---")
        for n, goal in enumerate(d["goals"], 1):
            p(f"  Goal {n}: {goal}")
        for sub in d["sub_agents"]:
            p()
            render_text(sub, show_provenance, max_answer, indent + "    ")
    for b in (*trace.get("step_results", []), *trace.get("findings", [])):
        name = node_name(b["uri"], root)
        p()
        p(f"--- {joins(name, b)} ---")
        p(f"Goal: {b['goal']}" + (f"  Tool: {b['tool']}" if b.get("tool") else ""))
        if b.get("error"):
            p(f"Error: {b['error']}")
        else:
            for line in _answer(b["result"], max_answer):
                p(line)
        for sub in b.get("sub_traces", []):
            p()
            render_text(sub, show_provenance, max_answer, indent + "    ")
    if trace.get("synthesis"):
        syn = trace["synthesis"]
        p()
        p(f"--- {joins('Synthesis', syn)} ---")
        if _usage_text(syn.get("usage")):
            p(_usage_text(syn["usage"]))


#: Longest duration accepted (100 years; trace-admin refuses more).
MAX_DURATION_SECONDS = 100 * 365.25 * 86400
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str, *, allow_zero: bool = False, option: str | None = None) -> float:
    """``90s``, ``15m``, ``12h``, ``30d``, ``2w`` -> seconds (at most 100 years); ``option`` names it in errors."""
    shown = text if len(text or "") <= 40 else text[:40] + "…"
    m = re.fullmatch(r"\s*(\d{1,30}(?:\.\d{1,30})?)\s*([smhdw])\s*", text or "")
    if not m:
        raise click.BadParameter(f"{shown!r}: use a number and a unit s, m, h, d or w (e.g. 30d)", param_hint=option)
    value = float(m.group(1)) * _UNITS[m.group(2)]
    if value > MAX_DURATION_SECONDS:
        raise click.BadParameter(f"{shown!r}: at most 100 years (e.g. 5200w)", param_hint=option)
    if value <= 0 and not (allow_zero and value == 0):
        raise click.BadParameter(f"{shown!r}: the duration must be positive", param_hint=option)
    return value


class Duration(click.ParamType):
    """A duration option (:func:`parse_duration`), checked while the command line is parsed, so a bad
    value is a one-line usage error like any other."""

    name = "duration"

    def __init__(self, allow_zero: bool = False):
        self.allow_zero = allow_zero

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        try:
            return parse_duration(value, allow_zero=self.allow_zero)
        except click.BadParameter as e:
            self.fail(e.message, param, ctx)


_GRACE = click.option("--grace", type=Duration(allow_zero=True), default="1h", show_default=True,
                      help="a trace without its final stage that started less than this ago is still being "
                           "written: left alone (0s: no grace)")


def _report(r, dry_run: bool) -> None:
    verb = "Would delete" if dry_run else "Deleted"
    out(f"{verb} {len(r.traces)} trace(s), {r.triples} triple(s), {r.documents} answer document(s).")
    if r.skipped:
        out(f"Skipped {r.skipped} trace(s) still being written (no final stage yet, younger than the grace period).")
    if r.skipped_documents:
        out(f"Left {r.skipped_documents} document(s) alone: a trace points at them, but they are not its answers.")


@click.command("tg-delete-explain-trace", cls=TgCommand)
@click.argument("uri")
@click.option("--dry-run", is_flag=True, help="report what would be deleted")
@_GRACE
@connection_options
@run_async
async def delete_trace(uri, dry_run, grace, user, collection, target):
    """Delete one trace whole (all stages, edge selections, sub-traces, its stored answers) and nothing else."""
    from trustgraph_base.schema import TraceAdminRequest

    check_names(user, collection)
    check_trace_uri(uri)
    quiet_logging()
    async with target.connect(("trace-admin",)) as conn:
        r = await conn.request("trace-admin", TraceAdminRequest(operation="delete", user=user, collection=collection,
                                                                uri=uri, dry_run=dry_run, grace_seconds=grace))
    _report(r, dry_run)


@click.command("tg-prune-explain-traces", cls=TgCommand)
@click.option("--older-than", "older_than", type=Duration(), required=True, help="e.g. 30d, 12h, 90m")
@click.option("--dry-run", is_flag=True, help="report what would be deleted")
@_GRACE
@connection_options
@run_async
async def prune_traces(older_than, dry_run, grace, user, collection, target):
    """Delete every trace of a user and collection that started before now minus a duration."""
    from trustgraph_base.schema import TraceAdminRequest

    check_names(user, collection)
    quiet_logging()
    async with target.connect(("trace-admin",)) as conn:
        r = await conn.request("trace-admin", TraceAdminRequest(operation="prune", user=user, collection=collection,
                                                                older_than_seconds=older_than, dry_run=dry_run,
                                                                grace_seconds=grace))
    _report(r, dry_run)
