"""Where the selected edges of a GraphRAG trace are drawn: entity nodes on a circle, predicate arrows between them.

The knowledge graph a trace selects is small (tens of edges, fewer nodes), so a circle keeps every
node apart and every arrow visible without a layout library; the page draws it as inline SVG.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: Size of the drawing (SVG user units) and the circle's radius within it.
WIDTH, HEIGHT, RADIUS = 720, 480, 190
#: Radius of a node's circle, so an arrow ends at its edge rather than its centre.
NODE_RADIUS = 7


@dataclass
class Node:
    key: str
    label: str
    x: float
    y: float


@dataclass
class Arrow:
    index: int
    label: str
    x1: float
    y1: float
    x2: float
    y2: float
    lx: float = 0.0
    ly: float = 0.0


@dataclass
class Drawing:
    nodes: list[Node] = field(default_factory=list)
    arrows: list[Arrow] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT


def _key(term: dict[str, Any] | None) -> str:
    return f"{term.get('type')}|{term.get('value')}" if term else ""


def draw_edges(selected_edges: list[dict[str, Any]]) -> Drawing:
    """The drawing of ``selected_edges`` (the trace model's ``focus.selected_edges``): one node per distinct
    subject or object term, one arrow per edge (index = its position in the list, as the page numbers edges)."""
    drawing = Drawing()
    labels: dict[str, str] = {}
    for item in selected_edges:
        edge, names = item.get("edge"), item.get("labels") or {}
        if not edge:
            continue
        for end in ("s", "o"):
            labels.setdefault(_key(edge[end]), names.get(end) or str(edge[end].get("value")))
    n = len(labels)
    cx, cy = WIDTH / 2, HEIGHT / 2
    at: dict[str, Node] = {}
    for i, (key, label) in enumerate(labels.items()):
        angle = 2 * math.pi * i / max(n, 1) - math.pi / 2
        r = RADIUS if n > 1 else 0
        node = Node(key, label, round(cx + r * math.cos(angle), 1), round(cy + r * math.sin(angle), 1))
        at[key] = node
        drawing.nodes.append(node)
    for index, item in enumerate(selected_edges):
        edge, names = item.get("edge"), item.get("labels") or {}
        if not edge:
            continue
        a, b = at[_key(edge["s"])], at[_key(edge["o"])]
        dx, dy = b.x - a.x, b.y - a.y
        length = math.hypot(dx, dy) or 1.0
        ux, uy = dx / length, dy / length
        # a self-loop (subject = object) is drawn as a short stub above its node
        x1, y1 = (a.x + ux * NODE_RADIUS, a.y + uy * NODE_RADIUS) if a is not b else (a.x, a.y - NODE_RADIUS)
        x2, y2 = (b.x - ux * (NODE_RADIUS + 3), b.y - uy * (NODE_RADIUS + 3)) if a is not b else (a.x, a.y - 30)
        arrow = Arrow(index, names.get("p") or str(edge["p"].get("value")), round(x1, 1), round(y1, 1),
                      round(x2, 1), round(y2, 1))
        # parallel edges between the same two nodes get their labels staggered along the arrow
        arrow.lx = round(x1 + (x2 - x1) * (0.35 + 0.1 * (index % 4)), 1)
        arrow.ly = round(y1 + (y2 - y1) * (0.35 + 0.1 * (index % 4)) - 4, 1)
        drawing.arrows.append(arrow)
    return drawing


@dataclass
class DagNode:
    key: str
    label: str
    x: float
    y: float
    href: str = ""
    kind: str = ""


@dataclass
class DagEdge:
    x1: float
    y1: float
    x2: float
    y2: float


@dataclass
class Dag:
    nodes: list[DagNode] = field(default_factory=list)
    edges: list[DagEdge] = field(default_factory=list)
    width: int = WIDTH
    height: int = 0


#: Size of a DAG node's box, and the space between layers and between the nodes of one layer.
BOX_W, BOX_H, LAYER_GAP, NODE_GAP = 150, 34, 40, 14


def draw_dag(trace: dict[str, Any]) -> Dag:
    """The drawing of a plan-then-execute or supervisor trace (the trace model's JSON) as a layered DAG: each
    node one layer below its deepest input, so parallel branches sit side by side and a join shows as
    several arrows into one box.  A supervisor's sub-agents are nodes between the Decomposition and their
    Findings.  Empty for a react trace."""
    from trustgraph_base.provenance.trace_model import node_name

    head = trace.get("plan") or trace.get("decomposition")
    if not head:
        return Dag()
    root = trace["uri"]
    inputs: dict[str, list[str]] = {root: []}
    labels: dict[str, str] = {root: "Question"}
    kinds: dict[str, str] = {root: "question"}
    hrefs: dict[str, str] = {}
    if trace.get("pattern"):
        d = trace["pattern"]
        inputs[d["uri"]], labels[d["uri"]], kinds[d["uri"]] = [root], f"Pattern: {d['pattern']}", "decision"
    inputs[head["uri"]] = [root] + ([trace["pattern"]["uri"]] if trace.get("pattern") else [])
    labels[head["uri"]] = "Plan" if trace.get("plan") else "Decomposition"
    kinds[head["uri"]] = "head"
    alias: dict[str, str] = {}  # a sub-agent's last stage -> the sub-agent's node
    for sub in head.get("sub_agents", []):
        inputs[sub["uri"]], kinds[sub["uri"]] = [head["uri"]], "sub-agent"
        labels[sub["uri"]] = node_name(sub["uri"], root).replace(" Question", "")
        hrefs[sub["uri"]] = sub["uri"]
        for stage in ("conclusion", "error"):
            if sub.get(stage):
                alias[sub[stage]["uri"]] = sub["uri"]
    for b in (*trace.get("step_results", []), *trace.get("findings", [])):
        inputs[b["uri"]] = [alias.get(i, i) for i in b["inputs"]]
        labels[b["uri"]], kinds[b["uri"]] = node_name(b["uri"], root), "error" if b.get("error") else "branch"
        hrefs[b["uri"]] = f"#branch-{b['number']}" if b.get("number") is not None else ""
    syn = trace.get("synthesis")
    if syn:
        inputs[syn["uri"]], labels[syn["uri"]], kinds[syn["uri"]] = list(syn["inputs"]), "Synthesis", "synthesis"
        if trace.get("conclusion"):
            c = trace["conclusion"]["uri"]
            inputs[c], labels[c], kinds[c] = [syn["uri"]], "Conclusion", "conclusion"
    layer: dict[str, int] = {}

    def depth(key: str, seen: frozenset[str] = frozenset()) -> int:
        if key not in layer:
            parents = [p for p in inputs.get(key, []) if p in inputs and p not in seen]
            layer[key] = 1 + max((depth(p, seen | {key}) for p in parents), default=-1)
        return layer[key]

    for key in inputs:
        depth(key)
    rows: dict[int, list[str]] = {}
    for key in inputs:
        rows.setdefault(layer[key], []).append(key)
    widest = max(len(r) for r in rows.values())
    dag = Dag(width=max(WIDTH, widest * (BOX_W + NODE_GAP) + NODE_GAP),
              height=len(rows) * (BOX_H + LAYER_GAP) + LAYER_GAP)
    at: dict[str, DagNode] = {}
    for level, keys in sorted(rows.items()):
        span = len(keys) * BOX_W + (len(keys) - 1) * NODE_GAP
        for i, key in enumerate(keys):
            node = DagNode(key, labels[key], round((dag.width - span) / 2 + i * (BOX_W + NODE_GAP), 1),
                           LAYER_GAP / 2 + level * (BOX_H + LAYER_GAP), hrefs.get(key, ""), kinds[key])
            at[key] = node
            dag.nodes.append(node)
    for key, parents in inputs.items():
        for p in parents:
            if p in at:
                a, b = at[p], at[key]
                dag.edges.append(DagEdge(a.x + BOX_W / 2, a.y + BOX_H, b.x + BOX_W / 2, b.y - 3))
    return dag
