"""The controller interface's command backend: parsing of what Slurm prints, and the
questions and actions on a real cluster (a --no-kill job losing a node, requeue with hold
and release, node states)."""

from __future__ import annotations

import os
import time

import pytest

from tfslurm.controller import ControllerError, JobInfo, NodeInfo, StepInfo, controller
from tfslurm.controller.commands import CommandController, parse_jobs, parse_nodes, parse_steps
from tfslurm.settings import CONTROLLER_VARIABLE, Settings

# ------------------------------------------------------------------ parsing (no Slurm)


def test_job_line_gives_nodes_expanded_and_counts():
    job = parse_jobs("2|RUNNING|node[1,3]|node1|0|None|\n", "2")
    assert job == JobInfo("2", "RUNNING", ("node1", "node3"), "node1", 0, None)


def test_pending_job_has_no_nodes_and_no_batch_host():
    job = parse_jobs("2|PENDING||n/a|1|job requeued in held state|\n", "2")
    assert job == JobInfo("2", "PENDING", (), None, 1, "job requeued in held state")


def test_a_bar_in_the_reason_does_not_shift_fields():
    job = parse_jobs("7|PENDING||n/a|0|a|b|c|\n", "7")
    assert (job.restart_count, job.reason) == (0, "a|b|c")


def test_heterogeneous_components_join_their_nodes_in_order():
    job = parse_jobs("3|RUNNING|node1|node1|0|None|\n4|RUNNING|node[3,1]|node3|0|None|\n", "3")
    assert (job.job_id, job.nodes, job.batch_host) == ("3", ("node1", "node3"), "node1")


def test_an_unknown_job_is_one_line_naming_it():
    with pytest.raises(ControllerError, match=r"^Slurm's controller does not know job 12$"):
        parse_jobs("", "12")


def test_a_garbled_answer_is_an_error_not_garbage():
    with pytest.raises(ControllerError, match="unexpected answer from Slurm"):
        parse_jobs("2|RUNNING\n", "2")
    with pytest.raises(ControllerError, match="restart count 'x' is not a number"):
        parse_jobs("2|RUNNING|n1|n1|x|None|\n", "2")


def test_steps_lines():
    assert parse_steps("2.0|node3\n2.1|node[1-2]\n2.batch|node1\n") == (
        StepInfo("2.0", ("node3",)),
        StepInfo("2.1", ("node1", "node2")),
        StepInfo("2.batch", ("node1",)),
    )


def test_node_states_flags_and_suffixes():
    nodes = parse_nodes("node1|mixed|\nnode2|down*|\nnode4|idle+drain|\nnode1|mixed|\nnode5|idle~|\n")
    assert nodes == (
        NodeInfo("node1", "MIXED"),
        NodeInfo("node2", "DOWN", frozenset({"NOT_RESPONDING"})),
        NodeInfo("node4", "IDLE", frozenset({"DRAIN"})),
        NodeInfo("node5", "IDLE", frozenset({"POWERED_DOWN"})),
    )
    assert [node.usable for node in nodes] == [True, False, False, False]


def test_backend_variable_names_the_choices():
    assert controller(Settings.from_environ({})).name == "commands"
    assert controller(Settings.from_environ({"TFSLURM_CONTROLLER": "Commands"})).name == "commands"
    with pytest.raises(
        ControllerError, match=r"^TFSLURM_CONTROLLER='slurmrestd' is not a controller backend"
    ):
        controller(Settings.from_environ({"TFSLURM_CONTROLLER": "slurmrestd"}))


def test_missing_commands_are_one_line_naming_the_command():
    ctl = CommandController({"PATH": "/nonexistent"})
    with pytest.raises(ControllerError, match=r"^squeue not found on PATH"):
        ctl.job("1")
    with pytest.raises(ControllerError, match=r"^scontrol not found on PATH"):
        ctl.requeue("1")


# ------------------------------------------------------------------ a real cluster


@pytest.fixture(scope="module")
def cluster(slurm_cluster_factory):
    return slurm_cluster_factory(num_nodes=3, gpus=0)


