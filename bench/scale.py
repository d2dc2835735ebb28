"""What ``--tf-dist`` adds to a step as the cluster grows: set-ups A and B on 8 to 128 nodes (root).

    python bench/scale.py [--nodes 8,32,128] [--runs 12] [--warmup 1] [--big-tasks 16384]
                          [--plan-tasks 100000] [--snapshot]

For each cluster size N it starts a local cluster of N nodes (``tfslurm.localcluster``) in
set-up A (the plugin runs the hook, ``prolog=``, once per node and step), then one in set-up
B (the hook is the TaskProlog of every task), and on each times, interleaved run by run,
``srun -N<n> --ntasks-per-node=4 true`` plain and with ``--tf-dist=worker:*``, for n = N and
n = 1. Plain steps in A run no hook at all; in B they run the wrapper, which exits at once
(Slurm's own cost of any TaskProlog, which B's sites pay on every job). One cluster at a
time: three clusters of 128 nodes at once fail steps on a 2-CPU VM ("Communication
connection failure"). The clusters track processes by process group (``proctrack/pgid``):
the local cluster's ``proctrack/linuxproc`` reads every process of the one /proc that all
nodes share here, a cost per node that grows with the cluster only on this machine. Timing
starts once the CPUs are quiet. From the medians:

* one node's added time: the 1-node step with ``--tf-dist`` minus the plain one there;
* per node: the N-node step's added time / N.

On a real cluster the nodes run their hooks side by side, so a step of any size pays about
one node's added time; on this machine every node shares the same CPUs, so the N-node step
pays N nodes' hooks one after another, and the per-node figure shows whether a node's cost
grows with the cluster (it must not). Before timing, one checked run of every setting and
shape prints each task's ``TF_CONFIG``: every rank once, every address its own node's.

On the largest cluster it also runs one step of ``--big-tasks`` tasks (``--overcommit``) in
set-up A, whose ``TF_CONFIG`` would exceed Slurm's variable cap, so the hook exports the
plan descriptor (``TFSLURM_DESCRIPTOR``) instead; every task's descriptor is checked to be
the one plan of the step (each rank on its own node, no ``TF_CONFIG``). A step's tasks all
live at once, forked from slurmstepd: about 540 KB each here (16,384 tasks took 8.6 GB), so
the default stays well inside this machine's memory, Slurm's ``MaxTasksPerNode`` (512) and
Linux's default ``pid_max`` (32768). A step of ``--plan-tasks`` tasks (100,000: some 53 GB)
is planned without launching it: the hook, run as the plugin runs it (``--node``), in the
environment Slurm gives the first task of the first, middle and last node of such a step
on the largest cluster (``tests/stepenv.py``), must give every local task the one
descriptor, whose plan puts every rank on its node.

Prints the rows with ratios against the smallest cluster's figures and checks: one node's
added time <= 40 ms on the largest cluster, per node there <= 1.3x the smallest's. Two more
figures tell a node's own cost apart from this machine's: the CPU time ``--tf-dist`` adds per
node (the machine's busy time, /proc/stat), and, where valgrind is installed, the
instructions of the hook's ``--node`` run for one node of the smallest and the largest
cluster's step, checked to the same 1.3x. On 2 CPUs the first grows with the cluster though
the second does not: 128 nodes' processes take turns on the same caches. Not part of the
test suite (minutes, root).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tfslurm.cluster import Cluster
from tfslurm.errors import ClusterError
from tfslurm.layout import Layout, block_layout
from tfslurm.localcluster import LocalCluster, missing_requirements

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/measure.py and friends
sys.path.insert(1, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from measure import Check, print_checks
from setups import build, setup_a, setup_b, timed

from stepenv import task_env

SPEC = "worker:*"
TASKS_PER_NODE = 4
ONE_NODE_MS = 40.0  # one node's added time on the largest cluster
PER_NODE_GROWTH = 1.3  # per node on the largest cluster, at most this times the smallest's
RESV_PORTS = "20000-20999"  # MpiParams: room for a step of up to 512 tasks a node
# proctrack/linuxproc, the local cluster's default, walks all of /proc to find a step's
# processes; here every node shares one /proc, so each node's walk grows with the cluster
# (and with the hooks running on the other nodes), which a real node's does not.
PROCTRACK = "ProctrackType=proctrack/pgid"
TICKS_PER_S = os.sysconf("SC_CLK_TCK")  # /proc/stat's unit
QUIET_BUSY = 0.10  # the CPUs count as quiet below this busy fraction over a second
TF_CONFIG_CAP = 131060  # longest TF_CONFIG the hook exports (docs/admin-guide.md)
SETUPS = ("A", "B")
#: Each task prints its rank, node, TF_CONFIG's length and TF_CONFIG (the big step: the descriptor).
REPORT = 'printf "%s %s %s %s\\n" "$SLURM_PROCID" "$SLURMD_NODENAME" "${#TF_CONFIG}" "${TF_CONFIG:-$TFSLURM_DESCRIPTOR}"'


def wait_idle(cluster: LocalCluster, timeout: float = 120) -> None:
    """Until every node is idle again: a step started while the last job's nodes are still
    completing waits for them, which would be timed as if it were the step's own cost."""
    deadline = time.monotonic() + timeout
    while set(cluster.run(["sinfo", "-h", "-o", "%T"], timeout=30).stdout.split()) != {"idle"}:
        if time.monotonic() > deadline:
            raise SystemExit(f"{cluster}: nodes not idle after {timeout:g} s")
        time.sleep(0.05)


