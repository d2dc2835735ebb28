"""Every framework from one plan, on a real local cluster (CPU): JAX, PyTorch (gloo), Keras 3.

Each step runs ``tests/tasks/runtime_task.py`` in every task: it joins the runtime's
cluster through tfslurm (or, for ``torch-env``, through the variables the TaskProlog
exported), runs one collective (a sum of ``rank + 1`` over all processes) and records what
the runtime itself says its rank and size are, and the remote addresses of its own TCP
connections. Shapes: cyclic, plane and uneven steps; ``--iface eth1`` runs on the
cluster's second network (``tfslurm.localcluster``: ``eth1``, ``<node>-eth1``).

Kept lean (JAX and torch imports take seconds on small machines): seven steps in all,
on the one default cluster.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import skip_without
from tfslurm import prolog
from tfslurm.localcluster import LocalCluster

pytestmark = [pytest.mark.cluster, pytest.mark.train]

TASK = Path(__file__).parent / "tasks" / "runtime_task.py"
# What each runtime_task.py runtime imports (Keras 3 runs here on its JAX backend).
NEEDS = {"jax": ("jax",), "torch": ("torch",), "torch-env": ("torch",), "keras": ("keras", "jax")}

SHAPES = {
    "cyclic": ("-N3", "-n5", "-m", "cyclic"),
    "plane": ("-N2", "-n5", "-m", "plane=2"),
    "uneven": ("-N3", "-n4"),
}


def run_step(cluster: LocalCluster, runtime: str, shape: tuple[str, ...], *extra: str,
             iface: str | None = None, env: dict[str, str] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    skip_without(*NEEDS[runtime])
    out = Path(tempfile.mkdtemp(prefix="tfs-frameworks-", dir="/tmp"))
    out.chmod(0o777)
    argv = [sys.executable, str(TASK), runtime, str(out), *([iface] if iface else [])]
    done = cluster.srun(*shape, *extra, *argv, timeout=240, env_extra=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = sorted((json.loads(p.read_text()) for p in out.glob("rank*.json")), key=lambda r: r["procid"])
    return rows


def check_ranks(rows: list[dict[str, Any]], n: int) -> None:
    """Every rank ran, the runtime agrees with Slurm's rank, the sum is right everywhere."""
    assert [r["procid"] for r in rows] == list(range(n))
    for row in rows:
        assert row["seen"]["rank"] == row["procid"] and row["seen"]["size"] == n, row
        result = row["result"]
        if isinstance(result, float):
            assert result == n * (n + 1) / 2, row


def check_torch_layout(rows: list[dict[str, Any]], nodelist_order: list[str]) -> None:
    per_node = Counter(r["node"] for r in rows)
    first = next(r["node"] for r in rows if r["procid"] == 0)
    for row in rows:
        seen = row["seen"]
        assert int(seen["LOCAL_RANK"]) == row["localid"], row
        assert int(seen["LOCAL_WORLD_SIZE"]) == per_node[row["node"]], row
        assert nodelist_order[int(seen["GROUP_RANK"])] == row["node"], row
        if not seen["MASTER_ADDR"].startswith("10."):
            assert seen["MASTER_ADDR"] == first


def subnets(cluster: LocalCluster) -> tuple[str, str]:
    """(eth0 prefix, eth1 prefix) of the cluster's two networks, e.g. ('10.213.7.', '10.214.7.')."""
    assert cluster.subnet is not None
    octet = cluster.subnet.rsplit(".", 1)[1]
    return cluster.subnet + ".", f"10.214.{octet}."


