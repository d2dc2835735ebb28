"""The GPU policy: how Slurm described a task's GPUs, and what each description means.

:data:`POLICY` is the whole rule as a table (binding kind x Slurm version), which
``docs/gpus-and-ports.md`` repeats; :data:`GpuBinding` names its rows. The functions here
read Slurm's binding (``SLURMD_TRES_BIND``) and what else decides the row a task is in;
:mod:`tfslurm.gpus.assignment` turns the row into devices.
"""

from __future__ import annotations

from tfslurm.numbers import ascii_int
from tfslurm.step import GpuVariables

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # imported for type hints only: keep the TaskProlog path light
    from collections.abc import Mapping
    from typing import Final, Literal

    #: How Slurm described a task's GPUs: the rows of :data:`POLICY` (BINDING_TEXT says each).
    GpuBinding = Literal[
        "per-node",
        "per-task",
        "whole-node-shared",
        "explicit",
        "none-listed",
        "none-unnamed",
        "narrowed",
        "no-gpus",
        "no-gres",
    ]

__all__ = [
    "BINDING_TEXT",
    "OWN_LIST_KINDS",
    "PER_TASK_BINDINGS",
    "POLICY",
    "SLURM_GPU_VARIABLES",
    "SPLITTABLE_BINDINGS",
    "gpu_binding",
    "gpu_variables",
    "listed_kind",
    "shared_node_list",
    "slurm_gpu_binding",
    "slurm_per_task_count",
    "tres_bind_text",
]

#: Slurm's own GPU variables: one of them set means Slurm manages GPUs for this job.
SLURM_GPU_VARIABLES = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE")

#: ``--gpu-bind`` values under which Slurm computed a per-task device list itself.
PER_TASK_BINDINGS = frozenset({"per_task", "map_gpu", "mask_gpu", "single", "closest"})
#: Of those, the ones whose list may be the node's whole list shared by its tasks (split it).
SPLITTABLE_BINDINGS = frozenset({"per_task", "single", "closest"})


#: Each GpuBinding as the policy table (docs/gpus-and-ports.md) names its row.
BINDING_TEXT: Final[dict[GpuBinding, str]] = {
    "per-node": "per-node list",  # --gres=gpu:N, --gpus-per-node=N, --gpus=N: same list in every task
    "per-task": "per-task list",  # --gpus-per-task=N: this task's own devices
    "whole-node-shared": "per-task binding giving the node's whole list",  # closest on one socket
    "explicit": "map_gpu/mask_gpu",  # the user named each task's devices
    "none-listed": "--gpu-bind=none, devices listed",  # 24.11+: the node's list in every task
    "none-unnamed": "--gpu-bind=none, devices not named",  # 22.05: only SLURM_GPUS_ON_NODE
    "narrowed": "narrowed earlier",  # a TaskProlog / earlier resolver / the user chose already
    "no-gpus": "no GPUs",  # Slurm manages GPUs but gave this step none, or none configured
    "no-gres": "no GRES, list from outside Slurm",  # a user's CUDA_VISIBLE_DEVICES, TF's gpus_per_node
}


#: The rows whose device list is already this task's own: kept, never split to find other
#: tasks' devices.
OWN_LIST_KINDS: Final[frozenset[GpuBinding]] = frozenset({"per-task", "explicit", "narrowed"})

#: The one GPU policy: binding kind x Slurm version -> the devices each task gets.
#: (``n`` devices Slurm made visible, ``t`` tasks on the node, ``g`` = gpus_per_task.)
#: docs/gpus-and-ports.md holds the same table; tests check every recorded shape against it.
_SPLIT = (
    "the node's list split among its t tasks: n//t each, the first n%t one more (g each with gpus_per_task)"
)
POLICY: dict[GpuBinding, dict[str, str]] = {
    "per-node": dict.fromkeys(("22.05", "24.11", "26.05"), _SPLIT),
    "per-task": dict.fromkeys(("22.05", "24.11", "26.05"), "its own list, as Slurm bound it"),
    "whole-node-shared": dict.fromkeys(
        ("22.05", "24.11", "26.05"),
        _SPLIT.replace("gpus_per_task)", "gpus_per_task, else Slurm's --gpus-per-task)"),
    ),
    "explicit": dict.fromkeys(("22.05", "24.11", "26.05"), "its own list, as the user mapped it"),
    "none-listed": {"22.05": "(not set by 22.05)", "24.11": _SPLIT, "26.05": _SPLIT},
    "none-unnamed": {
        "22.05": "none named (unbound=N), unless nvidia-smi sees exactly N: then split",
        "24.11": "(24.11+ list the devices)",
        "26.05": "(24.11+ list the devices)",
    },
    "narrowed": dict.fromkeys(("22.05", "24.11", "26.05"), "its list, kept (never split twice)"),
    "no-gpus": dict.fromkeys(("22.05", "24.11", "26.05"), "0 GPUs, no variable set"),
    "no-gres": dict.fromkeys(("22.05", "24.11", "26.05"), _SPLIT),
}


