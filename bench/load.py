"""Load generator: N concurrent explainable GraphRAG queries for a fixed time; throughput, latency, errors, traces.

    python -m bench.load [--seconds 30] [--concurrency 8] [--quick] [--json out.json]
    python -m bench.load --pulsar-url pulsar://127.0.0.1:6650 --flow default --user trustgraph --collection default

Without ``--pulsar-url`` it starts the embedded stack in this process (in-process bus, SQLite
in a temporary directory, the sample corpus loaded, the extractive backend).  With
``--pulsar-url`` it loads running services over Pulsar (the distributed stack: services
started with the same ``--flow``, the corpus loaded for ``--user``/``--collection``, e.g. by
``tg-quickstart``).

It is bounded and polite on purpose: it only talks to loopback addresses (a load generator
must never be pointed at someone else's servers by mistake), runs at most
:data:`MAX_SECONDS` with at most :data:`MAX_CONCURRENCY` queries in flight, starts no new query
after ``--seconds``, waits for the in-flight ones (each message at most ``--timeout``) and
stops by itself.  Each query is a streaming, explainable GraphRAG query whose trace goes to a
fresh collection of its own (``--explain-collection``, default ``load-<random>``), so after the
run the stored traces can be counted exactly: the report says whether the number of complete
stored traces equals the number of successful responses (traces are stored asynchronously, so
it waits up to ``--settle`` seconds for them).

Figures: throughput (answered queries/s), latency p50/p99 (s, send to ``end_of_session``),
time to the first explain event p50, errors, stored traces.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import socket
import statistics
import sys
import tempfile
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .common import Figure, Results, percentile

MAX_SECONDS = 3600.0
MAX_CONCURRENCY = 64
#: Questions answerable from the sample corpus, asked in turn.
QUESTIONS = ("Who discovered polonium?", "Who discovered radium?", "What did Rutherford discover?",
             "Where did Marie Curie work?", "What is the unit of radioactivity?", "Who discovered the neutron?")


# ------------------------------------------------------------------------------------------ safety

def check_loopback(host: str) -> str:
    """Return ``host`` if every address it resolves to is a loopback address; else raise ValueError.

    :param host: a host name or IP address.
    """
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror as e:
        raise ValueError(f"cannot resolve {host!r}: {e}") from None
    addresses = {str(info[4][0]) for info in infos}
    outside = sorted(a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_loopback)
    if not addresses or outside:
        raise ValueError(f"{host!r} resolves to {', '.join(outside) or 'nothing'}: the load generator only "
                         f"talks to loopback addresses (127.0.0.0/8, ::1)")
    return host


def check_pulsar_url(url: str) -> str:
    """A ``pulsar://host:port`` URL whose every host is a loopback address."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("pulsar", "pulsar+ssl") or not parts.netloc:
        raise ValueError(f"invalid Pulsar URL {url!r}: expected pulsar://host:port")
    for hostport in parts.netloc.split(","):
        host = hostport.rsplit(":", 1)[0].strip("[]") if ":" in hostport else hostport
        check_loopback(host)
    return url


# ------------------------------------------------------------------------------------------ the run

@dataclass
class Query:
    """What one query did."""

    question: str
    seconds: float = 0.0
    first_event: float | None = None
    question_uri: str = ""
    outcome: str = "error"  # answered | error | timeout
    error: str = ""


