"""Record real task environments into ``tests/data/observed/<slurm version>/`` (as root).

    sudo .venv/bin/python tests/record_observed.py [--out DIR] [--padded] [NAME ...]

Starts a throwaway cluster (``tfslurm.localcluster``: 4 nodes, 4 fake GPUs and 4 CPUs each,
reserved ports 20000-20100, a TaskProlog exporting ``FOO=rank<N>``, tfslurm's SPANK plugin
in plugstack.conf), runs every experiment below (or those named) as real srun steps and
sbatch jobs, and writes one file per experiment in the format ``tests/observed.py`` reads:
header lines (``# fixture:``, ``# command:``, ``# exit code:``, ``# cluster:``), then one
``## step LABEL task N`` block per task (``## batch`` for a batch script) of ``VAR=value``
lines: the task's hostname and its Slurm, GPU and tfslurm variables, sorted. ``--padded``
names the nodes ``tf-gpu001``... and writes into ``<DIR>/padded``. Values that differ
between runs (job ids, ports, times) are kept as recorded.

The default DIR is the version directory of the Slurm this machine runs (``slurmd -V``),
so recording on a new Slurm release is one command per Debian root (tests/matrix.sh builds them).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tfslurm.localcluster import ClusterConfig, LocalCluster, slurm_version

HERE = Path(__file__).resolve().parent
PLUGIN = HERE.parent / "plugin" / "build" / "spank_tfslurm.so"
KEPT = ("SLURM", "TFSLURM", "CUDA_VISIBLE_DEVICES=", "GPU_DEVICE_ORDINAL=", "ROCR_VISIBLE_DEVICES=", "FOO=")

# Each task writes its own file, so the output of concurrent tasks never interleaves.
DUMP = (
    '#!/bin/sh\nd="$DUMP_DIR/$1"; mkdir -p "$d"\n'
    '{ echo "hostname=$(hostname)"; env | grep -E \'^(' + "|".join(KEPT) + ")' | LC_ALL=C sort; } "
    '>"$d/$(printf %06d "${SLURM_PROCID:-0}")"\n'
)

TASK_PROLOG = """#!/bin/sh
echo "export FOO=rank${SLURM_PROCID:-0}"
"""


@dataclass(frozen=True)
class Experiment:
    """One srun step (``args`` before the program) or one sbatch job (``body`` set)."""

    name: str
    description: str
    args: tuple[str, ...]
    body: str = ""  # batch script lines; "$DUMP LABEL" records the script or a step
    hostfile: tuple[int, ...] = ()  # node indexes, one line per task, for -m arbitrary

    @property
    def is_batch(self) -> bool:
        return bool(self.body)


def experiments(nodes: list[str]) -> list[Experiment]:
    n1, n2, _, n4 = nodes[:4]
    return [
        Experiment(
            "01_block_N3_tpn2",
            "3 nodes x 2 tasks, default (block) distribution",
            ("-N3", "--ntasks-per-node=2"),
        ),
        Experiment("02_single_node_n2", "one node, two tasks", ("-N1", "-n2")),
        Experiment("03_cyclic_N3_n6", "cyclic distribution over 3 nodes", ("-N3", "-n6", "-m", "cyclic")),
        Experiment("04_plane2_N2_n6", "plane=2 distribution over 2 nodes", ("-N2", "-n6", "-m", "plane=2")),
        Experiment("05_uneven_N2_n5", "5 tasks on 2 nodes, default distribution", ("-N2", "-n5")),
        Experiment("06_uneven_cyclic_N2_n5", "5 tasks on 2 nodes, cyclic", ("-N2", "-n5", "-m", "cyclic")),
        Experiment("07_uneven_N3_n7", "7 tasks on 3 nodes, default distribution", ("-N3", "-n7")),
        Experiment(
            "08_noncontig_nodelist",
            f"non-contiguous node list {n2},{n4} (-w), 2 tasks each",
            ("-w", f"{n2},{n4}", "--ntasks-per-node=2"),
        ),
        Experiment(
            "09_arbitrary_hostfile",
            "-m arbitrary, SLURM_HOSTFILE lists (one line per task): "
            + " ".join(nodes[i] for i in (2, 0, 0, 1, 2)),
            ("-n5", "-m", "arbitrary"),
            hostfile=(2, 0, 0, 1, 2),
        ),
        Experiment(
            "10_het_srun",
            "heterogeneous step: srun -N1 -n1 : -N2 -n3",
            ("-N1", "-n1", "{dump}", ":", "-N2", "-n3"),
        ),
        Experiment(
            "11_gres_gpu2",
            "--gres=gpu:2 on 2 nodes, 2 tasks per node (4 fake GPUs per node)",
            ("-N2", "--ntasks-per-node=2", "--gres=gpu:2"),
        ),
        Experiment(
            "12_gpus_per_task",
            "--gpus-per-task=1, 2 nodes x 2 tasks",
            ("-N2", "--ntasks-per-node=2", "--gpus-per-task=1"),
        ),
        Experiment(
            "13_gpus_per_node_bind_none",
            "--gpus-per-node=2 --gpu-bind=none, 2 nodes x 2 tasks",
            ("-N2", "--ntasks-per-node=2", "--gpus-per-node=2", "--gpu-bind=none"),
        ),
        Experiment(
            "13b_gpus_per_node",
            "--gpus-per-node=2 (default gpu-bind), 2 nodes x 2 tasks",
            ("-N2", "--ntasks-per-node=2", "--gpus-per-node=2"),
        ),
        Experiment(
            "13c_gpus_total_3", "--gpus=3 over 2 nodes x 2 tasks", ("-N2", "--ntasks-per-node=2", "--gpus=3")
        ),
        Experiment(
            "14_resv_ports",
            "bare --resv-ports (no count), 2 nodes x 2 tasks (MpiParams=ports=...)",
            ("-N2", "--ntasks-per-node=2", "--resv-ports"),
        ),
        Experiment(
            "15_resv_ports_3",
            "--resv-ports=3, 2 nodes x 2 tasks",
            ("-N2", "--ntasks-per-node=2", "--resv-ports=3"),
        ),
        Experiment(
            "16_spank_tf_dist", "SPANK option --tf-dist on 3 tasks", ("--tf-dist=ps:1,worker:2", "-N2", "-n3")
        ),
        Experiment(
            "20_sbatch_steps",
            "batch job N3 x 2; steps: full, -n3 subset, -N1 -n1, and --tf-dist inherited from sbatch",
            ("-N3", "--ntasks-per-node=2", "--tf-dist=ps:2,worker:4"),
            body='"$DUMP" batch\nsrun "$DUMP" s0_full\nsrun -n3 "$DUMP" s1_n3\nsrun -N1 -n1 "$DUMP" s2_N1n1',
        ),
        Experiment(
            "21_sbatch_hetjob",
            "sbatch heterogeneous job (N1 n1 + N2 n4); steps over both groups and group 1 only",
            ("-N1", "-n1", ":", "-N2", "-n4"),
            body='"$DUMP" batch\nsrun --het-group=0,1 "$DUMP" s0_het01\nsrun --het-group=1 "$DUMP" s1_het1',
        ),
        Experiment(
            "22_sbatch_gpus",
            "batch job 2 nodes x 2 tasks, --gpus-per-task=1; one step",
            ("-N2", "--ntasks-per-node=2", "--gpus-per-task=1"),
            body='"$DUMP" batch\nsrun "$DUMP" s0',
        ),
        Experiment(
            "23_sbatch_uneven_n5",
            "batch job -N2 -n5; full step and a cyclic step",
            ("-N2", "-n5"),
            body='"$DUMP" batch\nsrun "$DUMP" s0\nsrun -m cyclic "$DUMP" s1_cyclic',
        ),
        Experiment(
            "24_het_srun_reversed",
            f"heterogeneous step, component 0 on the last node: -w {n4} -n2 : -w {n1},{n2} -n3",
            ("-w", n4, "-n2", "{dump}", ":", "-w", f"{n1},{n2}", "-n3"),
        ),
        Experiment(
            "25_het_srun_cyclic_component",
            "heterogeneous step, component 0 cyclic: -m cyclic -N2 -n4 : -N1 -n2",
            ("-m", "cyclic", "-N2", "-n4", "{dump}", ":", "-N1", "-n2"),
        ),
        Experiment(
            "26_sbatch_arbitrary",
            "sbatch -m arbitrary -n3, SLURM_HOSTFILE lists (one line per task): "
            + " ".join(nodes[i] for i in (1, 0, 1)),
            ("-m", "arbitrary", "-n3"),
            hostfile=(1, 0, 1),
            body='"$DUMP" batch\nsrun "$DUMP" s0',
        ),
    ]


def record(cluster: LocalCluster, exp: Experiment, work: Path, out_dir: Path, cluster_line: str) -> Path:
    """Run one experiment and write ``out_dir/<name>.txt``."""
    dump = work / "dump.sh"
    dumps = work / exp.name
    env = {"DUMP_DIR": str(dumps), "DUMP": str(dump)}
    hostfile = work / f"{exp.name}.hostfile"
    if exp.hostfile:
        hostfile.write_text("".join(cluster.nodes[i] + "\n" for i in exp.hostfile))
        env["SLURM_HOSTFILE"] = str(hostfile)
    args = [word for a in exp.args for word in ((str(dump), "s0") if a == "{dump}" else (a,))]
    stderr = ""
    cluster.wait_idle()  # Slurm picks nodes as on a cluster with nothing else running
    if exp.is_batch:
        script = f"#!/bin/bash\n{exp.body}\n"
        job = cluster.sbatch(script, "-o", str(work / f"{exp.name}.out"), *args, env_extra=env, cwd=str(work))
        state = cluster.wait_job(job, timeout=120)
        rc = _exit_code(cluster, job) or state
        command = (
            f"sbatch {shlex.join(args)} <<'EOF'\n"
            + "".join(f"#   {line}\n" for line in script.splitlines())
            + "# EOF"
        )
        if (work / f"{exp.name}.out").exists():
            stderr = (work / f"{exp.name}.out").read_text()
    else:
        done = cluster.srun(*args, str(dump), "s0", env_extra=env, cwd=str(work), timeout=120)
        rc, stderr = str(done.returncode), done.stderr
        command = ("env SLURM_HOSTFILE=hostfile " if exp.hostfile else "") + "srun " + shlex.join(args)
    lines = [
        f"# fixture: {exp.name}",
        f"# description: {exp.description}",
        f"# command: {command}",
        f"# exit code: {rc}",
        f"# cluster: {cluster_line}",
        f"# recorded: {datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} by tests/record_observed.py",
        *(f"# stderr: {line}" for line in stderr.splitlines()),
    ]
    for label_dir in sorted(p for p in dumps.iterdir() if p.is_dir()) if dumps.exists() else []:
        for task in sorted(label_dir.iterdir()):
            heading = (
                f"## {label_dir.name}"
                if label_dir.name.startswith("batch")
                else (f"## step {label_dir.name} task {int(task.name)}")
            )
            lines += ["", heading, *task.read_text().splitlines()]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{exp.name}.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _exit_code(cluster: LocalCluster, job: int) -> str | None:
    out = cluster.run(["scontrol", "-o", "show", "job", str(job)], timeout=10).stdout
    codes = [w.split("=", 1)[1] for w in out.split() if w.startswith("ExitCode=")]
    return codes[0] if codes else None


def start_cluster(work: Path, padded: bool, plugin: Path = PLUGIN) -> LocalCluster:
    prolog = work / "taskprolog.sh"
    prolog.write_text(TASK_PROLOG)
    prolog.chmod(0o755)
    if not plugin.exists():
        raise SystemExit(f"record_observed: {plugin} is missing: run `make -C plugin` first")
    config = ClusterConfig(
        num_nodes=4, gpus=4, cpus=4, task_prolog=str(prolog), resv_ports="20000-20100",
        plugstack_lines=(f"required {plugin}",),
        **({"node_prefix": "tf-gpu", "node_digits": 3} if padded else {}),
    )  # fmt: skip
    return LocalCluster(config).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="experiments to record (default: all)")
    parser.add_argument("--out", type=Path, help="directory (default: tests/data/observed/<version>)")
    parser.add_argument("--padded", action="store_true", help="nodes tf-gpu001..., files under padded/")
    parser.add_argument("--plugin", type=Path, default=PLUGIN, help=f"the SPANK plugin (default: {PLUGIN})")
    options = parser.parse_args(argv)
    version = slurm_version()
    out_dir = options.out or HERE / "data" / "observed" / version
    if options.padded:
        out_dir = out_dir / "padded"
    with tempfile.TemporaryDirectory(prefix="tfslurm-record-", dir="/tmp") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        (work / "dump.sh").write_text(DUMP)
        (work / "dump.sh").chmod(0o755)
        cluster = start_cluster(work, options.padded, options.plugin)
        try:
            chosen = [e for e in experiments(cluster.nodes) if not options.names or e.name in options.names]
            unknown = set(options.names) - {e.name for e in chosen}
            if unknown:
                raise SystemExit(f"record_observed: no experiment named {', '.join(sorted(unknown))}")
            line = (
                f"slurm {version}, tfslurm.localcluster, nodes={cluster.nodes[0]}..{cluster.nodes[-1]}, "
                "CPUs=4 Gres=gpu:4, TaskProlog=1, plugstack=tfslurm, MpiParams=ports=20000-20100"
            )
            for exp in chosen:
                path = record(cluster, exp, work, out_dir, line)
                print(f"wrote {path}")
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