def cpu_ticks() -> tuple[int, int]:
    """All CPUs' busy and total time so far, in clock ticks (/proc/stat)."""
    with open("/proc/stat", encoding="ascii") as f:
        ticks = [int(value) for value in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return sum(ticks) - idle, sum(ticks)


def busy_fraction(seconds: float = 1.0) -> float:
    """Fraction of all CPUs' time spent busy over the next ``seconds``."""
    busy0, total0 = cpu_ticks()
    time.sleep(seconds)
    busy1, total1 = cpu_ticks()
    return (busy1 - busy0) / max(total1 - total0, 1)


def wait_quiet(timeout: float = 180) -> float:
    """Until the CPUs are quiet; the seconds waited. The kernel tears down the last
    cluster's network namespaces in the background for a while after it stops, which
    would be timed as part of whichever steps run meanwhile."""
    started = time.monotonic()
    while busy_fraction() > QUIET_BUSY:
        if time.monotonic() - started > timeout:
            raise SystemExit(f"the CPUs are still busy after {timeout:g} s; run the bench on an idle machine")
    return time.monotonic() - started


def task_lines(
    cluster: LocalCluster, argv: list[str], tasks: int, timeout: float = 600
) -> dict[int, list[str]]:
    """Run the reporting step; rank -> [node, TF_CONFIG length, value], every rank once.

    Each task writes its own file: srun forwards output in pieces of at most 1 KiB, so
    longer lines of several tasks would interleave on its stdout."""
    wait_idle(cluster)
    with tempfile.TemporaryDirectory(prefix="tfslurm-bench-scale-out-") as out:
        os.chmod(out, 0o755)
        done = cluster.srun(*argv, "sh", "-c", REPORT + ' > "$0/$SLURM_PROCID"', out, timeout=timeout)
        if done.returncode != 0:
            raise SystemExit(f"srun {' '.join(argv)} failed: {done.stderr.strip()[-800:]}")
        seen: dict[int, list[str]] = {}
        for name in os.listdir(out):
            with open(os.path.join(out, name), encoding="utf-8") as f:
                rank, node, length, value = [*f.read().rstrip("\n").split(" ", 3), ""][:4]
            if rank != name:
                raise SystemExit(f"srun {' '.join(argv)}: task {name} reported rank {rank!r}")
            seen[int(rank)] = [node, length, value]
    if sorted(seen) != list(range(tasks)):
        raise SystemExit(f"srun {' '.join(argv)}: {len(seen)} of {tasks} ranks reported")
    return seen


def check_tf_config(seen: dict[int, list[str]], what: str) -> None:
    """Every task: itself as worker <rank> in the one cluster of the step, every address its node's."""
    clusters = set()
    for rank, (_, _, value) in seen.items():
        config = json.loads(value)
        if config["task"] != {"type": "worker", "index": rank}:
            raise SystemExit(f"{what}: rank {rank} is {config['task']}")
        clusters.add(json.dumps(config["cluster"], sort_keys=True))
    if len(clusters) != 1:
        raise SystemExit(f"{what}: the tasks were given {len(clusters)} different clusters")
    workers = json.loads(clusters.pop())["worker"]
    hosts = [address.rsplit(":", 1)[0] for address in workers]
    if len(workers) != len(seen) or any(hosts[rank] != node for rank, (node, _, _) in seen.items()):
        raise SystemExit(f"{what}: an address is not on its task's node")


def check_step(cluster: LocalCluster, setup: str, nodes: int) -> None:
    tasks = nodes * TASKS_PER_NODE
    argv = [f"-N{nodes}", f"--ntasks-per-node={TASKS_PER_NODE}"]
    if setup.endswith("plain"):
        seen = task_lines(cluster, argv, tasks)
        if any(value for _, _, value in seen.values()):
            raise SystemExit(f"{setup} -N{nodes}: a task has a TF_CONFIG")
        return
    check_tf_config(task_lines(cluster, [f"--tf-dist={SPEC}", *argv], tasks), f"{setup} -N{nodes}")


def big_plan(cluster: LocalCluster, tasks: int) -> str:
    """One step of ``tasks`` tasks in set-up A: the descriptor in every task, checked."""
    nodes = len(cluster.nodes)
    argv = [f"--tf-dist={SPEC}", f"-N{nodes}", f"-n{tasks}", "--overcommit"]
    t0 = time.perf_counter()
    seen = task_lines(cluster, argv, tasks, timeout=900)
    elapsed = time.perf_counter() - t0
    descriptors = {value for _, length, value in seen.values() if length == "0"}
    if len(descriptors) != 1 or any(length != "0" for _, length, _ in seen.values()):
        raise SystemExit(f"big step: {len(descriptors)} descriptors; TF_CONFIG must be absent in every task")
    text = descriptors.pop()
    plan = Cluster.from_descriptor(text)
    if plan.num_tasks != tasks or any(
        plan.host_of(rank) != node or plan.job_of(rank) != ("worker", rank)
        for rank, (node, _, _) in seen.items()
    ):
        raise SystemExit("big step: the descriptor's plan is not the step's (a rank on another node)")
    tf_config = len(plan.tf_config(0))
    if tf_config <= TF_CONFIG_CAP:
        raise SystemExit(
            f"big step: TF_CONFIG of {tf_config} bytes fits; use more tasks for the descriptor path"
        )
    return (
        f"big step in A: srun -N{nodes} -n{tasks} --overcommit --tf-dist={SPEC}: {elapsed:.1f} s (one run, "
        f"with the check's output); every task has TFSLURM_DESCRIPTOR ({len(text)} bytes, one plan of "
        f"{tasks} tasks, each rank on its own node) and no TF_CONFIG (it would be {tf_config:,} bytes)"
    )


def block_step(nodes: int, tasks: int) -> Layout:
    """The layout Slurm gives ``srun -N<nodes> -n<tasks>`` (block) on node1, node2, ..."""
    names = [f"node{i}" for i in range(1, nodes + 1)]
    return block_layout(names, [tasks // nodes + (i < tasks % nodes) for i in range(nodes)])


def planned_step(hook: Path, nodes: int, tasks: int) -> Check:
    """The hook's ``--node`` run for the first, middle and last node of a block step of
    ``tasks`` tasks on ``nodes`` nodes (not launched): the descriptor, checked."""
    layout = block_step(nodes, tasks)
    names = layout.nodes
    times, descriptors = [], set()
    for node in sorted({0, nodes // 2, nodes - 1}):
        ranks = layout.ranks_on(node)
        env = task_env(layout, ranks[0], TFSLURM_TF_DIST=SPEC, PATH=os.defpath)
        t0 = time.perf_counter()
        done = subprocess.run([str(hook), "--node"], env=env, capture_output=True, text=True, timeout=120)
        times.append(time.perf_counter() - t0)
        exports = [line.split("=", 1) for line in done.stdout.splitlines() if line.startswith("export ")]
        found = [value for name, value in exports if name == "export TFSLURM_DESCRIPTOR"]
        if (
            done.returncode != 0
            or len(found) != len(ranks)
            or any(n == "export TF_CONFIG" for n, _ in exports)
        ):
            return (f"plan of {tasks} tasks: node {names[node]}: rc {done.returncode}, {len(found)} descriptors "
                    f"for {len(ranks)} tasks: {done.stderr.strip()[-300:]}", False)  # fmt: skip
        descriptors.update(found)
    if len(descriptors) != 1:
        return (f"plan of {tasks} tasks: {len(descriptors)} different descriptors", False)
    plan = Cluster.from_descriptor(descriptors.pop())
    right = plan.num_tasks == tasks and all(
        plan.host_of(rank) == names[layout.rank_node[rank]] and plan.job_of(rank) == ("worker", rank)
        for rank in range(tasks)
    )
    return (
        f"plan of a {tasks}-task step on {nodes} nodes (not launched), the hook's --node run on 3 nodes: "
        f"{min(times) * 1000:.0f}-{max(times) * 1000:.0f} ms each, one descriptor for all their tasks, "
        f"every rank on its node: {'yes' if right else 'NO'}",
        right,
    )


def hook_instructions(hook: Path, nodes: int) -> int | None:
    """Instructions of the hook's ``--node`` run (wrapper and Python, valgrind's count) for
    the first node of a block step of ``TASKS_PER_NODE`` tasks on each of ``nodes`` nodes:
    a node's work, whatever else shares the CPUs. None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    env = task_env(block_step(nodes, nodes * TASKS_PER_NODE), 0, TFSLURM_TF_DIST=SPEC, PATH=os.defpath)
    # once unmeasured, so the count is of a run with its bytecode cached, as in a step
    subprocess.run([hook, "--node"], env=env, capture_output=True, timeout=60)
    argv = ["valgrind", "--tool=callgrind", "--trace-children=yes", "--callgrind-out-file=/dev/null"]
    done = subprocess.run([*argv, str(hook), "--node"], env=env, capture_output=True, text=True, timeout=300)
    counts = [int(line.rsplit(":", 1)[1]) for line in done.stderr.splitlines() if "Collected :" in line]
    if done.returncode != 0 or "export TF_CONFIG=" not in done.stdout or not counts:
        raise SystemExit(f"hook under valgrind on {nodes} nodes: rc {done.returncode}: {done.stderr[-500:]}")
    return sum(counts)


def instructions_check(hook: Path, small: int, large: int) -> tuple[str, Check | None]:
    """The line on the hook's instructions per node on the largest cluster and the smallest;
    the check of their ratio (None without valgrind)."""
    few, many = hook_instructions(hook, small), hook_instructions(hook, large)
    if few is None or many is None:
        return "the hook's instructions per node: not counted (valgrind is not installed)", None
    ratio = many / few
    line = (f"the hook's --node run for one node of a step on {small} nodes: {few / 1e6:.1f} M instructions; "
            f"on {large} nodes: {many / 1e6:.1f} M ({ratio:.2f}x; valgrind)")  # fmt: skip
    check = (f"hook instructions per node at {large} nodes <= {PER_NODE_GROWTH}x at {small}: {ratio:.2f}x",
             ratio <= PER_NODE_GROWTH)  # fmt: skip
    return line, check


def measure_size(
    plugin: Path, wrapper: Path, nodes: int, runs: int, warmup: int, big_tasks: int
) -> tuple[dict[tuple[str, int], float], dict[tuple[str, int], float], Check | None]:
    """Median ms of every (setting, nodes in the step) on clusters of ``nodes`` nodes, the
    mean CPU ms the whole machine was busy during each; with ``big_tasks``, the big step's
    line and whether its check passed (set-up A's cluster)."""
    base: dict[str, Any] = {
        "num_nodes": nodes,
        "gpus": 0,
        "resv_ports": RESV_PORTS,
        "timeout": 300.0,
        "extra_conf_lines": [PROCTRACK],
    }
    options = {"A": setup_a(plugin, wrapper), "B": setup_b(plugin, wrapper)}
    medians: dict[tuple[str, int], float] = {}
    cpu: dict[tuple[str, int], float] = {}
    big: Check | None = None
    for setup in SETUPS:  # one cluster at a time: three of 128 nodes at once do not start here
        with LocalCluster(**base, **options[setup]) as cluster:
            for name in (f"{setup} plain", setup):
                for shape in sorted({1, nodes}):
                    check_step(cluster, name, shape)
            cases = [
                (name, shape)
                for shape in sorted({nodes, 1}, reverse=True)
                for name in (f"{setup} plain", setup)
            ]
            times: dict[tuple[str, int], list[float]] = {case: [] for case in cases}
            busy: dict[tuple[str, int], list[int]] = {case: [] for case in cases}
            waited = wait_quiet()
            print(
                f"... {setup} on {nodes} nodes: CPUs quiet after {waited:.0f} s", file=sys.stderr, flush=True
            )
            for turn in range(warmup + runs):
                shift = turn % len(cases)
                for name, shape in cases[shift:] + cases[:shift]:
                    argv = [f"-N{shape}", f"--ntasks-per-node={TASKS_PER_NODE}", "true"]
                    if not name.endswith("plain"):
                        argv.insert(0, f"--tf-dist={SPEC}")
                    wait_idle(cluster)
                    busy0 = cpu_ticks()[0]
                    elapsed = timed(cluster, *argv, timeout=600)
                    if turn >= warmup:
                        times[(name, shape)].append(elapsed)
                        busy[(name, shape)].append(cpu_ticks()[0] - busy0)
            medians.update({case: statistics.median(values) * 1000 for case, values in times.items()})
            cpu.update({case: statistics.mean(ticks) * 1000 / TICKS_PER_S for case, ticks in busy.items()})
            if big_tasks and setup == "A":
                try:
                    big = (big_plan(cluster, big_tasks), True)
                except (SystemExit, ClusterError) as exc:  # the timed figures are kept
                    big = (f"big step of {big_tasks} tasks in A failed: {exc}", False)
    return medians, cpu, big


def added(med: dict[tuple[str, int], float], setup: str, shape: int) -> float:
    return med[(setup, shape)] - med[(f"{setup} plain", shape)]


def report(results: dict[int, dict[tuple[str, int], float]]) -> list[Check]:
    """Print the rows; the checks on the largest cluster against the smallest."""
    sizes = sorted(results)
    small, large = sizes[0], sizes[-1]
    print(f"{'nodes':>5} {'set-up':>6} {'plain step':>11} {'with --tf-dist':>15} {'one node added':>21} "
          f"{'per node added':>21}")  # fmt: skip
    for size in sizes:
        med = results[size]
        for setup in ("A", "B"):
            one, per = added(med, setup, 1), added(med, setup, size) / size
            one_ratio = one / added(results[small], setup, 1)
            per_ratio = per / (added(results[small], setup, small) / small)
            print(f"{size:5d} {setup:>6} {med[(f'{setup} plain', size)]:8.0f} ms {med[(setup, size)]:12.0f} ms "
                  f"{one:8.1f} ms ({one_ratio:5.2f}x) {per:8.2f} ms ({per_ratio:5.2f}x)")  # fmt: skip
    print(f"(ratios against the {small}-node cluster's figure; one node = the 1-node step on that cluster)")
    checks: list[Check] = []
    for setup in ("A", "B"):
        one = added(results[large], setup, 1)
        checks.append((f"{setup}: one node's added time at {large} nodes {one:.1f} ms <= {ONE_NODE_MS:g} ms",
                       one <= ONE_NODE_MS))  # fmt: skip
        if large != small:
            per_large = added(results[large], setup, large) / large
            per_small = added(results[small], setup, small) / small
            checks.append((f"{setup}: per node at {large} nodes {per_large:.2f} ms <= {PER_NODE_GROWTH}x per node "
                           f"at {small} ({per_small:.2f} ms): {per_large / per_small:.2f}x",
                           per_large <= PER_NODE_GROWTH * per_small))  # fmt: skip
    return checks


def report_cpu(cpu: dict[int, dict[tuple[str, int], float]]) -> None:
    """Print the CPU time --tf-dist adds per node: the whole machine's busy time (all nodes
    share its CPUs), mean of the timed runs."""
    sizes = sorted(cpu)
    print("CPU time added per node (the machine's busy time in the N-node step with --tf-dist minus "
          "without, / N; mean of the timed runs):")  # fmt: skip
    for setup in ("A", "B"):
        per = {size: added(cpu[size], setup, size) / size for size in sizes}
        print(f"  {setup}: " + ", ".join(f"{size} nodes {per[size]:.1f} ms ({per[size] / per[sizes[0]]:.2f}x)"
                                       for size in sizes))  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="8,32,128", help="cluster sizes, comma-separated (1-200)")
    parser.add_argument("--runs", type=int, default=12, help="timed runs of every setting per size")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--big-tasks", type=int, default=16384,
                        help="tasks of the descriptor-path step on the largest cluster (0: none)")  # fmt: skip
    parser.add_argument("--plan-tasks", type=int, default=100_000,
                        help="tasks of the step planned, not launched, on the largest cluster (0: none)")  # fmt: skip
    parser.add_argument("--snapshot", action="store_true",
                        help="run the hook from a copy of git HEAD (not the working tree being edited)")  # fmt: skip
    args = parser.parse_args()
    missing = missing_requirements()
    if missing:
        print("cannot run: " + "; ".join(missing), file=sys.stderr)
        return 1
    sizes = sorted({int(n) for n in args.nodes.split(",")})
    started, load_before = time.monotonic(), os.getloadavg()
    results: dict[int, dict[tuple[str, int], float]] = {}
    cpu: dict[int, dict[tuple[str, int], float]] = {}
    bigs: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="tfslurm-bench-scale-") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        plugin, wrapper = build(work, args.snapshot)
        for size in sizes:
            print(f"... {size} nodes (load average {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
            big = args.big_tasks if size == sizes[-1] else 0
            results[size], cpu[size], outcome = measure_size(
                plugin, wrapper, size, args.runs, args.warmup, big
            )
            bigs += [outcome] if outcome else []
        if args.plan_tasks:
            bigs.append(planned_step(wrapper, sizes[-1], args.plan_tasks))
        counted = instructions_check(wrapper, sizes[0], sizes[-1]) if len(sizes) > 1 else ("", None)
    print(f"srun -N<n> --ntasks-per-node={TASKS_PER_NODE} true, plain and --tf-dist={SPEC}: median of "
          f"{args.runs} interleaved runs each; {os.cpu_count()} CPUs, load average {load_before[0]:.1f} -> "
          f"{os.getloadavg()[0]:.1f}, {time.monotonic() - started:.0f} s; TF_CONFIG checked in every task")  # fmt: skip
    checks = report(results)
    report_cpu(cpu)
    for line, _ in bigs:
        print(line)
    if counted[0]:
        print(counted[0])
    checks += [counted[1]] if counted[1] else []
    checks += [(line.split(":")[0] + " checked", ok) for line, ok in bigs]
    return 0 if print_checks(checks) else 3


if __name__ == "__main__":
    sys.exit(main())
