"""Cluster plans on a real Slurm cluster: every task plans, binds its port, and calls a peer.

Each task runs :data:`TASK`: it builds its plan from its own environment
(``resolve_plan``), listens on its own advertised port, connects to the *next* rank's
advertised ``host:port`` and checks that the task answering there says it is that rank.
So a test passes only if every task's address really leads to that task — the host is the
node the task runs on, the port is free and nobody else's. The host side then checks that
every task computed the same cluster, that its host is its ``SLURMD_NODENAME``, and that its
GPUs are its own: a subset of what Slurm made visible, never shared on a node.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import tempfile
import threading
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tfslurm.localcluster import slurm_version
from tfslurm.ports import PortRule

pytestmark = pytest.mark.cluster

TASK = r"""
import json, os, socket, subprocess, sys, threading, time
args = json.loads(sys.argv[1])
def report(out):  # one file per task: srun splits long stdout lines of concurrent tasks
    path = os.path.join(args["out"], "rank%s.json" % os.environ["SLURM_PROCID"])
    with open(path + ".tmp", "w") as handle:
        json.dump(out, handle)
    os.rename(path + ".tmp", path)
from tfslurm.errors import TfslurmError
from tfslurm.plan import PlanOptions, resolve_plan
from tfslurm.step import Step
env = os.environ
out = {"procid": int(env["SLURM_PROCID"]), "slurmd": env.get("SLURMD_NODENAME"),
       "hostname": socket.gethostname(), "job": env.get("SLURM_JOB_ID"), "step": env.get("SLURM_STEP_ID"),
       "cvd": env.get("CUDA_VISIBLE_DEVICES"), "localid": int(env["SLURM_LOCALID"])}
if args.get("drop_resv"):  # plan as on a cluster without MpiParams=ports: derived ports
    env = {k: v for k, v in os.environ.items() if k != "SLURM_STEP_RESV_PORTS"}
try:
    plan = resolve_plan(Step.from_environ(env), args.get("jobs"), PlanOptions(**args.get("options", {})))
except TfslurmError as exc:
    out["error"] = str(exc)
    report(out)
    sys.exit(0)
own = plan.own
out.update(host=own.host, node=own.node, port=own.port, role=[own.job, own.index], gpus=own.gpus,
           spec=plan.cluster.cluster_spec(), tf_config=plan.tf_config(), exported=plan.task_env(),
           rule=plan.cluster.ports.encode())
if args.get("resolver"):  # the compat resolver's logic (without importing TF) in the same task
    from tfslurm.resolver import SlurmResolverMixin
    resolver = SlurmResolverMixin()
    out["resolver"] = {"task": [resolver.task_type, resolver.task_id], "master": resolver.master(),
                       "accelerators": resolver.num_accelerators(), "spec": resolver.cluster_spec(),
                       "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "gpus": list(resolver.gpus)}
    again = SlurmResolverMixin()  # idempotent: the same devices, no second split
    out["resolver"]["again"] = [list(again.gpus), os.environ.get("CUDA_VISIBLE_DEVICES")]
if args.get("cli"):
    cli = subprocess.run([sys.executable, "-m", "tfslurm", "tf-config"] + (["--jobs", args["jobs"]] if args.get("jobs") else []),
                         capture_output=True, text=True)
    out["cli"] = [cli.returncode, cli.stdout.strip(), cli.stderr.strip()]
server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    server.bind(("0.0.0.0", own.port))
    server.listen(16)
    out["bound"] = True
    out["t_bound"] = time.time()
except OSError as exc:
    out["bound"] = False
    out["bind_error"] = str(exc)
served = threading.Event()
def serve():
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            conn.sendall(str(own.rank).encode())
        served.set()
if out["bound"]:
    threading.Thread(target=serve, daemon=True).start()
    target = (own.rank + 1) % plan.cluster.num_tasks
    host, _, port = plan.cluster.addresses[target].rpartition(":")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=2) as conn:
                out["peer"] = [target, int(conn.recv(32).decode() or -1)]
            break
        except OSError as exc:
            out["connect_error"] = str(exc)
            time.sleep(0.1)
    served.wait(30)
    out["served"] = served.is_set()
    time.sleep(args.get("hold", 0))
    out["t_release"] = time.time()
