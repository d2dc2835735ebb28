"""The layout engine on a real Slurm cluster: a matrix of allocation shapes.

Every task of every step runs ``python -m tfslurm layout --json`` and records who it
really is (SLURM_PROCID, SLURMD_NODENAME, SLURM_LOCALID, hostname). A step passes when all
its tasks computed the same map, every rank 0..n-1 reported exactly once, and each
task's own entry in that map is where Slurm really put it. Together the tasks' own views
cover every rank, so this checks the whole map against reality, not against our model.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tfslurm.localcluster import LocalCluster

pytestmark = pytest.mark.cluster

# Each task: run the CLI, then record its identity next to the CLI's output.
PROBE = """#!/bin/sh
out="$1/$2.$SLURM_PROCID"
{py} -m tfslurm layout --json >"$out.json" 2>"$out.err"
echo "$? $SLURM_PROCID $SLURMD_NODENAME $SLURM_LOCALID $(hostname)" >"$out.id"
"""


@dataclass(frozen=True)
class Report:
    rc: int
    procid: int
    node: str
    localid: int
    hostname: str
    layout: dict
    stderr: str


class Probe:
    """A per-test directory with the probe script; collects what the tasks wrote."""

    def __init__(self, root: Path) -> None:
        self.dir = root
        self.script = root / "probe.sh"
        self.script.write_text(PROBE.format(py=shlex.quote(sys.executable)))
        self.script.chmod(0o755)

    def argv(self, label: str) -> list[str]:
        return [str(self.script), str(self.dir), label]

    def shell(self, label: str) -> str:
        return " ".join(shlex.quote(a) for a in self.argv(label))

    def reports(self, label: str) -> list[Report]:
        out = []
        for id_file in sorted(self.dir.glob(f"{label}.*.id")):
            rc, procid, node, localid, hostname = id_file.read_text().split()
            stem = id_file.with_suffix("")
            text = Path(f"{stem}.json").read_text()
            out.append(
                Report(
                    int(rc),
                    int(procid),
                    node,
                    int(localid),
                    hostname,
                    json.loads(text) if int(rc) == 0 else {},
                    Path(f"{stem}.err").read_text(),
                )
            )
        return out


def check_step(
    probe: Probe, label: str, num_tasks: int, method: str | None = None, expected: list | None = None
) -> list[str]:
    """Assert the step's map is agreed on and true (and equals ``expected``: node names,
    or indices into the step's node list); return it."""
    reports = probe.reports(label)
    assert reports, f"{label}: no task reported (did the step run?)"
    failed = [f"rank {r.procid} on {r.node}: {r.stderr.strip()}" for r in reports if r.rc != 0]
    assert not failed, f"{label}: tfslurm layout failed: {failed}"
    assert sorted(r.procid for r in reports) == list(range(num_tasks)), label
    maps = {json.dumps(r.layout["rank_to_node"]) for r in reports}
    assert len(maps) == 1, f"{label}: tasks computed different maps: {maps}"
    locals_ = {json.dumps(r.layout["rank_to_local"]) for r in reports}
    assert len(locals_) == 1, f"{label}: tasks computed different local ids"
    rank_to_node = reports[0].layout["rank_to_node"]
    rank_to_local = reports[0].layout["rank_to_local"]
    assert len(rank_to_node) == num_tasks
    for r in reports:
        assert rank_to_node[r.procid] == r.node, f"{label}: rank {r.procid} really runs on {r.node}"
        assert rank_to_local[r.procid] == r.localid, f"{label}: rank {r.procid} local id"
        assert r.hostname == r.node  # netns mode: each node has its own hostname
        assert r.layout["rank"] == r.procid
    if method is not None:
        assert reports[0].layout["method"].startswith(method), reports[0].layout["method"]
    if expected is not None:
        nodes = reports[0].layout["nodes"]
        want = [nodes[e] if isinstance(e, int) else e for e in expected]
        assert rank_to_node == want, f"{label}: {rank_to_node} != {want}"
    return rank_to_node


@pytest.fixture
def probe() -> Iterator[Probe]:
    with tempfile.TemporaryDirectory(prefix="tfslurm-layout-") as root:
        yield Probe(Path(root))


