"""Which GPUs this task owns, from what Slurm set: the devices, and the variables to export.

:func:`assign_gpus` reads the task's row of :data:`tfslurm.gpus.policy.POLICY` from its
variables (:func:`tfslurm.gpus.policy.listed_kind`) and hands out that row's devices:
a per-task list kept, a per-node list split among the node's tasks
(:func:`tfslurm.gpus.devices.split_devices`), unnamed devices (``--gpu-bind=none`` on
22.05) split only where ``nvidia-smi`` confirms them. It never hands out a device Slurm did
not give the task.
"""

from __future__ import annotations

from tfslurm.errors import GpuError
from tfslurm.gpus.devices import check_gpu_count, parse_devices, slurm_gpu_count, split_devices
from tfslurm.gpus.policy import (
    OWN_LIST_KINDS,
    gpu_binding,
    gpu_variables,
    listed_kind,
    shared_node_list,
    slurm_per_task_count,
    tres_bind_text,
)
from tfslurm.settings import ASSIGNED_VARIABLE
from tfslurm.value import Value

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # imported for type hints only: keep the TaskProlog path light
    from collections.abc import Mapping
    from typing import Final

    from tfslurm.gpus.policy import GpuBinding
    from tfslurm.layout import Layout
    from tfslurm.step import GpuVariables, Step

__all__ = ["GpuAssignment", "assign_gpus", "assign_gpus_from_env", "assigned_earlier", "node_device_list"]

# ASSIGNED_VARIABLE (tfslurm.settings) is set with the devices:
# ``<job>.<step>.<procid>:<variable>=<value>``. Assigning again in the same task (TaskProlog,
# then the resolver in Python) keeps the devices instead of splitting an already split list
# again; a copy inherited by a nested step does not match and is ignored.


class GpuAssignment(Value):
    """The GPUs of one task, and the variables to export so its runtime sees only those.

    ``devices`` are values for ``variable`` (cgroup-relative indices or MIG/GPU UUIDs);
    ``node_devices`` is what Slurm made visible to the task before tfslurm split it;
    ``source`` says why, in words. ``unbound`` counts GPUs Slurm allocated on the node
    without saying which (``--gpu-bind=none``): the task then sees them unfiltered.
    ``exports`` (filled by :func:`assign_gpus`) are the exact variables to set.
    ``per_task`` is True when ``node_devices`` is already this task's own list (Slurm's
    per-task binding, or narrowed earlier): it must not be split to find other tasks' devices.
    ``split_per_task`` is the equal share the node's list was split by (None: balanced), so
    other tasks' devices can be worked out the same way. ``kind`` is the task's row of the
    policy table.
    """

    __slots__ = (
        "devices",
        "exports",
        "kind",
        "node_devices",
        "per_task",
        "source",
        "split_per_task",
        "unbound",
        "variable",
    )
    __match_args__ = (
        "devices",
        "node_devices",
        "variable",
        "source",
        "unbound",
        "exports",
        "per_task",
        "split_per_task",
        "kind",
    )

    def __init__(
        self,
        devices: tuple[str, ...],
        node_devices: tuple[str, ...],
        variable: str,
        source: str,
        unbound: int = 0,
        exports: tuple[tuple[str, str], ...] | None = None,
        per_task: bool = False,
        split_per_task: int | None = None,
        kind: GpuBinding = "no-gpus",
    ) -> None:
        self.devices: Final = devices
        self.node_devices: Final = node_devices
        self.variable: Final = variable
        self.source: Final = source
        self.unbound: Final = unbound
        self.exports: Final = exports
        self.per_task: Final = per_task
        self.split_per_task: Final = split_per_task
        self.kind: Final = kind

    @property
    def count(self) -> int:
        """GPUs this task may use: its own devices, or the unidentified ones it sees."""
        return len(self.devices) if self.devices or not self.unbound else self.unbound

    def env(self) -> dict[str, str]:
        """Variables to export for this task.

        Every visible-device variable Slurm set is rewritten to the same selection (so CUDA,
        ROCm and OpenCL agree); with no devices they become ``""`` — but only variables
        Slurm (or the user) had set: nothing is invented, and no device is added. In a task
        of a step, ``TFSLURM_ASSIGNED_GPUS`` marks the choice so that assigning again in the
        same task keeps it.
        """
        if self.exports is not None:
            return dict(self.exports)
        if self.devices or self.node_devices:
            return {self.variable: ",".join(self.devices)}
        return {}

    def describe(self) -> str:
        shown = ",".join(self.devices) if self.devices else "none"
        return f"GPUs {shown} ({self.source})"


