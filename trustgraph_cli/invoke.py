"""tg-invoke-graph-rag, tg-invoke-document-rag, tg-invoke-agent: ask, stream the answer, show the trace live.

With ``--explainable`` each explain event is printed the moment it arrives, in this form,
while the answer streams to stdout::

    [question] urn:trustgraph:question:<uuid>
        Query: <question>

    [grounding] urn:trustgraph:prov:grounding:<uuid>
        Concepts: <seed entity>, <seed entity>, ...

    [exploration] urn:trustgraph:prov:exploration:<uuid>
        Retrieved <n> edge(s)

    [focus] urn:trustgraph:prov:focus:<uuid>
        Selected <k> edge(s)
          Edge: (<subject label>, <predicate label>, <object label>)
            Reason: <reasoning>
            Concept: <concept>  Score: <score>
            Source: Chunk <i> → Page <j> → <document title>

    [synthesis] urn:trustgraph:prov:synthesis:<uuid>

    <answer text>

The agent's blocks are ``[question]``, then per iteration ``[analysis]`` (thought and action),
the sub-query's ``[question]`` when its tool asked one, ``[observation]`` (what the tool
returned), and ``[conclusion]``; the texts of thoughts and observations are the ones the agent
streamed (the trace keeps them as librarian documents).  Plan-then-execute and supervisor runs
(``-p``) show ``[pattern decision]``, ``[plan]`` / ``[decomposition]``, ``[step n]`` / ``[finding n]``
in the order they complete, and ``[synthesis]``, each with the nodes it is derived from::

    [synthesis] urn:trustgraph:agent:<sid>/synthesis
        Synthesis ← Finding 1, Finding 2, Finding 3
"""

from __future__ import annotations

import uuid

import click

from .common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliError,
    TgCommand,
    check_names,
    connection_options,
    end_line,
    err_line,
    llm_options,
    out,
    out_text,
    quiet_logging,
    run_async,
)

#: What every query command uses besides its service: the triples, for the labels and sources of ``-x``.
QUERY_USES = ("triples",)


def _index(triples):
    from .trace_model import TraceIndex

    return TraceIndex(triples)


