"""In-allocation recovery from a lost node: what ``tfslurm supervise`` decides and runs.

The batch script runs ``tfslurm supervise -- srun ... tfslurm run -- PROGRAM``. With
``sbatch --no-kill`` Slurm keeps the allocation when one of its nodes fails: it kills that
node's steps and removes the node from the job, and new steps may run on the rest. The
supervisor launches the step on the training nodes (every node of the job but
``TFSLURM_SPARE_NODES``), and when the step fails asks the controller which of its nodes
the job lost; it relaunches on the survivors plus a spare (same worker count; the program
resumes from its newest checkpoint), or, without a spare, requeues the job (exit 85, the
templates' requeue path) or, with ``TFSLURM_ON_NODE_LOSS=shrink``, goes on with fewer
nodes. ``SLURM_JOB_NODELIST`` is the job's list at its start, and srun takes the batch
environment's node count as its default ``-N``: a relaunch passes ``-N`` and ``-w`` itself
and sets the job's node variables to the controller's answer.

A node that dies silently is listed up by Slurm for minutes: the supervisor probes the
nodes itself when the step shows trouble (``tfslurm.runtime.probe``) and ends the step
without waiting for a silent one, which stays out for the rest of the allocation.

This module holds the settings and the decisions (:func:`first_placement`,
:func:`after_failure`), pure functions of what the controller said;
:class:`tfslurm.runtime.supervisor.Supervisor` runs srun and acts on them.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, TypeVar

from tfslurm.errors import NodeLossError
from tfslurm.errors import clip as _clip
from tfslurm.numbers import ascii_int
from tfslurm.settings import (
    HEARTBEAT_VARIABLE,
    ON_NODE_LOSS_VARIABLE,
    SPARE_NODES_VARIABLE,
    STEP_LINE_VARIABLE,
    STEP_RESTARTS_VARIABLE,
    STRAGGLER_VARIABLE,
    recovery_settings,
)
from tfslurm.step import batch_job
from tfslurm.value import Value

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Final


# Relaunches allowed in one allocation when spares, shrink or the heartbeat are on and
# TFSLURM_STEP_RESTARTS is not set (without them the default stays 0: no relaunch).
DEFAULT_NODE_RESTARTS = 3
DEFAULT_STEP_LINE = r"\bstep (\d+)/\d+"
PREFIX = "tfslurm:"  # as the templates' own lines


class RecoverySettings(Value):
    """The ``tfslurm supervise`` variables as set (None: unset), parsed by :class:`Recovery`."""

    __slots__ = ("heartbeat", "on_node_loss", "spares", "step_line", "step_restarts", "straggler")
    __match_args__ = ("spares", "on_node_loss", "step_restarts", "heartbeat", "step_line", "straggler")

    def __init__(
        self,
        spares: str | None = None,
        on_node_loss: str | None = None,
        step_restarts: str | None = None,
        heartbeat: str | None = None,
        step_line: str | None = None,
        straggler: str | None = None,
    ) -> None:
        self.spares: Final = spares
        self.on_node_loss: Final = on_node_loss
        self.step_restarts: Final = step_restarts
        self.heartbeat: Final = heartbeat
        self.step_line: Final = step_line
        self.straggler: Final = straggler

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> RecoverySettings:
        """The variables of ``env`` (the entry's snapshot of the environment)."""
        return cls(**recovery_settings(env))


class BatchJob(Value):
    """What ``tfslurm supervise`` needs of the batch script's environment: the job, the
    task count it asked for (None: srun's default, one per node unless set otherwise) and
    whether it was submitted to keep its allocation when a node fails. Slurm shows a job no
    sign of ``sbatch --no-kill`` (neither a variable nor ``scontrol show job`` on 22.05);
    ``SBATCH_NO_KILL=set`` at submission means the same to sbatch and reaches the job."""

    __slots__ = ("job_id", "no_kill", "ntasks", "ntasks_per_node")
    __match_args__ = ("job_id", "ntasks", "ntasks_per_node", "no_kill")

    def __init__(
        self, job_id: int | None, ntasks: int | None, ntasks_per_node: int | None, no_kill: bool
    ) -> None:
        self.job_id: Final = job_id
        self.ntasks: Final = ntasks  # SLURM_NTASKS: the whole job's, spares included
        self.ntasks_per_node: Final = ntasks_per_node  # SLURM_NTASKS_PER_NODE
        self.no_kill: Final = no_kill

    def tasks_on(self, nodes: int, job_nodes: int) -> int | None:
        """The task count of a step on ``nodes`` of the job's ``job_nodes``: the tasks per
        node it asked for, else its task count in proportion (None: srun's default)."""
        if self.ntasks_per_node:
            return self.ntasks_per_node * nodes
        if self.ntasks:
            return max(nodes, self.ntasks * nodes // max(job_nodes, 1))
        return None

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> BatchJob:
        """The variables of ``env`` (the entry's snapshot of the environment)."""
        return cls(*batch_job(env))


#: A job that is not a batch job: srun's defaults, killed with a lost node.
NO_JOB = BatchJob(None, None, None, False)


class Recovery(Value):
    """What to do when a step fails: spares kept idle, shrink allowed, relaunches allowed,
    seconds without a step line that mean a stuck step (None: no heartbeat), the step line;
    and whether a straggler's node is swapped for a spare (else it is only named)."""

    __slots__ = ("heartbeat", "replace_stragglers", "restarts", "shrink", "spares", "step_line")
    __match_args__ = ("spares", "shrink", "restarts", "heartbeat", "step_line", "replace_stragglers")

    def __init__(
        self,
        spares: int = 0,
        shrink: bool = False,
        restarts: int = 0,
        heartbeat: float | None = None,
        step_line: str = DEFAULT_STEP_LINE,
        replace_stragglers: bool = False,
    ) -> None:
        self.spares: Final = spares
        self.shrink: Final = shrink
        self.restarts: Final = restarts
        self.heartbeat: Final = heartbeat
        self.step_line: Final = step_line
        self.replace_stragglers: Final = replace_stragglers

    @property
    def places_nodes(self) -> bool:
        """Spares or shrink: the supervisor chooses the step's nodes (``-N``/``-w``)."""
        return self.spares > 0 or self.shrink

    @classmethod
    def parse(cls, settings: RecoverySettings, job: BatchJob) -> Recovery:
        """From the variables; a NodeLossError naming the variable and the fix."""
        spares = _count(SPARE_NODES_VARIABLE, settings.spares, 0)
        mode = (settings.on_node_loss or "requeue").strip().lower()
        if mode not in ("requeue", "shrink"):
            raise NodeLossError(
                f"{ON_NODE_LOSS_VARIABLE}={_clip(settings.on_node_loss or '')!r}: expected requeue or shrink"
            )
        shrink = mode == "shrink"
        heartbeat = None
        if settings.heartbeat is not None:
            try:
                heartbeat = float(settings.heartbeat)
            except ValueError:
                heartbeat = -1.0
            if not 0 < heartbeat < float("inf"):
                raise NodeLossError(
                    f"{HEARTBEAT_VARIABLE}={_clip(settings.heartbeat)!r}: expected a positive number of seconds"
                )
        default = DEFAULT_NODE_RESTARTS if spares or shrink or heartbeat else 0
        restarts = _count(STEP_RESTARTS_VARIABLE, settings.step_restarts, default)
        step_line = settings.step_line or DEFAULT_STEP_LINE
        try:
            re.compile(step_line)
        except re.error as exc:
            raise NodeLossError(
                f"{STEP_LINE_VARIABLE}={_clip(step_line)!r} is not a regular expression: {exc}"
            ) from None
        straggler = (settings.straggler or "name").strip().lower()
        if straggler not in ("name", "replace"):
            raise NodeLossError(
                f"{STRAGGLER_VARIABLE}={_clip(settings.straggler or '')!r}: expected name or replace"
            )
        if straggler == "replace" and not spares:
            raise NodeLossError(
                f"{STRAGGLER_VARIABLE}=replace swaps a straggler's node for a spare: "
                f"set {SPARE_NODES_VARIABLE} to 1 or more, or {STRAGGLER_VARIABLE}=name"
            )
        if (spares or shrink) and not job.no_kill:
            what = f"{SPARE_NODES_VARIABLE}={spares}" if spares else f"{ON_NODE_LOSS_VARIABLE}=shrink"
            raise NodeLossError(
                f"{what} needs a job that keeps its allocation when a node fails: submit with "
                "SBATCH_NO_KILL=set sbatch ... (sbatch --no-kill alone is invisible to the job)"
            )
        return cls(spares, shrink, restarts, heartbeat, step_line, straggler == "replace")


def _count(name: str, text: str | None, default: int) -> int:
    if text is None or not text.strip():
        return default
    value = ascii_int(text.strip())
    if value is None:
        raise NodeLossError(f"{name}={_clip(text)!r}: expected an integer >= 0")
    return value


class Placement(Value):
    """The nodes a step runs on and its task count (None: srun's default)."""

    __slots__ = ("nodes", "ntasks")
    __match_args__ = ("nodes", "ntasks")

    def __init__(self, nodes: tuple[str, ...], ntasks: int | None = None) -> None:
        self.nodes: Final = nodes
        self.ntasks: Final = ntasks

    def srun_options(self) -> list[str]:
        options = ["-N", str(len(self.nodes)), "-w", ",".join(self.nodes)]
        return options + (["-n", str(self.ntasks)] if self.ntasks is not None else [])


def first_placement(
    recovery: Recovery, job_nodes: Sequence[str], usable: Sequence[str], job: BatchJob
) -> Placement:
    """The training nodes: the job's usable nodes in Slurm's order but the last ``spares``;
    as many tasks on each as the job asked for (:meth:`BatchJob.tasks_on`)."""
    ready = [n for n in job_nodes if n in usable]
    if recovery.spares >= len(ready):
        raise NodeLossError(
            f"{SPARE_NODES_VARIABLE}={recovery.spares} leaves no node to train on: the job has "
            f"{len(ready)} usable node(s); ask for more nodes (sbatch --nodes={len(ready) + recovery.spares}) "
            "or fewer spares"
        )
    nodes = tuple(ready[: len(ready) - recovery.spares])
    return Placement(nodes, job.tasks_on(len(nodes), len(job_nodes)))


class Decision(Value):
    """After a failed step: ``relaunch`` on ``placement``, ``requeue`` (exit 85) or
    ``fail`` (the step's status); ``lost`` the step's nodes the job no longer has usable,
    ``line`` what the log says."""

    __slots__ = ("action", "line", "lost", "placement")
    __match_args__ = ("action", "placement", "lost", "line")

    def __init__(self, action: str, placement: Placement | None, lost: tuple[str, ...], line: str) -> None:
        self.action: Final = action
        self.placement: Final = placement
        self.lost: Final = lost
        self.line: Final = line


def after_failure(
    recovery: Recovery,
    placement: Placement,
    job_nodes: Sequence[str],
    usable: Sequence[str],
    status: int,
    relaunches_left: int,
) -> Decision:
    """What to do after the step on ``placement`` failed with ``status``, the job now having
    ``job_nodes`` of which ``usable`` can run a step."""
    lost = tuple(n for n in placement.nodes if n not in job_nodes or n not in usable)
    if not lost:  # a process failed, every node is fine: the same nodes again, if allowed
        if relaunches_left <= 0:  # silent when no relaunch was asked for
            line = f"step failed (exit {status}), no node lost: no relaunch left" if recovery.restarts else ""
            return Decision("fail", None, (), line)
        return Decision("relaunch", placement, (), again_line(status, relaunches_left))
    names = ",".join(lost)
    survivors = [n for n in placement.nodes if n not in lost]
    spares = [n for n in job_nodes if n in usable and n not in placement.nodes]
    taken = spares[: len(lost)]
    nodes = tuple(survivors + taken)
    if (len(nodes) < len(placement.nodes) and not recovery.shrink) or not nodes:
        why = "no spare node left" if recovery.spares else "no spare nodes"
        return Decision(
            "requeue", None, lost, f"node {names} lost (step exit {status}), {why}: requeueing the job"
        )
    if relaunches_left <= 0:
        return Decision(
            "fail",
            None,
            lost,
            f"node {names} lost (step exit {status}): restart cap reached "
            f"({recovery.restarts} relaunches in this allocation, {STEP_RESTARTS_VARIABLE}): giving up",
        )
    ntasks = placement.ntasks
    if ntasks is not None and len(nodes) < len(placement.nodes):  # as many tasks per node
        ntasks = max(len(nodes), ntasks * len(nodes) // len(placement.nodes))
    line = f"node {names} lost (step exit {status}): relaunching on {','.join(nodes)}"
    if taken:
        line += f" (spare {','.join(taken)} in; {len(spares) - len(taken)} spare(s) left)"
    return Decision("relaunch", Placement(nodes, ntasks), lost, line)


def shrink_line(before: Placement, after: Placement, batch_per_worker: int | None) -> str | None:
    """The one line that says what a shrink changed, None when nothing shrank."""
    if len(after.nodes) >= len(before.nodes):
        return None
    old = before.ntasks or len(before.nodes)
    new = after.ntasks or len(after.nodes)
    batch = (
        f"global batch {old * batch_per_worker} -> {new * batch_per_worker}"
        if batch_per_worker
        else "global batch shrinks with them (the batch per worker stays)"
    )
    return f"shrinking: workers {old} -> {new} on nodes {len(before.nodes)} -> {len(after.nodes)}, {batch}"


#: Seconds a relaunch short of nodes waits for a node of the job that the controller lists
#: as not usable, not found silent and not lost from the step: a slurmd slow to answer
#: Slurm's ping (a loaded node) is flagged NOT_RESPONDING until its next answer.
SPARE_WAIT_S = 15.0


T = TypeVar("T")


def ask_until(
    ask: Callable[[], T],
    settled: Callable[[T], bool],
    seconds: float,
    *,
    answer: T | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """The controller's answer once ``settled`` holds for it, asking every second for up to
    ``seconds`` (``answer``: one already in hand); the last answer either way."""
    if answer is None:
        answer = ask()
    for _ in range(max(int(seconds), 0)):
        if settled(answer):
            break
        sleep(1.0)
        answer = ask()
    return answer


def short_of_spares(
    decision: Decision,
    placement: Placement,
    job_nodes: Sequence[str],
    usable: Sequence[str],
    dead: Mapping[str, None] | Sequence[str] = (),
) -> list[str]:
    """The job's nodes outside ``placement`` that the controller lists as not usable (and
    that were not found silent), when ``decision`` has fewer nodes than ``placement``
    (a requeue, a shrink): the nodes worth asking about again. Empty otherwise."""
    kept = decision.placement.nodes if decision.placement is not None else ()
    if decision.action == "fail" or len(kept) >= len(placement.nodes):
        return []
    return [n for n in job_nodes if n not in usable and n not in dead and n not in placement.nodes]


def again_line(status: int, left: int) -> str:
    return f"step failed (exit {status}): running it again in this allocation ({left - 1} more)"
