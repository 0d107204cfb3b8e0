"""README's "Distributed set-up", executed as written.

The block between ``<!-- distributed-services:start -->`` and ``<!-- distributed-services:end -->``
lists every service of the manifest (trustgraph_flow/manifest.py) with its command line; the
block between the ``distributed-cli`` markers lists the CLI calls a user then makes.  The test
starts each service as a real subprocess with exactly the documented command line against the
shared Pulsar and Cassandra, then runs each documented CLI call and checks that it works; every
service is stopped by its PID at the end.

What the test adds, all through variables README documents: the servers' addresses
(``PULSAR_URL``, ``CASSANDRA_HOST``...), a flow of its own (``TG_FLOW``) so no other test's
services share its queues, ``OPENAI_BASE_URL`` for ``text-completion`` only (the project's
test LLM server; the other services keep the extractive default), ``TG_GATEWAY_PORT`` (a free
port); and ``-U <user of its own>`` on each CLI call, so its data lives in a keyspace of its own.

The same file checks the set-up's refusals: a store service on Pulsar given no store, and
``text-completion`` given no endpoint, each end with one line and exit status 2.
"""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import uuid
from pathlib import Path

import pytest
from e2e_support import ServiceProcess, base_env, run_cli, running_llm_server, script, wait_ready

from trustgraph_flow.manifest import PROCESSORS

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
START_SECONDS = 300


def readme_block(name: str) -> list[list[str]]:
    """The command lines of README's fenced block between the ``name`` markers (comments and ``&`` dropped)."""
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"<!-- {name}:start -->\s*```bash\n(.*?)```\s*<!-- {name}:end -->", text, re.S)
    assert match, f"README.md has no fenced bash block between the {name} markers"
    lines = []
    for line in match.group(1).splitlines():
        argv = shlex.split(line, comments=True)
        if argv and argv[-1] == "&":
            argv = argv[:-1]
        if argv:
            lines.append(argv)
    return lines


def test_readme_lists_every_service_once_with_the_store_option_exactly_where_it_keeps_data():
    services = readme_block("distributed-services")
    assert sorted(argv[0] for argv in services) == sorted(e.id for e in PROCESSORS.values())
    for argv in services:
        assert ("--store" in argv) == bool(PROCESSORS[argv[0]].stores), argv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def test_llm():
    """The project's OpenAI-compatible test server (for ``text-completion``)."""
    with running_llm_server() as url:
        yield url


def _drop_keyspace(cassandra, user: str) -> None:
    from trustgraph_base.store.cassandra.connection import CassandraConfig, connect
    from trustgraph_base.store.names import storage_name

    session = connect(CassandraConfig(hosts=(cassandra.host,), port=int(cassandra.port)))
    session.execute(f"DROP KEYSPACE IF EXISTS {storage_name('tg', user)}", timeout=180)


@pytest.mark.integration
def test_readme_distributed_set_up_as_written(pulsar_service, cassandra_service, test_llm, tmp_path):
    flow = f"readme{uuid.uuid4().hex[:8]}"
    user = f"readme-{uuid.uuid4().hex[:8]}"
    env = base_env({"PULSAR_URL": pulsar_service.url, "PULSAR_ADMIN_URL": pulsar_service.admin_url,
                    "CASSANDRA_HOST": cassandra_service.host, "CASSANDRA_PORT": str(cassandra_service.port),
                    "TG_FLOW": flow, "TG_LOG_LEVEL": "INFO", "TG_GATEWAY_PORT": str(_free_port())})
    if pulsar_service.listener_name:
        env["PULSAR_LISTENER_NAME"] = pulsar_service.listener_name
    services = []
    for argv in readme_block("distributed-services"):
        name = argv[0]
        services.append(ServiceProcess(name, [script(name), *argv[1:]], tmp_path / f"{name}.log", [name]))
    try:
        for s in services:
            s.start({**env, "OPENAI_BASE_URL": test_llm, "OPENAI_API_KEY": "test"} if s.name == "text-completion"
                    else env)
        wait_ready(services, START_SECONDS)
        outputs = []
        for argv in readme_block("distributed-cli"):
            r = run_cli(argv[0], *argv[1:], "-U", user, env=env, timeout=900)
            assert r.returncode == 0, (argv, r.stdout[-3000:], r.stderr[-3000:])
            outputs.append(r.stdout)
        quickstart, docrag, listing = outputs
        for block in ("[question]", "[exploration]", "[focus]", "[synthesis]"):
            assert block in quickstart, quickstart[-3000:]
        assert "polonium" in quickstart.lower()
        assert "[exploration]" in docrag and "chunk(s)" in docrag, docrag[-3000:]
        assert "GraphRAG" in listing and "DocRAG" in listing, listing
    finally:
        left = [pid for s in services for pid in s.stop()]
        _drop_keyspace(cassandra_service, user)
    assert left == [], f"processes left behind: {left}"
    for s in services:
        assert s.proc.returncode == 0, (s.name, s.proc.returncode, s.log_text()[-3000:])


def _one_line_refusal(argv: list[str], env: dict[str, str]) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.mark.parametrize("service", sorted(e.id for e in PROCESSORS.values() if e.stores))
def test_a_store_service_on_pulsar_given_no_store_refuses_to_start(service, tmp_path):
    # the broker address is never reached: the refusal comes first
    line = _one_line_refusal([script(service), "--pubsub", "pulsar", "--pulsar-url", "pulsar://127.0.0.1:9"],
                             base_env({"PULSAR_ADMIN_URL": "http://127.0.0.1:9", "TG_HOME": str(tmp_path)}))
    assert "--store" in line and "TG_STORE" in line, line
    assert not any(tmp_path.iterdir()), "nothing may be written to a SQLite file"


def test_text_completion_without_an_endpoint_refuses_to_start():
    line = _one_line_refusal([script("text-completion"), "--pubsub", "memory"], base_env(drop=("OPENAI_MODEL",)))
    assert "--base-url" in line and "OPENAI_BASE_URL" in line, line
