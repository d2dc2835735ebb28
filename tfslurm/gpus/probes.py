"""What the node itself says about its GPUs, where Slurm's variables do not say enough.

Both probes are cheap or bounded: :func:`node_gpu_files` reads one directory, and
:func:`count_visible_gpus` runs ``nvidia-smi`` (only in the ``--gpu-bind=none`` case on
Slurm 22.05, where no variable names the devices) under a timeout. ``subprocess`` is
imported only when that probe runs: the TaskProlog hook imports this module on every node.
"""

from __future__ import annotations

from tfslurm.numbers import ascii_int

__all__ = ["NVIDIA_SMI_TIMEOUT", "count_visible_gpus", "node_gpu_files"]

#: Seconds the nvidia-smi probe may take before it counts as "unknown".
NVIDIA_SMI_TIMEOUT = 5.0


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
            (n for n in names if n.startswith("nvidia") and ascii_int(n[6:], 9) is not None),
            key=lambda n: ascii_int(n[6:], 9) or 0,
        )
    )