class ExplainPrinter:
    """Prints explain events (GraphRAG, DocumentRAG and agent) as they arrive."""

    def __init__(self, conn, user: str, collection: str, verbose: bool = False):
        from .traces import LabelCache

        self.conn, self.user, self.collection = conn, user, collection
        self.labels = LabelCache(conn, user, collection)
        self.synthesis_announced = False
        self.verbose = verbose
        #: (message type, iteration URI) -> text of the agent's thought and observation messages
        self.texts: dict[tuple[str, str], str] = {}

    def note(self, kind: str, iteration: str, text: str) -> None:
        """Remember a thought or observation the agent streamed, for its explain block."""
        self.texts[kind, iteration] = text

    async def event(self, uri: str, triples, edge_sources=()) -> None:
        from trustgraph_base.provenance import namespaces as ns

        idx = _index(triples)
        types = idx.types(uri)
        if ns.TG_QUESTION in types:
            out(f"[question] {uri}")
            out(f"    Query: {idx.text(uri, ns.TG_QUERY) or ''}")
            parent = idx.text(uri, ns.PROV_WAS_DERIVED_FROM)
            if parent:
                out(f"    Asked by: {parent}")
            out()
        elif ns.TG_GROUNDING in types:
            out(f"[grounding] {uri}")
            concepts = [o.value for o in idx.props.get(uri, {}).get(ns.TG_CONCEPT, [])]
            out(f"    Concepts: {', '.join(_short(c, 200) for c in concepts[:20])}{' …' if len(concepts) > 20 else ''}")
            out()
        elif ns.TG_EXPLORATION in types:
            out(f"[exploration] {uri}")
            chunks = idx.integer(uri, ns.TG_CHUNK_COUNT)
            if chunks is not None:
                out(f"    Retrieved {chunks} chunk(s)")
                await self._chunks(idx, uri)
            else:
                out("    " + exploration_summary(idx.integer(uri, ns.TG_EDGE_COUNT) or 0,
                                                idx.integer(uri, ns.TG_SENT_EDGE_COUNT),
                                                idx.integer(uri, ns.TG_SELECTION_TOKEN_BUDGET)))
            out()
        elif ns.TG_FOCUS in types:
            await self._focus(idx, uri, edge_sources)
        elif types & _PATTERN_NODES:
            self._pattern_node(idx, uri, types)
        elif ns.TG_SYNTHESIS in types:
            self.announce_synthesis(uri)
        elif ns.TG_ANALYSIS in types:
            out(f"[analysis] {uri}")
            out(f"    Thought: {_short(self.texts.get(('thought', uri), ''), 300)}")
            out(f"    Action: {idx.text(uri, ns.TG_ACTION) or ''} {idx.text(uri, ns.TG_ARGUMENTS) or ''}")
            out()
        elif ns.TG_OBSERVATION_TYPE in types:
            out(f"[observation] {uri}")
            analysis = idx.text(uri, ns.PROV_WAS_DERIVED_FROM) or ""
            out(f"    Observation: {_short(self.texts.get(('observation', analysis), ''), 300)}")
            error = idx.text(uri, ns.TG_TOOL_ERROR)
            if error:
                out(f"    Tool error: {_short(error, 300)}")
            out()
        elif ns.TG_CONCLUSION in types:
            out(f"[conclusion] {uri}")
            reason = idx.text(uri, ns.TG_TERMINATION_REASON)
            if reason:
                out(f"    Stopped: {reason}")
            out()
        elif ns.TG_ERROR in types:
            out(f"[error] {uri}")
            out(f"    Stage: {idx.text(uri, ns.TG_STAGE) or ''}")
            out(f"    Message: {idx.text(uri, ns.TG_ERROR_MESSAGE) or ''}")
            out()

    def _pattern_node(self, idx, uri: str, types: set[str]) -> None:
        """A node of a plan-then-execute or supervisor run, with what it is derived from: a join shows as
        ``Synthesis ← Finding 1, Finding 2, Finding 3``."""
        from trustgraph_base.provenance import namespaces as ns
        from trustgraph_base.provenance.trace_model import natural_key, node_name

        parents = sorted((o.value for o in idx.props.get(uri, {}).get(ns.PROV_WAS_DERIVED_FROM, [])), key=natural_key)
        name = node_name(uri)
        out(f"[{name.lower()}] {uri}")
        out(f"    {name} ← {', '.join(node_name(p, uri) for p in parents)}")
        values = idx.props.get(uri, {})
        if ns.TG_PATTERN_DECISION in types:
            out(f"    Pattern: {idx.text(uri, ns.TG_PATTERN) or ''}")
            out(f"    Reason: {_short(idx.text(uri, ns.TG_REASONING) or '', 300)}")
        elif ns.TG_PLAN in types:
            for step in sorted((o.value for o in values.get(ns.TG_PLAN_STEP, [])), key=natural_key):
                out(f"    Step {_short(step, 200)}")
        elif ns.TG_DECOMPOSITION in types:
            for n, goal in enumerate((o.value for o in values.get(ns.TG_SUBAGENT_GOAL, [])), 1):
                out(f"    Goal {n}: {_short(goal, 200)}")
        elif types & {ns.TG_STEP_RESULT, ns.TG_FINDING}:
            goal = idx.text(uri, ns.TG_PLAN_STEP) or idx.text(uri, ns.TG_SUBAGENT_GOAL) or ""
            out(f"    Goal: {_short(goal, 200)}")
            text = self.texts.get(("observation", uri), "")
            if text:
                out(f"    Result: {_short(text, 300)}")
            error = idx.text(uri, ns.TG_TOOL_ERROR)
            if error:
                out(f"    Error: {_short(error, 300)}")
        out()

    def announce_synthesis(self, uri: str) -> None:
        if not self.synthesis_announced:
            self.synthesis_announced = True
            out(f"[synthesis] {uri}")
            out()

    async def _focus(self, idx, uri: str, edge_sources) -> None:
        from trustgraph_base.provenance import namespaces as ns
        from trustgraph_base.rdf.labels import term_label
        from trustgraph_base.rdf.terms import serialize_term
        from trustgraph_base.schema import IRI, TRIPLE, Term

        from .trace_model import natural_key
        from .traces import chain_text, iris_in_terms

        sels = sorted((o.value for o in idx.props.get(uri, {}).get(ns.TG_SELECTED_EDGE, []) if o.type == IRI),
                      key=natural_key)
        edges = [idx.one(s, ns.TG_EDGE) for s in sels]
        labels = await self.labels.resolve(iris_in_terms([e for e in edges if e is not None]))
        sources: dict[str, list[str]] = {}
        for es in edge_sources or ():
            key = serialize_term(Term(TRIPLE, triple=es.edge))
            sources.setdefault(key, []).append(chain_text([{"uri": link.uri, "type": link.type, "label": link.label}
                                                           for link in es.chain]))
        out(f"[focus] {uri}")
        out(f"    Selected {len(sels)} edge(s)")
        for sel, edge in zip(sels, edges, strict=True):
            if edge is None or edge.type != TRIPLE:
                out(f"      Edge: (missing triple term in {sel})")
                continue
            t = edge.triple
            out(f"      Edge: ({term_label(t.s, labels)}, {term_label(t.p, labels)}, {term_label(t.o, labels)})")
            out(f"        Reason: {idx.text(sel, ns.TG_REASONING) or ''}")
            unusable = idx.text(sel, ns.TG_REASONING_UNUSABLE)
            if unusable:
                out(f"        Reason unusable: {unusable}")
            concept, score = idx.text(sel, ns.TG_CONCEPT), idx.text(sel, ns.TG_SCORE)
            if concept or score:
                out(f"        Concept: {concept or '-'}  Score: {score or '-'}")
            for chain in sources.get(serialize_term(edge), []) or ["(no extraction provenance found)"]:
                out(f"        Source: {chain}")
        dropped = idx.integer(uri, ns.TG_DROPPED_COUNT)
        if dropped:
            out(f"    Skipped {dropped} unusable line(s) of the selection output")
        unusable_count = idx.integer(uri, ns.TG_UNUSABLE_REASONING_COUNT)
        if unusable_count:
            out(f"    {unusable_count} reasoning(s) unusable (they say nothing of their edge); the edges stay selected")
        out()

    async def _chunks(self, idx, uri: str) -> None:
        from trustgraph_base.provenance import namespaces as ns
        from trustgraph_base.schema import IRI

        from .traces import chain_text, chunk_chains

        chunks = [o.value for o in idx.props.get(uri, {}).get(ns.TG_SELECTED_CHUNK, []) if o.type == IRI]
        chains = await chunk_chains(self.conn, self.user, self.collection, chunks)
        for c in chunks:
            out(f"      Chunk: {c}")
            for chain in chains.get(c, []):
                out(f"        Source: {chain_text(chain)}")


