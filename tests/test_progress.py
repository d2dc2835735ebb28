"""Each rank's progress to the supervisor: the window that makes a rank hung, which ranks
are hung, the board's reading of datagrams, and a beacon's datagrams over real UDP."""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest

from conftest import tfslurm_run
from tfslurm.errors import NodeLossError
from tfslurm.runtime import progress
from tfslurm.runtime.probe import answers
from tfslurm.runtime.progress import (
    HANG_FLOOR_S,
    HANG_STEPS,
    STARTUP_S,
    Beacon,
    ProgressBoard,
    ProgressTarget,
    RankState,
    hang_window,
    hung_ranks,
    watch_reach,
)
from tfslurm.settings import PROGRESS_VARIABLE

pytestmark = pytest.mark.pure


def test_the_window_is_the_start_up_allowance_before_any_step():
    assert hang_window([]) == STARTUP_S


def test_the_window_is_steps_of_the_median_interval_with_a_floor():
    assert hang_window([0.1, 0.1, 9.0]) == HANG_FLOOR_S  # fast steps: the floor
    assert hang_window([4.0, 2.0, 90.0]) == HANG_STEPS * 4.0  # one slow step does not count


def state(rank: int, beat: float, exited: bool = False) -> RankState:
    return RankState(rank, f"worker:{rank}", f"node{rank + 1}", 7, beat, exited)


def test_a_rank_silent_while_another_beats_is_hung():
    states = {0: state(0, 99.0), 1: state(1, 90.0), 2: state(2, 98.0)}
    assert [s.rank for s in hung_ranks(states, now=100.0, window=5.0)] == [1]


def test_all_ranks_silent_is_not_a_hang():
    """The fault is then between the ranks and the supervisor (its node, the network)."""
    states = {0: state(0, 90.0), 1: state(1, 90.0)}
    assert hung_ranks(states, now=100.0, window=5.0) == []


def test_the_hang_line_says_which_ranks_report_steps():
    """A TF server (ps, PS worker) never reports a step: its line says so, and the steps the
    others are at leave it out instead of showing -1."""
    from tfslurm.runtime.supervisor import _last_step, _steps_at

    server = RankState(1, "ps:0", "node1", -1, 99.0)
    chief = RankState(0, "chief:0", "node1", 25, 99.0)
    assert (_last_step(-1), _last_step(0), _last_step(25)) == (
        "no step reported",
        "last step 0",
        "last step 25",
    )
    assert _steps_at([server, chief]) == ", at step 25"
    assert _steps_at([server, chief, state(2, 99.0)]) == ", at steps 7-25"
    assert _steps_at([server]) == ""


def test_a_rank_whose_program_ended_is_never_hung():
    states = {0: state(0, 99.0), 1: state(1, 50.0, exited=True)}
    assert hung_ranks(states, now=100.0, window=5.0) == []


def test_the_board_keeps_this_launchs_ranks_and_their_step_intervals():
    board = ProgressBoard()
    board.next_launch()
    board.record(b"step 0 1 worker:1 node2 3 0", 10.0)  # an earlier launch's process: dropped
    board.record(b"step 1 1 worker:1 node2 3 0", 10.0)
    board.record(b"step 1 1 worker:1 node2 4 2500", 10.5)
    board.record(b"beat 1 0 worker:0 node1 4 0", 10.6)
    for junk in (
        b"",
        b"step 1 x worker:1 node2 4 0",
        b"hello 1 1 w n 1 0",
        b"step 1 1 w n 0",
        b"step 1 1 w n 5 -3",
    ):
        board.record(junk, 11.0)
    states, intervals = board.snapshot()
    assert states == {
        0: RankState(0, "worker:0", "node1", 4, 10.6),
        1: RankState(1, "worker:1", "node2", 4, 10.5),
    }
    assert intervals == [0.5]
    assert board.own_times() == {4: {1: 0.0025}}  # only reports with own time marked
    board.next_launch()
    assert (
        board.snapshot() == ({}, []) and board.own_times() == {}
    )  # the next launch starts with the start-up allowance


