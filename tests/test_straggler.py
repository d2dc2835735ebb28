"""A straggler: which rank's own time per step makes it one, how the own times are kept,
how a program marks them (over real UDP to a real board), and TFSLURM_STRAGGLER."""

from __future__ import annotations

import io
import re
import signal
import statistics
import subprocess
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfslurm.errors import NodeLossError
from tfslurm.runtime import straggler
from tfslurm.runtime.nodeloss import BatchJob, Recovery, RecoverySettings
from tfslurm.runtime.progress import Beacon, ProgressBoard, ProgressTarget
from tfslurm.runtime.straggler import (
    STEPS_KEPT,
    STRAGGLER_RATIO,
    STRAGGLER_STEPS,
    OwnTimes,
    Straggler,
    stragglers,
)
from tfslurm.runtime.supervisor import Supervisor

pytestmark = pytest.mark.pure


def table(steps, own):
    """step -> rank -> seconds, ``own(step, rank)`` for 3 ranks over ``steps``."""
    return {s: {r: own(s, r) for r in range(3)} for s in steps}


def test_a_rank_slower_by_the_ratio_in_each_of_the_last_steps_is_named():
    found = stragglers(table(range(1, 61), lambda s, r: 0.015 if r == 1 else 0.010))
    assert found == [Straggler(1, 0.015, 0.010, pytest.approx(1.5), 60)]


def test_too_few_steps_name_no_one():
    assert stragglers(table(range(1, STRAGGLER_STEPS), lambda s, r: 0.05 if r == 1 else 0.01)) == []


def test_a_few_noisy_steps_neither_make_nor_hide_a_straggler():
    """The median step decides: rank 1 slow in 20 of the last 50 steps is not named; slow
    in 45 of them (5 steps of noise) it is."""
    sometimes = table(range(1, 51), lambda s, r: 0.03 if r == 1 and s % 5 in (1, 2) else 0.010)
    mostly = table(range(1, 51), lambda s, r: 0.015 if r == 1 and s % 10 else 0.010)
    assert stragglers(sometimes) == []
    assert [s.rank for s in stragglers(mostly)] == [1]


def test_just_under_the_ratio_is_not_a_straggler_and_at_it_is():
    under = table(range(1, 61), lambda s, r: 0.010 * STRAGGLER_RATIO * 0.999 if r == 2 else 0.010)
    at = table(range(1, 61), lambda s, r: 0.010 * STRAGGLER_RATIO if r == 2 else 0.010)
    assert stragglers(under) == []
    assert [s.rank for s in stragglers(at)] == [2]


def test_the_latest_step_still_coming_in_is_left_aside():
    """Step 61's reports are not all in: the last complete steps decide."""
    times = table(range(1, 61), lambda s, r: 0.02 if r == 0 else 0.01)
    times[61] = {0: 0.01}
    assert [s.rank for s in stragglers(times)] == [0]


def test_two_ranks_compare_with_each_other_and_one_rank_with_no_one():
    two = {s: {0: 0.01, 1: 0.013} for s in range(1, 51)}
    assert [s.rank for s in stragglers(two)] == [1]
    assert stragglers({s: {0: 0.05} for s in range(1, 51)}) == []


def test_no_own_time_marked_names_no_one():
    assert stragglers(table(range(1, 61), lambda s, r: 0.0)) == []
    assert stragglers({}) == []


@given(st.lists(st.floats(0.001, 1.0), min_size=3, max_size=3))
def test_a_rank_is_named_exactly_when_it_is_that_slow(base):
    """Constant own times per rank: named exactly the ranks at or past the ratio."""
    times = table(range(STRAGGLER_STEPS), lambda s, r: base[r])
    others = {r: [base[o] for o in range(3) if o != r] for r in range(3)}
    expected = [r for r in range(3) if base[r] >= STRAGGLER_RATIO * (sum(others[r]) / 2)]
    assert [s.rank for s in stragglers(times)] == expected


@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=40), st.data())
def test_the_others_median_is_the_median_of_the_list_without_the_rank(values, data):
    mine = data.draw(st.sampled_from(values))
    others = list(values)
    others.remove(mine)
    assert straggler._median_without(sorted(values), mine) == statistics.median(others)


def test_own_times_keep_the_latest_steps():
    own = OwnTimes()
    for step in range(1, 201):
        own.add(0, step, 0.01)
        own.add(1, step, 0.02)
    kept = own.table()
    assert sorted(kept) == list(range(201 - STEPS_KEPT, 201))
    assert kept[200] == {0: 0.01, 1: 0.02}


