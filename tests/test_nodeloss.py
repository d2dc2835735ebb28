"""What ``tfslurm supervise`` decides after a failed step, and its one-line errors for bad
settings (the runs on a real cluster: tests/test_nodeloss_cluster.py)."""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from conftest import tfslurm_cli
from tfslurm.errors import ControllerError, NodeLossError
from tfslurm.runtime.jobend import drop_silent, nodes_kept
from tfslurm.runtime.nodeloss import (
    BatchJob,
    Decision,
    Placement,
    Recovery,
    RecoverySettings,
    after_failure,
    first_placement,
    short_of_spares,
    shrink_line,
)
from tfslurm.runtime.probe import Prober, answers, probe_due, silent_nodes, slurmd_port
from tfslurm.runtime.supervisor import Supervisor

# Uses nothing of the installed Slurm (fake sruns, recorded or written environments).
pytestmark = pytest.mark.pure

NO_KILL = BatchJob(job_id=7, ntasks=None, ntasks_per_node=None, no_kill=True)
NODES = ("n1", "n2", "n3", "n4")


def parse(job: BatchJob = NO_KILL, **settings: str) -> Recovery:
    return Recovery.parse(RecoverySettings(**settings), job)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"spares": "-1"}, "TFSLURM_SPARE_NODES='-1': expected an integer >= 0"),
        ({"spares": "two"}, "TFSLURM_SPARE_NODES='two': expected an integer >= 0"),
        ({"on_node_loss": "pray"}, "TFSLURM_ON_NODE_LOSS='pray': expected requeue or shrink"),
        ({"step_restarts": "1.5"}, "TFSLURM_STEP_RESTARTS='1.5': expected an integer >= 0"),
        ({"heartbeat": "0"}, "TFSLURM_HEARTBEAT_TIMEOUT='0': expected a positive number of seconds"),
        ({"heartbeat": "inf"}, "TFSLURM_HEARTBEAT_TIMEOUT='inf': expected a positive number of seconds"),
    ],
)
def test_bad_setting_is_one_line_naming_it(settings, message):
    with pytest.raises(NodeLossError) as raised:
        parse(**settings)
    assert str(raised.value) == message


def test_bad_step_line_pattern_names_the_variable():
    with pytest.raises(NodeLossError, match=r"^TFSLURM_STEP_LINE='\(' is not a regular expression: "):
        parse(step_line="(")


@pytest.mark.parametrize("settings", [{"spares": "1"}, {"on_node_loss": "shrink"}])
def test_spares_or_shrink_without_no_kill_is_an_error(settings):
    job = BatchJob(job_id=7, ntasks=None, ntasks_per_node=None, no_kill=False)
    with pytest.raises(NodeLossError, match=r"needs a job that keeps its allocation when a node fails: submit with "
                       r"SBATCH_NO_KILL=set sbatch"):  # fmt: skip
        parse(job, **settings)


def test_defaults_relaunch_nothing_and_recovery_allows_three():
    assert parse() == Recovery(0, False, 0, None)
    assert parse(spares="1") == Recovery(1, False, 3, None)
    assert parse(spares="1", step_restarts="0").restarts == 0
    assert parse(on_node_loss=" Shrink ", heartbeat="30").heartbeat == 30.0
    assert parse(heartbeat="30").restarts == 3


def test_more_spares_than_nodes_is_an_error():
    with pytest.raises(NodeLossError) as raised:
        first_placement(parse(spares="4"), NODES, NODES, NO_KILL)
    assert str(raised.value) == (
        "TFSLURM_SPARE_NODES=4 leaves no node to train on: the job has 4 usable node(s); "
        "ask for more nodes (sbatch --nodes=8) or fewer spares"
    )


def test_training_nodes_are_the_first_usable_ones():
    assert first_placement(parse(spares="1"), NODES, ("n1", "n3", "n4"), NO_KILL) == Placement(("n1", "n3"))
    per_node = BatchJob(job_id=7, ntasks=8, ntasks_per_node=2, no_kill=True)
    assert first_placement(parse(spares="1"), NODES, NODES, per_node) == Placement(("n1", "n2", "n3"), 6)
    total = BatchJob(job_id=7, ntasks=8, ntasks_per_node=None, no_kill=True)
    assert first_placement(parse(spares="2"), NODES, NODES, total) == Placement(("n1", "n2"), 4)


def test_lost_node_is_replaced_by_the_first_spare():
    step = Placement(("n1", "n2", "n3"))
    after = after_failure(parse(spares="1"), step, ("n1", "n3", "n4"), ("n1", "n3", "n4"), 137, 3)
    assert after == Decision(
        "relaunch",
        Placement(("n1", "n3", "n4")),
        ("n2",),
        "node n2 lost (step exit 137): relaunching on n1,n3,n4 (spare n4 in; 0 spare(s) left)",
    )


