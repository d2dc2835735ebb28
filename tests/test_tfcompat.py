"""TF's resolver rules (tfslurm.tfcompat) and the core's general options they go through:
job order, a given layout, the 8888 fallback; the typed forms of the core's API (PlanOptions,
Layout.distribution, Step.require_*, GpuScope). No TensorFlow needed."""

from __future__ import annotations

import pytest

from tfslurm.errors import GpuError, LayoutError, PlanError, PortError, SlurmEnvError
from tfslurm.jobspec import parse_jobs
from tfslurm.layout import Layout, arbitrary_layout, block_layout, layout_for, plane_layout
from tfslurm.plan import GpuPlan, PlanOptions, plan_for
from tfslurm.step import Step
from tfslurm.tfcompat import (
    TF_JOB_ORDER,
    TF_PORT_BASE,
    fallback_port_base,
    resolver_job_order,
    tasks_per_node_layout,
    tf_order,
)

STEP = {
    "SLURM_PROCID": "0",
    "SLURM_STEP_NUM_TASKS": "3",
    "SLURM_STEP_NODELIST": "n[9-10]",
    "SLURM_STEP_TASKS_PER_NODE": "2,1",
}


def test_tf_order_is_alphabetical():
    jobs = parse_jobs("worker:2,ps:1,chief:1,evaluator:1", 5)
    assert list(tf_order(jobs)) == ["chief", "evaluator", "ps", "worker"]
    assert TF_JOB_ORDER == "alphabetical"


def test_resolver_keeps_tf_job_order_for_explicit_jobs_only():
    assert resolver_job_order(None, explicit_jobs=True) == "alphabetical"
    assert resolver_job_order(None, explicit_jobs=False) == "written"
    for explicit in (True, False):
        assert resolver_job_order("written", explicit_jobs=explicit) == "written"
        assert resolver_job_order("alphabetical", explicit_jobs=explicit) == "alphabetical"
    with pytest.raises(PlanError, match="job_order 'sorted' is not 'alphabetical' or 'written'"):
        resolver_job_order("sorted", explicit_jobs=True)


def test_port_8888_only_without_reserved_ports_or_port_base():
    assert fallback_port_base(Step.from_environ(STEP), None) == TF_PORT_BASE == 8888
    assert fallback_port_base(Step.from_environ(STEP), 2222) == 2222
    for extra in (
        {"SLURM_JOB_ID": "7"},
        {"SLURM_STEP_RESV_PORTS": "20000-20002"},
        {"TFSLURM_PORT_BASE": "3000"},
    ):
        assert fallback_port_base(Step.from_environ({**STEP, **extra}), None) is None


def test_tasks_per_node_layout_is_block_over_the_steps_nodes():
    step = Step.from_environ({**STEP, "SLURM_STEP_TASKS_PER_NODE": "3,3", "SLURM_STEP_NUM_TASKS": "4"})
    layout = tasks_per_node_layout(step, 2)
    assert layout.rank_node == (0, 0, 1, 1) and layout.nodes == ("n9", "n10")
    assert layout.distribution == "block" and layout.method == "block (tasks_per_node)"
    assert tasks_per_node_layout(step, {"n10": 1, "n9": 3}).rank_node == (0, 0, 0, 1)
    with pytest.raises(LayoutError, match="tasks_per_node adds up to 6 tasks but SLURM_STEP_NUM_TASKS=4"):
        tasks_per_node_layout(step, 3)
    with pytest.raises(SlurmEnvError, match="SLURM_STEP_NODELIST is not set"):
        tasks_per_node_layout(Step.from_environ({"SLURM_PROCID": "0"}), 2)


def test_plan_options_are_checked_when_made():
    with pytest.raises(PortError, match=r"port_base=0 is not a port \(1..65535\)"):
        PlanOptions(port_base=0)
    with pytest.raises(PlanError, match="must contain"):
        PlanOptions(host_template="{host}")
    with pytest.raises(GpuError, match="gpus_per_task=-1 must be a non-negative integer"):
        PlanOptions(gpus_per_task=-1)
    with pytest.raises(PlanError, match=r"is not a tfslurm\.jobspec\.JobOrder"):
        PlanOptions(job_order="sorted")  # type: ignore[arg-type]


