"""GPU allocator over real recorded task environments, edge cases and properties."""

from __future__ import annotations

import os
import stat
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import observed
from tfslurm.errors import GpuError, LayoutError, TfslurmError
from tfslurm.gpus import (
    ASSIGNED_VARIABLE,
    GpuAssignment,
    assign_gpus,
    assign_gpus_from_env,
    count_visible_gpus,
    parse_devices,
    split_devices,
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


# --- the recorded shapes, on every recorded Slurm version ---------------------------------


def test_every_version_is_recorded() -> None:
    assert VERSIONS == ("22.05", "24.11", "26.05")
    for version in VERSIONS:
        for name in GPU_FIXTURES:
            assert fid_of(version, name) in FIXTURES


@pytest.mark.parametrize("fid", sorted(FIXTURES))
def test_recorded_tasks_never_get_a_device_slurm_did_not_give(fid: str) -> None:
    for task, _step, gpu in assignments(fid):
        given_list = parse_devices("CUDA_VISIBLE_DEVICES", task.env.get("CUDA_VISIBLE_DEVICES", ""))
        assert set(gpu.devices) <= set(gpu.node_devices) <= set(given_list)
        for name, value in gpu.env().items():
            if name == ASSIGNED_VARIABLE:
                assert value.startswith(
                    f"{task.env['SLURM_JOB_ID']}.{task.env['SLURM_STEP_ID']}.{task.procid}:"
                )
                continue
            assert name in task.env, f"{name} exported but Slurm never set it"
            assert set(filter(None, value.split(","))) <= set(task.env[name].split(","))


@pytest.mark.parametrize(
    "fid",
    gpu_fids(exclude=("13_gpus_per_node_bind_none",))
    + [fid_of(v, "13_gpus_per_node_bind_none") for v in VERSIONS[1:]],
)
def test_recorded_gpu_shapes_give_disjoint_devices_per_node(fid: str) -> None:
    for node, gpus in per_node(assignments(fid)).items():
        owned = [d for gpu in gpus for d in gpu.devices]
        assert len(owned) == len(set(owned)), f"{fid}: tasks on {node} share a device: {gpus}"


@pytest.mark.parametrize("version", VERSIONS)
def test_gres_gpu2_two_tasks_per_node_split_the_node_list(version: str) -> None:
    fid = fid_of(version, "11_gres_gpu2")
    results = assignments(fid)
    assert [g.devices for _, _, g in results] == [("0",), ("1",), ("0",), ("1",)]
    _, _, first = results[0]
    assert first.node_devices == ("0", "1")
    assert first.env() == {
        "CUDA_VISIBLE_DEVICES": "0",
        "ROCR_VISIBLE_DEVICES": "0",
        "GPU_DEVICE_ORDINAL": "0",
        ASSIGNED_VARIABLE: f"{job_id(fid)}.0.0:CUDA_VISIBLE_DEVICES=0",
    }
    assert "balanced split over 2 local tasks" in first.source and not first.per_task


@pytest.mark.parametrize("version", VERSIONS)
def test_gres_gpu2_with_gpus_per_task_two_is_too_many(version: str) -> None:
    with pytest.raises(
        GpuError, match=r"gpus_per_task=2 for 2 task\(s\) on this node needs 4 GPU\(s\), but only 2"
    ):
        assignments(fid_of(version, "11_gres_gpu2"), gpus_per_task=2)


@pytest.mark.parametrize("version", VERSIONS)
def test_per_task_binding_is_kept_as_slurm_bound_it(version: str) -> None:
    for name in ("12_gpus_per_task", "22_sbatch_gpus"):
        for task, _step, gpu in assignments(fid_of(version, name)):
            assert task.env["SLURMD_TRES_BIND"] == f"{TRES_PREFIX[version]}per_task:1"
            assert gpu.devices == (task.env["CUDA_VISIBLE_DEVICES"],)
            assert gpu.source == f"per-task binding (SLURMD_TRES_BIND={TRES_PREFIX[version]}per_task:1)"
            assert gpu.per_task
    with pytest.raises(GpuError, match=r"gpus_per_task=2 but Slurm bound 1 GPU\(s\) to this task"):
        assignments(fid_of(version, "12_gpus_per_task"), gpus_per_task=2)


@pytest.mark.parametrize("version", VERSIONS)
def test_gpus_total_3_is_uneven_over_two_nodes(version: str) -> None:
    fid = fid_of(version, "13c_gpus_total_3")
    results = assignments(fid)
    assert [g.devices for _, _, g in results] == [("0",), ("1",), ("0",), ()]
    last = results[3][2]
    assert last.env() == {
        "CUDA_VISIBLE_DEVICES": "",
        "ROCR_VISIBLE_DEVICES": "",
        "GPU_DEVICE_ORDINAL": "",
        ASSIGNED_VARIABLE: f"{job_id(fid)}.0.3:CUDA_VISIBLE_DEVICES=",
    }
    with pytest.raises(GpuError, match="needs 2 GPU"):
        assignments(fid, gpus_per_task=1)


def test_gpu_bind_none_on_22_05_names_no_device_touches_nothing() -> None:
    # 22.05 sets only SLURM_GPUS_ON_NODE: no variable says which devices.
    for task, _step, gpu in assignments("13_gpus_per_node_bind_none"):
        assert "CUDA_VISIBLE_DEVICES" not in task.env and task.env["SLURMD_TRES_BIND"] == "gpu:none"
        assert gpu.devices == () and gpu.unbound == 2 and gpu.count == 2
        assert gpu.env() == {}
        assert gpu.source.startswith("--gpu-bind=none: Slurm allocated 2 GPU(s) without naming them")
    with pytest.raises(GpuError, match="cannot be split safely; drop --gpu-bind=none"):
        assignments("13_gpus_per_node_bind_none", gpus_per_task=1)


@pytest.mark.parametrize("version", VERSIONS[1:])
def test_gpu_bind_none_from_24_11_lists_the_node_and_is_split(version: str) -> None:
    # 24.11+ set CUDA_VISIBLE_DEVICES and SLURM_STEP_GPUS to the node's list under
    # --gpu-bind=none: a per-node list like --gpus-per-node=2's, split the same way.
    fid = fid_of(version, "13_gpus_per_node_bind_none")
    results = assignments(fid)
    for task, _step, _gpu in results:
        assert task.env["CUDA_VISIBLE_DEVICES"] == "0,1" and task.env["SLURMD_TRES_BIND"] == "gres/gpu:none"
    assert [g.devices for _, _, g in results] == [("0",), ("1",), ("0",), ("1",)]
    assert all(g.unbound == 0 and not g.per_task for _, _, g in results)
    assert [g.devices for _, _, g in assignments(fid, gpus_per_task=1)] == [("0",), ("1",), ("0",), ("1",)]


@pytest.mark.parametrize("version", VERSIONS)
def test_batch_script_keeps_the_job_list(version: str) -> None:
    batch = FIXTURES[fid_of(version, "22_sbatch_gpus")].batch
    if version == "22.05":
        assert batch.env["SLURM_GPUS_PER_TASK"] == "1" and "SLURM_TRES_PER_TASK" not in batch.env
    else:
        assert batch.env["SLURM_TRES_PER_TASK"] == "gres/gpu=1" and "SLURM_GPUS_PER_TASK" not in batch.env
    gpu = assign_gpus(Step.from_environ(batch.env))
    assert gpu.devices == ("0", "1")
    assert "the node's only task" in gpu.source


@pytest.mark.parametrize("version", VERSIONS)
def test_cpu_only_shapes_get_zero_gpus_and_no_variables(version: str) -> None:
    for _task, _step, gpu in assignments(fid_of(version, "01_block_N3_tpn2")):
        assert gpu.devices == () and gpu.count == 0 and gpu.env() == {}
        assert gpu.source == "no GPU allocated"


@pytest.mark.parametrize("version", VERSIONS)
def test_asking_for_gpus_in_a_cpu_only_step_is_one_clear_line(version: str) -> None:
    with pytest.raises(GpuError) as info:
        assignments(fid_of(version, "01_block_N3_tpn2"), gpus_per_task=1)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("gpus_per_task=1 asks for GPUs, but Slurm gave this task none")
    assert isinstance(info.value, TfslurmError)


# --- variables and values --------------------------------------------------------------


@pytest.mark.parametrize(
    "value, devices",
    [
        ("", ()),
        (" ", ()),
        ("NoDevFiles", ()),
        ("-1", ()),
        ("0,-1,2", ("0",)),
        ("3,1", ("3", "1")),
        ("1,1,0", ("1", "0")),
        ("GPU-5e1a3b2c-0d4f-1a2b-3c4d-5e6f7a8b9c0d", ("GPU-5e1a3b2c-0d4f-1a2b-3c4d-5e6f7a8b9c0d",)),
        ("MIG-GPU-5e1a3b2c/1/0,MIG-GPU-5e1a3b2c/2/0", ("MIG-GPU-5e1a3b2c/1/0", "MIG-GPU-5e1a3b2c/2/0")),
        ("0.0,0.1,1", ("0.0", "0.1", "1")),
    ],
)
def test_parse_devices(value: str, devices: tuple[str, ...]) -> None:
    assert parse_devices("CUDA_VISIBLE_DEVICES", value) == devices


@pytest.mark.parametrize(
    "value", ["0,,1", "0 1", "gpu$0", ",", "0;1", "x" * 300_000, "\u0661", ".0", "0,\u00e90"]
)
def test_parse_devices_rejects_garbage_with_the_variable_name(value: str) -> None:
    with pytest.raises(GpuError, match=r"^CUDA_VISIBLE_DEVICES") as info:
        parse_devices("CUDA_VISIBLE_DEVICES", value)
    assert "\n" not in str(info.value)


def test_empty_cvd_from_slurm_stays_empty() -> None:
    gpu = assign_gpus_from_env(
        {"CUDA_VISIBLE_DEVICES": "", "SLURM_GPUS_ON_NODE": "0"}, local_tasks=2, local_id=1
    )
    assert gpu.devices == () and gpu.env() == {"CUDA_VISIBLE_DEVICES": ""}


def test_nodevfiles_means_none_and_is_blanked() -> None:
    gpu = assign_gpus_from_env({"CUDA_VISIBLE_DEVICES": "NoDevFiles"})
    assert gpu.devices == () and gpu.env() == {"CUDA_VISIBLE_DEVICES": ""}
    assert "19.05" in gpu.source


def test_mig_uuids_are_split_as_opaque_ids() -> None:
    migs = ",".join(f"MIG-GPU-aaaa/{i}/0" for i in range(4))
    env = {"CUDA_VISIBLE_DEVICES": migs, "SLURM_STEP_GPUS": "0", "SLURM_GPUS_ON_NODE": "1"}
    gpu = assign_gpus_from_env(env, local_id=1, local_tasks=2, gpus_per_task=2)
    assert gpu.devices == ("MIG-GPU-aaaa/2/0", "MIG-GPU-aaaa/3/0")
    assert gpu.env() == {"CUDA_VISIBLE_DEVICES": "MIG-GPU-aaaa/2/0,MIG-GPU-aaaa/3/0"}


def test_global_ids_differ_from_cvd_and_cvd_form_is_handed_out() -> None:
    # With ConstrainDevices=yes Slurm renumbers: global GPUs 2,3 are 0,1 inside the cgroup.
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_STEP_GPUS": "2,3", "SLURM_GPUS_ON_NODE": "2"}
    gpu = assign_gpus_from_env(env, local_id=1, local_tasks=2)
    assert gpu.devices == ("1",)
    assert "global ids 2,3" in gpu.source


def test_amd_only_rocr() -> None:
    env = {"ROCR_VISIBLE_DEVICES": "0,1,2,3", "SLURM_GPUS_ON_NODE": "4"}
    gpu = assign_gpus_from_env(env, local_id=3, local_tasks=4)
    assert gpu.variable == "ROCR_VISIBLE_DEVICES" and gpu.devices == ("3",)
    assert gpu.env() == {"ROCR_VISIBLE_DEVICES": "3"}


def test_intel_ze_affinity_mask_with_subdevices() -> None:
    env = {"ZE_AFFINITY_MASK": "0.0,0.1,1.0,1.1", "SLURM_GPUS_ON_NODE": "2"}
    gpu = assign_gpus_from_env(env, local_id=0, local_tasks=2)
    assert gpu.variable == "ZE_AFFINITY_MASK" and gpu.devices == ("0.0", "0.1")


def test_secondary_variables_follow_by_position_or_stay_as_is() -> None:
    env = {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "GPU_DEVICE_ORDINAL": "4,5",  # same length: mapped by position
        "HIP_VISIBLE_DEVICES": "0",  # different length: cannot be mapped, left alone
        "SLURM_GPUS_ON_NODE": "2",
    }
    gpu = assign_gpus_from_env(env, local_id=1, local_tasks=2)
    assert gpu.env() == {"CUDA_VISIBLE_DEVICES": "1", "GPU_DEVICE_ORDINAL": "5"}


def test_cvd_set_by_the_user_where_slurm_manages_no_gpus() -> None:
    gpu = assign_gpus_from_env({"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, local_id=2, local_tasks=4)
    assert gpu.devices == ("2",)
    assert "set before the step: Slurm manages no GPUs here" in gpu.source


def test_gpus_per_node_caps_the_list_and_cannot_exceed_it() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "SLURM_GPUS_ON_NODE": "4"}
    assert assign_gpus_from_env(env, local_id=1, local_tasks=2, gpus_per_node=2).devices == ("1",)
    with pytest.raises(GpuError, match=r"^gpus_per_node=8 but only 4 GPU\(s\) are visible"):
        assign_gpus_from_env(env, gpus_per_node=8)


def test_gpus_per_task_zero_hides_everything_slurm_set() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "ROCR_VISIBLE_DEVICES": "0,1", "SLURM_GPUS_ON_NODE": "2"}
    gpu = assign_gpus_from_env(env, gpus_per_task=0)
    assert gpu.devices == () and gpu.env() == {"CUDA_VISIBLE_DEVICES": "", "ROCR_VISIBLE_DEVICES": ""}


def test_unknown_local_task_count_keeps_list_or_checks_own_block() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2", "SLURM_GPUS_ON_NODE": "3"}
    assert assign_gpus_from_env(env, local_id=1).devices == ("0", "1", "2")
    assert assign_gpus_from_env(env, local_id=1, gpus_per_task=1).devices == ("1",)
    with pytest.raises(GpuError):
        assign_gpus_from_env(env, local_id=2, gpus_per_task=2)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"gpus_per_task": -1}, "gpus_per_task=-1 must be a non-negative integer"),
        ({"gpus_per_task": True}, "gpus_per_task=True must be a non-negative integer"),
        ({"gpus_per_node": "2"}, "gpus_per_node='2' must be a non-negative integer"),
        ({"local_tasks": 0}, "local task count 0 must be a positive integer"),
        ({"local_tasks": 2, "local_id": 2}, "SLURM_LOCALID=2 is not below the node's task count 2"),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(GpuError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        assign_gpus_from_env({"CUDA_VISIBLE_DEVICES": "0,1"}, **kwargs)


def test_bad_slurm_gpus_on_node() -> None:
    with pytest.raises(GpuError, match="SLURM_GPUS_ON_NODE='two' is not a GPU count"):
        assign_gpus_from_env({"SLURM_GPUS_ON_NODE": "two"})


def test_explicit_and_own_share_bindings_are_kept_per_task() -> None:
    # A list shorter than the node's (a socket's share under closest, an explicit map/mask) is
    # this task's own and kept as Slurm bound it.
    for bind in (
        "gpu:map_gpu:1,0",
        "gpu:single:2",
        "gpu:closest",
        "gpu:verbose,per_task:1",
        "gres/gpu:mask_gpu:0x1",
        "gres/gpu:closest",
    ):
        env = {"CUDA_VISIBLE_DEVICES": "1", "SLURMD_TRES_BIND": bind, "SLURM_GPUS_ON_NODE": "2"}
        gpu = assign_gpus_from_env(env, local_id=1, local_tasks=2)
        assert gpu.devices == ("1",) and gpu.source.startswith("per-task binding"), bind


@pytest.mark.parametrize("bind", ["gpu:closest", "gres/gpu:closest", "gpu:single:1", "gres/gpu:per_task:2"])
def test_a_per_task_list_that_is_the_whole_node_list_is_split(bind: str) -> None:
    # srun --gpus-per-task=2 --gpu-bind=closest on a one-socket node: Slurm hands each of the
    # node's tasks the whole step list 0,1,2,3 (measured); they must not share it.
    env = {
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
        "SLURM_STEP_GPUS": "0,1,2,3",
        "SLURMD_TRES_BIND": bind,
        "SLURM_GPUS_ON_NODE": "4",
    }
    gpus = [assign_gpus_from_env(env, local_id=i, local_tasks=2) for i in range(2)]
    assert [g.devices for g in gpus] == [("0", "1"), ("2", "3")]
    assert all(not g.per_task and "gave every local task the node's list" in g.source for g in gpus)
    # the node's only task keeps the whole list; map/mask name devices on purpose and are kept
    assert assign_gpus_from_env(env, local_id=0, local_tasks=1).devices == ("0", "1", "2", "3")
    mapped = dict(env, SLURMD_TRES_BIND="gpu:map_gpu:0,0")
    assert assign_gpus_from_env(mapped, local_id=1, local_tasks=2).devices == ("0", "1", "2", "3")


def test_node_list_split_by_the_gpus_per_task_slurm_was_given() -> None:
    # --gpus-per-task=1 --gpu-bind=closest with 4 GPUs and 2 tasks: one each (24.11+ says
    # SLURM_TRES_PER_TASK, older sbatch jobs SLURM_GPUS_PER_TASK), not a balanced 2 each.
    base = {
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
        "SLURMD_TRES_BIND": "gres/gpu:closest",
        "SLURM_GPUS_ON_NODE": "4",
    }
    for extra in ({"SLURM_TRES_PER_TASK": "cpu=1,gres/gpu=1"}, {"SLURM_GPUS_PER_TASK": "1"}):
        gpus = [assign_gpus_from_env({**base, **extra}, local_id=i, local_tasks=2) for i in range(2)]
        assert [g.devices for g in gpus] == [("0",), ("1",)]
        assert gpus[1].split_per_task == 1
    # a count that does not fit the list is ignored: balanced split
    odd = {**base, "SLURM_TRES_PER_TASK": "gres/gpu=3"}
    assert assign_gpus_from_env(odd, local_id=1, local_tasks=2).devices == ("2", "3")


# --- nvidia-smi, only for --gpu-bind=none -------------------------------------------------


def fake_smi(tmp_path: Path, body: str) -> str:
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


BIND_NONE = {"SLURMD_TRES_BIND": "gpu:none", "SLURM_GPUS_ON_NODE": "2"}


def test_bind_none_with_exactly_the_allocated_gpus_visible(tmp_path: Path) -> None:
    smi = fake_smi(tmp_path, 'echo "GPU 0: Fake (UUID: GPU-a)"; echo "GPU 1: Fake (UUID: GPU-b)"')
    gpu = assign_gpus_from_env(BIND_NONE, local_id=1, local_tasks=2, nvidia_smi=smi)
    assert gpu.devices == ("1",) and gpu.node_devices == ("0", "1")
    assert gpu.env() == {"CUDA_VISIBLE_DEVICES": "1"}
    assert "nvidia-smi sees exactly 2" in gpu.source


def test_bind_none_with_more_gpus_visible_than_held_names_none(tmp_path: Path) -> None:
    smi = fake_smi(tmp_path, 'for i in 0 1 2 3; do echo "GPU $i: Fake"; done')
    gpu = assign_gpus_from_env(BIND_NONE, local_id=0, local_tasks=2, nvidia_smi=smi)
    assert gpu.devices == () and gpu.unbound == 2 and gpu.env() == {}
    assert "nvidia-smi sees 4" in gpu.source


def test_nvidia_smi_missing_failing_or_hanging_means_unknown(tmp_path: Path) -> None:
    assert count_visible_gpus(executable=str(tmp_path / "absent")) is None
    assert count_visible_gpus(executable=fake_smi(tmp_path, "exit 9")) is None
    hang = tmp_path / "hang"
    hang.mkdir()
    pid_file = hang / "pid"
    assert (
        count_visible_gpus(timeout=0.5, executable=fake_smi(hang, f"echo $$ > {pid_file}; exec sleep 30"))
        is None
    )
    # given up at the timeout: the hanging program is ended, not waited for (timing: bench/limits.py)
    assert not Path(f"/proc/{pid_file.read_text().strip()}").exists()


def test_nvidia_smi_is_not_run_when_slurm_named_the_devices(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    smi = fake_smi(tmp_path, f"touch {marker}; echo 'GPU 0: x'")
    assign_gpus_from_env({"CUDA_VISIBLE_DEVICES": "0", "SLURM_GPUS_ON_NODE": "1"}, nvidia_smi=smi)
    assign_gpus_from_env({}, nvidia_smi=smi)
    assert not marker.exists()


# --- properties --------------------------------------------------------------------------

device_lists = st.lists(
    st.one_of(st.integers(0, 15).map(str), st.uuids().map(lambda u: f"MIG-{u}")), unique=True, max_size=16
)


@given(devices=device_lists, local_tasks=st.integers(1, 12))
def test_default_split_uses_every_device_once_and_balances(devices: list[str], local_tasks: int) -> None:
    shares = [split_devices(devices, local_tasks, i) for i in range(local_tasks)]
    assert [d for share in shares for d in share] == devices
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)


@given(devices=device_lists, local_tasks=st.integers(1, 12), per_task=st.integers(0, 6))
def test_gpus_per_task_split_is_disjoint_equal_or_an_error(
    devices: list[str], local_tasks: int, per_task: int
) -> None:
    if local_tasks * per_task > len(devices):
        with pytest.raises(GpuError):
            split_devices(devices, local_tasks, 0, per_task)
        return
    shares = [split_devices(devices, local_tasks, i, per_task) for i in range(local_tasks)]
    owned = [d for share in shares for d in share]
    assert len(owned) == len(set(owned)) and set(owned) <= set(devices)
    assert all(len(share) == per_task for share in shares)


@st.composite
def node_envs(draw: st.DrawFn) -> tuple[dict[str, str], int, int | None]:
    """A node's environment as Slurm could set it, and how many tasks share it."""
    tasks = draw(st.integers(1, 8))
    devices = draw(device_lists)
    shape = draw(st.sampled_from(["per_node", "per_task", "none", "cpu", "empty"]))
    per_task = draw(st.one_of(st.none(), st.integers(0, 3)))
    env: dict[str, str] = {}
    if shape in ("per_node", "per_task"):
        env = {"CUDA_VISIBLE_DEVICES": ",".join(devices), "SLURM_GPUS_ON_NODE": str(len(devices))}
        if draw(st.booleans()):
            env["ROCR_VISIBLE_DEVICES"] = env["CUDA_VISIBLE_DEVICES"]
    if shape == "per_task":
        env["SLURMD_TRES_BIND"] = f"gpu:per_task:{max(len(devices), 1)}"
    elif shape == "none":
        env = {"SLURMD_TRES_BIND": "gpu:none", "SLURM_GPUS_ON_NODE": str(len(devices))}
    elif shape == "empty":
        env = {"CUDA_VISIBLE_DEVICES": "", "SLURM_GPUS_ON_NODE": "0"}
    return env, tasks, per_task


@settings(max_examples=300)
@given(node_envs())
def test_gpus_per_task_gives_each_task_a_disjoint_subset(case: tuple) -> None:
    env, tasks, per_task = case
    results = []
    for local_id in range(tasks):
        try:
            results.append(
                assign_gpus_from_env(
                    env, local_id=local_id, local_tasks=tasks, gpus_per_task=per_task, nvidia_smi=NO_SMI
                )
            )
        except GpuError as exc:
            assert "\n" not in str(exc)
            return
    given_devices = set(parse_devices("CUDA_VISIBLE_DEVICES", env.get("CUDA_VISIBLE_DEVICES", "")))
    for gpu in results:
        assert set(gpu.devices) <= set(gpu.node_devices) <= given_devices
        for name, value in gpu.env().items():
            assert name in env
            assert set(filter(None, value.split(","))) <= given_devices
    if per_task is not None and env.get("SLURMD_TRES_BIND", "").startswith("gpu:per_task") is False:
        owned = [d for gpu in results for d in gpu.devices]
        assert len(owned) == len(set(owned))
        assert all(len(gpu.devices) == per_task for gpu in results if gpu.node_devices)


def test_assign_gpus_does_not_touch_the_process_environment() -> None:
    before = dict(os.environ)
    assign_gpus(Step.from_environ(FIXTURES["11_gres_gpu2"].steps["s0"][1].env))
    assert dict(os.environ) == before


def test_binding_helpers() -> None:
    from tfslurm.gpus import PER_TASK_BINDINGS, slurm_gpu_binding

    def bound_per_task(env: dict[str, str]) -> bool:
        """Slurm already chose each task's own devices (they are not split again)."""
        return slurm_gpu_binding(env) in PER_TASK_BINDINGS

    assert slurm_gpu_binding({"SLURMD_TRES_BIND": "gpu:per_task:1"}) == "per_task"
    assert slurm_gpu_binding({"SLURMD_TRES_BIND": "gpu:none"}) == "none"
    assert slurm_gpu_binding({}) is None
    assert bound_per_task({"SLURMD_TRES_BIND": "gpu:verbose,map_gpu:0,1"})
    assert not bound_per_task({"SLURMD_TRES_BIND": "gpu:none"}) and not bound_per_task({})


@pytest.mark.parametrize("fid", gpu_fids())
def test_assigning_again_after_exporting_is_idempotent(fid: str) -> None:
    # The TaskProlog exports env(); a resolver in the task then assigns again: no drift.
    for task, _step, first in assignments(fid):
        env = dict(task.env, **first.env())
        again = assign_gpus(Step.from_environ(env), nvidia_smi=NO_SMI)
        assert again.devices == first.devices and again.env() == first.env(), (task.procid, first, again)


def test_narrowed_list_is_kept_and_marked_per_task() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "1", "SLURM_STEP_GPUS": "0,1", "SLURM_GPUS_ON_NODE": "2"}
    gpu = assign_gpus_from_env(env, local_id=1, local_tasks=2)
    assert gpu.devices == ("1",) and gpu.per_task
    assert (
        gpu.source
        == "already narrowed after Slurm (CUDA_VISIBLE_DEVICES=1 of the 2 GPU(s) in SLURM_STEP_GPUS=0,1), kept"
    )
    hidden = assign_gpus_from_env(dict(env, CUDA_VISIBLE_DEVICES=""), local_id=0, local_tasks=2)
    assert hidden.devices == () and hidden.env() == {"CUDA_VISIBLE_DEVICES": ""}
    full = assign_gpus_from_env(dict(env, CUDA_VISIBLE_DEVICES="0,1"), local_id=1, local_tasks=2)
    assert full.devices == ("1",) and not full.per_task