def test_a_down_spare_is_not_taken_and_no_spare_means_requeue():
    step = Placement(("n1", "n2"))
    after = after_failure(parse(spares="2"), step, NODES, ("n1", "n4"), 137, 3)
    assert after.placement == Placement(("n1", "n4")) and after.lost == ("n2",)
    after = after_failure(parse(spares="1"), step, ("n1", "n3"), ("n1",), 137, 3)
    assert after == Decision(
        "requeue", None, ("n2",), "node n2 lost (step exit 137), no spare node left: requeueing the job"
    )


def test_shrink_keeps_the_tasks_per_node_and_says_the_batch():
    step = Placement(("n1", "n2", "n3"), 6)
    after = after_failure(parse(on_node_loss="shrink"), step, ("n1", "n3"), ("n1", "n3"), 137, 3)
    assert after.placement == Placement(("n1", "n3"), 4)
    assert after.placement is not None
    assert (
        shrink_line(step, after.placement, 32)
        == "shrinking: workers 6 -> 4 on nodes 3 -> 2, global batch 192 -> 128"
    )


def test_cap_reached_fails_and_a_process_failure_reruns_the_same_nodes():
    step = Placement(("n1", "n2"))
    capped = after_failure(parse(spares="1", step_restarts="1"), step, ("n1", "n3"), ("n1", "n3"), 137, 0)
    assert capped.action == "fail" and capped.line == (
        "node n2 lost (step exit 137): restart cap reached (1 relaunches in this allocation, "
        "TFSLURM_STEP_RESTARTS): giving up"
    )
    again = after_failure(parse(step_restarts="2"), step, NODES, NODES, 1, 2)
    assert again == Decision(
        "relaunch", step, (), "step failed (exit 1): running it again in this allocation (1 more)"
    )
    assert after_failure(parse(), step, NODES, NODES, 1, 0) == Decision("fail", None, (), "")


def test_cli_spares_without_no_kill_fails_in_one_line():
    done = tfslurm_cli(
        "supervise", "--", "srun", "true", env={"SLURM_JOB_ID": "7", "TFSLURM_SPARE_NODES": "1"}
    )
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "tfslurm supervise: error: TFSLURM_SPARE_NODES=1 needs a job that keeps its allocation"
    ), done.stderr


# An srun that takes two SIGINTs as one interrupt, as a busy srun does when the second comes
# before it handled the first: it ends only at a third. Left alone it gives up after 20 s.
DEAF_SRUN = """
import signal, sys, time
count = 0
def interrupted(signum, frame):
    global count
    count += 1
    if count >= 3:
        sys.exit(130)
signal.signal(signal.SIGINT, interrupted)
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    time.sleep(0.05)
sys.exit(3)
"""


def test_stuck_step_is_interrupted_again_until_srun_exits(tmp_path: Path) -> None:
    fake = tmp_path / "srun.py"
    fake.write_text(DEAF_SRUN)
    out = io.StringIO()
    supervisor = Supervisor(
        [sys.executable, str(fake)], Recovery(heartbeat=1.0), lambda: ((), ()), os.environ, out=out
    )
    started = time.monotonic()
    assert supervisor.launch(None) == 130
    assert time.monotonic() - started < 10
    assert out.getvalue() == (
        "tfslurm: no step line for 1 s (TFSLURM_HEARTBEAT_TIMEOUT): ending the stuck step\n"
    )


def test_settings_come_from_the_environment_by_name():
    env = {"TFSLURM_SPARE_NODES": "2", "TFSLURM_ON_NODE_LOSS": "", "TFSLURM_STEP_LINE": "x"}
    assert RecoverySettings.from_environ(env) == RecoverySettings(spares="2", step_line="x")


def test_requeue_without_a_job_is_a_usage_error():
    done = tfslurm_cli("requeue", env={})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "tfslurm requeue: error: not in a Slurm job and no JOB given: nothing to requeue\n"


# ---------------------------------------------------------------- a node that goes silent
def test_a_node_is_silent_only_when_no_try_answered_and_another_node_did():
    assert silent_nodes({"n1": [True], "n2": [False, False], "n3": [False, True]}) == ("n2",)
    assert silent_nodes({"n1": [False, False], "n2": [False, False]}) == ()  # the prober is cut off
    assert silent_nodes({"n1": [True], "n2": [True]}) == ()
    assert silent_nodes({}) == ()


def test_probes_come_with_trouble_or_a_quiet_step_never_in_start_up():
    def due(now: float, last_line: float | None, trouble: bool = False, probed: float | None = None) -> bool:
        return probe_due(now, last_line, trouble, probed, quiet=3.0, every=3.0)

    assert not due(100.0, None)  # start-up: no step line yet, however long it takes
    assert due(100.0, None, trouble=True)  # srun reported a task's failure
    assert not due(102.9, 100.0) and due(103.0, 100.0)
    assert not due(104.0, 100.0, probed=102.0) and due(105.0, 100.0, probed=102.0)
    assert not due(104.0, 100.0, trouble=True, probed=102.0)  # a slow save: once every 3 s


