"""Every framework's variables from the one plan: recorded real steps, any layout, errors.

The real runs (JAX, torch, Keras on a local cluster) are in test_frameworks_cluster.py;
these check the variables themselves against where Slurm really put each rank
(``tests/data/observed``) and against any layout hypothesis draws.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import observed
from importcost import added_by
from shapes import layouts, task_env
from tfslurm.errors import LayoutError, TfslurmError
from tfslurm.frameworks import (
    Coordinator,
    RuntimeListError,
    coordinator,
    jax_env,
    keras_env,
    parse_runtimes,
    runtime_env,
    torch_env,
)
from tfslurm.iface import IfaceError, IfaceHosts, check_iface_name, interface_address
from tfslurm.layout import layout_for
from tfslurm.plan import Cluster, Plan, plan_for
from tfslurm.ports import PortRule
from tfslurm.prolog import task_changes
from tfslurm.settings import Settings
from tfslurm.step import Step

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

ALL = ("tf", "keras", "jax", "torch")


def check_runtimes(plan: Plan, rank: int) -> dict[str, str]:
    """Every runtime's variables of ``rank`` against the plan's layout; returns them."""
    node = plan.cluster.rank_node[rank]
    torch = torch_env(plan, rank)
    assert torch["RANK"] == str(rank) and torch["WORLD_SIZE"] == str(plan.cluster.num_tasks)
    assert torch["LOCAL_RANK"] == str(plan.cluster.rank_local[rank])
    assert torch["LOCAL_WORLD_SIZE"] == str(plan.cluster.rank_node.count(node))
    assert torch["GROUP_RANK"] == str(node)
    jax = jax_env(plan, rank)
    keras = keras_env(plan, rank)
    assert jax["JAX_PROCESS_ID"] == keras["KERAS_DISTRIBUTION_PROCESS_ID"] == str(rank)
    assert (
        jax["JAX_NUM_PROCESSES"] == keras["KERAS_DISTRIBUTION_NUM_PROCESSES"] == str(plan.cluster.num_tasks)
    )
    # One coordinator for all: rank 0's host, on a port no task of rank 0's node uses.
    where = coordinator(plan)
    assert where.host == plan.cluster.host_of(0) == torch["MASTER_ADDR"] and torch["MASTER_PORT"] == str(
        where.port
    )
    assert jax["JAX_COORDINATOR_ADDRESS"] == where.address
    listed = keras["KERAS_DISTRIBUTION_JOB_ADDRESSES"].split(",")
    assert listed[0] == where.address and listed[1:] == list(plan.cluster.addresses[1:])
    taken = {
        plan.cluster.port_of(r)
        for r in range(plan.cluster.num_tasks)
        if plan.cluster.rank_node[r] == plan.cluster.rank_node[0]
    }
    assert where.port not in taken or plan.cluster.ports.capacity() == max(plan.cluster.counts)
    return {**torch, **jax, **keras}


@pytest.mark.parametrize("fid", sorted(observed.ids()))
def test_recorded_steps_give_every_runtime_slurms_real_placement(fid: str, tmp_path: Path) -> None:
    for label, tasks in observed.step_envs(fid, tmp_path).items():
        try:
            layout_for(Step.from_environ(tasks[0][1]))
        except LayoutError:
            continue  # refused by the layout engine: test_plan checks the refusal
        hosts = {task.procid: task.hostname for task, _ in tasks}
        per_node = Counter(hosts.values())
        shared = set()
        for task, env in tasks:
            plan = plan_for(Step.from_environ(env))
            variables = check_runtimes(plan, task.procid)
            # ... and against what Slurm itself said and where the task really ran
            assert variables["RANK"] == env["SLURM_PROCID"]
            assert variables["LOCAL_RANK"] == env["SLURM_LOCALID"]
            assert variables["LOCAL_WORLD_SIZE"] == str(per_node[task.hostname])
            assert plan.cluster.nodes[int(variables["GROUP_RANK"])] == task.hostname
            assert variables["WORLD_SIZE"] == str(len(hosts))
            assert variables["MASTER_ADDR"] == hosts[0], (fid, label)
            everything = runtime_env(plan, ALL)
            assert everything["RANK"] == variables["RANK"]
            for name in ("CUDA_VISIBLE_DEVICES",):  # the GPU rule is TF's, for all
                assert everything.get(name) == plan.task_env().get(name)
            gpus = plan.gpus.own if plan.gpus else ()
            expected = ",".join(map(str, range(len(gpus)))) if gpus else None
            assert everything.get("JAX_LOCAL_DEVICE_IDS") == expected
            shared.add((variables["MASTER_PORT"], variables["JAX_COORDINATOR_ADDRESS"],
                        variables["KERAS_DISTRIBUTION_JOB_ADDRESSES"]))  # fmt: skip
        assert len(shared) == 1, f"{fid} {label}: tasks disagree on the coordinator"


@given(
    layouts(),
    st.sampled_from([PortRule("explicit", base=20000), PortRule("derived", base=11000)]),
    st.data(),
)
@settings(max_examples=120, deadline=None)
def test_any_layout_gives_every_runtime_the_layouts_ranks(layout, ports, data) -> None:
    """Block, cyclic, plane and arbitrary (shuffled) layouts of uneven counts, and reserved
    ports with and without a spare one."""
    most = max(layout.tasks_on(i) for i in range(len(layout.nodes)))
    reserved = PortRule("reserved", ports=tuple(range(30000, 30000 + most + data.draw(st.integers(0, 1)))))
    rule = data.draw(st.sampled_from([ports, reserved]))
    n = layout.num_tasks
    plan = Plan(Cluster(layout, (("worker", n),), rule))
    ranks_seen = set()
    for rank in range(n):
        own = plan.for_task(rank, None)
        variables = check_runtimes(own, rank)
        assert variables == check_runtimes(plan, rank)  # the same, whoever computes it
        ranks_seen.add(int(variables["RANK"]))
        everything = runtime_env(own, ALL)
        assert everything["TF_CONFIG"] == own.tf_config()
    assert ranks_seen == set(range(n))
    # GROUP_RANK + LOCAL_RANK name every rank once
    pairs = {(torch_env(plan, r)["GROUP_RANK"], torch_env(plan, r)["LOCAL_RANK"]) for r in range(n)}
    assert len(pairs) == n


def test_runtime_lists() -> None:
    assert parse_runtimes(None) == parse_runtimes(" ") == ("tf",)
    assert parse_runtimes("torch, JAX,torch") == ("torch", "jax")
    with pytest.raises(
        RuntimeListError,
        match=r"^unknown runtime 'pt' \(--for/TFSLURM_FOR\); choose from tf, keras, jax, torch$",
    ):
        parse_runtimes("tf,pt")


def test_without_tf_there_is_no_tf_config_but_the_same_gpus() -> None:
    env = task_env(CUDA_VISIBLE_DEVICES="0,1", SLURM_GPUS_ON_NODE="2", SLURM_STEP_GPUS="0,1")
    plan = plan_for(Step.from_environ(env))
    torch_only = runtime_env(plan, ("torch",))
    assert "TF_CONFIG" not in torch_only and torch_only["CUDA_VISIBLE_DEVICES"] == "1"
    assert runtime_env(plan, ("tf",)) == plan.task_env()
    assert runtime_env(plan, ("jax",))["JAX_LOCAL_DEVICE_IDS"] == "0"


def test_the_taskprolog_reads_tfslurm_for() -> None:
    env = task_env(TFSLURM_TF_DIST="worker:*", TFSLURM_FOR="torch,jax", TF_CONFIG="stale")
    changes = task_changes(env)
    assert changes["TF_CONFIG"] is None  # no tf asked: an inherited one is removed
    assert changes["RANK"] == "1" and changes["LOCAL_WORLD_SIZE"] == "2" and changes["GROUP_RANK"] == "0"
    assert changes["JAX_COORDINATOR_ADDRESS"] == changes["MASTER_ADDR"] + ":" + changes["MASTER_PORT"]
    plain = task_changes(task_env(TFSLURM_TF_DIST="worker:*"))
    assert set(plain) == {"TF_CONFIG"}
    bad = task_env(TFSLURM_TF_DIST="worker:*", TFSLURM_FOR="pytorch")
    with pytest.raises(TfslurmError, match="unknown runtime 'pytorch'"):
        task_changes(bad)


def test_interfaces_on_this_machine() -> None:
    assert interface_address("lo") == "127.0.0.1"
    hosts = IfaceHosts("lo", "{node}", own_node="localhost")
    assert hosts.addresses(["localhost"]) == ("127.0.0.1",)
    assert hosts.socket_env() == {"NCCL_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo"}
    with pytest.raises(
        IfaceError, match=r"^node n7 has no network interface 'nosuch0' \(--iface/TFSLURM_IFACE\)$"
    ):
        IfaceHosts("nosuch0", own_node="n7")
    for bad in ("", "a/b", "x" * 16, "eth 0", "a,b"):
        with pytest.raises(IfaceError, match="is not valid"):
            check_iface_name(bad)
    away = IfaceHosts("lo", "{node}.invalid")  # away from a node: nothing checked locally
    with pytest.raises(IfaceError, match=r"'n1\.invalid' does not resolve"):
        away.address("n1")


def test_coordinator_is_a_value() -> None:
    where = Coordinator("fe80::1", 2222)
    assert where == Coordinator("fe80::1", 2222) and hash(where) == hash(Coordinator("fe80::1", 2222))
    assert where != Coordinator("fe80::1", 2223)
    assert where.address == "[fe80::1]:2222" and Coordinator("n1", 5).address == "n1:5"
    assert repr(where) == "Coordinator(host='fe80::1', port=2222)"


def local_task_env(**extra: str) -> dict[str, str]:
    """The one task of a step on node ``localhost``: its name resolves to ``lo``'s address."""
    one = {"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_GTIDS": "0", "SLURMD_NODENAME": "localhost"}
    one.update(SLURM_STEP_NODELIST="localhost", SLURM_STEP_TASKS_PER_NODE="1", SLURM_STEP_NUM_TASKS="1")
    return task_env(SLURM_STEP_NUM_NODES="1", **one, **extra)


