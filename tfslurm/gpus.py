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

:data:`POLICY` is the whole rule as a table (binding kind x Slurm version); :func:`gpu_warnings`
says when a task's GPUs are probably not what the user asked for.

Only the standard library; the nvidia-smi probe runs only in the ``--gpu-bind=none`` case and
is bounded by a timeout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum

from tfslurm.errors import GpuError
from tfslurm.errors import clip as _clip
from tfslurm.numbers import is_ascii_number, is_int_in
from tfslurm.settings import ASSIGNED_VARIABLE, UNEVEN_VARIABLE, UnevenGpus
from tfslurm.step import VISIBLE_DEVICE_VARIABLES, GpuVariables
from tfslurm.value import Value

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # imported for type hints only: keep the TaskProlog path light
    from typing import Final

    from tfslurm.layout import Layout
    from tfslurm.step import Step

__all__ = [
    "ASSIGNED_VARIABLE",
    "POLICY",
    "VISIBLE_DEVICE_VARIABLES",
    "GpuAssignment",
    "GpuBinding",
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

# VISIBLE_DEVICE_VARIABLES (tfslurm.step): the variables that restrict which devices a GPU
# runtime sees, in the order tfslurm picks the primary one.

#: Slurm's own GPU variables: one of them set means Slurm manages GPUs for this job.
SLURM_GPU_VARIABLES = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE")

# ASSIGNED_VARIABLE (tfslurm.settings) is set with the devices:
# ``<job>.<step>.<procid>:<variable>=<value>``. Assigning again in the same task (TaskProlog,
# then the resolver in Python) keeps the devices instead of splitting an already split list
# again; a copy inherited by a nested step does not match and is ignored.

#: Devices one list may name (a node with more is not plausible; bounds memory on garbage).
MAX_DEVICES = 4096

#: Seconds the nvidia-smi probe may take before it counts as "unknown".
NVIDIA_SMI_TIMEOUT = 5.0

# --gpu-bind values under which Slurm computed a per-task device list itself.
_PER_TASK_BINDINGS = frozenset({"per_task", "map_gpu", "mask_gpu", "single", "closest"})
# Of those, the ones whose list may be the node's whole list shared by its tasks (split it).
_SPLITTABLE_BINDINGS = frozenset({"per_task", "single", "closest"})
# Characters of a device entry: an index, a GPU/MIG UUID or a ZE sub-device id ("0.1").
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/-")


class GpuBinding(Enum):
    """How Slurm described a task's GPUs: the rows of :data:`POLICY`."""

    PER_NODE = "per-node list"  # --gres=gpu:N, --gpus-per-node=N, --gpus=N: same list in every task
    PER_TASK = "per-task list"  # --gpus-per-task=N: this task's own devices
    WHOLE_NODE_SHARED = "per-task binding giving the node's whole list"  # closest on one socket
    EXPLICIT = "map_gpu/mask_gpu"  # the user named each task's devices
    NONE_LISTED = "--gpu-bind=none, devices listed"  # 24.11+: the node's list in every task
    NONE_UNNAMED = "--gpu-bind=none, devices not named"  # 22.05: only SLURM_GPUS_ON_NODE
    NARROWED = "narrowed earlier"  # a TaskProlog / earlier resolver / the user chose already
    NO_GPUS = "no GPUs"  # Slurm manages GPUs but gave this step none, or none configured
    NO_GRES = "no GRES, list from outside Slurm"  # a user's CUDA_VISIBLE_DEVICES, TF's gpus_per_node


#: The one GPU policy: binding kind x Slurm version -> the devices each task gets.
#: (``n`` devices Slurm made visible, ``t`` tasks on the node, ``g`` = gpus_per_task.)
#: docs/gpus-and-ports.md holds the same table; tests check every recorded shape against it.
_SPLIT = (
    "the node's list split among its t tasks: n//t each, the first n%t one more (g each with gpus_per_task)"
)
POLICY: dict[GpuBinding, dict[str, str]] = {
    GpuBinding.PER_NODE: dict.fromkeys(("22.05", "24.11", "26.05"), _SPLIT),
    GpuBinding.PER_TASK: dict.fromkeys(("22.05", "24.11", "26.05"), "its own list, as Slurm bound it"),
    GpuBinding.WHOLE_NODE_SHARED: dict.fromkeys(
        ("22.05", "24.11", "26.05"),
        _SPLIT.replace("gpus_per_task)", "gpus_per_task, else Slurm's --gpus-per-task)"),
    ),
    GpuBinding.EXPLICIT: dict.fromkeys(("22.05", "24.11", "26.05"), "its own list, as the user mapped it"),
    GpuBinding.NONE_LISTED: {"22.05": "(not set by 22.05)", "24.11": _SPLIT, "26.05": _SPLIT},
    GpuBinding.NONE_UNNAMED: {
        "22.05": "none named (unbound=N), unless nvidia-smi sees exactly N: then split",
        "24.11": "(24.11+ list the devices)",
        "26.05": "(24.11+ list the devices)",
    },
    GpuBinding.NARROWED: dict.fromkeys(("22.05", "24.11", "26.05"), "its list, kept (never split twice)"),
    GpuBinding.NO_GPUS: dict.fromkeys(("22.05", "24.11", "26.05"), "0 GPUs, no variable set"),
    GpuBinding.NO_GRES: dict.fromkeys(("22.05", "24.11", "26.05"), _SPLIT),
}


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
    other tasks' devices can be worked out the same way.
    """

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
    __slots__ = __match_args__

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
        kind: GpuBinding = GpuBinding.NO_GPUS,
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


def parse_devices(name: str, value: str) -> tuple[str, ...]:
    """The device entries of a visible-devices variable, in order, duplicates dropped.

    ``""`` and Slurm < 19.05's ``NoDevFiles`` mean none; like the CUDA runtime, a ``-1``
    entry ends the list (``CUDA_VISIBLE_DEVICES=-1`` hides every device). Anything else that
    is not an index or an id (``GPU-…``, ``MIG-…``, ``0.1``) is a GpuError naming ``name``.
    """
    text = value.strip()
    if text in ("", "NoDevFiles"):
        return ()
    if len(text) > 64 * MAX_DEVICES:
        raise GpuError(f"{name} is {len(text)} characters long, not a device list")
    devices: list[str] = []
    seen: set[str] = set()
    for raw in text.split(","):
        entry = raw.strip()
        if entry.startswith("-") and is_ascii_number(entry[1:], 19):
            break  # CUDA stops at the first invalid ordinal; "-1" is the usual "none" idiom
        if not (entry[:1].isalnum() and entry.isascii() and _TOKEN_CHARS.issuperset(entry)):
            raise GpuError(f"{name}={_clip(value)!r}: {entry!r} is not a device index or id")
        if entry not in seen:
            seen.add(entry)
            devices.append(entry)
        if len(devices) > MAX_DEVICES:
            raise GpuError(f"{name} lists more than {MAX_DEVICES} devices")
    return tuple(devices)


def split_devices(
    devices: Sequence[str],
    local_tasks: int,
    local_id: int,
    gpus_per_task: int | None = None,
) -> tuple[str, ...]:
    """Local task ``local_id``'s share of a node's ``devices``; no device goes to two tasks.

    * ``gpus_per_task=g``: task ``i`` gets ``devices[i*g:(i+1)*g]``; all ``local_tasks*g``
      must exist (else GpuError); devices past them stay unused.
    * ``gpus_per_task=None`` (default): a balanced contiguous split that uses every device:
      with ``n`` devices and ``t`` tasks each task gets ``n // t``, and the first ``n % t``
      tasks one more. So 3 GPUs over 2 tasks is ``[0,1]`` and ``[2]``; 1 GPU over 2 tasks
      is ``[0]`` and ``[]`` (a device is never shared: TF takes all of a GPU's memory).

    Pass ``gpus_per_task`` for equal counts (MultiWorkerMirroredStrategy needs the same
    device count on every worker).
    """
    if not is_int_in(local_tasks, 1):
        raise GpuError(f"local task count {local_tasks!r} must be a positive integer")
    if not is_int_in(local_id, 0, local_tasks - 1):
        raise GpuError(f"local id {local_id!r} is not in 0..{local_tasks - 1}")
    n = len(devices)
    if gpus_per_task is not None:
        _check_count("gpus_per_task", gpus_per_task)
        if local_tasks * gpus_per_task > n:
            raise GpuError(
                f"gpus_per_task={gpus_per_task} for {local_tasks} task(s) on this node needs "
                f"{local_tasks * gpus_per_task} GPU(s), but only {n} are visible "
                f"({','.join(devices) or 'none'})"
            )
        return tuple(devices[local_id * gpus_per_task : (local_id + 1) * gpus_per_task])
    share, extra = divmod(n, local_tasks)
    start = local_id * share + min(local_id, extra)
    return tuple(devices[start : start + share + (1 if local_id < extra else 0)])


def count_visible_gpus(timeout: float = NVIDIA_SMI_TIMEOUT, executable: str = "nvidia-smi") -> int | None:
    """How many GPUs ``nvidia-smi --list-gpus`` shows this process; None if it cannot tell.

    A missing executable, a failure, unreadable output or a run longer than ``timeout``
    seconds all give None (never FileNotFoundError or a hang).
    """
    import subprocess  # only the --gpu-bind=none case pays for it

    try:
        done = subprocess.run(
            [executable, "--list-gpus"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if done.returncode != 0:
        return None
    return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))


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
    """This task's GPUs, from ``step.gpus`` (see the module docstring for the rules).

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


def _gpu_variables(env: Mapping[str, str] | GpuVariables) -> GpuVariables:
    """The GPU variables of a task: a ``Step``'s, or read from a plain mapping."""
    return env if isinstance(env, GpuVariables) else GpuVariables.from_environ(env)


def node_device_list(
    env: Mapping[str, str] | GpuVariables, local_tasks: int | None = None
) -> tuple[tuple[str, ...], bool]:
    """The device list Slurm made visible to this task, and whether it is this task's own
    (Slurm's per-task binding, or narrowed earlier) rather than the node's, to be split.

    ``env`` is ``Step.gpus`` or a mapping of variables. ``()`` where no variable names
    devices (no GPU, or ``--gpu-bind=none`` on 22.05).
    """
    gv = _gpu_variables(env)
    if not gv.visible:
        return (), False
    variable, value = gv.visible[0]
    devices = parse_devices(variable, value)
    binding = _gpu_binding(gv.tres_bind)
    narrowed = _assigned_before(gv, variable) or _narrowed_after_slurm(gv, variable, devices)
    shared = narrowed is None and _shared_node_list(gv, binding, devices, local_tasks)
    return devices, (binding in _PER_TASK_BINDINGS and not shared) or narrowed is not None


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
    gv = _gpu_variables(env)
    if gpus_per_task is not None:
        _check_count("gpus_per_task", gpus_per_task)
    if gpus_per_node is not None:
        _check_count("gpus_per_node", gpus_per_node)
    if local_tasks is not None and (not isinstance(local_tasks, int) or local_tasks < 1):
        raise GpuError(f"local task count {local_tasks!r} must be a positive integer")
    if local_tasks is not None and not 0 <= local_id < local_tasks:
        raise GpuError(f"SLURM_LOCALID={local_id} is not below the node's task count {local_tasks}")

    present = [name for name, _ in gv.visible]
    binding = _gpu_binding(gv.tres_bind)
    chosen: tuple[str, ...]
    if assumed_devices is not None and not gv.slurm_manages:
        n = len(assumed_devices)
        origin = f"gpus_per_node={n}: devices {','.join(assumed_devices) or 'none'} assumed on every node, as TF does"
        chosen, why = (
            _per_node(
                assumed_devices,
                "CUDA_VISIBLE_DEVICES",
                origin,
                local_id,
                local_tasks,
                gpus_per_task or None,
                gpus_per_node,
            )
            if gpus_per_task != 0
            else ((), f"gpus_per_task=0; {origin}")
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
            GpuBinding.NO_GRES,
        )
    if present:
        variable, value = gv.visible[0]
        node_devices = parse_devices(variable, value)
        origin = _origin(gv, variable)
        narrowed = _assigned_before(gv, variable) or _narrowed_after_slurm(gv, variable, node_devices)
        shared = narrowed is None and _shared_node_list(gv, binding, node_devices, local_tasks)
        per_task = (binding in _PER_TASK_BINDINGS and not shared) or narrowed is not None
        if shared and gpus_per_task is None:
            gpus_per_task = _slurm_per_task_count(gv, len(node_devices), local_tasks)
        if shared:
            origin = f"{origin}; {_tres_bind(gv)} gave every local task the node's list"
        if gpus_per_task == 0:
            chosen, why = (), f"gpus_per_task=0; {origin}"
        elif per_task:
            how = narrowed or f"per-task binding ({_tres_bind(gv)})"
            chosen, why = _per_task(node_devices, variable, how, gpus_per_task)
        else:
            chosen, why = _per_node(
                node_devices, variable, origin, local_id, local_tasks, gpus_per_task, gpus_per_node
            )
        exports = _with_marker(gv, _exports(gv, present, node_devices, chosen))
        if narrowed is not None:
            kind = GpuBinding.NARROWED
        elif shared:
            kind = GpuBinding.WHOLE_NODE_SHARED
        elif binding in ("map_gpu", "mask_gpu"):
            kind = GpuBinding.EXPLICIT
        elif per_task:
            kind = GpuBinding.PER_TASK
        elif binding == "none":
            kind = GpuBinding.NONE_LISTED
        elif not gv.slurm_manages and value.strip() != "NoDevFiles":
            kind = GpuBinding.NO_GRES
        else:
            kind = GpuBinding.PER_NODE if node_devices else GpuBinding.NO_GPUS
        return GpuAssignment(
            chosen, node_devices, variable, why, 0, exports, per_task, gpus_per_task or None, kind
        )

    on_node = _slurm_count(gv)
    if on_node:
        return _unidentified(
            gv, on_node, binding, local_id, local_tasks, gpus_per_task, gpus_per_node, nvidia_smi
        )
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


# --- the cases ---------------------------------------------------------------------------


def _shared_node_list(
    gv: GpuVariables, binding: str | None, devices: tuple[str, ...], local_tasks: int | None
) -> bool:
    """Whether a "per-task" list is in fact the node's whole list, handed to several tasks.

    ``--gpu-bind=closest`` on a node whose GPUs all sit by one socket gives every task of
    the node the step's whole list (``closest`` picks GPUs, not a share of them). A list as
    long as ``SLURM_GPUS_ON_NODE`` while other tasks share the node is that case: it is
    split like a per-node list. ``map_gpu``/``mask_gpu`` name devices explicitly (sharing
    them is the user's choice) and stay as Slurm bound them.
    """
    if binding not in _SPLITTABLE_BINDINGS or local_tasks is None or local_tasks < 2 or not devices:
        return False
    raw = (gv.gpus_on_node or "").strip()
    return is_ascii_number(raw, 9) and int(raw) == len(devices)


def _slurm_per_task_count(gv: GpuVariables, devices: int, local_tasks: int | None) -> int | None:
    """GPUs per task the user asked Slurm for, if it fits the node's list; else None.

    Slurm says it as ``SLURMD_TRES_BIND=…per_task:N``, ``SLURM_TRES_PER_TASK=gres/gpu=N``
    (23.02+) or ``SLURM_GPUS_PER_TASK=N`` (older sbatch jobs).
    """
    count: int | None = None
    bind = gv.tres_bind
    if "per_task:" in bind:
        digits = bind.split("per_task:", 1)[1].split(",")[0].split(";")[0].strip()
        count = int(digits) if is_ascii_number(digits, 9) else None
    if count is None:
        for part in gv.tres_per_task.split(","):
            name, _, value = part.strip().partition("=")
            if name in ("gres/gpu", "gres:gpu", "gpu") and is_ascii_number(value.strip(), 9):
                count = int(value)
    if count is None:
        raw = gv.gpus_per_task.strip()
        count = int(raw) if is_ascii_number(raw, 9) else None
    if count is None or count < 1 or local_tasks is None or count * local_tasks > devices:
        return None
    return count


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


def _unidentified(
    gv: GpuVariables,
    on_node: int,
    binding: str | None,
    local_id: int,
    local_tasks: int | None,
    gpus_per_task: int | None,
    gpus_per_node: int | None,
    nvidia_smi: str,
) -> GpuAssignment:
    """Slurm allocated ``on_node`` GPUs but set no visible-device variable (--gpu-bind=none)."""
    why = "--gpu-bind=none" if binding == "none" else "no visible-device variable"
    if gpus_per_task == 0:
        return GpuAssignment(
            (),
            (),
            "CUDA_VISIBLE_DEVICES",
            f"gpus_per_task=0 ({why})",
            on_node,
            (),
            kind=GpuBinding.NONE_UNNAMED,
        )
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
            chosen, node_devices, "CUDA_VISIBLE_DEVICES", source, 0, exports, kind=GpuBinding.NONE_UNNAMED
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
    return GpuAssignment((), (), "CUDA_VISIBLE_DEVICES", source, on_node, (), kind=GpuBinding.NONE_UNNAMED)


# --- helpers -----------------------------------------------------------------------------


def _exports(
    gv: GpuVariables, present: list[str], node_devices: tuple[str, ...], chosen: tuple[str, ...]
) -> tuple[tuple[str, str], ...]:
    """The same selection, by position, for every visible-device variable that was set."""
    positions = [node_devices.index(d) for d in chosen]
    out: list[tuple[str, str]] = []
    for name, value in gv.visible:
        try:
            listed = parse_devices(name, value)
        except GpuError:
            continue  # a secondary variable tfslurm cannot read is left as it is
        if name == present[0] or len(listed) == len(node_devices):
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


def assigned_earlier(env: Mapping[str, str] | GpuVariables) -> bool:
    """Whether tfslurm already chose this task's devices (``ASSIGNED_VARIABLE`` names this
    task and the primary visible-device variable still holds what it chose). ``env`` is
    ``Step.gpus`` or a mapping of variables."""
    gv = _gpu_variables(env)
    return bool(gv.visible) and _assigned_before(gv, gv.visible[0][0]) is not None


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


def _slurm_count(gv: GpuVariables) -> int:
    raw = (gv.gpus_on_node or "").strip()
    if raw:
        if not is_ascii_number(raw, 6):
            raise GpuError(f"SLURM_GPUS_ON_NODE={_clip(raw)!r} is not a GPU count")
        return int(raw)
    ids = (gv.step_gpus or "").strip()
    return len(parse_devices("SLURM_STEP_GPUS", ids)) if ids else 0


def slurm_gpu_binding(env: Mapping[str, str] | GpuVariables) -> str | None:
    """How Slurm bound GPUs to tasks (``SLURMD_TRES_BIND``): 'none', 'per_task', 'map_gpu',
    'mask_gpu', 'single', 'closest', or None for the default (a per-node list)."""
    return _gpu_binding(_gpu_variables(env).tres_bind)


def _gpu_binding(tres_bind: str) -> str | None:
    """The gpu part of SLURMD_TRES_BIND: 'none', 'per_task', 'map_gpu', ... or None."""
    for part in tres_bind.replace("+", ";").split(";"):
        part = part.strip()
        for prefix in ("gres/gpu:", "gpu:"):
            if part.startswith(prefix):
                words = [w for w in part[len(prefix) :].replace(":", ",").split(",") if w and w != "verbose"]
                return words[0] if words else None
    return None


def _tres_bind(gv: GpuVariables) -> str:
    return f"SLURMD_TRES_BIND={gv.tres_bind.strip()}"


def check_gpu_count(name: str, value: object) -> None:
    """GpuError unless ``value`` (the argument ``name``) is a GPU count: 0..MAX_DEVICES."""
    _check_count(name, value)


def _check_count(name: str, value: object) -> None:
    if not is_int_in(value, 0):
        raise GpuError(f"{name}={value!r} must be a non-negative integer")
    if value > MAX_DEVICES:
        raise GpuError(f"{name}={value} is more GPUs than any node has")


# --- warnings: a task's GPUs that are probably not what the user asked for ---------------

# UNEVEN_VARIABLE (tfslurm.settings), ``warn`` (default) or ``error``: whether unequal GPU
# counts among the step's tasks only warn or are a GpuError (MWMS needs equal counts).

#: Every warning line starts with this.
WARNING_PREFIX = "tfslurm: warning: "


def node_gpu_files(dev_dir: str = "/dev") -> tuple[str, ...]:
    """NVIDIA GPU device files (``nvidia0``, ``nvidia1``, ...) in ``dev_dir``: a cheap
    "this node has GPUs" check (one directory read; never nvidia-smi)."""
    import os

    try:
        names = os.listdir(dev_dir)
    except OSError:
        return ()
    return tuple(
        sorted(
            (n for n in names if n.startswith("nvidia") and is_ascii_number(n[6:], 9)),
            key=lambda n: int(n[6:]),
        )
    )


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
    gv = step.gpus
    mode = step.settings.uneven_gpus()  # a GpuError for a value that is not warn/error
    rank = step.procid
    if rank is None or not 0 <= rank < layout.num_tasks:
        return ()
    node = layout.rank_node[rank]
    local_id = layout.rank_local[rank]
    local_tasks = layout.tasks_on(node)
    nodes = len(layout.nodes)
    out: list[str] = []

    if not assignment.node_devices and not assignment.unbound and not _slurm_count(gv):
        if gv.slurm_manages or gpus_per_node is not None:
            return ()
        files = node_gpu_files(dev_dir) if local_id == 0 else ()
        if files:
            out.append(
                f"{WARNING_PREFIX}Slurm allocated no GPUs to this step, but node "
                f"{layout.nodes[node]} has {len(files)} ({dev_dir}/{files[0]}...): the tasks train on "
                "the CPU; request --gres=gpu:N (or --gpus-per-node=N), or pass gpus_per_node=N"
            )
        return tuple(out)
    if assignment.unbound:
        return ()  # --gpu-bind=none on 22.05: the task sees them all, nothing is split

    bound = assignment.per_task and slurm_gpu_binding(gv) in _PER_TASK_BINDINGS
    node_gpus = _node_gpu_count(gv, assignment, gpus_per_node)
    per_task = gpus_per_task if gpus_per_task is not None else assignment.split_per_task
    if bound or node_gpus is None:
        # Slurm chose each task's devices itself (equal by construction), or the node's
        # list is not known here: only this task's own count can be judged.
        mine = len(assignment.devices)
        if mine == 0 and node_gpus is not None and node_gpus > 0 and gpus_per_task != 0:
            out.append(_zero_line(rank, layout.nodes[node], node_gpus, local_tasks))
        return tuple(out)

    def shares(gpus: int, tasks: int) -> list[int]:
        if per_task is not None:
            return [per_task if gpus >= per_task * tasks else 0] * tasks
        share, extra = divmod(gpus, tasks)
        return [share + (1 if i < extra else 0) for i in range(tasks)]

    local = shares(node_gpus, local_tasks)
    counts = layout.task_counts
    others: set[int] = set()  # the shares tasks of other nodes get (one call per count)
    for tasks in set(counts[:node] + counts[node + 1 :]):
        others.update(shares(node_gpus, tasks))
    total = gv.gpus_total
    all_tasks = layout.num_tasks
    by_total = is_ascii_number(total, 9) and nodes > 1 and gpus_per_node is None and per_task is None
    if by_total:
        # --gpus=N (24.11+ say N): Slurm may give nodes different counts, so the uniform
        # assumption does not hold. Every task holding this node's share s would need
        # s * all_tasks GPUs in all; a node whose share differs from that is a node of an
        # uneven split — and when shares differ, at least one node's does.
        cross_uneven = len(set(local)) == 1 and local[0] * all_tasks != int(total)
    elif assignment.kind is GpuBinding.WHOLE_NODE_SHARED:
        cross_uneven = False  # allocated per task (--gpus-per-task): other nodes hold as many per task
    else:
        cross_uneven = len(others.union(local)) > 1 and len(set(local)) == 1
    if gpus_per_task == 0:
        return ()
    mine = local[local_id]
    if mine == 0 and (any(local) or any(others)):
        out.append(_zero_line(rank, layout.nodes[node], node_gpus, local_tasks))
    if 0 < node_gpus < local_tasks and local_id == 0:
        out.append(
            f"{WARNING_PREFIX}node {layout.nodes[node]} has {node_gpus} GPU(s) for {local_tasks} tasks: "
            f"{local_tasks - node_gpus} task(s) get none (a GPU is never shared); request at least "
            "one GPU per task (--gpus-per-task=1)"
        )
    local_uneven = len(set(local)) > 1
    if local_uneven or cross_uneven:
        if local_uneven:
            where = f"{', '.join(map(str, local))} on node {layout.nodes[node]}"
        elif by_total:
            where = f"{local[0]} per task on node {layout.nodes[node]}, but SLURM_GPUS={total} for {all_tasks} tasks"
        else:
            where = (
                f"{mine} here, {', '.join(map(str, sorted(others - {mine})))} on other nodes "
                f"if they hold {node_gpus} GPUs like this one"
            )
        what = (
            f"tasks get unequal GPU counts ({where}); MultiWorkerMirroredStrategy needs the same count "
            "on every worker: request --gpus-per-task=N or --gres=gpu:N with N a multiple of the tasks per node"
        )
        if mode is UnevenGpus.ERROR:
            raise GpuError(f"{what} ({UNEVEN_VARIABLE}=error)")
        if local_id == 0 if (local_uneven or by_total) else rank == 0:
            out.append(f"{WARNING_PREFIX}{what} ({UNEVEN_VARIABLE}=error makes this an error)")
    return tuple(out)


def _zero_line(rank: int, node: str, node_gpus: int, local_tasks: int) -> str:
    return (
        f"{WARNING_PREFIX}task {rank} on {node} gets 0 GPUs while other tasks of the step have some "
        f"({node_gpus} GPU(s) for {local_tasks} task(s) on the node): it runs on the CPU; request "
        "--gpus-per-task=N, or --gres=gpu:N with N a multiple of the tasks per node"
    )


def _node_gpu_count(gv: GpuVariables, assignment: GpuAssignment, gpus_per_node: int | None) -> int | None:
    """GPUs Slurm gave this node for the step (before tfslurm split them), or None."""
    if not assignment.per_task:
        count = len(assignment.node_devices)
    else:
        raw = (gv.gpus_on_node or "").strip()
        if not is_ascii_number(raw, 9):
            return None
        count = int(raw)
    return min(count, gpus_per_node) if gpus_per_node is not None else count
