"""The environment slurmstepd gives a task of a step whose layout is known (tests and bench)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tfslurm.layout import Layout


def task_env(
    layout: Layout, rank: int, node_order: list[str] | None = None, job_id: str = "42", **extra: str
) -> dict[str, str]:
    """Task ``rank``'s Slurm variables for a step really laid out as ``layout``, with ``extra``.

    ``node_order`` gives the nodes by SLURM_NODEID where that differs from ``layout.nodes``
    (het steps number nodes in component order).
    """
    from tfslurm import hostlist

    node = layout.rank_node[rank]
    order = list(layout.nodes) if node_order is None else node_order
    counts = [layout.tasks_on(i) for i in range(len(layout.nodes))]
    return {
        "SLURM_JOB_ID": job_id,
        "SLURM_STEP_ID": "0",
        "SLURM_STEP_NODELIST": hostlist.compress(list(layout.nodes)),
        "SLURM_STEP_TASKS_PER_NODE": hostlist.compress_counts(counts),
        "SLURM_STEP_NUM_TASKS": str(layout.num_tasks),
        "SLURM_STEP_NUM_NODES": str(len(layout.nodes)),
        **extra,
        "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(layout.rank_local[rank]),
        "SLURM_NODEID": str(order.index(layout.nodes[node])),
        "SLURMD_NODENAME": layout.nodes[node],
        "SLURM_GTIDS": ",".join(map(str, layout.ranks_on(node))),
    }


# Task 1 of a two-task step on one node with two GPUs, as slurmstepd writes it.
ONE_NODE_STEP = {
    "SLURM_JOB_ID": "9", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_NODEID": "0",
    "SLURMD_NODENAME": "n1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "n1", "SLURM_STEP_TASKS_PER_NODE": "2",
    "CUDA_VISIBLE_DEVICES": "0,1", "SLURM_STEP_GPUS": "0,1", "SLURM_GPUS_ON_NODE": "2",
}  # fmt: skip
