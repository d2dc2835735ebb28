"""Run every bench and print one table: tfslurm against each anchor, measured side by side.

    python bench/all.py [--repeat 5] [--big] [--scontrol] [--no-tf] [--with-cluster] [--check]

Rows, all measured in this one run:

* the hostlist grid of ``bench/hostlist.py`` (expand and compress, 1k-100k hosts, 1M with
  ``--big``, against python-hostlist, ClusterShell and Slurm's C code in-process), its
  growth exponents beside the floor's, and its peak-memory row;
* tfslurm's ``SlurmClusterResolver`` against TF's at 1k, 10k and 100k tasks
  (``bench/plan.py``; needs tensorflow, ``--no-tf`` leaves it out);
* the rank -> node map of 100k tasks over 10k nodes (``bench/layout.py``; CPU ms, shown
  unchecked) and its 40k-task ``host:port`` list against TF's resolver;
* with ``--with-cluster`` (root, Debian slurm-wlm; minutes): the per-task cost of the
  TaskProlog and plugin on a real local cluster (``bench/prolog.py``).

Every ratio is anchor / tfslurm (> 1: tfslurm is faster or smaller); the checks
compare each ratio with its least (1.0 at 10k and above and for the resolvers, 0.9 at 1k),
each growth exponent with 1.15, peak memory with 1.5x the list; PASS/MISS per check, and
with ``--check`` exit status 1 when any is missed. Run it from the repository root with
tfslurm importable (``pip install -e .[test]`` or ``PYTHONPATH=.``) on a quiet machine,
three times, for figures to quote. Each bench script still runs alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/measure.py and friends
import measure


def progress(what: str) -> None:
    print(f"... {what}", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    hostlist = measure.load("hostlist")
    hostlist.add_arguments(parser)
    parser.add_argument("--no-tf", action="store_true", help="leave out the rows against TF's resolver")
    parser.add_argument("--tasks", default="1000,10000,100000", help="resolver rows: step sizes in tasks")
    parser.add_argument("--with-cluster", action="store_true", help="add bench/prolog.py (root; minutes)")
    parser.add_argument("--cluster-runs", type=int, default=20, help="bench/prolog.py --runs")
    parser.add_argument("--check", action="store_true", help="exit 1 if a check is missed")
    args = parser.parse_args()
    started = time.perf_counter()
    load_before = os.getloadavg()[0]

    rows, lines, checks = hostlist.run(args, progress)
    if args.no_tf:
        lines.append("TF rows left out (--no-tf)")
    else:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        try:
            import tensorflow  # noqa: F401 - imported before any timing
        except ImportError:
            lines.append("TF rows left out: tensorflow is not importable")
            args.no_tf = True
    if not args.no_tf:
        progress("resolvers against TF's")
        rows += measure.load("plan").resolver_rows([int(t) for t in args.tasks.split(",")], 8, args.repeat)
    progress("layouts")
    layout_rows, layout_checks = measure.load("layout").rows(max(args.repeat, 5), tf=not args.no_tf)
    rows += layout_rows
    checks += layout_checks
    if args.with_cluster:
        progress("TaskProlog on a local cluster")
        prolog_rows, prolog_checks = measure.load("prolog").rows(args.cluster_runs, 3, 4, 16, snapshot=True)
        rows += prolog_rows
        checks += prolog_checks

    print(
        f"tfslurm benches, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, load average "
        f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}, {time.perf_counter() - started:.0f} s"
    )
    ok = measure.report(rows, (*hostlist.ANCHORS, "TF resolver"), lines, checks)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
