"""Layout engine: recorded real environments, Slurm's definitions as properties, errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import observed
from conftest import tfslurm_cli
from stepenv import task_env
from tfslurm import hostlist
from tfslurm.errors import LayoutError, PlanError, SlurmEnvError, TfslurmError
from tfslurm.hostfile import parse_hostfile
from tfslurm.layout import (
    Layout,
    arbitrary_layout,
    block_layout,
    cyclic_layout,
    layout_for,
    plane_layout,
)
from tfslurm.step import Step

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

PATHS = observed.paths_by_id()


def node_of(layout: Layout, rank: int) -> str:
    """The node name of ``rank`` (a LayoutError for a rank outside the layout)."""
    return layout.nodes[layout.rank_node[layout.check_rank(rank)]]


# Recorded shapes the environment cannot describe: tfslurm must refuse them (tested below).
REFUSED = {"25_het_srun_cyclic_component"}


@pytest.mark.parametrize("fid", sorted(f for f in observed.ids() if f.rsplit("/", 1)[-1] not in REFUSED))
def test_every_task_of_every_recorded_step_computes_the_true_map(fid: str, tmp_path: Path) -> None:
    for label, tasks in observed.step_envs(fid, tmp_path).items():
        truth = [task.hostname for task, _ in tasks]  # tasks are sorted by SLURM_PROCID
        local_truth = [int(task.env["SLURM_LOCALID"]) for task, _ in tasks]
        maps = set()
        for task, env in tasks:
            layout = layout_for(Step.from_environ(env))
            assert layout.rank_to_node == truth, (fid, label, task.procid)
            assert list(layout.rank_local) == local_truth, (fid, label, task.procid)
            assert node_of(layout, task.procid) == env["SLURMD_NODENAME"]
            gtids = tuple(int(x) for x in env["SLURM_GTIDS"].split(","))
            assert layout.ranks_on(layout.index_of(task.hostname)) == gtids
            maps.add((layout.nodes, layout.rank_node, layout.rank_local, layout.method))
        assert len(maps) == 1, f"{fid} {label}: tasks disagree"


def test_default_distribution_is_block_and_sbatch_steps_say_so(tmp_path: Path) -> None:
    # Plain srun without -m leaves SLURM_DISTRIBUTION unset; inside sbatch it is "block";
    # a step smaller than the allocation is "cyclic" (observed on Slurm 22.05).
    plain = observed.step_envs("07_uneven_N3_n7", tmp_path)["s0"][0][1]
    assert "SLURM_DISTRIBUTION" not in plain
    assert layout_for(Step.from_environ(plain)).method == "default (block)"
    batch = observed.step_envs("20_sbatch_steps", tmp_path)
    assert batch["s0_full"][0][1]["SLURM_DISTRIBUTION"] == "block"
    assert batch["s1_n3"][0][1]["SLURM_DISTRIBUTION"] == "cyclic"


def test_het_step_sizes_and_single_component_step(tmp_path: Path) -> None:
    steps = observed.step_envs("21_sbatch_hetjob", tmp_path)
    both = layout_for(Step.from_environ(steps["s0_het01"][3][1]))
    assert both.component_sizes == (1, 4)
    one = layout_for(Step.from_environ(steps["s1_het1"][0][1]))  # --het-group=1 alone
    assert one.component_sizes == () and one.rank_to_node == ["node2"] * 3 + ["node3"]


# --- building synthetic task environments the way slurmstepd does -------------------------


def task_envs(layout: Layout, node_order: list[str] | None = None, **extra: str) -> list[dict[str, str]]:
    """Every task's environment for a step really laid out as ``layout`` (see stepenv)."""
    return [task_env(layout, rank, node_order, **extra) for rank in range(layout.num_tasks)]


def assert_all_tasks_agree(envs: list[dict[str, str]], expected: list[str]) -> None:
    for env in envs:
        assert layout_for(Step.from_environ(env)).rank_to_node == expected


# --- what TF's SlurmClusterResolver gets wrong: it sorts node names as strings, ranks in blocks ---


