"""What TensorFlow's ``SlurmClusterResolver`` does that tfslurm's own plan does not.

``tfslurm.SlurmClusterResolver`` (``tfslurm.resolver``) is a drop-in for TF's resolver, so
it keeps these of TF's rules; the core (``plan_for``, ``jobspec``, ``ports``) does not know
them, and each is given to it through a general option (``tfslurm.plan.PlanOptions``):

* **Job order**: TF gives ranks to jobs in alphabetical order of job name (``"worker:2,ps:1"``
  makes rank 0 the ps); tfslurm in the order written. ``job_order=`` of the resolver picks,
  :func:`resolver_job_order` says what it means (``PlanOptions.job_order``).
* **tasks_per_node**: TF's argument replaces Slurm's per-node counts, laid out block-wise
  over the step's nodes; :func:`tasks_per_node_layout` makes that layout, checked against
  what this task can see of the step (``PlanOptions.layout``).
* **Port 8888**: TF's default ``port_base``. tfslurm uses Slurm's reserved ports or a base
  derived from job and step id instead, and 8888 only where there is no job to derive one
  from (TF's own unit tests set only the step's variables): :func:`fallback_port_base`
  (``PlanOptions.port_base``).

* **GPUs**: TF's ``gpus_per_node`` (every node has devices ``0..N-1``) and each task's share
  ``visible // tasks per node``, where they are sound: :func:`tf_gpu_plan`
  (``PlanOptions.gpu_plan``); the resolver writes its ``CUDA_VISIBLE_DEVICES``.

Only the standard library is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from tfslurm import hostlist
from tfslurm.errors import GpuError, LayoutError, PlanError
from tfslurm.gpus import WARNING_PREFIX, assigned_earlier, node_device_list
from tfslurm.jobspec import JOB_ORDERS, order_jobs
from tfslurm.layout import Layout, block_layout
from tfslurm.numbers import is_int_in
from tfslurm.plan import GpuPlan, gpu_plan_for
from tfslurm.value import one_of

if TYPE_CHECKING:
    from typing import Final

    from tfslurm.jobspec import JobOrder
    from tfslurm.step import Step

__all__ = [
    "TF_JOB_ORDER",
    "TF_PORT_BASE",
    "fallback_port_base",
    "resolver_job_order",
    "tasks_per_node_layout",
    "tf_order",
]

#: TF's default ``port_base``, used only when there is no Slurm job id to derive ports from.
TF_PORT_BASE = 8888
#: The order in which TF's resolver gives ranks to jobs.
TF_JOB_ORDER: Final[JobOrder] = "alphabetical"


def tf_order(jobs: Mapping[str, int]) -> dict[str, int]:
    """The same jobs in TF's ``SlurmClusterResolver`` order: alphabetical by job name."""
    return order_jobs(jobs, TF_JOB_ORDER)


def resolver_job_order(job_order: str | None, *, explicit_jobs: bool) -> JobOrder:
    """The job order of the resolver's ``job_order=`` (``"alphabetical"``, ``"written"`` or
    None): None keeps TF's alphabetical order for jobs the caller gave (``explicit_jobs``)
    and the order written for ``TFSLURM_TF_DIST`` (as TF_CONFIG from tfslurm has it)."""
    if job_order is None:
        return TF_JOB_ORDER if explicit_jobs else "written"
    order = one_of(job_order, JOB_ORDERS)
    if order is None:
        raise PlanError(f"job_order {job_order!r} is not 'alphabetical' or 'written'")
    return order


def fallback_port_base(step: Step, port_base: int | None) -> int | None:
    """``port_base``, or TF's 8888 where tfslurm has no port of its own to give: no
    ``port_base``, no job id, no reserved ports and no ``TFSLURM_PORT_BASE``."""
    if port_base is not None:
        return port_base
    if step.job_id is None and not step.resv_ports and not step.settings.port_base_text:
        # Not a real job (TF's own unit tests set only SLURM_PROCID and the step
        # variables): there is no job id to derive ports from, so TF's default holds.
        return TF_PORT_BASE
    return None


