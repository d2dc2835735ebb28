"""Benchmark: the full rank -> node map of huge steps, and TF's resolver on the same input.

    python bench/layout.py [--repeat N] [--no-tf]

For each shape it times what a task does at start-up — ``Step.from_environ`` +
``layout_for`` (expand, compute, verify this task's own entry) + ``rank_to_node`` — and
prints the median CPU and wall ms. Target: under 100 ms for 100k tasks over 10k nodes. When
tensorflow is importable it then times ``SlurmClusterResolver.cluster_spec()`` (in a
subprocess, after TF is imported) against tfslurm building the same ``host:port`` list,
on a 40k-task step, and prints the ratio. ``bench/all.py`` takes :func:`rows` into its table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from tfslurm import hostlist
from tfslurm.layout import Layout, arbitrary_layout, block_layout, cyclic_layout, layout_for, plane_layout
from tfslurm.step import Step

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/measure.py and friends
sys.path.insert(1, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from measure import Check, Row

from stepenv import task_env


def median_ms(func: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall and CPU (this process) milliseconds; CPU time is what a busy machine
    does not inflate, so it is what the 100 ms target is judged on."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        func()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall) * 1000, statistics.median(cpu) * 1000


def shapes(tmp: str) -> list[tuple[str, dict[str, str]]]:
    nodes = [f"nid{i:05d}" for i in range(10_000)]
    even = [10] * 10_000
    packed = [16 if i % 3 == 0 else 7 for i in range(10_000)]  # uneven, like a packed allocation
    scale = 100_000 / sum(packed)
    packed = [max(1, round(c * scale)) for c in packed]
    packed[-1] += 100_000 - sum(packed)
    last = 99_999
    out = [
        ("block (no -m), 10 per node", task_env(block_layout(nodes, even), last)),
        (
            "block, packed 16/7 per node",
            task_env(block_layout(nodes, packed), last, SLURM_DISTRIBUTION="block"),
        ),
        ("cyclic, 10 per node", task_env(cyclic_layout(nodes, even), last, SLURM_DISTRIBUTION="cyclic")),
        (
            "plane=4, 10 per node",
            task_env(
                plane_layout(nodes, even, 4), last, SLURM_DISTRIBUTION="plane", SLURM_DIST_PLANESIZE="4"
            ),
        ),
    ]
    hosts = [nodes[(r * 7919) % 10_000] for r in range(100_000)]  # every node 10 times, shuffled
    hostfile = os.path.join(tmp, "hostfile")
    with open(hostfile, "w") as handle:
        handle.write("\n".join(hosts) + "\n")
    out.append(
        (
            "arbitrary, 100k-line SLURM_HOSTFILE",
            task_env(
                arbitrary_layout(nodes, hosts), last, SLURM_DISTRIBUTION="arbitrary", SLURM_HOSTFILE=hostfile
            ),
        )
    )
    half = 5_000
    het_truth = (
        block_layout(nodes[half:], [10] * half).rank_to_node
        + block_layout(nodes[:half], [10] * half).rank_to_node
    )  # component 0 on the upper half
    het = arbitrary_layout(nodes, het_truth)
    out.append(
        (
            "het step, 2 components x 50k",
            task_env(
                het,
                last,
                nodes[half:] + nodes[:half],
                SLURM_HET_SIZE="2",
                SLURM_JOB_NODELIST_PACK_GROUP_0=hostlist.compress(nodes[half:]),
                SLURM_JOB_NODELIST_PACK_GROUP_1=hostlist.compress(nodes[:half]),
            ),
        )
    )
    return out


TF_CHILD = r"""
import json, os, statistics, sys, time
env = json.loads(sys.stdin.read())
os.environ.update(env)
from tensorflow.python.distribute.cluster_resolver.slurm_cluster_resolver import SlurmClusterResolver
times = []
for _ in range(int(sys.argv[1])):
    t = time.process_time()
    r = SlurmClusterResolver(port_base=8888, gpus_per_node=10, gpus_per_task=1, auto_set_gpu=False)
    spec = r.cluster_spec().as_dict()
    times.append(time.process_time() - t)