def srun_ok(cluster: LocalCluster, *args: str, env_extra: dict[str, str] | None = None) -> None:
    result = cluster.srun(*args, timeout=90, env_extra=env_extra)
    assert result.returncode == 0, f"srun {' '.join(args)}: {result.stderr.strip()[-600:]}"


# --- plain srun steps (each its own allocation; SLURM_DISTRIBUTION as srun sets it) -------

# Which free nodes a job gets can vary, so expected maps are node names only for -w
# steps, and otherwise indices into the step's node list (node-index order).
SRUN_SHAPES: list[tuple[str, list[str], int, str | None, list]] = [
    # label, srun options, tasks, method prefix, expected map where the shape fixes it
    ("block_N3x2", ["-N3", "--ntasks-per-node=2"], 6, "default", [0, 0, 1, 1, 2, 2]),
    ("N2_n5", ["-N2", "-n5"], 5, "default", None),  # packed: 4,1
    ("N3_n7", ["-N3", "-n7"], 7, "default", None),  # packed: 4,2,1
    ("explicit_block_N2_n4", ["-N2", "-n4", "-m", "block"], 4, "block", None),
    ("cyclic_N3_n6", ["-N3", "-n6", "-m", "cyclic"], 6, "cyclic", None),
    ("cyclic_even_N2x3", ["-N2", "--ntasks-per-node=3", "-m", "cyclic"], 6, "cyclic", [0, 1] * 3),
    ("plane2_N2_n6", ["-N2", "-n6", "-m", "plane=2"], 6, "plane=2", None),
    ("plane3_N3_n8", ["-N3", "-n8", "-m", "plane=3"], 8, "plane=3", None),
    (
        "w_node4_node2",
        ["-w", "node4,node2", "--ntasks-per-node=2"],
        4,
        "default",
        ["node2", "node2", "node4", "node4"],
    ),
    (
        "w_node4_node2_cyclic_n3",
        ["-w", "node4,node2", "-n3", "-m", "cyclic"],
        3,
        "cyclic",
        ["node2", "node4", "node2"],
    ),
    ("uneven_tpn_N2_n3", ["-N2", "-n3", "--ntasks-per-node=2"], 3, "default", [0, 0, 1]),
    ("overcommit_N2_n12", ["-N2", "-n12", "-O"], 12, "default", None),
    ("overcommit_cyclic_N2_n9", ["-N2", "-n9", "-O", "-m", "cyclic"], 9, "cyclic", None),
]


@pytest.mark.parametrize(
    "label, options, num_tasks, method, expected", SRUN_SHAPES, ids=[s[0] for s in SRUN_SHAPES]
)
def test_srun_shape(
    slurm_cluster: LocalCluster,
    probe: Probe,
    label: str,
    options: list[str],
    num_tasks: int,
    method: str | None,
    expected: list | None,
) -> None:
    srun_ok(slurm_cluster, *options, *probe.argv(label))
    check_step(probe, label, num_tasks, method, expected)


def test_arbitrary_hostfile_repeats_and_reorders_nodes(slurm_cluster: LocalCluster, probe: Probe) -> None:
    hosts = ["node3", "node1", "node1", "node4", "node2", "node3", "node1"]
    hostfile = probe.dir / "hostfile"
    hostfile.write_text("# rank order\nnode3\nnode1*2, node4\nnode2 # comment\nnode[3,1]\n")
    srun_ok(
        slurm_cluster,
        "-m",
        "arbitrary",
        "-n7",
        *probe.argv("arbitrary"),
        env_extra={"SLURM_HOSTFILE": str(hostfile)},
    )
    assert check_step(probe, "arbitrary", 7, "arbitrary") == hosts


@pytest.mark.parametrize(
    "label, components, num_tasks, expected",
    [
        ("het_1_3", (["-N1", "-n1"], ["-N2", "-n3"]), 4, None),
        ("het_3_2", (["-N2", "-n3"], ["-N2", "-n2"]), 5, None),
        # component 0 on the highest node: the sorted union list does not start with it
        ("het_w_reversed", (["-w", "node4", "-n2"], ["-w", "node1,node2", "-n3"]), 5, ["node4", "node4"]),
    ],
)
def test_heterogeneous_srun(
    slurm_cluster: LocalCluster,
    probe: Probe,
    label: str,
    components: tuple[list[str], ...],
    num_tasks: int,
    expected: list[str] | None,
) -> None:
    args: list[str] = []
    for component in components:
        args += [":"] if args else []
        args += component + probe.argv(label)
    srun_ok(slurm_cluster, *args)
    rank_to_node = check_step(probe, label, num_tasks, "het(")
    if expected is not None:
        assert rank_to_node[: len(expected)] == expected
    sizes = {tuple(r.layout["component_sizes"]) for r in probe.reports(label)}
    assert len(sizes) == 1