def assign_gpus(
    step: Step,
    layout: Layout | None = None,
    *,
    gpus_per_task: int | None = None,
    gpus_per_node: int | None = None,
    local_tasks: int | None = None,
    nvidia_smi: str = "nvidia-smi",
    assumed_devices: tuple[str, ...] | None = None,
) -> GpuAssignment:
    """This task's GPUs, from ``step.gpus`` (see :mod:`tfslurm.gpus` for the rules).

    ``assumed_devices``: the node's list where Slurm manages no GPUs and the caller vouches
    for one (TF's ``gpus_per_node=N``: devices ``0..N-1`` on every node).

    With a ``layout``, this rank's local id and its node's task count come from it (so a
    caller's own layout, e.g. the compat resolver's ``tasks_per_node``, decides the split
    consistently); without one, ``SLURM_LOCALID`` and the length of ``SLURM_GTIDS``.
    ``local_tasks`` overrides the count. A node shared by several tasks with no local id
    known is a GpuError rather than a guess. ``gpus_per_node`` (TF's argument) caps a
    per-node list at its first N devices.
    """
    local_id = step.localid
    rank = step.procid
    if layout is not None and rank is not None and 0 <= rank < layout.num_tasks:
        local_id = layout.rank_local[rank]
        if local_tasks is None:
            local_tasks = layout.tasks_on(layout.rank_node[rank])
    if local_tasks is None and step.gtids:
        local_tasks = len(step.gtids)
    if local_id is None:
        if local_tasks is not None and local_tasks > 1:
            raise GpuError(
                f"SLURM_LOCALID is not set and {local_tasks} tasks share this node: "
                "cannot tell which of the node's GPUs are this task's"
            )
        local_id = 0
    return assign_gpus_from_env(
        step.gpus,
        local_id=local_id,
        local_tasks=local_tasks,
        gpus_per_task=gpus_per_task,
        gpus_per_node=gpus_per_node,
        nvidia_smi=nvidia_smi,
        assumed_devices=assumed_devices,
    )


def node_device_list(
    env: Mapping[str, str] | GpuVariables, local_tasks: int | None = None
) -> tuple[tuple[str, ...], bool]:
    """The device list Slurm made visible to this task, and whether it is this task's own
    (Slurm's per-task binding, or narrowed earlier) rather than the node's, to be split.

    ``env`` is ``Step.gpus`` or a mapping of variables. ``()`` where no variable names
    devices (no GPU, or ``--gpu-bind=none`` on 22.05).
    """
    gv = gpu_variables(env)
    if not gv.visible:
        return (), False
    seen = _VisibleList.read(gv, local_tasks)
    return seen.devices, seen.kind in OWN_LIST_KINDS


def assign_gpus_from_env(
    env: Mapping[str, str] | GpuVariables,
    *,
    local_id: int = 0,
    local_tasks: int | None = None,
    gpus_per_task: int | None = None,
    gpus_per_node: int | None = None,
    nvidia_smi: str = "nvidia-smi",
    assumed_devices: tuple[str, ...] | None = None,
) -> GpuAssignment:
    """:func:`assign_gpus` over ``Step.gpus`` or a plain mapping of variables (what the unit
    tests use)."""
    gv = gpu_variables(env)
    _check_arguments(local_id, local_tasks, gpus_per_task, gpus_per_node)
    if assumed_devices is not None and not gv.slurm_manages:
        return _assumed(gv, assumed_devices, local_id, local_tasks, gpus_per_task, gpus_per_node)
    if gv.visible:
        return _listed(gv, local_id, local_tasks, gpus_per_task, gpus_per_node)
    on_node = slurm_gpu_count(gv)
    if on_node:
        return _unidentified(gv, on_node, local_id, local_tasks, gpus_per_task, gpus_per_node, nvidia_smi)
    return _unallocated(gpus_per_task, gpus_per_node)


def assigned_earlier(env: Mapping[str, str] | GpuVariables) -> bool:
    """Whether tfslurm already chose this task's devices (``ASSIGNED_VARIABLE`` names this
    task and the primary visible-device variable still holds what it chose). ``env`` is
    ``Step.gpus`` or a mapping of variables."""
    gv = gpu_variables(env)
    return bool(gv.visible) and _assigned_before(gv, gv.visible[0][0]) is not None


