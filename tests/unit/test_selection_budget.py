"""The edge-selection prompt's token budget, structured output and unusable reasonings, below the services.

The budget ranks candidates with the extractive scorer and keeps the best-first prefix within the budget;
structured output asks the endpoint (our own OpenAI-compatible server, over real HTTP) for a JSON schema and
falls back to JSONL; reasonings that copy the prompt's example or repeat are flagged, the edges kept.
"""

from __future__ import annotations

import json

import pytest

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance.triples import (
    EdgeSelection,
    SelectionCut,
    exploration_triples,
    focus_triples,
    grounding_triples,
    question_triples,
)
from trustgraph_base.rdf.validation import validate_trace
from trustgraph_base.schema import IRI, LITERAL, Term, Triple
from trustgraph_flow.model.extractive.edge_selection import score_edges, select_edges
from trustgraph_flow.model.prompts import LlmPrompter
from trustgraph_flow.model.prompts.structured import (
    edge_selection_schema,
    parse_structured,
    rejects_response_format,
    response_formats,
)
from trustgraph_flow.model.prompts.templates import (
    EDGE_SELECTION_EXAMPLE_REASONING,
    get_template,
    render,
    without_terms,
)
from trustgraph_flow.model.testserver import start_server
from trustgraph_flow.model.text_completion import LlmError, OpenAICompletion
from trustgraph_flow.retrieval.graph_rag.budget import (
    BUDGET_ENV,
    configured_budget,
    cut_candidates,
    estimate_tokens,
)
from trustgraph_flow.retrieval.graph_rag.selection import flag_unusable_reasoning

QUERY = "Who discovered polonium?"


def candidates(n: int = 120) -> list[dict]:
    """``n`` candidate edges: two that answer the question, the rest filler about other things."""
    edges = [{"id": "e-marie", "s": "Marie Curie", "p": "discovered", "o": "polonium"},
             {"id": "e-pierre", "s": "Pierre Curie", "p": "discovered", "o": "polonium"}]
    edges += [{"id": f"f{i:03d}", "s": f"Filler entity {i}", "p": "is located in", "o": f"Some town {i % 17}"}
              for i in range(n - 2)]
    return list(reversed(edges))  # the answering edges last: the ranking, not the order, must find them


SCORES = {"polonium": 0.74, "Filler entity 3": 0.2}


def prompt_tokens(terms: dict) -> int:
    """Tokens of the prompt as a model is sent it (no terms block)."""
    prompt = render("kg-edge-selection", terms)
    return estimate_tokens(prompt.system) + estimate_tokens(without_terms(prompt.user))


# ------------------------------------------------------------------------------------------- budget
def test_estimate_is_one_token_per_2_4_bytes_rounded_up():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abc") == 2  # 3 / 2.4 = 1.25 -> 2
    assert estimate_tokens("é" * 6) == 5  # bytes, not characters: 12 / 2.4


def test_budget_keeps_the_best_ranked_prefix_within_the_budget():
    knowledge = candidates()
    cut = cut_candidates(QUERY, knowledge, SCORES, 25, 1500)
    assert cut.candidates == len(knowledge) and 2 < cut.sent < len(knowledge)
    assert set(cut.sent_ids) <= {k["id"] for k in knowledge}
    assert [k["id"] for k in cut.terms["knowledge"]] == cut.sent_ids
    assert set(cut.sent_ids[:2]) == {"e-marie", "e-pierre"}  # ranked first although listed last
    assert cut.prompt_tokens == prompt_tokens(cut.terms) <= 1500
    longer = {**cut.terms, "knowledge": knowledge[: cut.sent + 1]}
    ranked = [next(k for k in knowledge if k["id"] == item.id) for item in score_edges(QUERY, knowledge, SCORES)]
    assert prompt_tokens({**longer, "knowledge": ranked[: cut.sent + 1]}) > 1500  # one more would not fit
    assert (cut.budget, cut.terms["limit"], cut.terms["query"]) == (1500, 25, QUERY)


def test_budget_zero_sends_every_candidate_in_its_order():
    knowledge = candidates()
    cut = cut_candidates(QUERY, knowledge, SCORES, 25, 0)
    assert cut.terms["knowledge"] == knowledge and cut.sent == cut.candidates == len(knowledge)
    assert cut.budget == 0 and cut.prompt_tokens == prompt_tokens(cut.terms) > 1500