def test_node_template_given_is_resolved_on_the_interface() -> None:
    plan = plan_for(Step.from_environ(local_task_env()))
    assert plan.cluster.host_template == "{node}" and plan.rank == 0
    by_setting = plan.on_iface("lo", Settings.from_environ({"TFSLURM_HOST_TEMPLATE": "{node}"}))
    by_option = plan.on_iface("lo", Settings.from_environ({}), host_template="{node}")
    for on_lo in (by_setting, by_option):
        assert on_lo.cluster.hosts == ("127.0.0.1",) and on_lo.cluster.iface == "lo"
    # none given: the per-interface name {node}-IFACE is the one resolved
    with pytest.raises(IfaceError, match=r"'localhost-lo' does not resolve .*or set the host template$"):
        plan.on_iface("lo", Settings.from_environ({}))


def test_taskprolog_resolves_a_node_template_on_the_interface() -> None:
    env = local_task_env(TFSLURM_TF_DIST="worker:*", TFSLURM_IFACE="lo", TFSLURM_HOST_TEMPLATE="{node}")
    changes = task_changes(env)
    config = json.loads(changes["TF_CONFIG"] or "")
    assert [a.rpartition(":")[0] for a in config["cluster"]["worker"]] == ["127.0.0.1"]
    assert changes["NCCL_SOCKET_IFNAME"] == changes["GLOO_SOCKET_IFNAME"] == "lo"


