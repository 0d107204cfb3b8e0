"""TrustGraph 2.11.1's own published CLI, unchanged, against this project's gateway, on both deployments.

The client lives in a venv of its own (``scripts/tg-client.sh``: its commands share names
with ours), cached outside the repository.  The gateway runs as a process: ``tg-gateway``
over the embedded deployment's data, ``api-gateway`` over Pulsar + Cassandra next to the
distributed deployment's services.  The assertions read what TrustGraph's commands print.

TrustGraph's trace walker reads Question <- Grounding <- Exploration <- Focus <- Synthesis through
``prov:wasDerivedFrom``, and the agent's observations and answer from librarian documents named by
``tg:document``: trace model v2 (docs/trace-model.md) stores exactly that, so ``tg-show-explain-trace``
prints every stage.  Client bugs and limits no server can fix are in ``docs/compatibility.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import AGENT_QUESTION, DOC_QUESTION, GRAPH_QUESTION, CliResult, GatewayProcess, base_env, start_gateway

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _integration_required() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.environ.get("REQUIRE_INTEGRATION") == "1"


@pytest.fixture(scope="session")
def tg_bin() -> Path:
    """The bin directory of TrustGraph 2.11.1's client venv (created by ``scripts/tg-client.sh`` if missing)."""
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "tg-client.sh"), "ensure"], capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0:
        message = f"cannot create TrustGraph's client venv: {proc.stderr.strip()[-1000:]}"
        if _integration_required():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def tg_gateway(deployment, tmp_path_factory):
    gw = start_gateway(deployment, tmp_path_factory.mktemp(f"tg-gateway-{deployment.kind}"))
    yield gw
    code = gw.stop()
    assert code == 0, f"the gateway did not stop cleanly (exit {code}):\n{gw.log_text()[-3000:]}"


class TrustGraph:
    """Runs TrustGraph's commands against one gateway."""

    def __init__(self, bin_dir: Path, gateway: GatewayProcess, flow: str):
        self.bin = bin_dir
        self.gateway = gateway
        self.flow = flow
        self.env = base_env({"TRUSTGRAPH_URL": gateway.url}, drop=("TRUSTGRAPH_TOKEN", "TRUSTGRAPH_WORKSPACE"))

    def run(self, command: str, *args: str, flow_flag: str | None = "-f", timeout: float = 300) -> CliResult:
        argv = [str(self.bin / command), *args]
        if flow_flag:
            argv += [flow_flag, self.flow]
        t0 = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout)
        return CliResult(argv, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)

    def ok(self, command: str, *args: str, **kw) -> CliResult:
        """Run and require success: TrustGraph's commands print ``Exception: ...`` and may still exit 0."""
        r = self.run(command, *args, **kw)
        assert r.returncode == 0 and "Exception" not in r.stdout + r.stderr, r.explain()
        return r


@dataclass
class Asked:
    graph_rag: CliResult
    document_rag: CliResult
    agent: CliResult


@pytest.fixture(scope="session")
def tg(tg_bin, tg_gateway, deployment) -> TrustGraph:
    return TrustGraph(tg_bin, tg_gateway, deployment.flow)


@pytest.fixture(scope="session")
def tg_asked(tg) -> Asked:
    """One GraphRAG, DocumentRAG and agent question asked with TrustGraph's ``-x``."""
    return Asked(tg.ok("tg-invoke-graph-rag", "-x", "-q", GRAPH_QUESTION),
                 tg.ok("tg-invoke-document-rag", "-x", "-q", DOC_QUESTION),
                 tg.ok("tg-invoke-agent", "-x", "-v", "-q", AGENT_QUESTION))


def _uri(result: CliResult, prefix: str) -> str:
    for word in (result.stdout + result.stderr).split():
        if word.startswith(prefix):
            return word
    raise AssertionError(f"no {prefix}… in the output\n{result.explain()}")


