"""``tfslurm run [options] -- PROGRAM [ARGS...]``: run a TF program as this task's role.

Under srun, every task runs ``tfslurm run -- python train.py``. By role:
chief/workers (MWMS) and the evaluator run the program; under ParameterServerStrategy the
chief runs it (the coordinator) while ps and worker tasks run a standard TF server and exit
0 soon after the chief finishes. A Python program (``python script.py``, ``python -m mod``,
``script.py``) runs inside this process, after the preemption handler and the missing-peer
watch are in place; any other command runs as a child process with TF_CONFIG set.
"""

from __future__ import annotations

import argparse
import os
import re
import runpy
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from tfslurm.runtime.roles import Role

_PYTHON_NAME = re.compile(r"^python[0-9.]*$")
_PYTHON_FLAGS_WITHOUT_VALUE = {"-u", "-B", "-E", "-s", "-S", "-I", "-O", "-OO", "-b", "-q"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--jobs",
        metavar="SPEC",
        default=None,
        help="jobs spec, e.g. chief:1,ps:1,worker:* (used only when neither "
        "TF_CONFIG nor TFSLURM_DESCRIPTOR is set; default TFSLURM_TF_DIST, "
        "else every task a worker)",
    )
    parser.add_argument(
        "--peer-timeout",
        metavar="SECONDS",
        type=float,
        default=None,
        help="give up with an error when a peer is not up after this long "
        "(default TFSLURM_PEER_TIMEOUT or 300)",
    )
    parser.add_argument(
        "--preempt-signal",
        metavar="SIG",
        default=None,
        help="signal that asks the program to checkpoint and stop (default TFSLURM_PREEMPT_SIGNAL or USR1)",
    )
    parser.add_argument(
        "--stop-signals",
        metavar="SIGS",
        default=None,
        help="comma list of signals that mean checkpoint and stop (default "
        "TFSLURM_STOP_SIGNALS or TERM; the preemption signal always counts): "
        "the program is told through the preemption signal and a run stopped "
        "early exits 85, never 0",
    )
    parser.add_argument(
        "--stop-grace",
        metavar="SECONDS",
        default=None,
        help="SIGKILL the program this long after a stop signal (default "
        "TFSLURM_STOP_GRACE, else never: Slurm's SIGKILL after GraceTime or "
        "KillWait ends it)",
    )
    parser.add_argument(
        "--max-restarts",
        metavar="N",
        default=None,
        help="refuse to start (exit 86, one line) once the job was restarted "
        "more than N times (SLURM_RESTART_COUNT; default TFSLURM_MAX_RESTARTS, "
        "else no cap)",
    )
    parser.add_argument(
        "--cap-check",
        action="store_true",
        help="only check --max-restarts and exit 0 (go on) or 86 with one "
        "line (the templates run this in the batch script, before srun)",
    )
    parser.add_argument(
        "--requeue-on-ps-failure",
        action="store_true",
        help="when a parameter server fails, the chief runs 'scontrol requeue' on its job before exiting 75",
    )
    parser.add_argument(
        "--show-plan",
        action="store_true",
        help="rank 0 prints the plan table (rank, job, host:port, GPUs) first",
    )
    parser.add_argument("program", nargs=argparse.REMAINDER, help="the program and its arguments, after --")


@dataclass(frozen=True)
class PythonProgram:
    """A Python program to run in this interpreter: a script path or a module name."""

    script: str | None
    module: str | None
    argv: list[str]


def parse_program(argv: list[str]) -> PythonProgram | None:
    """``python [-u] script.py ...``, ``python -m mod ...`` or ``script.py ...`` -> in-process;
    anything else (None) runs as a child process."""
    if not argv:
        return None
    first = argv[0]
    if first.endswith(".py"):
        return PythonProgram(first, None, argv[1:])
    if not (
        _PYTHON_NAME.match(os.path.basename(first))
        or os.path.realpath(first) == os.path.realpath(sys.executable)
    ):
        return None
    rest = argv[1:]
    while rest and rest[0] in _PYTHON_FLAGS_WITHOUT_VALUE:
        rest = rest[1:]
    if not rest:
        return None  # an interactive interpreter: leave it alone
    if rest[0] == "-m" and len(rest) >= 2:
        return PythonProgram(None, rest[1], rest[2:])
    if rest[0].startswith("-"):
        return None  # -c and friends: run as a child
    return PythonProgram(rest[0], None, rest[1:])