print(json.dumps({"ms": statistics.median(times) * 1000, "worker": spec["worker"]}))
"""


def compare_tf(repeat: int) -> tuple[float, float, bool] | str:
    """(TF's median CPU ms, tfslurm's, whether the worker lists are equal) on a 40k-task
    step, or why TF failed. TF runs in a subprocess, timed after its import."""
    nodes = [f"nid{i:05d}" for i in range(4_000)]  # names sort like node order: TF is right here
    layout = block_layout(nodes, [10] * 4_000)
    env = task_env(layout, 39_999)

    def ours() -> list[str]:
        mine = layout_for(Step.from_environ(env))
        names = mine.rank_to_node
        return [f"{n}:{8888 + local}" for n, local in zip(names, mine.rank_local, strict=True)]

    ours_ms = median_ms(ours, repeat)[1]
    child = subprocess.run(
        [sys.executable, "-c", TF_CHILD, str(repeat)],
        input=json.dumps(env),
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        | {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""},
    )
    if child.returncode != 0:
        return f"TF resolver failed: {child.stderr.strip().splitlines()[-1:]}"
    tf = json.loads(child.stdout.strip().splitlines()[-1])
    return tf["ms"], ours_ms, tf["worker"] == ours()


def bench_tf(repeat: int) -> None:
    compared = compare_tf(repeat)
    if isinstance(compared, str):
        print(compared)
        return
    tf_ms, ours_ms, same = compared
    print("\n40k tasks (nid[00000-03999], 10 per node, block), worker host:port list:")
    print(f"  TF SlurmClusterResolver() + cluster_spec(): cpu {tf_ms:8.1f} ms")
    print(f"  tfslurm Step + layout_for + host:port list:  cpu {ours_ms:8.1f} ms")
    print(f"  ratio TF / tfslurm: {tf_ms / ours_ms:.1f}x   (same worker list: {same})")


def shape_times(repeat: int) -> list[tuple[str, float, float, Layout]]:
    """Per shape: name, median wall and CPU ms of a task's start-up, and the layout."""
    out = []
    with tempfile.TemporaryDirectory(prefix="tfslurm-bench-") as tmp:
        for name, env in shapes(tmp):

            def run(env: dict[str, str] = env) -> Layout:
                layout = layout_for(Step.from_environ(env))
                layout.rank_to_node  # noqa: B018 - the list every consumer builds
                return layout

            layout = run()
            wall, cpu = median_ms(run, repeat)
            out.append((name, wall, cpu, layout))
    return out


def rows(repeat: int, tf: bool = True) -> tuple[list[Row], list[Check]]:
    """For bench/all.py: one row per shape (CPU time; no anchor, not checked: its target
    is the absolute 100 ms that this script prints), and the 40k-task row against TF."""
    out = [Row(f"layout 100k tasks, {name} (cpu)", cpu / 1000) for name, _, cpu, _ in shape_times(repeat)]
    checks: list[Check] = []
    if tf and importlib.util.find_spec("tensorflow") is not None:
        compared = compare_tf(repeat)
        if isinstance(compared, str):
            checks.append((compared, False))
        else:
            tf_ms, ours_ms, same = compared
            out.append(
                Row("layout 40k tasks, host:port list (cpu)", ours_ms / 1000, {"TF resolver": tf_ms / 1000},
                    least={"TF resolver": 1.0})
            )  # fmt: skip
            checks.append(("layout 40k tasks: the same worker list as TF's", same))
    return out, checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-tf", action="store_true")
    args = parser.parse_args()
    print(
        f"full rank->node map, 100,000 tasks over 10,000 nodes, task 99999's view (median of {args.repeat}):"
    )
    for name, wall, cpu, layout in shape_times(args.repeat):
        flag = "ok" if cpu < 100 else "OVER 100 ms"
        print(
            f"  {name:38s} cpu {cpu:6.1f} ms  wall {wall:6.1f} ms  "
            f"[{layout.method.split(' (')[0]}, {layout.num_tasks} tasks] {flag}"
        )
    if args.no_tf:
        return 0
    if importlib.util.find_spec("tensorflow") is None:
        print("\ntensorflow not importable: TF comparison skipped")
        return 0
    bench_tf(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
