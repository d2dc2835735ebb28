"""tfslurm.SlurmClusterResolver against TF's own unit-test cases, TF's own class, and Slurm.

Three kinds of checks:

* TF's ``slurm_cluster_resolver_test.py`` cases, re-expressed: the same environments and
  arguments must give the same cluster specs, masters, accelerator counts and
  ``CUDA_VISIBLE_DEVICES``.
* Differential: on every shape where TF's resolver is right (host names already in sorted
  order, block layout, explicit GPUs), both resolvers must agree (hypothesis).
* Where TF is wrong, this one must follow Slurm (recorded real task environments).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import observed
import tfslurm
from stepenv import ONE_NODE_STEP as STEP
from tfslurm.errors import GpuError, LayoutError, SlurmEnvError
from tfslurm.resolver import SlurmResolverMixin

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.tf

Resolver = tfslurm.SlurmClusterResolver
TFResolver = tf.distribute.cluster_resolver.SlurmClusterResolver
REPO = Path(__file__).resolve().parents[1]


def _gpu_and_tfslurm_variables() -> dict[str, str]:
    return {n: v for n, v in os.environ.items() if n.endswith("VISIBLE_DEVICES") or n.startswith("TFSLURM")}


@pytest.fixture(autouse=True)
def no_gpu_variable_leaks_out() -> Iterator[None]:
    """After every test here (whatever the order), the GPU and tfslurm variables of this
    process's environment are what they were before it (the cluster tests inherit them; the
    caller's own, such as TFSLURM_IFACE, are kept). Autouse fixtures are set up first, so
    this runs after monkeypatch has undone the test's own changes."""
    before = _gpu_and_tfslurm_variables()
    yield
    assert _gpu_and_tfslurm_variables() == before


@pytest.fixture
def slurm_env(monkeypatch: pytest.MonkeyPatch):
    """Replace every Slurm/GPU/tfslurm variable of this process with the given ones."""

    # The resolver writes os.environ itself (auto_set_gpu): make monkeypatch restore these.
    for name in (
        "CUDA_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL",
        "TFSLURM_ASSIGNED_GPUS",
    ):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)

    def apply(**variables: str) -> None:
        for name in list(os.environ):
            if name.startswith(("SLURM", "TFSLURM", "TF_CONFIG")) or name.endswith(
                ("VISIBLE_DEVICES", "ORDINAL")
            ):
                monkeypatch.delenv(name)
        for name, value in variables.items():
            monkeypatch.setenv(name, value)

    return apply


def as_dict(spec) -> dict[str, list[str]]:
    """A ClusterSpec as plain data, checked to survive TF's own proto round trips."""
    plain = spec.as_dict()
    assert tf.train.ClusterSpec(spec.as_cluster_def()).as_dict() == plain
    assert tf.train.ClusterSpec(plain).as_cluster_def() == spec.as_cluster_def()
    return {
        job: list(tasks) if isinstance(tasks, list) else [tasks[i] for i in sorted(tasks)]
        for job, tasks in plain.items()
    }


def step_vars(nodelist: str, tasks_per_node: str, num_tasks: int, procid: int = 0) -> dict[str, str]:
    """What the resolver reads of a step: its nodes, its tasks per node and count, this task's rank."""
    return {
        "SLURM_PROCID": str(procid),
        "SLURM_STEP_NUM_TASKS": str(num_tasks),
        "SLURM_STEP_NODELIST": nodelist,
        "SLURM_STEP_TASKS_PER_NODE": tasks_per_node,
    }


THREE_NODES = {
    "SLURM_PROCID": "0",
    "SLURM_STEP_NUM_TASKS": "3",
    "SLURM_STEP_NODELIST": "t02n13,t02n41,t02n43",
}


# -- TF's own test cases ----------------------------------------------------------------------


