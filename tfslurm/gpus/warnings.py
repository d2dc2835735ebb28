"""Warnings about a task's GPUs that are probably not what the user asked for.

:func:`review_gpus` classifies the task's situation once (the :class:`GpuFinding` values
that hold, and the figures their lines quote); :func:`gpu_warnings` then turns each
finding into its one line, said by one task only where possible, or into a GpuError for
unequal counts under ``TFSLURM_UNEVEN_GPUS=error``.
"""

from __future__ import annotations

from tfslurm.errors import GpuError, bare, one_line
from tfslurm.gpus.devices import slurm_gpu_count
from tfslurm.gpus.policy import PER_TASK_BINDINGS, slurm_gpu_binding
from tfslurm.numbers import ascii_int, is_ascii_number
from tfslurm.settings import UNEVEN_VARIABLE
from tfslurm.value import Value

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # imported for type hints only: keep the TaskProlog path light
    from collections.abc import Callable
    from typing import Final

    from tfslurm.gpus.assignment import GpuAssignment
    from tfslurm.gpus.policy import GpuBinding
    from tfslurm.layout import Layout
    from tfslurm.step import GpuVariables, Step

__all__ = ["UNEVEN_FINDINGS", "WARNING_PREFIX", "GpuFinding", "GpuReview", "gpu_warnings", "review_gpus"]

# UNEVEN_VARIABLE (tfslurm.settings), ``warn`` (default) or ``error``: whether unequal GPU
# counts among the step's tasks only warn or are a GpuError (MWMS needs equal counts).

#: Every warning line starts with this.
WARNING_PREFIX = "tfslurm: warning: "
#: Longest warning line, in characters (a node's task list can be long; its end says the fix).
MAX_WARNING = 900


class GpuFinding:
    """The things about a task's GPUs that are probably not what the user asked for, each a
    string naming it (a plain class, not an Enum: making an Enum costs a hook run 1 %)."""

    IDLE_NODE_GPUS = "Slurm allocated no GPUs to the step, but the node has GPU device files"
    ZERO_HERE = "this task gets 0 GPUs while other tasks of the step get some"
    FEWER_THAN_TASKS = "the node has fewer GPUs than tasks"
    UNEVEN_ON_NODE = "the node's tasks get unequal GPU counts"
    UNEVEN_BY_TOTAL = "the node's share does not add up to SLURM_GPUS over the step's tasks"
    UNEVEN_ACROSS_NODES = "tasks of other nodes get other GPU counts"


#: The findings of unequal GPU counts: the ones ``TFSLURM_UNEVEN_GPUS=error`` makes errors.
UNEVEN_FINDINGS = frozenset(
    {GpuFinding.UNEVEN_ON_NODE, GpuFinding.UNEVEN_BY_TOTAL, GpuFinding.UNEVEN_ACROSS_NODES}
)


class GpuReview(Value):
    """A task's GPU situation: the findings that hold, in the order their lines are said,
    and the figures the lines quote.

    ``node`` is the task's node by name; ``node_gpus`` the GPUs Slurm gave it (0 unknown);
    ``shares`` the count each local task gets, ``others`` the counts tasks of other nodes
    get (were they to hold as many GPUs); ``total`` is ``SLURM_GPUS``; ``files`` the node's
    NVIDIA device files found in ``dev_dir``.
    """

    __slots__ = (
        "all_tasks",
        "dev_dir",
        "files",
        "findings",
        "local_id",
        "local_tasks",
        "node",
        "node_gpus",
        "others",
        "rank",
        "shares",
        "total",
    )
    __match_args__ = (
        "findings",
        "rank",
        "node",
        "local_id",
        "local_tasks",
        "node_gpus",
        "shares",
        "others",
        "total",
        "all_tasks",
        "files",
        "dev_dir",
    )

    def __init__(
        self,
        findings: tuple[str, ...],
        rank: int = 0,
        node: str = "",
        local_id: int = 0,
        local_tasks: int = 1,
        node_gpus: int = 0,
        shares: tuple[int, ...] = (),
        others: tuple[int, ...] = (),
        total: str = "",
        all_tasks: int = 0,
        files: tuple[str, ...] = (),
        dev_dir: str = "/dev",
    ) -> None:
        self.findings: Final = findings
        self.rank: Final = rank
        self.node: Final = node
        self.local_id: Final = local_id
        self.local_tasks: Final = local_tasks
        self.node_gpus: Final = node_gpus
        self.shares: Final = shares
        self.others: Final = others
        self.total: Final = total
        self.all_tasks: Final = all_tasks
        self.files: Final = files
        self.dev_dir: Final = dev_dir

    def with_findings(self, findings: tuple[str, ...]) -> GpuReview:
        """The same figures with ``findings``."""
        return GpuReview(
            findings,
            self.rank,
            self.node,
            self.local_id,
            self.local_tasks,
            self.node_gpus,
            self.shares,
            self.others,
            self.total,
            self.all_tasks,
            self.files,
            self.dev_dir,
        )

    def says(self, finding: str) -> bool:
        """Whether this task says ``finding``'s line: the node's local task 0 for what the
        node shows, rank 0 for counts that differ only across nodes, each task for itself."""
        if finding is GpuFinding.ZERO_HERE:
            return True
        if finding is GpuFinding.UNEVEN_ACROSS_NODES:
            return self.rank == 0
        return self.local_id == 0


