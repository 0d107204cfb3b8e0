"""Real-model benchmark: GraphRAG, DocumentRAG and agent questions end to end against llama.cpp's server.

Every other benchmark answers with the project's deterministic test server; this one puts a real model
(llama.cpp's OpenAI-compatible server, ``scripts/llama.sh``) behind the ``text-completion`` service and
measures what a user of a small local model waits for: latency p50/p95 per query kind and the prompt and
completion tokens each query cost, summed over its model calls from the usage its trace records (so the
figures are the trace's own).  The sample corpus is loaded with the pattern extractor (no model), on the
embedded stack; the questions are the corpus's own (``questions.json``), and each answer's mention of the
expected names is reported as a rough correctness rate.  Targets (issue 33): GraphRAG p50 < 30 s and
<= 3,500 prompt tokens per GraphRAG query at the service defaults.

    eval "$(LLAMA_RUN=... bash scripts/llama.sh env)"; TG_REAL_LLM_URL=$OPENAI_BASE_URL \\
        python -m bench.real_model [--quick] [--json out.json]
    python -m bench.real_model --start [--model 1.5b] [--quick]     # a private server for the run

``--quick``: one question of each kind; the full mode runs 5 GraphRAG, 3 DocumentRAG and 2 agent questions.
Both run the services at their defaults (GraphRAG's edge-selection prompt is cut to the
``--selection-token-budget``, 3,000 tokens).  In ``python -m bench`` it runs only when ``TG_REAL_LLM_URL``
names a running server; otherwise it says so and measures nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from .common import Figure, Results, percentile, spread
from .harness import Suite, bench_parser, report

REPO = Path(__file__).resolve().parents[1]
LLAMA_SH = REPO / "scripts" / "llama.sh"
#: Deadline of one model call: a 10,000-token prompt takes minutes on two cores.
LLM_TIMEOUT = 1200.0
#: GraphRAG p50 target (issue 33) and prompt tokens per GraphRAG query.
GRAPH_RAG_P50_TARGET = 30.0
GRAPH_RAG_PROMPT_TARGET = 3500.0


def endpoint_from_env() -> tuple[str, str] | None:
    """``(base_url, model)`` of the server ``TG_REAL_LLM_URL`` names (model from its ``/v1/models``), or None."""
    url = os.environ.get("TG_REAL_LLM_URL", "").strip().rstrip("/")
    if not url:
        return None
    with urllib.request.urlopen(f"{url}/models", timeout=10) as r:
        models = json.load(r)["data"]
    return url, models[0]["id"]


class PrivateServer:
    """A llama.cpp server of this run, in a run directory of its own (``scripts/llama.sh``)."""

    def __init__(self, model: str):
        self.run_dir = tempfile.mkdtemp(prefix="tg-bench-llama-")
        self.env = {**os.environ, "LLAMA_RUN": self.run_dir, "LLAMA_PORT": "0", "LLAMA_MODEL": model}
        self.start_seconds = 0.0

    def script(self, *args: str) -> str:
        r = subprocess.run(["bash", str(LLAMA_SH), *args], env=self.env, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"llama.sh {' '.join(args)} failed: {r.stderr[-2000:]}")
        return r.stdout

    def start(self) -> tuple[str, str]:
        t0 = time.perf_counter()
        self.script("start")
        self.script("wait")
        self.start_seconds = time.perf_counter() - t0
        values = dict(i.split("=", 1) for i in self.script("env").split()[1:])
        return values["OPENAI_BASE_URL"], values["OPENAI_MODEL"]

    def stop(self) -> None:
        self.script("stop")


def _usage_sum(usages: list[dict | None]) -> tuple[int, int, int]:
    """Prompt and completion tokens summed over the calls that reported them, and how many calls reported none
    (llama.cpp's server sends no usage with a streamed answer: the trace then records the model and no token
    counts)."""
    prompt = sum(u["in_token"] or 0 for u in usages if u)
    completion = sum(u["out_token"] or 0 for u in usages if u)
    unreported = sum(1 for u in usages if not u or (u["in_token"] is None and u["out_token"] is None))
    return prompt, completion, unreported


def trace_usages(trace: dict) -> list[dict | None]:
    """Every model call's usage in a trace (an agent's sub-traces included)."""
    kind = trace["type"]
    if kind == "graphrag":
        return [(trace.get("focus") or {}).get("usage"), (trace.get("synthesis") or {}).get("usage")]
    if kind == "docrag":
        return [(trace.get("synthesis") or {}).get("usage")]
    usages = []
    for a in trace.get("analyses", []):
        usages.append(a.get("usage"))
        for sub in a.get("sub_traces", []):
            usages.extend(trace_usages(sub))
    usages.append((trace.get("conclusion") or {}).get("usage"))
    return usages


async def _load_corpus(home: Path, user: str) -> None:
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.load import load_documents
    from trustgraph_flow.embedded import INGEST, start_embedded
    from trustgraph_flow.ingest.sample_corpus import sample_documents

    stack = await start_embedded(home, only=tuple(dict.fromkeys(INGEST)), llm="extractive")
    try:
        async with Connection.attach(stack, timeout=300) as conn:
            docs = [(d.id, d.title, d.kind, d.content) for d in sample_documents()]
            await load_documents(conn, user, "default", docs, idle_timeout=300, show=False)
        await stack.wait_idle()
    finally:
        await stack.stop()


async def _ask(conn, service: str, request: Any, user: str) -> tuple[float, str, dict]:
    """Stream one query; its latency, answer and stored trace (JSON form)."""
    from trustgraph_base.provenance.trace_reading import read_trace

    client = await conn.client(service)
    t0 = time.perf_counter()
    msgs = [m async for m in client.stream(request)]
    seconds = time.perf_counter() - t0
    last = msgs[-1]
    if last.error is not None:
        raise AssertionError(f"{service} failed on {getattr(request, 'query', '') or request.question!r}: "
                             f"{last.error.message}")
    if service == "agent":
        answer = "".join(m.content for m in msgs if m.message_type == "answer")
        root = f"urn:trustgraph:agent:{request.session_id}"
    else:
        answer = "".join(m.response for m in msgs if m.response)
        root = msgs[0].explain_id
    if not answer.strip():
        raise AssertionError(f"{service} gave an empty answer")
    for _ in range(100):  # the trace's stages are stored without being awaited
        read = await read_trace(conn, user, "default", root, sources=False)
        if read is not None and read.trace.get("status") == "complete":
            return seconds, answer, read.trace
        await asyncio.sleep(0.1)
    raise AssertionError(f"{service}: the trace {root} was not stored whole")


async def bench(quick: bool, url: str, model: str) -> Results:
    from trustgraph_base.schema import AgentRequest, DocumentRagQuery, GraphRagQuery
    from trustgraph_cli.connection import Connection
    from trustgraph_flow.embedded import QUERY_STACK, start_embedded
    from trustgraph_flow.ingest.sample_corpus import sample_questions

    results = Results()
    qs = sample_questions()
    counts = {"graph": 1, "document": 1, "agent": 1} if quick else {"graph": 5, "document": 3, "agent": 2}
    picked = {kind: [q for q in qs if q.kind == kind][:n] for kind, n in counts.items()}
    note = f"{model}; service defaults"
    with tempfile.TemporaryDirectory(prefix="tg-bench-real-") as tmp:
        home, user = Path(tmp), f"real{uuid.uuid4().hex[:8]}"
        await _load_corpus(home, user)
        stack = await start_embedded(home, only=QUERY_STACK, llm="openai", settings={
            "text-completion": {"base_url": url, "api_key": "none", "model": model, "timeout": LLM_TIMEOUT,
                                "max_retries": 0}})
        try:
            async with Connection.attach(stack, timeout=3 * LLM_TIMEOUT) as conn:
                for kind, service, label in (("graph", "graph-rag", "GraphRAG"),
                                             ("document", "document-rag", "DocumentRAG"),
                                             ("agent", "agent", "agent")):
                    latencies: list[float] = []
                    prompts: list[float] = []
                    completions: list[float] = []
                    hits = unreported = calls = 0
                    for q in picked[kind]:
                        if service == "graph-rag":
                            request: Any = GraphRagQuery(query=q.question, user=user, streaming=True)
                        elif service == "document-rag":
                            request = DocumentRagQuery(query=q.question, user=user, streaming=True)
                        else:
                            request = AgentRequest(question=q.question, user=user, streaming=True,
                                                   session_id=f"bench-{uuid.uuid4().hex[:8]}", max_iterations=4)
                        seconds, answer, trace = await _ask(conn, service, request, user)
                        usages = trace_usages(trace)
                        prompt, completion, missing = _usage_sum(usages)
                        calls += len(usages)
                        unreported += missing
                        latencies.append(seconds)
                        prompts.append(prompt)
                        completions.append(completion)
                        hits += all(word.lower() in answer.lower() for word in q.expected)
                        print(f"[real-model] {label}: {q.question!r} {seconds:.1f} s, {prompt} prompt + "
                              f"{completion} completion tokens; answer {answer[:120]!r}", flush=True)
                        await stack.wait_idle()
                    n = len(latencies)
                    is_graph = service == "graph-rag"
                    counted = f"{unreported} of {calls} model calls reported no tokens (streamed), not counted"
                    results.add(
                        Figure(f"{label} latency p50", percentile(latencies, 50), "s",
                               GRAPH_RAG_P50_TARGET if is_graph else None, spread=spread(latencies),
                               note=f"{n} queries; {note}"),
                        Figure(f"{label} latency p95", percentile(latencies, 95), "s", note=f"{n} queries"),
                        Figure(f"{label} prompt tokens per query", sum(prompts) / n, "tokens",
                               GRAPH_RAG_PROMPT_TARGET if is_graph else None, spread=spread(prompts), note=counted),
                        Figure(f"{label} completion tokens per query", sum(completions) / n, "tokens",
                               spread=spread(completions), note=counted),
                        Figure(f"{label} answers naming the expected", hits / n, "share", better="higher",
                               note="questions.json 'expected' words, case-insensitive"))
        finally:
            await stack.stop()
    return results


def run(quick: bool = False, suite: Suite | None = None, url: str | None = None, model: str | None = None) -> Results:
    """Run the benchmark against the server ``url`` (default ``TG_REAL_LLM_URL``); nothing without one."""
    if url is None:
        found = endpoint_from_env()
        if found is None:
            print("[real-model] skipped: no llama.cpp server configured (set TG_REAL_LLM_URL, e.g. from "
                  "`bash scripts/llama.sh env`, or run python -m bench.real_model --start)", flush=True)
            return Results()
        url, model = found
    return asyncio.run(bench(quick, url, model or "local"))


def main(argv: list[str] | None = None) -> Results:
    parser = bench_parser(__doc__, "one question of each kind")
    parser.add_argument("--start", action="store_true", help="start a private server with scripts/llama.sh")
    parser.add_argument("--model", default=os.environ.get("LLAMA_MODEL", "1.5b"), help="with --start: 0.5b or 1.5b")
    args = parser.parse_args(argv)
    if not args.start:
        return report(run(args.quick), "Real model", args.json)
    server = PrivateServer(args.model)
    try:
        url, model = server.start()
        print(f"[real-model] server started in {server.start_seconds:.1f} s: {url} ({model})", flush=True)
        results = run(args.quick, url=url, model=model)
        results.add(Figure("server start (start + wait)", server.start_seconds, "s", note=model))
    finally:
        server.stop()
    return report(results, "Real model", args.json)


if __name__ == "__main__":
    main()