def test_a_given_layout_and_job_order_go_through_plan_options():
    step = Step.from_environ(STEP)
    given = tasks_per_node_layout(
        Step.from_environ({**STEP, "SLURM_STEP_TASKS_PER_NODE": "1,2"}), {"n9": 1, "n10": 2}
    )
    plan = plan_for(step, "worker:2,ps:1", PlanOptions(port_base=2000, layout=given, job_order=TF_JOB_ORDER))
    assert plan.cluster.cluster_spec() == {"ps": ["n9:2000"], "worker": ["n10:2000", "n10:2001"]}
    assert plan_for(step, "worker:2,ps:1", PlanOptions(port_base=2000)).cluster.addresses == (
        "n9:2000",
        "n9:2001",
        "n10:2000",
    )


def test_layout_method_is_display_text_of_typed_data():
    nodes, counts = ["a", "b"], [2, 1]
    assert block_layout(nodes, counts).method == "block"
    plane = plane_layout(nodes, counts, 2)
    assert (plane.distribution, plane.plane_size, plane.method) == ("plane", 2, "plane=2")
    one = plane_layout(nodes, counts, 1)
    assert (one.distribution, one.plane_size, one.method) == ("plane", 1, "plane=1")
    assert arbitrary_layout(nodes, ["b", "a", "a"]).method == "arbitrary"
    hosts = arbitrary_layout(nodes, ["b", "a", "a"], "SLURM_ARBITRARY_NODELIST")
    assert (hosts.distribution, hosts.method) == (
        "arbitrary",
        "arbitrary (SLURM_ARBITRARY_NODELIST)",
    )
    default = layout_for(Step.from_environ(STEP))
    assert (default.distribution, default.method) == ("default", "default (block)")
    given = Layout(("a",), (0,), (0,), "given", source="descriptor")
    assert given.method == "descriptor"
    with pytest.raises(TypeError, match=r"is not a layout\.Distribution"):
        Layout(("a",), (0,), (0,), "round-robin")  # type: ignore[arg-type]


def test_typed_require_returns_the_value_or_the_same_error():
    step = Step.from_environ({**STEP, "SLURM_JOB_ID": "5", "SLURM_STEP_ID": "3"})
    assert step.require_procid() == 0 and step.require_job_id() == 5 and step.require_step_id() == 3
    assert step.require_nodelist() == "n[9-10]" and step.require_tasks_per_node() == "2,1"
    batch = Step.from_environ({"SLURM_JOB_ID": "5", "SLURM_NODELIST": "n1"})
    for name, typed in (("nodelist", batch.require_nodelist), ("procid", batch.require_procid)):
        with pytest.raises(SlurmEnvError) as old:
            batch.require(name)
        with pytest.raises(SlurmEnvError) as new:
            typed()
        assert str(new.value) == str(old.value)


def test_gpu_scope_says_whose_devices_are_known():
    none = GpuPlan(
        own=("0",), variable="CUDA_VISIBLE_DEVICES", source="test", node_devices=("0", "1"), split=True
    )
    assert none.scope == "none" and not none.knows(0)
    node = GpuPlan(("0",), "CUDA_VISIBLE_DEVICES", "test", ("0", "1"), "node", 1, split=True)
    assert node.knows(1) and not node.knows(0)
    every = GpuPlan(("0",), "CUDA_VISIBLE_DEVICES", "test", ("0", "1"), "every-node", split=True)
    assert every.knows(0) and every.knows(5)
    unsplit = GpuPlan(("0",), "CUDA_VISIBLE_DEVICES", "test", ("0", "1"), "every-node", split=False)
    assert not unsplit.knows(0)