def test_tf_case_simple_retrieval_from_env(slurm_env) -> None:
    slurm_env(**THREE_NODES, SLURM_STEP_TASKS_PER_NODE="1(x3)", CUDA_VISIBLE_DEVICES="0")
    resolver = Resolver()
    assert as_dict(resolver.cluster_spec()) == {"worker": ["t02n13:8888", "t02n41:8888", "t02n43:8888"]}
    assert resolver.master("worker", 0, rpc_layer="grpc") == "grpc://t02n13:8888"
    assert resolver.num_accelerators() == {"GPU": 1}
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"


def test_tf_case_simple_successful_retrieval(slurm_env) -> None:
    slurm_env(**THREE_NODES)  # no SLURM_STEP_TASKS_PER_NODE: tasks_per_node says it
    resolver = Resolver(
        jobs={"ps": 1, "worker": 2}, port_base=8888, tasks_per_node=1,
        gpus_per_node=1, gpus_per_task=1, auto_set_gpu=False,
    )  # fmt: skip
    assert as_dict(resolver.cluster_spec()) == {
        "ps": ["t02n13:8888"],
        "worker": ["t02n41:8888", "t02n43:8888"],
    }
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_tf_case_master_retrieval(slurm_env) -> None:
    slurm_env(**THREE_NODES)
    resolver = Resolver(
        jobs={"ps": 1, "worker": 2}, port_base=8888, tasks_per_node=1,
        gpus_per_node=1, gpus_per_task=1, auto_set_gpu=False,
    )  # fmt: skip
    resolver.task_type = "worker"
    resolver.task_id = 1
    assert resolver.master() == "grpc://t02n43:8888"
    resolver.rpc_layer = "ab"
    assert resolver.master("ps", 0) == "ab://t02n13:8888"
    assert resolver.master("ps", 0, rpc_layer="test") == "test://t02n13:8888"


def test_tf_case_tasks_per_node_from_env(slurm_env) -> None:
    slurm_env(**THREE_NODES, SLURM_STEP_TASKS_PER_NODE="1(x3)")
    resolver = Resolver(
        jobs={"ps": 1, "worker": 2}, port_base=8888, gpus_per_node=1, gpus_per_task=1, auto_set_gpu=False
    )
    assert as_dict(resolver.cluster_spec()) == {
        "ps": ["t02n13:8888"],
        "worker": ["t02n41:8888", "t02n43:8888"],
    }


@pytest.mark.parametrize(("gpus_per_node", "gpus_per_task", "visible"), [(2, 1, "1"), (4, 2, "2,3")])
def test_tf_case_multiple_tasks_and_gpus_per_node(slurm_env, gpus_per_node, gpus_per_task, visible) -> None:
    slurm_env(
        SLURM_PROCID="1", SLURM_STEP_NUM_TASKS="5", SLURM_STEP_TASKS_PER_NODE="2(x2),1",
        SLURM_STEP_NODELIST="t02n13,t02n41,t02n43", CUDA_VISIBLE_DEVICES="",
    )  # fmt: skip
    resolver = Resolver(
        jobs={"ps": 1, "worker": 4}, port_base=8888,
        gpus_per_node=gpus_per_node, gpus_per_task=gpus_per_task, auto_set_gpu=True,
    )  # fmt: skip
    assert as_dict(resolver.cluster_spec()) == {
        "ps": ["t02n13:8888"],
        "worker": ["t02n13:8889", "t02n41:8888", "t02n41:8889", "t02n43:8888"],
    }
    assert os.environ["CUDA_VISIBLE_DEVICES"] == visible
    assert resolver.num_accelerators() == {"GPU": gpus_per_task}


# -- the same answers as TF's class wherever TF is right --------------------------------------


