"""Benchmark: plan a 100,000-task step from its Slurm variables (budget: 100 ms).

Times what one task does at start-up: read the environment (Step), compute and verify the
rank -> node map (layout), build the plan (jobs, ports, GPUs) and write its own TF_CONFIG
or descriptor. Prints the median of several runs, its ratio to the 100 ms budget, and,
with ``--tf``, the ratio to TF's own SlurmClusterResolver on the same step (constructor +
``cluster_spec()``; TF is imported first, outside the timing).

    python bench/plan.py [--tasks 100000] [--per-node 8] [--repeat 7] [--tf]

``bench/all.py`` takes :func:`resolver_rows` (the resolvers at 1k, 10k and 100k tasks)
into its table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/measure.py and friends
from measure import Row

BUDGET_MS = 100.0


def step_env(tasks: int, per_node: int, rank: int) -> dict[str, str]:
    nodes = -(-tasks // per_node)
    counts = (
        f"{per_node}(x{nodes})" if tasks % per_node == 0 else f"{per_node}(x{nodes - 1}),{tasks % per_node}"
    )
    node = rank // per_node
    return {
        "SLURM_JOB_ID": "123456",
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(rank % per_node),
        "SLURM_NODEID": str(node),
        "SLURMD_NODENAME": f"nid{node:06d}",
        "SLURM_GTIDS": ",".join(
            str(node * per_node + i) for i in range(min(per_node, tasks - node * per_node))
        ),
        "SLURM_STEP_NODELIST": f"nid[{0:06d}-{nodes - 1:06d}]",
        "SLURM_STEP_TASKS_PER_NODE": counts,
        "SLURM_STEP_NUM_TASKS": str(tasks),
        "SLURM_STEP_NUM_NODES": str(nodes),
        "SLURM_DISTRIBUTION": "block",
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(per_node)),
        "SLURM_GPUS_ON_NODE": str(per_node),
        "SLURM_STEP_GPUS": ",".join(str(i) for i in range(per_node)),
    }


def time_tfslurm(env: dict[str, str]) -> tuple[float, float, int]:
    """(seconds to the exported variables, seconds to the full TF_CONFIG, bytes exported)."""
    from tfslurm.plan import plan_for
    from tfslurm.step import Step

    start = time.perf_counter()
    plan = plan_for(Step.from_environ(env), "chief:1,worker:*")
    exported = plan.task_env()
    exported_at = time.perf_counter()
    plan.tf_config()  # what a Python process builds in-process from the descriptor
    done = time.perf_counter()
    return exported_at - start, done - start, sum(len(v) for v in exported.values())


def time_node_hook(env: dict[str, str]) -> tuple[float, float]:
    """(seconds for one task's hook output, seconds for ``prolog --node``: every task of
    the node), timed back to back on the same step."""
    import io

    from tfslurm import prolog

    hooked = {**env, "TFSLURM_TF_DIST": "chief:1,worker:*"}
    start = time.perf_counter()
    prolog.main(hooked, io.StringIO())
    one = time.perf_counter() - start
    start = time.perf_counter()
    prolog.node_output(hooked)
    return one, time.perf_counter() - start


def time_resolver(env: dict[str, str]) -> float:
    """tfslurm's SlurmClusterResolver, constructor + ``cluster_spec()`` (TF's ClusterSpec):
    the like-for-like figure against :func:`time_tf`."""
    from tfslurm import SlurmClusterResolver

    start = time.perf_counter()
    SlurmClusterResolver(env=dict(env)).cluster_spec()  # it narrows CUDA_VISIBLE_DEVICES in env
    return time.perf_counter() - start


def time_tf(env: dict[str, str]) -> float:
    import tensorflow as tf

    SlurmClusterResolver = tf.distribute.cluster_resolver.SlurmClusterResolver

    saved = dict(os.environ)
    os.environ.update(env)
    try:
        start = time.perf_counter()
        resolver = SlurmClusterResolver(
            port_base=8888, gpus_per_node=len(env["CUDA_VISIBLE_DEVICES"].split(","))
        )
        resolver.cluster_spec()
        return time.perf_counter() - start
    finally:
        os.environ.clear()
        os.environ.update(saved)


def compare_tf(env: dict[str, str], repeat: int) -> tuple[float, float]:
    """Median ms of TF's resolver and tfslurm's on ``env``, timed in turns, the first of
    each pair alternating (so that load changes hit both alike), after a warm-up of each;
    TF is imported outside the timing."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow  # noqa: F401

    time_tf(env)  # warm-up
    time_resolver(env)
    tf, ours = [], []
    for turn in range(max(5, repeat)):
        if turn % 2:
            ours.append(time_resolver(env) * 1000)
        tf.append(time_tf(env) * 1000)
        if not turn % 2:
            ours.append(time_resolver(env) * 1000)
    return statistics.median(tf), statistics.median(ours)