def _pattern_node_types() -> frozenset[str]:
    from trustgraph_base.provenance import namespaces as ns

    return frozenset({ns.TG_PATTERN_DECISION, ns.TG_PLAN, ns.TG_STEP_RESULT, ns.TG_DECOMPOSITION, ns.TG_FINDING,
                      ns.TG_ANSWER_TYPE})


#: Nodes of the agent patterns (an agent's Synthesis is a tg:Answer too; a RAG Synthesis is not).
_PATTERN_NODES = _pattern_node_types()


SHOW_USAGE_HELP = ("print on stderr the model, prompt and completion tokens of every LLM call, as the trace "
                   "records them, and the totals")


def _usage_log(show_usage: bool):
    from .usage import UsageLog

    return UsageLog() if show_usage else None


def exploration_summary(edge_count: int, sent: int | None, budget: int | None) -> str:
    """The Exploration line: edges retrieved and, when the trace records it, how many the selector was shown."""
    text = f"Retrieved {edge_count} edge(s)"
    if sent is None:
        return text
    return text + f", {sent} sent to the model ({f'budget {budget} tokens' if budget else 'no token budget'})"


def _counts_here(uri: str, session_id: str) -> bool:
    """Whether an agent's explain event adds to ``--show-usage`` as it arrives: a stage of the run's own trace,
    or a sub-trace's Question (whose calls, a supervisor's sub-agents' included, are read from the store at the
    end; the sub-agents' forwarded last stages would count twice)."""
    from trustgraph_base.provenance.uris import agent_session_uri, trace_root_of

    root = trace_root_of(uri)
    return root == agent_session_uri(session_id) or root == uri


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


