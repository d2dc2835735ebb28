"""GPUs and ports on a real Slurm cluster: every task computes its own, binds, and is checked.

Each task runs :data:`TASK` (``python -c``): it builds its Step and Layout, asks
``assign_gpus`` and ``port_rule``, binds its port, holds it for a while and prints one JSON
line. The checks use what Slurm itself says, not tfslurm's view: the devices slurmctld
allocated on each node (``scontrol show job -d``: ``GRES=gpu:2(IDX:0-1)``, read while the
step runs; the fake GPUs are not cgroup-constrained, so visible ids are physical ids) and
the task's own ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tfslurm import hostlist
from tfslurm.localcluster import slurm_version

pytestmark = pytest.mark.cluster


def tres_prefix() -> str:
    """How SLURMD_TRES_BIND names GPUs: ``gpu:`` on 22.05, ``gres/gpu:`` since 23.11."""
    return "gpu:" if slurm_version() == "22.05" else "gres/gpu:"


TASK = r"""
import json, os, socket, sys, time
from tfslurm.errors import TfslurmError
from tfslurm.gpus import VISIBLE_DEVICE_VARIABLES, assign_gpus
from tfslurm.layout import layout_for
from tfslurm.ports import port_rule
from tfslurm.step import Step
args = json.loads(sys.argv[1])
step = Step.from_environ()
out = {"procid": step.procid, "node": step.node_name, "local": step.localid, "job": step.job_id,
       "step": step.step_id, "slurm": {k: v for k, v in os.environ.items()
       if k in VISIBLE_DEVICE_VARIABLES or k in ("SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE", "SLURMD_TRES_BIND",
                                                   "SLURM_STEP_RESV_PORTS")}}
try:
    layout = layout_for(step)
    max_tpn = max(layout.tasks_on(i) for i in range(len(layout.nodes)))
    gpu = assign_gpus(step, layout, gpus_per_task=args.get("gpus_per_task"))
    out.update(devices=list(gpu.devices), node_devices=list(gpu.node_devices), unbound=gpu.unbound,
               exports=gpu.env(), source=gpu.source)
    again = assign_gpus(Step.from_environ({**os.environ, **gpu.env()}), layout,
                        gpus_per_task=args.get("gpus_per_task"))
    out["again"] = list(again.devices)
    rule = port_rule(step, max_tpn, layout=layout)
    out.update(rule=rule.encode(), port=rule.port(step.localid))
except TfslurmError as exc:
    out["error"] = str(exc)
if "port" in out:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("0.0.0.0", out["port"]))
        sock.listen(8)
        out["bound"] = True
    except OSError as exc:
        out["bound"] = False
        out["bind_error"] = str(exc)
    out["t_bound"] = time.time()
    time.sleep(args.get("hold", 0))
    out["t_release"] = time.time()
    sock.close()
# srun can split long stdout lines of concurrent tasks: write the record to a file and print
# only its (short) path
path = os.path.join(args["dir"], "%s.%s.%s.json" % (step.job_id, step.step_id, step.procid))
with open(path, "w") as handle:
    json.dump(out, handle)
