"""Shared by the bench scripts: interleaved timing, rows of tfslurm against anchors, checks.

A :class:`Row` holds tfslurm's figure and each anchor's figure for one case, measured in
the same run; the table prints every anchor's ratio anchor / tfslurm (> 1: tfslurm is
faster or smaller), and :func:`ratio_checks` compares each ratio with the least the row
allows. Nothing here judges an absolute time.
"""

from __future__ import annotations

import gc
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType

HERE = os.path.dirname(os.path.abspath(__file__))
FLOOR = "floor"  # the anchor name of a CPython floor (no library: the least work possible)

Check = tuple[str, bool]


@dataclass
class Row:
    """One case: tfslurm's figure and each anchor's, in ``unit`` (seconds shown as ms)."""

    case: str
    ours: float | None
    anchors: dict[str, float] = field(default_factory=dict)
    unit: str = "ms"
    least: dict[str, float] = field(default_factory=dict)  # anchor -> least ratio that passes
    marks: dict[str, str] = field(default_factory=dict)  # anchor -> footnote mark
    skipped: dict[str, str] = field(default_factory=dict)  # anchor -> why it has no figure


def once(function: Callable[[], object]) -> float:
    """Seconds one call takes, with the cyclic garbage collector off (as ``timeit`` does)."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        function()
        return time.perf_counter() - start
    finally:
        if enabled:
            gc.enable()


def interleaved(
    functions: dict[str, Callable[[], object]], repeat: int, budget: float = 3.0
) -> dict[str, float]:
    """Best seconds of each function over ``repeat`` rounds (at least two), run in turns.

    Every round runs each function once, starting one further along the list each time,
    so that a change of load hits all of them alike. A function that has run twice and
    spent over ``budget`` seconds in all sits the remaining rounds out.
    """
    names = list(functions)
    best = dict.fromkeys(names, math.inf)
    spent = dict.fromkeys(names, 0.0)
    runs = dict.fromkeys(names, 0)
    for turn in range(max(repeat, 2)):
        shift = turn % len(names)
        for name in names[shift:] + names[:shift]:
            if runs[name] >= 2 and spent[name] > budget:
                continue
            elapsed = once(functions[name])
            best[name] = min(best[name], elapsed)
            spent[name] += elapsed
            runs[name] += 1
    return best


def exponent(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of log(time) against log(size): 1.0 is linear growth."""
    xs = [math.log(size) for size, _ in points]
    ys = [math.log(max(seconds, 1e-9)) for _, seconds in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread


def ratio_checks(rows: Iterable[Row]) -> list[Check]:
    """One check per (row, anchor) with a least ratio: anchor / tfslurm >= least."""
    checks = []
    for row in rows:
        for anchor, least in row.least.items():
            value = row.anchors.get(anchor)
            if value is None or not row.ours:
                continue
            ratio = value / row.ours
            checks.append((f"{row.case}: {anchor} / tfslurm {ratio:.2f}x >= {least:.2f}x", ratio >= least))
    return checks


def anchor_order(rows: Iterable[Row], preferred: Sequence[str]) -> list[str]:
    """The anchors the rows use: ``preferred`` first, then the rest as met, floor last."""
    seen: list[str] = []
    for row in rows:
        seen += [a for a in [*row.anchors, *row.skipped] if a not in seen]
    order = [a for a in preferred if a in seen] + [a for a in seen if a not in preferred and a != FLOOR]
    return order + ([FLOOR] if FLOOR in seen else [])


def table(rows: Sequence[Row], preferred: Sequence[str] = ()) -> str:
    """The rows as one text table: tfslurm's figure, then each anchor's and its ratio."""
    anchors = anchor_order(rows, preferred)
    width = max([len(r.case) for r in rows] + [20]) + 2
    lines = [f"{'case':<{width}}{'tfslurm':>12}" + "".join(f"{a:>24}" for a in anchors)]
    for row in rows:
        scale = 1000.0 if row.unit == "ms" else 1.0
        mine = "-" if row.ours is None else f"{row.ours * scale:.2f} {row.unit}"
        cells = []
        for anchor in anchors:
            value = row.anchors.get(anchor)
            if value is None:
                cells.append(f"{'skipped' if anchor in row.skipped else '-':>24}")
                continue
            ratio = f"({value / row.ours:6.2f}x)" if row.ours else " " * 9
            mark = row.marks.get(anchor, " ")
            cells.append(f"{value * scale:10.2f} {row.unit:<3} {ratio}{mark}")
        lines.append(f"{row.case:<{width}}{mine:>12}" + "".join(cells))
    return "\n".join(lines)


def report(
    rows: Sequence[Row], anchors: Sequence[str], lines: Sequence[str], checks: Sequence[Check]
) -> bool:
    """Print the table, the notes and every check (the ratio checks of the rows first);
    True when all pass."""
    print(table(rows, anchors))
    print("(ratio = anchor / tfslurm: > 1 means tfslurm is faster or smaller)")
    print("\n".join(lines))
    return print_checks([*ratio_checks(rows), *checks])


def print_checks(checks: Sequence[Check]) -> bool:
    """Print PASS/MISS per check; True when all pass."""
    for label, ok in checks:
        print(f"{'PASS' if ok else 'MISS'}  {label}")
    missed = sum(not ok for _, ok in checks)
    print(f"{len(checks) - missed} of {len(checks)} checks pass" + (f", {missed} missed" if missed else ""))
    return not missed


def load(name: str) -> ModuleType:
    """Import ``bench/<name>.py`` as module ``bench_<name>`` (its own name may be taken:
    ``hostlist`` is python-hostlist's)."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)  # for the scripts' own `import measure`
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(HERE, f"{name}.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
