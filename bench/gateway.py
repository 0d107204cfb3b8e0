"""api-gateway benchmark: what TrustGraph's protocol in front of the services costs.

* GraphRAG over the sample corpus, the same request straight over the bus (the project's
  request/response client) and through the gateway (one WebSocket, TrustGraph's frames),
  **interleaved** in one run.  Targets: gateway / bus <= 1.05x at p50, and <= 2 ms added.
* Time to the first explain frame through the gateway (embedded).  Target: < 25 ms.
* Many WebSocket connections at once, each streaming one GraphRAG query (embedded; the
  clients run in a process of their own, so the RSS read is the server's: stack plus
  gateway).  Target: all answered, no errors; p50/p99 and peak RSS reported.

LLM: the project's test server with the extractive backend and a fixed 50 ms per call.

    python -m bench.gateway [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator

from .common import Figure, Results, percentile, spread
from .harness import (
    QUERY_PROCESSORS,
    Suite,
    Variants,
    bench_parser,
    interleaved_order,
    load_note,
    report,
    run_on_suite,
    settle,
    stack_settings,
    stream_request,
)
from .ingest import ensure_corpus

QUESTION = "Who discovered polonium?"
#: Concurrent WebSocket connections, each streaming one query.
CONNECTIONS = 500


async def _socket(http, url: str):
    ws = await http.ws_connect(url + "api/v1/socket", max_msg_size=64 << 20)
    await ws.send_json({"type": "auth", "token": ""})
    reply = await ws.receive_json()
    if reply.get("type") != "auth-ok":
        raise RuntimeError(f"gateway refused auth: {reply}")
    return ws


async def ws_query(ws, rid: str, user: str, flow: str, collection: str) -> tuple[float, float, str]:
    """One GraphRAG request over an open socket: (latency, time to the first explain frame, answer)."""
    t0 = time.perf_counter()
    await ws.send_json({"id": rid, "workspace": user, "flow": flow, "service": "graph-rag",
                        "request": {"query": QUESTION, "collection": collection, "streaming": True,
                                    "explainable": True}})
    first, text = None, []
    while True:
        frame = await ws.receive_json(timeout=300)
        if frame.get("id") != rid:
            continue
        if "error" in frame:
            raise RuntimeError(f"gateway error: {frame['error']}")
        body = frame["response"]
        if first is None and body.get("message_type") == "explain":
            first = time.perf_counter() - t0
        text.append(body.get("response", ""))
        if frame["complete"]:
            return time.perf_counter() - t0, first or 0.0, "".join(text)


async def _ask(running, client, ws, counter: Iterator[int], s: str, user: str, collection: str,
               variant: str) -> tuple[float, float]:
    """One question over the bus or through the gateway: (latency, first explain frame) in ms."""
    from trustgraph_base.schema import GraphRagQuery

    if variant == "bus":
        answer = await stream_request(client, GraphRagQuery(query=QUESTION, user=user,
                                                            collection=collection, streaming=True))
        latency, first, text = answer.latency, answer.first_explain, answer.text
    else:
        latency, first, text = await ws_query(ws, f"req-{next(counter)}", user, running.flow, collection)
    if "Curie" not in text:
        raise AssertionError(f"unexpected answer on {s} ({variant}): {text[:200]!r}")
    await settle(running)
    return latency * 1000, (first or 0.0) * 1000


async def bench(suite: Suite) -> Results:
    import aiohttp

    from trustgraph_cli.connection import Connection
    from trustgraph_flow.gateway.service import ApiGateway

    reps = 3 if suite.quick else 10
    per_rep = 4 if suite.quick else 10
    results = Results()
    for s in suite.stacks:
        collection = await ensure_corpus(suite, s)
        user = suite.deployment(s).user
        running = await suite.deployment(s).start(QUERY_PROCESSORS, settings=stack_settings(suite.llm))
        gateway = ApiGateway(backend=running.backend, flow=running.flow, port=0)
        await gateway.start()
        conn = await Connection.attach(running, timeout=120).__aenter__()
        http = aiohttp.ClientSession()
        try:
            client = await conn.client("graph-rag")
            ws = await _socket(http, gateway.url)
            ask = functools.partial(_ask, running, client, ws, iter(range(1, 1 << 30)), s, user, collection)
            for variant in ("bus", "gateway"):  # warm-up
                await ask(variant)
            v = Variants()
            firsts: list[float] = []
            keys = [(s, "bus"), (s, "gateway")]
            for rep in range(reps):
                v.new_rep(keys)
                for i in range(per_rep):
                    for _s, variant in interleaved_order(keys, rep + i):
                        latency, first = await ask(variant)
                        v.add(s, variant, latency)
                        if variant == "gateway":
                            firsts.append(first)
            bus, gw = v.all(s, "bus"), v.all(s, "gateway")
            ratio, ratios = v.ratio((s, "gateway"), (s, "bus"))
            added = [statistics.median(g) - statistics.median(b)
                     for g, b in zip(v.samples[(s, "gateway")], v.samples[(s, "bus")], strict=True) if g and b]
            results.add(
                Figure("GraphRAG latency p50, over the bus", statistics.median(bus), "ms", stack=s, spread=spread(bus),
                       note=f"{len(bus)} requests; {load_note()}"),
                Figure("GraphRAG latency p50, through the gateway", statistics.median(gw), "ms", stack=s,
                       spread=spread(gw), note=f"p99 {percentile(gw, 99):.1f} ms"),
                Figure("gateway / bus latency p50", ratio, "x", 1.05, stack=s, spread=spread(ratios),
                       note=f"{reps} interleaved reps"),
                Figure("gateway: added latency p50", statistics.median(gw) - statistics.median(bus), "ms", 2.0,
                       stack=s, spread=spread(added), note="per-rep medians in the spread"),
                Figure("gateway: first explain frame p50", percentile(firsts, 50), "ms",
                       25.0 if s == "embedded" else None, stack=s, note=f"p95 {percentile(firsts, 95):.1f} ms"),
            )
            await ws.close()
            if s == "embedded":
                results.add(*await _many_connections(gateway, running, user, collection))
        finally:
            await http.close()
            await conn.__aexit__(None, None, None)
            await gateway.stop()
            await running.stop()
    return results


async def _many_connections(gateway, running, user: str, collection: str) -> list[Figure]:
    """``CONNECTIONS`` sockets at once from a client process of its own; this process's RSS sampled meanwhile."""
    import psutil

    me = psutil.Process()
    before = me.memory_info().rss
    peak = before
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.gateway", "--load-clients", gateway.url, "--flow", running.flow,
        "--user", user, "--collection", collection, "-n", str(CONNECTIONS), stdout=subprocess.PIPE)
    reader = asyncio.create_task(proc.communicate())
    while not reader.done():
        peak = max(peak, me.memory_info().rss)
        await asyncio.sleep(0.05)
    out, _ = await reader
    load = json.loads(out.decode().strip().splitlines()[-1])
    lat = load["latencies_ms"]
    note = f"{load['errors']} errors, {len(lat)} answered of {CONNECTIONS}"
    p99 = f"p99 {percentile(lat, 99) if lat else 0:.0f} ms, all in {load['seconds']:.1f} s"
    return [
        Figure(f"{CONNECTIONS} sockets at once: answered", len(lat), "queries", CONNECTIONS, better="higher",
               stack="embedded", note=note + (f"; first error: {load['first_error']}" if load["errors"] else "")),
        Figure(f"{CONNECTIONS} sockets at once: latency p50", percentile(lat, 50) if lat else 0.0, "ms",
               stack="embedded", note=p99),
        Figure(f"{CONNECTIONS} sockets at once: server RSS peak", peak / 2**20, "MiB", stack="embedded",
               note=f"stack + gateway in one process; {before / 2**20:.0f} MiB before the load"),
    ]