@dataclass
class LoadReport:
    """The figures of one run (``to_dict`` is the ``load`` object of the JSON output)."""

    stack: str
    seconds: float
    concurrency: int
    elapsed: float = 0.0
    queries: list[Query] = field(default_factory=list)
    traces_listed: int = 0
    traces_complete: int = 0
    settle_seconds: float = 0.0

    @property
    def answered(self) -> list[Query]:
        return [q for q in self.queries if q.outcome == "answered"]

    @property
    def errors(self) -> list[Query]:
        return [q for q in self.queries if q.outcome != "answered"]

    @property
    def traces_match(self) -> bool:
        """The number of complete stored traces equals the number of successful responses."""
        return self.traces_complete == len(self.answered)

    def to_dict(self) -> dict:
        lat = [q.seconds for q in self.answered]
        first = [q.first_event for q in self.queries if q.first_event is not None]
        return {
            "stack": self.stack, "seconds": self.seconds, "concurrency": self.concurrency,
            "elapsed": round(self.elapsed, 3), "sent": len(self.queries), "answered": len(self.answered),
            "errors": len(self.errors), "throughput_qps": round(len(lat) / self.elapsed, 3) if self.elapsed else 0.0,
            "latency_p50_s": round(percentile(lat, 50), 4) if lat else None,
            "latency_p99_s": round(percentile(lat, 99), 4) if lat else None,
            "latency_mean_s": round(statistics.mean(lat), 4) if lat else None,
            "first_event_p50_s": round(percentile(first, 50), 4) if first else None,
            "traces_listed": self.traces_listed, "traces_complete": self.traces_complete,
            "traces_match": self.traces_match, "settle_seconds": round(self.settle_seconds, 2),
            "error_samples": sorted({f"{q.outcome}: {q.error[:200]}" for q in self.errors})[:5],
        }

    def figures(self) -> list[Figure]:
        d = self.to_dict()
        note = f"{self.concurrency} concurrent for {self.seconds:g} s"
        figs = [Figure("load: throughput (answered queries)", d["throughput_qps"], "q/s", better="higher",
                       stack=self.stack, note=note),
                Figure("load: errors", float(d["errors"]), "queries", stack=self.stack,
                       note=f"of {d['sent']} sent"),
                Figure("load: stored complete traces - answered", float(d["traces_complete"] - d["answered"]),
                       "traces", stack=self.stack,
                       note=f"{d['traces_complete']} complete of {d['traces_listed']} stored "
                            f"for {d['answered']} answered")]
        if d["latency_p50_s"] is not None:
            figs += [Figure("load: latency p50", d["latency_p50_s"], "s", stack=self.stack, note=note),
                     Figure("load: latency p99", d["latency_p99_s"], "s", stack=self.stack, note=note)]
        if d["first_event_p50_s"] is not None:
            figs.append(Figure("load: first explain event p50", d["first_event_p50_s"], "s", stack=self.stack))
        return figs


async def ask(client, user: str, collection: str, explain_collection: str, question: str, timeout: float) -> Query:
    """One streaming, explainable GraphRAG query, timed."""
    from trustgraph_base.processor import RequestTimeout
    from trustgraph_base.pubsub import BackendError
    from trustgraph_base.schema import GraphRagQuery

    q = Query(question)
    t0 = time.perf_counter()
    try:
        async for msg in client.stream(GraphRagQuery(query=question, user=user, collection=collection, streaming=True,
                                                     explain_collection=explain_collection), timeout=timeout):
            if q.first_event is None and msg.message_type == "explain":
                q.first_event = time.perf_counter() - t0
                q.question_uri = msg.explain_id
            if msg.error is not None:
                q.outcome, q.error = "error", msg.error.message
                break
            if msg.end_of_session:
                q.outcome = "answered"
                break
    except RequestTimeout as e:
        q.outcome, q.error = "timeout", str(e)
    except (BackendError, ConnectionError, OSError) as e:
        q.outcome, q.error = "error", f"transport: {e}"
    q.seconds = time.perf_counter() - t0
    return q


async def generate(conn, report: LoadReport, user: str, collection: str, explain_collection: str,
                   timeout: float) -> None:
    """``report.concurrency`` workers ask questions in turn until ``report.seconds`` have passed."""
    client = await conn.client("graph-rag")
    end = time.monotonic() + report.seconds
    counter = iter(range(10**9))

    async def worker() -> None:
        while time.monotonic() < end:
            n = next(counter)
            report.queries.append(await ask(client, user, collection, explain_collection,
                                            QUESTIONS[n % len(QUESTIONS)], timeout))

    t0 = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(report.concurrency)))
    report.elapsed = time.monotonic() - t0