def gpu_warnings(
    step: Step,
    layout: Layout,
    assignment: GpuAssignment,
    *,
    gpus_per_task: int | None = None,
    gpus_per_node: int | None = None,
    dev_dir: str = "/dev",
) -> tuple[str, ...]:
    """One-line warnings about this task's GPUs, each said by one task only where possible.

    * this task gets 0 GPUs while other tasks of the step get some (said by that task);
    * tasks get unequal counts (said by local task 0 of a node that shows it; across nodes,
      by rank 0) — a GpuError instead when ``TFSLURM_UNEVEN_GPUS=error``;
    * a node has fewer GPUs than tasks (said by the node's local task 0);
    * Slurm manages no GPUs for the step but the node has NVIDIA device files (local task 0).

    Other nodes are assumed to hold as many GPUs as this one (true for ``--gres=gpu:N`` and
    ``--gpus-per-node``), unless ``SLURM_GPUS`` (a total, 24.11+) says otherwise.
    """
    mode = step.settings.uneven_gpus()  # a GpuError for a value that is not warn/error
    review = review_gpus(
        step, layout, assignment, gpus_per_task=gpus_per_task, gpus_per_node=gpus_per_node, dev_dir=dev_dir
    )
    out: list[str] = []
    for finding in review.findings:
        if finding in UNEVEN_FINDINGS:
            what = _uneven_text(finding, review)
            if mode == "error":
                raise GpuError(f"{what} ({UNEVEN_VARIABLE}=error)")
            if review.says(finding):
                out.append(f"{WARNING_PREFIX}{what} ({UNEVEN_VARIABLE}=error makes this an error)")
        elif review.says(finding):
            out.append(_LINES[finding](review))
    return tuple(one_line(line, MAX_WARNING) for line in out)  # escaped and bounded, as errors are


def review_gpus(
    step: Step,
    layout: Layout,
    assignment: GpuAssignment,
    *,
    gpus_per_task: int | None = None,
    gpus_per_node: int | None = None,
    dev_dir: str = "/dev",
) -> GpuReview:
    """The findings about this task's GPUs among the step's (see :func:`gpu_warnings`)."""
    gv = step.gpus
    rank = step.procid
    if rank is None or not 0 <= rank < layout.num_tasks:
        return GpuReview(())
    node = layout.rank_node[rank]
    local_id = layout.rank_local[rank]
    place = (rank, layout.nodes[node], local_id, layout.tasks_on(node))
    if not assignment.node_devices and not assignment.unbound and not slurm_gpu_count(gv):
        if gv.slurm_manages or gpus_per_node is not None:
            return GpuReview(())
        from tfslurm.gpus.probes import node_gpu_files  # only GPU-less steps look: not every hook run's

        files = node_gpu_files(dev_dir) if local_id == 0 else ()
        return GpuReview((GpuFinding.IDLE_NODE_GPUS,) if files else (), *place, files=files, dev_dir=dev_dir)
    if assignment.unbound:
        return GpuReview(())  # --gpu-bind=none on 22.05: the task sees them all, nothing is split
    bound = assignment.per_task and slurm_gpu_binding(gv) in PER_TASK_BINDINGS
    node_gpus = _node_gpu_count(gv, assignment, gpus_per_node)
    if bound or node_gpus is None:
        # Slurm chose each task's devices itself (equal by construction), or the node's
        # list is not known here: only this task's own count can be judged.
        zero = not assignment.devices and node_gpus is not None and node_gpus > 0 and gpus_per_task != 0
        return GpuReview((GpuFinding.ZERO_HERE,) if zero else (), *place, node_gpus or 0)
    if gpus_per_task == 0:
        return GpuReview(())
    per_task = gpus_per_task if gpus_per_task is not None else assignment.split_per_task
    local = _shares(node_gpus, place[3], per_task)
    counts = layout.task_counts
    others: set[int] = set()  # the shares tasks of other nodes get (one call per count)
    for tasks in set(counts[:node] + counts[node + 1 :]):
        others.update(_shares(node_gpus, tasks, per_task))
    review = GpuReview((), *place, node_gpus, local, tuple(sorted(others)), gv.gpus_total, layout.num_tasks)
    by_total = is_ascii_number(review.total, 9) and len(layout.nodes) > 1 and gpus_per_node is None
    return _share_findings(review, by_total=by_total and per_task is None, kind=assignment.kind)


