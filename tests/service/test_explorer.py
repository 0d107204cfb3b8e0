"""The trace explorer in a real browser: headless Chromium (the system's) driven by Playwright, against a
gateway started on 127.0.0.1 over the whole stack of each deployment (embedded, and Pulsar + Cassandra),
with the sample corpus loaded by the real pipeline.

A GraphRAG query (edge selection and answer scripted through the project's test LLM server, so reasons
and answer are known, including hostile markup) is asked through the gateway; then the pages must show
what the stored trace holds: every stage, every selected edge with its reason, score, concept and
source chain down to the document, the answer; navigation between list, trace, sub-traces and back;
exports that parse and equal the stored trace; nothing of one user's traces for another user's token.
A screenshot of each page is written under the test's output folder.
"""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace

import aiohttp
import pyoxigraph
import pytest
from browser import FLAGS, ConsoleErrors
from gateway_client import Gateway
from test_gateway import ALICE, BOB, _drop_users

from trustgraph_base.provenance.trace_model import build_trace
from trustgraph_base.provenance.walk import collect_trace
from trustgraph_base.rdf.oxigraph import to_quad
from trustgraph_flow.embedded import ALL
from trustgraph_flow.gateway.auth import Auth
from trustgraph_flow.gateway.service import ApiGateway

pytestmark = pytest.mark.timeout(600)

#: Markup that would run, or show, if a page ever let stored text through as HTML.
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script><b id="injected">bold</b>'
QUESTION = "Who discovered polonium? " + HOSTILE
ANSWER = "Marie and Pierre Curie discovered polonium. " + HOSTILE


def hostile_script(calls: dict):
    """Edge selection: the polonium edges, each reason carrying hostile markup; the answer carries it too."""

    def script(template_id, terms, messages):
        calls.setdefault(template_id, []).append(terms)
        if template_id == "kg-edge-selection":
            chosen = [k for k in terms["knowledge"] if "polonium" in (k["s"] + " " + k["o"]).lower()][:4]
            return "\n".join(json.dumps({"id": k["id"], "reasoning": f"{k['s']} {k['p']} {k['o']} {HOSTILE}",
                                         "score": round(0.9 - i / 10, 2), "concept": "polonium"})
                             for i, k in enumerate(chosen))
        if template_id == "kg-synthesis":
            return ANSWER
        raise AssertionError(f"unexpected template {template_id}")

    return script


@pytest.fixture
async def explorer_on(deployment, llm_server, llm_settings, chromium, tmp_path):
    """``await explorer_on(scripted=True)``: a gateway with tokens (alice = the deployment's user, whose corpus
    is loaded; bob = another user) over the whole stack, answering through the scripted test LLM (or the
    extractive model), a headless Chromium, and a folder for screenshots."""
    from playwright.async_api import async_playwright

    started: list = []

    async def start(scripted: bool = True):
        calls: dict = {}
        bob_user = f"gw{uuid.uuid4().hex[:10]}"
        if scripted:
            llm_server.set_script(hostile_script(calls))
            stack = await deployment.start(ALL, llm="openai", settings=llm_settings(llm_server))
        else:
            stack = await deployment.start(ALL)
        gw = ApiGateway(backend=stack.backend, flow=stack.flow, port=0,
                        auth=Auth(((ALICE, deployment.user), (BOB, bob_user)), default_user=deployment.user))
        await gw.start()
        http = aiohttp.ClientSession()
        pw = await async_playwright().start()
        browser = await pw.chromium.launch(executable_path=chromium, headless=True, args=FLAGS)
        env = SimpleNamespace(gateway=Gateway(gw, http), stack=stack, http=http, browser=browser, calls=calls,
                              deployment=deployment, bob_user=bob_user, shots=tmp_path / "screenshots",
                              closers=(browser.close, pw.stop, http.close, gw.stop, stack.stop))
        env.shots.mkdir(exist_ok=True)
        started.append(env)
        return env

    yield start
    for env in reversed(started):
        for close in env.closers:
            await close()
        _drop_users(deployment, [env.bob_user])


async def signed_in_page(env, token: str = ALICE):
    """A new browser context (fresh cookies) signed in through the login form, and its console watcher."""
    context = await env.browser.new_context()
    page = await context.new_page()
    errors = ConsoleErrors()
    errors.watch(page)
    await page.goto(env.gateway.url + "explorer")
    assert await page.get_by_label("Token").count() == 1  # the sign-in form, with a labelled field
    await page.get_by_label("Token").fill(token)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url("**/explorer")
    return page, errors