async def count_traces(conn, user: str, collection: str) -> tuple[int, int]:
    """(traces listed, traces whose final stage is stored) in ``collection``."""
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.schema import IRI, Term, TraceListRequest, TriplePattern, TriplesQueryRequest
    from trustgraph_cli.trace_model import final_stage_uris

    uris, cursor = [], ""
    while True:
        page = await conn.request("trace-list", TraceListRequest(user=user, collection=collection, limit=1000,
                                                                 cursor=cursor))
        uris += [t.uri for t in page.traces]
        cursor = page.next_cursor
        if not cursor:
            break
    complete = 0
    rdf_type = Term(IRI, ns.RDF_TYPE)
    for i in range(0, len(uris), 1000):
        ends = {u: final_stage_uris(u) for u in uris[i:i + 1000]}
        patterns = [TriplePattern(s=Term(IRI, e), p=rdf_type, g=ns.GRAPH_RETRIEVAL, limit=1)
                    for pair in ends.values() for e in pair if e]
        found = {t.s.value for t in (await conn.request("triples", TriplesQueryRequest(
            user=user, collection=collection, patterns=patterns))).triples}
        complete += sum(1 for final, error in ends.values() if final in found and error not in found)
    return len(uris), complete


async def settle(conn, report: LoadReport, user: str, explain_collection: str, seconds: float) -> None:
    """Wait until every answered query's trace is stored complete (or the counts stop moving), at most ``seconds``."""
    t0 = time.monotonic()
    previous = None
    while True:
        listed, complete = await count_traces(conn, user, explain_collection)
        report.traces_listed, report.traces_complete = listed, complete
        if complete >= len(report.answered) and (listed, complete) == previous:
            break
        if time.monotonic() - t0 > seconds:
            break
        previous = (listed, complete)
        await asyncio.sleep(0.5 if report.stack == "embedded" else 2.0)
    report.settle_seconds = time.monotonic() - t0


async def run_against(conn, report: LoadReport, user: str, collection: str, explain_collection: str,
                      timeout: float, settle_seconds: float) -> LoadReport:
    await generate(conn, report, user, collection, explain_collection, timeout)
    await settle(conn, report, user, explain_collection, settle_seconds)
    return report


async def run_embedded(seconds: float, concurrency: int, timeout: float, settle_seconds: float) -> LoadReport:
    """The embedded stack in this process, over SQLite in a temporary directory, the sample corpus loaded."""
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.load import load_documents
    from trustgraph_flow.embedded import ALL, start_embedded
    from trustgraph_flow.ingest.sample_corpus import sample_documents

    report = LoadReport("embedded", seconds, concurrency)
    with tempfile.TemporaryDirectory(prefix="tg-load-") as home:
        stack = await start_embedded(Path(home), only=ALL, llm="extractive",
                                     settings={"graph-rag": {"concurrency": concurrency}})
        try:
            async with Connection.attach(stack, timeout=300) as conn:
                await load_documents(conn, "trustgraph", "default",
                                     [(d.id, d.title, d.kind, d.content) for d in sample_documents()],
                                     idle_timeout=300, show=False)
                await stack.wait_idle()
                await run_against(conn, report, "trustgraph", "default", f"load-{uuid.uuid4().hex[:8]}", timeout,
                                  settle_seconds)
        finally:
            await stack.stop()
    return report


