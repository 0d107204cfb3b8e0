"""The tg-* commands on a data directory (``TG_HOME``) that cannot be used, and on a disk that fills up.

An unusable data directory is an outage, not an empty store: every embedded command fails at
once with one line naming the path and exit 1.  A store that fills up while a command runs
(a real full tmpfs, and an injected SQLite fault that works everywhere: files that may not
grow, so SQLite itself reports "database or disk is full") ends the command with
``Error: no space left on <file>`` and exit 1, never a hang, never exit 3; what the failed
query stored is a prefix of its stages (``docs/guarantees.md``, "Traces").  Also here: the
output on a full disk (stdout to ``/dev/full``) is not an unreachable server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from e2e_support import GRAPH_QUESTION, base_env, processes_in_group, run_cli, script, start_at_a_terminal
from storage_faults import FULL_ENV, fill, sitecustomize_dir, tmpfs

pytestmark = pytest.mark.e2e

EXIT_FAILED = 1
QUESTION_URI = "urn:trustgraph:question:6f1c2a52-6d6c-4c79-9d6c-1d0d8b1b2c3d"
#: A hang check, not a performance figure: a failed command must end, whatever it was waiting for.
HANG_SECONDS = 180


def _one_error_line(r, exit_code: int = EXIT_FAILED) -> str:
    """The command failed with ``exit_code``, one ``Error:`` line and no traceback, and left no process."""
    assert r.returncode == exit_code, r.explain()
    assert "Traceback" not in r.stderr, r.explain()
    lines = [line for line in r.stderr_lines if not line.lstrip().startswith(("━", "\x1b"))]
    errors = [line for line in lines if line.startswith("Error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], r.explain()
    assert r.stdout == "" or r.stdout.endswith("\n"), r.explain()
    assert processes_in_group(r.pgid) == [], r.explain()
    return errors[0]


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    doc = tmp_path / "kohn.txt"
    doc.write_text("Hedwig Kohn studied radiation in Breslau.\n")
    return {"list": ["tg-list-explain-traces"], "show": ["tg-show-explain-trace", QUESTION_URI],
            "ask": ["tg-invoke-graph-rag", "-q", "Who discovered radium?"], "load": ["tg-load-document", str(doc)]}


def _expect_refused(home: Path, tmp_path: Path, message: str) -> None:
    for argv in _commands(tmp_path).values():
        r = run_cli(argv[0], *argv[1:], env=base_env({"TG_HOME": str(home)}), timeout=HANG_SECONDS)
        assert _one_error_line(r) == f"Error: {message}", r.explain()
        assert r.stdout == "", r.explain()


def test_a_data_directory_that_is_a_file_fails_every_command(tmp_path):
    home = tmp_path / "home"
    home.write_text("")
    _expect_refused(home, tmp_path, f"cannot use {home} as data directory: not a directory")


def test_a_data_directory_below_a_file_fails_every_command(tmp_path):
    (tmp_path / "file").write_text("")
    home = tmp_path / "file" / "home"
    _expect_refused(home, tmp_path, f"cannot use {home} as data directory: {tmp_path / 'file'} is not a directory")


def test_a_read_only_data_directory_fails_every_command(tmp_path):
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        _expect_refused(ro, tmp_path, f"cannot use {ro} as data directory: read-only file system")


def test_a_store_that_cannot_exist_is_not_an_empty_store(tmp_path):
    """The data directory is fine, but a file sits where the triple store's directory belongs."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "triples").write_text("")
    env = base_env({"TG_HOME": str(home)})
    listed = run_cli("tg-list-explain-traces", env=env, timeout=HANG_SECONDS)
    assert _one_error_line(listed).endswith(f"{home / 'triples'} is not a directory"), listed.explain()
    assert "No traces found" not in listed.stdout
    asked = run_cli("tg-invoke-graph-rag", "-q", "Who discovered radium?", env=env, timeout=HANG_SECONDS)
    assert _one_error_line(asked).endswith(f"{home / 'triples'} is not a directory"), asked.explain()
    assert "no relevant information" not in asked.stdout


# ------------------------------------------------------------------ a disk that fills up

def _user_files(embedded_deployment) -> list[Path]:
    """The embedded deployment's files of its own user (the sample corpus loaded), not other tests' users."""
    from trustgraph_base.store.names import storage_name

    home = Path(embedded_deployment.env["TG_HOME"])
    return sorted(home.glob(f"*/{storage_name('tg', embedded_deployment.user)}*"))


