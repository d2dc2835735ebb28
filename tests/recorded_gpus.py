"""The GPU steps recorded on real Slurm (tests/data, read by ``observed``), as the GPU
tests use them: their ids per Slurm version, and each task's assignment.
"""

from __future__ import annotations

from collections import defaultdict

import observed
from tfslurm.errors import LayoutError
from tfslurm.gpus import (
    GpuAssignment,
    assign_gpus,
)
from tfslurm.layout import layout_for
from tfslurm.step import Step

FIXTURES = {observed.fixture_id(p): observed.load(p) for p in observed.all_paths(observed.VERSIONS)}
VERSIONS = observed.VERSIONS
GPU_FIXTURES = [
    "11_gres_gpu2",
    "12_gpus_per_task",
    "13_gpus_per_node_bind_none",
    "13b_gpus_per_node",
    "13c_gpus_total_3",
    "22_sbatch_gpus",
]
NO_SMI = "/nonexistent/nvidia-smi"  # the observed cluster has no nvidia-smi either
# How SLURMD_TRES_BIND names the gpu part (``gres/gpu:`` since 23.11's --tres-bind).
TRES_PREFIX = {"22.05": "gpu:", "24.11": "gres/gpu:", "26.05": "gres/gpu:"}


def fid_of(version: str, name: str) -> str:
    """The fixture id of recording ``name`` made on Slurm ``version``."""
    return name if version == observed.BASE_VERSION else f"{version}/{name}"


def gpu_fids(*, exclude: tuple[str, ...] = ()) -> list[str]:
    return [fid_of(v, n) for v in VERSIONS for n in GPU_FIXTURES if n not in exclude]


def job_id(fid: str) -> str:
    return FIXTURES[fid].steps["s0"][0].env["SLURM_JOB_ID"]


def assignments(fid: str, **kwargs: object) -> list[tuple[observed.Task, Step, GpuAssignment]]:
    out = []
    for tasks in FIXTURES[fid].steps.values():
        for task in tasks:
            step = Step.from_environ(task.env)
            try:
                layout = layout_for(step)
            except LayoutError:  # the arbitrary fixture's hostfile is gone: SLURM_GTIDS counts
                layout = None
            out.append((task, step, assign_gpus(step, layout, nvidia_smi=NO_SMI, **kwargs)))
    return out


def per_node(results: list[tuple[observed.Task, Step, GpuAssignment]]) -> dict[str, list[GpuAssignment]]:
    nodes: dict[str, list[GpuAssignment]] = defaultdict(list)
    for task, _step, gpu in results:
        nodes[task.hostname].append(gpu)
    return nodes