print("TFS-RESULT " + path, flush=True)
"""


RESULTS_BASE: Path | None = None  # the running test's tmp_path: see results_under_tmp_path


@pytest.fixture(autouse=True)
def results_under_tmp_path(tmp_path: Path) -> Iterator[None]:
    """Tasks write their records under the test's tmp_path, which pytest removes (they were
    left in /tmp as tfs-gp-results-*)."""
    global RESULTS_BASE
    tmp_path.chmod(0o755)
    RESULTS_BASE = tmp_path
    yield
    RESULTS_BASE = None


def task_argv(**args: Any) -> list[str]:
    results = tempfile.mkdtemp(prefix="results-", dir=RESULTS_BASE)
    os.chmod(results, 0o777)
    return [sys.executable, "-c", TASK, json.dumps({"dir": results, **args})]


def parse_results(text: str) -> list[dict[str, Any]]:
    paths = [line.split(" ", 1)[1] for line in text.splitlines() if line.startswith("TFS-RESULT ")]
    rows = [json.loads(Path(path).read_text()) for path in paths]
    return sorted(rows, key=lambda r: (r["job"], r["step"], r["procid"]))


def run_step(cluster: Any, *srun_args: str, hold: float = 0.0, oracle: bool = False, **task_args: Any):
    """Run one step; return (results, {node: allocated GPU indices} or None)."""
    name = f"tfs-gp-{uuid.uuid4().hex[:8]}"
    done: dict[str, Any] = {}

    def launch() -> None:
        done["proc"] = cluster.srun(
            f"--job-name={name}", *srun_args, *task_argv(hold=hold, **task_args), timeout=120
        )

    thread = threading.Thread(target=launch)
    thread.start()
    allocated = _allocated_gpus(cluster, name, thread) if oracle else None
    thread.join()
    proc = done["proc"]
    assert proc.returncode == 0, f"srun {' '.join(srun_args)} failed: {proc.stderr[-1500:]}"
    results = parse_results(proc.stdout)
    assert results, f"no task reported: {proc.stdout[-800:]} {proc.stderr[-800:]}"
    return results, allocated


def _allocated_gpus(cluster: Any, name: str, thread: threading.Thread) -> dict[str, set[str]]:
    """slurmctld's view: the GPU indices the running job holds on each node."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and thread.is_alive():
        ids = cluster.run(["squeue", "-h", "-n", name, "-o", "%i"], timeout=10).stdout.split()
        if ids:
            text = cluster.run(["scontrol", "show", "job", "-d", ids[0]], timeout=10).stdout
            found: dict[str, set[str]] = {}
            for nodes, gres in re.findall(
                r"^\s+Nodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=(\S*)", text, re.MULTILINE
            ):
                idx = re.search(r"IDX:([\d,-]+)", gres)
                for node in hostlist.expand(nodes):
                    found[node] = set(hostlist.expand(f"g[{idx.group(1)}]")) if idx else set()
            if found:
                return {node: {d[1:] for d in ids_} for node, ids_ in found.items()}
        time.sleep(0.1)
    pytest.fail(f"job {name} never showed its GPU allocation in scontrol show job -d")


def check_common(
    results: list[dict[str, Any]], allocated: dict[str, set[str]] | None = None, disjoint: bool = False
) -> None:
    """Devices are a subset of what Slurm gave; ports bind and are distinct per node."""
    by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in results:
        assert "error" not in row, f"task {row['procid']} on {row['node']}: {row['error']}"
        by_node[row["node"]].append(row)
        assert row["again"] == row["devices"], f"task {row['procid']}: assigning again drifted"
        slurm_cvd = row["slurm"].get("CUDA_VISIBLE_DEVICES", "")
        given = set(filter(None, slurm_cvd.split(",")))
        assert set(row["devices"]) <= given, (
            f"task {row['procid']}: {row['devices']} not within CVD={slurm_cvd!r}"
        )
        if allocated is not None:
            assert set(row["devices"]) <= allocated[row["node"]], (row["devices"], allocated)
        for name, value in row["exports"].items():
            if name == "TFSLURM_ASSIGNED_GPUS":  # tfslurm's own marker (see tfslurm.gpus)
                assert value.startswith(f"{row['job']}.{row['step']}.{row['procid']}:")
                continue
            assert name in row["slurm"], f"exported {name} that Slurm did not set"
            assert set(filter(None, value.split(","))) <= given
        assert row["bound"], (
            f"task {row['procid']} on {row['node']} could not bind {row['port']}: {row.get('bind_error')}"
        )
    assert len({row["rule"] for row in results}) == 1, "tasks of one step disagree on the port rule"
    for node, rows in by_node.items():
        ports = [r["port"] for r in rows]
        assert len(ports) == len(set(ports)), f"tasks on {node} share a port: {ports}"
        if disjoint:
            owned = [d for r in rows for d in r["devices"]]
            assert len(owned) == len(set(owned)), f"tasks on {node} share a device: {rows}"


# --- GPU shapes ---------------------------------------------------------------------------


