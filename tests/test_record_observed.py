"""The recorder of tests/data/observed (tests/record_observed.py) on this machine's Slurm.

It records a few experiments afresh on a real cluster; where Slurm placed every task and
what it told the task about its step must be what the committed recordings of this Slurm
version say. A unit test checks that every version holds every experiment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import observed
import record_observed
from conftest import skip_or_fail
from plugin_build import build_plugin, build_tools_missing
from tfslurm.localcluster import missing_requirements, slurm_version

# What fixes a task's place in its step: the same on every run of the same command.
PLACEMENT = (
    "hostname", "SLURMD_NODENAME", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_GTIDS",
    "SLURM_STEP_ID", "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES", "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_TASKS_PER_NODE", "SLURM_JOB_NODELIST", "SLURM_HET_SIZE",
    "SLURM_ARBITRARY_NODELIST", "CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "FOO",
)  # fmt: skip
RECORDED = ["03_cyclic_N3_n6", "09_arbitrary_hostfile", "10_het_srun", "13c_gpus_total_3", "20_sbatch_steps"]


# Where the command gives no -m, SLURM_DISTRIBUTION depends on the cluster's configuration
# (a het component of one task saw "cyclic" on the reference cluster, "block" here).
CHOSEN_DISTRIBUTION = ("SLURM_DISTRIBUTION",)


def placement(task: observed.Task, fixture: observed.Fixture) -> dict[str, str | None]:
    names = PLACEMENT + (CHOSEN_DISTRIBUTION if " -m " in fixture.command else ())
    return {name: task.env.get(name) if name != "hostname" else task.hostname for name in names}


def test_every_version_holds_every_experiment() -> None:
    names = {e.name for e in record_observed.experiments(["n1", "n2", "n3", "n4"])}
    for version in observed.VERSIONS:
        recorded = {p.stem for p in observed.version_dir(version).glob("*.txt")}
        assert recorded == names, version


@pytest.mark.cluster
def test_recorder_reproduces_this_slurms_recordings(tmp_path: Path) -> None:
    missing = missing_requirements() or build_tools_missing()
    if missing:
        skip_or_fail(f"cannot record: {missing}")
    version = slurm_version()
    if version not in observed.VERSIONS:
        pytest.fail(f"Slurm {version} has no recordings in tests/data/observed: record them first "
                    f"(tests/record_observed.py) and add the version to tests/observed.py")  # fmt: skip
    plugin = build_plugin(tmp_path / "build")
    assert record_observed.main(["--out", str(tmp_path / "out"), "--plugin", str(plugin), *RECORDED]) == 0
    for name in RECORDED:
        new = observed.load(tmp_path / "out" / f"{name}.txt")
        old = observed.load(observed.version_dir(version) / f"{name}.txt")
        assert new.header.get("exit code") == old.header.get("exit code"), name
        assert sorted(new.steps) == sorted(old.steps), name
        for label, tasks in old.steps.items():
            assert [placement(t, new) for t in new.steps[label]] == [placement(t, old) for t in tasks], (
                name,
                label,
            )
        if old.batch is not None:
            assert new.batch is not None and placement(new.batch, new) == placement(old.batch, old), name