# --- the rows of the policy ----------------------------------------------------------------


class _VisibleList(Value):
    """The task's primary visible-device variable, read, and the policy row it puts the task in.

    ``narrowed`` says why the list is already this task's own (None: it is not).
    """

    __slots__ = ("devices", "kind", "narrowed", "variable")
    __match_args__ = ("variable", "devices", "narrowed", "kind")

    def __init__(
        self, variable: str, devices: tuple[str, ...], narrowed: str | None, kind: GpuBinding
    ) -> None:
        self.variable: Final = variable
        self.devices: Final = devices
        self.narrowed: Final = narrowed
        self.kind: Final = kind

    @classmethod
    def read(cls, gv: GpuVariables, local_tasks: int | None) -> _VisibleList:
        variable, value = gv.visible[0]
        devices = parse_devices(variable, value)
        binding = gpu_binding(gv.tres_bind)
        narrowed = _assigned_before(gv, variable) or _narrowed_after_slurm(gv, variable, devices)
        shared = narrowed is None and shared_node_list(gv, binding, devices, local_tasks)
        kind = listed_kind(gv, binding, value, bool(devices), narrowed=narrowed is not None, shared=shared)
        return cls(variable, devices, narrowed, kind)


def _check_arguments(
    local_id: int, local_tasks: int | None, gpus_per_task: int | None, gpus_per_node: int | None
) -> None:
    if gpus_per_task is not None:
        check_gpu_count("gpus_per_task", gpus_per_task)
    if gpus_per_node is not None:
        check_gpu_count("gpus_per_node", gpus_per_node)
    if local_tasks is not None and (not isinstance(local_tasks, int) or local_tasks < 1):
        raise GpuError(f"local task count {local_tasks!r} must be a positive integer")
    if local_tasks is not None and not 0 <= local_id < local_tasks:
        raise GpuError(f"SLURM_LOCALID={local_id} is not below the node's task count {local_tasks}")


def _assumed(
    gv: GpuVariables,
    assumed_devices: tuple[str, ...],
    local_id: int,
    local_tasks: int | None,
    gpus_per_task: int | None,
    gpus_per_node: int | None,
) -> GpuAssignment:
    """Slurm manages no GPUs; the caller vouches for ``assumed_devices`` on every node."""
    n = len(assumed_devices)
    origin = (
        f"gpus_per_node={n}: devices {','.join(assumed_devices) or 'none'} assumed on every node, as TF does"
    )
    chosen: tuple[str, ...]
    if gpus_per_task == 0:
        chosen, why = (), f"gpus_per_task=0; {origin}"
    else:
        chosen, why = _per_node(
            assumed_devices,
            "CUDA_VISIBLE_DEVICES",
            origin,
            local_id,
            local_tasks,
            gpus_per_task or None,
            gpus_per_node,
        )
    exports = _with_marker(gv, (("CUDA_VISIBLE_DEVICES", ",".join(chosen)),))
    return GpuAssignment(
        chosen,
        assumed_devices,
        "CUDA_VISIBLE_DEVICES",
        why,
        0,
        exports,
        False,
        gpus_per_task or None,
        "no-gres",
    )


def _listed(
    gv: GpuVariables,
    local_id: int,
    local_tasks: int | None,
    gpus_per_task: int | None,
    gpus_per_node: int | None,
) -> GpuAssignment:
    """A visible-device variable is set: keep the task's own list, or split the node's."""
    seen = _VisibleList.read(gv, local_tasks)
    variable, node_devices = seen.variable, seen.devices
    origin = _origin(gv, variable)
    if seen.kind == "whole-node-shared":
        if gpus_per_task is None:
            gpus_per_task = slurm_per_task_count(gv, len(node_devices), local_tasks)
        origin = f"{origin}; {tres_bind_text(gv)} gave every local task the node's list"
    per_task = seen.kind in OWN_LIST_KINDS
    chosen: tuple[str, ...]
    if gpus_per_task == 0:
        chosen, why = (), f"gpus_per_task=0; {origin}"
    elif per_task:
        how = seen.narrowed or f"per-task binding ({tres_bind_text(gv)})"
        chosen, why = _per_task(node_devices, variable, how, gpus_per_task)
    else:
        chosen, why = _per_node(
            node_devices, variable, origin, local_id, local_tasks, gpus_per_task, gpus_per_node
        )
    exports = _with_marker(gv, _exports(gv, variable, node_devices, chosen))
    return GpuAssignment(
        chosen, node_devices, variable, why, 0, exports, per_task, gpus_per_task or None, seen.kind
    )