def _run_in_process(program: PythonProgram) -> int:
    from tfslurm.errors import TfslurmError

    if program.script is not None and not os.path.isfile(program.script):
        raise TfslurmError(f"program {program.script!r} does not exist")
    try:
        if program.script is not None:
            sys.argv = [program.script, *program.argv]
            sys.path.insert(0, os.path.dirname(os.path.abspath(program.script)))
            runpy.run_path(program.script, run_name="__main__")
        else:
            sys.argv = [program.module or "", *program.argv]
            sys.path.insert(0, os.getcwd())
            try:
                runpy.run_module(program.module or "", run_name="__main__", alter_sys=True)
            except ImportError as exc:
                if exc.name and (program.module or "").startswith(exc.name):
                    raise TfslurmError(f"module {program.module!r} not found") from None
                raise
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0


def _run_child(argv: list[str], forward: tuple[int, ...]) -> int:
    """Run a non-Python command as a child and pass ``forward`` on to it. Called with
    ``forward`` blocked: a signal that comes before the command has started is held, not
    lost (nor does it kill this process and orphan the command)."""
    from tfslurm.errors import TfslurmError
    from tfslurm.plan import TF_CONFIG_MAX_BYTES

    if len(os.environ.get("TF_CONFIG", "")) > TF_CONFIG_MAX_BYTES:
        raise TfslurmError(
            f"TF_CONFIG is {len(os.environ['TF_CONFIG'])} bytes, too large to pass to "
            f"{argv[0]!r}; run a Python program in-process (tfslurm run -- python prog.py) "
            "or read TFSLURM_DESCRIPTOR with tfslurm.SlurmClusterResolver"
        )
    from tfslurm.runtime.supervise import die_with_parent

    me = os.getpid()

    def start() -> None:  # in the command's process, before exec
        die_with_parent(me)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, forward)

    try:  # the command itself starts with the signals unblocked (this process has no threads)
        child = subprocess.Popen(argv, preexec_fn=start)
    except OSError as exc:
        raise TfslurmError(f"cannot start {argv[0]!r}: {exc.strerror}") from None

    def forward_signal(signum: int, frame: object) -> None:
        child.send_signal(signum)  # a no-op once the command has been reaped

    for signum in forward:
        signal.signal(signum, forward_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, forward)  # a signal held until now goes on
    rc = child.wait()
    return 128 - rc if rc < 0 else rc


def _ignore(signals: tuple[int, ...]) -> None:
    """Once the program is done: the first task to exit non-zero ends the step (srun
    --kill-on-bad-exit sends SIGTERM to the rest), and Python's shutdown puts the default
    action back for signals with Python handlers, so a task that already has its status
    would die of that SIGTERM (143) instead. SIG_IGN survives the shutdown."""
    for signum in signals:
        signal.signal(signum, signal.SIG_IGN)


def _plan_table(role: Role, jobs: str | None) -> str:
    """The step's plan table; from the cluster itself when TF_CONFIG came from elsewhere."""
    if role.plan_table:
        return role.plan_table
    try:
        from tfslurm.plan import plan_from_environ

        env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
        return plan_from_environ(env, jobs).table()
    except ValueError:  # TF_CONFIG without a Slurm step: show what TF_CONFIG says
        rows = [f"{'job':<10} {'index':>5}  address"]
        for job, addrs in role.cluster.cluster_spec().items():
            rows += [f"{job:<10} {i:>5}  {a}" for i, a in enumerate(addrs)]
        return "\n".join(rows)


