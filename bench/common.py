"""Shared plumbing for benchmarks: figures with targets, percentiles, table and JSON output."""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Figure:
    """One measured figure, next to its target.

    :param better: ``"lower"`` or ``"higher"``: which side of the target is good.
    :param spread: for repeated measurements, e.g. the min-max range or stdev, as text.
    """

    name: str
    value: float
    unit: str
    target: float | None = None
    better: str = "lower"
    stack: str = "embedded"
    spread: str = ""
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """value / target (for "lower" figures) or target / value (for "higher"), so < 1 is good."""
        if self.target is None or not self.value:
            return None
        return self.value / self.target if self.better == "lower" else self.target / self.value

    @property
    def meets(self) -> bool | None:
        r = self.ratio
        return None if r is None else r <= 1.0


@dataclass
class Results:
    figures: list[Figure] = field(default_factory=list)

    def add(self, *figures: Figure) -> None:
        self.figures.extend(figures)

    def print_table(self, title: str = "") -> None:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title or None)
        for col in ("stack", "figure", "value", "target", "ratio", "ok", "spread / note"):
            table.add_column(col, justify="right" if col in ("value", "target", "ratio") else "left")
        for f in self.figures:
            tgt = "" if f.target is None else f"{'<=' if f.better == 'lower' else '>='} {fmt(f.target)} {f.unit}"
            ratio = "" if f.ratio is None else f"{f.ratio:.2f}"
            ok = "" if f.meets is None else ("yes" if f.meets else "NO")
            table.add_row(f.stack, f.name, f"{fmt(f.value)} {f.unit}", tgt, ratio, ok,
                          " ".join(x for x in (f.spread, f.note) if x))
        Console(width=160).print(table)

    def to_json(self) -> dict:
        return {"machine": {"python": sys.version.split()[0], "platform": platform.platform()},
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "figures": [{**asdict(f), "ratio": f.ratio, "meets": f.meets} for f in self.figures]}

    def write_json(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_json(), indent=2))


def fmt(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0-100) by linear interpolation."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def spread(values: list[float]) -> str:
    """min-max and relative stdev of repeated measurements."""
    if len(values) < 2:
        return ""
    return f"range {fmt(min(values))}-{fmt(max(values))}, sd {statistics.stdev(values) / statistics.mean(values):.0%}"