report(out)
"""


def argv(out: Path, **args: Any) -> list[str]:
    return [sys.executable, "-c", TASK, json.dumps({"out": str(out), **args})]


def results_of(out: Path) -> list[dict[str, Any]]:
    rows = [json.loads(p.read_text()) for p in out.glob("rank*.json")]
    return sorted(rows, key=lambda r: r["procid"])


def outdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="tfs-plan-test-", dir="/tmp"))


def run(
    cluster: Any, *srun_args: str, env_extra: dict[str, str] | None = None, **task: Any
) -> list[dict[str, Any]]:
    out = outdir()
    proc = cluster.srun(*srun_args, *argv(out, **task), timeout=120, env_extra=env_extra)
    assert proc.returncode == 0, f"srun {' '.join(srun_args)}: rc {proc.returncode}: {proc.stderr[-1500:]}"
    rows = results_of(out)
    shutil.rmtree(out, ignore_errors=True)
    assert rows, proc.stdout[-1000:] + proc.stderr[-1000:]
    return rows


def check(rows: list[dict[str, Any]], num_tasks: int, *, disjoint_gpus: bool = True) -> dict[str, Any]:
    """The invariants every step must satisfy; returns the (common) cluster spec."""
    assert [r["procid"] for r in rows] == list(range(num_tasks)), "a task did not report"
    for r in rows:
        assert "error" not in r, f"rank {r['procid']} on {r['slurmd']}: {r['error']}"
        assert r["host"] == r["node"] == r["slurmd"] == r["hostname"], r
        job, index = r["role"]
        assert r["spec"][job][index] == f"{r['host']}:{r['port']}"
        # the evaluator sees the whole cluster, the training tasks do not see it (docs/ps.md)
        seen = {j: a for j, a in r["spec"].items() if job == "evaluator" or j != "evaluator"}
        assert json.loads(r["tf_config"]) == {"cluster": seen, "task": {"type": job, "index": index}}
        assert r["bound"], (
            f"rank {r['procid']} could not bind {r['port']} on {r['node']}: {r.get('bind_error')}"
        )
        target = (r["procid"] + 1) % num_tasks
        assert r.get("peer") == [target, target], (
            f"rank {r['procid']} reached {r.get('peer')}: {r.get('connect_error')}"
        )
        assert r["served"], f"rank {r['procid']} was never called by its predecessor"
        visible = set(filter(None, (r["cvd"] or "").split(",")))
        assert set(r["gpus"]) <= visible, f"rank {r['procid']} got {r['gpus']}, Slurm gave {r['cvd']!r}"
        assert r["exported"].get("CUDA_VISIBLE_DEVICES", ",".join(r["gpus"])) == ",".join(r["gpus"])
    specs = {json.dumps(r["spec"]) for r in rows}
    assert len(specs) == 1, f"tasks computed {len(specs)} different clusters"
    assert len({r["rule"] for r in rows}) == 1
    by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_node[r["node"]].append(r)
    for node, node_rows in by_node.items():
        ports = [r["port"] for r in node_rows]
        assert len(set(ports)) == len(ports), f"{node}: ports {ports}"
        if disjoint_gpus:
            owned = [g for r in node_rows for g in r["gpus"]]
            assert len(owned) == len(set(owned)), f"{node}: a GPU is shared: {node_rows}"
    return rows[0]["spec"]


SHAPES = [
    # label, srun options, tasks, expected rank -> node (None: not fixed by the options)
    ("block_N2_tpn2", ["-N2", "--ntasks-per-node=2"], 4, None),
    ("cyclic_N3_tpn2", ["-N3", "--ntasks-per-node=2", "-m", "cyclic"], 6, None),
    ("plane2_N2_n6", ["-N2", "-n6", "-m", "plane=2", "--ntasks-per-node=3"], 6, None),
    ("uneven_N2_n5", ["-N2", "-n5"], 5, None),
    ("noncontig_w_node4_node2", ["-w", "node4,node2", "--ntasks-per-node=2"], 4,
     ["node2", "node2", "node4", "node4"]),
    ("resv_ports_4", ["-N2", "--ntasks-per-node=2", "--resv-ports=4"], 4, None),
    ("gres_gpu2", ["-N2", "--ntasks-per-node=2", "--gres=gpu:2"], 4, None),
    ("gpus_per_task_1", ["-N2", "--ntasks-per-node=2", "--gpus-per-task=1"], 4, None),
    ("gpus_3_uneven", ["-N2", "--ntasks-per-node=2", "--gpus=3"], 4, None),
    ("gpus_per_node_bind_none", ["-N2", "--ntasks-per-node=2", "--gpus-per-node=2", "--gpu-bind=none"], 4, None),
]  # fmt: skip


@pytest.mark.parametrize(("label", "options", "num_tasks", "expected"), SHAPES, ids=[s[0] for s in SHAPES])
def test_every_task_reaches_its_peer_on_shape(
    slurm_cluster: Any, label: str, options: list[str], num_tasks: int, expected: list[str] | None
) -> None:
    rows = run(slurm_cluster, *options, jobs="chief:1,worker:*")
    spec = check(rows, num_tasks)
    assert list(spec) == ["chief", "worker"] and len(spec["chief"]) == 1
    if expected is not None:
        assert [r["node"] for r in rows] == expected
    if label == "resv_ports_4":
        assert all(r["rule"].startswith("r") for r in rows)
        # the reserved list may have holes (ports freed by earlier steps): index it by local id
        reserved = PortRule.decode(rows[0]["rule"]).ports
        assert all(r["port"] == reserved[r["localid"]] for r in rows)
    if label == "gpus_per_task_1":
        assert all(r["gpus"] == [r["cvd"]] for r in rows)
    if label in ("gres_gpu2", "gpus_3_uneven"):
        assert all(len(r["gpus"]) <= 1 for r in rows) and sum(len(r["gpus"]) for r in rows) >= 3
    if label == "gpus_per_node_bind_none":
        if slurm_version() == "22.05":  # no variable names the devices
            assert all(r["gpus"] == [] and r["cvd"] is None for r in rows)
        else:  # 24.11+: the node's list in every task, split one each
            assert all(r["cvd"] == "0,1" and r["gpus"] == [str(r["localid"])] for r in rows), rows


@pytest.mark.parametrize("gpus", ["--gres=gpu:2", "--gpus-per-task=1", "--gpus=3"])
def test_compat_resolver_in_every_task(slurm_cluster: Any, gpus: str) -> None:
    rows = run(slurm_cluster, "-N2", "--ntasks-per-node=2", gpus, resolver=True)
    check(rows, 4)
    owned: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        res = r["resolver"]
        assert res["task"] == r["role"]  # all workers: TF's order and the written order agree
        assert res["master"] == f"grpc://{r['host']}:{r['port']}"
        assert res["spec"] == r["spec"]
        visible = set(filter(None, (r["cvd"] or "").split(",")))
        assert set(res["gpus"]) <= visible and res["cvd"] == ",".join(res["gpus"])
        assert res["accelerators"] == ({"GPU": len(res["gpus"])} if res["gpus"] else {})
        assert res["again"] == [res["gpus"], res["cvd"]]
        owned[r["node"]] += res["gpus"]
    for node, devices in owned.items():
        assert len(devices) == len(set(devices)), f"{node}: {devices}"
    counts = sorted(len(r["resolver"]["gpus"]) for r in rows)
    # TF's rule: visible // max tasks per node; --gpus=3 leaves a 1-GPU node, i.e. 0 per task.
    assert counts == ([0, 0, 1, 1] if gpus == "--gpus=3" else [1, 1, 1, 1])


def test_arbitrary_layout_from_a_hostfile(slurm_cluster: Any, tmp_path: Path) -> None:
    hosts = ["node3", "node1", "node1", "node2", "node3"]
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("\n".join(hosts) + "\n")
    rows = run(slurm_cluster, "-n5", "-m", "arbitrary", env_extra={"SLURM_HOSTFILE": str(hostfile)})
    check(rows, 5)
    assert [r["node"] for r in rows] == hosts


def test_heterogeneous_step(slurm_cluster: Any) -> None:
    out = outdir()
    task = argv(out, jobs="chief:1,worker:*")
    proc = slurm_cluster.srun("-N1", "-n1", *task, ":", "-N2", "-n3", *task, timeout=120)
    assert proc.returncode == 0, proc.stderr[-1500:]
    rows = results_of(out)
    shutil.rmtree(out, ignore_errors=True)
    spec = check(rows, 4)
    assert spec["chief"] == [f"{rows[0]['host']}:{rows[0]['port']}"]


def test_cpu_only_cluster_and_padded_names(slurm_cluster_factory: Any) -> None:
    cluster = slurm_cluster_factory(gpus=0, node_prefix="tf-gpu", node_digits=3)
    rows = run(cluster, "-N3", "-n5", "-m", "cyclic", jobs="ps:1,worker:*", cli=True)
    spec = check(rows, 5)
    assert all(r["node"].startswith("tf-gpu00") and r["gpus"] == [] for r in rows)
    assert all("CUDA_VISIBLE_DEVICES" not in r["exported"] for r in rows)
    assert list(spec) == ["ps", "worker"]
    for r in rows:  # the CLI prints the very same TF_CONFIG
        assert r["cli"][0] == 0, r["cli"][2]
        assert r["cli"][1] == r["tf_config"]


def test_jobs_spec_from_the_environment_and_gpus_per_task(slurm_cluster: Any) -> None:
    rows = run(slurm_cluster, "-N2", "--ntasks-per-node=2", "--gres=gpu:4",
               env_extra={"TFSLURM_TF_DIST": "worker:3,evaluator:1"}, options={"gpus_per_task": 2})  # fmt: skip
    spec = check(rows, 4)
    assert list(spec) == ["worker", "evaluator"]  # the order written
    assert [r["role"] for r in rows] == [["worker", 0], ["worker", 1], ["worker", 2], ["evaluator", 0]]
    assert all(len(r["gpus"]) == 2 for r in rows)


@pytest.mark.parametrize("ports", ["reserved", "derived"])
def test_two_concurrent_jobs_on_the_same_nodes_never_collide(slurm_cluster: Any, ports: str) -> None:
    """Two jobs at once on node1+node2; every task holds its port until all have bound."""
    outcomes: dict[int, Any] = {}
    outs = [outdir(), outdir()]

    def launch(i: int) -> None:
        outcomes[i] = slurm_cluster.srun(
            "-w", "node1,node2", "--ntasks-per-node=2", f"--job-name=tfs-plan-{uuid.uuid4().hex[:6]}",
            *argv(outs[i], hold=3.0, drop_resv=ports == "derived"), timeout=120,
        )  # fmt: skip

    threads = [threading.Thread(target=launch, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    all_rows = []
    for i in range(2):
        proc = outcomes[i]
        assert proc.returncode == 0, proc.stderr[-1500:]
        rows = results_of(outs[i])
        shutil.rmtree(outs[i], ignore_errors=True)
        check(rows, 4)
        assert all(r["rule"][0] == ports[0] for r in rows), rows[0]["rule"]
        all_rows += rows
    assert len({r["job"] for r in all_rows}) == 2
    # The two jobs really held their ports at the same time.
    first, second = ([r for r in all_rows if r["job"] == job] for job in sorted({r["job"] for r in all_rows}))
    assert max(r["t_bound"] for r in first + second) < min(r["t_release"] for r in first + second)
    used = defaultdict(list)
    for r in all_rows:
        used[r["node"]].append(r["port"])
    for node, node_ports in used.items():
        assert len(node_ports) == len(set(node_ports)) == 4, f"{node}: {node_ports}"


@pytest.mark.parametrize("ports", ["reserved", "derived"])
def test_two_concurrent_steps_of_one_job_never_collide(
    slurm_cluster: Any, tmp_path: Path, ports: str
) -> None:
    """Two steps at once inside one allocation, on the same two nodes (the one test of this;
    two steps of a job without MpiParams: test_gpus_ports_cluster.py)."""
    outs = [outdir(), outdir()]
    steps = "\n".join(
        "srun --exact -N2 -n2 --ntasks-per-node=1 " + " ".join(shlex.quote(a) for a in argv(out, hold=3.0, drop_resv=ports == "derived")) + " &"
        for out in outs
    )  # fmt: skip
    script = f"#!/bin/sh\n{steps}\nwait\n"
    job = slurm_cluster.sbatch(
        script, "-N2", "--ntasks-per-node=2", f"--output={tmp_path}/slurm-%j.out", cwd=str(tmp_path)
    )
    assert slurm_cluster.wait_job(job) == "COMPLETED", (tmp_path / f"slurm-{job}.out").read_text()[-1500:]
    runs = [results_of(out) for out in outs]
    for out in outs:
        shutil.rmtree(out, ignore_errors=True)
    for rows in runs:
        check(rows, 2)
        assert all(r["rule"][0] == ports[0] for r in rows)
    first, second = runs
    assert first[0]["step"] != second[0]["step"] and first[0]["job"] == second[0]["job"]
    assert {first[0]["step"], second[0]["step"]} == {"0", "1"}
    assert max(r["t_bound"] for r in first + second) < min(r["t_release"] for r in first + second)
    used = defaultdict(list)
    for r in first + second:
        used[r["node"]].append(r["port"])
    assert all(len(p) == len(set(p)) == 2 for p in used.values()), dict(used)


def test_cli_in_a_batch_script_and_with_a_bad_spec_exits_2(slurm_cluster: Any, tmp_path: Path) -> None:
    proc = slurm_cluster.srun(
        "-N1", "-n2", sys.executable, "-m", "tfslurm", "tf-config", "--jobs", "ps:1,worker:3"
    )
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("tfslurm tf-config: error:")]
    assert len(errors) == 2 and all("asks for 4 tasks but the step has 2" in e for e in errors)
    out = tmp_path / "out.txt"
    script = (
        f"#!/bin/sh\n{sys.executable} -m tfslurm tf-config > {out}.stdout 2> {out}.stderr\necho $? > {out}\n"
    )
    job = slurm_cluster.sbatch(script, "-N1", "-n1", f"--output={tmp_path}/slurm-%j.out", cwd=str(tmp_path))
    assert slurm_cluster.wait_job(job) == "COMPLETED"
    assert out.read_text().strip() == "2"
    stderr = Path(f"{out}.stderr").read_text().strip().splitlines()
    assert len(stderr) == 1 and "batch script" in stderr[0] and Path(f"{out}.stdout").read_text() == ""
