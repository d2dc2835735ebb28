"""``tfslurm.jax.initialize()``: ``jax.distributed.initialize`` from tfslurm's plan.

JAX's own Slurm detection takes the first host of the sorted node list as coordinator,
derives one port from the job id (two steps of a job collide) and uses SLURM_LOCALID as
the device index (wrong once devices are bound per task). Here all four arguments come
from the plan (``tfslurm.frameworks``), and JAX's detection is switched off.

With an interface (``iface`` / ``TFSLURM_IFACE``) the coordinator is that interface's
address, and so is the CPU (gloo) collectives' traffic: JAX has no setting for the latter,
so Gloo is given the interface in code before the CPU backend starts
(``tfslurm.adapters.gloo_on``). GPU collectives (NCCL) follow ``NCCL_SOCKET_IFNAME``,
which is set as well.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from tfslurm.adapters import gloo_on, task_plan
from tfslurm.frameworks import coordinator, local_device_ids, socket_env

if TYPE_CHECKING:
    from typing import Any

    from tfslurm.plan import Plan

__all__ = ["initialize"]


def initialize(plan: Plan | None = None, *, iface: str | None = None, **options: Any) -> Plan:
    """Start JAX's distributed runtime for this task and return the plan it used.

    ``plan`` defaults to this task's (``tfslurm.plan.resolve_plan``); ``iface`` (default
    ``TFSLURM_IFACE``) advertises the coordinator by its address on that interface.
    ``options`` go to ``jax.distributed.initialize`` (e.g. ``initialization_timeout``).
    """
    import jax

    plan = task_plan(plan, iface)
    ids = local_device_ids(plan)
    if plan.cluster.iface is not None:
        os.environ.update(socket_env(plan))
        gloo_on(plan.cluster.iface)
    jax.distributed.initialize(
        coordinator_address=coordinator(plan).address,
        num_processes=plan.cluster.num_tasks,
        process_id=plan.require_rank("jax.distributed.initialize"),
        local_device_ids=list(ids) if ids else None,
        cluster_detection_method="deactivate",
        **options,
    )
    return plan
