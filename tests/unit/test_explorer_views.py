"""The trace explorer's pure parts: where the selected edges are drawn, and what differs between two traces."""

from __future__ import annotations

from trustgraph_flow.gateway.explorer.compare import compare_traces
from trustgraph_flow.gateway.explorer.layout import HEIGHT, WIDTH, draw_edges


def term(value: str) -> dict:
    return {"type": "iri", "value": f"http://x/{value}"}


def selection(s: str, p: str, o: str, reasoning: str = "why", score: float | None = 0.5, concept: str = "c") -> dict:
    return {"uri": f"urn:sel:{s}{p}{o}", "edge": {"s": term(s), "p": term(p), "o": term(o)},
            "labels": {"s": s, "p": p, "o": o}, "reasoning": reasoning, "score": score, "concept": concept}


def test_every_edge_gets_an_arrow_and_every_distinct_end_one_node_inside_the_drawing():
    edges = [selection("a", "knows", "b"), selection("b", "knows", "c"), selection("a", "likes", "b"),
             selection("c", "is", "c"), {"uri": "urn:sel:broken", "edge": None, "labels": None}]
    drawing = draw_edges(edges)
    assert sorted(n.label for n in drawing.nodes) == ["a", "b", "c"]
    assert [a.index for a in drawing.arrows] == [0, 1, 2, 3]  # the broken selection is listed, not drawn
    assert [a.label for a in drawing.arrows] == ["knows", "knows", "likes", "is"]
    for n in drawing.nodes:
        assert 0 <= n.x <= WIDTH and 0 <= n.y <= HEIGHT
    parallel = drawing.arrows[0], drawing.arrows[2]
    assert (parallel[0].lx, parallel[0].ly) != (parallel[1].lx, parallel[1].ly)  # their labels do not overlap


def test_a_single_entity_sits_in_the_middle():
    drawing = draw_edges([selection("a", "is", "a")])
    assert [(n.x, n.y) for n in drawing.nodes] == [(WIDTH / 2, HEIGHT / 2)]


def graphrag(*edges: dict, answer: str = "x") -> dict:
    return {"type": "graphrag", "focus": {"selected_edges": list(edges)}, "synthesis": {"answer": answer}}


def test_compare_finds_added_removed_and_changed_edges():
    before = graphrag(selection("a", "p", "b"), selection("b", "p", "c", score=0.9), selection("c", "p", "d"))
    after = graphrag(selection("b", "p", "c", reasoning="new reason", score=0.4), selection("c", "p", "d"),
                     selection("d", "p", "e"))
    diff = compare_traces(before, after)
    assert diff.unit == "edges"
    assert [e["labels"]["s"] for e in diff.removed] == ["a"]
    assert [e["labels"]["s"] for e in diff.added] == ["d"]
    assert [(c.after["labels"]["s"], c.fields) for c in diff.changed] == [
        ("b", [("reasoning", "why", "new reason"), ("score", 0.9, 0.4)])]
    assert diff.same == 1


def test_traces_of_different_kinds_and_agent_traces_compare_by_answer_only():
    docrag = {"type": "docrag", "exploration": {"chunks": [{"uri": "urn:chunk:1", "chain": []}]}}
    assert compare_traces(graphrag(), docrag).unit == ""
    assert compare_traces({"type": "agent"}, {"type": "agent"}).unit == ""
    chunks = compare_traces(docrag, {"type": "docrag", "exploration": {"chunks": [{"uri": "urn:chunk:2",
                                                                                   "chain": []}]}})
    assert chunks.unit == "chunks" and [c["uri"] for c in chunks.added] == ["urn:chunk:2"]
    assert [c["uri"] for c in chunks.removed] == ["urn:chunk:1"]


def test_a_call_without_token_counts_shows_not_reported():
    """The trace page's usage badge: counts when the endpoint reported them, "tokens not reported" when not."""
    import jinja2

    from trustgraph_flow.gateway.explorer import routes

    page = (routes.HERE / "trace.html").read_text(encoding="utf-8")
    macro = next(line for line in page.splitlines() if line.startswith("{% macro usage(u) %}"))
    badge = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(macro + "{{ usage(u) }}")
    reported = badge.render(u={"model": "m", "in_token": 120, "out_token": 0})
    assert "m · 120 in / 0 out tokens" in reported and "not reported" not in reported
    assert "llama · tokens not reported" in badge.render(u={"model": "llama", "in_token": None, "out_token": None})