def test_local_id_comes_from_the_layout_and_is_never_guessed() -> None:
    from tfslurm.layout import Layout

    env = {
        "SLURM_JOB_ID": "5",
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "2",
        "SLURM_GTIDS": "1,2",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
        "SLURM_STEP_GPUS": "0,1,2,3",
        "SLURM_GPUS_ON_NODE": "4",
    }
    layout = Layout(("a", "b"), (0, 1, 1), (0, 0, 1), "given", source="test")
    # no SLURM_LOCALID: the layout says rank 2 is local task 1 of 2 on node b
    assert assign_gpus(Step.from_environ(env), layout).devices == ("2", "3")
    # the layout decides even against SLURM_LOCALID (the caller's layout sets the split)
    assert assign_gpus(Step.from_environ(dict(env, SLURM_LOCALID="0")), layout).devices == ("2", "3")
    # no layout and no local id while two tasks share the node: an error, not task 0's share
    with pytest.raises(GpuError, match="SLURM_LOCALID is not set and 2 tasks share this node"):
        assign_gpus(Step.from_environ(env))
    # a node's only task needs no local id
    alone = assign_gpus(Step.from_environ(dict(env, SLURM_GTIDS="2")))
    assert alone.devices == ("0", "1", "2", "3")


def test_marker_makes_reassignment_idempotent_without_reference() -> None:
    # Where Slurm manages no GPUs there is no SLURM_STEP_GPUS to compare with: the marker decides.
    env = {"SLURM_JOB_ID": "5", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "CUDA_VISIBLE_DEVICES": "0,1"}
    first = assign_gpus_from_env(env, local_id=1, local_tasks=2)
    assert first.env() == {"CUDA_VISIBLE_DEVICES": "1", ASSIGNED_VARIABLE: "5.0.1:CUDA_VISIBLE_DEVICES=1"}
    again = assign_gpus_from_env({**env, **first.env()}, local_id=1, local_tasks=2)
    assert again.devices == ("1",) and again.per_task and "earlier by tfslurm" in again.source
    # a marker of another step (inherited by a nested srun) or a changed value is ignored
    for stale in ("5.1.1:CUDA_VISIBLE_DEVICES=1", "5.0.1:CUDA_VISIBLE_DEVICES=0"):
        fresh = assign_gpus_from_env(
            {**env, "CUDA_VISIBLE_DEVICES": "1", ASSIGNED_VARIABLE: stale}, local_id=1, local_tasks=2
        )
        assert fresh.devices == () and not fresh.per_task