def test_a_beacon_reaches_the_board_over_udp():
    board = ProgressBoard()
    board.next_launch()
    beacon = Beacon(ProgressTarget.parse(board.address("127.0.0.1")), 3, "worker:3", "gpu07").start()
    beacon.step(12)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        seen = board.snapshot()[0].get(3)
        if seen is not None and seen.step == 12:
            break
        time.sleep(0.01)
    assert seen is not None and (seen.task, seen.node, seen.step, seen.exited) == (
        "worker:3",
        "gpu07",
        12,
        False,
    )


@pytest.mark.parametrize("text", ["host", "host:port/1", "host:70000/1", ":5/1", "host:5/x", "host:5"])
def test_a_bad_variable_is_one_line_naming_it(text):
    with pytest.raises(NodeLossError) as raised:
        ProgressTarget.parse(text)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(
        f"{PROGRESS_VARIABLE}={text!r}: expected HOST:PORT/LAUNCH"
    )


def test_the_board_answers_a_reach_check_on_its_port():
    board = ProgressBoard()
    assert answers("127.0.0.1", board.port, progress.FENCE_EVERY_S)
    # more connections than the listen backlog: each one must be accepted and closed by the
    # board (the end of file proves it), or the queue would fill and the checks go unanswered
    for _ in range(100):
        with socket.create_connection(("127.0.0.1", board.port), timeout=10) as knock:
            assert knock.recv(1) == b""


@pytest.fixture
def silent_port():
    """A local port whose connects get no answer, as a host cut off: a listener that never
    accepts, its queue full (Linux then drops the SYNs)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        fillers = []
        while len(fillers) < 8:  # until a connect goes unanswered: the queue is full
            try:
                fillers.append(socket.create_connection(listener.getsockname(), timeout=0.5))
            except OSError:
                break
        yield listener.getsockname()[1]
        for filler in fillers:
            filler.close()


def test_a_refused_connect_is_an_answer_and_no_answer_is_not(silent_port):
    with socket.socket() as probe:  # a port nothing listens on: the kernel refuses
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    assert answers("127.0.0.1", closed, progress.FENCE_EVERY_S)
    assert not answers("127.0.0.1", silent_port, progress.FENCE_EVERY_S)


def test_cut_off_is_called_once_after_the_tries_in_a_row(monkeypatch, silent_port):
    monkeypatch.setattr(progress, "FENCE_EVERY_S", 0.05)
    calls: list[float] = []
    started = time.monotonic()
    watch_reach(ProgressTarget("127.0.0.1", silent_port, 0), calls.append)
    assert len(calls) == 1 and calls[0] >= 0 and time.monotonic() - started >= progress.FENCE_TRIES * 0.05


def test_no_cut_off_while_the_supervisor_answers(monkeypatch):
    monkeypatch.setattr(progress, "FENCE_EVERY_S", 0.05)
    board = ProgressBoard()
    calls: list[float] = []
    threading.Thread(
        target=watch_reach, args=(ProgressTarget("127.0.0.1", board.port, 0), calls.append), daemon=True
    ).start()
    deadline = time.monotonic() + 1.0  # 20 checks' time
    while time.monotonic() < deadline:
        assert calls == []
        time.sleep(0.05)


def test_tfslurm_run_cut_off_from_its_supervisor_ends_its_program(silent_port):
    """A partition seen from a node: the supervisor's port stops answering; ``tfslurm
    run`` ends its program (SIGKILL) after 3 unanswered connects, in one line."""
    started = time.monotonic()
    proc = tfslurm_run(
        "--", "python", "-c", "import signal; signal.pause()", TFSLURM_PROGRESS=f"127.0.0.1:{silent_port}/1"
    )
    _, err = proc.communicate(timeout=30)
    took = time.monotonic() - started
    assert proc.returncode == 137, err
    assert re.search(
        r"tfslurm run: worker:0: cut off from the supervisor on 127\.0\.0\.1 \(no answer for [\d.]+ s\): "
        r"ending the program, so that nothing of this step runs on\n",
        err,
    ), err
    assert took < 30, took
