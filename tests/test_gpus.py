"""GPU allocator over real recorded task environments, edge cases and properties; its
warnings and policy table are in test_gpus_warnings.py."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recorded_gpus import (
    FIXTURES,
    GPU_FIXTURES,
    NO_SMI,
    TRES_PREFIX,
    VERSIONS,
    assignments,
    fid_of,
    gpu_fids,
    job_id,
    per_node,
)
from tfslurm.errors import GpuError, TfslurmError
from tfslurm.gpus import (
    ASSIGNED_VARIABLE,
    assign_gpus,
    assign_gpus_from_env,
    count_visible_gpus,
    parse_devices,
    split_devices,
)
from tfslurm.step import Step

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

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
