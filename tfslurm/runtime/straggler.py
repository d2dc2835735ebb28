"""A straggler: a rank whose own work in each step takes clearly longer than the others'.

In synchronous training (MWMS) every rank waits in the gradients' all-reduce for the slowest,
so the time between two steps is the same on every rank and tells nothing. What differs is
each rank's own part of the step, before it waits: its input pipeline, its host-side work.
The program marks that part with ``ctx.own_time()``; the beacon adds up the marked time
and sends it with the step's datagram (:mod:`tfslurm.runtime.progress`), two clock reads
per section and nothing more. The supervisor keeps each step's own times by rank
(:class:`OwnTimes`) and names a rank whose own time, over the last :data:`STRAGGLER_STEPS`
steps that every rank reported, was at least :data:`STRAGGLER_RATIO` times the median of
the other ranks' in the median step (:func:`stragglers`): a few steps of noise either way
(a page-cache miss, a garbage collection, a loaded core) neither make a straggler nor
hide one. A program that marks nothing reports no own time, and no rank is ever named.
"""

from __future__ import annotations

import bisect
import statistics
from typing import TYPE_CHECKING

from tfslurm.value import Value

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Final

#: How much longer than the other ranks' median a straggler's own time is, in its median step.
STRAGGLER_RATIO = 1.2
#: The steps a rank's ratio is the median over: a slow phase of a few steps is not a slow node.
STRAGGLER_STEPS = 50
#: Step numbers kept: enough for the last :data:`STRAGGLER_STEPS` complete ones while the
#: latest steps' reports are still coming in.
STEPS_KEPT = STRAGGLER_STEPS + 20


class OwnTimes:
    """Each rank's own seconds per step number, for the latest :data:`STEPS_KEPT` steps
    (not thread-safe: the progress board holds it under its lock)."""

    __slots__ = ("_steps", "newest")

    def __init__(self) -> None:
        self._steps: dict[int, dict[int, float]] = {}
        #: The highest step number heard of (None: none yet): the table changes in a way
        #: that can name a new straggler only when it moves on.
        self.newest: int | None = None

    def add(self, rank: int, step: int, seconds: float) -> None:
        self._steps.setdefault(step, {})[rank] = seconds
        if self.newest is None or step > self.newest:
            self.newest = step
        while len(self._steps) > STEPS_KEPT:
            del self._steps[min(self._steps)]

    def table(self) -> dict[int, dict[int, float]]:
        """A copy: step -> rank -> own seconds."""
        return {step: dict(row) for step, row in self._steps.items()}


class Straggler(Value):
    """A rank found slow: its own seconds per step and the others' (medians over the
    steps that found it), the median of its per-step ratios, and the last of those steps."""

    __slots__ = ("others", "own", "rank", "ratio", "step")
    __match_args__ = ("rank", "own", "others", "ratio", "step")

    def __init__(self, rank: int, own: float, others: float, ratio: float, step: int) -> None:
        self.rank: Final = rank
        self.own: Final = own
        self.others: Final = others
        self.ratio: Final = ratio
        self.step: Final = step


def stragglers(table: Mapping[int, Mapping[int, float]]) -> list[Straggler]:
    """The ranks of ``table`` (step -> rank -> own seconds) whose own time over the last
    :data:`STRAGGLER_STEPS` steps reported by every rank was, in the median step, at least
    :data:`STRAGGLER_RATIO` times the median of the other ranks'; by rank."""
    if not table:
        return []
    ranks = max(len(row) for row in table.values())
    if ranks < 2:
        return []
    steps = [step for step in sorted(table) if len(table[step]) == ranks][-STRAGGLER_STEPS:]
    if len(steps) < STRAGGLER_STEPS:
        return []
    ordered = [sorted(table[step].values()) for step in steps]  # once a step, not once a rank
    found = []
    for rank in sorted(table[steps[-1]]):
        if any(rank not in table[step] for step in steps):
            continue
        own = [table[step][rank] for step in steps]
        others = [_median_without(values, mine) for values, mine in zip(ordered, own, strict=True)]
        if min(others) <= 0:  # a step with nothing marked on the others: no measure
            continue
        ratio = statistics.median(mine / rest for mine, rest in zip(own, others, strict=True))
        if ratio >= STRAGGLER_RATIO:
            found.append(Straggler(rank, statistics.median(own), statistics.median(others), ratio, steps[-1]))
    return found


def _median_without(values: list[float], value: float) -> float:
    """The median of sorted ``values`` less one occurrence of ``value`` (one of them), as
    :func:`statistics.median` gives it, without building the shorter list: at many ranks
    the supervisor asks this of every rank in every step it looks at."""
    gone = bisect.bisect_left(values, value)  # any equal value leaves the same others

    def kept(i: int) -> float:  # the i-th of the values left
        return values[i] if i < gone else values[i + 1]

    left = len(values) - 1
    middle = left // 2
    return kept(middle) if left % 2 else (kept(middle - 1) + kept(middle)) / 2
