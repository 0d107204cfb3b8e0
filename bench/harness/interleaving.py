"""Comparing variants measured in the same minutes: interleaved order, samples per variant, on/off figures.

On a shared 2-core machine two variants measured one after the other measure the neighbours
too; every ratio between variants (explainability on/off, embedded/distributed) therefore
comes from requests that alternate variant by variant, the order rotating each repetition.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ..common import Figure, spread
from .suite import load_note


class Variants:
    """Samples per (stack, variant), collected in interleaved repetitions."""

    def __init__(self) -> None:
        self.samples: dict[tuple[str, str], list[list[float]]] = defaultdict(list)

    def new_rep(self, keys: Sequence[tuple[str, str]]) -> None:
        for k in keys:
            self.samples[k].append([])

    def add(self, stack: str, variant: str, value: float) -> None:
        self.samples[(stack, variant)][-1].append(value)

    def all(self, stack: str, variant: str) -> list[float]:
        return [v for rep in self.samples[(stack, variant)] for v in rep]

    def ratio(self, a: tuple[str, str], b: tuple[str, str]) -> tuple[float, list[float]]:
        """median(a) / median(b) over all samples, and the same ratio per repetition (for the spread)."""
        per_rep = [statistics.median(x) / statistics.median(y)
                   for x, y in zip(self.samples[a], self.samples[b], strict=True) if x and y]
        return statistics.median(self.all(*a)) / statistics.median(self.all(*b)), per_rep


def interleaved_order(items: Sequence[Any], rep: int) -> list[Any]:
    """Every rotation of ``items``, then every rotation reversed, so each item runs first and follows each
    other item equally often.

    (Reversing every other rotation, as before, undid the rotation for two items: with ``["on", "off"]``
    "on" always ran first and "off" always right after it.)
    """
    n = len(items)
    k = rep % n
    out = list(items[k:]) + list(items[:k])
    return out if (rep // n) % 2 == 0 else out[::-1]


#: What the CPU figures of :func:`on_off_figures` count, unless a benchmark says otherwise.
DEFAULT_CPU_WHAT = "services + bus + client (+ SQLite when embedded)"


def on_off_figures(v: Variants, stack: str, what: str, reps: int, target: float = 1.05,
                   cpu: Variants | None = None, unit_note: str = "",
                   cpu_what: str = DEFAULT_CPU_WHAT) -> list[Figure]:
    """Latency on and off, their ratio (the target) and, if measured, the same for CPU time (of ``cpu_what``)."""
    on, off = v.all(stack, "on"), v.all(stack, "off")
    ratio, per_rep = v.ratio((stack, "on"), (stack, "off"))
    out = [
        Figure(f"{what} latency p50, explainability on", statistics.median(on), "ms", stack=stack, spread=spread(on),
               note=f"{len(on)} requests{unit_note}; {load_note()}"),
        Figure(f"{what} latency p50, explainability off", statistics.median(off), "ms", stack=stack,
               spread=spread(off)),
        Figure(f"{what}: explainability cost, latency on / off", ratio, "x", target, stack=stack,
               spread=spread(per_rep), note=f"{reps} interleaved reps; target: adds < {100 * (target - 1):.0f} %"),
    ]
    if cpu is not None:
        c_ratio, c_rep = cpu.ratio((stack, "on"), (stack, "off"))
        out.append(Figure(f"{what}: CPU per request, on / off", c_ratio, "x", stack=stack,
                          spread=spread(c_rep), note=f"{statistics.median(cpu.all(stack, 'on')):.0f} vs "
                                                     f"{statistics.median(cpu.all(stack, 'off')):.0f} ms; "
                                                     + cpu_what))
    return out