# --- warnings ----------------------------------------------------------------------------


def plan_warnings(
    env: dict[str, str], dev_dir: str = "/nonexistent-dev", **kwargs: object
) -> tuple[str, ...]:
    from tfslurm.gpus import gpu_warnings

    step = Step.from_environ(env)
    layout = layout_for(step)
    gpu = assign_gpus(step, layout, nvidia_smi=NO_SMI, **kwargs)
    return gpu_warnings(step, layout, gpu, dev_dir=dev_dir, **kwargs)  # type: ignore[arg-type]


def fixture_warnings(fid: str, gpus: str | None = None, **kwargs: object) -> dict[int, tuple[str, ...]]:
    """rank -> the warnings its plan prints, for the tasks of a recorded step that have any
    (``gpus``: as if every node held these devices, see with_gpus)."""
    out = {}
    for task in FIXTURES[fid].steps["s0"]:
        lines = plan_warnings(task.env if gpus is None else with_gpus(task.env, gpus), **kwargs)
        if lines:
            out[task.procid] = lines
    return out


UNEVEN_TAIL = (
    "; MultiWorkerMirroredStrategy needs the same count on every worker: request --gpus-per-task=N "
    "or --gres=gpu:N with N a multiple of the tasks per node (TFSLURM_UNEVEN_GPUS=error makes this an error)"
)
ZERO_3 = (
    "tfslurm: warning: task 3 on node2 gets 0 GPUs while other tasks of the step have some (1 GPU(s) for "
    "2 task(s) on the node): it runs on the CPU; request --gpus-per-task=N, or --gres=gpu:N with N a "
    "multiple of the tasks per node"
)
FEWER_NODE2 = (
    "tfslurm: warning: node node2 has 1 GPU(s) for 2 tasks: 1 task(s) get none (a GPU is never "
    "shared); request at least one GPU per task (--gpus-per-task=1)"
)