def resolver_rows(tasks: list[int], per_node: int, repeat: int) -> list[Row]:
    """One row per step size: tfslurm's resolver against TF's (must be at least as fast)."""
    rows = []
    for count in tasks:
        tf_ms, ours_ms = compare_tf(step_env(count, per_node, rank=count // 2 + 1), repeat)
        rows.append(
            Row(
                f"resolver init + cluster_spec, {count // 1000}k tasks",
                ours_ms / 1000,
                {"TF resolver": tf_ms / 1000},
                least={"TF resolver": 1.0},
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--per-node", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--tf", action="store_true", help="also time TF's SlurmClusterResolver")
    args = parser.parse_args()

    env = step_env(args.tasks, args.per_node, rank=args.tasks // 2 + 1)
    time_tfslurm(env)  # warm-up: imports
    runs, full_runs = [], []
    size = 0
    for _ in range(args.repeat):
        elapsed, full, size = time_tfslurm(env)
        runs.append(elapsed * 1000)
        full_runs.append(full * 1000)
    median, full_median = statistics.median(runs), statistics.median(full_runs)
    print(
        f"tfslurm: {args.tasks} tasks on {-(-args.tasks // args.per_node)} nodes planned "
        f"(env -> layout -> plan -> exported variables, {size} bytes) in median {median:.1f} ms "
        f"(min {min(runs):.1f}, max {max(runs):.1f}; {args.repeat} runs)"
    )
    print(f"  ... plus the full TF_CONFIG JSON in-process: median {full_median:.1f} ms")
    print(
        f"ratio to the {BUDGET_MS:.0f} ms budget: {median / BUDGET_MS:.2f} (with TF_CONFIG: {full_median / BUDGET_MS:.2f})"
    )
    node_env = step_env(args.tasks, args.per_node, rank=0)
    time_node_hook(node_env)  # warm-up
    pairs = [time_node_hook(node_env) for _ in range(args.repeat)]
    one_ms = statistics.median(p[0] for p in pairs) * 1000
    node_ms = statistics.median(p[1] for p in pairs) * 1000
    print(
        f"prolog --node ({args.per_node} tasks on the node): median {node_ms:.1f} ms against "
        f"{one_ms:.1f} ms for one task's hook; ratio {node_ms / one_ms:.2f} (target <= 1.5)"
    )
    if args.tf:
        tf_median, ours_median = compare_tf(env, args.repeat)
        print(f"TF SlurmClusterResolver (init + cluster_spec): median {tf_median:.2f} ms")
        print(
            f"tfslurm SlurmClusterResolver (init + cluster_spec): median {ours_median:.2f} ms; "
            f"ratio TF / tfslurm {tf_median / ours_median:.2f} (> 1: tfslurm is faster)"
        )
        print(f"ratio tfslurm TF_CONFIG text / TF ClusterSpec: {full_median / tf_median:.2f}")


if __name__ == "__main__":
    main()