def test_tf_shape_ten_nodes_not_sorted_as_strings() -> None:
    truth = [f"n{i}" for i in range(1, 11)]  # TF: n1, n10, n2, ... (9 of 10 wrong)
    envs = task_envs(block_layout(truth, [1] * 10))
    assert envs[0]["SLURM_STEP_NODELIST"] == "n[1-10]"
    assert_all_tasks_agree(envs, truth)


def test_tf_shape_node_index_order_is_kept() -> None:
    envs = task_envs(block_layout(["n2", "n1"], [2, 2]))  # slurm.conf lists n2 first
    assert envs[0]["SLURM_STEP_NODELIST"] == "n[2,1]"
    assert_all_tasks_agree(envs, ["n2", "n2", "n1", "n1"])  # TF: n1, n1, n2, n2


def test_tf_shape_cyclic_3_1() -> None:
    envs = task_envs(cyclic_layout(["n1", "n2"], [3, 1]), SLURM_DISTRIBUTION="cyclic")
    assert envs[0]["SLURM_STEP_TASKS_PER_NODE"] == "3,1"
    assert_all_tasks_agree(envs, ["n1", "n2", "n1", "n1"])  # TF: n1, n1, n1, n2


# --- Slurm's definitions as properties -----------------------------------------------------

shapes = st.integers(1, 12).flatmap(
    lambda n: st.tuples(
        st.permutations([f"nd{i:02d}" for i in range(n)]),
        st.lists(st.integers(1, 7), min_size=n, max_size=n),
    )
)


def check_common(layout: Layout, nodes: list[str], counts: list[int]) -> None:
    assert layout.nodes == tuple(nodes)
    assert sorted(range(layout.num_tasks)) == list(range(sum(counts)))
    assert len(layout.rank_node) == len(layout.rank_local) == sum(counts)
    for index, count in enumerate(counts):
        ranks = layout.ranks_on(index)
        assert len(ranks) == count == layout.tasks_on(index)
        assert [layout.local_id(r) for r in ranks] == list(range(count))
        assert list(ranks) == sorted(ranks)  # local ids follow rank order
    assert sum(len(layout.ranks_on(i)) for i in range(len(nodes))) == layout.num_tasks


@given(shapes)
def test_block_definition(shape: tuple[list[str], list[int]]) -> None:
    nodes, counts = shape
    layout = block_layout(nodes, counts)
    check_common(layout, nodes, counts)
    assert list(layout.rank_node) == sorted(layout.rank_node)  # contiguous, node order


@given(shapes)
def test_cyclic_definition(shape: tuple[list[str], list[int]]) -> None:
    nodes, counts = shape
    layout = cyclic_layout(nodes, counts)
    check_common(layout, nodes, counts)
    keys = [(layout.rank_local[r], layout.rank_node[r]) for r in range(layout.num_tasks)]
    assert keys == sorted(keys)  # round j = local id j; within a round, node order