def test_a_tiny_budget_still_sends_the_best_edge():
    cut = cut_candidates(QUERY, candidates(), SCORES, 25, 10)
    assert cut.sent == 1 and cut.sent_ids[0] in {"e-marie", "e-pierre"} and cut.prompt_tokens > 10


@pytest.mark.parametrize("budget", [0, 10, 800, 1500, 3000, 6000, 100_000])
def test_the_figures_are_those_of_the_prompt_without_its_terms_block(budget):
    """The estimate renders no terms block; its figures and cut equal those of the full prompt with the block
    removed (prompt_tokens above), for 150 candidates and any budget."""
    knowledge = candidates(150)
    cut = cut_candidates(QUERY, knowledge, SCORES, 25, budget)
    assert cut.prompt_tokens == prompt_tokens(cut.terms)
    if budget == 0 or cut.sent == len(knowledge):
        return
    assert cut.sent == 1 or cut.prompt_tokens <= budget
    ranked = [next(k for k in knowledge if k["id"] == item.id) for item in score_edges(QUERY, knowledge, SCORES)]
    named = {k["s"] for k in ranked[: cut.sent + 1]} | {k["o"] for k in ranked[: cut.sent + 1]}
    one_more = {**cut.terms, "knowledge": ranked[: cut.sent + 1],
                "entity_scores": {label: v for label, v in SCORES.items() if label in named}}
    assert prompt_tokens(one_more) > budget


def test_a_negative_budget_is_refused(monkeypatch):
    with pytest.raises(ValueError, match="must be >= 0"):
        cut_candidates(QUERY, candidates(), SCORES, 25, -1)
    monkeypatch.setenv(BUDGET_ENV, "-5")
    with pytest.raises(ValueError, match="TG_SELECTION_TOKEN_BUDGET=-5"):
        configured_budget()
    monkeypatch.setenv(BUDGET_ENV, "lots")
    with pytest.raises(ValueError, match="not a whole number"):
        configured_budget()
    monkeypatch.setenv(BUDGET_ENV, "0")
    assert configured_budget() == 0
    monkeypatch.delenv(BUDGET_ENV)
    assert configured_budget() == 3000


def test_recall_with_the_budget_equals_recall_with_every_candidate():
    """The extractive selector picks the same edges from the cut as from all candidates (same scorer)."""
    knowledge = candidates()
    everything = select_edges(QUERY, knowledge, SCORES, 25)
    cut = cut_candidates(QUERY, knowledge, SCORES, 25, 1500)
    within = select_edges(QUERY, cut.terms["knowledge"], SCORES, 25)
    assert {e.id for e in everything} == {"e-marie", "e-pierre"}
    assert {e.id for e in within} == {e.id for e in everything}


def test_the_cut_is_recorded_on_the_exploration_and_validates():
    q, g = "urn:trustgraph:question:s1", "urn:trustgraph:prov:grounding:s1"
    e, f = "urn:trustgraph:prov:exploration:s1", "urn:trustgraph:prov:focus:s1"
    edge = Triple(Term(IRI, "http://ex/marie"), Term(IRI, "http://ex/discovered"), Term(IRI, "http://ex/po"))
    triples = (question_triples(q, QUERY) + grounding_triples(g, q, ["polonium"])
               + exploration_triples(e, q, 150, grounding_uri=g, cut=SelectionCut(31, 3000, 2990))
               + focus_triples(f, e, [EdgeSelection(edge, "why", unusable="copies the example")], "s1"))
    values = {t.p.value: t.o for t in triples if t.s.value == e}
    assert (int(values[ns.TG_SENT_EDGE_COUNT].value), int(values[ns.TG_SELECTION_TOKEN_BUDGET].value),
            int(values[ns.TG_SELECTION_PROMPT_TOKENS].value)) == (31, 3000, 2990)
    assert values[ns.TG_SENT_EDGE_COUNT].datatype == ns.XSD_INTEGER
    focus = {t.p.value: t.o.value for t in triples if t.s.value == f}
    assert focus[ns.TG_UNUSABLE_REASONING_COUNT] == "1"
    assert [t.o.value for t in triples if t.p.value == ns.TG_REASONING_UNUSABLE] == ["copies the example"]
    report = validate_trace(triples)
    assert report.conforms, [v.message for v in report.violations]
    with pytest.raises(ValueError, match="151 edges sent"):
        exploration_triples(e, q, 150, cut=SelectionCut(151, 3000, 10))
    # a stored trace that says more were sent than retrieved breaks the shape
    forged = [t for t in triples if t.p.value != ns.TG_SENT_EDGE_COUNT]
    forged.append(Triple(Term(IRI, e), Term(IRI, ns.TG_SENT_EDGE_COUNT), Term(LITERAL, "151", ns.XSD_INTEGER),
                         ns.GRAPH_RETRIEVAL))
    report = validate_trace(forged)
    assert not report.conforms and any("sent more edges" in v.message for v in report.violations), report.text()