@click.command("tg-invoke-graph-rag", cls=TgCommand)
@click.option("-q", "--query", "question", required=True, help="the question")
@click.option("-x", "--explainable", is_flag=True, help="print explain events as they arrive")
@click.option("--no-streaming", is_flag=True, help="print the answer when complete")
@click.option("-e", "--entity-limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--triple-limit", type=click.IntRange(1, 10000), default=30, show_default=True)
@click.option("-s", "--max-subgraph-size", type=click.IntRange(1, 100000), default=150, show_default=True)
@click.option("-p", "--max-path-length", type=click.IntRange(1, 5), default=2, show_default=True)
@click.option("--edge-limit", type=click.IntRange(1, 1000), default=25, show_default=True)
@click.option("--selection-token-budget", type=click.IntRange(0, None), default=None,
              envvar="TG_SELECTION_TOKEN_BUDGET",
              help="most tokens of the edge-selection prompt: the best-ranked candidate edges that fit are sent to "
                   "the model; 0 = every candidate  [env TG_SELECTION_TOKEN_BUDGET; default: the service's, 3000]")
@click.option("--show-usage", is_flag=True, help=SHOW_USAGE_HELP)
@llm_options
@connection_options
@run_async
async def graph_rag(question, explainable, no_streaming, entity_limit, triple_limit, max_subgraph_size,
                    max_path_length, edge_limit, selection_token_budget, show_usage, user, collection, target):
    """Ask the knowledge graph; with -x, show why: explored edges, selected edges with reasons, sources."""
    from trustgraph_base.schema import GraphRagQuery

    check_names(user, collection)
    quiet_logging()
    async with target.connect(QUERY_USES + ("graph-rag",)) as conn:
        printer = ExplainPrinter(conn, user, collection)
        req = GraphRagQuery(query=question, user=user, collection=collection, entity_limit=entity_limit,
                            triple_limit=triple_limit, max_subgraph_size=max_subgraph_size,
                            max_path_length=max_path_length, edge_limit=edge_limit, streaming=not no_streaming,
                            selection_token_budget=selection_token_budget)
        await stream_rag(conn, "graph-rag", req, printer, explainable, _usage_log(show_usage))


async def stream_rag(conn, service: str, req, printer: ExplainPrinter, explainable: bool, usage=None) -> None:
    """Send a GraphRAG or DocumentRAG query, print its answer as it streams (and its explain events, if asked);
    with a :class:`~trustgraph_cli.usage.UsageLog` as ``usage``, print its LLM calls on stderr at the end."""
    from trustgraph_base.provenance.uris import final_stage_uris

    client = await conn.client(service)
    wrote_answer = False
    question_uri = ""
    async for msg in client.stream(req):
        if msg.error is not None:
            raise CliError(f"{service}: {msg.error.message}", EXIT_FAILED)
        if msg.message_type == "explain":
            if not question_uri:
                question_uri = msg.explain_id
            if usage is not None:
                usage.event(msg.explain_id, msg.explain_triples)
            if explainable:
                await printer.event(msg.explain_id, msg.explain_triples, getattr(msg, "edge_sources", ()))
        elif msg.response:
            if explainable and question_uri:
                printer.announce_synthesis(final_stage_uris(question_uri)[0])
            out_text(msg.response, nl=False)
            wrote_answer = True
    if wrote_answer:
        end_line()
    if usage is not None:
        usage.print()