@given(shapes, st.integers(1, 5))
def test_plane_definition(shape: tuple[list[str], list[int]], size: int) -> None:
    nodes, counts = shape
    layout = plane_layout(nodes, counts, size)
    check_common(layout, nodes, counts)
    keys = [
        (layout.rank_local[r] // size, layout.rank_node[r], layout.rank_local[r] % size)
        for r in range(layout.num_tasks)
    ]
    assert keys == sorted(keys)  # round j = the j-th plane of each node, in node order


@given(shapes)
def test_plane_1_is_cyclic_and_huge_plane_is_block(shape: tuple[list[str], list[int]]) -> None:
    nodes, counts = shape
    assert plane_layout(nodes, counts, 1).rank_node == cyclic_layout(nodes, counts).rank_node
    assert plane_layout(nodes, counts, 99).rank_node == block_layout(nodes, counts).rank_node


@settings(max_examples=60)
@given(shapes, st.sampled_from(["block", "cyclic", "plane"]), st.integers(1, 4))
def test_every_task_of_a_random_step_verifies_and_agrees(
    shape: tuple[list[str], list[int]], dist: str, size: int
) -> None:
    nodes, counts = shape
    if dist == "block":
        layout, extra = block_layout(nodes, counts), {"SLURM_DISTRIBUTION": "block"}
    elif dist == "cyclic":
        layout, extra = cyclic_layout(nodes, counts), {"SLURM_DISTRIBUTION": "cyclic"}
    else:
        layout = plane_layout(nodes, counts, size)
        extra = {"SLURM_DISTRIBUTION": "plane", "SLURM_DIST_PLANESIZE": str(size)}
    assert_all_tasks_agree(task_envs(layout, **extra), layout.rank_to_node)


@settings(max_examples=60)
@given(shapes)
def test_a_map_the_environment_hides_is_refused_not_guessed(
    shape: tuple[list[str], list[int]],
) -> None:
    # Slurm >= 26.05 without -m orders tasks by topology: simulate it by a layout that is
    # not block. Some task must then refuse (and every task either refuses or is right
    # about itself).
    nodes, counts = shape
    real = cyclic_layout(nodes, counts)
    assume(real.rank_node != block_layout(nodes, counts).rank_node)
    refused = 0
    for rank, env in enumerate(task_envs(real)):
        try:
            layout = layout_for(Step.from_environ(env))
        except LayoutError as exc:
            assert "launch with -m block" in str(exc)
            refused += 1
        else:
            assert node_of(layout, rank) == node_of(real, rank)
    assert refused > 0


@given(st.lists(st.sampled_from([f"nd{i:02d}" for i in range(6)]), min_size=1, max_size=25))
def test_arbitrary_follows_the_host_order(hosts: list[str]) -> None:
    nodes = sorted(set(hosts))  # srun sorts and de-duplicates the arbitrary node list
    layout = arbitrary_layout(nodes, hosts)
    assert layout.rank_to_node == hosts
    envs = task_envs(
        layout, SLURM_DISTRIBUTION="arbitrary", SLURM_ARBITRARY_NODELIST=hostlist.compress(hosts)
    )
    assert_all_tasks_agree(envs, hosts)


@settings(max_examples=60)
@given(st.lists(st.lists(st.integers(1, 4), min_size=1, max_size=3), min_size=2, max_size=4))
def test_het_step_ranks_are_contiguous_in_component_order(
    components: list[list[int]],
) -> None:
    # Disjoint node sets per component, in an order that is not the union's sorted order.
    names: list[list[str]] = []
    n = 0
    for counts in reversed(components):  # component 0 gets the highest names
        names.insert(0, [f"h{n + i:02d}" for i in range(len(counts))])
        n += len(counts)
    union = sorted(name for group in names for name in group)
    count_of = {
        name: c
        for group, counts in zip(names, components, strict=True)
        for name, c in zip(group, counts, strict=True)
    }
    truth: list[str] = []
    for group, counts in zip(names, components, strict=True):
        truth += block_layout(group, counts).rank_to_node
    real = arbitrary_layout(union, truth)  # any host sequence as a real map
    extra = {"SLURM_HET_SIZE": str(len(components)), "SLURM_DISTRIBUTION": "cyclic"}
    for k, group in enumerate(names):
        extra[f"SLURM_JOB_NODELIST_PACK_GROUP_{k}"] = hostlist.compress(group)
    component_order = [name for group in names for name in group]
    envs = task_envs(real, component_order, **extra)
    assert envs[0]["SLURM_STEP_TASKS_PER_NODE"] == hostlist.compress_counts([count_of[h] for h in union])
    for env in envs:
        layout = layout_for(Step.from_environ(env))
        assert layout.rank_to_node == truth
        assert layout.component_sizes == tuple(sum(c) for c in components)


# --- heterogeneous steps launched with -m (observed on Slurm 22.05) ----------------------


def het_cyclic_envs() -> list[dict[str, str]]:
    """``srun -m cyclic -N2 -n4 : -N1 -n2``: component 0 really cyclic, yet every task
    saw SLURM_DISTRIBUTION=block (srun exports one component's value to all)."""
    real = ["node1", "node2", "node1", "node1", "node3", "node3"]
    layout = arbitrary_layout(["node1", "node2", "node3"], real)
    return task_envs(
        layout,
        SLURM_DISTRIBUTION="block",
        SLURM_HET_SIZE="2",
        SLURM_JOB_NODELIST_PACK_GROUP_0="node[1-2]",
        SLURM_JOB_NODELIST_PACK_GROUP_1="node3",
    )


# What the tasks of `srun -m cyclic -N2 -n4 : -N1 -n2` see as SLURM_DISTRIBUTION, per task:
# 22.05 and 26.05 export one value (block) to all; 24.11 gives each component its own.
HET_CYCLIC_DISTRIBUTION = {
    "22.05": ["block"] * 6,
    "24.11": ["cyclic"] * 4 + ["block"] * 2,
    "26.05": ["block"] * 6,
}


@pytest.mark.parametrize("version", observed.VERSIONS)
def test_recorded_het_step_with_cyclic_component_is_refused(version: str, tmp_path: Path) -> None:
    fid = "25_het_srun_cyclic_component"
    tasks = observed.step_envs(fid if version == observed.BASE_VERSION else f"{version}/{fid}", tmp_path)[
        "s0"
    ]
    assert [env["SLURM_DISTRIBUTION"] for _, env in tasks] == HET_CYCLIC_DISTRIBUTION[version]
    assert [t.hostname for t, _ in tasks] == ["node1", "node2", "node1", "node1", "node3", "node3"]
    for _task, env in tasks[:4]:  # component 0, the cyclic one: every task refuses
        with pytest.raises(LayoutError, match=r"^heterogeneous step \d+\.0 .*drop -m"):
            layout_for(Step.from_environ(env))


def test_het_node_ids_count_in_component_order(tmp_path: Path) -> None:
    # Component 0 on node4: SLURM_STEP_NODELIST is the sorted union node[1-2,4] with
    # counts in that order, while SLURM_NODEID numbers node4 as 0 (component order).
    tasks = observed.step_envs("24_het_srun_reversed", tmp_path)["s0"]
    task, env = tasks[0]
    assert (env["SLURM_STEP_NODELIST"], env["SLURM_STEP_TASKS_PER_NODE"]) == ("node[1-2,4]", "2,1,2")
    assert (task.hostname, env["SLURM_NODEID"]) == ("node4", "0")
    layout = layout_for(Step.from_environ(env))
    assert layout.rank_to_node == ["node4", "node4", "node1", "node1", "node2"]
    assert layout.component_sizes == (2, 3) and layout.index_of("node4") == 2
    wrong = env | {"SLURM_NODEID": "2"}  # as if it indexed the sorted list
    with pytest.raises(LayoutError, match="SLURM_NODEID=2 names 'node2' in the het components' node lists"):
        layout_for(Step.from_environ(wrong))


def test_het_component_with_explicit_m_is_refused_where_it_runs() -> None:
    envs = het_cyclic_envs()
    for env in envs[:4]:  # component 0's tasks see that their node disagrees
        with pytest.raises(LayoutError, match=r"^heterogeneous step 42\.0 .*drop -m"):
            layout_for(Step.from_environ(env))


# --- hostfiles -----------------------------------------------------------------------------


def test_hostfile_formats_seen_on_slurm_22_05() -> None:
    text = "# comment\nnode3\nnode1*2, node2\n\nnode3 # trailing\nnode[4,1-2]\nnode[2-3]*2\n"
    assert parse_hostfile(text) == [
        "node3",
        "node1",
        "node1",
        "node2",
        "node3",
        "node4",
        "node1",
        "node2",
        "node2",
        "node3",
        "node2",
        "node3",
    ]


def test_plain_hostfile_fast_path_and_limit() -> None:
    text = "# generated\nn1,n2 n3\n\tn4 # last\n"
    assert parse_hostfile(text) == ["n1", "n2", "n3", "n4"]
    assert parse_hostfile(text, limit=2) == ["n1", "n2"]
    assert parse_hostfile("n[1-3]*1000000000\n", limit=4) == ["n1", "n2", "n3", "n1"]
    with pytest.raises(LayoutError, match="lists more than 4194304 tasks"):
        parse_hostfile("n1*4194305\n")


@pytest.mark.parametrize(
    "text, what",
    [
        ("node1*x\n", "line 1: 'node1\\*x' is not HOST or HOSTLIST\\*N"),
        ("node1\nnode[3-1]\n", "line 2:"),
        ("*2\n", "line 1"),
    ],
)
def test_bad_hostfile_lines(text: str, what: str) -> None:
    with pytest.raises(LayoutError, match=what):
        parse_hostfile(text)


def arbitrary_env(tmp_path: Path, procid: int = 0) -> dict[str, str]:
    env = dict(observed.step_envs("09_arbitrary_hostfile", tmp_path)["s0"][procid][1])
    return env


def test_arbitrary_hostfile_must_be_readable(tmp_path: Path) -> None:
    env = arbitrary_env(tmp_path) | {"SLURM_HOSTFILE": str(tmp_path / "gone")}
    with pytest.raises(LayoutError, match=r"SLURM_HOSTFILE=.*gone' cannot be read on this node"):
        layout_for(Step.from_environ(env))


def test_arbitrary_without_any_source(tmp_path: Path) -> None:
    env = arbitrary_env(tmp_path)
    del env["SLURM_HOSTFILE"]
    with pytest.raises(LayoutError, match="neither SLURM_HOSTFILE nor SLURM_ARBITRARY_NODELIST"):
        layout_for(Step.from_environ(env))


def test_arbitrary_falls_back_to_the_source_reality_agrees_with(tmp_path: Path) -> None:
    env = arbitrary_env(tmp_path, procid=3)
    Path(env["SLURM_HOSTFILE"]).write_text("node1\nnode1\nnode2\nnode3\nnode3\n")  # edited later
    with pytest.raises(LayoutError, match="arbitrary"):
        layout_for(Step.from_environ(env))
    env["SLURM_ARBITRARY_NODELIST"] = "node[3,1,1,2,3]"
    layout = layout_for(Step.from_environ(env))
    assert layout.rank_to_node == ["node3", "node1", "node1", "node2", "node3"]
    assert layout.method == "arbitrary (SLURM_ARBITRARY_NODELIST)"


def test_arbitrary_host_outside_the_step(tmp_path: Path) -> None:
    env = arbitrary_env(tmp_path)
    Path(env["SLURM_HOSTFILE"]).write_text("node3 node9 node1 node2 node3\n")
    with pytest.raises(LayoutError, match="rank 1 is placed on 'node9', which is not in the step"):
        layout_for(Step.from_environ(env))


# --- errors on inconsistent or unknown environments ------------------------------------------


def base_env() -> dict[str, str]:
    return task_envs(block_layout(["a1", "a2"], [2, 1]))[2]


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"SLURM_DISTRIBUTION": "spread"},
            "SLURM_DISTRIBUTION='spread' is a distribution tfslurm cannot reproduce",
        ),
        ({"SLURM_DISTRIBUTION": "plane"}, "SLURM_DIST_PLANESIZE is not set"),
        ({"SLURM_STEP_TASKS_PER_NODE": "2"}, "2 nodes but 1 per-node task counts"),
        (
            {"SLURM_STEP_NUM_TASKS": "4"},
            "SLURM_STEP_NUM_TASKS=4 but SLURM_STEP_TASKS_PER_NODE='2,1' adds up to 3",
        ),
        ({"SLURM_STEP_NUM_NODES": "3"}, "SLURM_STEP_NUM_NODES=3"),
        (
            {"SLURMD_NODENAME": "a1"},
            "SLURM_NODEID=1 names 'a2' in SLURM_STEP_NODELIST .* but this task runs on SLURMD_NODENAME='a1'",
        ),
        ({"SLURM_NODEID": "5"}, "SLURM_NODEID=5 is outside"),
        ({"SLURM_GTIDS": "1,2"}, "Slurm placed ranks 1,2 on a2 but default \\(block\\) layout predicts 2"),
        ({"SLURM_GTIDS": "0,1"}, "SLURM_PROCID=2 is not among this node's SLURM_GTIDS=0,1"),
        ({"SLURM_LOCALID": "1"}, "placed ranks 2 on a2"),
        ({"SLURM_STEP_NODELIST": "a1,a1"}, "names a node twice"),
        ({"SLURM_STEP_TASKS_PER_NODE": "4000000(x2)"}, "8000000 tasks is more than tfslurm handles"),
    ],
)
def test_inconsistent_environments_are_refused(change: dict[str, str], message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        layout_for(Step.from_environ(base_env() | change))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"SLURM_STEP_NODELIST": "a[2-1]"}, "^SLURM_STEP_NODELIST: "),
        ({"SLURM_STEP_TASKS_PER_NODE": "2,x"}, "^SLURM_STEP_TASKS_PER_NODE: "),
    ],
)
def test_malformed_variables_name_the_variable(change: dict[str, str], message: str) -> None:
    with pytest.raises(SlurmEnvError, match=message):
        layout_for(Step.from_environ(base_env() | change))