def _loaded_home(embedded_deployment, target: Path) -> Path:
    """A copy of the embedded deployment user's data at ``target`` (a data directory of its own)."""
    home = Path(embedded_deployment.env["TG_HOME"])
    for f in _user_files(embedded_deployment):
        (target / f.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target / f.relative_to(home))
    return target


def _full_by_fault(tmp_path: Path, home: Path, under: Path | None = None) -> dict[str, str]:
    """Environment that makes the SQLite files under ``under`` (default: all of ``home``) unable to grow."""
    path = [str(sitecustomize_dir(tmp_path / "fault")), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(path), FULL_ENV: str(under or home)}


def _assert_prefix(env: dict[str, str], user: str, stdout: str) -> None:
    """What the failed query stored is a prefix of its stages, and never claims an answer."""
    listed = run_cli("tg-list-explain-traces", "-U", user, "--format", "json", env=env, timeout=HANG_SECONDS)
    assert listed.returncode == 0, listed.explain()
    asked = [t for t in json.loads(listed.stdout)["traces"] if t["question"] == GRAPH_QUESTION]
    question = stdout.splitlines()[0].split()[1] if stdout.startswith("[question] ") else None
    for trace in asked:
        if trace["id"] != question:
            continue  # the deployment's own earlier queries
        shown = run_cli("tg-show-explain-trace", trace["id"], "-U", user, "--format", "json", env=env,
                        timeout=HANG_SECONDS)
        assert shown.returncode == 0, shown.explain()
        t = json.loads(shown.stdout)
        assert t["status"] != "complete" and t["synthesis"] is None, t
        stages = [t["exploration"] is not None, t["focus"] is not None]
        assert stages in ([False, False], [True, False], [True, True]), t  # no gap


def _ask_until_full(home: Path, user: str, extra: dict[str, str]) -> tuple[object, dict[str, str]]:
    """Ask until a query fails (the free room inside the files is used up); earlier ones succeed."""
    env = base_env({"TG_HOME": str(home)})
    for _ in range(30):
        r = run_cli("tg-invoke-graph-rag", "-U", user, "-x", "-q", GRAPH_QUESTION, env={**env, **extra},
                    timeout=HANG_SECONDS)
        if r.returncode != 0:
            return r, env
    raise AssertionError(f"30 queries stored their traces on a full store:\n{r.explain()}")


def test_a_query_on_a_store_that_cannot_grow_fails_with_no_space(embedded_deployment, tmp_path):
    """Injected (works everywhere): no SQLite file of the data directory may grow by one page."""
    home = _loaded_home(embedded_deployment, tmp_path / "home")
    r, env = _ask_until_full(home, embedded_deployment.user, _full_by_fault(tmp_path, home))
    line = _one_error_line(r)
    assert line.startswith(f"Error: no space left on {home}/") and line.endswith(".sqlite"), r.explain()
    _assert_prefix(env, embedded_deployment.user, r.stdout)


def test_a_query_on_a_full_disk_fails_with_no_space(embedded_deployment, tmp_path):
    """A real tmpfs, filled to the last byte after the corpus was copied onto it."""
    size = sum(f.stat().st_size for f in _user_files(embedded_deployment)) + (16 << 20)
    with tmpfs(tmp_path / "small", f"{size >> 20}m") as small:
        home = _loaded_home(embedded_deployment, small / "home")
        filler = fill(small)
        r, env = _ask_until_full(home, embedded_deployment.user, {})
        line = _one_error_line(r)
        assert line.startswith(f"Error: no space left on {home}/"), r.explain()
        filler.unlink()
        _assert_prefix(env, embedded_deployment.user, r.stdout)


def _load(home: Path, tmp_path: Path, extra: dict[str, str]):
    doc = tmp_path / "meitner.txt"
    doc.write_text("Lise Meitner explained nuclear fission. Otto Hahn worked with Lise Meitner in Berlin.\n" * 40)
    env = base_env({"TG_HOME": str(home)})
    r = run_cli("tg-load-document", str(doc), "--id", "https://example.org/doc/meitner", env={**env, **extra},
                timeout=HANG_SECONDS)
    return r, env


def _assert_not_stored(env: dict[str, str]) -> None:
    shown = run_cli("tg-show-extraction-provenance", "https://example.org/doc/meitner", env=env, timeout=HANG_SECONDS)
    assert shown.returncode == EXIT_FAILED and "not found" in shown.stderr, shown.explain()


def test_a_load_on_a_store_that_cannot_grow_fails_with_no_space(tmp_path):
    home = tmp_path / "home"
    r, env = _load(home, tmp_path, _full_by_fault(tmp_path, home))
    assert _one_error_line(r).startswith(f"Error: no space left on {home}/"), r.explain()
    _assert_not_stored(env)  # the librarian's write is all or nothing