def _block(text: str, header: str) -> str:
    """The lines of one ``[header]`` block of TrustGraph's ``-x`` output (up to the next blank line)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f"[{header}]"))
    out = []
    for line in lines[start + 1:]:
        if not line.strip() or line.strip().startswith("["):
            break
        out.append(line.strip())
    return "\n".join(out)


def test_graph_rag_explain_shows_every_stage_and_the_answer(tg_asked):
    r = tg_asked.graph_rag
    text = r.stdout + r.stderr
    question = _uri(r, "urn:trustgraph:question:")
    assert f"Query: {GRAPH_QUESTION}" in _block(text, "question")
    grounding = _block(text, "grounding")
    assert int(grounding.split("Concepts:")[1].split()[0]) > 0
    exploration = _block(text, "exploration")
    assert int(exploration.split("Edges explored:")[1].split()[0]) > 0
    focus = _block(text, "focus").splitlines()
    edges = [line for line in focus if line.startswith("Edge: (")]
    assert edges and any("radium" in e for e in edges), text
    scores = [line for line in focus if line.startswith("Concept: ")]  # the selector's concept and score
    assert len(scores) == len(edges) and all(" Score: 0." in line for line in scores), text
    assert "Document: urn:trustgraph:answer:" in _block(text, "synthesis")
    assert "radium" in r.stdout.lower() and "Curie" in r.stdout
    assert question.rsplit(":", 1)[1] in _block(text, "synthesis")


def test_document_rag_explain_and_no_streaming(tg, tg_asked):
    r = tg_asked.document_rag
    text = r.stdout + r.stderr
    _uri(r, "urn:trustgraph:docrag:")
    assert f"Query: {DOC_QUESTION}" in _block(text, "question")
    assert int(_block(text, "exploration").split("Chunks retrieved:")[1].split()[0]) > 0
    assert "/answer" in _block(text, "synthesis")
    streamed_answer = r.stdout.strip()
    assert "becquerel" in streamed_answer.lower()
    plain = tg.ok("tg-invoke-document-rag", "--no-streaming", "-q", DOC_QUESTION)  # REST
    assert plain.stdout.strip() and plain.stdout.strip() in streamed_answer


def test_agent_explain_verbose_shows_session_analysis_and_conclusion(tg_asked):
    r = tg_asked.agent
    text = r.stdout + r.stderr
    session = _uri(r, "urn:trustgraph:agent:")
    assert f"[session] {session}" in text
    assert "[analysis: knowledge-query]" in text and "[conclusion]" in text
    assert f"Document: {session}/i1/observation" in _block(text, "observation")
    assert f"Document: {session}/answer" in _block(text, "conclusion")
    assert "Polonium" in text or "polonium" in text
    assert "Curie" in r.stdout


def _listed(tg) -> list[dict]:
    return json.loads(tg.ok("tg-list-explain-traces", "--format", "json", "--limit", "200").stdout)


def test_list_explain_traces_types_newest_first(tg, tg_asked):
    wanted = {_uri(tg_asked.graph_rag, "urn:trustgraph:question:"): "GraphRAG",
              _uri(tg_asked.document_rag, "urn:trustgraph:docrag:"): "DocRAG",
              _uri(tg_asked.agent, "urn:trustgraph:agent:"): "Agent"}
    deadline = time.monotonic() + 60
    while True:
        rows = _listed(tg)
        found = {row["id"]: row["type"] for row in rows}
        if all(uri in found for uri in wanted) or time.monotonic() > deadline:
            break
        time.sleep(1)
    for uri, kind in wanted.items():
        assert found.get(uri) == kind, (uri, rows)
    times = [row["time"] for row in rows]
    assert times == sorted(times, reverse=True)
    # the agent's GraphRAG sub-query is a sub-trace: not listed on its own
    assert sum(1 for row in rows if row["question"] == AGENT_QUESTION and row["type"] == "GraphRAG") <= \
        sum(1 for row in rows if row["question"] == GRAPH_QUESTION and row["type"] == "GraphRAG")


def test_show_explain_trace_prints_what_todays_traces_hold(tg, tg_asked):
    question = _uri(tg_asked.graph_rag, "urn:trustgraph:question:")
    out = tg.ok("tg-show-explain-trace", question).stdout
    assert f"=== GraphRAG Session: {question} ===" in out and f"Question: {GRAPH_QUESTION}" in out
    docrag = _uri(tg_asked.document_rag, "urn:trustgraph:docrag:")
    out = tg.ok("tg-show-explain-trace", docrag).stdout
    assert f"=== DocRAG Session: {docrag} ===" in out and f"Question: {DOC_QUESTION}" in out
    session = _uri(tg_asked.agent, "urn:trustgraph:agent:")
    out = tg.ok("tg-show-explain-trace", session).stdout
    assert f"=== Agent Session: {session} ===" in out
    assert "Action: knowledge-query" in out and AGENT_QUESTION in out


def _section(text: str, heading: str) -> str:
    """The lines of one ``--- heading ---`` section of TrustGraph's ``tg-show-explain-trace`` output."""
    return text.split(f"--- {heading} ---", 1)[1].split("\n--- ", 1)[0]