def test_distribution_with_task_level_and_pack_parts() -> None:
    layout = cyclic_layout(["a1", "a2"], [3, 1])
    for dist in ("cyclic:block", "cyclic,nopack", "cyclic:cyclic:fcyclic,pack"):
        assert_all_tasks_agree(task_envs(layout, SLURM_DISTRIBUTION=dist), layout.rank_to_node)
    block = block_layout(["a1", "a2"], [3, 1])
    assert_all_tasks_agree(task_envs(block, SLURM_DISTRIBUTION="block:cyclic,pack"), block.rank_to_node)


def test_layout_helpers_and_bounds() -> None:
    layout = plane_layout(["a", "b"], [3, 2], 2)
    assert layout.rank_to_node == ["a", "a", "b", "b", "a"]
    assert layout.ranks_on(0) == (0, 1, 4) and layout.tasks_on(1) == 2
    assert layout.local_id(4) == 2 and node_of(layout, 2) == "b" and layout.num_tasks == 5
    with pytest.raises(PlanError, match=r"rank 5 is not in 0\.\.4"):
        node_of(layout, 5)
    with pytest.raises(LayoutError, match="node index 2 is outside"):
        layout.ranks_on(2)
    with pytest.raises(LayoutError, match="plane size 0"):
        plane_layout(["a"], [1], 0)
    assert layout.table().splitlines()[0].split() == ["rank", "node", "local"]
    assert issubclass(LayoutError, TfslurmError)


