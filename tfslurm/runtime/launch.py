"""Starting the program as this task's role: what ``tfslurm run`` does with its options.

By role: chief/workers (MWMS) and the evaluator run the program; under
ParameterServerStrategy the chief runs it (the coordinator) while ps and worker tasks run a
standard TF server in this process (``runtime.servers``) and exit 0 soon after the chief
finishes.

The program runs in a child forked before TensorFlow is imported (no threads yet); this
process is its parent (``runtime.parent``): it watches the peers (TF holds the GIL while
it waits for them), passes signals on, a stop signal as the preemption signal, and reports
the child's status. A Python program (``python script.py``, ``python -m mod``,
``script.py``) runs inside the child, after the preemption handler is in place; any other
command runs as the child's own child, which passes signals on to it.

With a container command (TFSLURM_CONTAINER, or typed before the program), the child starts
it with the program after it (``runtime.container``); a Python program in it still gets stop
signals translated.

The program's environment is one dict (:func:`program_environ`): this process's
environment plus TF_CONFIG, TFSLURM_ROLE, the role's GPU variables, no_proxy and
TFSLURM_WATCHED. The child installs it (a Python program in it) or hands it to the command;
the parent's own environment is left as it was.

The steps before the fork (restart cap, role, signals, server) are the task's life
(``runtime.life``), the same as ``tfslurm.run``'s.
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
from typing import Final

from tfslurm.errors import TfslurmError, one_line
from tfslurm.plan import TF_CONFIG_MAX_BYTES
from tfslurm.runtime import preemption
from tfslurm.runtime.api import ps_failure_exit
from tfslurm.runtime.container import ContainerStart, container_start, runtime_of
from tfslurm.runtime.environ import install_environ, task_environ
from tfslurm.runtime.life import TaskLife
from tfslurm.runtime.parent import die_with_parent, run_parent
from tfslurm.runtime.roles import Role, resolve_role
from tfslurm.runtime.stops import ignore_signals
from tfslurm.settings import REQUEUE_VARIABLE, WATCHED_VARIABLE
from tfslurm.step import is_rank_zero
from tfslurm.value import Value

_PYTHON_NAME = re.compile(r"^python[0-9.]*$")
_PYTHON_FLAGS_WITHOUT_VALUE = {"-u", "-B", "-E", "-s", "-S", "-I", "-O", "-OO", "-b", "-q"}


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


def run_task(
    life: TaskLife, program: Sequence[str], *, cap_check: bool = False, show_plan: bool = False
) -> int:
    """``tfslurm run``: the task's life (``runtime.life``): check the restart cap, resolve
    this task's role, run its program (or its TF server) and return the exit status.

    Raises :class:`RestartCapReached` when the job was restarted more often than the cap
    allows, and a one-line TfslurmError for bad input. In the forked child this returns the
    program's status too."""
    config, environ = life.config, life.environ
    life.check_cap()
    if cap_check:
        return 0
    role = life.resolve_role()
    for line in role.gpu_warnings:
        print(line, file=sys.stderr, flush=True)
    # Installed before the rest of start-up: a preemption signal now sets the flag, which
    # the program's handler takes over, instead of ending this process.
    life.install_preemption()
    if show_plan and is_rank_zero(environ):
        print(plan_table(role, config.jobs, environ), flush=True)
    me = role.address()
    print(one_line(f"tfslurm run: {role.describe()} on {me.host}:{me.port}"), file=sys.stderr, flush=True)
    if role.is_server:
        # The TF server runs in this process: its environment is this process's.
        install_environ(program_environ(role, environ, config.requeue, watched=False))
        life.start_beacon(role)
        life.serve(role)
    if not program:
        raise TfslurmError(
            f"no program given for {role.job}:{role.index}: use tfslurm run -- python train.py"
        )
    return launch(role, program, program_environ(role, environ, config.requeue, watched=True), life)


def program_environ(
    role: Role, environ: Mapping[str, str], requeue: bool, *, watched: bool
) -> dict[str, str]:
    """The program's environment: ``environ`` with this task's TF_CONFIG, TFSLURM_ROLE, GPU
    variables and no_proxy (``runtime.environ``); TFSLURM_REQUEUE_ON_PS_FAILURE=1 when
    the job is requeued after a parameter-server failure (``tfslurm.run`` in the program
    reads it), and TFSLURM_WATCHED=1 for a program this process is the parent of
    (``tfslurm.run`` in it then leaves the restart cap, the stop signals and the peers to
    the parent)."""
    env = task_environ(role, environ)
    if requeue:
        env[REQUEUE_VARIABLE] = "1"
    if watched:
        env[WATCHED_VARIABLE] = "1"
    return env


def launch(role: Role, argv: Sequence[str], env: Mapping[str, str], life: TaskLife) -> int:
    """Fork: the child runs ``argv`` with environment ``env`` and returns its status; this
    process is its parent and returns the run's status (128+N for a signal, 85 when a stop
    signal cut the training short; it exits 3 itself when a peer never came up).

    With the life's container prefix (TFSLURM_CONTAINER, or typed) the child starts the container
    command with ``argv`` after it; a stop signal still reaches a Python ``argv`` as the
    preemption signal, through the container runtime (``runtime.container``)."""
    config = life.config
    program = parse_program(argv)
    translate = program is not None
    container = config.container
    scratch = ""
    start: ContainerStart | None = None
    if container:
        if runtime_of(container) == "podman":  # where podman writes the container's ID
            scratch = tempfile.mkdtemp(prefix="tfslurm-run-")
        cidfile = os.path.join(scratch, "container-id") if scratch else ""
        start = container_start(container, argv, env, os.getcwd(), cidfile)
        argv, env, program = start.argv, start.env, None
    forward = config.forwarded
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
            tuple(n for n in config.stop_signals if n != config.preempt) if container and translate else ()
        )
        signaller = start.signaller if start is not None else ()
        return _run_program(parent, role, argv, program, env, life, dropped, signaller)
    try:  # also here: the parent may kill the group before the child has set it
        os.setpgid(child, child)
    except OSError:
        pass
    rc = run_parent(child, role, config, translate=translate, container=start)
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
    life: TaskLife,
    dropped: tuple[int, ...] = (),
    signaller: Sequence[str] = (),
) -> int:
    """The forked child: run the program, with the forwarded signals still blocked; a
    command is not passed the ``dropped`` signals."""
    die_with_parent(parent)  # a SIGKILLed parent leaves no program behind
    os.setpgid(0, 0)  # a group of its own: the parent ends what is left of it
    config, settings = life.config, life.settings
    forward = config.forwarded
    if program is not None:
        install_environ(env)  # the program runs in this process
    preemption.install(config.preempt, also=config.stop_signals)  # SIGTERM too, where TF leaves it to us
    with ps_failure_exit(role, config, settings):
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


def plan_table(role: Role, jobs: str | None, environ: Mapping[str, str]) -> str:
    """The step's plan table; from the cluster itself when TF_CONFIG came from elsewhere."""
    table = role.plan_table  # made on demand: once
    if table:
        return table
    try:
        env = {k: v for k, v in environ.items() if k != "TF_CONFIG"}
        return resolve_role(env, jobs).plan_table or ""  # the step's own plan, made here
    except ValueError:  # TF_CONFIG without a Slurm step: show what TF_CONFIG says
        rows = [f"{'job':<10} {'index':>5}  address"]
        for job, addrs in role.cluster.cluster_spec().items():
            rows += [f"{job:<10} {i:>5}  {a}" for i, a in enumerate(addrs)]
        return "\n".join(rows)
