"""A short run of the hostlist fuzz target (tests/fuzz_hostlist.py; run it at length with
``python tests/fuzz_hostlist.py --inputs 1000000``)."""

from __future__ import annotations

import pytest

import fuzz_hostlist

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure


def test_hostlist_inputs_give_answers_or_one_line_errors() -> None:
    lines: list[str] = []
    summary = fuzz_hostlist.run(3000, seed=0, report=lines.append)
    assert summary["crashes"] == 0, "\n".join(lines)
    assert summary["round_trip_failures"] == 0, "\n".join(lines)
    assert summary["over_limit"] == 0, "\n".join(lines)
    outcomes = summary["outcomes"]
    assert isinstance(outcomes, dict)
    assert outcomes["ok"] > 1000 and outcomes["HostlistError"] > 300  # both sides reached


def test_time_bound_is_one_second_to_bound_size_then_linear() -> None:
    assert fuzz_hostlist.cpu_bound(0) == fuzz_hostlist.MAX_SECONDS == 1.0
    assert fuzz_hostlist.cpu_bound(fuzz_hostlist.TIME_BOUND_HOSTS) == 1.0
    assert fuzz_hostlist.cpu_bound(300_000) == 3.0
