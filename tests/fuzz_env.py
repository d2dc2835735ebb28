"""Fuzz target: hostile task environments through ``Step.from_environ`` and ``plan_for``.

Each input starts from a real task environment recorded on Slurm 22.05, 24.11 or 26.05
(``tests/data/observed``) or from an empty one, then sets, blanks or deletes the variables
tfslurm reads, with values chosen to break parsers: other scripts' digits, signs and
blanks, numbers past 2**64, non-UTF-8 bytes, newlines, brackets, huge lists, names of
other nodes. Invariants, for every input:

* the only exceptions are ``TfslurmError`` subclasses (``ValueError``), never a traceback;
* every error message is one line of at most ``MAX_MESSAGE`` characters;
* linear time: no input takes longer than ``MAX_SECONDS`` plus ``SECONDS_PER_TASK`` for
  each task its ``SLURM_STEP_TASKS_PER_NODE`` declares, in CPU time (the work it causes;
  wall time on a shared machine also counts other processes' stalls), nor
  ``MAX_WALL_SECONDS`` more in wall time (a hang: waiting uses no CPU); the checks' own
  walk over the plan is not counted;
* a plan that is made is self-consistent: every rank once, no two tasks of a node on one
  port, and this task's own rank is where Slurm says it runs.

The suite runs it briefly (``tests/test_fuzz_env.py``, a fixed number of inputs); at length:

    PYTHONPATH=. .venv/bin/python tests/fuzz_env.py --inputs 100000

which prints inputs run, errors by class, the slowest input and peak RSS.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

import observed
from tfslurm.errors import TfslurmError
from tfslurm.plan import Plan, PlanOptions, plan_for
from tfslurm.step import Step

MAX_MESSAGE = 400
MAX_SECONDS = 1.0
SECONDS_PER_TASK = 2e-6  # twice the rate of a 100,000-task plan (about 0.1 s)
MAX_WALL_SECONDS = 10.0
FREEZE_EVERY = 1000  # inputs between two collect-and-freeze steps (untimed)

# The variables tfslurm reads (Step's fields, the GPU and port variables, its own settings).
VARIABLES = (
    "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
    "SLURMD_NODENAME", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NUM_NODES", "SLURM_DISTRIBUTION",
    "SLURM_DIST_PLANESIZE", "SLURM_HET_SIZE", "SLURM_HOSTFILE", "SLURM_ARBITRARY_NODELIST",
    "SLURM_GTIDS", "SLURM_STEP_RESV_PORTS", "SLURM_RESTART_COUNT", "SLURM_GPUS_ON_NODE",
    "SLURM_STEP_GPUS", "SLURMD_TRES_BIND", "SLURM_GPUS_PER_TASK", "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "TFSLURM_TF_DIST", "TFSLURM_PORT_BASE",
    "TFSLURM_HOST_TEMPLATE", "TFSLURM_ASSIGNED_GPUS", "SLURM_NODELIST_HET_GROUP_0",
    "SLURM_NODELIST_HET_GROUP_1", "SLURM_TASKS_PER_NODE_HET_GROUP_0",
)  # fmt: skip

HOSTILE = (
    "", " ", "0", "-1", "-5", "+1", "1 2", "²", "٣", "1e400", "18446744073709551616",
    "9" * 30, "n\udcff1", "n\n1", "n[1-2", "n[1-3]]", "n[2-1]", "n[1-1000000]", "n[0-9]x[0-9]",
    "0,1", "0,0", "1(x4)", "2(x1000000)", "0(x2)", ",", "n1,n1", "node[1-4]", "node9",
    "plane=0", "plane=²", "cyclic:cyclic", "arbitrary", "block", "gpu:per_task:0",
    "gres/gpu:per_task:3", "20000-19999", "20000-20003", "1-65536", "worker:*",
    "ps:1,worker:*", "chief:0", "Worker:1", "{node}", "{node}{node}", "{x}", "/nonexistent",
    "/dev/zero", "GPU-\x00", "\x00", "a" * 5000, ",".join(["0"] * 3000),
)  # fmt: skip


def _bases() -> list[dict[str, str]]:
    bases: list[dict[str, str]] = [{}]
    for path in observed.all_paths(observed.VERSIONS):
        fixture = observed.load(path)
        for tasks in fixture.steps.values():
            bases.extend({k: v for k, v in task.env.items() if k != "SLURM_HOSTFILE"} for task in tasks[:2])
    return bases


BASES = _bases()

values = st.one_of(
    st.sampled_from(HOSTILE),
    st.integers(-3, 2**70).map(str),
    st.text(min_size=0, max_size=40),
    st.text(alphabet="n0123456789[]-,:x()* \n", max_size=40),
)
mutation = st.tuples(st.sampled_from(VARIABLES), st.one_of(st.none(), values))
environments = st.tuples(st.integers(0, len(BASES) - 1), st.lists(mutation, min_size=1, max_size=6)).map(
    lambda pair: _apply(BASES[pair[0]], pair[1])
)


def _apply(base: dict[str, str], changes: list[tuple[str, str | None]]) -> dict[str, str]:
    env = dict(base)
    for name, value in changes:
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def check(env: dict[str, str]) -> str:
    """Run one input; return "ok" or the error class's name. AssertionError on a violation."""
    started, cpu_started = time.perf_counter(), time.process_time()
    plan: Plan | None = None
    try:
        step = Step.from_environ(env)
        plan = plan_for(step, options=PlanOptions(assign=True))
        plan.tf_config() if plan.rank is not None else plan.cluster.cluster_spec()
        outcome = "ok"
    except TfslurmError as exc:
        message = str(exc)
        assert "\n" not in message and "\r" not in message, f"multi-line message: {message!r}"
        assert len(message) <= MAX_MESSAGE, f"{len(message)}-character message: {message[:200]!r}"
        outcome = type(exc).__name__
    cpu, wall = time.process_time() - cpu_started, time.perf_counter() - started
    limit = MAX_SECONDS + SECONDS_PER_TASK * declared_tasks(env)
    assert cpu < limit, f"over {limit:.2f} s of CPU time ({cpu:.2f} s)"
    assert wall < limit + MAX_WALL_SECONDS, (
        f"over {limit + MAX_WALL_SECONDS:.2f} s of wall time ({wall:.2f} s)"
    )
    if plan is not None:
        _check_plan(plan, step)
    return outcome