@click.command("tg-invoke-document-rag", cls=TgCommand)
@click.option("-q", "--query", "question", required=True, help="the question")
@click.option("-x", "--explainable", is_flag=True, help="print explain events as they arrive")
@click.option("--no-streaming", is_flag=True)
@click.option("-d", "--doc-limit", type=click.IntRange(1, 1000), default=10, show_default=True)
@click.option("--show-usage", is_flag=True, help=SHOW_USAGE_HELP)
@llm_options
@connection_options
@run_async
async def document_rag(question, explainable, no_streaming, doc_limit, show_usage, user, collection, target):
    """Ask the documents; with -x, show which chunks (and pages, documents) the answer used."""
    from trustgraph_base.schema import DocumentRagQuery

    check_names(user, collection)
    quiet_logging()
    async with target.connect(QUERY_USES + ("document-rag",)) as conn:
        printer = ExplainPrinter(conn, user, collection)
        req = DocumentRagQuery(query=question, user=user, collection=collection, doc_limit=doc_limit,
                               streaming=not no_streaming)
        await stream_rag(conn, "document-rag", req, printer, explainable, _usage_log(show_usage))


@click.command("tg-invoke-agent", cls=TgCommand)
@click.option("-q", "--query", "question", required=True, help="the question")
@click.option("-x", "--explainable", is_flag=True, help="print each Analysis as it happens")
@click.option("-v", "--verbose", is_flag=True, help="show thoughts and observations")
@click.option("--session-id", default=None, help="record the trace under this id (default: a new uuid)")
@click.option("--no-trace", is_flag=True, help="do not record provenance (sends no session id)")
@click.option("-g", "--group", multiple=True, help="restrict the tools to these names (repeatable)")
@click.option("--max-iterations", type=click.IntRange(1, 50), default=None)
@click.option("-p", "--pattern", type=click.Choice(["react", "plan-then-execute", "supervisor"]), default=None,
              help="how the agent works (default: its router chooses, and the trace records why)")
@click.option("--show-usage", is_flag=True, help=SHOW_USAGE_HELP)
@llm_options
@connection_options
@run_async
async def agent(question, explainable, verbose, session_id, no_trace, group, max_iterations, pattern, show_usage,
                user, collection, target):
    """Ask the agent (react, plan-then-execute or supervisor); its trace (and linked sub-traces) is recorded by
    default."""
    from trustgraph_base.provenance.uris import check_session_id
    from trustgraph_base.schema import AgentRequest

    check_names(user, collection)
    if show_usage and no_trace:
        raise CliError("--show-usage reads the LLM calls from the trace: leave out --no-trace", EXIT_USAGE)
    sid = "" if no_trace else (session_id or str(uuid.uuid4()))
    if sid:
        try:
            check_session_id(sid)
        except ValueError as e:
            raise CliError(str(e), EXIT_USAGE) from None
    quiet_logging()
    async with target.connect(QUERY_USES + ("agent",)) as conn:
        printer = ExplainPrinter(conn, user, collection, verbose)
        client = await conn.client("agent")
        req = AgentRequest(question=question, user=user, collection=collection, session_id=sid,
                           group=list(group), max_iterations=max_iterations or 0, pattern=pattern or "")
        answer_written = False
        usage = _usage_log(show_usage)
        async for msg in client.stream(req):
            if msg.message_type == "error" or msg.error is not None:
                raise CliError(f"agent: {msg.error.message if msg.error else msg.content}", EXIT_FAILED)
            if msg.message_type == "explain":
                if usage is not None and _counts_here(msg.explain_id, sid):
                    usage.event(msg.explain_id, msg.explain_triples)
                if explainable:
                    await printer.event(msg.explain_id, msg.explain_triples)
            elif msg.message_type in ("thought", "observation"):
                printer.note(msg.message_type, msg.message_id, msg.content)
                if not verbose:
                    continue
                line = f"{'Thought' if msg.message_type == 'thought' else 'Observation'}: {_short(msg.content, 2000)}"
                if explainable:
                    out(line)  # interleaved with the explain blocks, in the order things happened
                else:
                    err_line(line)  # stdout keeps just the answer
            elif msg.message_type == "answer" and msg.content:
                out_text(msg.content)
                answer_written = True
        if not answer_written:
            raise CliError("the agent finished without an answer", EXIT_FAILED)
        if usage is not None:
            await usage.add_sub_traces(conn, user, collection)
            usage.print()
