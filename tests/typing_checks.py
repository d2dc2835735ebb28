"""What the type checker must refuse; checked by mypy (``files`` in pyproject.toml), never run.

Each marked line must be an error: with ``warn_unused_ignores`` (part of ``strict``), an
ignore that silences nothing fails mypy, so a line that stops being an error fails the lint
gate (tests/test_lint.py).
"""

from __future__ import annotations

import dataclasses

from tfslurm.cluster import Cluster
from tfslurm.plan import Plan, PlanOptions, TaskPlan
from tfslurm.ports import PortRule
from tfslurm.settings import Settings
from tfslurm.step import Step


def value_types_are_read_only(step: Step, settings: Settings, task: TaskPlan, cluster: Cluster) -> None:
    step.procid = 3  # type: ignore[misc]
    settings.tf_dist = "worker:*"  # type: ignore[misc]
    task.rank = 1  # type: ignore[misc]
    cluster.nodes = ()  # type: ignore[misc]


def they_are_not_dataclasses(task: TaskPlan, options: PlanOptions) -> None:
    dataclasses.replace(task)  # type: ignore[type-var]
    dataclasses.asdict(options)  # type: ignore[call-overload]


def constructors_are_checked() -> None:
    Step("step", procid="0")  # type: ignore[arg-type]
    PortRule("explicit", bases=1)  # type: ignore[call-arg]
    PortRule("random", base=1)  # type: ignore[arg-type]
    Plan()  # type: ignore[call-arg]


def patterns_match_by_field(value: object) -> int:
    match value:
        case TaskPlan(rank, "chief"):
            return rank
        case TaskPlan(rank, job, index, node):  # the fields in __match_args__ order
            return len(job) + index + len(node)
    return 0