def _shares(gpus: int, tasks: int, per_task: int | None) -> tuple[int, ...]:
    """The GPU count of each of a node's ``tasks`` when it holds ``gpus``."""
    if per_task is not None:
        return (per_task if gpus >= per_task * tasks else 0,) * tasks
    share, extra = divmod(gpus, tasks)
    return tuple(share + (1 if i < extra else 0) for i in range(tasks))


def _share_findings(review: GpuReview, *, by_total: bool, kind: GpuBinding) -> GpuReview:
    """``review`` (its figures filled in) with the findings of a split node list.

    ``by_total``: ``SLURM_GPUS`` (--gpus=N, 24.11+) gives the step's total, and Slurm may
    give nodes different counts, so other nodes are not assumed to hold as many GPUs: every
    task holding this node's share s would need s * all_tasks GPUs in all; a node whose
    share differs from that is a node of an uneven split — and when shares differ, at
    least one node's does.
    """
    local, others, node_gpus = review.shares, review.others, review.node_gpus
    even_here = len(set(local)) == 1
    if by_total:
        across = even_here and local[0] * review.all_tasks != ascii_int(review.total, 9)
    elif kind == "whole-node-shared":
        across = False  # allocated per task (--gpus-per-task): other nodes hold as many per task
    else:
        across = even_here and len(set(others).union(local)) > 1
    findings: list[str] = []
    if local[review.local_id] == 0 and (any(local) or any(others)):
        findings.append(GpuFinding.ZERO_HERE)
    if 0 < node_gpus < review.local_tasks:
        findings.append(GpuFinding.FEWER_THAN_TASKS)
    if not even_here:
        findings.append(GpuFinding.UNEVEN_ON_NODE)
    elif across:
        findings.append(GpuFinding.UNEVEN_BY_TOTAL if by_total else GpuFinding.UNEVEN_ACROSS_NODES)
    return review.with_findings(tuple(findings))


def _node_gpu_count(gv: GpuVariables, assignment: GpuAssignment, gpus_per_node: int | None) -> int | None:
    """GPUs Slurm gave this node for the step (before tfslurm split them), or None."""
    count = (
        len(assignment.node_devices)
        if not assignment.per_task
        else ascii_int((gv.gpus_on_node or "").strip(), 9)
    )
    if count is None:
        return None
    return min(count, gpus_per_node) if gpus_per_node is not None else count


# --- the lines -----------------------------------------------------------------------------


def _idle_line(r: GpuReview) -> str:
    return (
        f"{WARNING_PREFIX}Slurm allocated no GPUs to this step, but node "
        f"{bare(r.node)} has {len(r.files)} ({r.dev_dir}/{r.files[0]}...): the tasks train on "
        "the CPU; request --gres=gpu:N (or --gpus-per-node=N), or pass gpus_per_node=N"
    )


def _zero_line(r: GpuReview) -> str:
    return (
        f"{WARNING_PREFIX}task {r.rank} on {bare(r.node)} gets 0 GPUs while other tasks of the step have some "
        f"({r.node_gpus} GPU(s) for {r.local_tasks} task(s) on the node): it runs on the CPU; request "
        "--gpus-per-task=N, or --gres=gpu:N with N a multiple of the tasks per node"
    )


def _fewer_line(r: GpuReview) -> str:
    return (
        f"{WARNING_PREFIX}node {bare(r.node)} has {r.node_gpus} GPU(s) for {r.local_tasks} tasks: "
        f"{r.local_tasks - r.node_gpus} task(s) get none (a GPU is never shared); request at least "
        "one GPU per task (--gpus-per-task=1)"
    )


_LINES: dict[str, Callable[[GpuReview], str]] = {
    GpuFinding.IDLE_NODE_GPUS: _idle_line,
    GpuFinding.ZERO_HERE: _zero_line,
    GpuFinding.FEWER_THAN_TASKS: _fewer_line,
}


def _uneven_text(finding: str, r: GpuReview) -> str:
    """What an unequal-counts finding says (the warning's or the GpuError's text)."""
    if finding is GpuFinding.UNEVEN_ON_NODE:
        where = f"{', '.join(map(str, r.shares))} on node {bare(r.node)}"
    elif finding is GpuFinding.UNEVEN_BY_TOTAL:
        where = (
            f"{r.shares[0]} per task on node {bare(r.node)}, but SLURM_GPUS={r.total} for {r.all_tasks} tasks"
        )
    else:
        mine = r.shares[r.local_id]
        where = (
            f"{mine} here, {', '.join(map(str, sorted(set(r.others) - {mine})))} on other nodes "
            f"if they hold {r.node_gpus} GPUs like this one"
        )
    return (
        f"tasks get unequal GPU counts ({where}); MultiWorkerMirroredStrategy needs the same count "
        "on every worker: request --gpus-per-task=N or --gres=gpu:N with N a multiple of the tasks per node"
    )