def test_gres_gpu2_is_split_between_the_two_tasks_of_each_node(slurm_cluster: Any) -> None:
    results, allocated = run_step(
        slurm_cluster, "-N2", "--ntasks-per-node=2", "--gres=gpu:2", hold=1.0, oracle=True
    )
    check_common(results, allocated, disjoint=True)
    assert [tuple(r["devices"]) for r in results] == [("0",), ("1",), ("0",), ("1",)]
    assert all(r["rule"].startswith("r") for r in results)  # MpiParams reserved ports


def test_gres_gpu4_with_gpus_per_task_2(slurm_cluster: Any) -> None:
    results, allocated = run_step(
        slurm_cluster, "-N1", "-n2", "--gres=gpu:4", hold=1.0, oracle=True, gpus_per_task=2
    )
    check_common(results, allocated, disjoint=True)
    assert [len(r["devices"]) for r in results] == [2, 2]


def test_gpus_per_task_binding_is_kept(slurm_cluster: Any) -> None:
    results, allocated = run_step(
        slurm_cluster, "-N2", "--ntasks-per-node=2", "--gpus-per-task=1", hold=1.0, oracle=True
    )
    check_common(results, allocated, disjoint=True)
    for row in results:
        assert row["devices"] == [row["slurm"]["CUDA_VISIBLE_DEVICES"]]
        assert row["source"].startswith(f"per-task binding (SLURMD_TRES_BIND={tres_prefix()}per_task:1)")


