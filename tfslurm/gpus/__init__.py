"""Which GPUs this task owns, from what Slurm set — never a device Slurm did not give it.

Slurm describes a task's GPUs in several ways depending on how they were requested
(``docs/gpus-and-ports.md`` has the full table and the observed environments):

* ``--gpus-per-task=N`` (or ``--gpu-bind=per_task:N|map_gpu:..|mask_gpu:..|single:N|closest``):
  ``SLURMD_TRES_BIND=gpu:<how>`` (``gres/gpu:<how>`` since 23.11) and ``CUDA_VISIBLE_DEVICES``
  lists *this task's own* devices, kept as they are — except where that list is the node's
  whole list handed to several tasks (``closest`` on a one-socket node): it is split.
* ``--gres=gpu:N``, ``--gpus-per-node=N``, ``--gpus=N`` (default binding): every task on a node
  sees the same per-node list, which tfslurm splits among the node's tasks (see
  :func:`split_devices`).
* ``--gpu-bind=none`` on 24.11+: the node's list, split like a per-node list.
* ``--gpu-bind=none`` on 22.05: only ``SLURM_GPUS_ON_NODE=N``; no variable says *which* devices. The
  devices are identifiable only if the process sees exactly ``N`` of them (device cgroup), which
  ``nvidia-smi`` can confirm; otherwise tfslurm hands out nothing and leaves the variables alone.
* no GPU: nothing set (Slurm 22.05 even removes an inherited ``CUDA_VISIBLE_DEVICES``); the task
  gets 0 GPUs, and asking for some is a :class:`GpuError`.

``SLURM_STEP_GPUS`` / ``SLURM_JOB_GPUS`` hold *global* device indices, which differ from what
the process sees when the device cgroup renumbers devices from 0, so tfslurm always hands out
the visible-device form (``CUDA_VISIBLE_DEVICES`` / ``ROCR_VISIBLE_DEVICES`` /
``HIP_VISIBLE_DEVICES`` / ``ZE_AFFINITY_MASK`` / ``GPU_DEVICE_ORDINAL``), keeping MIG UUIDs and
``ZE`` sub-device ids as opaque strings.

The modules, one concept each:

* :mod:`~tfslurm.gpus.policy`: :data:`POLICY`, the whole rule as a table (binding kind x
  Slurm version), and the reading of Slurm's binding;
* :mod:`~tfslurm.gpus.devices`: device lists, parsed and split among a node's tasks;
* :mod:`~tfslurm.gpus.probes`: what the node says (``/dev`` files, ``nvidia-smi``);
* :mod:`~tfslurm.gpus.assignment`: :func:`assign_gpus`, this task's devices and exports;
* :mod:`~tfslurm.gpus.warnings`: :func:`gpu_warnings`, when a task's GPUs are probably not
  what the user asked for.

Only the standard library; the nvidia-smi probe runs only in the ``--gpu-bind=none`` case and
is bounded by a timeout.
"""

from __future__ import annotations

from tfslurm.errors import GpuError
from tfslurm.gpus.assignment import (
    GpuAssignment,
    assign_gpus,
    assign_gpus_from_env,
    assigned_earlier,
    node_device_list,
)
from tfslurm.gpus.devices import MAX_DEVICES, check_gpu_count, parse_devices, split_devices
from tfslurm.gpus.policy import (
    BINDING_TEXT,
    PER_TASK_BINDINGS,
    POLICY,
    SLURM_GPU_VARIABLES,
    slurm_gpu_binding,
)
from tfslurm.gpus.warnings import WARNING_PREFIX, gpu_warnings
from tfslurm.settings import ASSIGNED_VARIABLE, UNEVEN_VARIABLE
from tfslurm.step import VISIBLE_DEVICE_VARIABLES

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from tfslurm.gpus.probes import NVIDIA_SMI_TIMEOUT, count_visible_gpus, node_gpu_files

#: The probes run in few steps (``--gpu-bind=none``, a node with no GPUs allocated), so
#: their module is loaded when one of its names is first asked for, not by every hook run.
_PROBES = frozenset({"NVIDIA_SMI_TIMEOUT", "count_visible_gpus", "node_gpu_files"})


def __getattr__(name: str) -> object:
    if name in _PROBES:
        from tfslurm.gpus import probes  # not every hook run's: see _PROBES

        return getattr(probes, name)
    raise AttributeError(f"module 'tfslurm.gpus' has no attribute {name!r}")


__all__ = [
    "ASSIGNED_VARIABLE",
    "BINDING_TEXT",
    "MAX_DEVICES",
    "NVIDIA_SMI_TIMEOUT",
    "PER_TASK_BINDINGS",
    "POLICY",
    "SLURM_GPU_VARIABLES",
    "UNEVEN_VARIABLE",
    "VISIBLE_DEVICE_VARIABLES",
    "WARNING_PREFIX",
    "GpuAssignment",
    "GpuError",
    "assign_gpus",
    "assign_gpus_from_env",
    "assigned_earlier",
    "check_gpu_count",
    "count_visible_gpus",
    "gpu_warnings",
    "node_device_list",
    "node_gpu_files",
    "parse_devices",
    "slurm_gpu_binding",
    "split_devices",
]