@pytest.mark.parametrize("version", VERSIONS)
def test_gpus_3_over_two_nodes_warns_exactly_the_uneven_tasks(version: str) -> None:
    got = fixture_warnings(fid_of(version, "13c_gpus_total_3"))
    wanted = {
        2: (FEWER_NODE2, "tfslurm: warning: tasks get unequal GPU counts (1, 0 on node node2)" + UNEVEN_TAIL),
        3: (ZERO_3,),
    }
    if version != "22.05":  # SLURM_GPUS=3 (24.11+) tells rank 0 that node2 got fewer
        wanted[0] = (
            "tfslurm: warning: tasks get unequal GPU counts (1 per task on node node1, but SLURM_GPUS=3 for 4 tasks)"
            + UNEVEN_TAIL,
        )
    assert got == wanted


def test_every_task_of_an_uneven_node_finds_it_one_says_it() -> None:
    from tfslurm.gpus.warnings import GpuFinding, review_gpus

    found = {}
    for task in FIXTURES["13c_gpus_total_3"].steps["s0"]:
        step = Step.from_environ(task.env)
        layout = layout_for(step)
        review = review_gpus(step, layout, assign_gpus(step, layout, nvidia_smi=NO_SMI))
        found[task.procid] = [(f, review.says(f)) for f in review.findings]
    assert found == {
        0: [],
        1: [],
        2: [(GpuFinding.FEWER_THAN_TASKS, True), (GpuFinding.UNEVEN_ON_NODE, True)],
        3: [
            (GpuFinding.ZERO_HERE, True),
            (GpuFinding.FEWER_THAN_TASKS, False),
            (GpuFinding.UNEVEN_ON_NODE, False),
        ],
    }