def test_a_program_s_own_time_reaches_the_board_with_its_step():
    board = ProgressBoard()
    board.next_launch()
    beacon = Beacon(ProgressTarget.parse(board.address("127.0.0.1")), 2, "worker:2", "node3")
    with beacon.own_time():
        time.sleep(0.02)
    with beacon.own_time():  # two blocks in one step add up
        time.sleep(0.01)
    beacon.step(7)
    beacon.step(8)  # nothing marked: no own time for step 8
    deadline = time.monotonic() + 10
    while 7 not in board.own_times() and time.monotonic() < deadline:
        time.sleep(0.01)
    own = board.own_times()
    assert list(own) == [7] and list(own[7]) == [2]
    assert 0.03 <= own[7][2] < 0.5


def recovery(**settings):
    return Recovery.parse(RecoverySettings(**settings), BatchJob(12, None, None, no_kill=True))


def test_straggler_mode_is_read_and_replace_needs_a_spare():
    assert recovery(spares="1").replace_stragglers is False
    assert recovery(spares="1", straggler=" Replace ").replace_stragglers is True
    assert recovery(spares="1", straggler="name").replace_stragglers is False
    with pytest.raises(NodeLossError, match=r"^TFSLURM_STRAGGLER='swap': expected name or replace$"):
        recovery(spares="1", straggler="swap")
    with pytest.raises(NodeLossError, match=r"^TFSLURM_STRAGGLER=replace swaps .* set TFSLURM_SPARE_NODES"):
        recovery(straggler="replace")


def test_the_variable_is_read_at_the_entry():
    env = {"TFSLURM_STRAGGLER": "replace", "TFSLURM_SPARE_NODES": "1"}
    assert RecoverySettings.from_environ(env) == RecoverySettings(spares="1", straggler="replace")


def supervisor_with_a_straggler(recovery, ask):
    """A supervisor whose board has heard 60 steps of 3 ranks, the one on node2 1.5 times
    slower in its own time, and what it says."""
    board = ProgressBoard()
    board.next_launch()
    for step in range(1, 61):
        for rank, node in enumerate(("node1", "node2", "node3")):
            own = 15000 if node == "node2" else 10000
            board.record(f"step 1 {rank} worker:{rank} {node} {step} {own}".encode(), float(step))
    out = io.StringIO()
    supervisor = Supervisor(["srun", "true"], recovery, ask, {}, out=out, board=board)
    return supervisor, out


def test_by_default_a_straggler_is_named_once_and_the_step_goes_on():
    supervisor, out = supervisor_with_a_straggler(Recovery(), lambda: ((), ()))
    with subprocess.Popen(["sleep", "30"]) as step:
        supervisor._straggling(step, ("node1", "node2", "node3"))
        supervisor._straggling(step, ("node1", "node2", "node3"))
        assert step.poll() is None
        step.kill()
    assert re.fullmatch(
        r"tfslurm: rank 1 \(worker:1 on node2\) straggles: 15\.0 ms of its own work a step, 1\.50x the "
        r"others' 10\.0 ms, over the last 50 steps \(to step 60\) \(at [\d.]+\)\n",
        out.getvalue(),
    ), out.getvalue()


def test_replace_stops_the_step_with_the_preemption_signal_when_a_spare_is_free():
    nodes = ("node1", "node2", "node3", "node4")
    replace = Recovery(spares=1, restarts=3, replace_stragglers=True)
    supervisor, out = supervisor_with_a_straggler(replace, lambda: (nodes, nodes))
    with subprocess.Popen(["sleep", "30"]) as step:
        supervisor._straggling(step, nodes[:3])
        assert step.wait(timeout=10) == -signal.SIGUSR1
    assert out.getvalue().endswith(
        ": TFSLURM_STRAGGLER=replace: stopping the step at a checkpoint, node node2 left out for a spare"
        + out.getvalue()[out.getvalue().rindex(" (at ") :]
    )
    assert supervisor._view() == (nodes, ("node1", "node3", "node4"))  # node2 left out


def test_replace_without_a_free_spare_names_it_and_goes_on():
    nodes = ("node1", "node2", "node3", "node4")
    replace = Recovery(spares=1, restarts=3, replace_stragglers=True)
    supervisor, out = supervisor_with_a_straggler(replace, lambda: (nodes, nodes[:3]))
    with subprocess.Popen(["sleep", "30"]) as step:
        supervisor._straggling(step, nodes[:3])
        assert step.poll() is None
        step.kill()
    assert ": TFSLURM_STRAGGLER=replace, but no spare node is free: training goes on (at " in out.getvalue()
