"""Edge-selection quality (issue 33): precision and recall on a labelled set, answer correctness, prompt tokens.

The sample corpus is loaded on the embedded stack (pattern extractor) and the real graph-rag service answers the
questions of ``bench/selection_labels.json``, hand-checked labels: for each question the edges that answer it (by
their labels) and the key terms a correct answer mentions.  Per backend, and per edge-selection token budget (the
default, 3,000 tokens, and 0 = every candidate sent):

* edge-selection precision (selected edges that answer the question / selected edges) and recall (answering edges
  selected / answering edges), over all questions (micro averages);
* answer correctness: the share of answers that mention every key term;
* prompt tokens per GraphRAG query: the edge-selection prompt as recorded in the trace (its estimate,
  ``tg:selectionPromptTokens``) plus the synthesis prompt (the same estimate of the rendered kg-synthesis prompt),
  p50 and max; with a real model also the prompt tokens the model reported (the trace's usage);
* edge-selection recall with the budget / recall with every candidate (target >= 1: the cut loses nothing);
* with a real model, also the prompt tokens the model reported per DocumentRAG and per agent query (the sample
  corpus's ``document`` and ``agent`` questions, summed over the stages' recorded usage; the agent's figure is its
  own calls, not the queries its tools ran).
  The ``extractive`` backend spends no model tokens, so it has none.

Backends: ``extractive`` always; ``openai`` (a real OpenAI-compatible endpoint, e.g. llama.cpp's server) when
``OPENAI_BASE_URL`` is set (its timeout: ``TG_BENCH_LLM_TIMEOUT`` seconds, default 600).  Targets: <= 3,500 prompt
tokens per GraphRAG query at the defaults, synthesis included; recall with the budget no worse than without.

    python -m bench.selection_quality [--quick] [--budgets 3000,0] [--backend openai] [--json out.json]

Each backend and budget also gets the p50 end-to-end latency of its GraphRAG queries.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import Figure, Results
from .harness import Suite, bench_parser, report, run_on_suite, settle, shared_embedder, stream_request
from .ingest import ensure_corpus

LABELS = Path(__file__).with_name("selection_labels.json")
#: The token budgets compared: the default and none.
BUDGETS = (3000, 0)
PROMPT_TOKEN_TARGET = 3500


@dataclass
class Labelled:
    question: str
    edges: set[tuple[str, str, str]]
    key_terms: list[str]


@dataclass
class Outcome:
    """What one GraphRAG query selected and answered, and what its prompts cost."""

    selected: list[tuple[str, str, str]] = field(default_factory=list)
    answer: str = ""
    candidates: int = 0
    sent: int = 0
    selection_tokens: int = 0
    synthesis_tokens: int = 0
    reported_tokens: int = 0
    seconds: float = 0.0


def labelled_set() -> list[Labelled]:
    data = json.loads(LABELS.read_text(encoding="utf-8"))
    return [Labelled(q["question"], {tuple(e) for e in q["edges"]}, q["key_terms"]) for q in data["questions"]]


def backends() -> list[str]:
    return ["extractive"] + (["openai"] if os.environ.get("OPENAI_BASE_URL") else [])


def parse_budgets(text: str) -> tuple[int, ...]:
    """``"3000,0"`` -> (3000, 0): the budgets to compare, the first the one whose recall is set against 0's."""
    try:
        budgets = tuple(int(b) for b in text.split(","))
    except ValueError:
        raise SystemExit(f"--budgets: {text!r} is not a comma-separated list of whole token counts") from None
    if not budgets or any(b < 0 for b in budgets):
        raise SystemExit(f"--budgets: {text!r} must list token counts >= 0 (0: every candidate)")
    return budgets


