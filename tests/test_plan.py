"""Cluster plans: recorded real environments, descriptor round trips, TF_CONFIG, the CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import observed
from conftest import tfslurm_cli
from importcost import added_by
from shapes import layouts, task_env
from tfslurm.descriptor import Descriptor
from tfslurm.errors import (
    JobSpecError,
    LayoutError,
    PlanError,
    SlurmEnvError,
    TfslurmError,
)
from tfslurm.gpus import ASSIGNED_VARIABLE as ASSIGNED_GPUS_VARIABLE
from tfslurm.layout import Layout, block_layout, cyclic_layout, layout_for, plane_layout
from tfslurm.plan import (
    DESCRIPTOR_VARIABLE,
    TF_CONFIG_MAX_BYTES,
    Cluster,
    Plan,
    PlanOptions,
    plan_for,
    resolve_plan,
)
from tfslurm.ports import PortRule
from tfslurm.step import Step
from tfslurm.tfcompat import TF_JOB_ORDER

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure


def tf_config_fits(plan: Plan, rank: int | None = None) -> bool:
    """Whether TF_CONFIG of a rank can pass through exec / Slurm's task environment."""
    return len(plan.tf_config(rank).encode()) <= TF_CONFIG_MAX_BYTES


PATHS = observed.paths_by_id()


# -- recorded real environments ------------------------------------------------------------


@pytest.mark.parametrize("fid", sorted(observed.ids()))
def test_each_recorded_task_gets_its_host_and_the_same_cluster(fid: str, tmp_path: Path) -> None:
    for label, tasks in observed.step_envs(fid, tmp_path).items():
        specs = set()
        ports_by_node: dict[str, set[int]] = {}
        planned: dict[str, int] = {}
        for task, env in tasks:
            step = Step.from_environ(env)
            try:
                layout_for(step)
            except LayoutError as exc:  # a shape the layout engine refuses: so does the plan
                with pytest.raises(LayoutError) as info:
                    plan_for(step)
                assert str(info.value) == str(exc) and "\n" not in str(exc)
                continue
            plan = plan_for(step)
            own = plan.own
            assert own.rank == task.procid
            assert own.node == own.host == env["SLURMD_NODENAME"] == task.hostname, (fid, label)
            spec = plan.cluster.cluster_spec()
            specs.add(json.dumps(spec))
            assert spec["worker"][task.procid] == f"{own.host}:{own.port}"
            config = json.loads(plan.tf_config())
            assert config["task"] == {"type": "worker", "index": task.procid}
            assert config["cluster"] == spec
            ports_by_node.setdefault(own.node, set()).add(own.port)
            planned[own.node] = planned.get(own.node, 0) + 1
            # A task never gets a device Slurm did not make visible to it.
            visible = env.get("CUDA_VISIBLE_DEVICES")
            assert set(own.gpus or ()) <= set(visible.split(",") if visible else ())
        if not specs:
            continue
        assert len(specs) == 1, f"{fid} {label}: tasks disagree on the cluster"
        per_node = {node: len(ports) for node, ports in ports_by_node.items()}
        assert per_node == planned, f"{fid} {label}: two tasks of a node share a port"


def test_reserved_ports_are_used_by_local_id(tmp_path: Path) -> None:
    tasks = observed.step_envs("15_resv_ports_3", tmp_path)
    for step_tasks in tasks.values():
        for _task, env in step_tasks:
            plan = plan_for(Step.from_environ(env))
            low = int(env["SLURM_STEP_RESV_PORTS"].split("-")[0])
            assert plan.own.port == low + int(env["SLURM_LOCALID"])
            assert plan.cluster.ports.kind == "reserved"


def test_gres_per_node_list_is_split_between_the_node_tasks(tmp_path: Path) -> None:
    # --gres=gpu:2 with 2 tasks per node: both tasks see 0,1; tfslurm gives each one device.
    for tasks in observed.step_envs("11_gres_gpu2", tmp_path).values():
        owned: dict[str, list[tuple[str, ...]]] = {}
        for task, env in tasks:
            plan = plan_for(Step.from_environ(env))
            owned.setdefault(task.hostname, []).append(plan.own.gpus)
            # Every task predicts the same devices for the other tasks of its node.
            for rank in range(plan.cluster.num_tasks):
                if plan.task_of(rank).node == task.hostname:
                    assert plan.gpus_of(rank) is not None
                else:
                    assert plan.gpus_of(rank) is None  # another node: not knowable here
            assert plan.task_env()["CUDA_VISIBLE_DEVICES"] == ",".join(plan.own.gpus)
        for node, lists in owned.items():
            flat = [d for devices in lists for d in devices]
            assert len(flat) == len(set(flat)) == 2, node