async def run_distributed(pulsar_url: str, flow: str, user: str, collection: str, explain_collection: str,
                          seconds: float, concurrency: int, timeout: float, settle_seconds: float) -> LoadReport:
    """Running services over Pulsar (loopback only)."""
    from trustgraph_cli.connection import Connection

    report = LoadReport("distributed", seconds, concurrency)
    async with Connection(check_pulsar_url(pulsar_url), None, (), timeout, flow) as conn:
        return await run_against(conn, report, user, collection, explain_collection, timeout, settle_seconds)


# ------------------------------------------------------------------------------------------ entry points

def report_results(report: LoadReport) -> Results:
    results = Results()
    results.add(*report.figures())
    return results


def run(quick: bool = False, pulsar_url: str | None = None, flow: str = "default", user: str = "trustgraph",
        collection: str = "default", seconds: float | None = None, concurrency: int | None = None) -> Results:
    """The embedded stack, or running services at ``pulsar_url``; ``quick``: 5 s at concurrency 4."""
    seconds = seconds or (5.0 if quick else 30.0)
    concurrency = concurrency or (4 if quick else 8)
    if pulsar_url:
        report = asyncio.run(run_distributed(pulsar_url, flow, user, collection, f"load-{uuid.uuid4().hex[:8]}",
                                             seconds, concurrency, 60.0, 120.0))
    else:
        report = asyncio.run(run_embedded(seconds, concurrency, 60.0, 60.0))
    return report_results(report)


def _bounded(kind, low, high):
    def parse(text: str):
        value = kind(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {text}")
        return value
    return parse


def main(argv=None) -> Results:
    """Parse arguments, run the load, print the figures (and write ``--json``)."""
    import json

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=_bounded(float, 0.5, MAX_SECONDS), default=30.0,
                        help=f"how long to start new queries (at most {MAX_SECONDS:g})")
    parser.add_argument("--concurrency", type=_bounded(int, 1, MAX_CONCURRENCY), default=8,
                        help=f"queries in flight at once (at most {MAX_CONCURRENCY})")
    parser.add_argument("--quick", action="store_true", help="5 s at concurrency 4 (unless given)")
    parser.add_argument("--pulsar-url", default=None,
                        help="load running services over Pulsar at this loopback URL (default: embedded stack)")
    parser.add_argument("--flow", default=os.environ.get("TG_FLOW", "default"))
    parser.add_argument("--user", default="trustgraph")
    parser.add_argument("--collection", default="default", help="the collection holding the knowledge")
    parser.add_argument("--explain-collection", default="", help="where traces go (default: load-<random>)")
    parser.add_argument("--timeout", type=_bounded(float, 1.0, 600.0), default=60.0,
                        help="seconds a query may wait for each message")
    parser.add_argument("--settle", type=_bounded(float, 0.0, 600.0), default=120.0,
                        help="seconds to wait for traces to be stored after the last answer")
    parser.add_argument("--json", help="write the figures and the run's numbers to this JSON file")
    args = parser.parse_args(argv)
    if args.quick:
        given = argv if argv is not None else sys.argv[1:]
        args.seconds = args.seconds if "--seconds" in given else 5.0
        args.concurrency = args.concurrency if "--concurrency" in given else 4
    if args.pulsar_url:
        try:
            check_pulsar_url(args.pulsar_url)
        except ValueError as e:
            parser.error(str(e))
        report = asyncio.run(run_distributed(args.pulsar_url, args.flow, args.user, args.collection,
                                             args.explain_collection or f"load-{uuid.uuid4().hex[:8]}",
                                             args.seconds, args.concurrency, args.timeout, args.settle))
    else:
        report = asyncio.run(run_embedded(args.seconds, args.concurrency, args.timeout, args.settle))
    results = report_results(report)
    results.print_table("load")
    d = report.to_dict()
    print(json.dumps({k: v for k, v in d.items() if k != "error_samples"}))
    if d["error_samples"]:
        print("errors:", *d["error_samples"], sep="\n  ")
    if args.json:
        data = results.to_json()
        data["load"] = d
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(data, indent=2))
    return results


if __name__ == "__main__":
    main()