@pytest.fixture
def ctl(cluster, monkeypatch):
    """The commands backend; with TFSLURM_CONTROLLER=pyslurm in this session's environment,
    pyslurm (docs/pyslurm.md: how these tests ran with it on a Slurm built by hand)."""
    if os.environ.get(CONTROLLER_VARIABLE, "").strip().lower() == "pyslurm":
        monkeypatch.setenv("SLURM_CONF", cluster.slurm_conf)  # libslurm reads the process's
        chosen = controller(Settings.from_environ(), {**os.environ, **cluster.env})
        assert chosen.name == "pyslurm", "TFSLURM_CONTROLLER=pyslurm, but pyslurm cannot be used"
        return chosen
    return CommandController({**os.environ, **cluster.env})


def _until(what, check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, what
            return value
        time.sleep(0.2)


@pytest.mark.cluster
def test_no_kill_job_loses_a_down_node_drained_node_is_unusable(cluster, ctl):
    script = "#!/bin/sh\nsrun -N2 -w node1,node2 sleep 120 &\nsrun -N1 -w node3 sleep 120\n"
    job = str(cluster.sbatch(script, "--no-kill", "-N3", "-o", "/dev/null"))
    try:
        _until("two steps running", lambda: len(ctl.steps(job)) == 3)
        everyone = ("node1", "node2", "node3")
        assert ctl.job(job) == JobInfo(job, "RUNNING", everyone, "node1", 0, None)
        steps = ctl.steps(job)
        assert sorted(step.nodes for step in steps) == [("node1",), ("node1", "node2"), ("node3",)]
        assert sorted(step.step_id for step in steps) == [f"{job}.0", f"{job}.1", f"{job}.batch"]
        cluster.run(["scontrol", "update", "NodeName=node2", "State=DOWN", "Reason=test"], timeout=10)
        after = _until("node2 removed from the job", lambda: (j := ctl.job(job)).nodes != everyone and j)
        assert (after.state, after.nodes, after.batch_host) == ("RUNNING", ("node1", "node3"), "node1")
        _until("node2's step ended", lambda: all("node2" not in step.nodes for step in ctl.steps(job)))
        # ReturnToService=2 (the test cluster's) lets the live slurmd bring node2 back at
        # once: a drained node stays out and shows the flag
        (busy,) = ctl.nodes(["node3"])
        assert (busy.flags, busy.usable) == (frozenset(), True)
        cluster.run(["scontrol", "update", "NodeName=node3", "State=DRAIN", "Reason=test"], timeout=10)
        assert ctl.nodes(["node3"]) == (NodeInfo("node3", busy.state, frozenset({"DRAIN"})),)
        assert not ctl.nodes(["node3"])[0].usable
    finally:
        cluster.run(["scancel", job], timeout=10)
        for node in ("node2", "node3"):
            cluster.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], timeout=10)
        cluster.wait_idle()
    assert [node.usable for node in ctl.nodes()] == [True, True, True]


@pytest.mark.cluster
def test_requeue_held_then_release_leaves_it_pending_unheld(cluster, ctl):
    # Slurm delays a requeued job's start by at least 121 s (BeginTime): the release is
    # seen in the reason, not by waiting for the next run.
    job = str(cluster.sbatch("#!/bin/sh\nsleep 120\n", "--requeue", "-N1", "-o", "/dev/null"))
    try:
        _until("job running", lambda: ctl.job(job).state == "RUNNING")
        ctl.requeue(job, hold=True)
        held = _until("job held", lambda: (j := ctl.job(job)).state == "PENDING" and j)
        assert (held.nodes, held.batch_host, held.restart_count) == ((), None, 1)
        assert held.reason is not None and "held" in held.reason
        ctl.release(job)
        released = ctl.job(job)
        assert (released.state, released.restart_count) == ("PENDING", 1)
        assert "held" not in (released.reason or "")  # None or BeginTime, by when it looks
    finally:
        cluster.run(["scancel", job], timeout=10)
        cluster.wait_idle()


@pytest.mark.cluster
def test_the_controller_refuses_an_unknown_job_in_one_line(ctl):
    with pytest.raises(ControllerError) as caught:
        ctl.job("999999")
    start = "squeue --noheader --states=all --jobs 999999 --Format"
    if ctl.name == "pyslurm":
        start = "pyslurm Job.load(999999): "
    assert str(caught.value).startswith(start)
    assert "Invalid job id specified" in str(caught.value)