def _unidentified(
    gv: GpuVariables,
    on_node: int,
    local_id: int,
    local_tasks: int | None,
    gpus_per_task: int | None,
    gpus_per_node: int | None,
    nvidia_smi: str,
) -> GpuAssignment:
    """Slurm allocated ``on_node`` GPUs but set no visible-device variable (--gpu-bind=none)."""
    why = "--gpu-bind=none" if gpu_binding(gv.tres_bind) == "none" else "no visible-device variable"
    if gpus_per_task == 0:
        return GpuAssignment(
            (),
            (),
            "CUDA_VISIBLE_DEVICES",
            f"gpus_per_task=0 ({why})",
            on_node,
            (),
            kind="none-unnamed",
        )
    from tfslurm.gpus.probes import count_visible_gpus  # only this case probes: not every hook run's

    seen = count_visible_gpus(executable=nvidia_smi)
    if seen == on_node:
        # The process sees exactly the GPUs Slurm allocated (device cgroup): they are 0..N-1.
        node_devices = tuple(str(i) for i in range(on_node))
        base = f"{why}: SLURM_GPUS_ON_NODE={on_node} and nvidia-smi sees exactly {on_node}"
        chosen, source = _per_node(
            node_devices, "CUDA_VISIBLE_DEVICES", base, local_id, local_tasks, gpus_per_task, gpus_per_node
        )
        exports = _with_marker(gv, (("CUDA_VISIBLE_DEVICES", ",".join(chosen)),))
        return GpuAssignment(
            chosen, node_devices, "CUDA_VISIBLE_DEVICES", source, 0, exports, kind="none-unnamed"
        )
    if gpus_per_task or gpus_per_node:
        asked = f"gpus_per_task={gpus_per_task}" if gpus_per_task else f"gpus_per_node={gpus_per_node}"
        raise GpuError(
            f"{asked}, but Slurm allocated {on_node} GPU(s) on this node without saying which "
            f"({why}; nvidia-smi sees {'?' if seen is None else seen}): they cannot be split "
            "safely; drop --gpu-bind=none"
        )
    seen_text = "nvidia-smi unavailable" if seen is None else f"nvidia-smi sees {seen}"
    source = (
        f"{why}: Slurm allocated {on_node} GPU(s) without naming them ({seen_text}); "
        "device selection left to the task"
    )
    return GpuAssignment((), (), "CUDA_VISIBLE_DEVICES", source, on_node, (), kind="none-unnamed")


def _unallocated(gpus_per_task: int | None, gpus_per_node: int | None) -> GpuAssignment:
    """Slurm gave this task no GPU: 0 GPUs, or a GpuError where some were asked for."""
    wanted = [
        f"{k}={v}" for k, v in (("gpus_per_task", gpus_per_task), ("gpus_per_node", gpus_per_node)) if v
    ]
    if wanted:
        raise GpuError(
            f"{' and '.join(wanted)} asks for GPUs, but Slurm gave this task none "
            "(no CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS or SLURM_GPUS_ON_NODE); "
            "request them with --gpus-per-task, --gpus-per-node or --gres=gpu:N"
        )
    return GpuAssignment((), (), "CUDA_VISIBLE_DEVICES", "no GPU allocated", 0, ())


def _per_task(
    own: tuple[str, ...], variable: str, how: str, gpus_per_task: int | None
) -> tuple[tuple[str, ...], str]:
    if gpus_per_task is None or gpus_per_task == len(own):
        return own, how
    if gpus_per_task > len(own):
        raise GpuError(
            f"gpus_per_task={gpus_per_task} but Slurm bound {len(own)} GPU(s) to this task "
            f"({variable}={','.join(own) or 'empty'}); request --gpus-per-task={gpus_per_task}"
        )
    return own[:gpus_per_task], f"{how}, first {gpus_per_task} of {len(own)}"