@st.composite
def tf_shapes(draw: st.DrawFn) -> dict:
    nodes = draw(st.integers(1, 5))
    counts = draw(st.lists(st.integers(1, 3), min_size=nodes, max_size=nodes))
    total = sum(counts)
    gpus_per_task = draw(st.integers(1, 2))
    gpus_per_node = max(counts) * gpus_per_task + draw(st.integers(0, 2))
    ps = draw(st.integers(0, min(2, total - 1)))
    chief = draw(st.integers(0, 1 if total - ps > 1 else 0))
    jobs = {"worker": total - ps - chief}
    if ps:
        jobs["ps"] = ps
    if chief:
        jobs["chief"] = chief
    rank = draw(st.integers(0, total - 1))
    width = draw(st.sampled_from([0, 2, 3]))
    names = [f"c{i:0{width}d}" if width else f"c{i}" for i in range(1, nodes + 1)]  # sorted as strings
    return {
        "counts": counts,
        "names": names,
        "jobs": jobs,
        "rank": rank,
        "gpn": gpus_per_node,
        "gpt": gpus_per_task,
    }


@given(tf_shapes())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_same_answers_as_tf_where_tf_is_right(slurm_env, shape: dict) -> None:
    counts = ",".join(map(str, shape["counts"]))
    slurm_env(
        SLURM_PROCID=str(shape["rank"]), SLURM_STEP_NUM_TASKS=str(sum(shape["counts"])),
        SLURM_STEP_NODELIST=",".join(shape["names"]), SLURM_STEP_TASKS_PER_NODE=counts,
    )  # fmt: skip
    kwargs = {
        "jobs": shape["jobs"],
        "port_base": 8888,
        "gpus_per_node": shape["gpn"],
        "gpus_per_task": shape["gpt"],
    }
    theirs = TFResolver(**kwargs)
    their_spec = as_dict(theirs.cluster_spec())  # sets task_type/id and CUDA_VISIBLE_DEVICES
    their_gpus = os.environ.pop("CUDA_VISIBLE_DEVICES")
    ours = Resolver(**kwargs)
    assert (ours.task_type, ours.task_id) == (theirs.task_type, theirs.task_id)  # before cluster_spec()
    assert as_dict(ours.cluster_spec()) == their_spec
    assert os.environ["CUDA_VISIBLE_DEVICES"] == their_gpus
    # the very same ClusterDef proto (jobs in name order, tasks by index), built map by map
    assert ours.cluster_spec().as_cluster_def() == theirs.cluster_spec().as_cluster_def()
    assert ours.master() == theirs.master()
    assert ours.num_accelerators() == theirs.num_accelerators()
    assert ours.get_task_info() == theirs.get_task_info()
    assert ours.rpc_layer == theirs.rpc_layer and ours.environment == theirs.environment


# -- right where TF is wrong -------------------------------------------------------------------


def test_hosts_keep_slurm_order_not_string_order(slurm_env) -> None:
    env = step_vars("n[9-10]", "2,1", 3)
    slurm_env(**env)
    ours = Resolver(port_base=8888, auto_set_gpu=False)
    assert as_dict(ours.cluster_spec()) == {"worker": ["n9:8888", "n9:8889", "n10:8888"]}
    theirs = TFResolver(port_base=8888, gpus_per_node=2, auto_set_gpu=False)
    assert as_dict(theirs.cluster_spec())["worker"][0] == "n10:8888"  # TF: rank 0 on the wrong node


RECORDED = observed.paths_by_id()


