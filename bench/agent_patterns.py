"""Agent patterns benchmark (issue 37): supervisor latency against its slowest sub-agent, provenance on/off per
pattern.

The real agent service runs with the project's OpenAI-compatible server in scripted mode, every answer after a
fixed delay.  A sub-agent (and the react run measured alone) makes ``K`` tool calls: ``K`` ``agent-react``
answers, each followed by a ``text-completion`` tool answer, and stops at ``--max-iterations`` (which asks no
model), so every run's replies are the same whatever order concurrent runs reach the server in.  The
supervisor decomposes into three sub-goals (one model answer), runs three such sub-agents as agent requests of
their own, and synthesises (one answer): its latency is compared with one sub-agent alone (target <= 1.5 x,
not the 3 x of running them one after another).  The plan has three steps, 1 and 2 independent and 3 after both
(one tool answer each).  Each pattern runs with a session id (its trace recorded) and without (nothing
recorded), interleaved, on each stack: target <= 1.05.

    python -m bench.agent_patterns [--quick] [--latency-ms MS] [--json out.json]
"""

from __future__ import annotations

import json
import statistics
import uuid

from .agent import PROCESSORS, TOOLS  # the same stack and tool as the ReAct benchmark
from .common import Figure, Results, spread
from .harness import (
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

#: Tool calls of one sub-agent (and of the react run measured alone).
SUBAGENT_TOOL_CALLS = 4
#: Fixed delay of every model answer: long enough that a run's time is mostly the model's, as with a real one.
LATENCY_MS = 100.0
GOALS = ["What is step one?", "What is step two?", "What is step three?"]
PLAN = [{"goal": "What is step one?", "tool": "ask-llm", "depends_on": []},
        {"goal": "What is step two?", "tool": "ask-llm", "depends_on": []},
        {"goal": "What follows from both?", "tool": "ask-llm", "depends_on": [1, 2]}]
SCRIPT = {
    "agent-react": 'Thought: I need the model.\nAction: ask-llm\nArgs: {"question": "What is the next step?"}',
    "agent-decompose": "\n".join(json.dumps({"goal": g}) for g in GOALS),
    "agent-plan": "\n".join(json.dumps(s) for s in PLAN),
    "agent-synthesise": "The answer is forty-two, from every result.",
    "*": "Step result: forty-two, as computed.",
}
PATTERNS = ("react", "plan-then-execute", "supervisor")


async def bench(suite: Suite, latency_ms: float = LATENCY_MS) -> Results:
    from trustgraph_base.schema import AgentRequest
    from trustgraph_cli.connection import Connection

    reps = 3 if suite.quick else 6
    stacks = suite.stacks
    running, clients, conns = {}, {}, []
    v = Variants()
    with LlmEndpoint("scripted", latency_ms, SCRIPT) as llm:
        try:
            for s in stacks:
                settings = stack_settings(llm)
                settings.setdefault("agent-manager-react", {}).update(
                    {"tools": TOOLS, "max_iterations": SUBAGENT_TOOL_CALLS})
                running[s] = await suite.deployment(s).start(PROCESSORS, settings=settings)
                conn = await Connection.attach(running[s], timeout=300).__aenter__()
                conns.append(conn)
                clients[s] = await conn.client("agent")

            async def run(s: str, pattern: str, traced: bool) -> float:
                sid = f"bench-{uuid.uuid4().hex[:12]}" if traced else ""
                answer = await stream_request(clients[s], AgentRequest(
                    question="What is the answer, step by step?", user=suite.deployment(s).user,
                    collection="agent-patterns", session_id=sid, pattern=pattern), timeout=300)
                got = [m.content for m in answer.messages if m.message_type == "answer" and m.content]
                explained = [m for m in answer.messages if m.message_type == "explain"]
                if len(got) != 1 or bool(explained) != traced:
                    raise AssertionError(f"{pattern} run on {s} went wrong: answers {got}, {len(explained)} events")
                await settle(running[s])
                return answer.latency * 1000

            for s in stacks:  # warm-up
                for pattern in PATTERNS:
                    await run(s, pattern, True)
            keys = [(s, f"{p}/{var}") for s in stacks for p in PATTERNS for var in ("on", "off")]
            for rep in range(reps):
                v.new_rep(keys)
                for s, key in interleaved_order(keys, rep):
                    pattern, var = key.split("/")
                    v.add(s, key, await run(s, pattern, var == "on"))
        finally:
            for conn in conns:
                await conn.__aexit__(None, None, None)
            for r in running.values():
                await r.stop()
    return figures(v, stacks, reps, latency_ms)


def figures(v: Variants, stacks, reps: int, latency_ms: float) -> Results:
    results = Results()
    calls = 2 * SUBAGENT_TOOL_CALLS
    for s in stacks:
        for variant in ("on", "off"):
            sup = v.samples[(s, f"supervisor/{variant}")]
            alone = v.samples[(s, f"react/{variant}")]
            per_rep = [statistics.median(a) / statistics.median(b) for a, b in zip(sup, alone, strict=True)]
            sup_p50 = statistics.median(v.all(s, f"supervisor/{variant}"))
            alone_p50 = statistics.median(v.all(s, f"react/{variant}"))
            ratio = sup_p50 / alone_p50
            results.add(Figure(f"supervisor (3 sub-agents) / slowest sub-agent alone, provenance {variant}", ratio,
                               "x", 1.5, stack=s, spread=spread(per_rep),
                               note=f"supervisor p50 {sup_p50:.0f} ms, sub-agent alone {alone_p50:.0f} ms "
                                    f"({calls} model answers of {latency_ms:g} ms); run one after another: ~3 x"))
        for pattern in PATTERNS:
            on_off = Variants()
            on_off.samples[(s, "on")] = v.samples[(s, f"{pattern}/on")]
            on_off.samples[(s, "off")] = v.samples[(s, f"{pattern}/off")]
            results.add(*on_off_figures(on_off, s, f"agent {pattern}", reps,
                                        unit_note=f", model answers of {latency_ms:g} ms"))
    return results


def run(quick: bool = False, suite: Suite | None = None, latency_ms: float = LATENCY_MS) -> Results:
    return run_on_suite(quick, suite, lambda s: bench(s, latency_ms))


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "fewer repetitions")
    parser.add_argument("--latency-ms", type=float, default=LATENCY_MS, help="delay of every model answer")
    args = parser.parse_args(argv)
    return report(run(args.quick, latency_ms=args.latency_ms), "Agent patterns", args.json)


if __name__ == "__main__":
    main()
