"""The OpenAI path end to end: tg-invoke-graph-rag with OPENAI_BASE_URL pointing at the project's test server.

The server (``tg-test-llm-server``, a subprocess) answers from a script: an edge selection with
one valid line, one malformed line and one unknown id, then a synthesis.  The real ``openai``
client inside the command talks to it over HTTP; what the script says must come out in the
live explain output and in the stored trace, and the two bad lines must be counted, not fatal.
"""

from __future__ import annotations

import json

import pytest
from e2e_support import focus_edges, parse_explain, running_llm_server

pytestmark = pytest.mark.e2e

REASON = "e2e scripted: this edge names who discovered radium"
ANSWER = "The scripted model says: Marie Curie discovered radium."
MODEL = "e2e-scripted-model"


@pytest.fixture
def scripted_llm(tmp_path):
    from trustgraph_base.provenance.triples import edge_id

    selection = "\n".join([
        json.dumps({"id": edge_id("Marie Curie", "discovered", "radium"), "reasoning": REASON}),
        "this line is not JSON",
        json.dumps({"id": "ffffffff", "reasoning": "an id the label graph does not have"}),
    ])
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"kg-edge-selection": selection, "kg-synthesis": ANSWER}))
    with running_llm_server("--mode", "scripted", "--script", str(path), "--model", MODEL,
                            "--api-key", "e2e-key") as url:
        yield url


def test_graph_rag_through_an_openai_compatible_endpoint(embedded_deployment, scripted_llm):
    d = embedded_deployment
    env = {"OPENAI_BASE_URL": scripted_llm, "OPENAI_API_KEY": "e2e-key", "OPENAI_MODEL": MODEL}
    r = d.ok("tg-invoke-graph-rag", "-x", "-q", "Who discovered radium?", env=env)
    blocks, answer = parse_explain(r.stdout)
    assert [b.stage for b in blocks] == ["question", "grounding", "exploration", "focus", "synthesis"], r.explain()
    focus = blocks[3]
    edges = focus_edges(focus)
    assert [(e.labels, e.reason) for e in edges] == [(("Marie Curie", "discovered", "radium"), REASON)]
    assert focus.lines[-1].strip() == "Skipped 2 unusable line(s) of the selection output"
    assert answer.strip() == ANSWER  # streamed from the endpoint, piece by piece

    stored = d.trace_json(blocks[0].uri)
    assert [e["reasoning"] for e in stored["focus"]["selected_edges"]] == [REASON]
    assert stored["focus"]["dropped"] == 2
    assert stored["synthesis"]["answer"] == ANSWER
    assert stored["synthesis"]["model"] == MODEL

    wrong_key = d.run("tg-invoke-graph-rag", "-q", "Who discovered radium?", env={**env, "OPENAI_API_KEY": "wrong"})
    assert wrong_key.returncode == 1 and wrong_key.stdout == "", wrong_key.explain()
    assert len(wrong_key.stderr_lines) == 1 and wrong_key.stderr_lines[0].startswith("Error: graph-rag: ")


@pytest.fixture
def copying_llm(tmp_path):
    """A model that gives the prompt's example reasoning for both edges it selects."""
    from trustgraph_base.provenance.triples import edge_id
    from trustgraph_flow.model.prompts.templates import EDGE_SELECTION_EXAMPLE_REASONING

    selection = "\n".join(json.dumps({"id": edge_id("Marie Curie", "discovered", element),
                                      "reasoning": EDGE_SELECTION_EXAMPLE_REASONING})
                          for element in ("radium", "polonium"))
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"kg-edge-selection": selection, "kg-synthesis": ANSWER}))
    with running_llm_server("--mode", "scripted", "--script", str(path), "--model", MODEL,
                            "--api-key", "e2e-key") as url:
        yield url


def test_copied_reasonings_are_shown_unusable_and_the_edges_kept(embedded_deployment, copying_llm):
    from trustgraph_flow.model.prompts.templates import EDGE_SELECTION_EXAMPLE_REASONING

    d = embedded_deployment
    env = {"OPENAI_BASE_URL": copying_llm, "OPENAI_API_KEY": "e2e-key", "OPENAI_MODEL": MODEL}
    r = d.ok("tg-invoke-graph-rag", "-x", "-q", "Who discovered radium?", env=env)
    blocks, answer = parse_explain(r.stdout)
    focus = blocks[3]
    assert sorted(e.labels for e in focus_edges(focus)) == [("Marie Curie", "discovered", "polonium"),
                                                             ("Marie Curie", "discovered", "radium")]
    why = "copies the example reasoning of the edge-selection prompt"
    assert [line.strip() for line in focus.lines if "Reason unusable:" in line] == [f"Reason unusable: {why}"] * 2
    assert focus.lines[-1].strip() == ("2 reasoning(s) unusable (they say nothing of their edge); "
                                       "the edges stay selected")
    assert answer.strip() == ANSWER

    stored = d.trace_json(blocks[0].uri)
    assert stored["focus"]["unusable_reasoning"] == 2
    assert [(e["reasoning"], e["reasoning_unusable"]) for e in stored["focus"]["selected_edges"]] \
        == [(EDGE_SELECTION_EXAMPLE_REASONING, why)] * 2
    shown = d.ok("tg-show-explain-trace", blocks[0].uri).stdout
    assert shown.count(f"Reason unusable: {why}") == 2 and "2 reasoning(s) unusable" in shown, shown
    assert "sent to the model (budget 3000 tokens; prompt about " in shown, shown