def nodes_in_order(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({r["node"] for r in rows}, key=lambda name: int(name.removeprefix("node")))


@pytest.mark.parametrize("shape", ["cyclic", "plane", "uneven"])
def test_jax_sum_over_every_process(slurm_cluster: LocalCluster, shape: str) -> None:
    iface = "eth1" if shape == "uneven" else None
    rows = run_step(slurm_cluster, "jax", SHAPES[shape], iface=iface)
    check_ranks(rows, len(rows) or -1)
    eth0, eth1 = subnets(slurm_cluster)
    peers = {p for r in rows for p in r["peers"]}
    assert peers and all(p.startswith(eth1 if iface else eth0) for p in peers), peers


@pytest.mark.parametrize("shape", ["cyclic", "plane"])
def test_torch_all_reduce_over_every_rank(slurm_cluster: LocalCluster, shape: str) -> None:
    rows = run_step(slurm_cluster, "torch", SHAPES[shape])
    check_ranks(rows, len(rows) or -1)
    check_torch_layout(rows, nodes_in_order(rows))
    eth0, _ = subnets(slurm_cluster)
    peers = {p for r in rows for p in r["peers"]}
    assert peers and all(p.startswith(eth0) for p in peers), peers  # the default network


def test_torch_from_the_taskprolog_on_the_second_interface(
    slurm_cluster: LocalCluster, tmp_path: Path
) -> None:
    """A site's TaskProlog with TFSLURM_FOR=torch and TFSLURM_IFACE=eth1: plain
    ``init_process_group("gloo")`` (env://) joins, on an uneven step, over eth1 only."""
    tmp_path.chmod(0o755)
    wrapper = prolog.write_wrapper(tmp_path / "taskprolog")
    env = {"TFSLURM_TF_DIST": "worker:*", "TFSLURM_FOR": "torch", "TFSLURM_IFACE": "eth1"}
    rows = run_step(slurm_cluster, "torch-env", SHAPES["uneven"], f"--task-prolog={wrapper}", env=env)
    check_ranks(rows, 4)
    check_torch_layout(rows, nodes_in_order(rows))
    _, eth1 = subnets(slurm_cluster)
    assert all(r["seen"]["MASTER_ADDR"].startswith(eth1) for r in rows)
    peers = {p for r in rows for p in r["peers"]}
    assert peers and all(p.startswith(eth1) for p in peers), peers


def test_keras_data_parallel_fit_across_two_nodes_on_eth1(slurm_cluster: LocalCluster) -> None:
    """No KERAS_BACKEND in the job: ``tfslurm.keras.initialize()`` picks JAX, the backend
    Keras runs multi-process on (Keras alone would take TensorFlow, installed here too)."""
    # named nodes: a node still completing the last test's job would give Slurm others
    rows = run_step(slurm_cluster, "keras", ("-w", "node[1-2]", "-N2", "-n2"), iface="eth1")
    check_ranks(rows, 2)
    assert {r["node"] for r in rows} == {"node1", "node2"}
    for row in rows:
        assert row["result"]["devices"] == 2  # one CPU device per process, both in the mesh
        assert row["result"]["loss"] < 1e-3 and abs(row["result"]["kernel"] - 3) < 1e-2
    assert rows[0]["result"] == rows[1]["result"]  # one model, trained in step
    _, eth1 = subnets(slurm_cluster)
    peers = {p for r in rows for p in r["peers"]}
    assert peers and all(p.startswith(eth1) for p in peers), peers


def test_a_missing_or_misnamed_interface_is_one_line(slurm_cluster: LocalCluster) -> None:
    cmd = [sys.executable, "-m", "tfslurm", "env", "--for", "torch"]
    done = slurm_cluster.srun("-N1", "-n1", "-w", "node2", *cmd, "--iface", "eth9")
    assert done.returncode != 0
    ours = [line for line in done.stderr.splitlines() if not line.startswith("srun:")]  # srun's own
    assert ours == [
        "tfslurm env: error: node node2 has no network interface 'eth9' (--iface/TFSLURM_IFACE)"
    ], done.stderr
    # eth0 exists, but <node>-eth0 is no name: the resolution error names it
    done = slurm_cluster.srun("-N1", "-n1", "-w", "node2", *cmd, "--iface", "eth0")
    assert done.returncode != 0 and "'node2-eth0' does not resolve" in done.stderr, done.stderr
    # a per-interface name that resolves to the other network's address is caught on the node
    code = "from tfslurm.iface import IfaceHosts; IfaceHosts('eth1', '{node}', 'node2')"
    done = slurm_cluster.srun("-N1", "-n1", "-w", "node2", sys.executable, "-c", code)
    eth0, eth1 = subnets(slurm_cluster)
    assert done.returncode != 0
    assert (
        f"IfaceError: node node2: 'node2' resolves to {eth0}12, but its interface 'eth1' has {eth1}12; "
        "fix /etc/hosts or DNS, or the host template"
    ) in done.stderr, done.stderr
    # a host template given, '{node}' included, is the name resolved (not node2-eth1)
    done = slurm_cluster.srun(
        "-N1", "-n1", "-w", "node2", *cmd, "--iface", "eth1", "--host-template", "{node}"
    )
    ours = [line for line in done.stderr.splitlines() if not line.startswith("srun:")]
    assert done.returncode != 0 and ours == [
        f"tfslurm env: error: node node2: 'node2' resolves to {eth0}12, but its interface 'eth1' has "
        f"{eth1}12; fix /etc/hosts or DNS, or the host template"
    ], done.stderr


@pytest.mark.parametrize("runtime", ["jax", "torch", "keras"])
def test_sbatch_template(slurm_cluster: LocalCluster, tmp_path: Path, runtime: str) -> None:
    """Each runtime's template, as submitted: two nodes, the example collective, COMPLETED.
    The torch one runs on the second network (TFSLURM_IFACE=eth1 in the job)."""
    from jobs import completed, submit

    skip_without(*NEEDS[runtime])
    tmp_path.chmod(0o755)
    options = ("--export=ALL,TFSLURM_IFACE=eth1",) if runtime == "torch" else ()
    job, log = submit(slurm_cluster, tmp_path, f"{runtime}.sbatch",
                      sys.executable, "-m", "tfslurm.examples.collective", runtime, options=options)  # fmt: skip
    text = completed(slurm_cluster, job, log, timeout=180)
    sums = sorted(line.split(": ", 1)[1] for line in text.splitlines() if " sum " in line)
    assert sums == ["rank 0 of 2: sum 3 (expected 3)", "rank 1 of 2: sum 3 (expected 3)"], text[-3000:]


def test_sbatch_template_on_an_uneven_step(slurm_cluster: LocalCluster, tmp_path: Path) -> None:
    """``sbatch --nodes=2 --ntasks=3 torch.sbatch``: the template pins no task count, so
    Slurm takes the job (2 + 1 processes) and every rank joins the collective."""
    from jobs import submit

    skip_without("torch")
    tmp_path.chmod(0o755)
    job, log = submit(slurm_cluster, tmp_path, "torch.sbatch", sys.executable, "-m",
                      "tfslurm.examples.collective", "torch", options=("--nodes=2", "--ntasks=3"))  # fmt: skip
    state = slurm_cluster.wait_job(job, timeout=180)
    text = log.read_text()
    assert state == "COMPLETED", text[-3000:]
    shown = slurm_cluster.run(["scontrol", "-o", "show", "job", str(job)], timeout=10).stdout.split()
    assert {"NumNodes=2", "NumTasks=3"} <= set(shown), shown
    sums = sorted(line.split(": ", 1)[1] for line in text.splitlines() if " sum " in line)
    assert sums == [f"rank {rank} of 3: sum 6 (expected 6)" for rank in range(3)], text[-3000:]


def test_tf_config_on_the_second_interface(slurm_cluster: LocalCluster, tmp_path: Path) -> None:
    """TF too: ``tfslurm run`` and the TaskProlog advertise every node by its eth1 address
    (no TF import: the program only prints its TF_CONFIG)."""
    tmp_path.chmod(0o755)
    wrapper = prolog.write_wrapper(tmp_path / "taskprolog")
    _, eth1 = subnets(slurm_cluster)
    expected = [f"{eth1}11", f"{eth1}12", f"{eth1}11"]  # -m cyclic over node1, node2
    tfslurm = [sys.executable, "-m", "tfslurm", "run", "--"]
    for how in (tfslurm, [f"--task-prolog={wrapper}"]):
        # -w: the expected addresses are node1's and node2's, whatever else runs on the cluster
        done = slurm_cluster.srun("-w", "node[1-2]", "-N2", "-n3", "-m", "cyclic", *how, "printenv", "TF_CONFIG",
                                  env_extra={"TFSLURM_TF_DIST": "worker:*", "TFSLURM_IFACE": "eth1"})  # fmt: skip
        assert done.returncode == 0, done.stderr
        configs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert len(configs) == 3 and len({json.dumps(c["cluster"]) for c in configs}) == 1, done.stdout
        hosts = [address.rpartition(":")[0] for address in configs[0]["cluster"]["worker"]]
        assert hosts == expected, (how, hosts)
