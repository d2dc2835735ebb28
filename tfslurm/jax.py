"""``tfslurm.jax.initialize()``: ``jax.distributed.initialize`` from tfslurm's plan.

JAX's own Slurm detection takes the first host of the sorted node list as coordinator,
derives one port from the job id (two steps of a job collide) and uses SLURM_LOCALID as
the device index (wrong once devices are bound per task). Here all four arguments come
from the plan (``tfslurm.runtimes``), and JAX's detection is switched off.

With an interface (``iface`` / ``TFSLURM_IFACE``) the coordinator is that interface's
address, and so is the CPU (gloo) collectives' traffic: JAX has no setting for the latter
(0.10 creates gloo with neither host name nor interface, so gloo takes the address of the
node's host name), so its factory is given the interface before the CPU backend starts.
GPU collectives (NCCL) follow ``NCCL_SOCKET_IFNAME``, which is set as well.
"""

from __future__ import annotations

import os

from tfslurm.runtimes import coordinator, local_device_ids, plan_with_iface

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tfslurm.plan import Plan

__all__ = ["initialize"]


def initialize(plan: Plan | None = None, *, iface: str | None = None, **options: Any) -> Plan:
    """Start JAX's distributed runtime for this task and return the plan it used.

    ``plan`` defaults to this task's (``plan_from_environ``); ``iface`` (default
    ``TFSLURM_IFACE``) advertises the coordinator by its address on that interface.
    ``options`` go to ``jax.distributed.initialize`` (e.g. ``initialization_timeout``).
    """
    import jax

    plan = _task_plan(plan, iface)
    ids = local_device_ids(plan)
    if plan.cluster.iface is not None:
        os.environ.update(NCCL_SOCKET_IFNAME=plan.cluster.iface, GLOO_SOCKET_IFNAME=plan.cluster.iface)
        _gloo_on(plan.cluster.iface)
    jax.distributed.initialize(
        coordinator_address=coordinator(plan).address,
        num_processes=plan.cluster.num_tasks,
        process_id=plan.require_rank("jax.distributed.initialize"),
        local_device_ids=list(ids) if ids else None,
        cluster_detection_method="deactivate",
        **options,
    )
    return plan


def _gloo_on(iface: str) -> None:
    """Make JAX's CPU collectives (gloo) bind ``iface`` (see the module docstring)."""
    import functools

    from jax._src import xla_bridge

    jaxlib = getattr(xla_bridge, "_jax", None)
    make = getattr(jaxlib, "make_gloo_tcp_collectives", None)
    if jaxlib is None or make is None or isinstance(make, functools.partial):
        return  # another JAX layout, or done already
    jaxlib.make_gloo_tcp_collectives = functools.partial(make, interface=iface)


def _task_plan(plan: Plan | None, iface: str | None) -> Plan:
    from tfslurm.step import Settings

    if plan is None:
        from tfslurm.plan import plan_from_step
        from tfslurm.step import Step

        step = Step.from_environ()  # the one read of the environment
        plan, settings = plan_from_step(step), step.settings
    else:
        settings = Settings.from_environ()
    return plan_with_iface(plan, settings, iface) if plan.cluster.iface is None else plan