def test_per_task_binding_is_kept_and_others_are_unknown(tmp_path: Path) -> None:
    for tasks in observed.step_envs("12_gpus_per_task", tmp_path).values():
        for task, env in tasks:
            plan = plan_for(Step.from_environ(env))
            assert plan.own.gpus == (env["CUDA_VISIBLE_DEVICES"],)
            others = [r for r in range(plan.cluster.num_tasks) if r != task.procid]
            assert all(plan.gpus_of(r) is None for r in others)


def test_gpu_bind_none_and_no_gpus_never_crash(tmp_path: Path) -> None:
    for fid in ("13_gpus_per_node_bind_none", "01_block_N3_tpn2"):
        for tasks in observed.step_envs(fid, tmp_path).values():
            for _task, env in tasks:
                plan = plan_for(Step.from_environ(env))
                assert plan.own.gpus == ()
                assert "CUDA_VISIBLE_DEVICES" not in plan.task_env()


# -- jobs, order, TF_CONFIG ------------------------------------------------------------------


def test_jobs_are_assigned_in_written_order_or_tf_order() -> None:
    step = Step.from_environ(task_env())
    written = plan_for(step, "worker:2,ps:1")
    assert written.cluster.cluster_spec() == {
        "worker": ["n9:" + str(written.cluster.port_of(0)), written.cluster.addresses[1]],
        "ps": [written.cluster.addresses[2]],
    }
    assert written.cluster.job_of(1) == ("worker", 1)
    tf = plan_for(step, "worker:2,ps:1", PlanOptions(job_order=TF_JOB_ORDER))
    assert list(tf.cluster.cluster_spec()) == ["ps", "worker"]
    assert tf.cluster.job_of(0) == ("ps", 0) and tf.cluster.job_of(1) == ("worker", 0)


def test_default_jobs_come_from_tfslurm_tf_dist() -> None:
    plan = plan_for(Step.from_environ(task_env(TFSLURM_TF_DIST="chief:1,worker:*")))
    assert plan.cluster.jobs == (("chief", 1), ("worker", 2))
    assert plan_for(Step.from_environ(task_env())).cluster.jobs == (("worker", 3),)


def test_hosts_keep_slurm_node_order_and_ports_follow_local_ids() -> None:
    plan = plan_for(Step.from_environ(task_env()), options=PlanOptions(port_base=15000))
    # TF's resolver would sort n10 before n9; Slurm puts ranks 0,1 on n9.
    assert plan.cluster.addresses == ("n9:15000", "n9:15001", "n10:15000")


def test_tf_config_is_compact_json_rpc_layer_only_when_asked() -> None:
    plan = plan_for(Step.from_environ(task_env()), "chief:1,worker:*", PlanOptions(port_base=2222))
    text = plan.tf_config()
    assert " " not in text
    assert json.loads(text) == {
        "cluster": {"chief": ["n9:2222"], "worker": ["n9:2223", "n10:2222"]},
        "task": {"type": "worker", "index": 0},
    }
    assert json.loads(plan.tf_config(0))["task"] == {"type": "chief", "index": 0}
    grpc = plan_for(Step.from_environ(task_env()), options=PlanOptions(port_base=2222, rpc_layer="grpc"))
    assert json.loads(grpc.tf_config())["rpc_layer"] == "grpc"


def tf_config_oracle(cluster: dict[str, list[str]], job: str, index: int, rpc: str | None = None) -> str:
    """TF_CONFIG by json.dumps: the evaluator sees every job, training tasks neither the
    evaluator nor empty jobs."""
    shown = cluster if job == "evaluator" else {n: t for n, t in cluster.items() if n != "evaluator" and t}
    value: dict[str, object] = {"cluster": shown, "task": {"type": job, "index": index}}
    if rpc is not None:
        value["rpc_layer"] = rpc
    return json.dumps(value, separators=(",", ":"))


