"""GraphRAG's edge selection on real processors, both stacks: the token budget (selected ⊆ sent ⊆ candidates,
the cut recorded on the Exploration), structured output with its fallback over the bus, and reasonings that
copy the prompt's example or repeat, flagged unusable with their edges kept.

The LLM is the project's OpenAI-compatible server (scripted), spoken to by the real openai client through the
text-completion service.
"""

from __future__ import annotations

import json

import pytest

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance.walk import collect_trace
from trustgraph_base.rdf.validation import validate_trace
from trustgraph_base.schema import IRI, GraphRagQuery, Term, TriplePattern
from trustgraph_flow.embedded import QUERY_STACK
from trustgraph_flow.model.prompts.templates import EDGE_SELECTION_EXAMPLE_REASONING

pytestmark = pytest.mark.timeout(600)

QUESTION = "Who discovered polonium?"


async def ask(stack, deployment, **fields):
    from trustgraph_cli.connection import Connection

    async with Connection.attach(stack, timeout=60) as conn:
        client = await conn.client("graph-rag")
        msgs = [m async for m in client.stream(GraphRagQuery(query=QUESTION, user=deployment.user,
                                                             collection=deployment.collection, streaming=True,
                                                             **fields))]
    await stack.wait_idle()
    assert msgs[-1].error is None, msgs[-1].error
    return msgs


async def stored_trace(stack, deployment, uri: str):
    store = next(s for s in stack.stores if hasattr(s, "list_traces"))

    async def q(patterns):
        return [t for r in store.query_many(deployment.user, deployment.collection, patterns) for t in r]

    return await collect_trace(q, uri)


def stage(msgs, kind: str):
    return next(m for m in msgs if m.explain_id.startswith(f"urn:trustgraph:prov:{kind}:"))


def values(msg, predicate: str) -> list[str]:
    return [t.o.value for t in msg.explain_triples if t.s.value == msg.explain_id and t.p.value == predicate]


def selected_labels(stored, focus_uri: str, labels: dict[str, str]) -> list[tuple[str, str, str]]:
    """The selected edges of a stored Focus, as the label triples the selector saw."""
    sels = {t.o.value for t in stored if t.s.value == focus_uri and t.p.value == ns.TG_SELECTED_EDGE}
    edges = [t.o.triple for t in stored if t.s.value in sels and t.p.value == ns.TG_EDGE]
    return [tuple(labels.get(x.value, x.value) for x in (e.s, e.p, e.o)) for e in edges]


async def test_selected_edges_are_sent_edges_and_sent_edges_are_candidates(deployment, llm_server, llm_settings):
    seen: list[dict] = []
    all_ids: set[str] = set()

    def script(template_id, terms, messages):
        if template_id == "kg-edge-selection":
            seen.append(terms)
            polonium = [k for k in terms["knowledge"] if "polonium" in (k["s"] + k["o"]).lower()][:3]
            unsent = sorted(all_ids - {k["id"] for k in terms["knowledge"]})[:1]  # a candidate it was not shown
            return "\n".join(json.dumps({"id": i, "reasoning": f"about edge {i}"})
                             for i in [k["id"] for k in polonium] + unsent)
        return "From the graph: " + "; ".join(f"{k['s']} {k['p']} {k['o']}" for k in terms["knowledge"])

    llm_server.set_script(script)
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        everything = await ask(stack, deployment, selection_token_budget=0)
        all_ids.update(k["id"] for k in seen[0]["knowledge"])
        budgeted = await ask(stack, deployment)  # the service default: 3000 tokens
        stored = await stored_trace(stack, deployment, budgeted[0].explain_id)
        store = next(s for s in stack.stores if hasattr(s, "list_traces"))
        iris = {x.value for t in stored if t.p.value == ns.TG_EDGE for x in (t.o.triple.s, t.o.triple.p, t.o.triple.o)}
        labels = {i: t.o.value for i in iris for t in store.query(
            deployment.user, deployment.collection,
            TriplePattern(s=Term(IRI, i), p=Term(IRI, ns.RDFS_LABEL), g=""))}
    finally:
        await stack.stop()

    exp_all, exp_cut = stage(everything, "exploration"), stage(budgeted, "exploration")
    candidates = int(values(exp_all, ns.TG_EDGE_COUNT)[0])
    assert candidates == int(values(exp_cut, ns.TG_EDGE_COUNT)[0]) == len(seen[0]["knowledge"]) > 40
    assert (int(values(exp_all, ns.TG_SENT_EDGE_COUNT)[0]), values(exp_all, ns.TG_SELECTION_TOKEN_BUDGET)) \
        == (candidates, ["0"])
    sent = {k["id"]: (k["s"], k["p"], k["o"]) for k in seen[1]["knowledge"]}
    assert int(values(exp_cut, ns.TG_SENT_EDGE_COUNT)[0]) == len(sent) < candidates
    assert values(exp_cut, ns.TG_SELECTION_TOKEN_BUDGET) == ["3000"]
    assert 0 < int(values(exp_cut, ns.TG_SELECTION_PROMPT_TOKENS)[0]) <= 3000
    assert set(sent) < all_ids  # sent ⊆ candidates
    assert seen[1]["knowledge"][0]["id"] in {k["id"] for k in seen[0]["knowledge"]
                                             if "polonium" in (k["s"] + k["o"]).lower()}  # ranked first

    focus = stage(budgeted, "focus")
    assert int(values(focus, ns.TG_DROPPED_COUNT)[0]) == 1  # the candidate it was not shown: not selectable
    picked = selected_labels(stored, focus.explain_id, labels)
    assert picked and set(picked) <= set(sent.values())  # selected ⊆ sent
    report = validate_trace(stored)
    assert report.conforms, [v.message for v in report.violations]


