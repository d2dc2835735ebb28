"""tfslurm.value's helpers: ``cached`` derived values and ``one_of`` for named cases."""

from __future__ import annotations

import pytest

from tfslurm.layout import DISTRIBUTIONS
from tfslurm.value import Value, cached, one_of

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure


class _Counted(Value):
    __match_args__ = ("base",)
    __slots__ = ("__dict__", "base", "calls")

    def __init__(self, base: int) -> None:
        self.base = base
        self.calls = 0

    @cached
    def doubled(self) -> int:
        self.calls += 1
        return 2 * self.base


def test_a_cached_value_is_made_once_and_kept_in_the_instance() -> None:
    value = _Counted(21)
    assert "doubled" not in value.__dict__
    assert (value.doubled, value.doubled, value.calls) == (42, 42, 1)
    assert value.__dict__ == {"doubled": 42}
    assert _Counted(21) == value and _Counted(1).doubled == 2  # the cache is not identity


def test_one_of_gives_the_named_case_or_none() -> None:
    assert one_of("plane", DISTRIBUTIONS) == "plane"
    for given in ("Plane", "plane ", "", None, 3, ("plane",)):
        assert one_of(given, DISTRIBUTIONS) is None
