"""Message bus benchmark: request/response round trip and one consumer's throughput.

Targets (issue 4): in-process round trip p50 < 0.2 ms; Pulsar round trip p50 < 5 ms on
loopback; one Pulsar consumer sustains >= 5,000 small messages/s.

    python -m bench.bus [--quick] [--pulsar-url pulsar://127.0.0.1:6650] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from dataclasses import dataclass

from trustgraph_base.codec import encode
from trustgraph_base.processor import ConsumerSpec, Processor, RequestResponseClient
from trustgraph_base.pubsub import flow_queue, open_backend, request_queue, response_queue

from .common import Figure, Results, percentile


@dataclass
class Ping:
    n: int = 0
    text: str = ""


@dataclass
class Pong:
    n: int = 0
    end_of_stream: bool = True


class PingService(Processor):
    default_id = "ping"

    def __init__(self, **params):
        super().__init__(**params)
        self.add(ConsumerSpec("request", request_queue("ping", self.flow), Ping, self.on_ping,
                              response_queue=response_queue("ping", self.flow), response_schema=Pong,
                              error_response=lambda e: Pong()))

    async def on_ping(self, msg: Ping, ctx) -> None:
        await ctx.respond(Pong(n=msg.n))


class Sink(Processor):
    default_id = "sink"

    def __init__(self, *, expect: int, done: asyncio.Event, **params):
        super().__init__(**params)
        self.expect, self.done, self.count = expect, done, 0
        self.add(ConsumerSpec("input", flow_queue("sink", self.flow), Ping, self.on_msg))

    async def on_msg(self, msg: Ping, ctx) -> None:
        self.count += 1
        if self.count >= self.expect:
            self.done.set()


async def round_trips(backend, n: int) -> list[float]:
    flow = f"b{uuid.uuid4().hex[:8]}"
    svc = PingService(backend=backend, flow=flow)
    await svc.start()
    client = await RequestResponseClient(backend, "ping", request_queue("ping", flow), response_queue("ping", flow),
                                         Ping, Pong, timeout=10).start()
    for i in range(min(50, n)):  # warm-up
        await client.request(Ping(n=i))
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        await client.request(Ping(n=i, text="hello"))
        times.append(time.perf_counter() - t0)
    await client.stop()
    await svc.stop()
    return times


async def consumer_throughput(backend, n: int) -> tuple[float, float]:
    """(producer msg/s with 16 concurrent senders, consumer msg/s draining that backlog)."""
    per = 16
    n = per * (n // per)
    flow = f"b{uuid.uuid4().hex[:8]}"
    queue = flow_queue("sink", flow)
    # Create the durable subscription first, then fill its backlog, then let one consumer drain it.
    consumer = await backend.subscribe(queue, "sink--input")
    await consumer.close()
    producer = await backend.create_producer(queue)
    payload = encode(Ping(n=1, text="x" * 64))

    async def send(k: int) -> None:
        for _ in range(k):
            await producer.send(payload)

    t0 = time.perf_counter()
    await asyncio.gather(*(send(n // per) for _ in range(per)))
    produce_rate = n / (time.perf_counter() - t0)
    done = asyncio.Event()
    sink = Sink(backend=backend, flow=flow, expect=n, done=done)
    t0 = time.perf_counter()
    await sink.start()
    await asyncio.wait_for(done.wait(), 300)
    consume_rate = n / (time.perf_counter() - t0)
    await producer.close()
    await sink.stop()
    return produce_rate, consume_rate


async def bench(stack: str, backend, quick: bool) -> list[Figure]:
    rt = await round_trips(backend, 300 if quick else 3000)
    prod, cons = await consumer_throughput(backend, 5000 if quick else 50000)
    await backend.close()
    p50, p99 = percentile(rt, 50) * 1000, percentile(rt, 99) * 1000
    target_rt = 0.2 if stack == "embedded" else 5.0
    return [
        Figure("bus round trip p50", p50, "ms", target_rt, stack=stack),
        Figure("bus round trip p99", p99, "ms", None, stack=stack),
        Figure("one consumer throughput", cons, "msg/s", 5000 if stack == "distributed" else None, "higher",
               stack=stack, note="one processor draining a backlog (decode + handler + ack)"),
        Figure("producer throughput", prod, "msg/s", None, "higher", stack=stack, note="16 concurrent senders"),
    ]


def run(quick: bool = False, pulsar_url: str | None = None) -> Results:
    results = Results()
    results.add(*asyncio.run(bench("embedded", open_backend("memory"), quick)))
    if pulsar_url:
        results.add(*asyncio.run(bench("distributed", open_backend("pulsar", url=pulsar_url), quick)))
    return results


def main(argv=None) -> Results:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pulsar-url", default=os.environ.get("PULSAR_URL"))
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    results = run(args.quick, args.pulsar_url)
    results.print_table("message bus")
    if args.json:
        results.write_json(args.json)
    return results


if __name__ == "__main__":
    main()
