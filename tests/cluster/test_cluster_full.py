"""The cluster tier's full form (``TG_CLUSTER=full``): a replica killed mid-load, and two of three nodes lost.

* **A replica dies.**  ``graph-rag-1`` and ``triples-write-1`` are killed with ``-9`` while
  queries are in flight.  Requests are non-persistent: a query the dead ``graph-rag`` was
  running fails at its client (a time-out naming the service), never half-answered; the
  survivor answers every later query.  Flow queues are persistent: the explain batches the dead
  ``triples-write`` had not acknowledged are redelivered to the survivor, so every answered
  query's trace is complete and nothing is stored twice (docs/guarantees.md).
* **Two nodes die.**  With one replica of three left, ``LOCAL_QUORUM`` cannot be met: every query
  fails at its client with an error, and the query's trace says so with an Error stage once the
  nodes are back (its stages wait in Pulsar meanwhile); nothing is stored half (a Synthesis
  without its answer, a duplicate), and the stack answers again once the nodes are back.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from cluster_load import audit_at_all, graph_rag_client, outcomes, window
from trace_audit import FAULT_MATRIX, QueryStream

pytestmark = [pytest.mark.integration, pytest.mark.cluster_full, pytest.mark.timeout(1200)]

#: Per-message client timeout: longer than graph-rag's own store calls (15 s), so a failing store is an
#: Error reply from graph-rag; shorter than the wait for a query a killed replica had taken.
CLIENT_TIMEOUT = 25.0
#: LLM latency (ms) so that queries are surely in flight when a replica dies.
LATENCY_MS = 700


async def test_a_killed_replica_fails_its_own_queries_clearly_and_loses_no_stored_data(cluster_stack):
    stack = cluster_stack
    collection = f"replica-{uuid.uuid4().hex[:6]}"
    victims = ("graph-rag-1", "triples-write-1")
    stack.llm.set_latency(LATENCY_MS)
    backend, client = await graph_rag_client(stack, timeout=CLIENT_TIMEOUT)
    stream = QueryStream(client, stack.user, stack.collection, explain_collection=collection, timeout=CLIENT_TIMEOUT)
    try:
        warmup = await stream.until_answered(60)
        records = stream.batch(12)
        sending = asyncio.create_task(stream.send(records, 4, spacing=0.3))
        await stream.wait_in_flight(records)
        await asyncio.sleep(0.5)
        for name in victims:
            await asyncio.to_thread(stack.services[name].kill)
        await sending
        work_before = stack.work_by_replica()
        after = await stream.send(stream.batch(6), 3)
        work_after = stack.work_by_replica()
    finally:
        stack.llm.set_latency(0)
        await client.stop()
        await backend.close()
    result = await audit_at_all(stack, stream.records, collection)
    for name in victims:  # the later tests run with both replicas again
        await stack.wait_ready_again(name)
    line = (f"[cluster] {' and '.join(victims)} killed -9 with queries in flight: {outcomes(stream.records)}; "
            f"matrix: {result.summary()}")
    FAULT_MATRIX.append(line)
    print("\n" + line)

    assert warmup.outcome == "answered"
    assert not result.problems, "\n".join(result.problems)
    # a query cut short by the kill failed at its client, clearly; it was never answered in part
    cut = [r for r in stream.records if r.outcome != "answered"]
    assert all(r.outcome == "timeout" and "graph-rag" in r.error for r in cut), \
        [(r.index, r.outcome, r.error[:200]) for r in cut]
    # the survivors took all the work after the kill
    assert all(r.outcome == "answered" for r in after), [(r.outcome, r.error[:200]) for r in after]
    for base in ("graph-rag", "triples-write"):
        assert work_after[f"{base}-2"] > work_before[f"{base}-2"], (base, work_before, work_after)


async def test_two_nodes_lost_fail_queries_clearly_and_everything_recovers(cluster_stack):
    stack, cluster = cluster_stack, cluster_stack.cluster
    collection = f"quorumloss-{uuid.uuid4().hex[:6]}"
    backend, client = await graph_rag_client(stack, timeout=CLIENT_TIMEOUT)
    stream = QueryStream(client, stack.user, stack.collection, explain_collection=collection, timeout=CLIENT_TIMEOUT)
    try:
        warmup = await stream.until_answered(60)
        launches = {node: await asyncio.to_thread(cluster.kill, node) for node in (2, 3)}
        down_at = time.monotonic()
        during = await stream.send(stream.batch(4), 2)
        cluster.revive(2, launches[2], wait=False)
        back_in = await asyncio.to_thread(cluster.revive, 3, launches[3])
        up_at = time.monotonic()
        recovered = await stream.until_answered(240)
        after = await stream.send(stream.batch(4), 2)
    finally:
        await client.stop()
        await backend.close()
    hints = await asyncio.to_thread(cluster.wait_hints_replayed)
    result = await audit_at_all(stack, stream.records, collection)
    failed = [r for r in window(stream.records, down_at, up_at) if r.outcome != "answered"]
    traces = {r.index: t for r, t in result.pairs}
    line = (f"[cluster] nodes 2 and 3 killed -9, back {back_in:.0f} s after their relaunch, hints replayed "
            f"{hints:.0f} s after; {outcomes(stream.records)}; first answer {recovered.finished - up_at:.0f} s after "
            f"the cluster was up; matrix: {result.summary()}; the clients were told: {during[0].error[:160]!r}")
    FAULT_MATRIX.append(line)
    print("\n" + line)

    assert warmup.outcome == "answered"
    # with one replica of three no query is answered: each fails at its client with an error reply
    assert all(r.outcome == "error" and r.error for r in during), [(r.outcome, r.error[:200]) for r in during]
    assert {r.index for r in during} <= {r.index for r in failed}
    # nothing half-stored: every trace obeys the audit, and a failed query's trace never claims an answer
    assert not result.problems, "\n".join(result.problems)
    assert all(traces[r.index] is None or traces[r.index].status in ("failed", "incomplete") for r in failed)
    # the failure is recorded: once the nodes are back, the queued stages (the Error among them) are stored
    assert any(traces[r.index] is not None and traces[r.index].status == "failed" for r in during), \
        [(r.index, traces[r.index].status if traces[r.index] else "absent") for r in during]
    # and the stack answers again
    assert all(r.outcome == "answered" for r in after), [(r.outcome, r.error[:200]) for r in after]
