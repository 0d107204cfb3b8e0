"""Two deployments to run tenant and retention tests on, the same way: the CLI as a subprocess, services over the bus.

``embedded``: a fresh ``TG_HOME`` (SQLite), commands run embedded; service paths go through the
same processors started in the test process on that ``TG_HOME``.  ``distributed``: the
session's own services on its own Pulsar + Cassandra (:mod:`fault_stack`); commands and service
paths go over Pulsar.  Either way the sample corpus belongs to one tenant (``owner``), and
:meth:`Deployment.connect` gives a :class:`~trustgraph_cli.connection.Connection` for requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent


@dataclass
class CliRun:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def explain(self) -> str:
        return f"$ {' '.join(self.args)}\nexit {self.returncode}\n{self.stdout[-2000:]}\n{self.stderr[-2000:]}"

    @property
    def question_uri(self) -> str:
        m = re.search(r"^\[question\] (\S+)$", self.stdout, re.MULTILINE)
        assert m, self.explain()
        return m.group(1)


@dataclass
class Deployment:
    """Where tenant data lives and how to reach it."""

    kind: str
    owner: tuple[str, str]                  # (user, collection) holding the sample corpus
    env: dict[str, str]
    home: Path | None = None
    stack: Any = None                       # the FaultStack (distributed)
    documents: list = field(default_factory=list)

    def cli(self, *args: str, user: str | None = None, collection: str | None = None,
            timeout: float = 300) -> CliRun:
        """Run a tg-* command as ``user``/``collection`` (default: the owner)."""
        u, c = user or self.owner[0], collection or self.owner[1]
        argv = [str(BIN / args[0]), *args[1:], "-U", u, "-C", c]
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout)
        return CliRun(argv, r.returncode, r.stdout, r.stderr)

    def ok(self, *args: str, **kw) -> CliRun:
        r = self.cli(*args, **kw)
        assert r.returncode == 0, r.explain()
        return r

    def load(self, path: Path, collection: str) -> None:
        """Ingest one text file into the owner's user, ``collection``.

        Embedded: ``tg-load-document``.  Distributed: the fault stack runs the query services
        only, so the stack's own ingestion processors load it over the same servers.
        """
        if self.kind == "distributed":
            asyncio.run(self.stack.ingest(self.owner[0], collection,
                                          [(f"urn:test:{path.name}", path.stem, "text/plain", path.read_bytes())]))
        else:
            self.ok("tg-load-document", str(path), collection=collection)

    def open_stores(self) -> tuple[Any, Any]:
        """(triples store, librarian store) read straight from the deployment's database."""
        from trustgraph_base.store.librarian import open_librarian_store
        from trustgraph_base.store.triples import open_triples_store

        if self.kind == "distributed":
            config = self.stack.cassandra_config()
            return open_triples_store("cassandra", config=config), open_librarian_store("cassandra", config=config)
        return open_triples_store("sqlite", home=self.home), open_librarian_store("sqlite", home=self.home)

    @contextlib.asynccontextmanager
    async def connect(self):
        """A Connection for service requests (embedded: the processors started here, on the same files)."""
        from trustgraph_cli.connection import Connection

        if self.kind == "distributed":
            async with Connection(self.stack.pair.pulsar_url, None, (), 60.0, self.stack.flow) as conn:
                yield conn
            return
        from trustgraph_flow.embedded import QUERY_STACK, start_embedded

        stack = await start_embedded(self.home, only=QUERY_STACK, llm="extractive")
        try:
            async with Connection.attach(stack, timeout=60) as conn:
                yield conn
            await stack.wait_idle()
        finally:
            await stack.stop()


def cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PULSAR_URL", "TG_FLOW", "OPENAI_BASE_URL", "OPENAI_API_KEY", "LLM_BACKEND", "TG_DEBUG")}
    env.update({"TG_HOME": str(home), "PYTHONUNBUFFERED": "1"})
    return env


def embedded(home: Path, user: str = "alice", collection: str = "lab", timeout: float = 120) -> Deployment:
    """A fresh TG_HOME whose sample corpus belongs to ``user``/``collection`` (loaded within ``timeout`` s)."""
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.load import load_documents
    from trustgraph_flow.embedded import INGEST, start_embedded
    from trustgraph_flow.ingest.sample_corpus import sample_documents

    docs = sample_documents()

    async def ingest() -> None:
        stack = await start_embedded(home, only=tuple(dict.fromkeys(INGEST)), llm="extractive")
        try:
            async with Connection.attach(stack, timeout=timeout) as conn:
                await load_documents(conn, user, collection, [(d.id, d.title, d.kind, d.content) for d in docs],
                                     idle_timeout=timeout, show=False)
            await stack.wait_idle()
        finally:
            await stack.stop()

    asyncio.run(ingest())
    return Deployment("embedded", (user, collection), cli_env(home), home=home, documents=docs)


def distributed(stack) -> Deployment:
    """The fault stack's services; its corpus belongs to its user's ``default`` collection."""
    return Deployment("distributed", (stack.user, stack.collection), stack.cli_env(), stack=stack,
                      documents=stack.documents)


def intruders(d: Deployment) -> list[tuple[str, str]]:
    """Tenants that must see nothing of the owner's: another user (same collection name), another collection."""
    user, collection = d.owner
    return [(f"{user}-other", collection), (user, f"{collection}-other")]