async def ask(env, question: str = QUESTION) -> str:
    """A streamed GraphRAG query through the gateway's socket as alice; the trace's Question URI."""
    sock = await env.gateway.socket(ALICE)
    frames = await sock.call("graph-rag", {"query": question, "streaming": True, "edge-limit": 25})
    assert all("error" not in f for f in frames), frames[-1]
    await env.stack.wait_idle()
    return next(f["response"]["explain_id"] for f in frames
                if f["response"].get("message_type") == "explain")


async def stored(env, uri: str) -> dict:
    """The stored trace as the trace model reads it (labels and chains from the store, straight)."""
    store = next(s for s in env.stack.stores if hasattr(s, "list_traces"))
    user, coll = env.deployment.user, env.deployment.collection

    async def q(patterns):
        return [t for r in store.query_many(user, coll, patterns) for t in r]

    triples = await collect_trace(q, uri)
    return {"triples": triples, "trace": build_trace(triples, uri)}


async def test_a_graph_rag_trace_shows_every_stage_edge_reason_source_and_the_answer(explorer_on):
    env = await explorer_on()
    uri = await ask(env)
    model = (await stored(env, uri))["trace"]
    selected = model["focus"]["selected_edges"]
    assert selected and model["synthesis"]
    page, errors = await signed_in_page(env)

    # the list: the new trace first, linked
    first = page.locator("tr.trace-row").first
    assert await first.get_attribute("data-uri") == uri
    assert await first.get_attribute("data-status") == "complete"
    await page.screenshot(path=str(env.shots / "list.png"), full_page=True)
    await first.locator("a.trace-link").click()
    await page.wait_for_url("**/explorer/trace?**")

    # the chain, in order
    stages = await page.locator("ol.chain > li.stage").evaluate_all("els => els.map(e => e.dataset.stage)")
    assert stages == ["question", "grounding", "exploration", "focus", "synthesis"]
    # when each stage was produced, after the question, in order (the stored prov:generatedAtTime)
    timed = page.get_by_test_id("timing")
    assert await timed.evaluate_all("els => els.map(e => e.dataset.stage)") == [
        "grounding", "exploration", "focus", "synthesis"]
    after = [float((await timed.nth(i).get_by_test_id("timing-after").text_content()).split()[0]) for i in range(4)]
    assert after == sorted(after) and after[0] >= 0
    assert [t["uri"] for t in model["timings"]] == [model[k]["uri"] for k in ("grounding", "exploration", "focus",
                                                                            "synthesis")]
    # hostile markup is text: the question, reasons and answer show it literally, and none of it ran
    assert await page.get_by_test_id("question").text_content() == QUESTION
    assert await page.locator("#injected").count() == 0
    assert await page.evaluate("window.__pwned") is None
    answer = await page.get_by_test_id("answer").text_content()
    assert answer == ANSWER

    # every selected edge drawn (an arrow each, a node per distinct end) and listed with its reason
    edges = page.get_by_test_id("edge")
    assert await edges.count() == len(selected)
    assert await page.get_by_test_id("graph-edge").count() == len(selected)
    ends = {serialize_term_json(e["edge"][k]) for e in selected for k in ("s", "o")}
    assert await page.get_by_test_id("graph-node").count() == len(ends)
    for i, e in enumerate(selected):
        item = edges.nth(i)
        assert await item.get_by_test_id("edge-reason").text_content() == e["reasoning"]
        assert await item.get_by_test_id("edge-concept").text_content() == "polonium"
        assert float(await item.get_by_test_id("edge-score").text_content()) == e["score"]
    await page.screenshot(path=str(env.shots / "trace.png"), full_page=True)

    # choosing an arrow of the graph (by keyboard, then by mouse on its label) brings its edge forward: reason
    # and source chain down to the document
    await page.get_by_test_id("graph-edge").nth(1).focus()
    await page.keyboard.press("Enter")
    await page.wait_for_url("**#edge-2")
    await page.get_by_test_id("graph-edge").first.locator("text").click()
    await page.wait_for_url("**#edge-1")
    chosen = page.locator("li.edge:target")
    assert await chosen.get_by_test_id("edge-reason").text_content() == selected[0]["reasoning"]
    links = await chosen.get_by_test_id("source-chain").first.locator("li").evaluate_all(
        "els => els.map(e => e.dataset.type)")
    assert links == ["chunk", "page", "document"]
    titles = {d.title for d in env.deployment.documents}
    title = await chosen.get_by_test_id("document-title").first.text_content()
    assert title in titles
    # its chunk's text is the librarian's, and the document downloads from the librarian
    assert "olonium" in (await chosen.get_by_test_id("chunk-text").first.text_content())
    href = await chosen.get_by_test_id("document-title").first.get_attribute("href")
    async with env.http.get(env.gateway.url + href.lstrip("/"), headers={"Authorization": f"Bearer {ALICE}"}) as r:
        assert r.status == 200 and len(await r.read()) > 100
    await page.screenshot(path=str(env.shots / "edge.png"), full_page=True)

    # back to the list by the header link, by keyboard
    await page.locator("a.brand").focus()
    await page.keyboard.press("Enter")
    await page.wait_for_url("**/explorer")
    assert await page.locator("tr.trace-row").count() >= 1
    assert errors == []