def _per_node(
    devices: tuple[str, ...],
    variable: str,
    origin: str,
    local_id: int,
    local_tasks: int | None,
    gpus_per_task: int | None,
    gpus_per_node: int | None,
) -> tuple[tuple[str, ...], str]:
    listed = f"{variable}={','.join(devices)}" if devices else f"{variable} empty"
    if gpus_per_node is not None:
        if gpus_per_node > len(devices):
            raise GpuError(
                f"gpus_per_node={gpus_per_node} but only {len(devices)} GPU(s) are visible "
                f"on this node ({listed})"
            )
        devices = devices[:gpus_per_node]
    if not devices:
        if gpus_per_task:
            raise GpuError(f"gpus_per_task={gpus_per_task} but this task has no GPU ({listed}; {origin})")
        return (), f"no GPU ({listed}; {origin})"
    if local_tasks is None:
        if gpus_per_task is None:
            return devices, f"per-node list {listed} ({origin}); tasks on this node unknown, kept whole"
        local_tasks = local_id + 1  # only this task's own block can be checked
    chosen = split_devices(devices, local_tasks, local_id, gpus_per_task)
    rule = f"gpus_per_task={gpus_per_task}" if gpus_per_task is not None else "balanced split"
    if local_tasks == 1:
        return chosen, f"per-node list {listed} ({origin}), the node's only task"
    return chosen, f"per-node list {listed} ({origin}), {rule} over {local_tasks} local tasks"


# --- helpers -----------------------------------------------------------------------------


def _exports(
    gv: GpuVariables, primary: str, node_devices: tuple[str, ...], chosen: tuple[str, ...]
) -> tuple[tuple[str, str], ...]:
    """The same selection, by position, for every visible-device variable that was set
    (``primary`` always; the others where they list as many devices)."""
    positions = [node_devices.index(d) for d in chosen]
    out: list[tuple[str, str]] = []
    for name, value in gv.visible:
        try:
            listed = parse_devices(name, value)
        except GpuError:
            continue  # a secondary variable tfslurm cannot read is left as it is
        if name == primary or len(listed) == len(node_devices):
            out.append((name, ",".join(listed[p] for p in positions)))
    return tuple(out)


def _with_marker(gv: GpuVariables, exports: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """Add ASSIGNED_VARIABLE naming this task and its primary variable's new value."""
    key = gv.task_key
    if key is None or not exports:
        return exports
    variable, value = exports[0]
    return (*exports, (ASSIGNED_VARIABLE, f"{key}:{variable}={value}"))


def _assigned_before(gv: GpuVariables, variable: str) -> str | None:
    """Why the list is this task's own, if tfslurm assigned it earlier in this very task."""
    marker = gv.assigned
    where, _, setting = marker.partition(":")
    name, _, value = setting.partition("=")
    if not marker or where != gv.task_key or name != variable or gv.value(variable) != value:
        return None  # none, from another step (nested srun), or changed since: assign afresh
    return f"assigned to this task earlier by tfslurm ({ASSIGNED_VARIABLE})"


def _narrowed_after_slurm(gv: GpuVariables, variable: str, visible: tuple[str, ...]) -> str | None:
    """Why ``visible`` is already this task's own list, if it is shorter than Slurm's.

    Slurm sets the visible-device variables and SLURM_STEP_GPUS (SLURM_JOB_GPUS in a batch
    script) with the same number of devices — observed for every binding. Fewer visible
    devices means someone narrowed the list after Slurm (tfslurm's TaskProlog, or the user):
    splitting it again would drift, so it is kept as this task's own.
    """
    name, listed = (
        ("SLURM_STEP_GPUS", gv.step_gpus) if gv.step_gpus is not None else ("SLURM_JOB_GPUS", gv.job_gpus)
    )
    raw = (listed or "").strip()
    if not raw:
        return None
    try:
        slurm_ids = parse_devices(name, raw)
    except GpuError:
        return None
    if len(visible) >= len(slurm_ids):
        return None
    return (
        f"already narrowed after Slurm ({variable}={','.join(visible) or 'empty'} of the "
        f"{len(slurm_ids)} GPU(s) in {name}={raw}), kept"
    )


def _origin(gv: GpuVariables, variable: str) -> str:
    if gv.slurm_manages:
        step_gpus = gv.step_gpus or gv.job_gpus
        return f"from Slurm, global ids {step_gpus.strip()}" if step_gpus else "from Slurm"
    if (gv.value(variable) or "").strip() == "NoDevFiles":
        return "Slurm < 19.05 marker: no GPU allocated"
    return f"{variable} set before the step: Slurm manages no GPUs here"
