"""Device lists: reading a visible-devices variable, and sharing a node's list among its tasks.

Entries are kept as opaque strings (cgroup-relative indices, GPU/MIG UUIDs, ``ZE``
sub-device ids such as ``0.1``): tfslurm never translates one form into another.
"""

from __future__ import annotations

from tfslurm.errors import GpuError, clip
from tfslurm.numbers import ascii_int, is_ascii_number, is_int_in

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # imported for type hints only: keep the TaskProlog path light
    from collections.abc import Sequence

    from tfslurm.step import GpuVariables

__all__ = ["MAX_DEVICES", "check_gpu_count", "parse_devices", "slurm_gpu_count", "split_devices"]

#: Devices one list may name (a node with more is not plausible; bounds memory on garbage).
MAX_DEVICES = 4096

# Characters of a device entry: an index, a GPU/MIG UUID or a ZE sub-device id ("0.1").
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/-")


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
            raise GpuError(f"{name}={clip(value)!r}: {entry!r} is not a device index or id")
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
        check_gpu_count("gpus_per_task", gpus_per_task)
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


def check_gpu_count(name: str, value: object) -> None:
    """GpuError unless ``value`` (the argument ``name``) is a GPU count: 0..MAX_DEVICES."""
    if not is_int_in(value, 0):
        raise GpuError(f"{name}={value!r} must be a non-negative integer")
    if value > MAX_DEVICES:
        raise GpuError(f"{name}={value} is more GPUs than any node has")


def slurm_gpu_count(gv: GpuVariables) -> int:
    """GPUs Slurm allocated to the task's node for the step: ``SLURM_GPUS_ON_NODE``, else the
    length of ``SLURM_STEP_GPUS``; 0 where neither is set."""
    raw = (gv.gpus_on_node or "").strip()
    if raw:
        count = ascii_int(raw, 6)
        if count is None:
            raise GpuError(f"SLURM_GPUS_ON_NODE={clip(raw)!r} is not a GPU count")
        return count
    ids = (gv.step_gpus or "").strip()
    return len(parse_devices("SLURM_STEP_GPUS", ids)) if ids else 0