async def as_json(env, uri: str) -> dict:
    """The trace as ``tg-show-explain-trace --format json`` gives it, through the explorer's JSON export."""
    async with env.http.get(env.gateway.url + "explorer/export", params={"uri": uri, "format": "json"},
                            headers={"Authorization": f"Bearer {ALICE}"}) as r:
        assert r.status == 200
        return json.loads(await r.read())


def serialize_term_json(term: dict) -> str:
    """A key for a term of the trace model's JSON (type and value), as the page groups nodes."""
    return f"{term['type']}|{term['value']}"


async def test_exports_parse_as_rdf_and_equal_the_stored_trace(explorer_on):
    env = await explorer_on()
    uri = await ask(env, "Who discovered polonium?")
    want = await stored(env, uri)
    page, errors = await signed_in_page(env)
    await page.goto(env.gateway.url + f"explorer/trace?uri={uri}")
    hrefs = {f: await page.get_by_test_id(f"export-{f}").get_attribute("href") for f in ("trig", "turtle", "json")}
    headers = {"Authorization": f"Bearer {ALICE}"}

    async def fetch(href: str) -> bytes:
        async with env.http.get(env.gateway.url + href.lstrip("/"), headers=headers) as r:
            assert r.status == 200 and "attachment" in r.headers["Content-Disposition"]
            return await r.read()

    expected = {to_quad(t) for t in want["triples"]}
    assert set(pyoxigraph.parse(await fetch(hrefs["trig"]), format=pyoxigraph.RdfFormat.TRIG)) == expected
    turtle = {q.triple for q in pyoxigraph.parse(await fetch(hrefs["turtle"]), format=pyoxigraph.RdfFormat.TURTLE)}
    assert turtle == {q.triple for q in expected}
    data = json.loads(await fetch(hrefs["json"]))
    assert data["uri"] == uri and data["synthesis"]["answer"] == ANSWER
    assert [e["reasoning"] for e in data["focus"]["selected_edges"]] == [
        e["reasoning"] for e in want["trace"]["focus"]["selected_edges"]]
    assert all(e["sources"] for e in data["focus"]["selected_edges"])
    assert errors == []


async def test_another_users_token_sees_none_of_it(explorer_on):
    env = await explorer_on()
    uri = await ask(env, "Who discovered polonium?")
    page, errors = await signed_in_page(env, BOB)
    assert await page.get_by_test_id("no-traces").count() == 1  # bob's list is empty
    assert uri not in await page.content()
    # alice's trace, by its URI, is not bob's: 404, and naming alice as the user is refused
    response = await page.goto(env.gateway.url + f"explorer/trace?uri={uri}")
    assert response.status == 404 and uri in await page.get_by_test_id("error-message").text_content()
    response = await page.goto(env.gateway.url + f"explorer/trace?uri={uri}&user={env.deployment.user}")
    assert response.status == 403
    await page.screenshot(path=str(env.shots / "refused.png"), full_page=True)
    for fmt in ("trig", "json"):
        response = await page.goto(env.gateway.url + f"explorer/export?uri={uri}&format={fmt}")
        assert response.status == 404
    response = await page.goto(env.gateway.url + f"explorer/compare?a={uri}&b={uri}")
    assert response.status == 404 and "polonium" not in await page.content()
    # without a token: the sign-in page, 401; a wrong token is refused too
    async with env.http.get(env.gateway.url + f"explorer/trace?uri={uri}") as r:
        assert r.status == 401 and "polonium" not in await r.text()
    async with env.http.get(env.gateway.url + f"explorer/trace?uri={uri}",
                            headers={"Authorization": "Bearer not-a-known-token-at-all"}) as r:
        assert r.status == 401
    assert errors.besides_statuses() == []