def test_show_explain_trace_walks_every_stage(tg, tg_asked):
    """Trace model v2: TrustGraph's walker reaches every stage on both stacks (issue: trace model v2)."""
    from trustgraph_flow.ingest.sample_corpus import sample_documents

    question = _uri(tg_asked.graph_rag, "urn:trustgraph:question:")
    out = tg.ok("tg-show-explain-trace", "--show-provenance", question).stdout
    assert "No exploration data found" not in out and "No focus data found" not in out, out
    assert int(_section(out, "Exploration").split("Retrieved ")[1].split()[0]) > 0
    focus = _section(out, "Focus (Edge Selection)")
    selected = int(focus.split("Selected ")[1].split()[0])
    assert selected > 0 and focus.count("Concept: ") == selected and focus.count(" Score: 0.") == selected, out
    sources = [line.split("Source: ", 1)[1] for line in focus.splitlines() if "Source: " in line]
    assert sources, out
    for chain in sources:  # as on TrustGraph's server: the subgraph (no label) and then every hop by its label
        subgraph, chunk, page, document = chain.split(" -> ")  # (docs/gateway.md, label look-ups)
        assert subgraph.startswith("https://trustgraph.ai/subgraph/"), out
        assert chunk.startswith("Chunk ") and page.startswith("Page "), out
        assert document in {d.title for d in sample_documents()}, out
    synthesis = _section(out, "Synthesis")
    assert "Answer:" in synthesis and "Curie" in synthesis and "radium" in synthesis.lower(), out
    as_json = json.loads(tg.ok("tg-show-explain-trace", "--format", "json", question).stdout)
    assert all(isinstance(e["score"], float) and e["concept"] for e in as_json["focus"]["selected_edges"])

    docrag = _uri(tg_asked.document_rag, "urn:trustgraph:docrag:")
    out = tg.ok("tg-show-explain-trace", docrag).stdout
    assert f"Concepts: {DOC_QUESTION}" in _section(out, "Grounding"), out
    assert int(_section(out, "Exploration").split("Retrieved ")[1].split()[0]) > 0, out
    assert "becquerel" in _section(out, "Synthesis").lower(), out

    session = _uri(tg_asked.agent, "urn:trustgraph:agent:")
    out = tg.ok("tg-show-explain-trace", session).stdout
    assert "Action: knowledge-query" in _section(out, "Analysis"), out
    observation = _section(out, "Observation")
    assert "Content:" in observation and "polonium" in observation.lower(), out
    conclusion = _section(out, "Conclusion")
    assert "Answer:" in conclusion and "Curie" in conclusion, out
    assert out.index("--- Analysis ---") < out.index("--- Observation ---") < out.index("--- Conclusion ---")