def test_hook_tf_config_hides_the_evaluator_from_training_tasks() -> None:
    """One evaluator rule (docs/ps.md): the hook's TF_CONFIG equals what `tfslurm run`
    writes (Role.tf_config): the evaluator sees everything, the training tasks do not see it."""
    from tfslurm.runtime.roles import Role, role_from_tf_config

    plan = plan_for(
        Step.from_environ(task_env()), "chief:1,evaluator:1,worker:*", PlanOptions(port_base=2222)
    )
    full = {"chief": ["n9:2222"], "evaluator": ["n9:2223"], "worker": ["n10:2222"]}
    assert plan.cluster.cluster_spec() == full
    assert json.loads(plan.tf_config(0))["cluster"] == {"chief": ["n9:2222"], "worker": ["n10:2222"]}
    assert json.loads(plan.tf_config(2))["cluster"] == {"chief": ["n9:2222"], "worker": ["n10:2222"]}
    assert json.loads(plan.tf_config(1)) == {"cluster": full, "task": {"type": "evaluator", "index": 0}}
    for rank in range(3):
        job, index = plan.cluster.job_of(rank)
        assert plan.tf_config(rank) == tf_config_oracle(full, job, index)
        # tfslurm run, given the evaluator's full view, writes the same text for every task
        evaluator_view = role_from_tf_config(plan.tf_config(1))
        rebuilt = Role(evaluator_view.cluster, job, index, "test")
        assert rebuilt.tf_config() == plan.tf_config(rank)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["chief", "evaluator", "ps", "worker", "server"]), min_size=1, max_size=5, unique=True
    ),
    st.integers(1, 9),
    st.sampled_from([None, "grpc"]),
    st.sampled_from(["{node}", 'we"ird{node}']),
)
def test_plan_tf_config_fast_path_equals_the_one_writer(
    names: list[str], extra: int, rpc: str | None, template: str
) -> None:
    spec = ",".join(f"{n}:{'*' if n == names[-1] and n not in ('chief', 'evaluator') else 1}" for n in names)
    tasks = len(names) - 1 + (extra if names[-1] not in ("chief", "evaluator") else 1)
    env = task_env(SLURM_STEP_NODELIST="n1", SLURM_STEP_TASKS_PER_NODE=str(tasks), SLURM_STEP_NUM_TASKS=str(tasks),
                   SLURM_STEP_NUM_NODES="1", SLURMD_NODENAME="n1", SLURM_GTIDS=",".join(map(str, range(tasks))), SLURM_PROCID="0", SLURM_LOCALID="0",
                   TFSLURM_HOST_TEMPLATE=template)  # fmt: skip
    plan = plan_for(Step.from_environ(env), spec, PlanOptions(port_base=3000, rpc_layer=rpc))
    for rank in range(tasks):
        job, index = plan.cluster.job_of(rank)
        text = plan.tf_config(rank)
        assert text == tf_config_oracle(plan.cluster.cluster_spec(), job, index, rpc)
        assert ("evaluator" in json.loads(text)["cluster"]) == (job == "evaluator")


def test_host_template_maps_node_names_to_addresses() -> None:
    plan = plan_for(
        Step.from_environ(task_env()),
        options=PlanOptions(port_base=2222, host_template="{node}-ib.example.org"),
    )
    assert plan.cluster.addresses[2] == "n10-ib.example.org:2222"
    assert plan.own.node == "n9" and plan.own.host == "n9-ib.example.org"
    from_env = plan_for(
        Step.from_environ(task_env(TFSLURM_HOST_TEMPLATE="{node}.x")), options=PlanOptions(port_base=1)
    )
    assert from_env.cluster.hosts == ("n9.x", "n10.x")
    for bad in ("node", "{node}:1", "{node};x", "{host}", "{node}{x}", "a b{node}"):
        with pytest.raises(PlanError, match="must contain"):
            plan_for(Step.from_environ(task_env()), options=PlanOptions(host_template=bad))