def test_a_load_whose_triples_cannot_be_stored_fails_with_no_space(tmp_path):
    """The document is stored, then the disk is full for the extracted knowledge: not 'no progress' (exit 3)."""
    home = tmp_path / "home"
    home.mkdir()
    seed = run_cli("tg-list-explain-traces", env=base_env({"TG_HOME": str(home)}), timeout=HANG_SECONDS)
    assert seed.returncode == 0, seed.explain()
    r, _env = _load(home, tmp_path, _full_by_fault(tmp_path, home, home / "triples"))
    assert _one_error_line(r).startswith(f"Error: no space left on {home / 'triples'}/"), r.explain()


def test_a_load_on_a_full_disk_fails_with_no_space(tmp_path):
    with tmpfs(tmp_path / "small", "4m") as small:
        home = small / "home"
        home.mkdir()
        filler = fill(small)
        r, env = _load(home, tmp_path, {})
        assert _one_error_line(r).startswith(f"Error: no space left on {home}/"), r.explain()
        filler.unlink()
        _assert_not_stored(env)


# ------------------------------------------------------------------ the output on a full disk

def test_output_to_a_full_disk_is_a_failure_not_an_unreachable_server(deployment, tmp_path):
    env = {**deployment.env}
    argv = [script("tg-list-explain-traces"), "-U", deployment.user]
    with open("/dev/full", "w") as full:
        proc = subprocess.run(argv, stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=HANG_SECONDS)
    assert proc.returncode == EXIT_FAILED, proc.stderr
    assert proc.stderr.splitlines() == ["Error: cannot write the output: no space left on device"], proc.stderr


# ------------------------------------------------------------------ Ctrl-C during a load

def _big_documents(tmp_path: Path) -> list[Path]:
    """Two generated documents big enough that loading them takes far longer than the latest Ctrl-C (4 s),
    even on a quiet machine (the load is interrupted, so their size costs nothing)."""
    from trustgraph_flow.ingest.sample_corpus import sample_documents

    text = "\n".join(d.content.decode() for d in sample_documents() if d.kind.startswith("text/"))
    files = []
    for n in range(2):
        f = tmp_path / f"big{n}.txt"
        f.write_text("".join(f"Part {n}.{i}.\n{text}" for i in range(30)))
        files.append(f)
    return files


@pytest.mark.parametrize("delay", [0.0, 0.5, 1.0, 2.0, 3.0, 4.0])
def test_one_ctrl_c_stops_a_load(tmp_path, delay):
    """Ctrl-C as a terminal sends it, at several points of a load: exit 130, promptly (a hang check)."""
    home = tmp_path / "home"
    env = base_env({"TG_HOME": str(home)})
    files = _big_documents(tmp_path)
    proc = start_at_a_terminal([script("tg-load-document"), *map(str, files)], env)
    try:
        deadline = time.monotonic() + HANG_SECONDS
        while not list((home / "librarian").glob("*.sqlite")) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        time.sleep(delay)  # the pipeline is under way
        assert proc.poll() is None, "the load finished before Ctrl-C: make the documents bigger"
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"tg-load-document did not exit within 15 s of Ctrl-C (after {delay} s)") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert err.splitlines()[-1] == "Error: interrupted", err[-2000:]
    assert "Traceback" not in err and out == "", (out, err[-2000:])


# ------------------------------------------------------------------ a service on an unusable data directory

SERVICE_BUSES = [
    pytest.param("memory", id="embedded"),
    pytest.param("pulsar", marks=pytest.mark.integration, id="distributed"),
]


@pytest.mark.parametrize("bus", SERVICE_BUSES)
@pytest.mark.parametrize("service", ["triples-write", "librarian", "graph-embeddings-query"])
def test_a_service_refuses_to_start_on_an_unusable_data_directory(request, bus, service, tmp_path):
    data = tmp_path / "data"
    data.write_text("")
    argv = [script(service), "--pubsub", bus, "--store", "sqlite", "--data-dir", str(data)]
    if bus == "pulsar":
        pulsar = request.getfixturevalue("pulsar_service")
        argv += ["--pulsar-url", pulsar.url, "--pulsar-admin-url", pulsar.admin_url]
    try:  # a hang check: a service that does not refuse to start runs until killed
        done = subprocess.run(argv, capture_output=True, text=True, env=base_env(), timeout=60)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{service} started on {data} (a file) instead of refusing: {e.stderr}") from None
    assert done.returncode == EXIT_FAILED, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].endswith(f"cannot start: cannot use {data} as data directory: not a directory"), done.stderr