def tasks_per_node_layout(step: Step, tasks_per_node: int | Mapping[str, int]) -> Layout:
    """Block layout from TF's ``tasks_per_node`` argument (an int for every node, or
    ``{node: n}``), checked against the step's nodes, task count and this task's node."""
    if isinstance(tasks_per_node, Mapping):
        counts_by_node = dict(tasks_per_node)
        if step.nodelist is not None:
            nodes = hostlist.expand(step.nodelist)
            if sorted(nodes) != sorted(counts_by_node):
                raise LayoutError(
                    f"tasks_per_node names {sorted(counts_by_node)} but the step's nodes are {nodes}"
                )
        else:
            nodes = list(counts_by_node)
        counts = [counts_by_node[node] for node in nodes]
    else:
        nodes = hostlist.expand(step.require_nodelist())
        counts = [tasks_per_node] * len(nodes)
    for node, count in zip(nodes, counts, strict=True):
        if not is_int_in(count, 1):
            raise LayoutError(f"tasks_per_node gives {node} {count!r} tasks; need a positive integer")
    block = block_layout(nodes, counts)
    rank_node = block.rank_node
    procid = step.procid
    if step.num_tasks is not None and step.num_tasks != len(rank_node):
        raise LayoutError(
            f"tasks_per_node adds up to {len(rank_node)} tasks but SLURM_STEP_NUM_TASKS={step.num_tasks}"
        )
    if procid is not None and procid >= len(rank_node):
        raise LayoutError(f"tasks_per_node adds up to {len(rank_node)} tasks, but this is rank {procid}")
    if procid is not None and step.node_name is not None and nodes[rank_node[procid]] != step.node_name:
        raise LayoutError(
            f"tasks_per_node puts rank {procid} on {nodes[rank_node[procid]]}, "
            f"but it runs on {step.node_name}; leave tasks_per_node unset"
        )
    return Layout(block.nodes, block.rank_node, block.rank_local, "block", source="tasks_per_node")


def tf_gpu_plan(
    step: Step,
    layout: Layout,
    gpus_per_node: int | None,
    gpus_per_task: int | None,
) -> GpuPlan:
    """This task's GPUs with TF's rules where they are sound, Slurm's where TF's are not.

    * ``gpus_per_node`` given and Slurm manages no GPUs here: as TF, the caller vouches that
      every node has GPUs ``0..gpus_per_node-1``.
    * ``gpus_per_task`` not given and Slurm gave a per-node list: as TF, every task gets
      ``visible // max_tasks_per_node``, so all tasks have as many (MWMS expects that).
    * Slurm bound devices per task (``--gpus-per-task``): kept as Slurm bound them (TF
      divides again and crashes).
    """
    if assigned_earlier(step.gpus):  # a TaskProlog or an earlier resolver chose them
        return gpu_plan_for(step, layout)
    max_tasks = max(layout.task_counts)
    if gpus_per_node is not None and gpus_per_task is not None and max_tasks * gpus_per_task > gpus_per_node:
        raise GpuError(
            f"gpus_per_task={gpus_per_task} for {max_tasks} tasks on a node needs "
            f"{max_tasks * gpus_per_task} GPUs, more than gpus_per_node={gpus_per_node}"
        )
    uniform = gpus_per_node is not None and not step.gpus.slurm_manages
    # TF's gpus_per_node where Slurm manages no GPUs: every node has devices 0..N-1
    assumed = tuple(str(i) for i in range(gpus_per_node or 0)) if uniform else None
    if gpus_per_task is None:
        if assumed is not None:
            visible, own = assumed, False
        else:
            rank = step.procid
            local_tasks = layout.tasks_on(layout.rank_node[rank]) if rank is not None else None
            visible, own = node_device_list(step.gpus, local_tasks)
        visible = visible[:gpus_per_node] if gpus_per_node is not None else visible
        if visible and not own:  # a per-task list is this task's own: kept whole
            gpus_per_task = len(visible) // max_tasks
            if gpus_per_task == 0:  # TF's rule leaves this node's GPUs unused: say so
                plan = gpu_plan_for(
                    step,
                    layout,
                    gpus_per_task=0,
                    gpus_per_node=gpus_per_node,
                    uniform=uniform,
                    assumed_devices=assumed,
                )
                node = layout.nodes[layout.rank_node[step.require_procid()]]
                line = (
                    f"{WARNING_PREFIX}task {step.procid} on {node} gets 0 GPUs: TF's rule gives each task "
                    f"{len(visible)} visible GPU(s) // {max_tasks} tasks on the busiest node; pass "
                    "gpus_per_task=N or request --gpus-per-task=N"
                )
                return plan.with_warning(line)
    return gpu_plan_for(
        step,
        layout,
        gpus_per_task=gpus_per_task,
        gpus_per_node=gpus_per_node,
        uniform=uniform,
        assumed_devices=assumed,
    )