@pytest.mark.parametrize(
    "fid",
    ["03_cyclic_N3_n6", "04_plane2_N2_n6", "06_uneven_cyclic_N2_n5", "09_arbitrary_hostfile",
     "10_het_srun", "11_gres_gpu2", "12_gpus_per_task", "13_gpus_per_node_bind_none", "13c_gpus_total_3",
     "14_resv_ports", "padded/01_block_N3_tpn2"],
)  # fmt: skip
def test_recorded_shapes_tf_gets_wrong(fid: str, tmp_path: Path) -> None:
    for label, tasks in observed.step_envs(fid, tmp_path).items():
        specs = set()
        for task, env in tasks:
            resolver = Resolver(env=env)
            assert (resolver.task_type, resolver.task_id) == ("worker", task.procid)
            address = resolver.master().removeprefix("grpc://")
            assert address.rpartition(":")[0] == env["SLURMD_NODENAME"] == task.hostname, (fid, label)
            specs.add(json.dumps(resolver.cluster_spec().as_dict(), sort_keys=True))
            own = resolver.gpus
            visible = task.env.get("CUDA_VISIBLE_DEVICES")
            assert set(own) <= set(visible.split(",") if visible else ())
            assert resolver.num_accelerators() == ({"GPU": len(own)} if own else {})
        assert len(specs) == 1, (fid, label)


def test_cpu_only_step_gives_no_accelerators_where_tf_crashes(slurm_env) -> None:
    env = step_vars("n[1-2]", "1(x2)", 2, procid=1)
    slurm_env(**env, CUDA_VISIBLE_DEVICES="")
    with pytest.raises(ValueError):
        TFResolver(gpus_per_node=0).cluster_spec()
    resolver = Resolver(gpus_per_node=0)
    # {} and not {"GPU": 0}: MWMS then uses the CPU instead of a GPU that does not exist.
    assert resolver.num_accelerators() == {}
    assert resolver.num_accelerators("worker", 0) == {}
    slurm_env(**env)  # nothing set at all, no nvidia-smi here: TF raises FileNotFoundError
    assert Resolver().num_accelerators() == {}


def test_slurm_per_task_binding_is_kept(slurm_env) -> None:
    # --gpus-per-task=1, 2 tasks on the node: Slurm gives task 1 CUDA_VISIBLE_DEVICES=1.
    slurm_env(
        SLURM_JOB_ID="9", SLURM_STEP_ID="0", SLURM_PROCID="1", SLURM_LOCALID="1", SLURM_NODEID="0",
        SLURMD_NODENAME="n1", SLURM_STEP_NUM_TASKS="2", SLURM_STEP_NODELIST="n1",
        SLURM_STEP_TASKS_PER_NODE="2", CUDA_VISIBLE_DEVICES="1", SLURM_STEP_GPUS="1",
        SLURM_GPUS_ON_NODE="2", SLURMD_TRES_BIND="gpu:per_task:1",
    )  # fmt: skip
    with pytest.raises(ValueError):
        TFResolver().cluster_spec()  # TF: gpus_per_task = 1 // 2 = 0 -> range() step 0
    resolver = Resolver()
    assert resolver.num_accelerators() == {"GPU": 1}
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"


def test_task_type_is_set_at_construction_and_gpus_do_not_drift(slurm_env) -> None:
    slurm_env(
        SLURM_JOB_ID="9", SLURM_STEP_ID="0", SLURM_PROCID="1", SLURM_LOCALID="1", SLURM_NODEID="0",
        SLURMD_NODENAME="n1", SLURM_STEP_NUM_TASKS="3", SLURM_STEP_NODELIST="n[1-2]",
        SLURM_STEP_TASKS_PER_NODE="2,1", CUDA_VISIBLE_DEVICES="0,1,2,3", SLURM_STEP_GPUS="0,1,2,3",
        SLURM_GPUS_ON_NODE="4",
    )  # fmt: skip
    first = Resolver(jobs="chief:1,worker:*")
    assert first.get_task_info() == ("worker", 0)  # no cluster_spec() call needed (TF #39336)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"
    for _ in range(3):
        again = Resolver(jobs="chief:1,worker:*")
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"
        assert again.num_accelerators() == {"GPU": 2}
        again.cluster_spec()
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_ports_of_concurrent_steps_differ_without_port_base(slurm_env) -> None:
    base = step_vars("n1", "2", 2)
    ports = set()
    for job, step in (("100", "0"), ("100", "1"), ("101", "0")):
        slurm_env(**base, SLURM_JOB_ID=job, SLURM_STEP_ID=step)
        ports.update(Resolver().cluster_spec().as_dict()["worker"])
    assert len(ports) == 6
    slurm_env(**base, SLURM_JOB_ID="100", SLURM_STEP_ID="0", SLURM_STEP_RESV_PORTS="20010-20012")
    assert Resolver().cluster_spec().as_dict()["worker"] == ["n1:20010", "n1:20011"]


