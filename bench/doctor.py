"""How long ``tfslurm doctor``'s step over every node takes as the allocation grows (root).

    python bench/doctor.py [--nodes 4,12,24] [--runs 3]

For each size N it starts a local cluster of N nodes without GPUs (``tfslurm.localcluster``)
and times, interleaved run by run, inside ``salloc -N<N>``:

* ``doctor``: ``tfslurm doctor --json`` (the site's checks, then the step: every node binds
  its port, connects to every other node's, writes and looks for the marker files, and
  reports to the gathering point);
* ``floor``: ``srun -N<N> --ntasks-per-node=1 python -c pass``, one Python start per node,
  the least a step over every node can cost.

Every doctor run must find nothing (the cluster is healthy). Prints the median of each and
their difference: the doctor's own cost. On this machine all nodes share its CPUs, so both
grow with N; on a real cluster each node runs on its own CPUs and the step's time is about
one node's work plus the connects (at most ``REACH_TIMEOUT_S`` each, all at once).

Why no 128 nodes: every node connects to every other, and all the local cluster's nodes
share this machine's kernel, whose neighbour (ARP) table is one for all network namespaces
(``net.ipv4.neigh.default.gc_thresh3``, 1024 entries by default). N nodes need about
N x (N - 1) entries: from about 32 nodes the table overflows ("neighbor table overflow!"
in the kernel log), the kernel drops the packets, and the doctor rightly finds ports that
do not answer. Sizes past :data:`MAX_NODES` are refused. On a real cluster each node's
kernel holds only its own N - 1 entries (a site of more than about 1,000 nodes raises
``gc_thresh3`` anyway, for the same all-to-all traffic of a training run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

#: The most nodes whose all-to-all connects fit the shared kernel's default ARP table.
MAX_NODES = 28
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tfslurm.localcluster import LocalCluster  # noqa: E402


def timed(cluster: LocalCluster, argv: list[str], cwd: str) -> tuple[float, str]:
    """Seconds ``argv`` took, and its output; exit 1 is a doctor's finding, judged by the caller."""
    start = time.perf_counter()
    done = cluster.run(argv, timeout=600, cwd=cwd)
    took = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(
            f"{' '.join(argv[:6])} ...: exit {done.returncode}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return took, done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--nodes", default="4,12,24", help=f"cluster sizes, at most {MAX_NODES} (default %(default)s)"
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="runs of each setting per size (default %(default)s)"
    )
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.nodes.split(",")]
    if max(sizes) > MAX_NODES:
        parser.error(
            f"--nodes {max(sizes)}: at most {MAX_NODES} fit this kernel's ARP table (see the module doc)"
        )
    python = sys.executable
    print(f"{'nodes':>5}  {'doctor s':>9}  {'floor s':>8}  {'doctor - floor s':>16}")
    for size in sizes:
        with LocalCluster(num_nodes=size, gpus=0) as cluster, tempfile.TemporaryDirectory() as cwd:
            os.chmod(cwd, 0o777)
            salloc = ["salloc", f"-N{size}"]
            settings = {
                "doctor": [*salloc, python, "-m", "tfslurm", "doctor", "--json"],
                "floor": [*salloc, "srun", f"-N{size}", "--ntasks-per-node=1", python, "-c", "pass"],
            }
            times: dict[str, list[float]] = {name: [] for name in settings}
            for run in range(args.runs):
                for name in list(settings)[run % 2 :] + list(settings)[: run % 2]:
                    took, out = timed(cluster, settings[name], cwd)
                    if name == "doctor":
                        report = json.loads(out.strip().splitlines()[-1])
                        # the site has no plugin here: only the plugin's line may be said
                        step = [f for f in report["findings"] if f["check"] != "plugin"]
                        if step:
                            raise SystemExit(
                                f"{size} nodes: the doctor found faults on a healthy cluster: {step}"
                            )
                    times[name].append(took)
            doctor, floor = (statistics.median(times[n]) for n in ("doctor", "floor"))
            print(f"{size:>5}  {doctor:>9.2f}  {floor:>8.2f}  {doctor - floor:>16.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