@pytest.mark.parametrize(
    "fid",
    [
        f
        for f in sorted(FIXTURES)
        if not f.endswith("13c_gpus_total_3") and "09_arbitrary" not in f and "26_sbatch_arbitrary" not in f
    ],
)
def test_no_warning_for_even_shapes(fid: str) -> None:
    for tasks in FIXTURES[fid].steps.values():
        for task in tasks:
            step = Step.from_environ(task.env)
            try:
                layout = layout_for(step)
            except LayoutError:
                continue
            from tfslurm.gpus import gpu_warnings

            gpu = assign_gpus(step, layout, nvidia_smi=NO_SMI)
            assert gpu_warnings(step, layout, gpu, dev_dir="/nonexistent-dev") == (), (fid, task.procid)


@pytest.mark.parametrize("version", VERSIONS)
def test_uneven_counts_are_an_error_on_request(version: str) -> None:
    fid = fid_of(version, "13c_gpus_total_3")
    for task in FIXTURES[fid].steps["s0"]:
        env = dict(task.env, TFSLURM_UNEVEN_GPUS="error")
        if task.procid in (2, 3) or version != "22.05":
            with pytest.raises(
                GpuError, match=r"^tasks get unequal GPU counts .*\(TFSLURM_UNEVEN_GPUS=error\)$"
            ):
                plan_warnings(env)
        else:  # node1 of 22.05 cannot see node2's count: no error there, node2's tasks fail
            assert plan_warnings(env) == ()
    with pytest.raises(GpuError, match=r"^TFSLURM_UNEVEN_GPUS='maybe' must be 'warn' or 'error'$"):
        plan_warnings(dict(FIXTURES[fid].steps["s0"][0].env, TFSLURM_UNEVEN_GPUS="maybe"))