# ------------------------------------------------------------------------------------ reasonings
def sels(*reasonings: str) -> list[EdgeSelection]:
    edge = Triple(Term(IRI, "http://ex/s"), Term(IRI, "http://ex/p"), Term(IRI, "http://ex/o"))
    return [EdgeSelection(edge, r, edge_id=f"e{i}") for i, r in enumerate(reasonings)]


def test_a_copy_of_the_example_reasoning_is_unusable_and_the_edge_stays():
    selections = sels(EDGE_SELECTION_EXAMPLE_REASONING.upper() + "  ", "Marie Curie discovered it, as asked.")
    assert flag_unusable_reasoning(selections, [EDGE_SELECTION_EXAMPLE_REASONING]) == 1
    assert selections[0].unusable.startswith("copies the example") and not selections[1].unusable
    assert len(selections) == 2


@pytest.mark.parametrize(("reasonings", "flagged"), [
    (["Relevant.", "relevant", "RELEVANT!"], 3),  # one text for three edges
    (["Relevant.", "Relevant."], 2),  # one text for every edge of two
    (["Relevant.", "Relevant.", "Names the husband."], 0),  # two of three: may be honest
    (["Names the discoverer.", "Names the husband.", ""], 0),
    (["Only one edge."], 0),
])
def test_one_reasoning_for_many_edges_is_unusable(reasonings, flagged):
    selections = sels(*reasonings)
    assert flag_unusable_reasoning(selections, [EDGE_SELECTION_EXAMPLE_REASONING]) == flagged
    assert all("the same reasoning was given for" in s.unusable for s in selections if s.unusable)


def test_the_prompt_example_is_about_no_bundled_corpus():
    from trustgraph_flow.ingest.sample_corpus import sample_documents

    system = get_template("kg-edge-selection").system
    assert EDGE_SELECTION_EXAMPLE_REASONING in system
    corpus = " ".join(d.content.decode("utf-8", "ignore") if isinstance(d.content, bytes) else d.content
                      for d in sample_documents()).casefold()
    for word in ("polonium", "curie", "radium", "uranium"):
        assert word in corpus and word not in system.casefold()


# --------------------------------------------------------------------------- structured output
def test_schema_limits_ids_to_the_candidates_and_both_shapes_are_offered():
    schema = edge_selection_schema({"knowledge": [{"id": "a1", "s": "x", "p": "y", "o": "z"}]})
    item = schema["properties"]["edges"]["items"]
    assert item["properties"]["id"]["enum"] == ["a1"] and set(item["required"]) == set(item["properties"])
    openai_shape, llama_shape = response_formats("kg-edge-selection", schema)
    assert openai_shape == {"type": "json_schema",
                            "json_schema": {"name": "kg-edge-selection", "schema": schema, "strict": True}}
    assert llama_shape == {"type": "json_object", "schema": schema}


def test_structured_answers_parse_and_anything_else_is_left_to_jsonl():
    validate = get_template("kg-edge-selection").validate
    parsed = parse_structured('{"edges": [{"id": "a1", "reasoning": "r"}, {"reasoning": "no id"}, 3]}', validate)
    assert parsed is not None and [o["id"] for o in parsed.objects] == ["a1"] and parsed.dropped == 2
    for text in ('{"id": "a1", "reasoning": "r"}', '{"id": "a1", "reasoning": "r"}\n{"id": "a2"}', "[]", "prose",
                 '{"edges": "none"}', None):
        assert parse_structured(text, validate) is None