def test_gpu_bind_closest_gpus_per_task_2_gives_disjoint_pairs(slurm_cluster: Any) -> None:
    # On one-socket nodes Slurm's closest gives every task of the node the step's whole list
    # (0,1,2,3 here); tfslurm splits it: each task its own pair, the pairs disjoint.
    results, allocated = run_step(
        slurm_cluster,
        "-N2",
        "--ntasks-per-node=2",
        "--gpus-per-task=2",
        "--gpu-bind=closest",
        hold=1.0,
        oracle=True,
    )
    check_common(results, allocated, disjoint=True)
    for row in results:
        assert row["slurm"]["SLURMD_TRES_BIND"] == f"{tres_prefix()}closest"
        assert row["slurm"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"  # Slurm's own shared list
        assert row["devices"] == (["0", "1"] if row["local"] == 0 else ["2", "3"])
        assert "gave every local task the node's list" in row["source"]


def test_gpus_3_over_two_nodes_is_uneven(slurm_cluster: Any) -> None:
    results, allocated = run_step(
        slurm_cluster, "-N2", "--ntasks-per-node=2", "--gpus=3", hold=1.0, oracle=True
    )
    check_common(results, allocated, disjoint=True)
    counts = sorted(len(r["node_devices"]) for r in results)
    assert counts == [1, 1, 2, 2], counts  # Slurm's own uneven split: 2 GPUs on one node, 1 on the other
    for row in results:
        if len(row["node_devices"]) == 1:  # 1 GPU, 2 tasks: local task 0 gets it, never shared
            assert row["devices"] == (row["node_devices"] if row["local"] == 0 else [])
            assert row["exports"]["CUDA_VISIBLE_DEVICES"] == ",".join(row["devices"])  # "" hides the GPU


def test_gpus_per_node_2(slurm_cluster: Any) -> None:
    results, allocated = run_step(
        slurm_cluster, "-N2", "--ntasks-per-node=2", "--gpus-per-node=2", hold=1.0, oracle=True
    )
    check_common(results, allocated, disjoint=True)
    assert all(len(r["devices"]) == 1 for r in results)


def test_gpu_bind_none_names_no_device(slurm_cluster: Any) -> None:
    results, _ = run_step(slurm_cluster, "-N2", "--ntasks-per-node=2", "--gpus-per-node=2", "--gpu-bind=none")
    check_common(results, disjoint=True)
    for row in results:
        assert row["slurm"]["SLURMD_TRES_BIND"] == f"{tres_prefix()}none"
        if slurm_version() == "22.05":  # only SLURM_GPUS_ON_NODE=2: nothing says which
            assert "CUDA_VISIBLE_DEVICES" not in row["slurm"]
            assert row["devices"] == [] and row["unbound"] == 2 and row["exports"] == {}
        else:  # 24.11+ list the node's GPUs in every task: split like a per-node list
            assert row["slurm"]["CUDA_VISIBLE_DEVICES"] == "0,1"
            assert row["devices"] == [str(row["local"])] and row["unbound"] == 0


def test_gpu_bind_none_with_gpus_per_task_is_one_clear_error(slurm_cluster: Any) -> None:
    results, _ = run_step(
        slurm_cluster, "-N1", "-n2", "--gpus-per-node=2", "--gpu-bind=none", gpus_per_task=1
    )
    for row in results:
        if slurm_version() == "22.05":
            assert row["error"].startswith(
                "gpus_per_task=1, but Slurm allocated 2 GPU(s) on this node without saying which"
            )
        else:  # 24.11+ name them: one each
            assert "error" not in row and row["devices"] == [str(row["local"])]


def test_cpu_only_step_gets_no_gpus_despite_inherited_cvd(
    slurm_cluster: Any,
) -> None:
    proc = slurm_cluster.srun(
        "-N2", "--ntasks-per-node=2", *task_argv(), env_extra={"CUDA_VISIBLE_DEVICES": "0,1"}
    )
    assert proc.returncode == 0, proc.stderr
    results = parse_results(proc.stdout)
    check_common(results)
    for row in results:  # Slurm 22.05 removes the inherited CVD when the step has no GPU
        assert row["devices"] == [] and row["source"] == "no GPU allocated"


def test_gpu_less_cluster(slurm_cluster_factory: Any) -> None:
    cluster = slurm_cluster_factory(gpus=0)
    results, _ = run_step(cluster, "-N2", "--ntasks-per-node=2")
    check_common(results)
    assert all(
        r["devices"] == [] and r["exports"] == {} and r["source"] == "no GPU allocated" for r in results
    )
    results, _ = run_step(cluster, "-N1", "-n2", gpus_per_task=1)
    assert all(
        r["error"].startswith("gpus_per_task=1 asks for GPUs, but Slurm gave this task none") for r in results
    )
    # Where Slurm manages no GPUs, a CUDA_VISIBLE_DEVICES set by the user reaches the tasks;
    # it is the only list there is, so it is split like a per-node list.
    proc = cluster.srun("-N1", "-n2", *task_argv(), env_extra={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert proc.returncode == 0, proc.stderr
    results = parse_results(proc.stdout)
    check_common(results, disjoint=True)
    for row in results:
        assert row["slurm"].get("CUDA_VISIBLE_DEVICES") == "0,1"
        assert row["devices"] == [str(row["local"])]
        assert "set before the step: Slurm manages no GPUs here" in row["source"]


def _warning_lines(stderr: str) -> dict[int, list[str]]:
    """``srun -l`` stderr: the tfslurm warning lines by task."""
    out: dict[int, list[str]] = defaultdict(list)
    for line in stderr.splitlines():
        label, _, text = line.partition(": ")
        if text.startswith("tfslurm: warning: ") and label.strip().isdigit():
            out[int(label)].append(text)
    return dict(out)


def test_uneven_gpus_warn_on_stderr_exactly_where_uneven(slurm_cluster: Any) -> None:
    env_cmd = [sys.executable, "-m", "tfslurm", "env", "--format", "json"]
    proc = slurm_cluster.srun("-l", "-N2", "--ntasks-per-node=2", "--gpus=3", *env_cmd, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = _warning_lines(proc.stderr)
    # Slurm gives one node 2 GPUs and the other 1; find which from the tasks' own output
    exported = {
        int(line.split(": ", 1)[0]): json.loads(line.split(": ", 1)[1]) for line in proc.stdout.splitlines()
    }
    empty = [rank for rank, env in exported.items() if env.get("CUDA_VISIBLE_DEVICES") == ""]
    assert len(empty) == 1, exported
    short_local0 = empty[0] - 1  # the 1-GPU node's local task 0 (block layout: ranks 0,1 | 2,3)
    # From 24.11 on every task also sees SLURM_GPUS=3, so rank 0 (first on the 2-GPU node, or
    # the 1-GPU node's own first task) says the other node got fewer.
    if slurm_version() != "22.05":
        total = [
            (rank, line)
            for rank, lines in got.items()
            for line in lines
            if ", but SLURM_GPUS=3 for 4 tasks)" in line
        ]
        assert [rank for rank, _ in total] == [0], got
        assert total[0][1].startswith(
            "tfslurm: warning: tasks get unequal GPU counts (1 per task on node "
        ), total
        got = {rank: [line for line in lines if line != total[0][1]] for rank, lines in got.items()}
        got = {rank: lines for rank, lines in got.items() if lines}
    assert sorted(got) == sorted({empty[0], short_local0}), got
    assert [line.split(" gets ")[0] for line in got[empty[0]]] == [
        f"tfslurm: warning: task {empty[0]} on node{empty[0] // 2 + 1}"
    ]
    assert (
        got[short_local0][0].startswith("tfslurm: warning: node ")
        and " has 1 GPU(s) for 2 tasks" in got[short_local0][0]
    )
    assert got[short_local0][1].startswith("tfslurm: warning: tasks get unequal GPU counts (1, 0 on node ")
    # even shapes: no warning line anywhere
    for shape in (("--gres=gpu:2",), ("--gpus-per-task=2", "--gpu-bind=closest"), ()):
        proc = slurm_cluster.srun("-l", "-N2", "--ntasks-per-node=2", *shape, *env_cmd, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert _warning_lines(proc.stderr) == {}, (shape, proc.stderr)
    # TFSLURM_UNEVEN_GPUS=error: the uneven node's tasks fail with one line
    proc = slurm_cluster.srun(
        "-l",
        "-N2",
        "--ntasks-per-node=2",
        "--gpus=3",
        *env_cmd,
        timeout=120,
        env_extra={"TFSLURM_UNEVEN_GPUS": "error"},
    )
    assert proc.returncode != 0
    assert "tfslurm env: error: tasks get unequal GPU counts (1, 0 on node " in proc.stderr


# --- ports ----------------------------------------------------------------------------------


def test_resv_ports_n_are_used_by_local_id(slurm_cluster: Any) -> None:
    results, _ = run_step(slurm_cluster, "-N2", "--ntasks-per-node=3", "--resv-ports=4")
    check_common(results)
    reserved = results[0]["slurm"]["SLURM_STEP_RESV_PORTS"]
    lo = int(reserved.split("-")[0])
    assert reserved == f"{lo}-{lo + 3}"
    assert all(r["port"] == lo + r["local"] for r in results)


def test_resv_ports_too_few_is_one_clear_error(slurm_cluster: Any) -> None:
    results, _ = run_step(slurm_cluster, "-N1", "-n3", "--resv-ports=2")
    for row in results:
        assert "reserves 2 port(s) but a node runs 3 tasks; use --resv-ports=3" in row["error"]


def test_het_step_uses_derived_ports_that_bind(slurm_cluster: Any) -> None:
    name = f"tfs-het-{uuid.uuid4().hex[:6]}"
    proc = slurm_cluster.srun(
        f"--job-name={name}",
        "-N1",
        "-n1",
        *task_argv(hold=0.5),
        ":",
        "-N2",
        "-n3",
        *task_argv(hold=0.5),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    results = parse_results(proc.stdout)
    assert len(results) == 4
    check_common(results)
    assert results[0]["rule"].startswith("d"), results[0][
        "rule"
    ]  # union of component reservations not trusted


def overlapping(results: list[dict[str, Any]]) -> dict[str, bool]:
    """Per node: did the two steps hold their ports at the same time?"""
    spans: dict[tuple[str, tuple[int, int]], tuple[float, float]] = {}
    for r in results:
        key = (r["node"], (r["job"], r["step"]))
        lo, hi = spans.get(key, (r["t_bound"], r["t_release"]))
        spans[key] = (max(lo, r["t_bound"]), min(hi, r["t_release"]))
    nodes: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for (node, _), span in spans.items():
        nodes[node].append(span)
    return {node: len(s) == 2 and max(a for a, _ in s) < min(b for _, b in s) for node, s in nodes.items()}


def check_concurrent(results: list[dict[str, Any]], expect_kind: str) -> None:
    steps = defaultdict(list)
    for r in results:
        steps[(r["job"], r["step"])].append(r)
    assert len(steps) == 2, f"expected two steps, got {sorted(steps)}"
    for rows in steps.values():
        check_common(rows)
        assert rows[0]["rule"][0] == expect_kind, rows[0]["rule"]
    overlap = overlapping(results)
    assert overlap and all(overlap.values()), (
        f"the two steps did not hold their ports at the same time: {overlap}"
    )
    by_node = defaultdict(list)
    for r in results:
        by_node[r["node"]].append(r["port"])
    for node, ports in by_node.items():
        assert len(ports) == len(set(ports)), f"the concurrent steps collide on {node}: {sorted(ports)}"


def run_concurrent(cluster: Any, extra: list[str], hold: float = 4.0) -> list[dict[str, Any]]:
    """Two separate jobs on the same two nodes, each 2 tasks per node, at the same time."""
    nodes = cluster.nodes[:2]
    outputs: list[Any] = [None, None]

    def launch(i: int) -> None:
        outputs[i] = cluster.srun(
            "-w", ",".join(nodes), "-N2", "--ntasks-per-node=2", *extra, *task_argv(hold=hold), timeout=120
        )

    threads = [threading.Thread(target=launch, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for proc in outputs:
        assert proc.returncode == 0, proc.stderr[-1500:]
    return parse_results(outputs[0].stdout + outputs[1].stdout)


def test_two_concurrent_jobs_with_reserved_ports_never_collide(slurm_cluster: Any) -> None:
    check_concurrent(run_concurrent(slurm_cluster, []), "r")


def test_concurrent_unreserved_jobs_derive_non_colliding_ports(
    slurm_cluster: Any,
) -> None:
    # A bare --resv-ports reserves nothing (ResvPorts=(null)): the step looks exactly like one
    # on a cluster without MpiParams.
    results = run_concurrent(slurm_cluster, ["--resv-ports"])
    assert not any("SLURM_STEP_RESV_PORTS" in r["slurm"] for r in results)
    check_concurrent(results, "d")


def run_concurrent_steps(cluster: Any, workdir: Any, resv: list[str]) -> list[dict[str, Any]]:
    """Two steps of one batch job on the same two nodes, each 2 tasks per node, at once."""
    argv = " ".join(f"'{a}'" for a in task_argv(hold=4.0))
    srun = " ".join(["srun", "--overlap", "-N2", "--ntasks-per-node=2", *resv])
    script = f"#!/bin/bash\n{srun} {argv} &\n{srun} {argv} &\nwait\n"
    job = cluster.sbatch(
        script, "-N2", "--ntasks-per-node=2", "-o", str(workdir / "out.txt"), cwd=str(workdir)
    )
    state = cluster.wait_job(job, timeout=120)
    text = (workdir / "out.txt").read_text()
    assert state == "COMPLETED", text[-1500:]
    results = parse_results(text)
    assert {r["step"] for r in results} == {0, 1}
    return results


def test_without_mpiparams_derived_ports_bind_and_never_collide(
    slurm_cluster_factory: Any, tmp_path_factory: Any
) -> None:
    # A site that never configured MpiParams=ports: no step has SLURM_STEP_RESV_PORTS.
    cluster = slurm_cluster_factory(resv_ports=None, num_nodes=2, gpus=0)
    config = cluster.run(["scontrol", "show", "config"], timeout=30).stdout
    assert re.search(r"^MpiParams\s*=\s*\(null\)", config, re.MULTILINE), config
    one = run_concurrent(cluster, [])  # two jobs at once
    assert not any("SLURM_STEP_RESV_PORTS" in r["slurm"] for r in one)
    check_concurrent(one, "d")
    two = run_concurrent_steps(cluster, tmp_path_factory.mktemp("no-mpiparams"), [])  # two steps of a job
    assert not any("SLURM_STEP_RESV_PORTS" in r["slurm"] for r in two)
    check_concurrent(two, "d")
