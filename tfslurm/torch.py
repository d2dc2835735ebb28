"""``tfslurm.torch.init_process_group()``: ``torch.distributed`` from tfslurm's plan.

Rank, world size and the store's address come from the plan (``tfslurm.frameworks``), not
from torchrun or a second reading of Slurm's variables, so uneven, cyclic, plane,
arbitrary and heterogeneous steps get the ranks Slurm really gave.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from tfslurm.adapters import task_plan
from tfslurm.frameworks import socket_env, torch_env

if TYPE_CHECKING:
    from typing import Any

    from tfslurm.plan import Plan

__all__ = ["device", "init_process_group"]


def init_process_group(
    backend: str | None = None, plan: Plan | None = None, *, iface: str | None = None, **options: Any
) -> Plan:
    """Join this task's process group and return the plan it used.

    Sets torchrun's variables (``MASTER_ADDR`` ... ``GROUP_RANK``) in ``os.environ`` and,
    with an interface (``iface`` or ``TFSLURM_IFACE``), ``GLOO_SOCKET_IFNAME`` /
    ``NCCL_SOCKET_IFNAME``; then ``torch.distributed.init_process_group`` with
    ``init_method="env://"``. ``backend`` defaults to nccl when CUDA is usable, else gloo.
    With nccl, the current device is this task's first GPU (``cuda:0``: its visible-device
    variable lists only its own).
    """
    import torch
    import torch.distributed as dist

    plan = task_plan(plan, iface)
    variables = torch_env(plan)
    variables.update(socket_env(plan))
    os.environ.update(variables)
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(0)
    dist.init_process_group(
        backend=backend,
        init_method="env://",
        rank=int(variables["RANK"]),
        world_size=int(variables["WORLD_SIZE"]),
        **options,
    )
    return plan


def device() -> str:
    """This task's device for torch: ``cuda:0`` (its own first GPU) or ``cpu``."""
    import torch

    return "cuda:0" if torch.cuda.is_available() else "cpu"
