"""Bad input and failures: one ``Error:`` line on stderr, a non-zero exit code, nothing on stdout, no traceback,
no process left behind.

Decision (documented in docs/cli.md): listing the traces of an empty store is not an error; it prints
``No traces found for user U, collection C.`` (``{"traces": [], ...}`` with ``--format json``) and exits 0.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import time
import urllib.request
import uuid

import pytest
from e2e_support import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    assert_clean_failure,
    base_env,
    processes_in_group,
    run_cli,
    running_llm_server,
    script,
    start_at_a_terminal,
)

pytestmark = pytest.mark.e2e


BAD_NAMES = [
    pytest.param(["-U", "a b"], id="user-space"),
    pytest.param(["-U", "../x"], id="user-path"),
    pytest.param(["-U", "x'; DROP KEYSPACE tg; --"], id="user-cql"),
    pytest.param(["-U", ""], id="user-empty"),
    pytest.param(["-C", "a;b"], id="collection-cql"),
    pytest.param(["-C", "../../etc"], id="collection-path"),
    pytest.param(["--flow", "a b"], id="flow"),
]


SHOW = ["tg-show-explain-trace", "urn:trustgraph:question:6f1c2a52-6d6c-4c79-9d6c-1d0d8b1b2c3d"]
INVOKE = ["tg-invoke-graph-rag", "-q", "Who discovered radium?"]


@pytest.mark.parametrize("command, names", [
    *[pytest.param(["tg-list-explain-traces"], n.values[0], id=f"list-{n.id}") for n in BAD_NAMES],
    pytest.param(SHOW, ["-U", "../x"], id="show-user-path"),
    pytest.param(SHOW, ["-C", "a;b"], id="show-collection-cql"),
    pytest.param(INVOKE, ["-U", "x'; DROP KEYSPACE tg; --"], id="invoke-user-cql"),
    pytest.param(INVOKE, ["-C", "../../etc"], id="invoke-collection-path"),
])
def test_bad_user_collection_and_flow_names_are_refused(deployment, command, names):
    r = deployment.run(command[0], *names, *command[1:], timeout=60)
    assert_clean_failure(r, EXIT_USAGE, contains="invalid")


@pytest.mark.parametrize("uri", [
    "not-a-uri", "urn:trustgraph:question:<script>", "http://example.org/x", "urn:trustgraph:question:",
    "urn:trustgraph:agent:a b",
])
def test_malformed_trace_uri(deployment, uri):
    assert_clean_failure(deployment.run("tg-show-explain-trace", uri, timeout=60), EXIT_USAGE,
                         contains="not a trace URI")


def test_unknown_trace_uri(deployment):
    uri = f"urn:trustgraph:question:{uuid.uuid4()}"
    r = deployment.run("tg-show-explain-trace", uri, timeout=60)
    assert_clean_failure(r, EXIT_FAILED, contains=f"no trace {uri}")
    r = deployment.run("tg-delete-explain-trace", uri, timeout=60)
    assert_clean_failure(r, EXIT_FAILED)


def test_unknown_user_and_collection(deployment, asked):
    from e2e_support import parse_explain

    uri = parse_explain(asked.graph_rag.stdout)[0][0].uri
    deployment.trace_json(uri)
    # A trace exists in the session user's default collection, but not for another user or collection.
    other_user = deployment.run("tg-show-explain-trace", uri, user="nobody" + uuid.uuid4().hex[:6], timeout=60)
    assert_clean_failure(other_user, EXIT_FAILED, contains="no trace")
    other_collection = deployment.run("tg-show-explain-trace", uri, "-C", "nothing-here", timeout=60)
    assert_clean_failure(other_collection, EXIT_FAILED, contains="collection nothing-here")
    doc = deployment.run("tg-show-extraction-provenance", "https://trustgraph.ai/doc/unknown", timeout=60)
    assert_clean_failure(doc, EXIT_FAILED, contains="not found")
    bad_doc = deployment.run("tg-show-extraction-provenance", "not an iri", timeout=60)
    assert_clean_failure(bad_doc, EXIT_USAGE, contains="invalid document id")


def test_empty_store_list_is_a_clear_message_with_exit_0(deployment):
    user = "empty" + uuid.uuid4().hex[:8]
    r = deployment.run("tg-list-explain-traces", user=user, timeout=60)
    assert r.returncode == 0, r.explain()
    assert r.stdout == f"No traces found for user {user}, collection default.\n"
    assert r.stderr == ""
    j = deployment.run("tg-list-explain-traces", "--format", "json", user=user, timeout=60)
    assert j.returncode == 0 and json.loads(j.stdout) == {"traces": [], "next_cursor": None}, j.explain()


@pytest.fixture
def bad_files(tmp_path):
    from fpdf import FPDF

    files = {}
    files["empty"] = tmp_path / "empty.txt"
    files["empty"].write_bytes(b"")
    files["binary"] = tmp_path / "binary.txt"
    files["binary"].write_bytes(bytes(range(256)) * 8)
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 10, "Secret: Lise Meitner discovered nuclear fission.")
    pdf.set_encryption(owner_password="owner", user_password="secret")
    files["encrypted"] = tmp_path / "encrypted.pdf"
    pdf.output(str(files["encrypted"]))
    files["broken"] = tmp_path / "broken.pdf"
    files["broken"].write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >>\n")
    files["unknown"] = tmp_path / "notes.txt"  # the extension is only a hint: the content is an image
    files["unknown"].write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    files["zip"] = tmp_path / "slides.pptx"
    files["zip"].write_bytes(b"PK\x03\x04 not really a presentation")
    files["turtle"] = tmp_path / "broken.ttl"
    files["turtle"].write_text("@prefix ex: <http://example.org/> .\nex:a ex:b \n")
    return files


@pytest.mark.parametrize("kind, code, contains", [
    ("empty", EXIT_USAGE, "is empty"),
    ("binary", EXIT_USAGE, "is binary data of an unknown format"),
    ("encrypted", EXIT_FAILED, "encrypted"),
    ("broken", EXIT_FAILED, "PDF"),
    ("unknown", EXIT_USAGE, "notes.txt is a PNG image"),
    ("zip", EXIT_USAGE, "ZIP archive"),
])
def test_load_of_bad_files_is_refused_whole(deployment, bad_files, kind, code, contains):
    collection = "bad" + uuid.uuid4().hex[:6]
    r = deployment.run("tg-load-document", "-C", collection, str(bad_files[kind]), timeout=120)
    assert_clean_failure(r, code, contains=contains)
    # refused whole: the librarian kept nothing under the id the document would have had
    doc_id = "https://trustgraph.ai/doc/" + hashlib.sha256(bad_files[kind].read_bytes()).hexdigest()[:24]
    shown = deployment.run("tg-show-extraction-provenance", doc_id, "-C", collection, timeout=60)
    assert_clean_failure(shown, EXIT_FAILED, contains="not found")


def test_load_of_malformed_turtle(deployment, bad_files):
    r = deployment.run("tg-load-turtle", str(bad_files["turtle"]), timeout=60)
    assert_clean_failure(r, EXIT_USAGE, contains="broken.ttl")


# ------------------------------------------------------------------ servers down, silent, Ctrl-C

@pytest.mark.parametrize("command, contains", [
    pytest.param(["tg-prune-explain-traces", "--older-than", "99999999999999999999w"], "at most 100 years", id="huge"),
    pytest.param(["tg-prune-explain-traces", "--older-than", "999999d"], "at most 100 years", id="date-range"),
    pytest.param(["tg-prune-explain-traces", "--older-than", "1e400d"], "use a number and a unit", id="exponent"),
    pytest.param(["tg-prune-explain-traces", "--older-than", "9" * 10_000 + "s"], "use a number and a unit",
                 id="10k-digits"),
    pytest.param(["tg-prune-explain-traces", "--older-than", "x" * 10_000], "use a number and a unit", id="10k-junk"),
    pytest.param(["tg-prune-explain-traces", "--older-than", "0s"], "must be positive", id="zero"),
    pytest.param(["tg-prune-explain-traces", "--older-than", "30d", "--grace", "-1h"], "--grace", id="grace"),
    pytest.param(["tg-prune-explain-traces", "--older-than", "30d", "--grace", "9" * 25 + "w"], "at most 100 years",
                 id="grace-huge"),
    pytest.param(["tg-delete-explain-trace", "urn:trustgraph:question:x", "--grace", "1e999h"], "--grace",
                 id="delete-grace"),
])
def test_absurd_durations_are_a_one_line_usage_error(command, contains, tmp_path):
    """Durations are checked before anything starts; an error quotes at most 40 characters of what was given."""
    env = base_env({"TG_HOME": str(tmp_path)})
    r = run_cli(command[0], *command[1:], env=env, timeout=60)
    assert_clean_failure(r, EXIT_USAGE, contains=contains)
    assert len(r.stderr_lines[0]) < 200, r.explain()
    assert not (tmp_path / "triples").exists()  # nothing started, nothing stored


@pytest.mark.parametrize("command", [
    ["tg-list-explain-traces"],
    ["tg-invoke-graph-rag", "-x", "-q", "Who discovered radium?"],
    ["tg-quickstart"],
])
def test_pulsar_unreachable(command, tmp_path):
    env = base_env({"TG_HOME": str(tmp_path)})
    r = run_cli(command[0], *command[1:], "--pulsar-url", "pulsar://127.0.0.1:1", env=env, timeout=30)
    assert_clean_failure(r, EXIT_UNREACHABLE, contains="cannot reach Pulsar at pulsar://127.0.0.1:1")


@pytest.mark.integration
@pytest.mark.parametrize("command", [
    ["tg-list-explain-traces"],
    ["tg-show-explain-trace", "urn:trustgraph:question:6f1c2a52-6d6c-4c79-9d6c-1d0d8b1b2c3d"],
    ["tg-invoke-agent", "-q", "Who discovered radium?"],
])
def test_a_service_that_never_answers(pulsar_service, command):
    """Pulsar is up but nothing serves this flow: the command gives up after --timeout."""
    env = base_env({"PULSAR_URL": pulsar_service.url, "PULSAR_ADMIN_URL": pulsar_service.admin_url,
                    "TG_FLOW": "silent" + uuid.uuid4().hex[:8]})
    r = run_cli(command[0], *command[1:], "--timeout", "2", env=env, timeout=60)
    assert_clean_failure(r, EXIT_UNREACHABLE, contains="did not answer within 2 s")


def _interrupt(proc: subprocess.Popen) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the command did not stop within 60 s of Ctrl-C") from None


def _assert_interrupted(proc: subprocess.Popen, printed: str, out: str, err: str) -> None:
    stdout = printed + out
    assert proc.returncode == EXIT_INTERRUPTED, (stdout, err)
    assert "Traceback" not in err, err
    assert err.splitlines() == ["Error: interrupted"], err
    assert stdout == "" or stdout.endswith("\n"), stdout  # never half a line
    deadline = time.monotonic() + 10
    while processes_in_group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_in_group(proc.pid) == []


@pytest.fixture
def slow_llm():
    """The project's OpenAI-compatible test server, answering after 3 s (so a query is caught mid-stream)."""
    with running_llm_server("--latency-ms", "3000") as url:
        yield url