async def test_structured_output_travels_the_bus_and_a_rejection_is_remembered(deployment, llm_server,
                                                                                llm_settings):
    def script(template_id, terms, messages):
        if template_id == "kg-edge-selection":
            chosen = [k for k in terms["knowledge"] if "polonium" in (k["s"] + k["o"]).lower()][:2]
            return json.dumps({"edges": [{"id": k["id"], "reasoning": f"{k['s']} {k['p']} {k['o']}", "score": 0.8,
                                          "concept": "polonium"} for k in chosen]})
        return "Answer from the graph."

    llm_server.set_script(script)
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    formats = []
    try:
        for reject in (False, True, True):
            llm_server.reject_response_format(reject)
            llm_server.clear_log()
            msgs = await ask(stack, deployment)
            focus = stage(msgs, "focus")
            assert len(values(focus, ns.TG_SELECTED_EDGE)) == 2 and not values(focus, ns.TG_DROPPED_COUNT)
            assert sorted(values(focus, ns.TG_CONCEPT)) == []  # concepts sit on the selections, not the Focus
            assert [t.o.value for t in focus.explain_triples if t.p.value == ns.TG_CONCEPT] == ["polonium"] * 2
            formats.append([(r.body.get("response_format") or {}).get("type")
                            for r in llm_server.chat_requests() if r.template_id == "kg-edge-selection"])
            assert all("response_format" not in r.body for r in llm_server.chat_requests()
                       if r.template_id == "kg-synthesis")
    finally:
        llm_server.reject_response_format(False)
        await stack.stop()
    assert formats == [["json_schema"], ["json_schema", "json_object", None], [None]]


@pytest.mark.parametrize("kind", ["copied", "repeated"])
async def test_reasonings_that_say_nothing_are_flagged_and_their_edges_kept(deployment, llm_server, llm_settings,
                                                                             kind):
    reasoning = EDGE_SELECTION_EXAMPLE_REASONING if kind == "copied" else "This edge is relevant to the question."
    synthesised: list[dict] = []

    def script(template_id, terms, messages):
        if template_id == "kg-edge-selection":
            return "\n".join(json.dumps({"id": k["id"], "reasoning": reasoning}) for k in terms["knowledge"][:3])
        synthesised.append(terms)
        return "Answer from the graph."

    llm_server.set_script(script)
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        msgs = await ask(stack, deployment)
        stored = await stored_trace(stack, deployment, msgs[0].explain_id)
    finally:
        await stack.stop()
    focus = stage(msgs, "focus")
    sels = values(focus, ns.TG_SELECTED_EDGE)
    assert len(sels) == 3 and values(focus, ns.TG_UNUSABLE_REASONING_COUNT) == ["3"]
    why = [t.o.value for t in focus.explain_triples if t.p.value == ns.TG_REASONING_UNUSABLE]
    expected = ("copies the example reasoning of the edge-selection prompt" if kind == "copied"
                else "the same reasoning was given for 3 of 3 selected edges")
    assert why == [expected] * 3
    assert [t.o.value for t in focus.explain_triples if t.p.value == ns.TG_REASONING] == [reasoning] * 3
    assert len(synthesised[0]["knowledge"]) == 3  # the edges stay selected and reach the synthesis
    report = validate_trace(stored)
    assert report.conforms, [v.message for v in report.violations]


async def test_a_negative_budget_is_refused_before_anything_is_stored(deployment, llm_server, llm_settings):
    from trustgraph_cli.connection import Connection

    llm_server.set_script(lambda template_id, terms, messages: "")
    llm_server.clear_log()
    stack = await deployment.start(QUERY_STACK, llm="openai", settings=llm_settings(llm_server))
    try:
        async with Connection.attach(stack, timeout=60) as conn:
            client = await conn.client("graph-rag")
            msgs = [m async for m in client.stream(GraphRagQuery(
                query="A question nobody else asks about budgets?", user=deployment.user,
                collection=deployment.collection, selection_token_budget=-1))]
        await stack.wait_idle()
        store = next(s for s in stack.stores if hasattr(s, "list_traces"))
        listed = store.list_traces(deployment.user, deployment.collection, "graphrag", 1000, "")
    finally:
        await stack.stop()
    assert len(msgs) == 1 and msgs[0].error is not None and msgs[0].end_of_session
    assert "selection_token_budget must be >= 0" in msgs[0].error.message
    assert not [t for t in listed.traces if t.question == "A question nobody else asks about budgets?"]
    assert not llm_server.chat_requests()
