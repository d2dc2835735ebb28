"""The GPU allocator's warnings for uneven shapes, its policy table, a property over
random steps, and every entry point printing the same lines."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recorded_gpus import (
    FIXTURES,
    NO_SMI,
    TRES_PREFIX,
    VERSIONS,
    assignments,
    fid_of,
)
from tfslurm.errors import GpuError, LayoutError
from tfslurm.gpus import (
    assign_gpus,
    assign_gpus_from_env,
    parse_devices,
)
from tfslurm.layout import layout_for
from tfslurm.step import Step

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

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