def test_ctrl_c_mid_stream_embedded(embedded_deployment, slow_llm):
    d = embedded_deployment
    env = {**d.env, "OPENAI_BASE_URL": slow_llm, "OPENAI_API_KEY": "test"}
    proc = start_at_a_terminal([script("tg-invoke-graph-rag"), "-U", d.user, "-x", "-q", "Who discovered radium?"],
                                env)
    printed = ""
    while "[exploration]" not in printed:  # the edge selection (LLM, 3 s) is running now
        line = proc.stdout.readline()
        assert line, f"ended before the exploration event: {printed!r} {proc.stderr.read()!r}"
        printed += line
    out, err = _interrupt(proc)
    _assert_interrupted(proc, printed, out, err)
    assert "[focus]" not in printed + out
    # what was already sent is stored: the trace shows how far the query got
    question = printed.splitlines()[0].split()[1]
    trace = d.trace_json(question, complete=False)
    assert trace["exploration"] is not None and trace["focus"] is None and trace["synthesis"] is None
    assert trace["status"] == "incomplete"


@pytest.mark.integration
def test_ctrl_c_while_waiting_for_a_distributed_service(pulsar_service):
    """Over Pulsar: interrupted while the request is out (no service answers this flow)."""
    flow = "silent" + uuid.uuid4().hex[:8]
    env = base_env({"PULSAR_URL": pulsar_service.url, "PULSAR_ADMIN_URL": pulsar_service.admin_url, "TG_FLOW": flow})
    proc = start_at_a_terminal([script("tg-invoke-graph-rag"), "-x", "-q", "Who discovered radium?"], env)
    # The command's own reply queue is a sub-queue of the service's response queue.
    topics = f"{pulsar_service.admin_url}/admin/v2/non-persistent/tg/response"
    prefix = f"non-persistent://tg/response/graph-rag:{flow}:r-"
    deadline = time.monotonic() + 60
    while True:  # the command's reply subscription exists: it is waiting for the answer
        try:
            with urllib.request.urlopen(topics, timeout=5) as resp:
                mine = [t for t in json.load(resp) if t.startswith(prefix)]
            subscribed = False
            for topic in mine:
                stats = f"{pulsar_service.admin_url}/admin/v2/non-persistent/tg/response/{topic[len('non-persistent://tg/response/'):]}/stats"
                with urllib.request.urlopen(stats, timeout=5) as resp:
                    if any(s.startswith("cli--graph-rag--") for s in json.load(resp).get("subscriptions", {})):
                        subscribed = True
            if subscribed:
                break
        except OSError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "the command never subscribed"
        time.sleep(0.2)
    time.sleep(0.5)  # the request has been sent (right after subscribing)
    out, err = _interrupt(proc)
    _assert_interrupted(proc, "", out, err)
    assert out == ""