def test_show_graph_streams_the_source_graph(tg):
    out = tg.ok("tg-show-graph", "-g", "urn:graph:source", flow_flag="-f").stdout.splitlines()
    assert len(out) > 100
    assert any(line.startswith("urn:page:") and "http://www.w3.org/ns/prov#wasDerivedFrom" in line for line in out)
    # one line per triple, but a literal may hold line breaks: count the lines that start a triple
    default = [line for line in tg.ok("tg-show-graph", "-l", "50").stdout.splitlines()
               if line.startswith(("http://", "https://", "urn:")) and len(line.split(" ")) >= 3]
    assert 0 < len(default) <= 50


def test_library_document_added_processed_and_queried(tg, tmp_path):
    collection = f"tgc{uuid.uuid4().hex[:8]}"
    doc_id = f"https://example.org/doc/{uuid.uuid4().hex}"
    path = tmp_path / "vibranium.txt"
    path.write_text("Zorblax Quentin discovered the element vibranium in 1952. Vibranium is a metal.\n")
    added = tg.ok("tg-add-library-document", "-k", "text/plain", "--name", "Vibranium notes", "--identifier",
                  doc_id, str(path), flow_flag=None)
    assert "Loaded successfully" in added.stdout
    tg.ok("tg-start-library-processing", "-d", doc_id, "--id", f"proc-{collection}", "--collection", collection,
          flow_flag="-i")
    deadline = time.monotonic() + 180
    while True:
        r = tg.ok("tg-invoke-document-rag", "-C", collection, "-q", "Who discovered vibranium?")
        if "Zorblax" in r.stdout or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert "Zorblax" in r.stdout, r.explain()
    graph = tg.ok("tg-invoke-graph-rag", "-C", collection, "-q", "Who discovered vibranium?")
    assert "Zorblax" in graph.stdout and "Vibranium notes" in graph.stderr + graph.stdout


def test_graph_rag_no_streaming_is_a_client_bug(tg):
    """docs/compatibility.md: TrustGraph 2.11.1's client crashes before sending anything."""
    r = tg.run("tg-invoke-graph-rag", "--no-streaming", "-q", GRAPH_QUESTION)
    assert "unexpected keyword argument 'graph'" in r.stdout + r.stderr


PATTERN_QUESTION = "Who discovered polonium and who discovered radium?"


def test_agent_supervisor_trace_through_trustgraphs_cli(tg):
    """TrustGraph's ``tg-invoke-agent -p supervisor -x`` (whose ``-x`` sends no pattern: docs/compatibility.md, so
    the router chooses supervisor for two independent clauses) prints the Decomposition, a Finding per sub-agent
    and the Synthesis; its ``tg-show-explain-trace`` walks from the Question to every one of them; ``-p`` without
    ``-x`` sends the pattern."""
    r = tg.ok("tg-invoke-agent", "-p", "supervisor", "-x", "-q", PATTERN_QUESTION)
    text = r.stdout + r.stderr
    session = _uri(r, "urn:trustgraph:agent:")
    decompose = _block(text, "decompose")
    assert "Thread 0: Who discovered polonium?" in decompose and "Thread 1: Who discovered radium?" in decompose, text
    assert text.count("[finding]") == 2 and f"Document: {session}/finding/1" in text, text
    assert f"Document: {session}/answer" in _block(text, "synthesis"), text
    assert "polonium" in r.stdout.lower() and "radium" in r.stdout.lower(), text
    out = tg.ok("tg-show-explain-trace", session).stdout
    assert "Decomposed into 2 research threads" in _section(out, "Decomposition"), out
    assert out.count("--- Finding ---") == 2 and "Curie" in _section(out, "Finding"), out
    assert "Curie" in _section(out, "Synthesis"), out
    plan = tg.ok("tg-invoke-agent", "-p", "plan-then-execute", "-q", "Who discovered polonium, then when was "
                 "polonium discovered?")
    assert "Curie" in plan.stdout, plan.explain()
