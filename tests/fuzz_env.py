"""Fuzz target: hostile task environments through tfslurm's readers and its messages.

Each input starts from a real task environment recorded on Slurm 22.05, 24.11 or 26.05
(``tests/data/observed``) or from an empty one, then sets, blanks or deletes the variables
tfslurm reads, with values chosen to break parsers: other scripts' digits, signs and
blanks, numbers past 2**64 and past the 4,300 digits ``int()`` converts (in variables and
in TF_CONFIG's and the descriptor's numbers), control characters (C0, DEL, C1) set into
plausible values, non-UTF-8 bytes, brackets, huge lists, names of other nodes. Each input
goes through ``Step.from_environ`` and ``plan_for``, every ``Settings`` accessor, TF_CONFIG
(``role_from_tf_config``), the TaskProlog hook (``prolog.main``) and ``tfslurm env`` (in
this process). Invariants, for every input:

* the only exceptions are ``TfslurmError`` subclasses (``ValueError``), never a traceback;
* every error message is one printable line (no control character, no line break) of at
  most ``MAX_MESSAGE`` characters; every warning is one printable line of at most
  ``MAX_LINE_BYTES`` bytes;
* the hook's ``print`` lines and the command's stderr lines are printable and at most
  ``MAX_LINE_BYTES`` bytes; a failure prints exactly one error line, after any warnings;
* linear time: no input takes longer than ``MAX_SECONDS`` plus ``SECONDS_PER_TASK`` for
  each task its ``SLURM_STEP_TASKS_PER_NODE`` declares, in CPU time (the work it causes;
  wall time on a shared machine also counts other processes' stalls), nor
  ``MAX_WALL_SECONDS`` more in wall time (a hang: waiting uses no CPU), for the step and
  its plan; the checks' own walk over the plan is not counted;
* a plan that is made is self-consistent: every rank once, no two tasks of a node on one
  port, and this task's own rank is where Slurm says it runs.

The suite runs it briefly (``tests/test_fuzz_env.py``, a fixed number of inputs); at length:

    PYTHONPATH=. .venv/bin/python tests/fuzz_env.py --inputs 100000

which prints inputs run, errors by class, the slowest input and peak RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import resource
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as seeded
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

import observed
from tfslurm import cli, prolog
from tfslurm.errors import TfslurmError
from tfslurm.plan import Plan, PlanOptions, plan_for
from tfslurm.runtime.roles import role_from_tf_config
from tfslurm.settings import Settings
from tfslurm.step import Step

MAX_MESSAGE = 400
MAX_LINE_BYTES = 1024
MAX_SECONDS = 1.0
SECONDS_PER_TASK = 2e-6  # twice the rate of a 100,000-task plan (about 0.1 s)
MAX_WALL_SECONDS = 10.0
FREEZE_EVERY = 1000  # inputs between two collect-and-freeze steps (untimed)

# The variables tfslurm reads (Step's fields, the GPU and port variables, its own settings;
# not TFSLURM_IFACE, which resolves host names).
VARIABLES = (
    "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
    "SLURMD_NODENAME", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NUM_NODES", "SLURM_DISTRIBUTION",
    "SLURM_DIST_PLANESIZE", "SLURM_HET_SIZE", "SLURM_HOSTFILE", "SLURM_ARBITRARY_NODELIST",
    "SLURM_GTIDS", "SLURM_STEP_RESV_PORTS", "SLURM_RESTART_COUNT", "SLURM_GPUS_ON_NODE",
    "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURMD_TRES_BIND", "SLURM_GPUS_PER_TASK",
    "SLURM_TRES_PER_TASK", "SLURM_GPUS", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK", "TFSLURM_TF_DIST", "TFSLURM_PORT_BASE", "TFSLURM_HOST_TEMPLATE",
    "TFSLURM_ASSIGNED_GPUS", "TFSLURM_UNEVEN_GPUS", "TFSLURM_FOR", "TFSLURM_DESCRIPTOR",
    "TFSLURM_PREEMPT_SIGNAL", "TFSLURM_STOP_SIGNALS", "TFSLURM_STOP_GRACE",
    "TFSLURM_MAX_RESTARTS", "TFSLURM_PEER_TIMEOUT", "TF_CONFIG",
    "SLURM_NODELIST_HET_GROUP_0", "SLURM_NODELIST_HET_GROUP_1",
    "SLURM_TASKS_PER_NODE_HET_GROUP_0", "SLURM_JOB_ID_HET_GROUP_0",
)  # fmt: skip

HOSTILE = (
    "", " ", "0", "-1", "-5", "+1", "1 2", "²", "٣", "1e400", "18446744073709551616",
    "9" * 30, "n\udcff1", "n\n1", "n[1-2", "n[1-3]]", "n[2-1]", "n[1-1000000]", "n[0-9]x[0-9]",
    "0,1", "0,0", "1(x4)", "2(x1000000)", "0(x2)", ",", "n1,n1", "node[1-4]", "node9",
    "plane=0", "plane=²", "cyclic:cyclic", "arbitrary", "block", "gpu:per_task:0",
    "gres/gpu:per_task:3", "20000-19999", "20000-20003", "1-65536", "worker:*",
    "ps:1,worker:*", "chief:0", "Worker:1", "{node}", "{node}{node}", "{x}", "/nonexistent",
    "/dev/zero", "GPU-\x00", "\x00", "a" * 5000, ",".join(["0"] * 3000),
    "9" * 4301, "1" * 5000, "0" * 5000 + "1", "gpu:per_task:" + "9" * 5000,
    "n[1-" + "9" * 5000 + "]", "1(x" + "9" * 5000 + ")", "1" * 5000 + "-2", "worker:" + "9" * 5000,
)  # fmt: skip


def _bases() -> list[dict[str, str]]:
    bases: list[dict[str, str]] = [{}]
    for path in observed.all_paths(observed.VERSIONS):
        fixture = observed.load(path)
        for tasks in fixture.steps.values():
            bases.extend({k: v for k, v in task.env.items() if k != "SLURM_HOSTFILE"} for task in tasks[:2])
    return bases


BASES = _bases()

# C0 (0x00-0x1f), DEL and C1 (0x80-0x9f): none may reach a message or a warning raw.
CONTROLS = "".join(map(chr, (*range(0x20), 0x7F, *range(0x80, 0xA0))))
RAW_CONTROLS = frozenset(CONTROLS)

# Values a variable plausibly holds, to set control characters into.
PLAUSIBLE = (
    "0", "1", "3", "12345", "n1", "node1", "n[1-2]", "node[1-4]", "2", "2(x2)", "1,1", "0,1",
    "0,1,2,3", "block", "cyclic", "plane=2", "arbitrary", "gpu:per_task:1", "gres/gpu:2",
    "worker:*", "ps:1,worker:*", "chief:1,worker:*", "USR1", "SIGTERM", "TERM,USR2", "30",
    "2.5", "warn", "error", "tf,jax", "{node}-ib", "20000-20003", "d23456",
)  # fmt: skip

with_control = st.builds(
    lambda value, control, at: value[:at] + control + value[at:],
    st.sampled_from(PLAUSIBLE),
    st.text(alphabet=CONTROLS, min_size=1, max_size=3),
    st.integers(0, 12),
)
long_digits = st.builds(
    lambda zeros, digit, count: "0" * zeros + digit * count,
    st.sampled_from((0, 0, 1, 5000)),
    st.sampled_from("1579"),
    st.integers(4200, 6000),
)
numbers = st.one_of(
    long_digits, st.sampled_from(("0", "1", "-1", "1e400", "1.5", '"1"', "1" + "0" * 400 + ".0"))
)
names = st.one_of(with_control, st.sampled_from(("n1", "worker", "n\udcff1", "ps")))


TF_CONFIG_SHAPES = (
    '{"cluster":{"worker":["@H:2222"]},"task":{"type":"worker","index":@N}}',
    '{"cluster":{"worker":["n1:@N"]},"task":{"type":"worker","index":0}}',
    '{"cluster":{"worker":["n1:2222"]},"task":{"type":"worker","index":"@S"}}',
    '{"cluster":{"worker":{"@S":"n1:2222"}},"task":{"type":"worker","index":0}}',
    '{"cluster":{"@H":["n1:2222"]},"task":{"type":"@H","index":0}}',
    '{"cluster":{"worker":["@H"]},"task":{"type":"worker","index":0},"rpc_layer":"@H"}',
    '{"cluster":{"worker":["n1:2222"]},"task":{"type":"worker","index":0},"x":[@N]}',
    '{"cluster":{"chief":["n1:1"],"ps":["@H:@N"]},"task":{"type":"ps","index":0}}',
)


def _tf_config(shape: str, name: str, number: str) -> str:
    """A TF_CONFIG whose host, job or number is hostile (``@N``: ``number`` as raw JSON,
    maybe huge; ``@S``: the same in a string; ``@H``: ``name`` as a JSON string's body)."""
    body = json.dumps(name)[1:-1]
    return shape.replace("@H", body).replace("@N", number).replace("@S", number.strip('"'))


def _descriptor(shape: int, name: str, number: str) -> str:
    """A plan descriptor whose node, count, port or job count is hostile."""
    return (
        f"tfslurm1;nodes={name};tasks=1;map=block;ports=d23456;jobs=worker:1;host={{node}}",
        f"tfslurm1;nodes=n1;tasks={number};map=block;ports=d23456;jobs=worker:1;host={{node}}",
        f"tfslurm1;nodes=n1;tasks=1;map=block;ports=d{number};jobs=worker:1;host={{node}}",
        f"tfslurm1;nodes=n1;tasks=1;map=block;ports=r{number};jobs=worker:1;host={{node}}",
        f"tfslurm1;nodes=n1;tasks=1;map=block;ports=d23456;jobs=worker:{number};host={{node}}",
        f"tfslurm1;nodes=n1;tasks=1;map=runs:{number};ports=d23456;jobs=worker:1;host={{node}}",
        f"tfslurm1;nodes=n1;tasks=1;map=block;ports=d23456;jobs={name}:1;host={{node}}{name}",
    )[shape]


tf_configs = st.builds(_tf_config, st.sampled_from(TF_CONFIG_SHAPES), names, numbers)
descriptors = st.builds(_descriptor, st.integers(0, 6), names, numbers)

values = st.one_of(
    st.sampled_from(HOSTILE),
    st.integers(-3, 2**70).map(str),
    st.text(min_size=0, max_size=40),
    st.text(alphabet="n0123456789[]-,:x()* \n", max_size=40),
    with_control,
    st.text(alphabet=CONTROLS + "n0123456789[]-,:x", max_size=20),
    long_digits,
)
mutation = st.one_of(
    st.tuples(st.sampled_from(VARIABLES), st.one_of(st.none(), values)),
    st.tuples(st.just("TF_CONFIG"), tf_configs),
    st.tuples(st.just("TFSLURM_DESCRIPTOR"), descriptors),
)
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
    """Run one input; return "ok" or the error class's name (of the step and its plan).
    AssertionError on a violation."""
    started, cpu_started = time.perf_counter(), time.process_time()
    plan: Plan | None = None
    try:
        step = Step.from_environ(env)
        plan = plan_for(step, options=PlanOptions(assign=True))
        plan.tf_config() if plan.rank is not None else plan.cluster.cluster_spec()
        outcome = "ok"
    except TfslurmError as exc:
        check_message(exc)
        outcome = type(exc).__name__
    cpu, wall = time.process_time() - cpu_started, time.perf_counter() - started
    limit = MAX_SECONDS + SECONDS_PER_TASK * declared_tasks(env)
    assert cpu < limit, f"over {limit:.2f} s of CPU time ({cpu:.2f} s)"
    assert wall < limit + MAX_WALL_SECONDS, (
        f"over {limit + MAX_WALL_SECONDS:.2f} s of wall time ({wall:.2f} s)"
    )
    if plan is not None:
        _check_plan(plan, step)
        for line in plan.gpus.warnings if plan.gpus is not None else ():
            check_line(line)
    _check_settings(env)
    _check_tf_config(env)
    _check_hook(env)
    _check_command(env)
    return outcome


def check_message(exc: TfslurmError) -> None:
    """An error's message: one printable line of at most MAX_MESSAGE characters."""
    message = str(exc)
    assert "\n" not in message and "\r" not in message, f"multi-line message: {message!r}"
    assert len(message) <= MAX_MESSAGE, f"{len(message)}-character message: {message[:200]!r}"
    check_line(message)


def check_line(line: str) -> None:
    """A line shown to a person: no control character, printable, at most MAX_LINE_BYTES."""
    raw = RAW_CONTROLS.intersection(line)
    assert not raw, f"raw control character {sorted(raw)[0]!r} in {line[:200]!r}"
    assert line.isprintable(), f"unprintable line {line[:200]!r}"
    size = len(line.encode("utf-8", "surrogateescape"))
    assert size <= MAX_LINE_BYTES, f"{size}-byte line {line[:200]!r}"


def _check_settings(env: dict[str, str]) -> None:
    """Every accessor of a setting parsed on use: a value or a one-line error."""
    settings = Settings.from_environ(env)
    preempt = 10
    for accessor in (
        settings.port_base, settings.uneven_gpus, settings.peer_timeout, settings.preempt_signal,
        settings.max_restarts, settings.stop_grace, lambda: settings.stop_signals(preempt),
    ):  # fmt: skip
        try:
            accessor()
        except TfslurmError as exc:
            check_message(exc)


def _check_tf_config(env: dict[str, str]) -> None:
    """TF_CONFIG, as ``tfslurm run`` reads it first: a role or a one-line RoleError."""
    text = env.get("TF_CONFIG", "")
    if not text.strip():
        return
    try:
        role = role_from_tf_config(text)
    except TfslurmError as exc:
        check_message(exc)
        return
    address = role.address()
    role.describe()
    assert isinstance(address.port, int) and 0 < address.port < 65536


def _check_hook(env: dict[str, str]) -> None:
    """The TaskProlog hook's output: ``print`` lines printable and short, one error line
    (the last) exactly when it fails."""
    out = io.StringIO()
    status = prolog.main(env, out)
    prints = [line for line in out.getvalue().splitlines() if line.startswith("print ")]
    for line in prints:
        check_line(line)
    errors = [line for line in prints if line.startswith("print tfslurm prolog (")]
    if status == 0:
        assert not errors, f"status 0 with an error line: {errors[0][:200]!r}"
    else:
        assert len(errors) == 1 and prints[-1] == errors[0], f"status {status}, lines {prints!r}"[:400]


def _check_command(env: dict[str, str]) -> None:
    """``tfslurm env`` in this process: stderr is warning lines, then, when it fails (2),
    exactly one error line; every line printable and short."""
    if any("\0" in name or "\0" in value for name, value in env.items()):
        return  # no process environment holds a NUL byte
    stdout, stderr = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            status = cli.main(["env"])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    lines = stderr.getvalue().splitlines()
    assert stderr.getvalue().endswith("\n") or not lines, "stderr ends mid-line"
    for line in lines:
        check_line(line)
    errors = [line for line in lines if line.startswith("tfslurm env: error: ")]
    warnings = [line for line in lines if line.startswith("tfslurm: warning: ")]
    assert len(errors) + len(warnings) == len(lines), f"stray stderr line in {lines!r}"[:400]
    if status == 0:
        assert not errors, f"status 0 with an error line: {errors[0][:200]!r}"
    else:
        one_error = status == 2 and len(errors) == 1 and lines[-1] == errors[0]
        assert one_error, f"status {status}: {lines!r}"[:400]


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


def _where(exc: Exception) -> str:
    """`` at file:line`` of the innermost tfslurm frame of an unexpected exception."""
    if isinstance(exc, AssertionError):
        return ""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/tfslurm/" in f.filename]
    return f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""


def run(inputs: int, seed: int | None, report: Callable[[str], None]) -> Counter[str]:
    outcomes: Counter[str] = Counter()
    slowest = [0.0, ""]

    @settings(
        max_examples=inputs,
        deadline=None,
        database=None,
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
            kind = f"VIOLATION {type(exc).__name__}: {str(exc)[:60]}{_where(exc)}"
            outcomes[kind] += 1
            if outcomes[kind] == 1:
                shown = {k: v[:300] for k, v in env.items() if k in VARIABLES}
                report(f"{kind}\n    input (variables tfslurm reads): {shown!r}")
        elapsed = time.perf_counter() - started
        if elapsed > slowest[0]:
            slowest[:] = [elapsed, repr({k: v[:300] for k, v in env.items() if k in VARIABLES})]

    try:
        (one if seed is None else seeded(seed)(one))()  # a seed: the same inputs every run
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
    parser.add_argument(
        "--seed", type=int, default=None, help="a repeatable run: the same seed gives the same inputs"
    )
    args = parser.parse_args()
    os.environ.pop("TFSLURM_TF_DIST", None)
    run(args.inputs, args.seed, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