async def _ask(client, store, user: str, collection: str, question: str, budget: int) -> Outcome:
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.rdf.labels import term_label
    from trustgraph_base.schema import GraphRagQuery, Term, TriplePattern, iri
    from trustgraph_flow.model.prompts.templates import render, without_terms
    from trustgraph_flow.retrieval.graph_rag.budget import estimate_tokens

    started = time.monotonic()
    answer = await stream_request(client, GraphRagQuery(query=question, user=user, collection=collection,
                                                        streaming=True, selection_token_budget=budget),
                                  timeout=float(os.environ.get("TG_BENCH_LLM_TIMEOUT", "600")) * 2)
    out = Outcome(answer=answer.text, seconds=time.monotonic() - started)
    for t in answer.explain_triples(ns.TG_EDGE_COUNT):
        out.candidates = int(t.o.value)
    for t in answer.explain_triples(ns.TG_SENT_EDGE_COUNT):
        out.sent = int(t.o.value)
    for t in answer.explain_triples(ns.TG_SELECTION_PROMPT_TOKENS):
        out.selection_tokens = int(t.o.value)
    edges = {t.s.value: t.o.triple for t in answer.explain_triples(ns.TG_EDGE)}
    reasons = {t.s.value: t.o.value for t in answer.explain_triples(ns.TG_REASONING)}
    iris = {x.value for e in edges.values() for x in (e.s, e.p, e.o) if x.type == "i"}
    labels: dict[str, str] = {}
    for i in iris:
        for t in store.query(user, collection, TriplePattern(s=iri(i), p=iri(ns.RDFS_LABEL), g="")):
            labels.setdefault(i, t.o.value)
    knowledge = []
    for sel, e in edges.items():
        s, p, o = (term_label(Term(x.type, x.value, x.datatype, x.language), labels) for x in (e.s, e.p, e.o))
        out.selected.append((s, p, o))
        knowledge.append({"s": s, "p": p, "o": o, "reasoning": reasons.get(sel, "")})
    if knowledge:
        prompt = render("kg-synthesis", {"query": question, "knowledge": knowledge})
        out.synthesis_tokens = estimate_tokens(prompt.system) + estimate_tokens(without_terms(prompt.user))
    out.reported_tokens = int(getattr(answer.messages[-1], "in_token", 0) or 0)
    return out


async def bench(suite: Suite, budgets: tuple[int, ...] = BUDGETS, only: list[str] | None = None) -> Results:
    from trustgraph_cli.connection import Connection
    from trustgraph_flow.manifest import closure

    labelled = labelled_set()[: 4 if suite.quick else None]
    collection = await ensure_corpus(suite, "embedded")
    deployment = suite.deployment("embedded")
    store = deployment.open_stores()[0]
    outcomes: dict[tuple[str, int], list[tuple[Labelled, Outcome]]] = {}
    others: dict[str, dict[str, list[int | None]]] = {}
    try:
        for backend in only or backends():
            settings: dict[str, dict] = {"embeddings": {"embedder": shared_embedder()}}
            if backend == "openai":
                settings["text-completion"] = {"timeout": float(os.environ.get("TG_BENCH_LLM_TIMEOUT", "600")),
                                               "max_retries": 0}
            running = await deployment.start(closure("graph-rag", "document-rag", "agent"), llm=backend,
                                             settings=settings)
            try:
                async with Connection.attach(running, timeout=120) as conn:
                    client = await conn.client("graph-rag")
                    for budget in budgets:
                        print(f"  {backend}, budget {budget or 'none'}: {len(labelled)} question(s) ...", flush=True)
                        rows = outcomes.setdefault((backend, budget), [])
                        for item in labelled:
                            rows.append((item, await _ask(client, store, deployment.user, collection, item.question,
                                                          budget)))
                            await settle(running)
                    if backend != "extractive":
                        others[backend] = await _other_queries(conn, deployment.user, collection, suite.quick)
            finally:
                await running.stop()
    finally:
        store.close()
    results = figures(outcomes, budgets)
    for backend, tokens in others.items():
        for kind, reported in tokens.items():
            counts = [c for c in reported if c is not None]
            if not counts:  # never 0: a count the endpoint did not send is unknown (llama.cpp's streams send none)
                print(f"  prompt tokens per {kind} query ({backend}): not reported by the endpoint", flush=True)
                continue
            results.add(Figure(f"prompt tokens per {kind} query, model-reported ({backend})", statistics.median(counts),
                               "tokens", spread=f"max {max(counts)}", note=f"{len(counts)} of {len(reported)} "
                                                                         "question(s) with usage"))
    return results


async def _other_queries(conn, user: str, collection: str, quick: bool) -> dict[str, list[int | None]]:
    """Model-reported prompt tokens of the sample corpus's DocumentRAG and agent questions."""
    import uuid

    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.schema import AgentRequest, DocumentRagQuery
    from trustgraph_flow.ingest.sample_corpus import sample_questions

    timeout = float(os.environ.get("TG_BENCH_LLM_TIMEOUT", "600")) * 4
    out: dict[str, list[int | None]] = {"DocumentRAG": [], "agent": []}

    def tokens(answer) -> int | None:
        counts = [int(t.o.value) for t in answer.explain_triples(ns.TG_IN_TOKEN)]
        return sum(counts) if counts else None

    questions = sample_questions()
    documents = [q.question for q in questions if q.kind == "document"][: 1 if quick else None]
    print(f"  DocumentRAG: {len(documents)} question(s) ...", flush=True)
    client = await conn.client("document-rag")
    for q in documents:
        answer = await stream_request(client, DocumentRagQuery(query=q, user=user, collection=collection,
                                                               streaming=True), timeout=timeout)
        out["DocumentRAG"].append(tokens(answer))
    agents = [q.question for q in questions if q.kind == "agent"][: 1 if quick else None]
    print(f"  agent: {len(agents)} question(s) ...", flush=True)
    client = await conn.client("agent")
    for q in agents:
        answer = await stream_request(client, AgentRequest(question=q, user=user, collection=collection,
                                                           session_id=f"bench-{uuid.uuid4().hex[:12]}"),
                                      timeout=timeout)
        out["agent"].append(tokens(answer))
    return out


