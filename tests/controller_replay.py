"""Replaying recorded controller answers (tests/record_controller.py) through both backends.

The commands backend runs as it does on a cluster, except that each command's recorded
output stands in for running it: a command line that was not recorded fails the replay, so
a changed format is caught until the recordings are made again. pyslurm's recorded
attributes go through the pyslurm backend's conversion functions; pyslurm itself is not
needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tfslurm.controller import ControllerError, JobInfo, NodeInfo, StepInfo
from tfslurm.controller import pyslurm_backend as pb
from tfslurm.controller.commands import CommandController

DATA = Path(__file__).resolve().parent / "data" / "controller"


def recordings() -> list[Path]:
    """Every recorded stage, all versions."""
    return sorted(DATA.glob("*/*.json"))


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


class Replayer(CommandController):
    """The commands backend answering from a recording instead of running the commands."""

    __slots__ = ("calls",)

    def __init__(self, calls: list[dict[str, Any]]) -> None:
        super().__init__({})
        self.calls = calls

    def _call(self, *argv: str) -> str:
        for call in self.calls:
            if call["argv"] == list(argv):
                if call["returncode"] != 0:
                    said = call["stderr"].strip() or call["stdout"].strip() or "no message"
                    raise ControllerError(f"{' '.join(argv)} failed (exit {call['returncode']}): {said}")
                return str(call["stdout"])
        raise AssertionError(f"not recorded: {' '.join(argv)}")


Answer = JobInfo | tuple[StepInfo, ...] | tuple[NodeInfo, ...] | str


def commands_answers(data: dict[str, Any]) -> dict[str, Answer]:
    """What the commands backend answers from this recording (an error as its message)."""
    ctl = Replayer(data["commands"])
    answers: dict[str, Answer] = {}
    job_id = data["job_id"]
    if job_id is not None:
        answers["job"] = _answer(ctl.job, job_id)
        answers["steps"] = _answer(ctl.steps, job_id)
    answers["nodes"] = _answer(ctl.nodes)
    return answers


def pyslurm_answers(data: dict[str, Any]) -> dict[str, Answer] | None:
    """What the pyslurm backend answers from this recording (None: pyslurm was not used)."""
    if data["pyslurm_nodes"] is None:
        return None
    answers: dict[str, Answer] = {}
    record = data["pyslurm_job"]
    if data["job_id"] is not None:
        if "error" in record:
            answers["job"] = f"error: pyslurm Job.load({data['raw_job_id']}): {record['error']}"
            answers["steps"] = () if record["errno"] == pb.UNKNOWN_JOB else answers["job"]
        else:
            answers["job"] = pb.job_info(record)
            answers["steps"] = pb.step_infos(record)
    answers["nodes"] = pb.nodes_named(data["pyslurm_nodes"])
    return answers


def agree(data: dict[str, Any]) -> bool:
    """Both backends give the same answers (errors: both fail); true without pyslurm."""
    mine = pyslurm_answers(data)
    if mine is None:
        return True
    theirs = commands_answers(data)
    return all(_same(mine[key], theirs[key]) for key in theirs)


def _same(a: Answer, b: Answer) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str)  # both errors
    if isinstance(a, tuple) and a and isinstance(a[0], NodeInfo):
        return sorted(a, key=_name) == sorted(b, key=_name)  # type: ignore[arg-type]
    return a == b


def _name(node: Any) -> str:
    return str(node.name)


def _answer(question: Any, *args: str) -> Any:
    try:
        return question(*args)
    except ControllerError as exc:
        return "error: " + str(exc)