def run(args: argparse.Namespace) -> int:
    from tfslurm.errors import TfslurmError
    from tfslurm.runtime import preemption
    from tfslurm.runtime.api import prepare, ps_failure_exit
    from tfslurm.runtime.peers import peer_timeout_from_env
    from tfslurm.runtime.roles import resolve_role

    argv = list(args.program)
    if argv and argv[0] == "--":
        argv = argv[1:]
    from tfslurm.runtime import stops
    from tfslurm.settings import Settings
    from tfslurm.step import is_rank_zero

    settings = Settings.from_environ()  # tfslurm's settings, read once for this process
    cap = stops.max_restarts(args.max_restarts, given=settings)
    grace = stops.stop_grace(args.stop_grace, given=settings)
    refused = stops.restart_cap_message(stops.restart_count(), cap)
    if refused:
        _ignore((signal.SIGTERM,))  # the other tasks' 86 ends the step: keep this status
        print(f"tfslurm run: error: {refused}", file=sys.stderr, flush=True)
        return stops.EXIT_RESTART_CAP
    if args.cap_check:
        return 0
    role = resolve_role(jobs=args.jobs, settings=settings)
    for line in role.gpu_warnings:
        print(line, file=sys.stderr, flush=True)
    timeout = peer_timeout_from_env(args.peer_timeout, settings)
    flag = preemption.install(args.preempt_signal, settings=settings)
    stop = (
        stops.stop_signals(args.stop_signals, flag.signum)
        if args.stop_signals is not None
        else settings.stop_signals(flag.signum)
    )
    requeue = args.requeue_on_ps_failure or settings.requeue_on_ps_failure
    if args.requeue_on_ps_failure:  # for tfslurm.run in the program (it reads its settings)
        os.environ["TFSLURM_REQUEUE_ON_PS_FAILURE"] = "1"
    if args.show_plan and is_rank_zero():
        print(_plan_table(role, args.jobs), flush=True)
    prepare(role)
    me = role.address()
    print(f"tfslurm run: {role.describe()} on {me.host}:{me.port}", file=sys.stderr, flush=True)
    if role.is_server:
        from tfslurm.runtime.servers import serve

        serve(role, peer_timeout=timeout, ignore_signals=tuple(n for n in stop if n != signal.SIGTERM))
    if not argv:
        raise TfslurmError(
            f"no program given for {role.job}:{role.index}: use tfslurm run -- python train.py"
        )
    program = parse_program(argv)
    forward = tuple(dict.fromkeys((signal.SIGTERM, signal.SIGINT, *stop)))
    sys.stdout.flush()
    sys.stderr.flush()
    # Fork before TensorFlow is imported (no threads yet): the child runs the program, this
    # process watches peers and signals (TF blocks the GIL while waiting for peers).
    # Signals stay blocked across the fork until the parent's forwarding handlers are in
    # place: a SIGTERM in that window would otherwise kill the parent and orphan the child.
    signal.pthread_sigmask(signal.SIG_BLOCK, forward)
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        from tfslurm.runtime.supervise import die_with_parent

        die_with_parent(parent)  # a SIGKILLed supervisor leaves no program behind
        os.setpgid(0, 0)  # a group of its own: the supervisor ends what is left of it
        os.environ["TFSLURM_WATCHED"] = "1"
        preemption.install(flag.signum, also=stop)  # SIGTERM too, where TF leaves it to us
        with ps_failure_exit(role, requeue):
            if program is None:
                return _run_child(argv, forward)  # unblocks once it can pass signals on
            signal.pthread_sigmask(signal.SIG_UNBLOCK, forward)
            rc = _run_in_process(program)
            _ignore(forward)
            return rc
    from tfslurm.runtime.supervise import supervise

    try:  # also here: the supervisor may kill the group before the child has set it
        os.setpgid(child, child)
    except OSError:
        pass
    rc = supervise(child, role, timeout, forward, stop, flag.signum, grace, translate=program is not None)
    _ignore(forward)
    print(
        f"tfslurm run: {role.job}:{role.index}: program finished, exit {rc} (t={time.time():.3f})",
        file=sys.stderr,
        flush=True,
    )
    return rc
