"""Agent benchmark (issue 9): per-iteration cost of agent provenance, session id set vs not.

The real ReAct agent service runs a dialog of ``K`` tool iterations and a final answer.
The LLM is the project's OpenAI-compatible server in scripted mode with a fixed 50 ms per
answer: each iteration is one ``agent-react`` answer (Thought / Action / Args) and one
call of a ``text-completion`` tool (a second LLM answer), so the figure isolates the agent's
own provenance (Question, one Analysis per iteration, Conclusion; each streamed and stored)
from GraphRAG's.  With a session id the trace is recorded; without one nothing is.  Both
variants and both stacks run interleaved over several repetitions.  Target: provenance adds
< 5 % latency.

    python -m bench.agent [--quick] [--iterations K] [--json out.json]
"""

from __future__ import annotations

import re
import statistics
import uuid

from .common import Figure, Results, spread
from .harness import (
    LLM_LATENCY_MS,
    LlmEndpoint,
    Suite,
    Variants,
    bench_parser,
    interleaved_order,
    on_off_figures,
    report,
    run_on_suite,
    settle,
    stack_settings,
    stream_request,
)

PROCESSORS = ("triples-write", "prompt", "text-completion", "agent-manager-react")
TOOLS = [{"name": "ask-llm", "kind": "text-completion", "description": "Ask the language model a question.",
          "arguments": [{"name": "question", "description": "the question"}]}]
FINAL_ANSWER = "The answer is forty-two."
#: An Analysis of the trace (``urn:trustgraph:agent:{session}/i{n}``), not its Thought or Observation.
ANALYSIS = re.compile(r"/i\d+$")


def script(runs: int, iterations: int) -> dict:
    """Scripted replies: ``runs`` dialogs of ``iterations`` tool steps and a final answer, in order."""
    dialog = [f'Thought: step {i} needs the model.\nAction: ask-llm\nArgs: {{"question": "What is step {i}?"}}'
              for i in range(1, iterations + 1)]
    dialog.append(f"Thought: I have what I need.\nFinal Answer: {FINAL_ANSWER}")
    return {"agent-react": dialog * runs, "*": "Step result: forty-two, as computed."}


async def bench(suite: Suite, iterations: int | None = None) -> Results:
    from trustgraph_base.schema import AgentRequest
    from trustgraph_cli.connection import Connection

    k = iterations or (3 if suite.quick else 5)
    reps = 3 if suite.quick else 8
    per_rep = 2 if suite.quick else 4  # dialogs per (stack, variant) in one repetition
    stacks = suite.stacks
    runs = len(stacks) * (1 + reps * per_rep * 2)
    running, clients, conns = {}, {}, []
    with LlmEndpoint("scripted", LLM_LATENCY_MS, script(runs, k)) as llm:
        try:
            for s in stacks:
                settings = stack_settings(llm)
                settings.setdefault("agent-manager-react", {}).update({"tools": TOOLS, "max_iterations": k + 2})
                running[s] = await suite.deployment(s).start(PROCESSORS, settings=settings)
                conn = await Connection.attach(running[s], timeout=120).__aenter__()
                conns.append(conn)
                clients[s] = await conn.client("agent")

            async def dialog(s: str, traced: bool):
                sid = f"bench-{uuid.uuid4().hex[:12]}" if traced else ""
                answer = await stream_request(clients[s], AgentRequest(
                    question="What is the answer, step by step?", user=suite.deployment(s).user,
                    collection="agent", session_id=sid))
                got = [m.content for m in answer.messages if m.message_type == "answer" and m.content]
                analyses = [m for m in answer.messages if m.message_type == "explain" and ANALYSIS.search(m.explain_id)]
                if got != [FINAL_ANSWER] or len(analyses) != (k if traced else 0):
                    raise AssertionError(f"agent dialog on {s} went wrong: answers {got}, {len(analyses)} analyses")
                await settle(running[s])
                return answer

            for s in stacks:  # warm-up
                await dialog(s, True)
            v = Variants()
            keys = [(s, var) for s in stacks for var in ("on", "off")]
            for rep in range(reps):
                v.new_rep(keys)
                for i in range(per_rep):
                    for s, var in interleaved_order(keys, rep + i):
                        answer = await dialog(s, var == "on")
                        v.add(s, var, answer.latency * 1000)
        finally:
            for conn in conns:
                await conn.__aexit__(None, None, None)
            for r in running.values():
                await r.stop()
    results = Results()
    for s in stacks:
        results.add(*on_off_figures(v, s, f"agent ({k} iterations)", reps,
                                    unit_note=f", 2 LLM answers of {LLM_LATENCY_MS:g} ms per iteration"))
        per_iter = [(statistics.median(a) - statistics.median(b)) / k
                    for a, b in zip(v.samples[(s, "on")], v.samples[(s, "off")], strict=True)]
        on, off = statistics.median(v.all(s, "on")), statistics.median(v.all(s, "off"))
        results.add(Figure("agent provenance: added latency per iteration", (on - off) / k, "ms", stack=s,
                           spread=spread(per_iter) if min(per_iter) > 0 else
                           f"per rep {', '.join(f'{x:.1f}' for x in per_iter)}",
                           note=f"iteration without provenance ~{off / (k + 1):.0f} ms"))
    return results


def run(quick: bool = False, suite: Suite | None = None, iterations: int | None = None) -> Results:
    return run_on_suite(quick, suite, lambda s: bench(s, iterations))


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "3 iterations, fewer repetitions")
    parser.add_argument("--iterations", type=int, help="tool iterations per dialog (default 5; quick 3)")
    args = parser.parse_args(argv)
    return report(run(args.quick, iterations=args.iterations), "ReAct agent", args.json)


if __name__ == "__main__":
    main()
