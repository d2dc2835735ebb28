"""How fast the local test cluster starts and stops (root, Debian slurm-wlm).

    python bench/localcluster.py [--runs 5] [--nodes 4]

Prints the median of each phase (controller answering, all nodes idle, first srun over
all nodes, stop) and the cost of one trivial step, so docs/test-cluster.md can quote
measured figures rather than guesses.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from tfslurm.localcluster import LocalCluster, missing_requirements


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=4)
    args = parser.parse_args()
    missing = missing_requirements()
    if missing:
        print("cannot run: " + "; ".join(missing), file=sys.stderr)
        return 1
    phases: dict[str, list[float]] = {}
    steps: list[float] = []
    for _ in range(args.runs):
        with LocalCluster(num_nodes=args.nodes) as cluster:
            for _ in range(5):
                t0 = time.monotonic()
                cluster.srun("-N1", "-n1", "true")
                steps.append(time.monotonic() - t0)
        for name, value in cluster.timings.items():
            phases.setdefault(name, []).append(value)
    print(f"local cluster, {args.nodes} nodes, median of {args.runs} runs:")
    for name in ("ctld_up", "nodes_idle", "first_srun", "start", "stop"):
        if name in phases:
            print(f"  {name:<11} {statistics.median(phases[name]):6.3f} s")
    step = statistics.median(steps)
    print(
        f"  srun -n1 true  {step * 1000:6.0f} ms; start / one step = {statistics.median(phases['start']) / step:.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
