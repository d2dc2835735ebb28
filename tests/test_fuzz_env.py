"""A short run of the hostile-environment fuzz target (tests/fuzz_env.py; run it at length
with ``python tests/fuzz_env.py --inputs 100000``)."""

from __future__ import annotations

import pytest

import fuzz_env

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure


def test_hostile_environments_give_plans_or_one_line_errors() -> None:
    lines: list[str] = []
    outcomes = fuzz_env.run(400, seed=0, report=lines.append)
    violations = [kind for kind in outcomes if kind.startswith("VIOLATION")]
    assert not violations, "\n".join(lines)
    assert sum(outcomes.values()) >= 400
    assert outcomes["ok"] > 0  # the recorded bases still make plans: the target reaches plan_for
    assert len(outcomes) > 3  # and hostile values reach several different checks