async def test_unknown_and_malformed_traces_get_error_pages_with_their_status(explorer_on):
    env = await explorer_on()
    page, errors = await signed_in_page(env)
    missing = f"urn:trustgraph:question:{uuid.uuid4()}"
    response = await page.goto(env.gateway.url + f"explorer/trace?uri={missing}")
    assert response.status == 404
    assert await page.get_by_test_id("error-title").text_content() == "No such trace"
    assert missing in await page.get_by_test_id("error-message").text_content()
    response = await page.goto(env.gateway.url + "explorer/trace?uri=" + HOSTILE)
    assert response.status == 400 and await page.locator("#injected").count() == 0
    assert await page.evaluate("window.__pwned") is None
    response = await page.goto(env.gateway.url + "explorer?type=nonsense")
    assert response.status == 400
    # a question is asked from the explorer's own page only, of the services it offers, and must say something
    ask = env.gateway.url + "explorer/ask/stream"
    bearer = {"Authorization": f"Bearer {ALICE}"}
    for params, headers, status in (({"q": "Who discovered polonium?"}, {"Sec-Fetch-Site": "cross-site"}, 403),
                                    ({"q": "Who?", "service": "triples"}, {}, 400), ({"q": "  "}, {}, 400)):
        async with env.http.get(ask, params=params, headers={**bearer, **headers}) as r:
            assert r.status == status, params
    assert errors.besides_statuses() == []


async def test_an_agent_trace_links_to_its_sub_queries_and_back(explorer_on):
    env = await explorer_on(scripted=False)
    sock = await env.gateway.socket(ALICE)
    frames = await sock.call("agent", {"question": "Who discovered polonium?", "streaming": True})
    assert all("error" not in f for f in frames), frames[-1]
    await env.stack.wait_idle()
    agent_uri = next(f["response"]["explain_id"] for f in frames if f["response"].get("message_type") == "explain")
    page, errors = await signed_in_page(env)
    await page.goto(env.gateway.url + f"explorer/trace?uri={agent_uri}")
    stages = await page.locator("ol.chain > li.stage").evaluate_all("els => els.map(e => e.dataset.stage)")
    assert stages[0] == "question" and "analysis" in stages and stages[-1] == "conclusion"
    model = (await stored(env, agent_uri))["trace"]
    assert await page.get_by_test_id("step").count() == len(model["analyses"])
    subs = [s for a in model["analyses"] for s in a["sub_traces"]]
    links = page.get_by_test_id("sub-trace-link")
    assert await links.count() == len(subs) and subs, "the agent asked no sub-query"
    await links.first.click()
    await page.wait_for_url("**/explorer/trace?**")
    assert await page.get_by_test_id("trace").get_attribute("data-uri") == subs[0]["uri"]
    await page.get_by_test_id("parent-link").click()
    assert await page.get_by_test_id("trace").get_attribute("data-uri") == agent_uri
    await page.screenshot(path=str(env.shots / "agent.png"), full_page=True)
    assert errors == []


