"""Starting the program as this task's role: what ``tfslurm run`` does with its options.

By role: chief/workers (MWMS) and the evaluator run the program; under
ParameterServerStrategy the chief runs it (the coordinator) while ps and worker tasks run a
standard TF server in this process (``runtime.servers``) and exit 0 soon after the chief
finishes.

The program runs in a child forked before TensorFlow is imported (no threads yet); this
process supervises it (``runtime.supervise``): it watches the peers (TF holds the GIL while
it waits for them), passes signals on, a stop signal as the preemption signal, and reports
the child's status. A Python program (``python script.py``, ``python -m mod``,
``script.py``) runs inside the child, after the preemption handler is in place; any other
command runs as the child's own child, which passes signals on to it.

With TFSLURM_CONTAINER set, the child starts that container command with the program after
it (``runtime.container``); a Python program in it still gets stop signals translated.

The program's environment is one dict (:func:`program_environ`): this process's
environment plus TF_CONFIG, TFSLURM_ROLE, the role's GPU variables, no_proxy and
TFSLURM_WATCHED. The child installs it (a Python program in it) or hands it to the command;
the supervising process's own environment is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import re
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence

from tfslurm.errors import RestartCapReached, TfslurmError, one_line
from tfslurm.plan import TF_CONFIG_MAX_BYTES, PlanOptions, resolve_plan
from tfslurm.runtime import preemption, stops
from tfslurm.runtime.api import ps_failure_exit
from tfslurm.runtime.container import ContainerStart, container_prefix, container_start, runtime_of
from tfslurm.runtime.environ import install_environ, task_environ
from tfslurm.runtime.peers import peer_timeout_from_env
from tfslurm.runtime.roles import Role, resolve_role
from tfslurm.runtime.servers import serve
from tfslurm.runtime.supervise import die_with_parent, supervise
from tfslurm.settings import REQUEUE_VARIABLE, WATCHED_VARIABLE, Settings
from tfslurm.step import Step, is_rank_zero
from tfslurm.value import Value

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Final

_PYTHON_NAME = re.compile(r"^python[0-9.]*$")
_PYTHON_FLAGS_WITHOUT_VALUE = {"-u", "-B", "-E", "-s", "-S", "-I", "-O", "-OO", "-b", "-q"}


class RunOptions(Value):
    """What ``tfslurm run`` was asked for on its command line; None where an option was
    not given (its ``TFSLURM_*`` setting, else its default, applies)."""

    __slots__ = (
        "cap_check",
        "jobs",
        "max_restarts",
        "peer_timeout",
        "preempt_signal",
        "program",
        "requeue_on_ps_failure",
        "show_plan",
        "stop_grace",
        "stop_signals",
    )
    __match_args__ = (
        "program",
        "jobs",
        "peer_timeout",
        "preempt_signal",
        "stop_signals",
        "stop_grace",
        "max_restarts",
        "cap_check",
        "requeue_on_ps_failure",
        "show_plan",
    )

    def __init__(
        self,
        program: Sequence[str] = (),
        *,
        jobs: str | None = None,
        peer_timeout: float | None = None,
        preempt_signal: str | None = None,
        stop_signals: str | None = None,
        stop_grace: str | None = None,
        max_restarts: str | None = None,
        cap_check: bool = False,
        requeue_on_ps_failure: bool = False,
        show_plan: bool = False,
    ) -> None:
        self.program: Final = tuple(program)
        self.jobs: Final = jobs
        self.peer_timeout: Final = peer_timeout
        self.preempt_signal: Final = preempt_signal
        self.stop_signals: Final = stop_signals
        self.stop_grace: Final = stop_grace
        self.max_restarts: Final = max_restarts
        self.cap_check: Final = cap_check
        self.requeue_on_ps_failure: Final = requeue_on_ps_failure
        self.show_plan: Final = show_plan


class Stopping(Value):
    """How a run stops: the signals that mean checkpoint-and-stop, the preemption signal
    they reach a Python program as, and the seconds to SIGKILL after one (None: Slurm's)."""

    __slots__ = ("grace", "preempt", "signals")
    __match_args__ = ("signals", "preempt", "grace")

    def __init__(self, signals: tuple[int, ...], preempt: int, grace: float | None = None) -> None:
        self.signals: Final = signals
        self.preempt: Final = preempt
        self.grace: Final = grace

    @property
    def forwarded(self) -> tuple[int, ...]:
        """The signals the supervisor passes on to the program: SIGTERM, SIGINT and these."""
        return tuple(dict.fromkeys((signal.SIGTERM, signal.SIGINT, *self.signals)))


class PythonProgram(Value):
    """A Python program to run in this interpreter: a script path or a module name."""

    __slots__ = ("argv", "module", "script")
    __match_args__ = ("script", "module", "argv")

    def __init__(self, script: str | None, module: str | None, argv: Sequence[str]) -> None:
        self.script: Final = script
        self.module: Final = module
        self.argv: Final = tuple(argv)


def parse_program(argv: Sequence[str]) -> PythonProgram | None:
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


def run_task(options: RunOptions, settings: Settings, environ: Mapping[str, str]) -> int:
    """``tfslurm run``: check the restart cap, resolve this task's role, run its program
    (or its TF server) and return the exit status. ``settings`` are ``environ``'s.

    Raises :class:`RestartCapReached` when the job was restarted more often than
    ``--max-restarts`` allows, and a one-line TfslurmError for bad input. In the forked
    child this returns the program's status too."""
    cap = stops.max_restarts(options.max_restarts, given=settings)
    grace = stops.stop_grace(options.stop_grace, given=settings)
    refused = stops.restart_cap_message(stops.restart_count(environ), cap)
    if refused:
        ignore_signals((signal.SIGTERM,))  # the other tasks' 86 ends the step: keep this status
        raise RestartCapReached(refused)
    if options.cap_check:
        return 0
    role = resolve_role(environ, options.jobs, settings=settings)
    for line in role.gpu_warnings:
        print(line, file=sys.stderr, flush=True)
    timeout = peer_timeout_from_env(options.peer_timeout, settings)
    # Installed before the rest of start-up: a preemption signal now sets the flag, which
    # the program's handler takes over, instead of ending this process.
    flag = preemption.install(options.preempt_signal, settings=settings)
    stop = (
        stops.stop_signals(options.stop_signals, flag.signum)
        if options.stop_signals is not None
        else settings.stop_signals(flag.signum)
    )
    requeue = options.requeue_on_ps_failure or settings.requeue_on_ps_failure
    if options.show_plan and is_rank_zero(environ):
        print(plan_table(role, options.jobs, environ), flush=True)
    me = role.address()
    print(one_line(f"tfslurm run: {role.describe()} on {me.host}:{me.port}"), file=sys.stderr, flush=True)
    if role.is_server:
        # The TF server runs in this process: its environment is this process's.
        install_environ(program_environ(role, environ, options.requeue_on_ps_failure, watched=False))
        serve(role, peer_timeout=timeout, ignore_signals=tuple(n for n in stop if n != signal.SIGTERM))
    if not options.program:
        raise TfslurmError(
            f"no program given for {role.job}:{role.index}: use tfslurm run -- python train.py"
        )
    env = program_environ(role, environ, options.requeue_on_ps_failure, watched=True)
    container = container_prefix(settings.container) if settings.container else ()
    return launch(role, options.program, env, Stopping(stop, flag.signum, grace), timeout, requeue, container)


def program_environ(
    role: Role, environ: Mapping[str, str], requeue_on_ps_failure: bool, *, watched: bool
) -> dict[str, str]:
    """The program's environment: ``environ`` with this task's TF_CONFIG, TFSLURM_ROLE, GPU
    variables and no_proxy (``runtime.environ``); TFSLURM_REQUEUE_ON_PS_FAILURE=1 when
    ``--requeue-on-ps-failure`` was given (``tfslurm.run`` in the program reads it), and
    TFSLURM_WATCHED=1 for a program this process supervises (``tfslurm.run`` in it then
    leaves the restart cap, the stop signals and the peers to the supervisor)."""
    env = task_environ(role, environ)
    if requeue_on_ps_failure:
        env[REQUEUE_VARIABLE] = "1"
    if watched:
        env[WATCHED_VARIABLE] = "1"
    return env


def launch(
    role: Role,
    argv: Sequence[str],
    env: Mapping[str, str],
    stopping: Stopping,
    peer_timeout: float,
    requeue: bool,
    container: Sequence[str] = (),
) -> int:
    """Fork: the child runs ``argv`` with environment ``env`` and returns its status; this
    process supervises it and returns the run's status (128+N for a signal, 85 when a stop
    signal cut the training short; it exits 3 itself when a peer never came up).

    With a ``container`` prefix (TFSLURM_CONTAINER) the child starts the container command
    with ``argv`` after it; a stop signal still reaches a Python ``argv`` as the preemption
    signal, through the container runtime (``runtime.container``)."""
    program = parse_program(argv)
    translate = program is not None
    scratch = ""
    start: ContainerStart | None = None
    if container:
        if runtime_of(container) == "podman":  # where podman writes the container's ID
            scratch = tempfile.mkdtemp(prefix="tfslurm-run-")
        cidfile = os.path.join(scratch, "container-id") if scratch else ""
        start = container_start(container, argv, env, os.getcwd(), cidfile)
        argv, env, program = start.argv, start.env, None
    forward = stopping.forwarded
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
        # A Python program in a container: the stop signals come translated from this
        # process; the child passes only those on, not each raw SIGTERM Slurm sends it too.
        dropped = (
            tuple(n for n in stopping.signals if n != stopping.preempt) if container and translate else ()
        )
        signaller = start.signaller if start is not None else ()
        return _run_program(parent, role, argv, program, env, stopping, requeue, dropped, signaller)
    try:  # also here: the supervisor may kill the group before the child has set it
        os.setpgid(child, child)
    except OSError:
        pass
    rc = supervise(
        child,
        role,
        peer_timeout,
        forward,
        stopping.signals,
        stopping.preempt,
        stopping.grace,
        translate=translate,
        container=start,
    )
    if scratch:  # here, not in the child, which may be SIGKILLed before it gets to it
        shutil.rmtree(scratch, ignore_errors=True)
    ignore_signals(forward)
    print(
        f"tfslurm run: {role.job}:{role.index}: program finished, exit {rc} (t={time.time():.3f})",
        file=sys.stderr,
        flush=True,
    )
    return rc


def _run_program(
    parent: int,
    role: Role,
    argv: Sequence[str],
    program: PythonProgram | None,
    env: Mapping[str, str],
    stopping: Stopping,
    requeue: bool,
    dropped: tuple[int, ...] = (),
    signaller: Sequence[str] = (),
) -> int:
    """The forked child: run the program, with the forwarded signals still blocked; a
    command is not passed the ``dropped`` signals."""
    die_with_parent(parent)  # a SIGKILLed supervisor leaves no program behind
    os.setpgid(0, 0)  # a group of its own: the supervisor ends what is left of it
    forward = stopping.forwarded
    if program is not None:
        install_environ(env)  # the program runs in this process
    preemption.install(stopping.preempt, also=stopping.signals)  # SIGTERM too, where TF leaves it to us
    with ps_failure_exit(role, requeue):
        if program is None:
            return run_command(argv, forward, env, dropped, signaller)  # unblocks once it can pass signals on
        signal.pthread_sigmask(signal.SIG_UNBLOCK, forward)
        rc = run_in_process(program)
        ignore_signals(forward)
        return rc


def run_in_process(program: PythonProgram) -> int:
    """Run a Python program as ``__main__`` of this interpreter; its exit status."""
    if program.script is not None and not os.path.isfile(program.script):
        raise TfslurmError(f"program {program.script!r} does not exist")
    try:
        if program.script is not None:
            sys.argv = [program.script, *program.argv]
            sys.path.insert(0, os.path.dirname(os.path.abspath(program.script)))
            runpy.run_path(program.script, run_name="__main__")
        else:
            _run_module(program.module or "", program.argv)
    except SystemExit as exc:
        return _exit_status(exc.code)
    return 0


def _run_module(module: str, argv: Sequence[str]) -> None:
    sys.argv = [module, *argv]
    sys.path.insert(0, os.getcwd())
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except ImportError as exc:
        if exc.name and module.startswith(exc.name):
            raise TfslurmError(f"module {module!r} not found") from None
        raise


def _exit_status(code: object) -> int:
    """The status of ``sys.exit(code)``: None is 0, a message is printed and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_command(
    argv: Sequence[str],
    forward: tuple[int, ...],
    env: Mapping[str, str],
    dropped: tuple[int, ...] = (),
    signaller: Sequence[str] = (),
) -> int:
    """Run a non-Python command as a child with environment ``env`` and pass ``forward`` on
    to it, except ``dropped`` (ignored here); with a ``signaller`` (a container runtime's
    command that signals the program in the container, ``runtime.container``), through
    that too. Called with ``forward`` blocked: a signal that comes before the command has
    started is held, not lost (nor does it kill this process and orphan the command)."""
    config = env.get("TF_CONFIG", "")
    if len(config) > TF_CONFIG_MAX_BYTES:
        raise TfslurmError(
            f"TF_CONFIG is {len(config)} bytes, too large to pass to "
            f"{argv[0]!r}; run a Python program in-process (tfslurm run -- python prog.py) "
            "or read TFSLURM_DESCRIPTOR with tfslurm.SlurmClusterResolver"
        )
    me = os.getpid()

    def start() -> None:  # in the command's process, before exec
        die_with_parent(me)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, forward)

    try:  # the command itself starts with the signals unblocked (this process has no threads)
        child = subprocess.Popen(list(argv), env=env, preexec_fn=start)
    except OSError as exc:
        raise TfslurmError(f"cannot start {argv[0]!r}: {exc.strerror}") from None

    signallers: list[subprocess.Popen[bytes]] = []

    def forward_signal(signum: int, frame: object) -> None:
        child.send_signal(signum)  # a no-op once the command has been reaped
        if signaller and child.returncode is None:
            quiet = subprocess.DEVNULL  # before the container has started it fails: the runtime got it
            with contextlib.suppress(OSError):
                signallers.append(subprocess.Popen([*signaller, str(signum)], stdout=quiet, stderr=quiet))

    for signum in forward:
        signal.signal(signum, signal.SIG_IGN if signum in dropped else forward_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, forward)  # a signal held until now goes on
    rc = child.wait()
    ignore_signals(forward)  # the command's status is in: a late signal must not replace it
    for started in signallers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            started.wait(timeout=5)
    return 128 - rc if rc < 0 else rc


def ignore_signals(signals: tuple[int, ...]) -> None:
    """Once the program is done: the first task to exit non-zero ends the step (srun
    --kill-on-bad-exit sends SIGTERM to the rest), and Python's shutdown puts the default
    action back for signals with Python handlers, so a task that already has its status
    would die of that SIGTERM (143) instead. SIG_IGN survives the shutdown."""
    for signum in signals:
        signal.signal(signum, signal.SIG_IGN)


def plan_table(role: Role, jobs: str | None, environ: Mapping[str, str]) -> str:
    """The step's plan table; from the cluster itself when TF_CONFIG came from elsewhere."""
    table = role.plan_table  # made on demand: once
    if table:
        return table
    try:
        env = {k: v for k, v in environ.items() if k != "TF_CONFIG"}
        return resolve_plan(Step.from_environ(env), jobs, PlanOptions(iface="")).table()
    except ValueError:  # TF_CONFIG without a Slurm step: show what TF_CONFIG says
        rows = [f"{'job':<10} {'index':>5}  address"]
        for job, addrs in role.cluster.cluster_spec().items():
            rows += [f"{job:<10} {i:>5}  {a}" for i, a in enumerate(addrs)]
        return "\n".join(rows)