async def load_clients(url: str, flow: str, user: str, collection: str, n: int) -> dict:
    """The client side of :func:`_many_connections`: ``n`` sockets, each one query, all at once."""
    import aiohttp

    latencies, errors = [], []
    t0 = time.perf_counter()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        async def one(i: int) -> None:
            try:
                ws = await _socket(http, url)
                try:
                    latency, _first, text = await ws_query(ws, "req-1", user, flow, collection)
                    if "Curie" not in text:
                        raise RuntimeError(f"unexpected answer {text[:100]!r}")
                    latencies.append(latency * 1000)
                finally:
                    await ws.close()
            except Exception as e:  # noqa: BLE001 - counted and reported: the figure is "all answered, no errors"
                errors.append(f"{type(e).__name__}: {e}"[:300])

        await asyncio.gather(*(one(i) for i in range(n)))
    return {"latencies_ms": latencies, "errors": len(errors), "first_error": errors[0] if errors else "",
            "seconds": time.perf_counter() - t0}


def run(quick: bool = False, suite: Suite | None = None) -> Results:
    return run_on_suite(quick, suite, lambda s: bench(s))


def main(argv=None) -> Results | None:
    parser = bench_parser(__doc__, f"3 x 4 interleaved requests per variant; {CONNECTIONS} sockets either way")
    parser.add_argument("--load-clients", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--flow", help=argparse.SUPPRESS)
    parser.add_argument("--user", help=argparse.SUPPRESS)
    parser.add_argument("--collection", help=argparse.SUPPRESS)
    parser.add_argument("-n", type=int, default=CONNECTIONS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.load_clients:
        print(json.dumps(asyncio.run(load_clients(args.load_clients, args.flow, args.user, args.collection,
                                                  args.n))))
        return None
    return report(run(args.quick), "api-gateway", args.json)


if __name__ == "__main__":
    main()