def test_plan_errors_are_one_line_tfslurm_errors() -> None:
    cases = [
        (task_env(), "worker:2", JobSpecError, "asks for 2 tasks but the step has 3"),
        (
            {"SLURM_JOB_ID": "1", "SLURMD_NODENAME": "n1", "SLURM_PROCID": "0"},
            None,
            SlurmEnvError,
            "batch script",
        ),
        ({}, None, SlurmEnvError, "not running under Slurm"),
    ]
    for env, jobs, error, needle in cases:
        with pytest.raises(error) as info:
            plan_for(Step.from_environ(env), jobs)
        assert needle in str(info.value) and "\n" not in str(info.value)
    plan = plan_for(Step.from_environ(task_env()))
    for rank in (-1, 3, "0", True):
        with pytest.raises(PlanError, match="rank"):
            plan.task_of(rank)
    with pytest.raises(PlanError, match="no job 'ps'"):
        plan.cluster.rank_of("ps", 0)


def test_table_is_aligned_and_marks_this_task() -> None:
    env = task_env(CUDA_VISIBLE_DEVICES="0,1", SLURM_GPUS_ON_NODE="2", SLURM_STEP_GPUS="0,1")
    plan = plan_for(Step.from_environ(env), "chief:1,worker:*", PlanOptions(port_base=9000))
    lines = plan.table().splitlines()
    assert lines[0].split() == ["RANK", "JOB", "TASK", "HOST:PORT", "GPUS"]
    assert lines[1].split() == ["0", "chief", "0", "n9:9000", "0"]
    assert lines[2].split() == ["1", "worker", "0", "n9:9001", "1", "*"]
    assert lines[3].split() == ["2", "worker", "1", "n10:9000", "?"]
    assert len({line.index("HOST:PORT") if i == 0 else None for i, line in enumerate(lines)}) == 2


def test_assigned_gpus_are_not_split_twice() -> None:
    env = task_env(CUDA_VISIBLE_DEVICES="0,1", SLURM_GPUS_ON_NODE="2", SLURM_STEP_GPUS="0,1")
    first = plan_for(Step.from_environ(env))
    exported = first.task_env()
    assert exported["CUDA_VISIBLE_DEVICES"] == "1"
    env.update({k: v for k, v in exported.items() if k != "TF_CONFIG"})
    again = plan_for(Step.from_environ(env))
    assert again.own.gpus == ("1",)  # not a share of "1" split over two tasks
    # A marker from another step (nested srun) is ignored.
    env[ASSIGNED_GPUS_VARIABLE] = exported[ASSIGNED_GPUS_VARIABLE].replace("4242.3.", "4242.4.")
    env["CUDA_VISIBLE_DEVICES"] = "0,1"
    assert plan_for(Step.from_environ(env)).own.gpus == ("1",)


def test_list_narrowed_before_the_plan_is_not_split_per_rank() -> None:
    # The user (or an earlier tool) narrowed the node's 2 GPUs to "1" for this task: the plan
    # keeps it, and must not split "1" again to predict rank 0's devices on the same node.
    env = task_env(CUDA_VISIBLE_DEVICES="1", SLURM_GPUS_ON_NODE="2", SLURM_STEP_GPUS="0,1")
    plan = plan_for(Step.from_environ(env))
    assert plan.own.gpus == ("1",)
    assert plan.gpus_of(0) is None and plan.gpus is not None and not plan.gpus.split
    # The same after tfslurm's own assignment: the exported list is this task's own.
    env = task_env(CUDA_VISIBLE_DEVICES="0,1", SLURM_GPUS_ON_NODE="2", SLURM_STEP_GPUS="0,1")
    first = plan_for(Step.from_environ(env))
    assert first.gpus_of(0) == ("0",)  # the node's list, split: rank 0's share is known
    env.update({k: v for k, v in first.task_env().items() if k != "TF_CONFIG"})
    again = plan_for(Step.from_environ(env))
    assert again.own.gpus == ("1",) and again.gpus_of(0) is None


def test_a_missing_slurm_localid_comes_from_the_layout() -> None:
    env = task_env(CUDA_VISIBLE_DEVICES="0,1", SLURM_GPUS_ON_NODE="2", SLURM_STEP_GPUS="0,1")
    del env["SLURM_LOCALID"]
    plan = plan_for(Step.from_environ(env))
    assert plan.own.gpus == ("1",) and plan.gpus_of(0) == ("0",)


# -- descriptor ------------------------------------------------------------------------------


