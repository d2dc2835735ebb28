"""What the tfslurm TaskProlog costs per task, on a real 4-node Slurm cluster (root).

    python bench/prolog.py [--runs 25] [--tasks 16] [--nodes 4] [--snapshot]

Times ``srun -N4 -n16 true`` in three settings, interleaved run by run so that load from
other processes hits all three alike:

  (a) plain cluster: no TaskProlog, no plugin
  (b) cluster with the tfslurm plugin and TaskProlog wrapper, job without --tf-dist
  (c) the same cluster, ``srun --tf-dist=chief:1,worker:*``

and the same two with the hook run by the plugin (``prolog=`` on its plugstack line, no
TaskProlog at all): (b2) without and (c2) with --tf-dist, where Python runs once per node
and step; and (c3) like (c2) but with that per-node run refused (the hook behind ``prolog=``
fails ``--node``), so every task runs the hook itself, as in (c). It prints the medians and the
per-task deltas (step delta / tasks) against the targets:
(b)-(a) <= 1 ms per task, (c)-(a) <= 30 ms per task. As references it also times (r) a
cluster whose TaskProlog is an empty ``/bin/sh`` script (Slurm's own cost of running any
TaskProlog), (f) set-up A's floor: the per-node run of a hook that only starts the same
Python (``-I -S``) and prints an empty block per task, and the wrapper alone without Slurm,
so a miss can be attributed.
``python bench/all.py --with-cluster`` takes :func:`rows` into its table.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfslurm import prolog
from tfslurm.localcluster import LocalCluster, missing_requirements
from tfslurm.settings import TF_DIST_VARIABLE

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/measure.py and friends
from measure import Check, Row
from setups import build, setup_a, setup_b, timed

#: The floor hook (f): Python's start-up and an empty ``--node`` block for each task of the node.
FLOOR_CODE = (
    "import os, sys; ids = os.environ['SLURM_GTIDS'].split(','); sys.stdout.write("
    + repr(prolog.NODE_HEADER + "\n")
    + " + ''.join(f'task {i} 0\\ninput SLURM_PROCID={g}\\ninput SLURM_LOCALID={i}\\n' for i, g in enumerate(ids))"
    + " + 'end\\n')"
)
FLOOR_VARIABLE = "TFSLURM_BENCH_FLOOR"  # set in (f)'s tasks: the (c3) cluster's hook runs FLOOR_CODE
TARGET_B_MS = 1.0
TARGET_C_MS = 30.0
FLOOR_ANCHOR = "A's floor (f)"
FLOOR_TIMES = 2.0  # (c2) per task within this many times (f)'s


def wrapper_alone(wrapper: Path, runs: int) -> tuple[float, float]:
    """Median seconds of the wrapper itself without and with the marker (a recorded task env)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import observed  # the recorded environment of a real 4-task step

    env = dict(observed.load(observed.DATA / "11_gres_gpu2.txt").steps["s0"][0].env)
    out = []
    for marker in (None, "chief:1,worker:*"):
        run_env = dict(env, **({TF_DIST_VARIABLE: marker} if marker else {}))
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run([str(wrapper)], env=run_env, stdout=subprocess.DEVNULL, check=True)
            times.append(time.perf_counter() - t0)
        out.append(statistics.median(times))
    return out[0], out[1]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of this bench (bench/all.py offers them too, as --cluster-*)."""
    parser.add_argument("--runs", type=int, default=25, help="timed runs per setting (>= 20)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument(
        "--snapshot", action="store_true",
        help="run the hook from a copy of git HEAD (not the working tree being edited)",
    )  # fmt: skip


@dataclass
class Measured:
    """Median ms per setting, loads before and after, and the wrapper alone (seconds)."""

    med: dict[str, float]
    load: tuple[float, float]
    alone: tuple[float, float]


def measure(runs: int, warmup: int, nodes: int, tasks: int, snapshot: bool) -> Measured:
    """Start the clusters and time every setting, interleaved run by run."""
    shape = [f"-N{nodes}", f"-n{tasks}"]
    with tempfile.TemporaryDirectory(prefix="tfslurm-bench-prolog-") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        plugin, wrapper = build(work, snapshot)
        base: dict[str, Any] = dict(num_nodes=nodes, gpus=0, cpus=max(4, -(-tasks // nodes)))
        load_before = os.getloadavg()
        per_task_hook = work / "per-task-hook"
        floor = f"exec {shlex.quote(sys.executable)} -I -S -c {shlex.quote(FLOOR_CODE)}"
        per_task_hook.write_text(
            f'#!/bin/sh\n[ -n "${{{FLOOR_VARIABLE}:-}}" ] && [ "$1" = --node ] && {floor}\n'
            f'[ "$1" = --node ] && exit 3\nexec {wrapper} "$@"\n'
        )
        per_task_hook.chmod(0o755)
        empty = work / "empty-taskprolog"
        empty.write_text("#!/bin/sh\nexit 0\n")
        empty.chmod(0o755)
        with (
            LocalCluster(**base) as plain,
            LocalCluster(**base, **setup_b(plugin, wrapper)) as site,
            LocalCluster(**base, task_prolog=str(empty)) as reference,
            LocalCluster(**base, **setup_a(plugin, wrapper)) as hooked,
            LocalCluster(**base, **setup_a(plugin, per_task_hook)) as per_task_hooked,
        ):
            settings = {
                "a": (plain, [*shape, "true"]),
                "r": (reference, [*shape, "true"]),
                "b": (site, [*shape, "true"]),
                "c": (site, ["--tf-dist=chief:1,worker:*", *shape, "true"]),
                "b2": (hooked, [*shape, "true"]),
                "c2": (hooked, ["--tf-dist=chief:1,worker:*", *shape, "true"]),
                "c3": (per_task_hooked, ["--tf-dist=chief:1,worker:*", *shape, "true"]),
                "f": (per_task_hooked, [f"--export=ALL,{FLOOR_VARIABLE}=1", "--tf-dist=chief:1,worker:*",
                                        *shape, "true"]),
            }  # fmt: skip
            # (f) is a floor only if the plugin used the floor's blocks (no TF_CONFIG), not the hook
            cluster, argv = settings["f"]
            used = cluster.srun(*argv[:-1], "sh", "-c", 'test -z "${TF_CONFIG:-}"', timeout=120)
            if used.returncode != 0:
                raise SystemExit(f"the floor hook's output was not used: {used.stderr.strip()[-500:]}")
            times: dict[str, list[float]] = {k: [] for k in settings}
            for i in range(warmup + runs):
                for key, (cluster, argv) in settings.items():
                    elapsed = timed(cluster, *argv)
                    if i >= warmup:
                        times[key].append(elapsed)
        load_after = os.getloadavg()
        alone = wrapper_alone(wrapper, runs)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    return Measured(med, (load_before[0], load_after[0]), alone)


TARGETS = (("b", TARGET_B_MS), ("c", TARGET_C_MS), ("b2", TARGET_B_MS), ("c2", TARGET_C_MS))
SETTINGS = {
    "b": "TaskProlog wrapper, no --tf-dist",
    "c": "TaskProlog wrapper, --tf-dist",
    "b2": "plugin prolog=, no --tf-dist",
    "c2": "plugin prolog=, --tf-dist",
}


def rows(runs: int, warmup: int, nodes: int, tasks: int, snapshot: bool) -> tuple[list[Row], list[Check]]:
    """For bench/all.py: per setting, the per-task ms over the plain cluster (a), beside
    the empty TaskProlog's (r, Slurm's own floor, measured in the same runs); checks
    against the per-task targets. Raises SystemExit where no cluster can start."""
    missing = missing_requirements()
    if missing:
        raise SystemExit("cannot run the cluster bench: " + "; ".join(missing))
    med = measure(runs, warmup, nodes, tasks, snapshot).med
    per_task = {k: (med[k] - med["a"]) / tasks / 1000 for k in med}
    # (c2) against set-up A's floor (f): at most twice it, i.e. a ratio >= 0.5
    floor = {FLOOR_ANCHOR: per_task["f"]} if per_task["f"] > 0 else {}
    out = [
        Row(
            f"prolog ({key}) {SETTINGS[key]}, per task over (a)",
            per_task[key],
            {"empty TaskProlog": per_task["r"], **(floor if key in ("c", "c2") else {})},
            least={FLOOR_ANCHOR: 1 / FLOOR_TIMES} if key == "c2" and floor else {},
        )
        for key, _ in TARGETS
    ]
    checks = [
        (
            f"prolog ({key})-(a) per task {per_task[key] * 1000:.2f} ms <= {target:g} ms",
            per_task[key] * 1000 <= target,
        )
        for key, target in TARGETS
    ]
    if not floor:  # the (c2)-against-(f) check cannot be made: say so, never pass it silently
        checks.append((f"prolog (f) per task {per_task['f'] * 1000:.2f} ms over (a): noise, rerun", False))
    return out, checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args()
    missing = missing_requirements()
    if missing:
        print("cannot run: " + "; ".join(missing), file=sys.stderr)
        return 1
    shape = [f"-N{args.nodes}", f"-n{args.tasks}"]
    measured = measure(args.runs, args.warmup, args.nodes, args.tasks, args.snapshot)
    med, (load_before, load_after), (alone_b, alone_c) = measured.med, measured.load, measured.alone
    per_task = {k: (med[k] - med["a"]) / args.tasks for k in ("r", "b", "c", "b2", "c2", "c3", "f")}
    print(f"srun {' '.join(shape)} true: median of {args.runs} interleaved runs each "
          f"(load average {load_before:.1f} -> {load_after:.1f}, {os.cpu_count()} CPUs)")  # fmt: skip
    print(f"  (a) no TaskProlog, no plugin        {med['a']:8.1f} ms")
    print(
        f"  (r) empty /bin/sh TaskProlog        {med['r']:8.1f} ms  ({per_task['r']:.2f} ms per task: Slurm's floor)"
    )
    print(f"  (b) tfslurm installed, no --tf-dist {med['b']:8.1f} ms")
    print(f"  (c) tfslurm, --tf-dist              {med['c']:8.1f} ms")
    print(f"  (b2) plugin prolog=, no --tf-dist   {med['b2']:8.1f} ms")
    print(f"  (c2) plugin prolog=, --tf-dist      {med['c2']:8.1f} ms")
    print(
        f"  (c3) as (c2), hook in every task    {med['c3']:8.1f} ms  ({per_task['c3']:.2f} ms per task; "
        f"per-node run saves {per_task['c3'] - per_task['c2']:.2f} ms per task)"
    )
    ratio = f"(c2) is {per_task['c2'] / per_task['f']:.2f}x it" if per_task["f"] > 0 else "below (a): noise"
    print(
        f"  (f) A's floor: bare Python per node {med['f']:8.1f} ms  ({per_task['f']:.2f} ms per task; {ratio})"
    )
    verdicts = []
    for key, target in TARGETS:
        ok = per_task[key] <= target
        verdicts.append(ok)
        label = f"({key})-(a)"
        print(f"  {label:9s} per task {per_task[key]:7.2f} ms  target <= {target:g} ms  "
              f"ratio {per_task[key] / target:5.2f}  {'OK' if ok else 'MISSED'}")  # fmt: skip
    print(
        f"  wrapper alone (no Slurm): no marker {alone_b * 1000:.1f} ms, with marker {alone_c * 1000:.1f} ms per task"
    )
    return 0 if all(verdicts) else 3


if __name__ == "__main__":
    sys.exit(main())