def declared_tasks(env: dict[str, str]) -> int:
    """The tasks SLURM_STEP_TASKS_PER_NODE adds up to (0 if it is not a count list)."""
    from tfslurm import hostlist
    from tfslurm.layout import MAX_TASKS

    try:
        return min(sum(hostlist.expand_counts(env.get("SLURM_STEP_TASKS_PER_NODE", ""))), MAX_TASKS)
    except (TfslurmError, ValueError):
        return 0


def _check_plan(plan: Plan, step: Step) -> None:
    assert all(0 <= node < len(plan.cluster.nodes) for node in plan.cluster.rank_node)
    per_node: dict[int, list[int]] = {}
    for rank, node in enumerate(plan.cluster.rank_node):
        per_node.setdefault(node, []).append(plan.cluster.rank_local[rank])
    for locals_ in per_node.values():  # local ids 0..n-1 on every node: every rank once
        assert sorted(locals_) == list(range(len(locals_))), "local ids are not 0..n-1"
    addresses = plan.cluster.addresses
    assert len(set(addresses)) == len(addresses), "two tasks share host:port"
    if plan.rank is not None and step.node_name is not None:
        assert plan.cluster.nodes[plan.cluster.rank_node[plan.rank]] == step.node_name, (
            "own rank on another node"
        )


def run(inputs: int, seed: int | None, report: Callable[[str], None]) -> Counter[str]:
    outcomes: Counter[str] = Counter()
    slowest = [0.0, ""]

    @settings(
        max_examples=inputs,
        deadline=None,
        database=None,
        derandomize=seed is not None,
        suppress_health_check=list(HealthCheck),
    )
    @given(environments)
    def one(env: dict[str, str]) -> None:
        if sum(outcomes.values()) % FREEZE_EVERY == 0:
            # What the fuzzer itself keeps (hypothesis's data) is collected and then moved
            # out of the collector's reach, so that a full collection over it is not timed
            # as an input's (that way a 0.3 ms input can take 1.5 s of CPU time). Freezing
            # before every input would freeze the garbage of earlier ones too (7.4 GiB peak
            # RSS), hence every FREEZE_EVERY inputs.
            gc.collect()
            gc.freeze()
        started = time.perf_counter()
        try:
            outcomes[check(env)] += 1
        except Exception as exc:  # a violation: counted by kind, one example kept
            kind = f"VIOLATION {type(exc).__name__}: {str(exc)[:60]}"
            outcomes[kind] += 1
            if outcomes[kind] == 1:
                shown = {k: v[:300] for k, v in env.items() if k in VARIABLES}
                report(f"{kind}\n    input (variables tfslurm reads): {shown!r}")
        elapsed = time.perf_counter() - started
        if elapsed > slowest[0]:
            slowest[:] = [elapsed, repr({k: v[:300] for k, v in env.items() if k in VARIABLES})]

    try:
        one()
    finally:
        gc.unfreeze()  # give what one() froze back to the collector
    violations = sum(n for kind, n in outcomes.items() if kind.startswith("VIOLATION"))
    report(
        f"{sum(outcomes.values())} inputs, {violations} violations: {dict(outcomes.most_common())}; slowest "
        f"{slowest[0] * 1000:.1f} ms ({slowest[1]}); peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=10000, help="how many environments (default 10000)")
    parser.add_argument("--seed", type=int, default=None, help="derandomize (repeatable run)")
    args = parser.parse_args()
    os.environ.pop("TFSLURM_TF_DIST", None)
    run(args.inputs, args.seed, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