def with_gpus(env: dict[str, str], devices: str) -> dict[str, str]:
    """A recorded CPU-only task as if the step had asked for --gres=gpu:N (N = len(devices))."""
    n = str(len(devices.split(",")))
    return dict(env, CUDA_VISIBLE_DEVICES=devices, SLURM_STEP_GPUS=devices, SLURM_GPUS_ON_NODE=n)


@pytest.mark.parametrize("version", VERSIONS)
def test_gres_gpu2_over_4_plus_1_tasks_warns_node1(version: str) -> None:
    # srun -N2 -n5 (4 + 1 tasks) as if with --gres=gpu:2: node1 splits 1,1,0,0, node2's only
    # task gets 2. Node1's local task 0 says "fewer" and "unequal", each task with 0 says so;
    # node2 (not rank 0) stays quiet about the cross-node difference node1 already reports.
    got = {
        rank: [line.split(":", 2)[2].split(";")[0].split(":")[0].strip() for line in lines]
        for rank, lines in fixture_warnings(fid_of(version, "05_uneven_N2_n5"), gpus="0,1").items()
    }
    zero = "task {} on node1 gets 0 GPUs while other tasks of the step have some (2 GPU(s) for 4 task(s) on the node)"
    assert got == {
        0: ["node node1 has 2 GPU(s) for 4 tasks", "tasks get unequal GPU counts (1, 1, 0, 0 on node node1)"],
        2: [zero.format(2)],
        3: [zero.format(3)],
    }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("fixture", "others"), [("05_uneven_N2_n5", "4"), ("07_uneven_N3_n7", "2, 4")])