async def test_a_supervisor_trace_is_drawn_as_a_dag_with_its_joins(explorer_on):
    """A supervisor run (extractive: one sub-goal per clause) is drawn as a layered graph: the Decomposition,
    a node per sub-agent linking to its trace, a Finding per sub-agent, the Synthesis with an arrow from every
    Finding; the Findings list what each is derived from."""
    env = await explorer_on(scripted=False)
    sock = await env.gateway.socket(ALICE)
    frames = await sock.call("agent", {"question": "Who discovered polonium and who discovered radium?",
                                       "pattern": "supervisor", "streaming": True})
    assert all("error" not in f for f in frames), frames[-1]
    await env.stack.wait_idle()
    agent_uri = next(f["response"]["explain_id"] for f in frames if f["response"].get("message_type") == "explain")
    page, errors = await signed_in_page(env)
    await page.goto(env.gateway.url + f"explorer/trace?uri={agent_uri}")
    stages = await page.locator("ol.chain > li.stage").evaluate_all("els => els.map(e => e.dataset.stage)")
    assert stages == ["question", "decomposition", "synthesis", "conclusion"], stages
    kinds = await page.get_by_test_id("dag-node").evaluate_all("els => els.map(e => e.dataset.kind)")
    assert sorted(kinds) == sorted(["question", "head", "sub-agent", "sub-agent", "branch", "branch", "synthesis",
                                    "conclusion"]), kinds
    # question -> decomposition, decomposition -> 2 sub-agents and 2 findings, sub-agent -> finding (2),
    # finding -> synthesis (2: the join), synthesis -> conclusion
    assert await page.get_by_test_id("dag-edge").count() == 1 + 4 + 2 + 2 + 1
    assert await page.get_by_test_id("synthesis-inputs").inner_text() == "derived from Finding 1, Finding 2"
    inputs = await page.get_by_test_id("branch-inputs").all_inner_texts()
    assert inputs == ["derived from Sub-agent g1 Conclusion, Decomposition",
                      "derived from Sub-agent g2 Conclusion, Decomposition"], inputs
    await page.get_by_test_id("dag-link").filter(has_text="Sub-agent g1").click()
    await page.wait_for_url("**/explorer/trace?**")
    assert await page.get_by_test_id("trace").get_attribute("data-uri") == f"{agent_uri}-g1"
    await page.get_by_test_id("parent-link").click()
    assert await page.get_by_test_id("trace").get_attribute("data-uri") == agent_uri
    await page.screenshot(path=str(env.shots / "supervisor.png"), full_page=True)
    assert errors == []


async def test_a_document_rag_trace_shows_its_chunks_with_their_sources_and_texts(explorer_on):
    env = await explorer_on(scripted=False)
    sock = await env.gateway.socket(ALICE)
    frames = await sock.call("document-rag", {"query": "What is radioactivity?", "streaming": True})
    assert all("error" not in f for f in frames), frames[-1]
    await env.stack.wait_idle()
    uri = next(f["response"]["explain_id"] for f in frames if f["response"].get("message_type") == "explain")
    model = (await stored(env, uri))["trace"]
    page, errors = await signed_in_page(env)
    await page.get_by_label("Type").select_option("docrag")
    await page.get_by_role("button", name="Show").click()
    await page.wait_for_url("**type=docrag**")
    types = await page.locator("tr.trace-row td:nth-child(2)").all_text_contents()
    assert types and set(types) == {"DocRAG"}
    await page.locator(f'tr.trace-row[data-uri="{uri}"] a.trace-link').click()
    await page.wait_for_url("**/explorer/trace?**")
    stages = await page.locator("ol.chain > li.stage").evaluate_all("els => els.map(e => e.dataset.stage)")
    assert stages == ["question", "grounding", "exploration", "synthesis"]
    chunks = page.get_by_test_id("chunk")
    assert await chunks.count() == len(model["exploration"]["chunks"]) > 0
    titles = {d.title for d in env.deployment.documents}
    for i in range(await chunks.count()):
        chunk = chunks.nth(i)
        kinds = await chunk.locator("[data-testid=source-chain] > li").evaluate_all(
            "els => els.map(e => e.dataset.type)")
        assert kinds == ["chunk", "page", "document"]
        assert await chunk.get_by_test_id("document-title").text_content() in titles
        assert (await chunk.get_by_test_id("chunk-text").text_content()).strip()
    assert (await page.get_by_test_id("answer").text_content()).strip()
    await page.screenshot(path=str(env.shots / "docrag.png"), full_page=True)
    assert errors == []