def test_descriptor_round_trip_and_from_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    env = task_env(TFSLURM_TF_DIST="chief:1,worker:*")
    plan = plan_for(Step.from_environ(env))
    text = plan.cluster.descriptor()
    assert text.startswith("tfslurm1;") and len(text) < 200
    rebuilt = Plan.from_descriptor(text, rank=1)
    assert rebuilt.cluster.cluster_spec() == plan.cluster.cluster_spec()
    assert rebuilt.tf_config() == plan.tf_config()
    env[DESCRIPTOR_VARIABLE] = text
    env["SLURM_STEP_TASKS_PER_NODE"] = "garbage"  # the descriptor is used, not Slurm's vars
    assert resolve_plan(Step.from_environ(env)).tf_config() == plan.tf_config()
    env["SLURMD_NODENAME"] = "n10"
    with pytest.raises(PlanError, match="from another step"):
        resolve_plan(Step.from_environ(env), options=PlanOptions(assign=False))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "does not start with 'tfslurm1'"),
        ("tfslurm2;nodes=n1", "does not start"),
        ("tfslurm1;nodes=n1;tasks=1;map=block;ports=e8888;jobs=worker:1", "lacks host"),
        ("tfslurm1;nodes=n1;tasks=1;map=block;ports=e8888;jobs=worker:1;host={node};x=1", "unknown field"),
        ("tfslurm1;nodes=n1;nodes=n2;tasks=1;map=block;ports=e8888;jobs=worker:1;host={node}", "twice"),
        ("tfslurm1;nodes=n[1-2];tasks=1;map=block;ports=e8888;jobs=worker:1;host={node}", "2 nodes but 1"),
        ("tfslurm1;nodes=n1;tasks=2;map=block;ports=e8888;jobs=worker:3;host={node}", "add up to 3"),
        ("tfslurm1;nodes=n1;tasks=2;map=runs:0;ports=e8888;jobs=worker:2;host={node}", "lists 1 ranks"),
        (
            "tfslurm1;nodes=n[1-2];tasks=1,1;map=runs:0(x2);ports=e8888;jobs=worker:2;host={node}",
            "does not match",
        ),
        ("tfslurm1;nodes=n1;tasks=2;map=z:!!;ports=e8888;jobs=worker:2;host={node}", "corrupt"),
        ("tfslurm1;nodes=n1;tasks=1;map=block;ports=q1;jobs=worker:1;host={node}", "port rule"),
        (
            "tfslurm1;nodes=n1;tasks=3;map=block;ports=r100-101;jobs=worker:3;host={node}",
            "fewer than 3 ports",
        ),
        (
            "tfslurm1;nodes=n1;tasks=999999999999;map=block;ports=e8888;jobs=worker:1;host={node}",
            "more than tfslurm",
        ),
        ("tfslurm1;nodes=n[1-;tasks=1;map=block;ports=e8888;jobs=worker:1;host={node}", "plan descriptor"),
        ('tfslurm1;nodes=n1;tasks=1;map=block;ports=e8888;jobs=w"x:1;host={node}', "bad jobs entry"),
        (
            "tfslurm1;nodes=n1;tasks=1;map=z:eNrLyM9JBAAEKgGl;ports=e8888;jobs=worker:1;host={node}",
            "is 'hola'",
        ),
    ],
)
def test_bad_descriptors_raise_plan_errors(text: str, needle: str) -> None:
    with pytest.raises(TfslurmError) as info:
        Plan.from_descriptor(text)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_a_100k_task_plan_needs_the_descriptor() -> None:
    env = task_env(
        SLURM_STEP_NODELIST="nid[00000-12499]",
        SLURM_STEP_TASKS_PER_NODE="8(x12500)",
        SLURM_STEP_NUM_TASKS="100000",
        SLURM_STEP_NUM_NODES="12500",
        SLURMD_NODENAME="nid00000",
        SLURM_GTIDS="0,1,2,3,4,5,6,7",
    )
    plan = plan_for(Step.from_environ(env), "chief:1,worker:*")
    assert not tf_config_fits(plan)
    exported = plan.task_env()
    assert "TF_CONFIG" not in exported
    text = exported[DESCRIPTOR_VARIABLE]
    assert len(text) < 200
    assert Plan.from_descriptor(text, rank=1).tf_config() == plan.tf_config()