def figures(outcomes: dict[tuple[str, int], list[tuple[Labelled, Outcome]]],
            budgets: tuple[int, ...] = BUDGETS) -> Results:
    """The figures of every backend and budget (see the module docstring)."""
    results = Results()
    recall: dict[tuple[str, int], float] = {}
    for (backend, budget), rows in outcomes.items():
        label = f"{backend}, budget {budget}" if budget else f"{backend}, no budget"
        selected = sum(len(o.selected) for _, o in rows)
        hits = sum(len(set(o.selected) & item.edges) for item, o in rows)
        gold = sum(len(item.edges) for item, _ in rows)
        found = sum(1 for item, o in rows if set(o.selected) & item.edges)
        correct = sum(1 for item, o in rows if all(k.casefold() in o.answer.casefold() for k in item.key_terms))
        recall[(backend, budget)] = hits / gold if gold else 0.0
        results.add(
            Figure(f"selection precision ({label})", hits / selected if selected else 0.0, "", better="higher",
                   note=f"{hits} of {selected} selected edges answer their question"),
            Figure(f"selection recall ({label})", recall[(backend, budget)], "", better="higher",
                   note=f"{hits} of {gold} answering edges; {found} of {len(rows)} questions with one"),
            Figure(f"answer correctness ({label})", correct / len(rows), "", better="higher",
                   note=f"{correct} of {len(rows)} answers mention every key term"),
        )
        results.add(Figure(f"edge-selection prompt tokens, estimate ({label})",
                           statistics.median([o.selection_tokens for _, o in rows]), "tokens",
                           target=float(budget) if budget else None,
                           spread=f"max {max(o.selection_tokens for _, o in rows)}",
                           note="as recorded in the trace (tg:selectionPromptTokens)"))
        per_query = [o.selection_tokens + o.synthesis_tokens for _, o in rows]
        sent = [o.sent for _, o in rows]
        results.add(Figure(f"prompt tokens per GraphRAG query, estimate ({label})", statistics.median(per_query),
                           "tokens", target=PROMPT_TOKEN_TARGET if budget else None,
                           spread=f"max {max(per_query)}",
                           note=f"selection + synthesis prompts; edges sent p50 {statistics.median(sent):g} of "
                                f"{statistics.median([o.candidates for _, o in rows]):g}"))
        seconds = [o.seconds for _, o in rows]
        results.add(Figure(f"GraphRAG latency p50 ({label})", statistics.median(seconds), "s",
                           spread=f"max {max(seconds):.1f} s", note=f"{len(rows)} question(s), end to end"))
        reported = [o.reported_tokens for _, o in rows]
        if any(reported):
            results.add(Figure(f"prompt tokens per GraphRAG query, model-reported ({label})",
                               statistics.median(reported), "tokens", target=PROMPT_TOKEN_TARGET if budget else None,
                               spread=f"max {max(reported)}", note="the trace's usage: selection + synthesis calls"))
    for backend in {b for b, _ in outcomes}:
        with_budget, without = recall.get((backend, budgets[0])), recall.get((backend, 0))
        if with_budget is not None and without and budgets[0]:
            results.add(Figure(f"selection recall with the budget / without ({backend})", with_budget / without, "x",
                               target=1.0, better="higher",
                               note=f"{with_budget:.2f} with {budgets[0]} tokens, {without:.2f} with every candidate"))
    return results


def run(quick: bool = False, suite: Suite | None = None, budgets: tuple[int, ...] = BUDGETS,
        only: list[str] | None = None) -> Results:
    return run_on_suite(quick, suite, lambda s: bench(s, budgets, only))


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "4 questions of the labelled set")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)),
                        help="edge-selection token budgets to compare, comma-separated (0: every candidate); "
                             "default %(default)s")
    parser.add_argument("--backend", action="append", choices=["extractive", "openai"],
                        help="run only this backend (repeatable; default: extractive, and openai when "
                             "OPENAI_BASE_URL is set)")
    args = parser.parse_args(argv)
    if args.backend and "openai" in args.backend and not os.environ.get("OPENAI_BASE_URL"):
        parser.error("--backend openai needs OPENAI_BASE_URL (e.g. eval \"$(bash scripts/llama.sh env)\")")
    return report(run(args.quick, budgets=parse_budgets(args.budgets), only=args.backend),
                  "Edge-selection quality", args.json)


if __name__ == "__main__":
    main()