async def test_a_failed_query_shows_the_stage_it_stopped_at(explorer_on, llm_server):
    env = await explorer_on()
    llm_server.fail_next(20, status=500, message="model crashed")
    try:
        sock = await env.gateway.socket(ALICE)
        frames = await sock.call("graph-rag", {"query": "Who discovered polonium?", "streaming": True})
        await env.stack.wait_idle()
    finally:
        llm_server.clear_faults()
    uri = next(f["response"]["explain_id"] for f in frames
               if "response" in f and f["response"].get("message_type") == "explain")
    model = (await stored(env, uri))["trace"]
    assert model["status"] == "failed"
    page, errors = await signed_in_page(env)
    assert await page.locator(f'tr.trace-row[data-uri="{uri}"]').get_attribute("data-status") == "failed"
    await page.goto(env.gateway.url + f"explorer/trace?uri={uri}")
    assert await page.get_by_test_id("status").text_content() == "failed"
    stages = await page.locator("ol.chain > li.stage").evaluate_all("els => els.map(e => e.dataset.stage)")
    assert stages[-1] == "error" and "synthesis" not in stages
    text = await page.get_by_test_id("error-stage").text_content()
    assert text.startswith(f"at {model['error']['stage']}:") and model["error"]["message"] in text
    assert await page.get_by_test_id("no-answer").count() == 1
    assert errors == []


async def test_the_compare_view_shows_edges_added_removed_and_reasons_changed(explorer_on, llm_server):
    env = await explorer_on()
    first = await ask(env, "Who discovered polonium?")
    before = (await stored(env, first))["trace"]["focus"]["selected_edges"]
    assert len(before) >= 3
    labelled = await as_json(env, first)  # the stored trace with the knowledge graph's labels

    def second_run(template_id, terms, messages):
        """The same question again: the first edge dropped, the second with a new reason and score."""
        if template_id == "kg-edge-selection":
            chosen = [k for k in terms["knowledge"] if "polonium" in (k["s"] + " " + k["o"]).lower()][1:4]
            return "\n".join(json.dumps({"id": k["id"], "reasoning": "asked again" if i == 0 else
                                         f"{k['s']} {k['p']} {k['o']} {HOSTILE}",
                                         "score": 0.5 if i == 0 else round(0.8 - i / 10, 2), "concept": "polonium"})
                             for i, k in enumerate(chosen))
        return ANSWER + " (again)"

    llm_server.set_script(second_run)
    second = await ask(env, "Who discovered polonium?")
    after = (await stored(env, second))["trace"]["focus"]["selected_edges"]
    page, errors = await signed_in_page(env)
    await page.goto(env.gateway.url + f"explorer/trace?uri={first}")
    await page.get_by_label("Compare with trace").fill(second)
    await page.get_by_role("button", name="Compare").click()
    await page.wait_for_url("**/explorer/compare?**")
    removed = await page.get_by_test_id("removed").locator("li").all_text_contents()
    gone = labelled["focus"]["selected_edges"][0]["labels"]
    assert [" ".join(r.split()) for r in removed] == [" ".join((gone["s"], gone["p"], gone["o"]))]
    assert len(after) == len(before) - 1
    changed = page.get_by_test_id("changed").locator("> li")
    assert await changed.count() == 1
    text = " ".join((await changed.text_content()).split())
    assert "asked again" in text and before[1]["reasoning"] in text and "0.5" in text
    assert await page.get_by_test_id("added").locator("li.none").count() == 1
    assert (await page.get_by_test_id("answer-after").text_content()).endswith("(again)")
    await page.screenshot(path=str(env.shots / "compare.png"), full_page=True)
    assert errors == []


async def test_a_live_question_draws_its_stages_in_order_while_the_answer_streams(explorer_on):
    env = await explorer_on()
    page, errors = await signed_in_page(env)
    await page.get_by_role("link", name="Ask").click()
    await page.wait_for_url("**/explorer/ask")
    await page.get_by_label("Question", exact=True).fill(QUESTION)
    await page.get_by_label("Ask with").select_option("graph-rag")
    await page.get_by_role("button", name="Ask", exact=True).click()
    await page.get_by_test_id("live-trace").wait_for(state="visible", timeout=120_000)
    assert await page.get_by_test_id("live-status").text_content() == "Done."
    stages = await page.locator("#live-chain > li").evaluate_all("els => els.map(e => e.dataset.stage)")
    assert stages == ["question", "grounding", "exploration", "focus", "synthesis"]
    answer = page.get_by_test_id("live-answer")
    assert await answer.text_content() == ANSWER  # as text: the hostile part neither ran nor rendered
    assert await page.locator("#injected").count() == 0 and await page.evaluate("window.__pwned") is None
    # the answer streamed after the Focus and before the Synthesis, as the explain events go out
    assert await answer.get_attribute("data-stages-before") == "4"
    question_uri = await page.locator("#live-chain > li p.uri").first.text_content()
    await page.screenshot(path=str(env.shots / "ask.png"), full_page=True)
    await page.get_by_test_id("live-trace").click()
    await page.wait_for_url("**/explorer/trace?**")
    uri = await page.get_by_test_id("trace").get_attribute("data-uri")
    assert uri == question_uri
    assert (await stored(env, uri))["trace"]["status"] == "complete"
    assert await page.get_by_test_id("question").text_content() == QUESTION
    assert errors == []