def test_slurmd_port_comes_from_slurm_conf():
    assert slurmd_port("ClusterName=x\nslurmdport = 7123  # ours\nSlurmctldPort=6817\n") == 7123
    assert slurmd_port("SlurmctldPort=6817\n") == slurmd_port(None) == 6818
    assert slurmd_port("SlurmdPort=99999\n") == 6818


def test_a_closed_port_answers_an_unknown_host_does_not(tmp_path: Path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: the kernel refuses
        assert answers("127.0.0.1", port, 1.0)
        assert Prober(port, timeout=0.5).replies(["127.0.0.1", "no-such-host.invalid"]) == {
            "127.0.0.1": [True],
            "no-such-host.invalid": [False, False],
        }


class FakeProber(Prober):
    """A prober whose answers the test gives: the nodes in ``silent`` never answer."""

    __slots__ = ("asked", "quiet_nodes")

    def __init__(self, silent: tuple[str, ...]) -> None:
        super().__init__(6818, timeout=0.1, tries=2, quiet=1.0, every=1.0)
        self.quiet_nodes = silent
        self.asked: list[tuple[str, ...]] = []

    def replies(self, nodes: Sequence[str]) -> dict[str, list[bool]]:
        self.asked.append(tuple(nodes))
        return {n: [False, False] if n in self.quiet_nodes else [True] for n in nodes}


# An srun whose task on the silent node never ends: it prints two step lines, then waits;
# SIGINTs do not end it (it waits for the silent node), only a SIGKILL does.
HANGING_SRUN = """
import signal
signal.signal(signal.SIGINT, lambda *a: print("srun: interrupt", flush=True))
print("step 1/9", flush=True)
print("step 2/9", flush=True)
while True:
    signal.pause()
"""


def test_the_silent_nodes_are_dropped_from_the_job_while_others_remain():
    assert nodes_kept(NODES, ("n2",)) == ("n1", "n3", "n4")
    assert nodes_kept(NODES, ("n2", "n4")) == ("n1", "n3")
    assert nodes_kept(("n1", "n3", "n4"), ("n2",)) is None  # already out of the job
    assert nodes_kept(("n1",), ("n1",)) is None  # a job keeps one node at least


def hanging_srun(tmp_path: Path) -> Path:
    fake = tmp_path / "srun"  # an executable: the supervisor puts -N, -w after its name
    fake.write_text(f"#!{sys.executable}\n{HANGING_SRUN}")
    fake.chmod(0o755)
    return fake


def test_a_silent_node_ends_the_step_and_stays_out(tmp_path: Path) -> None:
    fake = hanging_srun(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    views = [NODES, NODES]  # the controller lists n2 up all along
    prober = FakeProber(("n2",))
    kept: list[tuple[str, ...]] = []
    supervisor = Supervisor(
        [str(fake)], parse(spares="1"), lambda: (views[0], views[0]), os.environ,
        job=NO_KILL, out=out, err=err, prober=prober, drop=lambda nodes: kept.append(tuple(nodes)),
    )  # fmt: skip
    placement = supervisor.place()
    started = time.monotonic()
    assert supervisor.launch(placement) == 137  # killed, not waited for
    assert time.monotonic() - started < 5
    assert prober.asked == [("n1", "n2", "n3", "n4")]
    assert kept == []  # left in the job until the training is over and Slurm flags it
    lines = [line for line in out.getvalue().splitlines() if line.startswith("tfslurm:")]
    assert re.fullmatch(
        r"tfslurm: node n2 silent: no answer from its slurmd \(slurmd port 6818, 2 tries of 0.1 s\), "
        r"1\.\d s without a step line; ending the step without waiting for it \(at [\d.]+\)",
        lines[-1],
    ), lines
    decision = supervisor.decide(placement, 137, 3)
    assert (
        decision.line
        == "node n2 lost (step exit 137): relaunching on n1,n3,n4 (spare n4 in; 0 spare(s) left)"
    )
    assert supervisor.place().nodes == ("n1", "n3")  # never picked again in this allocation


def flagged_after(polls: int) -> tuple[list[float], Callable[[], tuple[tuple[str, ...], tuple[str, ...]]]]:
    """A controller that lists n2 up for the first ``polls`` answers, then NOT_RESPONDING."""
    slept: list[float] = []

    def ask() -> tuple[tuple[str, ...], tuple[str, ...]]:
        return NODES, NODES if len(slept) < polls else ("n1", "n3", "n4")

    return slept, ask


@pytest.mark.parametrize("polls", [0, 3])
def test_a_silent_node_leaves_the_job_once_slurm_lists_it_unusable(polls: int) -> None:
    slept, ask = flagged_after(polls)
    kept: list[tuple[str, ...]] = []
    line = drop_silent(ask, lambda nodes: kept.append(tuple(nodes)), ("n2",), 7, sleep=slept.append)
    assert len(slept) == polls and kept == [("n1", "n3", "n4")]
    assert line == (
        "node n2 dropped from job 7 (scontrol update NodeList=n[1,3-4]): "
        "the job can end without waiting for Slurm to set it DOWN"
    )


def test_a_silent_node_slurm_still_lists_up_stays_in_the_job() -> None:
    """Dropped while listed up, it would go back to Slurm's pool as idle: the next job
    given it would hang."""
    slept, ask = flagged_after(1000)
    kept: list[tuple[str, ...]] = []
    line = drop_silent(ask, lambda nodes: kept.append(tuple(nodes)), ("n2",), 7, sleep=slept.append)
    assert kept == [] and len(slept) == 25
    assert line == (
        "node n2 still listed up by Slurm 25 s on: kept in job 7 so that no other job is given it; "
        "the job ends when Slurm sets it DOWN"
    )


def test_a_refused_drop_is_one_warning() -> None:
    def refuse(nodes: Sequence[str]) -> None:
        raise ControllerError("scontrol update failed (exit 1): Access/permission denied")

    slept, ask = flagged_after(0)
    assert drop_silent(ask, refuse, ("n2",), 7, sleep=slept.append) == (
        "warning: could not drop the silent node(s) from job 7: scontrol update failed "
        "(exit 1): Access/permission denied; the job ends when Slurm sets them DOWN"
    )


def test_without_a_prober_nothing_is_probed_and_errors_pass_untouched(tmp_path: Path) -> None:
    fake = tmp_path / "srun.py"
    fake.write_text(
        "import sys; print('srun: error: node2: task 1: Exited with exit code 1', file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from tfslurm.runtime.nodeloss import Recovery; from tfslurm.runtime.supervisor import Supervisor; "
         f"sys.exit(Supervisor([sys.executable, {str(fake)!r}], Recovery(), lambda: ((), ()), {{}}).launch(None))"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "srun: error: node2: task 1: Exited with exit code 1\n"


def test_a_relaunch_short_of_nodes_asks_again_for_a_spare_not_usable_yet() -> None:
    """The spare is listed NOT_RESPONDING (a loaded slurmd missed Slurm's ping) when the
    step fails: the supervisor asks again rather than requeue at once, and takes it."""
    answers_ = [(("n1", "n3"), ("n1",)), (("n1", "n3"), ("n1",)), (("n1", "n3"), ("n1", "n3"))]
    asked: list[float] = []

    def ask() -> tuple[tuple[str, ...], tuple[str, ...]]:
        asked.append(time.monotonic())
        return answers_[min(len(asked) - 1, len(answers_) - 1)]

    out = io.StringIO()
    supervisor = Supervisor(["srun"], parse(spares="1"), ask, {}, job=NO_KILL, out=out)
    decision = supervisor.decide(Placement(("n1", "n2")), 1, 3)
    assert decision.action == "relaunch" and decision.placement == Placement(("n1", "n3")), decision
    assert len(asked) == 3 and asked[-1] - asked[0] >= 1.9
    assert out.getvalue().splitlines()[0] == (
        "tfslurm: node n3 of the job not usable now: asking the controller again for up to 15 s "
        "before giving up on it"
    )


@pytest.mark.parametrize(
    ("job_nodes", "usable", "dead", "expected"),
    [
        (("n1", "n3"), ("n1",), (), ["n3"]),  # the spare not usable: ask again
        (("n1", "n3"), ("n1",), ("n3",), []),  # found silent: never again
        (("n1", "n3"), ("n1", "n3"), (), []),  # the spare is in: nothing to wait for
        (("n1",), ("n1",), (), []),  # no node outside the step: nothing to wait for
    ],
)
def test_short_of_spares_names_only_nodes_worth_asking_about(
    job_nodes: tuple[str, ...], usable: tuple[str, ...], dead: tuple[str, ...], expected: list[str]
) -> None:
    placement = Placement(("n1", "n2"))
    decision = after_failure(parse(spares="1"), placement, job_nodes, usable, 1, 3)
    assert short_of_spares(decision, placement, job_nodes, usable, dead) == expected


def test_a_silent_node_slurm_took_out_itself_is_said_in_one_line() -> None:
    kept: list[tuple[str, ...]] = []
    line = drop_silent(lambda: (("n1", "n3"), ("n1", "n3")), lambda n: kept.append(tuple(n)), ("n2",), 7)
    assert kept == []
    assert line == "node n2 no longer in job 7 (Slurm took it out): the job can end with its script"