# --- the CLI ---------------------------------------------------------------------------------


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return tfslurm_cli("layout", *args, env=env)


def test_cli_json_contract(tmp_path: Path) -> None:
    _task, env = observed.step_envs("03_cyclic_N3_n6", tmp_path)["s0"][4]
    result = run_cli(env, "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["rank_to_node"] == ["node1", "node2", "node3", "node1", "node1", "node1"]
    assert document["rank"] == 4 and document["method"] == "cyclic"
    table = run_cli(env)
    assert table.returncode == 0
    assert table.stdout.splitlines()[-1].split() == ["5", "node1", "3"]


@pytest.mark.parametrize("where", ["batch", "salloc", "outside"])
def test_cli_outside_a_step_is_one_line_exit_2(where: str) -> None:
    if where == "batch":
        env = observed.load(PATHS["20_sbatch_steps"]).batch.env
        expect = "this is a batch script"
    elif where == "salloc":
        env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_NNODES": "2"}
        expect = "this is an salloc shell"
    else:
        env, expect = {}, "not running under Slurm"
    result = run_cli(env)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("tfslurm layout: error: SLURM_STEP_NODELIST is not set")
    assert expect in result.stderr


def test_sbatch_sorts_arbitrary_nodelists_so_hostfile_is_needed(tmp_path: Path) -> None:
    fixture = observed.load(PATHS["26_sbatch_arbitrary"])
    assert fixture.batch.env["SLURM_ARBITRARY_NODELIST"] == "node[1-2]"  # not node[2,1,2]
    env = dict(fixture.steps["s0"][0].env) | {"SLURM_HOSTFILE": str(tmp_path / "gone")}
    with pytest.raises(
        LayoutError,
        match=r"cannot be read on this node.*; "
        r"arbitrary \(SLURM_ARBITRARY_NODELIST\) lists 2 hosts for 3 tasks",
    ):
        layout_for(Step.from_environ(env))