async def test_the_list_filters_by_type_status_question_text_and_time(explorer_on):
    env = await explorer_on()
    answered = await ask(env, "Who discovered polonium?")
    # DocumentRAG's answer is not scripted: its model call fails, so its trace is a failed one
    sock = await env.gateway.socket(ALICE)
    frames = await sock.call("document-rag", {"query": "What is radioactivity?", "streaming": True})
    await env.stack.wait_idle()
    failed = next(f["response"]["explain_id"] for f in frames
                  if "response" in f and f["response"].get("message_type") == "explain")
    assert (await stored(env, failed))["trace"]["status"] == "failed"
    page, errors = await signed_in_page(env)

    async def shown(**form) -> list[str]:
        for label, value in form.items():
            field = page.get_by_label(label, exact=True)
            if await field.evaluate("e => e.tagName") == "SELECT":
                await field.select_option(value)
            else:
                await field.fill(value)
        await page.get_by_role("button", name="Show").click()
        await page.wait_for_load_state()
        return await page.locator("tr.trace-row").evaluate_all("els => els.map(e => e.dataset.uri)")

    await page.goto(env.gateway.url + "explorer")
    assert (await shown(Status="failed"))[0] == failed
    assert answered not in await page.locator("tr.trace-row").evaluate_all("els => els.map(e => e.dataset.uri)")
    statuses = await page.locator("tr.trace-row").evaluate_all("els => els.map(e => e.dataset.status)")
    assert set(statuses) == {"failed"}
    await page.goto(env.gateway.url + "explorer")
    rows = await shown(**{"Question contains": "RADIOACTIVITY"})
    assert failed in rows and answered not in rows
    questions = await page.locator("tr.trace-row a.trace-link").all_text_contents()
    assert all("radioactivity" in q.casefold() for q in questions)
    await page.goto(env.gateway.url + "explorer")
    today = (await page.locator("tr.trace-row time").first.get_attribute("datetime"))[:10]
    assert (await shown(From=today, To=today))[:2] == [failed, answered]
    assert await shown(From="2999-01-01", To="") == []
    assert await page.get_by_test_id("no-traces").count() == 1
    await page.goto(env.gateway.url + "explorer")
    rows = await shown(Type="graphrag", **{"Question contains": "polonium"})
    assert rows[0] == answered and failed not in rows
    assert set(await page.locator("tr.trace-row td:nth-child(2)").all_text_contents()) == {"GraphRAG"}
    response = await page.goto(env.gateway.url + "explorer?status=lost")
    assert response.status == 400
    response = await page.goto(env.gateway.url + "explorer?from=yesterday")
    assert response.status == 400
    assert errors.besides_statuses() == []


async def test_a_live_agent_question_draws_its_steps_and_conclusion(explorer_on):
    env = await explorer_on(scripted=False)
    page, errors = await signed_in_page(env)
    await page.goto(env.gateway.url + "explorer/ask")
    await page.get_by_label("Question", exact=True).fill("Who discovered radium?")
    await page.get_by_label("Ask with").select_option("agent")
    await page.get_by_role("button", name="Ask", exact=True).click()
    await page.get_by_test_id("live-trace").wait_for(state="visible", timeout=120_000)
    assert await page.get_by_test_id("live-status").text_content() == "Done."
    stages = await page.locator("#live-chain > li").evaluate_all("els => els.map(e => e.dataset.stage)")
    assert stages[0] == "question" and "analysis" in stages and stages[-1] == "conclusion"
    answer = (await page.get_by_test_id("live-answer").text_content()).strip()
    await page.get_by_test_id("live-trace").click()
    await page.wait_for_url("**/explorer/trace?**")
    uri = await page.get_by_test_id("trace").get_attribute("data-uri")
    assert uri.startswith("urn:trustgraph:agent:")
    assert (await page.get_by_test_id("answer").text_content()).strip() == answer != ""
    assert errors == []
