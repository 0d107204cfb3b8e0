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