def test_keras_gets_the_jax_backend_unless_the_task_names_one() -> None:
    plan = plan_for(Step.from_environ(task_env()))
    assert runtime_env(plan, ("keras",), {})["KERAS_BACKEND"] == "jax"
    assert runtime_env(plan, ("keras",), {"KERAS_BACKEND": ""})["KERAS_BACKEND"] == "jax"  # Keras: unset
    assert "KERAS_BACKEND" not in runtime_env(plan, ("keras",), {"KERAS_BACKEND": "torch"})
    assert "KERAS_BACKEND" not in runtime_env(plan, ("keras",))  # the task's environment not known
    assert "KERAS_BACKEND" not in runtime_env(plan, ("tf", "jax", "torch"), {})


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    root = str(Path(__file__).parent.parent)
    return subprocess.run([sys.executable, "-m", "tfslurm", *args], env={**env, "PYTHONPATH": root},
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_cli_for_and_iface() -> None:
    done = run_cli(["env", "--for", "torch", "--for", "keras", "--format", "json"], task_env())
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["RANK"] == "1" and out["KERAS_DISTRIBUTION_PROCESS_ID"] == "1" and "TF_CONFIG" not in out
    done = run_cli(["env", "--for", "pt"], task_env())
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "unknown runtime 'pt'" in done.stderr
    done = run_cli(["env", "--iface", "nosuch0"], task_env())
    assert done.returncode == 2
    assert (
        done.stderr
        == "tfslurm env: error: node n9 has no network interface 'nosuch0' (--iface/TFSLURM_IFACE)\n"
    )


def test_cli_sets_keras_backend_where_the_task_has_none() -> None:
    done = run_cli(["env", "--for", "keras", "--format", "json"], task_env())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["KERAS_BACKEND"] == "jax"
    done = run_cli(["env", "--for", "keras", "--format", "json"], task_env(KERAS_BACKEND="tensorflow"))
    assert done.returncode == 0, done.stderr
    assert "KERAS_BACKEND" not in json.loads(done.stdout)  # the task's own choice stays


def test_cli_host_template_node_wins_over_the_interface_name() -> None:
    args = ["env", "--iface", "lo", "--format", "json"]
    done = run_cli([*args, "--host-template", "{node}"], local_task_env())
    assert done.returncode == 0, done.stderr
    worker = json.loads(json.loads(done.stdout)["TF_CONFIG"])["cluster"]["worker"]
    assert [address.rpartition(":")[0] for address in worker] == ["127.0.0.1"]
    done = run_cli(args, local_task_env())  # no template: localhost-lo, which is no name
    assert done.returncode == 2 and "'localhost-lo' does not resolve" in done.stderr, done.stderr


def test_no_runtime_is_imported_by_tfslurm_or_its_taskprolog() -> None:
    root = str(Path(__file__).parent.parent)
    env = task_env(TFSLURM_TF_DIST="worker:*", TFSLURM_FOR="tf,keras,jax,torch")
    code = (
        f"import sys; sys.path.insert(0, {root!r})\n"
        "import tfslurm\n"
        "from tfslurm.prolog import prolog_lines\n"
        f"lines = prolog_lines({env!r})\n"
        "assert any(l.startswith('export MASTER_ADDR=') for l in lines), lines\n"
    )
    assert added_by(code, ("typing", "json", "socket", "jax", "torch", "keras", "tensorflow")) == []
