"""tg-invoke-agent: a session id names one run, and the question limit, as the command line shows them.

A second run with a used ``--session-id`` and an oversized question each fail with one ``Error:`` line
on stderr and exit 1, before anything is stored; the first run's trace stays as it was.
"""

from __future__ import annotations

import uuid

from e2e_support import processes_in_group

EXIT_FAILED = 1


def assert_one_error_line(r, contains: str) -> None:
    """Exit 1, exactly one ``Error:`` line on stderr (containing ``contains``), nothing on stdout."""
    assert r.returncode == EXIT_FAILED, r.explain()
    assert r.stdout == "" and "Traceback" not in r.stderr, r.explain()
    assert len(r.stderr_lines) == 1 and r.stderr_lines[0].startswith("Error: "), r.explain()
    assert contains in r.stderr_lines[0], r.explain()
    assert processes_in_group(r.pgid) == [], r.explain()


def test_a_used_session_id_is_refused(deployment):
    sid = f"e2e-{uuid.uuid4().hex[:8]}"
    collection = f"s{uuid.uuid4().hex[:8]}"
    deployment.ok("tg-invoke-agent", "-q", "Who discovered polonium?", "--session-id", sid, "-C", collection)
    uri = f"urn:trustgraph:agent:{sid}"
    before = deployment.trace_json(uri, collection=collection)
    again = deployment.run("tg-invoke-agent", "-q", "Who discovered radium?", "--session-id", sid, "-C", collection)
    assert_one_error_line(again, f"session id {sid!r} already names another run")
    after = deployment.trace_json(uri, collection=collection)
    assert after == before and after["question"] == "Who discovered polonium?"


def test_an_oversized_question_is_refused(deployment):
    sid = f"e2e-{uuid.uuid4().hex[:8]}"
    r = deployment.run("tg-invoke-agent", "-q", "x" * 100_001, "--session-id", sid)
    assert_one_error_line(r, "the query is 100,001 characters long; at most 100,000 are accepted")
    shown = deployment.run("tg-show-explain-trace", f"urn:trustgraph:agent:{sid}")
    assert shown.returncode == EXIT_FAILED and "no trace" in shown.stderr, shown.explain()


def test_a_plan_run_shows_its_dag_live_and_stored(deployment):
    """``-p plan-then-execute -x`` prints each step as it completes with what it is derived from, and the
    Synthesis joining every step; ``tg-show-explain-trace`` prints the same joins and ``--format json`` lists
    them as ``inputs``."""
    sid = f"e2e-plan-{uuid.uuid4().hex[:8]}"
    question = "Who discovered polonium and who discovered radium, then when was polonium discovered?"
    r = deployment.ok("tg-invoke-agent", "-p", "plan-then-execute", "-x", "--session-id", sid, "-q", question)
    root = f"urn:trustgraph:agent:{sid}"
    assert f"[plan] {root}/plan" in r.stdout and "Plan ← Question" in r.stdout, r.explain()
    assert "Step 3 ← Plan, Step 2" in r.stdout and "Synthesis ← Step 1, Step 2, Step 3" in r.stdout, r.explain()
    assert "polonium" in r.stdout.lower() and "radium" in r.stdout.lower()
    shown = deployment.ok("tg-show-explain-trace", root)
    assert "--- Step 3 ← Plan, Step 2 ---" in shown.stdout and "--- Synthesis ← Step 1, Step 2, Step 3 ---" in \
        shown.stdout, shown.explain()
    trace = deployment.trace_json(root)
    assert trace["status"] == "complete" and trace["synthesis"]["inputs"] == [f"{root}/step/{n}" for n in (1, 2, 3)]
    assert [s["inputs"] for s in trace["step_results"]] == [[f"{root}/plan"], [f"{root}/plan"],
                                                             [f"{root}/plan", f"{root}/step/2"]]