def gpu_variables(env: Mapping[str, str] | GpuVariables) -> GpuVariables:
    """The GPU variables of a task: a ``Step``'s, or read from a plain mapping."""
    return env if isinstance(env, GpuVariables) else GpuVariables.from_environ(env)


def slurm_gpu_binding(env: Mapping[str, str] | GpuVariables) -> str | None:
    """How Slurm bound GPUs to tasks (``SLURMD_TRES_BIND``): 'none', 'per_task', 'map_gpu',
    'mask_gpu', 'single', 'closest', or None for the default (a per-node list)."""
    return gpu_binding(gpu_variables(env).tres_bind)


def gpu_binding(tres_bind: str) -> str | None:
    """The gpu part of a ``SLURMD_TRES_BIND`` value: 'none', 'per_task', 'map_gpu', ... or None."""
    for part in tres_bind.replace("+", ";").split(";"):
        part = part.strip()
        for prefix in ("gres/gpu:", "gpu:"):
            if part.startswith(prefix):
                words = [w for w in part[len(prefix) :].replace(":", ",").split(",") if w and w != "verbose"]
                return words[0] if words else None
    return None


def tres_bind_text(gv: GpuVariables) -> str:
    """``SLURMD_TRES_BIND=<value>``, as the assignment's ``source`` quotes it."""
    return f"SLURMD_TRES_BIND={gv.tres_bind.strip()}"


def shared_node_list(
    gv: GpuVariables, binding: str | None, devices: tuple[str, ...], local_tasks: int | None
) -> bool:
    """Whether a "per-task" list is in fact the node's whole list, handed to several tasks.

    ``--gpu-bind=closest`` on a node whose GPUs all sit by one socket gives every task of
    the node the step's whole list (``closest`` picks GPUs, not a share of them). A list as
    long as ``SLURM_GPUS_ON_NODE`` while other tasks share the node is that case: it is
    split like a per-node list. ``map_gpu``/``mask_gpu`` name devices explicitly (sharing
    them is the user's choice) and stay as Slurm bound them.
    """
    if binding not in SPLITTABLE_BINDINGS or local_tasks is None or local_tasks < 2 or not devices:
        return False
    raw = (gv.gpus_on_node or "").strip()
    return ascii_int(raw, 9) == len(devices)


def slurm_per_task_count(gv: GpuVariables, devices: int, local_tasks: int | None) -> int | None:
    """GPUs per task the user asked Slurm for, if it fits the node's list; else None.

    Slurm says it as ``SLURMD_TRES_BIND=…per_task:N``, ``SLURM_TRES_PER_TASK=gres/gpu=N``
    (23.02+) or ``SLURM_GPUS_PER_TASK=N`` (older sbatch jobs).
    """
    count: int | None = None
    bind = gv.tres_bind
    if "per_task:" in bind:
        digits = bind.split("per_task:", 1)[1].split(",")[0].split(";")[0].strip()
        count = ascii_int(digits, 9)
    if count is None:
        for part in gv.tres_per_task.split(","):
            name, _, value = part.strip().partition("=")
            given = ascii_int(value.strip(), 9)
            if name in ("gres/gpu", "gres:gpu", "gpu") and given is not None:
                count = given
    if count is None:
        raw = gv.gpus_per_task.strip()
        count = ascii_int(raw, 9)
    if count is None or count < 1 or local_tasks is None or count * local_tasks > devices:
        return None
    return count


def listed_kind(
    gv: GpuVariables, binding: str | None, listed: str, has_devices: bool, *, narrowed: bool, shared: bool
) -> GpuBinding:
    """The row of a task whose visible-device variable is set (to ``listed``).

    ``narrowed``: the list was already chosen for this task (by tfslurm or the user);
    ``shared``: a per-task binding handed every local task the node's list
    (:func:`shared_node_list`); ``has_devices``: the list names at least one device.
    """
    if narrowed:
        return "narrowed"
    if shared:
        return "whole-node-shared"
    if binding in ("map_gpu", "mask_gpu"):
        return "explicit"
    if binding in PER_TASK_BINDINGS:
        return "per-task"
    if binding == "none":
        return "none-listed"
    if not gv.slurm_manages and listed.strip() != "NoDevFiles":
        return "no-gres"
    return "per-node" if has_devices else "no-gpus"