# --- sbatch: steps inside one allocation, and a heterogeneous job ------------------------


def run_batch(cluster: LocalCluster, probe: Probe, body: str, *sbatch_args: str) -> None:
    script = "#!/bin/sh\nset -e\n" + body
    job = cluster.sbatch(script, *sbatch_args, "-o", str(probe.dir / "batch.out"), cwd=str(probe.dir))
    state = cluster.wait_job(job, timeout=120)
    output = (probe.dir / "batch.out").read_text() if (probe.dir / "batch.out").exists() else ""
    assert state == "COMPLETED", f"batch job {job}: {state}: {output[-800:]}"


def test_sbatch_steps_smaller_than_the_allocation(slurm_cluster: LocalCluster, probe: Probe) -> None:
    steps = {
        "full": ("", 6, [0, 0, 1, 1, 2, 2]),
        "n3": ("-n3", 3, [0, 1, 2]),  # becomes cyclic, one per node
        "N1n1": ("-N1 -n1", 1, [0]),
        "N2n3": ("-N2 -n3", 3, None),
        "n4_plane2": ("-n4 -m plane=2", 4, None),
        "n5_cyclic": ("-n5 -m cyclic", 5, None),
    }
    body = "".join(f"srun {opts} {probe.shell(label)}\n" for label, (opts, _, _) in steps.items())
    # A layout in the batch script itself: one line, exit 2, no traceback.
    body += f"{shlex.quote(sys.executable)} -m tfslurm layout 2>{probe.dir}/batch_layout.err || echo $? >{probe.dir}/batch_layout.rc\n"
    run_batch(slurm_cluster, probe, body, "-N3", "--ntasks-per-node=2")
    for label, (_, num_tasks, expected) in steps.items():
        check_step(probe, label, num_tasks, expected=expected)
    assert (probe.dir / "batch_layout.rc").read_text().strip() == "2"
    err = (probe.dir / "batch_layout.err").read_text()
    assert err.count("\n") == 1 and "this is a batch script" in err and "Traceback" not in err


def test_sbatch_hetjob_steps(slurm_cluster: LocalCluster, probe: Probe) -> None:
    body = (
        f"srun --het-group=0,1 {probe.shell('het01')}\n"
        f"srun --het-group=1 {probe.shell('het1')}\n"
        f"srun --het-group=0 {probe.shell('het0')}\n"
    )
    run_batch(slurm_cluster, probe, body, "-N1", "-n2", ":", "-N2", "-n3")
    check_step(probe, "het01", 5, "het(")
    assert probe.reports("het01")[0].layout["component_sizes"] == [2, 3]
    check_step(probe, "het1", 3)
    assert probe.reports("het1")[0].layout["component_sizes"] == []
    assert check_step(probe, "het0", 2) == [probe.reports("het0")[0].node] * 2


# --- zero-padded node names ----------------------------------------------------------------


@pytest.fixture(scope="module")
def padded_cluster(slurm_cluster_factory: Callable[..., LocalCluster]) -> LocalCluster:
    return slurm_cluster_factory(node_prefix="tf-gpu", node_digits=3)


def test_zero_padded_names(padded_cluster: LocalCluster, probe: Probe) -> None:
    srun_ok(padded_cluster, "-N3", "-n7", "-m", "cyclic", *probe.argv("padded_cyclic"))
    check_step(probe, "padded_cyclic", 7, "cyclic")
    srun_ok(padded_cluster, "-w", "tf-gpu004,tf-gpu002", "-n3", *probe.argv("padded_w"))
    assert check_step(probe, "padded_w", 3) == ["tf-gpu002", "tf-gpu002", "tf-gpu004"]