def test_gres_gpu4_over_uneven_nodes_is_uneven_across_nodes(version: str, fixture: str, others: str) -> None:
    # --gres=gpu:4 over srun -N2 -n5 (4 + 1 tasks: 1,1,1,1 / 4) or -N3 -n7 (4, 2, 1 tasks:
    # 1,1,1,1 / 2,2 / 4). Each node is even in itself; rank 0 says the cross-node line once.
    fid = fid_of(version, fixture)
    assert fixture_warnings(fid, gpus="0,1,2,3") == {
        0: (
            f"tfslurm: warning: tasks get unequal GPU counts (1 here, {others} on other nodes if they hold 4 GPUs "
            "like this one)" + UNEVEN_TAIL,
        )
    }
    # with gpus_per_task=1 every task has one: even, silent
    assert fixture_warnings(fid, gpus="0,1,2,3", gpus_per_task=1) == {}


def test_no_gres_but_gpu_device_files_warns_once_per_node(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (dev / name).write_text("")
    tasks = FIXTURES["01_block_N3_tpn2"].steps["s0"]
    got = {t.procid: plan_warnings(t.env, dev_dir=str(dev)) for t in tasks}
    local0 = {t.procid for t in tasks if t.env["SLURM_LOCALID"] == "0"}
    for procid, lines in got.items():
        if procid in local0:
            node = next(t.hostname for t in tasks if t.procid == procid)
            assert lines == (
                f"tfslurm: warning: Slurm allocated no GPUs to this step, but node {node} has 2 "
                f"({dev}/nvidia0...): the tasks train on the CPU; request --gres=gpu:N (or "
                "--gpus-per-node=N), or pass gpus_per_node=N",
            )
        else:
            assert lines == ()
    assert all(plan_warnings(t.env, dev_dir=str(tmp_path)) == () for t in tasks)  # no device files
    # gpus_per_node=N (TF's argument) is the user's answer: silent
    assert all(plan_warnings(t.env, dev_dir=str(dev), gpus_per_node=0) == () for t in tasks)


# --- the policy table --------------------------------------------------------------------

RECORDED_KIND = {
    "11_gres_gpu2": {v: "per-node" for v in VERSIONS},
    "12_gpus_per_task": {v: "per-task" for v in VERSIONS},
    "13_gpus_per_node_bind_none": {"22.05": "none-unnamed", "24.11": "none-listed", "26.05": "none-listed"},
    "13b_gpus_per_node": {v: "per-node" for v in VERSIONS},
    "13c_gpus_total_3": {v: "per-node" for v in VERSIONS},
    "22_sbatch_gpus": {v: "per-task" for v in VERSIONS},
    "01_block_N3_tpn2": {v: "no-gpus" for v in VERSIONS},
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(RECORDED_KIND))
def test_every_recorded_shape_has_its_policy_row(name: str, version: str) -> None:
    from tfslurm.gpus import POLICY

    kinds = {gpu.kind for _, _, gpu in assignments(fid_of(version, name))}
    assert kinds == {RECORDED_KIND[name][version]}
    rule = POLICY[kinds.pop()][version]
    assert not rule.startswith("("), f"{name} on {version} lands on a row that says the version cannot set it"


def test_policy_table_covers_every_kind_and_version_and_docs() -> None:
    from tfslurm.gpus import BINDING_TEXT, POLICY

    assert list(POLICY) == list(BINDING_TEXT)
    docs = (Path(__file__).parent.parent / "docs" / "gpus-and-ports.md").read_text()
    for kind, rules in POLICY.items():
        assert set(rules) == set(VERSIONS), kind
        row = f"| {BINDING_TEXT[kind]} | " + " | ".join(rules[v] for v in VERSIONS) + " |"
        assert row in docs, row


def test_kind_of_other_shapes() -> None:
    closest = {
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
        "SLURMD_TRES_BIND": "gpu:closest",
        "SLURM_GPUS_ON_NODE": "4",
    }
    assert assign_gpus_from_env(closest, local_id=0, local_tasks=2).kind == "whole-node-shared"
    mapped = dict(closest, SLURMD_TRES_BIND="gpu:map_gpu:0,1", CUDA_VISIBLE_DEVICES="1")
    assert assign_gpus_from_env(mapped, local_id=1, local_tasks=2).kind == "explicit"
    assert assign_gpus_from_env({"CUDA_VISIBLE_DEVICES": "0,1"}, local_tasks=2).kind == "no-gres"
    assert assign_gpus_from_env({}, assumed_devices=("0", "1")).kind == "no-gres"
    narrowed = {"CUDA_VISIBLE_DEVICES": "1", "SLURM_STEP_GPUS": "0,1", "SLURM_GPUS_ON_NODE": "2"}
    assert assign_gpus_from_env(narrowed, local_id=1, local_tasks=2).kind == "narrowed"


# --- property: random nodes, tasks, bindings and versions --------------------------------


@st.composite
def slurm_steps(draw: st.DrawFn) -> tuple[str, str, list[dict[str, str]]]:
    """Every task's environment of one block-distributed step, as Slurm of ``version`` sets it
    for ``shape`` (the recorded forms of tests/data/observed/<version>/)."""
    version = draw(st.sampled_from(VERSIONS))
    shape = draw(st.sampled_from(["gres", "gpus_total", "per_task", "closest", "bind_none", "cpu"]))
    tpn = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    per_node_gpus = draw(st.integers(1, 4))
    per_task = draw(st.integers(1, 2))
    spread = draw(st.lists(st.integers(1, 4), min_size=len(tpn), max_size=len(tpn)))
    prefix = TRES_PREFIX[version]
    nodes = [f"node{i + 1}" for i in range(len(tpn))]
    common = {
        "SLURM_JOB_ID": "7",
        "SLURM_STEP_ID": "0",
        "SLURM_STEP_NODELIST": f"node[1-{len(tpn)}]" if len(tpn) > 1 else "node1",
        "SLURM_STEP_TASKS_PER_NODE": ",".join(map(str, tpn)),
        "SLURM_STEP_NUM_NODES": str(len(tpn)),
        "SLURM_STEP_NUM_TASKS": str(sum(tpn)),
        "SLURM_NTASKS": str(sum(tpn)),
        "SLURM_NNODES": str(len(tpn)),
    }
    if shape == "gpus_total" and version != "22.05":
        common["SLURM_GPUS"] = str(sum(spread))
    envs = []
    rank = 0
    for n, tasks in enumerate(tpn):
        gids = ",".join(str(rank + i) for i in range(tasks))
        for local in range(tasks):
            env = dict(
                common,
                SLURM_PROCID=str(rank),
                SLURM_LOCALID=str(local),
                SLURM_NODEID=str(n),
                SLURMD_NODENAME=nodes[n],
                SLURM_GTIDS=gids,
            )
            gpus = {"gres": per_node_gpus, "gpus_total": spread[n], "bind_none": per_node_gpus}.get(shape)
            listed = None
            if shape in ("gres", "gpus_total"):
                listed = ",".join(map(str, range(gpus)))
            elif shape == "per_task":
                gpus = tasks * per_task
                listed = ",".join(str(local * per_task + i) for i in range(per_task))
                env["SLURMD_TRES_BIND"] = f"{prefix}per_task:{per_task}"
            elif shape == "closest":
                gpus = tasks * per_task
                listed = ",".join(map(str, range(gpus)))
                env["SLURMD_TRES_BIND"] = f"{prefix}closest"
            elif shape == "bind_none":
                env["SLURMD_TRES_BIND"] = f"{prefix}none"
                if version != "22.05":
                    listed = ",".join(map(str, range(gpus)))
            if shape in ("per_task", "closest") and version != "22.05":
                env["SLURM_TRES_PER_TASK"] = f"gres/gpu={per_task}"
            if gpus is not None:
                env["SLURM_GPUS_ON_NODE"] = str(gpus)
            if listed is not None:
                env.update(CUDA_VISIBLE_DEVICES=listed, SLURM_STEP_GPUS=listed)
            envs.append(env)
            rank += 1
    return version, shape, envs


@settings(max_examples=200, deadline=None)
@given(slurm_steps())
def test_random_steps_stay_in_slurm_never_share_warn_if_uneven(case: tuple) -> None:
    from tfslurm.gpus import gpu_warnings

    version, shape, envs = case
    results = []
    for env in envs:
        step = Step.from_environ(env)
        layout = layout_for(step)
        gpu = assign_gpus(step, layout, nvidia_smi=NO_SMI)
        results.append((env, gpu, gpu_warnings(step, layout, gpu, dev_dir="/nonexistent-dev")))
    by_node: dict[str, list[str]] = defaultdict(list)
    counts = []
    for env, gpu, _lines in results:
        given_list = parse_devices("CUDA_VISIBLE_DEVICES", env.get("CUDA_VISIBLE_DEVICES", ""))
        assert set(gpu.devices) <= set(given_list), (env, gpu)
        by_node[env["SLURMD_NODENAME"]] += gpu.devices
        counts.append(gpu.count)
    for node, owned in by_node.items():  # a GPU is never shared, whatever the shape
        assert len(owned) == len(set(owned)), (shape, node, owned)
    lines = [line for _env, _gpu, task_lines in results for line in task_lines]
    uneven = len(set(counts)) > 1
    warned = uneven
    if version == "22.05" and shape == "gpus_total":
        # 22.05 does not tell a task a --gpus=N total (no SLURM_GPUS), nor that the request
        # was not per node: a node uneven in itself is seen; across nodes, rank 0 judges by
        # assuming every node holds its own count (and says so in the line).
        per_node_counts: dict[str, set[int]] = defaultdict(set)
        for (env, _gpu, _lines), count in zip(results, counts, strict=True):
            per_node_counts[env["SLURMD_NODENAME"]].add(count)
        tpn = [int(t) for t in envs[0]["SLURM_STEP_TASKS_PER_NODE"].split(",")]
        g0 = int(envs[0]["SLURM_GPUS_ON_NODE"])
        assumed = {s for t in tpn for i in range(t) for s in [g0 // t + (1 if i < g0 % t else 0)]}
        warned = any(len(c) > 1 for c in per_node_counts.values()) or len(assumed) > 1
    assert any("unequal GPU counts" in line for line in lines) == warned, (version, shape, counts, lines)
    zero = any(c == 0 for c in counts) and uneven  # a 0 is always on a node uneven in itself
    assert any("gets 0 GPUs" in line for line in lines) == zero, (version, shape, counts, lines)
    if shape in ("per_task", "closest"):  # --gpus-per-task=k: k each, on every version
        assert (
            set(counts) == {int(envs[0]["SLURMD_TRES_BIND"].rsplit(":", 1)[-1])}
            if shape == "per_task"
            else True
        )
        assert not uneven


# --- every entry point says the same lines -----------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_entry_points_print_the_warnings_on_stderr(version: str, capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess
    import sys

    from tfslurm.resolver import SlurmClusterResolver
    from tfslurm.runtime.roles import resolve_role

    tasks = FIXTURES[fid_of(version, "13c_gpus_total_3")].steps["s0"]
    zero, quiet = tasks[3].env, tasks[1].env  # rank 1: node1, even, not rank 0: says nothing
    assert resolve_role(dict(zero)).gpu_warnings == (ZERO_3,)
    assert resolve_role(dict(quiet)).gpu_warnings == ()
    # The compat resolver keeps TF's rule (visible // tasks on the busiest node): 1 GPU for 2
    # tasks gives both tasks of that node 0, and each says so; node1's tasks (1 each) do not.
    for task in tasks:
        resolver = SlurmClusterResolver(env=dict(task.env))
        err = capsys.readouterr().err
        if resolver.gpus:
            assert err == "", task.procid
        else:
            assert err == (
                f"tfslurm: warning: task {task.procid} on node2 gets 0 GPUs: TF's rule gives each task 1 "
                "visible GPU(s) // 2 tasks on the busiest node; pass gpus_per_task=N or request "
                "--gpus-per-task=N\n"
            )
    assert sorted(len(SlurmClusterResolver(env=dict(t.env)).gpus) for t in tasks) == [0, 0, 1, 1]
    capsys.readouterr()
    base = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(Path(__file__).parent.parent)}
    for command in (["env", "--format", "json"], ["plan"]):
        for env, wanted in ((zero, ZERO_3 + "\n"), (quiet, "")):
            done = subprocess.run(
                [sys.executable, "-m", "tfslurm", *command],
                env={**env, **base},
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0 and done.stderr == wanted, (command, done.stderr)
