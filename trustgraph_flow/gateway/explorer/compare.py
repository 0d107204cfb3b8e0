"""Two traces side by side: which selected edges (or chunks) one has and the other lacks, and whose reason,
score or concept changed between them, e.g. the same question asked before and after a document was re-loaded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Change:
    """An edge both traces selected, with what differs: ``(field, before, after)`` for each changed field."""

    before: dict[str, Any]
    after: dict[str, Any]
    fields: list[tuple[str, Any, Any]] = field(default_factory=list)


@dataclass
class Comparison:
    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    same: int = 0
    #: ``edges`` (GraphRAG), ``chunks`` (DocumentRAG) or ``""`` (traces of different kinds, or agents)
    unit: str = ""


def _edge_key(item: dict[str, Any]) -> str:
    edge = item.get("edge") or {}
    return "|".join(str((edge.get(k) or {}).get("value")) for k in ("s", "p", "o")) if edge else item["uri"]


def compare_traces(a: dict[str, Any], b: dict[str, Any]) -> Comparison:
    """What changed from trace ``a`` to trace ``b`` (both as :func:`~trustgraph_base.provenance.trace_model.build_trace`
    gives them)."""
    if a["type"] != b["type"] or a["type"] == "agent":
        return Comparison()
    compared: tuple[str, ...]
    if a["type"] == "graphrag":
        before = {_edge_key(e): e for e in (a.get("focus") or {}).get("selected_edges", [])}
        after = {_edge_key(e): e for e in (b.get("focus") or {}).get("selected_edges", [])}
        unit, compared = "edges", ("reasoning", "score", "concept")
    else:
        before = {c["uri"]: c for c in (a.get("exploration") or {}).get("chunks", [])}
        after = {c["uri"]: c for c in (b.get("exploration") or {}).get("chunks", [])}
        unit, compared = "chunks", ()
    out = Comparison(unit=unit)
    out.added = [after[k] for k in after if k not in before]
    out.removed = [before[k] for k in before if k not in after]
    for key in before.keys() & after.keys():
        was, now = before[key], after[key]
        diffs = [(f, was.get(f), now.get(f)) for f in compared if was.get(f) != now.get(f)]
        if diffs:
            out.changed.append(Change(was, now, diffs))
        else:
            out.same += 1
    out.changed.sort(key=lambda c: _edge_key(c.before))
    return out