def test_tf_config_size_limit_boundary() -> None:
    # Find a plan whose TF_CONFIG is just under and just over the exec limit.
    def plan_of(nodes: int) -> Plan:
        env = task_env(
            SLURM_STEP_NODELIST=f"node[00001-{nodes:05d}]",
            SLURM_STEP_TASKS_PER_NODE=f"1(x{nodes})",
            SLURM_STEP_NUM_TASKS=str(nodes),
            SLURM_STEP_NUM_NODES=str(nodes),
            SLURMD_NODENAME="node00002",
            SLURM_NODEID="1",
            SLURM_LOCALID="0",
            SLURM_GTIDS="1",
        )
        return plan_for(Step.from_environ(env), options=PlanOptions(port_base=12345))

    small, big = plan_of(6000), plan_of(9000)
    assert tf_config_fits(small) and "TF_CONFIG" in small.task_env()
    assert not tf_config_fits(big) and len(big.tf_config().encode()) > TF_CONFIG_MAX_BYTES


@given(
    layouts(),
    st.sampled_from([PortRule("explicit", base=20000), PortRule("derived", base=11000)]),
    st.data(),
)
@settings(max_examples=150, deadline=None)
def test_descriptor_rebuilds_any_plan_exactly(layout: Layout, ports: PortRule, data: st.DataObject) -> None:
    n = layout.num_tasks
    first = data.draw(st.integers(0, n))
    jobs = (("chief", 1), ("worker", n - 1)) if first and n > 1 else (("worker", n),)
    reserved = PortRule(
        "reserved",
        ports=tuple(range(30000, 30000 + max(layout.tasks_on(i) for i in range(len(layout.nodes))))),
    )
    rule = data.draw(st.sampled_from([ports, reserved]))
    plan = Plan(Cluster(layout, jobs, rule), rank=0)
    text = plan.cluster.descriptor()
    rebuilt = Plan.from_descriptor(text, rank=0)
    assert rebuilt.cluster.nodes == plan.cluster.nodes
    assert (
        rebuilt.cluster.rank_node == plan.cluster.rank_node
        and rebuilt.cluster.rank_local == plan.cluster.rank_local
    )
    assert rebuilt.cluster.cluster_spec() == plan.cluster.cluster_spec()
    assert rebuilt.tf_config() == plan.tf_config()
    assert Descriptor.decode(text).encode() == text
    assert json.loads(plan.tf_config()) == {
        "cluster": plan.cluster.cluster_spec(),
        "task": {"type": jobs[0][0], "index": 0},
    }
    assert plan.tf_config().startswith(
        '{"cluster":' + json.dumps(plan.cluster.cluster_spec(), separators=(",", ":"))
    )
    # Every (node, port) pair is used by exactly one rank.
    assert len(set(plan.cluster.addresses)) == n


def test_tf_config_escapes_what_json_must_escape() -> None:
    layout = Layout(('n"1', "nø"), (0, 1), (0, 0), "given")
    cluster = Cluster(layout, (("worker", 2),), PortRule("explicit", base=5000))
    plan = Plan(cluster, rank=0)
    assert json.loads(plan.tf_config())["cluster"] == {"worker": ['n"1:5000', "nø:5000"]}


def test_explicit_local_ids_round_trip() -> None:
    layout = Layout(("a", "b"), (0, 1, 0), (1, 0, 0), "given", source="odd")
    plan = Plan(Cluster(layout, (("worker", 3),), PortRule("explicit", base=5000)))
    text = plan.cluster.descriptor()
    assert ";local=" in text
    assert (
        Plan.from_descriptor(text).cluster.addresses
        == plan.cluster.addresses
        == ("a:5001", "b:5000", "a:5000")
    )


def test_long_explicit_maps_are_compressed() -> None:
    import random

    rng = random.Random(7)
    order = [i for i in range(50) for _ in range(40)]
    rng.shuffle(order)
    seen = [0] * 50
    local = []
    for node in order:
        local.append(seen[node])
        seen[node] += 1
    nodes = tuple(f"n{i}" for i in range(50))
    layout = Layout(nodes, tuple(order), tuple(local), "given")
    plan = Plan(Cluster(layout, (("worker", 2000),), PortRule("explicit", base=5000)))
    text = plan.cluster.descriptor()
    assert ";map=z:" in text
    assert Plan.from_descriptor(text).cluster.rank_node == tuple(order)