def test_rejections_are_recognised_by_status_and_the_parameter_named():
    assert rejects_response_format(LlmError("ep", "HTTP 400 request rejected: 'response_format' unsupported",
                                            False, 400))
    assert rejects_response_format(LlmError("ep", "HTTP 422 request rejected: body.response_format.type", False, 422))
    assert rejects_response_format(RuntimeError("text-completion: LLM endpoint x failed: HTTP 422 request rejected: "
                                                "{'loc': ['body', 'response_format', 'type']}"))
    assert not rejects_response_format(LlmError("ep", "HTTP 500 server error: response_format", True, 500))
    llama = ("HTTP 500 request rejected: 1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
             "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}")
    assert rejects_response_format(LlmError("ep", llama, False, 500))
    assert rejects_response_format(RuntimeError(f"text-completion: LLM endpoint x failed: {llama}"))
    assert not rejects_response_format(LlmError("ep", "HTTP 400 request rejected: bad messages", False, 400))


TERMS = {"query": QUERY, "knowledge": candidates(6), "entity_scores": SCORES, "limit": 5}


async def test_structured_output_over_http_and_the_fallback_is_remembered():
    with start_server() as server:
        async with OpenAICompletion(server.base_url, "k", "remote-model", max_retries=0) as completion:
            prompter = LlmPrompter(completion)
            result = await prompter.run("kg-edge-selection", TERMS)
            sent = server.chat_requests()[-1].body["response_format"]
            assert sent["type"] == "json_schema" and sent["json_schema"]["strict"] is True
            assert json.loads(result.text)["edges"] == result.objects
            assert {o["id"] for o in result.objects} == {"e-marie", "e-pierre"} and result.dropped == 0

            server.reject_response_format()
            server.clear_log()
            fallback = await prompter.run("kg-edge-selection", TERMS)
            bodies = [r.body for r in server.chat_requests()]
            assert [b.get("response_format", {}).get("type") for b in bodies] == ["json_schema", "json_object", None]
            assert fallback.objects == result.objects and not fallback.text.startswith("{\"edges\"")
            assert prompter.rejected_formats == {"json_schema", "json_object"}

            server.clear_log()
            await prompter.run("kg-edge-selection", TERMS)  # remembered: asked plainly at once
            assert ["response_format" in r.body for r in server.chat_requests()] == [False]
            await prompter.run("kg-synthesis", {"query": QUERY, "knowledge": []})  # text templates: never asked
            assert "response_format" not in server.chat_requests()[-1].body


async def test_llama_cpp_refusing_json_schema_with_a_server_error_falls_back_to_its_own_shape():
    """llama-cpp-python 0.3.36 refuses ``json_schema`` with HTTP 500 and pydantic's message: that is the request's
    fault, so it is not retried, and the next shape (``json_object`` with the schema) is asked and answered."""
    with start_server() as server:
        server.reject_response_format("llama")
        async with OpenAICompletion(server.base_url, "k", "m", max_retries=3, backoff_initial=5.0) as completion:
            prompter = LlmPrompter(completion)
            result = await prompter.run("kg-edge-selection", TERMS)
            kinds = [r.body.get("response_format", {}).get("type") for r in server.chat_requests()]
            assert kinds == ["json_schema", "json_object"]  # no retry of the refused request, no plain fallback
            assert {o["id"] for o in result.objects} == {"e-marie", "e-pierre"} and result.dropped == 0
            assert prompter.rejected_formats == {"json_schema"}


async def test_an_answer_that_ignores_the_schema_is_read_as_jsonl():
    lines = "\n".join(json.dumps({"id": i, "reasoning": f"edge {i}"}) for i in ("e-marie", "e-pierre"))
    with start_server("scripted", script={"kg-edge-selection": [lines]}) as server:
        async with OpenAICompletion(server.base_url, "k", "m", max_retries=0) as completion:
            result = await LlmPrompter(completion).run("kg-edge-selection", TERMS)
    assert [o["id"] for o in result.objects] == ["e-marie", "e-pierre"] and result.dropped == 0
    assert server.chat_requests()[0].body["response_format"]["type"] == "json_schema"
