"""What a container did to a ``--tf-dist`` task's environment, said in one line.

At a pyxis site the SPANK plugin, listed after pyxis, runs the hook on the host for a task
that pyxis has already put into its container (``plugin/src/container.h``). pyxis copies the
container's environment over the task's: the image's variables and what enroot's hooks add
(``50-slurm-pytorch.sh`` writes MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK when
the image sets PYTORCH_VERSION). The hook then sees two environments: the step's on the host,
before the container (``outside``), and the task's inside it (``inside``). The plugin applies
the plan's variables after pyxis, so they win; a GPU variable the image sets and the plan does
not set wins over Slurm's. Both are told on the task's stderr, in one line, so neither
replacement is silent.

Standard library only: the hook imports this module for containerised tasks.
"""

from __future__ import annotations

from tfslurm.errors import clip, one_line
from tfslurm.gpus.policy import PER_TASK_BINDINGS, gpu_binding
from tfslurm.step import VISIBLE_DEVICE_VARIABLES, GpuVariables

# typing.TYPE_CHECKING without importing typing: the hook imports this module
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["GPU_VARIABLES", "gpu_overrides", "replaced", "warning"]

#: Variables that choose a task's GPUs: Slurm sets them, the plan reads them.
GPU_VARIABLES = VISIBLE_DEVICE_VARIABLES
#: Longest warning line, in characters.
MAX_LINE = 600


def replaced(
    outside: Mapping[str, str], inside: Mapping[str, str], changes: Mapping[str, str | None]
) -> list[str]:
    """Names the plan sets that the container had set to another value (image or hook).

    GPU variables are not among them: the plan takes its GPUs from the task's value, so a
    container's value wins there (:func:`gpu_overrides`).
    """
    return sorted(
        name
        for name, value in changes.items()
        if value is not None
        and name not in GPU_VARIABLES
        and name in inside
        and inside[name] != outside.get(name)
        and inside[name] != value
    )


def gpu_overrides(outside: Mapping[str, str], inside: Mapping[str, str]) -> list[tuple[str, str, str | None]]:
    """``(name, inside value, Slurm's value)`` for GPU variables the container replaced.

    The plan reads the task's value, so the container's wins, also where the plan sets the
    variable (it narrows the container's list). Under per-task binding Slurm narrows the
    node's list for each task after the step's environment was made, so a value that only
    picks from the node's list is Slurm's own.
    """
    slurm = dict(GpuVariables.from_environ(outside).visible)
    task = GpuVariables.from_environ(inside)
    per_task = gpu_binding(task.tres_bind) in PER_TASK_BINDINGS
    found = []
    for name, got in task.visible:
        had = slurm.get(name)
        if got == had:
            continue
        if per_task and had is not None and set(got.split(",")) <= set(had.split(",")):
            continue
        found.append((name, got, had))
    return found


def warning(
    outside: Mapping[str, str], inside: Mapping[str, str], changes: Mapping[str, str | None]
) -> str | None:
    """The one line for the task's stderr, or None when the container changed nothing."""
    parts = []
    names = replaced(outside, inside, changes)
    if names:
        parts.append(
            f"--tf-dist's values replace {', '.join(names)} set by the container image or an enroot hook"
        )
    for name, got, had in gpu_overrides(outside, inside):
        slurm = f"Slurm's {clip(had, 40)}" if had is not None else "no value from Slurm"
        parts.append(f"the container's {name}={clip(got, 40)} replaces {slurm} and is what the task uses")
    if not parts:
        return None
    return one_line("tfslurm: " + "; ".join(parts), MAX_LINE)