# -- CLI ---------------------------------------------------------------------------------------


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return tfslurm_cli(*args, env=env)


def test_cli_tf_config_env_and_plan() -> None:
    env = task_env(CUDA_VISIBLE_DEVICES="0,1", SLURM_GPUS_ON_NODE="2", SLURM_STEP_GPUS="0,1")
    done = run_cli(["tf-config", "--jobs", "chief:1,worker:*", "--port-base", "7000"], env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "cluster": {"chief": ["n9:7000"], "worker": ["n9:7001", "n10:7000"]},
        "task": {"type": "worker", "index": 0},
    }
    done = run_cli(["env", "--port-base", "7000"], env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("export TF_CONFIG='{")
    assert "export CUDA_VISIBLE_DEVICES=1" in lines
    shell = subprocess.run(
        ["sh", "-c", done.stdout + '\nprintf %s "$TF_CONFIG"'], capture_output=True, text=True, check=True
    )
    assert json.loads(shell.stdout)["task"] == {"type": "worker", "index": 1}
    done = run_cli(["env", "--format", "json", "--port-base", "7000"], env)
    assert json.loads(done.stdout)["CUDA_VISIBLE_DEVICES"] == "1"
    done = run_cli(["plan", "--all-tasks", "--jobs", "ps:1,worker:2", "--port-base", "7000"], env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].split() == ["0", "ps", "0", "n9:7000", "0"]


def test_plan_is_printed_once_per_step_by_rank_0() -> None:
    """`srun -n3 tfslurm plan` prints one table, not three interleaved: rank 0 prints it (and
    a note on '?'), the others only check; --all-tasks prints in every task."""
    args = ["plan", "--jobs", "ps:1,worker:2", "--port-base", "7000"]
    other = run_cli(args, task_env(CUDA_VISIBLE_DEVICES="0,1", SLURM_GPUS_ON_NODE="2", SLURM_STEP_GPUS="0,1"))
    assert other.returncode == 0 and other.stdout == "" and other.stderr == ""
    first = run_cli(args, task_env(SLURM_PROCID="0", SLURM_LOCALID="0", CUDA_VISIBLE_DEVICES="0,1",
                                   SLURM_GPUS_ON_NODE="2", SLURM_STEP_GPUS="0,1"))  # fmt: skip
    lines = first.stdout.splitlines()
    assert first.returncode == 0 and len(lines) == 5, first.stdout
    assert lines[1].split() == ["0", "ps", "0", "n9:7000", "0", "*"]
    assert lines[3].split() == ["2", "worker", "1", "n10:7000", "?"]
    assert lines[4].startswith("(? = GPUs of a task on another node") and "--all-tasks" in lines[4]
    bad = run_cli(["plan", "--jobs", "ps:1,worker:1"], task_env())  # errors still in every task
    assert bad.returncode == 2 and "asks for 2 tasks" in bad.stderr


@pytest.mark.parametrize("command", ["tf-config", "env", "plan"])
@pytest.mark.parametrize(
    ("env", "args", "needle"),
    [
        ({}, [], "not running under Slurm"),
        (
            {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "n1", "SLURM_PROCID": "0", "SLURM_NODELIST": "n1"},
            [],
            "batch script",
        ),
        (task_env(), ["--jobs", "ps:1,worker:1"], "asks for 2 tasks but the step has 3"),
        (task_env(), ["--jobs", "ps"], "jobs spec 'ps': job 'ps' has no count; write ps:N or ps:*"),
    ],
)
def test_cli_errors_are_one_line_and_exit_2(
    command: str, env: dict[str, str], args: list[str], needle: str
) -> None:
    done = run_cli([command, *args], env)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith(f"tfslurm {command}: error:")


@st.composite
def step_shapes(draw: st.DrawFn) -> tuple[list[str], list[int], str | None, int | None]:
    counts = draw(st.lists(st.integers(1, 5), min_size=1, max_size=6))
    width = draw(st.sampled_from([0, 3]))
    numbers = draw(st.permutations(range(1, len(counts) + 1)))  # node order need not be sorted
    names = [f"n{i:0{width}d}" if width else f"n{i}" for i in numbers]
    dist = draw(st.sampled_from([None, "block", "cyclic", "plane"]))
    plane = draw(st.integers(1, 3)) if dist == "plane" else None
    return names, counts, dist, plane


@given(step_shapes(), st.sampled_from([None, "chief:1,worker:*", "worker:*,ps:1"]), st.booleans())
@settings(max_examples=60, deadline=None)
def test_every_rank_of_any_step_agrees_and_finds_itself(shape, jobs, reserved) -> None:
    names, counts, dist, plane = shape
    if dist == "plane":
        layout = plane_layout(names, counts, plane)
    elif dist == "cyclic":
        layout = cyclic_layout(names, counts)
    else:
        layout = block_layout(names, counts)
    n = layout.num_tasks
    if jobs and n < 2:
        jobs = None
    common = {
        "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "2", "SLURM_STEP_NODELIST": ",".join(names),
        "SLURM_STEP_TASKS_PER_NODE": ",".join(map(str, counts)), "SLURM_STEP_NUM_TASKS": str(n),
        "SLURM_STEP_NUM_NODES": str(len(names)),
    }  # fmt: skip
    if dist:
        common["SLURM_DISTRIBUTION"] = "plane" if dist == "plane" else dist
    if plane:
        common["SLURM_DIST_PLANESIZE"] = str(plane)
    if reserved:
        common["SLURM_STEP_RESV_PORTS"] = f"21000-{21000 + max(counts)}"
    configs = set()
    for rank in range(n):
        node = layout.rank_node[rank]
        env = dict(common, SLURM_PROCID=str(rank), SLURM_LOCALID=str(layout.rank_local[rank]),
                   SLURM_NODEID=str(node), SLURMD_NODENAME=names[node],
                   SLURM_GTIDS=",".join(map(str, layout.ranks_on(node))))  # fmt: skip
        plan = plan_for(Step.from_environ(env), jobs)
        assert plan.own.host == names[node]
        configs.add(json.dumps(plan.cluster.cluster_spec()))
        assert Plan.from_descriptor(plan.cluster.descriptor(), rank=rank).tf_config() == plan.tf_config()
    assert len(configs) == 1
    spec = json.loads(configs.pop())
    addresses = [a for job in spec.values() for a in job]
    assert len(addresses) == len(set(addresses)) == n
    assert [a.rpartition(":")[0] for a in plan.cluster.addresses] == [names[i] for i in layout.rank_node]


def test_the_taskprolog_path_imports_only_what_it_needs() -> None:
    # Every task of a --tf-dist job runs this in a fresh `python -I -S`: typing, json, base64
    # and zlib (let alone TensorFlow) would be paid by every task for nothing.
    root = str(Path(__import__("tfslurm").__file__).parent.parent)
    env = task_env(
        CUDA_VISIBLE_DEVICES="0,1",
        SLURM_GPUS_ON_NODE="2",
        SLURM_STEP_GPUS="0,1",
        TFSLURM_TF_DIST="chief:1,worker:*",
    )
    code = (
        f"import sys; sys.path.insert(0, {root!r})\n"
        "from tfslurm.plan import plan_for\n"
        "from tfslurm.step import Step\n"
        f"variables = plan_for(Step.from_environ({env!r})).task_env()\n"
        "assert variables['CUDA_VISIBLE_DEVICES'] == '1', variables\n"
    )
    assert added_by(code, ("typing", "json", "base64", "zlib", "tensorflow", "subprocess")) == []


def test_gpu_plan_for_names_a_missing_or_foreign_rank() -> None:
    from tfslurm.plan import gpu_plan_for

    layout = Layout(("n9", "n10"), (0, 0, 1), (0, 1, 0), "given", source="test")
    without_rank = {k: v for k, v in task_env().items() if k != "SLURM_PROCID"}
    with pytest.raises(SlurmEnvError, match="SLURM_PROCID is not set"):
        gpu_plan_for(Step.from_environ(without_rank), layout)
    with pytest.raises(PlanError, match=r"SLURM_PROCID=7 is not a rank of the layout \(0..2\)"):
        gpu_plan_for(Step.from_environ(task_env(SLURM_PROCID="7")), layout)
