"""Both controller backends on answers recorded from real clusters (tests/data/controller).

tests/record_controller.py walked one job through a requeue, a requeue with hold and a
release, a ``--no-kill`` job through losing a node, and asked both backends at each stage,
on Slurm 22.05, 24.11, 25.11 (with pyslurm) and 26.05. Here the commands backend parses
the recorded command output (each command line it runs must be one that was recorded) and
the pyslurm backend converts the recorded pyslurm attributes, without pyslurm. Both must
give the same answers, and the answers Slurm gave at that stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller_replay import DATA, commands_answers, load, pyslurm_answers, recordings
from tfslurm.controller import JobInfo, NodeInfo, StepInfo

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

STAGES = sorted({path.stem for path in recordings()})


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


WITH_PYSLURM = [path for path in recordings() if load(path)["pyslurm_nodes"] is not None]


@pytest.fixture(params=recordings(), ids=_id)
def recording(request: pytest.FixtureRequest) -> dict[str, Any]:
    return load(request.param)


@pytest.fixture(params=WITH_PYSLURM, ids=_id)
def with_pyslurm(request: pytest.FixtureRequest) -> dict[str, Any]:
    return load(request.param)


def test_recordings_cover_both_backends_on_slurm_25_11():
    stages = {path.stem for path in WITH_PYSLURM if path.parent.name == "25.11"}
    assert stages == set(STAGES) and len(STAGES) == 13


def test_pyslurm_answers_as_the_commands_do(with_pyslurm):
    mine = pyslurm_answers(with_pyslurm)
    assert mine is not None
    theirs = commands_answers(with_pyslurm)
    assert set(mine) == set(theirs)
    for key, answer in theirs.items():
        if isinstance(answer, str):  # an error: each backend words it its own way
            assert isinstance(mine[key], str), key
        else:
            assert mine[key] == answer, key


def _job(recording: dict[str, Any], **fields: Any) -> JobInfo:
    values: dict[str, Any] = {
        "job_id": recording["raw_job_id"], "state": "RUNNING", "nodes": ("node1", "node2"),
        "batch_host": "node1", "restart_count": 0, "reason": None,
    }  # fmt: skip
    values.update(fields)
    return JobInfo(**values)


def _steps(recording: dict[str, Any], *steps: tuple[str, tuple[str, ...]]) -> tuple[StepInfo, ...]:
    return tuple(StepInfo(f"{recording['job_id']}.{name}", nodes) for name, nodes in steps)


def _nodes(*states: tuple[str, str, frozenset[str]]) -> tuple[NodeInfo, ...]:
    return tuple(NodeInfo(name, state, flags) for name, state, flags in states)


NONE: frozenset[str] = frozenset()
EXTERN = ("extern", ("node1", "node2"))  # PrologFlags=Contain's step, on every node of the job
BOTH_STEPS = (("0", ("node1", "node2")), ("batch", ("node1",)), EXTERN)
BUSY = _nodes(("node1", "MIXED", NONE), ("node2", "MIXED", NONE))
IDLE = _nodes(("node1", "IDLE", NONE), ("node2", "IDLE", NONE))


def _steps_after_loss(recording: dict[str, Any]) -> tuple[StepInfo, ...]:
    """The steps of a --no-kill job that lost node2: 22.05 ends its extern step; 25.11 keeps
    it, still naming the lost node (a step's nodes are not the job's nodes now)."""
    if recording["slurm"].startswith("22.05."):
        return _steps(recording, ("batch", ("node1",)))
    return _steps(recording, ("batch", ("node1",)), EXTERN)


def expected(recording: dict[str, Any]) -> dict[str, Any]:
    """What Slurm answered at this stage, written out by hand."""
    r = recording
    match r["stage"]:
        case "idle":
            return {"nodes": IDLE}
        case "running" | "nokill-running":
            return {"job": _job(r), "steps": _steps(r, *BOTH_STEPS), "nodes": BUSY}
        case "requeued":  # back in the queue; Slurm holds it back until its BeginTime
            job = _job(r, state="PENDING", nodes=(), batch_host=None, restart_count=1, reason="BeginTime")
            return {"job": job, "steps": (), "nodes": IDLE}
        case "running-again":
            return {"job": _job(r, restart_count=1), "steps": _steps(r, *BOTH_STEPS), "nodes": BUSY}
        case "requeue-held":
            job = _job(
                r, state="PENDING", nodes=(), batch_host=None, restart_count=2,
                reason="job requeued in held state",
            )  # fmt: skip
            return {"job": job, "steps": (), "nodes": IDLE}
        case "released":
            return {"job": _job(r, restart_count=2), "steps": _steps(r, *BOTH_STEPS), "nodes": BUSY}
        case "cancelled":
            return {"job": _job(r, state="CANCELLED", restart_count=2), "steps": (), "nodes": IDLE}
        case "nokill-node-down":  # the job keeps running on the node it has left
            nodes = _nodes(("node1", "MIXED", NONE), ("node2", "DOWN", NONE))
            return {"job": _job(r, nodes=("node1",)), "steps": _steps_after_loss(r), "nodes": nodes}
        case "nokill-node-not-responding":  # 26.05 shows the lost node IDLE, but not responding
            lost = "IDLE" if r["slurm"].startswith("26.05.") else "DOWN"
            nodes = _nodes(("node1", "MIXED", NONE), ("node2", lost, frozenset({"NOT_RESPONDING"})))
            return {"job": _job(r, nodes=("node1",)), "steps": _steps_after_loss(r), "nodes": nodes}
        case "node-drained":
            return {"nodes": _nodes(("node1", "IDLE", frozenset({"DRAIN"})), ("node2", "IDLE", NONE))}
        case "array-task":  # the job by its own id, its steps by the array's name
            job = _job(r, nodes=("node2",), batch_host="node2")
            steps = _steps(r, ("0", ("node2",)), ("batch", ("node2",)), ("extern", ("node2",)))
            return {
                "job": job,
                "steps": steps,
                "nodes": _nodes(("node1", "IDLE", NONE), ("node2", "MIXED", NONE)),
            }
        case "unknown-job":
            return {
                "job": "error",
                "steps": (),
                "nodes": _nodes(("node1", "IDLE", NONE), ("node2", "MIXED", NONE)),
            }
    raise AssertionError(f"no expectation for stage {r['stage']!r}")


def test_commands_backend_answers_what_slurm_said(recording):
    answers = commands_answers(recording)
    want = expected(recording)
    if want.get("job") == "error":
        assert answers["job"] == (
            f"error: squeue --noheader --states=all --jobs {recording['job_id']} --Format "
            "JobID:|,State:|,NodeList:|,BatchHost:|,RestartCnt:|,Reason:| failed (exit 1): "
            "slurm_load_jobs error: Invalid job id specified"
        )
        del want["job"], answers["job"]
    assert answers == want


def test_pyslurm_backend_answers_what_slurm_said(with_pyslurm):
    answers = pyslurm_answers(with_pyslurm)
    assert answers is not None
    want = expected(with_pyslurm)
    if want.get("job") == "error":
        assert (
            answers["job"] == f"error: pyslurm Job.load({with_pyslurm['job_id']}): Invalid job id specified"
        )
        del want["job"], answers["job"]
    assert answers == want


@pytest.mark.parametrize("path", [p for p in recordings() if p.stem.startswith("nokill-node-")], ids=_id)
def test_a_lost_node_is_unusable_on_every_version(path):
    recording = load(path)
    for answers in (commands_answers(recording), pyslurm_answers(recording)):
        if answers is not None:
            assert [node.usable for node in answers["nodes"]] == [True, False]  # type: ignore[union-attr]


def test_usable_nodes_leave_out_down_and_drained_ones():
    down = load(DATA / "25.11" / "nokill-node-down.json")
    drained = load(DATA / "25.11" / "node-drained.json")
    for answers in (commands_answers(down), pyslurm_answers(down)):
        assert answers is not None
        assert [node.name for node in answers["nodes"] if node.usable] == ["node1"]  # type: ignore[union-attr]
    for answers in (commands_answers(drained), pyslurm_answers(drained)):
        assert answers is not None
        assert [node.name for node in answers["nodes"] if node.usable] == ["node2"]  # type: ignore[union-attr]
