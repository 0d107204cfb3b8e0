"""A session id names one agent run, with the agent and triples-write each running as two OS processes.

On this session's own Pulsar + Cassandra (see conftest.py), a second ``agent-manager-react`` and a
second ``triples-write`` process join the stack's: replicas that share the request queues through
Pulsar's shared subscriptions, so requests with one session id are taken by different processes and
their trace claims (``trace-claim`` on triples-write, a Cassandra lightweight transaction) race each
other for real.  Hypothesis draws the session ids and how the requests reuse them, one batch after
the other and the requests of a batch at once: per session id exactly one request runs, every other
one gets an ``Error`` naming the id and nothing else, and the stored trace holds that one run.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from fuzz_inputs import count
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

CLIENT_TIMEOUT = 60.0
SESSION_IDS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,40}", fullmatch=True)


@pytest.fixture(scope="module")
def replicas(fault_stack):
    """The second agent and triples-write processes, stopped when this module ends."""
    started = [fault_stack.replica("agent-manager-react", store=False), fault_stack.replica("triples-write")]
    try:
        for process in started:
            process.start()
        for process in started:
            process.wait_ready()
        yield {p.name: p for p in started}
    finally:
        for process in started:
            process.stop()


def stored_answer(stack, collection: str, document: str) -> str:
    """The text the librarian holds under ``document`` (the Conclusion's answer, stored before the Conclusion)."""
    from trustgraph_base.store.librarian import open_librarian_store

    librarian = open_librarian_store("cassandra", config=stack.cassandra_config())
    try:
        return librarian.get_content(stack.user, collection, document).decode()
    finally:
        librarian.close()


async def finished_trace(stack, collection: str, uri: str, seconds: float = 60.0):
    """The stored trace of ``uri`` once it is whole: its final stage and every stage a stored stage names.

    triples-write lingers before it writes, and with two replicas the stages of one run are written by
    either, so a later stage can be stored before an earlier one (docs/guarantees.md, "Traces still
    being written"): the final stage alone does not say that the Thoughts before it are there.
    """
    from trustgraph_base.provenance.walk import collect_trace
    from trustgraph_base.rdf.validation import validate_trace

    store = stack.triples_store()
    try:
        async def q(patterns):
            results = await asyncio.to_thread(store.query_many, stack.user, collection, patterns)
            return [t for r in results for t in r]

        deadline = asyncio.get_running_loop().time() + seconds
        while True:
            trace = await collect_trace(q, uri)
            whole = f"{uri}/final" in {t.s.value for t in trace} and validate_trace(trace).conforms
            if whole or asyncio.get_running_loop().time() > deadline:
                return trace
            await asyncio.sleep(0.5)
    finally:
        store.close()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(sids=st.lists(SESSION_IDS, min_size=1, max_size=2, unique=True),
       batches=st.lists(st.lists(st.integers(0, 1), min_size=1, max_size=6), min_size=1, max_size=2))
@example(sids=["s"], batches=[[0], [0]])                # sequential reuse
@example(sids=["s"], batches=[[0, 0, 0, 0, 0, 0]])      # concurrent reuse of a new session id
def test_a_session_id_names_one_run_across_replicas(fault_stack, replicas, sids, batches):
    count("sessions: reused session ids across replicas")
    from trustgraph_base.provenance import namespaces as ns
    from trustgraph_base.rdf.validation import validate_trace
    from trustgraph_base.schema import AgentRequest

    collection = f"ss{uuid.uuid4().hex[:8]}"  # session ids are claimed per collection: a fresh one per example
    plan = [[(f"Who discovered polonium? ({b}.{k})", sids[i % len(sids)]) for k, i in enumerate(batch)]
            for b, batch in enumerate(batches)]

    async def run():
        backend, client = await fault_stack.client("agent", CLIENT_TIMEOUT, "session-test")
        results = []
        try:
            async def ask(question, sid):
                return [m async for m in client.stream(AgentRequest(question=question, session_id=sid,
                                                                    user=fault_stack.user, collection=collection,
                                                                    max_iterations=3))]

            for batch in plan:
                replies = await asyncio.gather(*(ask(q, sid) for q, sid in batch))
                results += [(q, sid, msgs) for (q, sid), msgs in zip(batch, replies, strict=True)]
        finally:
            await client.stop()
            await backend.close()
        traces = {sid: await finished_trace(fault_stack, collection, f"urn:trustgraph:agent:{sid}")
                  for sid in {s for _, s, _ in results}}
        return results, traces

    results, traces = asyncio.run(run())
    first_batch: dict[str, int] = {}
    for b, batch in enumerate(plan):
        for _, sid in batch:
            first_batch.setdefault(sid, b)
    for sid, trace in traces.items():
        root = f"urn:trustgraph:agent:{sid}"
        ran = [(q, msgs) for q, s, msgs in results if s == sid and msgs[-1].error is None]
        assert len(ran) == 1, (sid, [msgs[-1].error for _, s, msgs in results if s == sid])
        question, msgs = ran[0]
        assert question in [q for q, s in plan[first_batch[sid]] if s == sid]
        for q, s, refused in results:
            if s == sid and q != question:
                assert [m.message_type for m in refused] == ["error"], [m.message_type for m in refused]
                err = refused[-1].error
                assert err.type == "session-in-use" and repr(sid) in err.message and "\n" not in err.message
        answer = "".join(m.content for m in msgs if m.message_type == "answer")
        assert sorted(t.o.value for t in trace if t.s.value == root and t.p.value == ns.TG_QUERY) == [question]
        assert len([t for t in trace if t.s.value == root and t.p.value == ns.PROV_STARTED_AT_TIME]) == 1
        assert [t.o.value for t in trace if t.p.value == ns.TG_DOCUMENT and t.s.value == f"{root}/final"] \
            == [f"{root}/answer"]
        assert stored_answer(fault_stack, collection, f"{root}/answer") == answer
        report = validate_trace(trace)
        assert report.conforms, [v.message for v in report.violations]


def test_one_session_id_at_once_on_both_replicas(fault_stack, replicas):
    """Eight requests at once with one new session id: both agent processes take some (Pulsar hands a shared
    subscription's messages out in turn), one request runs, and each process refused some of them."""
    sid = f"both-{uuid.uuid4().hex[:8]}"
    collection = f"ss{uuid.uuid4().hex[:8]}"
    logs = [fault_stack.services["agent-manager-react"], replicas["agent-manager-react-2"]]
    offsets = [len(process.log_text(since_start=False)) for process in logs]

    async def run():
        from trustgraph_base.schema import AgentRequest

        backend, client = await fault_stack.client("agent", CLIENT_TIMEOUT, "session-test")
        try:
            async def ask(i):
                return [m async for m in client.stream(AgentRequest(
                    question=f"Who discovered polonium? ({i})", session_id=sid, user=fault_stack.user,
                    collection=collection, max_iterations=3))]

            return await asyncio.gather(*(ask(i) for i in range(8)))
        finally:
            await client.stop()
            await backend.close()

    runs = asyncio.run(run())
    assert sum(msgs[-1].error is None for msgs in runs) == 1, [msgs[-1].error for msgs in runs]
    refusal = f"session id {sid!r} already names another run"
    new_lines = [process.log_text(since_start=False)[offset:] for process, offset in zip(logs, offsets, strict=True)]
    assert all(refusal in text for text in new_lines), [text[-2000:] for text in new_lines]
