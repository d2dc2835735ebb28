"""What one question to Slurm's controller costs, per backend (docs/pyslurm.md has figures).

    sudo PATH=PREFIX/bin:PREFIX/sbin:$PATH PYTHONPATH=.:SITE_PACKAGES_WITH_PYSLURM \\
        .venv/bin/python bench/controller.py [--calls 20]

Starts a throwaway 2-node cluster of the Slurm on ``PATH`` (tfslurm.localcluster), runs one
2-node job, and times, ``--calls`` times each, interleaved: pyslurm's own calls
(``Job.load``, ``Nodes.load``, ``hold`` + ``release``), the commands that answer the same
(``scontrol show job`` as text and ``--json`` where this Slurm has JSON, ``squeue``,
``sinfo``, ``scontrol show node``, ``scontrol hold`` + ``release``), and the same questions
through tfslurm's two backends (parsing included). Prints the median and the slowest call of
each in ms, and
what choosing pyslurm costs once per process (importing it; the forked probe that checks
libslurm can start and asks the controller's version). Without pyslurm, only the commands.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from tfslurm.controller.commands import CommandController
from tfslurm.localcluster import ClusterConfig, LocalCluster

BATCH = "#!/bin/sh\nsrun --ntasks-per-node=1 sleep 600\n"


def timed_ms(cases: dict[str, Callable[[], object]], calls: int) -> dict[str, tuple[float, float]]:
    """(median, slowest) of each case run ``calls`` times, the cases interleaved so that
    load drifts hit all alike."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(calls):
        for name, case in cases.items():
            t0 = time.perf_counter()
            case()
            times[name].append((time.perf_counter() - t0) * 1000)
    return {name: (statistics.median(values), max(values)) for name, values in times.items()}


def command(*argv: str) -> Callable[[], object]:
    def run() -> object:
        done = subprocess.run(argv, capture_output=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode(errors='replace').strip()}")
        return done

    return run


def cases(job: str, pyslurm: object, json_ok: bool) -> dict[str, Callable[[], object]]:
    commands = CommandController()
    found: dict[str, Callable[[], object]] = {
        "job: scontrol show job": command("scontrol", "show", "job", job),
        "job: tfslurm commands backend (squeue -O)": lambda: commands.job(job),
        "nodes: sinfo -N": command("sinfo", "-N"),
        "nodes: scontrol show node": command("scontrol", "show", "node"),
        "nodes: tfslurm commands backend (sinfo -O)": commands.nodes,
        "hold + release: scontrol": lambda: (
            command("scontrol", "hold", job)(),
            command("scontrol", "release", job)(),
        ),
    }
    if json_ok:
        found["job: scontrol show job --json"] = command("scontrol", "show", "job", job, "--json")
    if pyslurm is not None:
        from tfslurm.controller.pyslurm_backend import PyslurmController

        ctl = PyslurmController(pyslurm, CommandController)
        p: Any = pyslurm
        found.update(
            {
                "job: pyslurm Job.load": lambda: p.Job.load(int(job)),
                "job: tfslurm pyslurm backend": lambda: ctl.job(job),
                "nodes: pyslurm Nodes.load": p.Nodes.load,
                "nodes: tfslurm pyslurm backend": ctl.nodes,
                "hold + release: pyslurm": lambda: (p.Job(int(job)).hold(), p.Job(int(job)).release()),
            }
        )
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20, help="calls per case (default 20)")
    args = parser.parse_args()
    with LocalCluster(ClusterConfig(num_nodes=2, gpus=0, timeout=60)) as cluster:
        os.environ.update(cluster.env)
        version = cluster.run(["scontrol", "--version"]).stdout.strip()
        once: dict[str, float] = {}
        t0 = time.perf_counter()
        from tfslurm.controller import pyslurm_backend

        chosen = pyslurm_backend.load(CommandController, required=False)
        once["choosing the backend (import, probe, init)"] = (time.perf_counter() - t0) * 1000
        pyslurm = sys.modules.get("pyslurm") if chosen is not None else None
        if pyslurm is not None:
            t0 = time.perf_counter()
            pyslurm_backend.probe(pyslurm)
            once["the forked probe alone"] = (time.perf_counter() - t0) * 1000
        job = str(cluster.sbatch(BATCH, "-N2", "-t", "10", "-o", "/dev/null"))
        deadline = time.monotonic() + 60
        while cluster.job_states(int(job)) != ["RUNNING"]:
            if time.monotonic() > deadline:
                raise SystemExit("the job did not start")
            time.sleep(0.2)
        json_ok = cluster.run(["scontrol", "show", "job", job, "--json"]).returncode == 0
        timings = timed_ms(cases(job, pyslurm, json_ok), args.calls)
    print(f"{version}, pyslurm {getattr(pyslurm, '__version__', 'not used')}, {args.calls} calls each")
    print(f"  {'':50s} {'median':>10s} {'slowest':>10s}")
    for name, (median, slowest) in sorted(timings.items()):
        print(f"  {name:50s} {median:7.2f} ms {slowest:7.1f} ms")
    for name, ms in once.items():
        print(f"  once: {name:44s} {ms:7.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