def test_explicit_jobs_keep_tf_order_tf_dist_its_written_order(slurm_env) -> None:
    base = step_vars("n1", "3", 3)
    slurm_env(**base)
    assert Resolver(jobs={"worker": 2, "ps": 1}).task_type == "ps"
    assert Resolver(jobs="worker:2,ps:1", job_order="written").task_type == "worker"
    slurm_env(**base, TFSLURM_TF_DIST="worker:*,ps:1")
    assert Resolver().task_type == "worker"  # as in the TF_CONFIG tfslurm exports


def test_bad_arguments_are_one_line_value_errors(slurm_env) -> None:
    base = step_vars("n[1-2]", "1(x2)", 2)
    slurm_env(**base)
    cases = [
        ({"jobs": {"worker": 3}}, "asks for 3 tasks but the step has 2"),
        ({"port_base": 70000}, "port_base=70000"),
        ({"gpus_per_node": 1, "gpus_per_task": 2}, "more than gpus_per_node=1"),
        ({"tasks_per_node": 2}, "tasks_per_node adds up to 4 tasks"),
        ({"tasks_per_node": {"n1": 1, "n3": 1}}, "tasks_per_node names"),
        ({"job_order": "random"}, "job_order"),
    ]
    for kwargs, needle in cases:
        with pytest.raises(ValueError) as info:
            Resolver(**kwargs)
        assert needle in str(info.value) and "\n" not in str(info.value), kwargs
    slurm_env(SLURM_JOB_ID="5", SLURM_PROCID="0", SLURMD_NODENAME="n1")  # a batch script
    with pytest.raises(SlurmEnvError, match="batch script"):
        Resolver()
    slurm_env(**base, SLURM_NODEID="0", SLURMD_NODENAME="n2")
    with pytest.raises(LayoutError):
        Resolver(tasks_per_node=1)
    slurm_env(**base)
    with pytest.raises(GpuError):
        Resolver(gpus_per_task=1)  # no GPU anywhere: asking for one is an error, not a crash


def test_is_a_tf_cluster_resolver_usable_by_mwms_validation(slurm_env) -> None:
    slurm_env(
        SLURM_PROCID="1",
        SLURM_STEP_NUM_TASKS="2",
        SLURM_STEP_NODELIST="n[1-2]",
        SLURM_STEP_TASKS_PER_NODE="1(x2)",
    )
    resolver = Resolver()
    assert isinstance(resolver, tf.distribute.cluster_resolver.ClusterResolver)
    from tensorflow.python.distribute import multi_worker_util

    multi_worker_util._validate_cluster_spec(resolver.cluster_spec(), resolver.task_type, resolver.task_id)
    assert multi_worker_util.is_chief(resolver.cluster_spec(), resolver.task_type, resolver.task_id) is False
    import copy

    assert copy.deepcopy(resolver).cluster_spec().as_dict() == resolver.cluster_spec().as_dict()


# -- import behaviour, warnings (fresh processes) --------------------------------------------


def test_mixin_is_the_resolver_logic_without_tf(slurm_env) -> None:
    slurm_env(**STEP)
    plain = SlurmResolverMixin(port_base=6000)
    assert plain.cluster_spec() == {"worker": ["n1:6000", "n1:6001"]}
    assert (
        plain.tf_config() == '{"cluster":{"worker":["n1:6000","n1:6001"]},"task":{"type":"worker","index":1}}'
    )
