"""A straggler: a rank whose own work in each step takes clearly longer than the others'.

In synchronous training (MWMS) every rank waits in the gradients' all-reduce for the slowest,
so the time between two steps is the same on every rank and tells nothing. What differs is
each rank's own part of the step, before it waits: its input pipeline, its host-side work.
The program marks that part with ``ctx.own_time()``; the beacon adds up the marked time
and sends it with the step's datagram (:mod:`tfslurm.runtime.progress`), two clock reads
per section and nothing more. The supervisor keeps each step's own times by rank
(:class:`OwnTimes`) and names a rank whose own time was at least :data:`STRAGGLER_RATIO`
times the median of the other ranks' in each of the last :data:`STRAGGLER_STEPS` steps
that every rank reported (:func:`stragglers`). A program that marks nothing reports no own
time, and no rank is ever named.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from tfslurm.value import Value

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Final

#: How much longer than the other ranks' median a straggler's own time is, in each step.
STRAGGLER_RATIO = 1.2
#: Steps in a row a rank must be that slow to be named: a slow phase of a few steps (a
#: page-cache miss, a garbage collection) is not a slow node.
STRAGGLER_STEPS = 50
#: Step numbers kept: enough for the last :data:`STRAGGLER_STEPS` complete ones while the
#: latest steps' reports are still coming in.
STEPS_KEPT = STRAGGLER_STEPS + 20


class OwnTimes:
    """Each rank's own seconds per step number, for the latest :data:`STEPS_KEPT` steps
    (not thread-safe: the progress board holds it under its lock)."""

    __slots__ = ("_steps",)

    def __init__(self) -> None:
        self._steps: dict[int, dict[int, float]] = {}

    def add(self, rank: int, step: int, seconds: float) -> None:
        self._steps.setdefault(step, {})[rank] = seconds
        while len(self._steps) > STEPS_KEPT:
            del self._steps[min(self._steps)]

    def table(self) -> dict[int, dict[int, float]]:
        """A copy: step -> rank -> own seconds."""
        return {step: dict(row) for step, row in self._steps.items()}


class Straggler(Value):
    """A rank found slow: its own seconds per step and the others' (medians over the
    steps that found it), their ratio, and the last of those steps."""

    __slots__ = ("others", "own", "rank", "ratio", "step")
    __match_args__ = ("rank", "own", "others", "ratio", "step")

    def __init__(self, rank: int, own: float, others: float, ratio: float, step: int) -> None:
        self.rank: Final = rank
        self.own: Final = own
        self.others: Final = others
        self.ratio: Final = ratio
        self.step: Final = step


def stragglers(table: Mapping[int, Mapping[int, float]]) -> list[Straggler]:
    """The ranks of ``table`` (step -> rank -> own seconds) that were at least
    :data:`STRAGGLER_RATIO` times slower than the median of the other ranks in each of the
    last :data:`STRAGGLER_STEPS` steps reported by every rank; by rank."""
    if not table:
        return []
    ranks = max(len(row) for row in table.values())
    if ranks < 2:
        return []
    steps = [step for step in sorted(table) if len(table[step]) == ranks][-STRAGGLER_STEPS:]
    if len(steps) < STRAGGLER_STEPS:
        return []
    found = []
    for rank in sorted(table[steps[-1]]):
        own, others = [], []
        for step in steps:
            row = table[step]
            mine = row.get(rank)
            rest = statistics.median(t for r, t in row.items() if r != rank)
            if mine is None or rest <= 0 or mine < STRAGGLER_RATIO * rest:
                break
            own.append(mine)
            others.append(rest)
        else:
            slow, usual = statistics.median(own), statistics.median(others)
            found.append(Straggler(rank, slow, usual, slow / usual, steps[-1]))
    return found
