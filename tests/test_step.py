"""Step model: contexts, fields and errors, over real recorded Slurm environments."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import observed
from tfslurm.errors import SlurmEnvError
from tfslurm.step import HetComponent, Step

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

FIXTURES = {observed.fixture_id(p): observed.load(p) for p in observed.all_paths()}


def task_env(name: str, step: str = "s0", procid: int = 0) -> dict[str, str]:
    return dict(FIXTURES[name].steps[step][procid].env)


@pytest.mark.parametrize("fid", sorted(FIXTURES))
def test_each_recorded_task_is_a_step_task_with_own_identity(fid: str) -> None:
    for tasks in FIXTURES[fid].steps.values():
        for task in tasks:
            step = Step.from_environ(task.env)
            assert step.context == "step"
            assert step.procid == task.procid
            assert step.node_name == task.hostname
            assert step.localid == int(task.env["SLURM_LOCALID"])
            assert step.nodeid == int(task.env["SLURM_NODEID"])
            assert step.nodelist == task.env["SLURM_STEP_NODELIST"]
            assert step.tasks_per_node == task.env["SLURM_STEP_TASKS_PER_NODE"]
            assert step.num_tasks == len(tasks)
            assert step.gtids is not None and step.procid in step.gtids
            assert step.job_id == int(task.env["SLURM_JOB_ID"])
            assert step.step_id == int(task.env["SLURM_STEP_ID"])
            step.require("nodelist", "tasks_per_node", "procid", "gtids")


@pytest.mark.parametrize("fid", [f for f in sorted(FIXTURES) if FIXTURES[f].batch])
def test_batch_script_is_batch_and_says_so(fid: str) -> None:
    step = Step.from_environ(FIXTURES[fid].batch.env)
    assert step.context == "batch"
    assert step.nodelist is None and step.step_id is None
    with pytest.raises(
        SlurmEnvError, match=r"^SLURM_STEP_NODELIST is not set: this is a batch script.*srun$"
    ):
        step.require("procid", "nodelist")


def test_salloc_shell_is_an_allocation() -> None:
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NNODES": "2"}
    step = Step.from_environ(env)
    assert step.context == "allocation"
    with pytest.raises(SlurmEnvError, match="SLURM_PROCID is not set: this is an salloc shell"):
        step.require("procid")


def test_outside_slurm() -> None:
    step = Step.from_environ({"PATH": "/bin", "HOME": "/root"})
    assert step.context == "outside"
    assert step.env == {}
    with pytest.raises(SlurmEnvError, match="not running under Slurm"):
        step.require("nodelist")


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(__import__("os").environ):
        if name.startswith("SLURM"):
            monkeypatch.delenv(name)
    for name, value in task_env("07_uneven_N3_n7", procid=5).items():
        monkeypatch.setenv(name, value)
    step = Step.from_environ()
    assert (step.procid, step.node_name, step.localid) == (5, "node2", 1)


def test_missing_in_a_step_names_the_step() -> None:
    step = Step.from_environ(task_env("01_block_N3_tpn2"))
    assert step.hostfile is None and step.het == () and step.distribution is None
    with pytest.raises(SlurmEnvError, match=r"^SLURM_HOSTFILE is not set: .* task of job \d+ step 0$"):
        step.require("hostfile")
    with pytest.raises(SlurmEnvError, match="SLURM_HET_SIZE is not set"):
        step.require("het")


def test_require_rejects_unknown_field_names() -> None:
    with pytest.raises(ValueError, match="no field 'nodes'"):
        Step.from_environ({}).require("nodes")


def test_distribution_plane_hostfile_fields() -> None:
    plane = Step.from_environ(task_env("04_plane2_N2_n6"))
    assert (plane.distribution, plane.plane_size) == ("plane", 2)
    arbitrary = Step.from_environ(task_env("09_arbitrary_hostfile"))
    assert arbitrary.distribution == "arbitrary"
    assert arbitrary.hostfile and arbitrary.hostfile.endswith("/hostfile")
    ports = Step.from_environ(task_env("15_resv_ports_3"))
    assert ports.resv_ports and "-" in ports.resv_ports


def test_het_components_from_srun_pack_group_variables() -> None:
    # srun A : B sets only *_PACK_GROUP_n job variables, and no per-component task counts.
    step = Step.from_environ(task_env("10_het_srun", procid=3))
    assert [c.index for c in step.het] == [0, 1]
    assert step.het[0].nodelist == "node1" and step.het[1].nodelist == "node[2-3]"
    assert step.het[1].job_id == step.het[0].job_id + 1
    assert step.het[1].num_tasks is None and step.het[1].cpus_per_node == "2,1"


def test_het_components_from_sbatch_het_group_variables() -> None:
    step = Step.from_environ(task_env("21_sbatch_hetjob", "s0_het01", 2))
    assert step.het == (
        HetComponent(0, step.job_id, "node1", 1, 1, "1", "1"),
        HetComponent(1, step.job_id + 1, "node[2-3]", 2, 4, "3,1", "3,1"),
    )


def test_het_group_name_wins_over_pack_group_name() -> None:
    env = {
        "SLURM_JOB_ID": "5",
        "SLURM_HET_SIZE": "1",
        "SLURM_JOB_NODELIST_HET_GROUP_0": "a1",
        "SLURM_JOB_NODELIST_PACK_GROUP_0": "b1",
    }
    assert Step.from_environ(env).het[0].nodelist == "a1"


def test_env_is_a_read_only_copy_of_slurm_and_gpu_variables() -> None:
    env = task_env("12_gpus_per_task") | {"HOME": "/root", "TFSLURM_TF_DIST": "worker:*"}
    step = Step.from_environ(env)
    assert step.env["CUDA_VISIBLE_DEVICES"] == env["CUDA_VISIBLE_DEVICES"]
    assert step.env["TFSLURM_TF_DIST"] == "worker:*"
    assert "HOME" not in step.env
    env["SLURM_PROCID"] = "99"
    assert step.env["SLURM_PROCID"] != "99"
    with pytest.raises(TypeError):
        step.env["SLURM_PROCID"] = "1"  # type: ignore[index]


@pytest.mark.parametrize(
    "name, value",
    [
        ("SLURM_PROCID", "x1"),
        ("SLURM_LOCALID", "-1"),
        ("SLURM_NODEID", "1.0"),
        ("SLURM_STEP_NUM_TASKS", "4 tasks"),
        ("SLURM_DIST_PLANESIZE", "0"),
        ("SLURM_HET_SIZE", "two"),
        ("SLURM_RESTART_COUNT", "\u0663"),
        ("SLURM_JOB_ID", "1e3"),
    ],
)
def test_malformed_numbers_name_the_variable(name: str, value: str) -> None:
    env = task_env("01_block_N3_tpn2") | {name: value}
    with pytest.raises(SlurmEnvError, match=f"^{name}="):
        Step.from_environ(env)


def test_malformed_gtids() -> None:
    env = task_env("01_block_N3_tpn2") | {"SLURM_GTIDS": "0,,1"}
    with pytest.raises(SlurmEnvError, match=r"^SLURM_GTIDS='0,,1' is not a comma-separated list"):
        Step.from_environ(env)


def test_restart_count_defaults_to_zero_and_is_read() -> None:
    env = task_env("01_block_N3_tpn2")
    assert Step.from_environ(env).restart_count == 0
    assert Step.from_environ(env | {"SLURM_RESTART_COUNT": "2"}).restart_count == 2


NUMERIC = [
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_DIST_PLANESIZE",
    "SLURM_HET_SIZE",
    "SLURM_GTIDS",
    "SLURM_STEP_ID",
]


@given(st.dictionaries(st.sampled_from(NUMERIC), st.text(max_size=12), max_size=4))
def test_any_garbage_is_either_accepted_or_a_slurm_env_error(garbage: dict[str, str]) -> None:
    env = task_env("21_sbatch_hetjob", "s0_het01", 1) | garbage
    try:
        step = Step.from_environ(env)
    except SlurmEnvError as exc:
        assert "\n" not in str(exc) and str(exc).split("=")[0] in NUMERIC
    else:
        assert step.context == "step"
