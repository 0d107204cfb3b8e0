"""What the benchmarks of one run share, and the command line and report every benchmark module has.

:class:`Suite` holds the stacks, one deployment per stack and the LLM endpoint, so a later
benchmark reuses what an earlier one started and loaded; :func:`run_on_suite`,
:func:`bench_parser` and :func:`report` give every benchmark module the same ``run()`` /
``main()`` shape that ``python -m bench`` relies on.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from ..common import Results
from .deployment import Deployment, Servers
from .llm import LlmEndpoint


def load_note() -> str:
    """The machine's load average: wall-clock figures on a busy 2-core machine measure the neighbours too."""
    try:
        return f"load {os.getloadavg()[0]:.1f}/{os.cpu_count()} cores"
    except OSError:  # pragma: no cover
        return ""


class Suite:
    """What the benchmarks of one run share: the stacks, one deployment (user) per stack, the LLM endpoint.

    One deployment per stack keeps Cassandra schema work (a keyspace and its tables) to one per run;
    benchmarks use their own collections in it.  ``corpus`` and ``graphs`` say what is loaded where,
    so a later benchmark reuses what an earlier one loaded.

    :param quick: smaller data and fewer repetitions.
    :param servers: where the distributed stack's servers are (default: from the environment).
    """

    def __init__(self, quick: bool = False, servers: Servers | None = None):
        self.quick = quick
        self.servers = servers or Servers.from_env()
        self._llm: LlmEndpoint | None = None
        self.deployments: dict[str, Deployment] = {}
        self.corpus: dict[str, str] = {}          # stack -> collection holding the sample corpus
        self.graphs: set[tuple[str, str]] = set()  # (stack, collection) holding a synthetic graph

    @property
    def stacks(self) -> list[str]:
        return self.servers.stacks()

    @property
    def llm(self) -> LlmEndpoint:
        """The extractive LLM endpoint with a fixed 50 ms latency (started on first use)."""
        if self._llm is None:
            self._llm = LlmEndpoint()
        return self._llm

    def deployment(self, stack: str) -> Deployment:
        if stack not in self.deployments:
            self.deployments[stack] = Deployment(stack, self.servers)
        return self.deployments[stack]

    def close(self) -> None:
        if self._llm is not None:
            self._llm.stop()
            self._llm = None
        for d in self.deployments.values():
            d.close()
        self.deployments.clear()

    def __enter__(self) -> Suite:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_on_suite(quick: bool, suite: Suite | None, bench: Any) -> Results:
    """``asyncio.run(bench(suite))`` on ``suite``, or on a new one that is closed afterwards.

    :param bench: ``suite -> coroutine`` returning the benchmark's :class:`Results`.
    """
    own = suite is None
    suite = suite or Suite(quick)
    try:
        return asyncio.run(bench(suite))
    finally:
        if own:
            suite.close()


def bench_parser(doc: str, quick_help: str) -> argparse.ArgumentParser:
    """The command line every benchmark module shares: ``--quick`` and ``--json`` (add your own)."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--json", help="write the figures to this JSON file")
    return parser


def report(results: Results, title: str, json_path: str | None) -> Results:
    """Print ``results`` as a table and, when asked, write them as JSON."""
    results.print_table(title)
    if json_path:
        results.write_json(json_path)
    return results
