"""A watcher outside the TF process: TF holds the GIL while a strategy waits for its peers.

Measured: while ``MultiWorkerMirroredStrategy()`` (or a PSS chief) blocks on a missing
peer, no Python thread of that process runs, so a watchdog thread cannot report anything.
The watcher therefore lives in another process:

* ``tfslurm run`` forks before TensorFlow is imported (``runtime.launch``): the child runs
  the program, the parent (tiny, no TF) watches the peers, passes signals on and reports
  the child's status. A stop signal (SIGTERM, the preemption signal...) reaches the child
  as the preemption signal, since MWMS workers swallow SIGTERM in TF's own C handler; the
  child checkpoints and stops, or Slurm's SIGKILL ends it after GraceTime/KillWait (see
  stops.py). SIGINT is passed on and the child SIGKILLed after a short grace period. The
  child dies with this process (PR_SET_PDEATHSIG) and leads a process group this process
  ends.
* ``tfslurm.run(main)`` without the CLI starts ``python -m tfslurm.runtime.supervise`` as a
  watcher that kills the training process (SIGKILL) after printing the error.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence

from tfslurm.runtime import exits, stops
from tfslurm.runtime.container import ContainerStart
from tfslurm.runtime.exits import EXIT_PEER_TIMEOUT
from tfslurm.runtime.peers import PeerWatch, missing_peer_message
from tfslurm.runtime.roles import Address, Role

TERM_GRACE = 5.0
# A container runtime's own statuses, not its program's: it could not start or run the
# container (125-127), or Slurm's SIGTERM to every process of the step ended it (143).
# Measured with podman 4.3: when the first task to exit 85 ends the step, another task's
# podman, still tearing its container down, gets that SIGTERM and exits 143 ("container
# not running") although its program exited 85; with --rm it exits 127.
RUNTIME_STATUSES = (125, 126, 127, 128 + signal.SIGTERM)


def watch_spec(role: Role) -> tuple[list[Address], int | None]:
    """(peers this task waits for, own port that starts the clock or None)."""
    if role.is_server or role.job == "evaluator":
        return [], None
    if role.strategy == "ps":  # the chief needs every ps and worker; they need nobody
        return role.addresses(("ps", "worker")), None
    me = role.address()  # MWMS: once my own server is up I wait for every other worker
    return [a for a in role.addresses(("chief", "worker")) if a != me], me.port


def _status(raw: int) -> int:
    if os.WIFSIGNALED(raw):
        return 128 + os.WTERMSIG(raw)
    return os.WEXITSTATUS(raw)


class Process:
    """A process to signal that cannot be confused with a later one of the same PID.

    PIDs are reused (``kernel.pid_max`` is 32768 on many machines), and a signal sent after
    the process was reaped would reach whatever started next with its number. A pidfd
    (Linux 5.3) names the process itself: once it is gone, signalling does nothing. Where
    pidfds are not available the PID is used."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            self._fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):  # not Linux, an old kernel, or already gone
            self._fd = None

    def send(self, signum: int) -> None:
        """``signum`` to the process; nothing if it has ended."""
        try:
            if self._fd is None:
                os.kill(self.pid, signum)
            else:
                signal.pidfd_send_signal(self._fd, signum)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        self.send(signal.SIGKILL)


def _kill_group(pgid: int) -> None:
    """SIGKILL what is left of the child's process group (its own helpers, a command it
    started): nothing the supervisor started outlives it."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """In a child: SIGKILL this process when its parent dies, whatever kills the parent
    (SIGKILL included; Linux prctl PR_SET_PDEATHSIG). Exits at once if the parent is
    already gone. Without libc (not Linux) nothing is set."""
    import ctypes  # here: only the forked program needs it, not the watcher nor tfslurm.run

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    if os.getppid() != parent:
        os._exit(128 + signal.SIGKILL)


class Supervisor:
    """The supervising parent's state while its child runs: which stop signal came first,
    and when the child is SIGKILLed after a stop or an interrupt (the first deadline set
    wins). ``on_signal`` is the handler of every forwarded signal."""

    __slots__ = (
        "_grace",
        "_reaped",
        "_stopping",
        "container",
        "preempt",
        "process",
        "role",
        "stop",
        "stop_grace",
        "stopped_by",
        "translate",
    )

    def __init__(
        self,
        child: int,
        role: Role,
        stop: Sequence[int] = (),
        preempt: int | None = None,
        stop_grace: float | None = None,
        translate: bool = True,
        container: ContainerStart | None = None,
    ) -> None:
        self.role = role
        self.process = Process(child)  # before any wait: the child cannot have been reaped yet
        self.stop = tuple(stop)
        self.preempt = preempt
        self.stop_grace = stop_grace
        self.translate = translate
        self.container = container
        self.stopped_by: int | None = None
        self._grace: float | None = None
        self._stopping = threading.Event()
        self._reaped = threading.Event()

    def on_signal(self, signum: int, frame: object) -> None:
        if signum in self.stop and self.preempt is not None:
            self._ask_to_stop(signum)
            if self.translate:
                signum = self.preempt
        elif signum in (signal.SIGTERM, signal.SIGINT):
            self._kill_in(TERM_GRACE)
        self.process.send(signum)

    def _ask_to_stop(self, signum: int) -> None:
        """The first stop signal: log it and start ``stop_grace``, if given."""
        if self.stopped_by is not None:
            return
        self.stopped_by = signum
        print(
            f"tfslurm run: {self.role.job}:{self.role.index}: {stops.describe(signum)}: "
            "asking the program to checkpoint and stop",
            file=sys.stderr,
            flush=True,
        )
        if self.stop_grace is not None:
            self._kill_in(self.stop_grace)

    def _kill_in(self, seconds: float) -> None:
        if self._grace is None:
            self._grace = seconds
            self._stopping.set()

    def kill_when_due(self) -> None:
        """In a thread: SIGKILL the child once a deadline set by a signal has passed."""
        self._stopping.wait()
        if not self._reaped.wait(self._grace):
            self.kill()

    def kill(self) -> None:
        """SIGKILL the child, and first the program in its container where the runtime can
        be told to: podman's container runs under its own monitor (conmon), not as a
        process of the child, and outlives the podman process killed here."""
        if self.container is not None and self.container.signaller:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                quiet = subprocess.DEVNULL
                killer = [*self.container.signaller, str(int(signal.SIGKILL))]
                subprocess.run(killer, stdout=quiet, stderr=quiet, timeout=30, check=False)
        self.process.kill()

    def reaped(self) -> None:
        """The child was reaped: no deadline kills anything any more."""
        self._reaped.set()

    def status(self, raw: int) -> int:
        """The run's exit status from the child's wait status ``raw``. A child stopped by a
        stop signal that exits 0 has not finished its training: EXIT_STOPPED. So does a
        container runtime that, after the stop, ends with a status of its own: the
        program's status is lost and its training did not finish."""
        rc = _status(raw)
        if self.stopped_by is None:
            return rc
        name = signal.Signals(self.stopped_by).name
        if rc in (0, exits.EXIT_STOPPED):
            why = f"stopped early by {name}"
        elif self.container is not None and rc in RUNTIME_STATUSES:
            why = f"the container runtime ended with its own status {rc} after {name}"
        else:
            return rc
        print(
            f"tfslurm run: {self.role.job}:{self.role.index}: {why}: exit {exits.EXIT_STOPPED} "
            "(not 0: training is unfinished; the template requeues the job)",
            file=sys.stderr,
            flush=True,
        )
        return exits.EXIT_STOPPED


def supervise(
    child: int,
    role: Role,
    timeout: float,
    forward: Sequence[int],
    stop: Sequence[int] = (),
    preempt: int | None = None,
    stop_grace: float | None = None,
    translate: bool = True,
    container: ContainerStart | None = None,
) -> int:
    """Parent side of ``tfslurm run``: watch peers, pass signals on, return the child's
    exit status (128+N for a signal); exits 3 itself when a peer never came up.

    A signal in ``stop`` reaches the program as ``preempt`` (its Python handler: under MWMS
    TF's C handler owns SIGTERM in the child; a command that is not an in-process Python
    program, ``translate=False``, gets the signal as it came), and the child then has until
    Slurm's SIGKILL (GraceTime/KillWait) to checkpoint, or ``stop_grace`` seconds when
    given. If it then exits 0, the status becomes EXIT_STOPPED: the training was cut short
    and the job must not end COMPLETED; so it does when the child runs a ``container``
    runtime that ends with a status of its own. SIGINT (and SIGTERM when it is not a stop signal)
    is passed on and the child SIGKILLed TERM_GRACE seconds later."""
    supervisor = Supervisor(child, role, stop, preempt, stop_grace, translate, container)
    for signum in forward:
        signal.signal(signum, supervisor.on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, forward)  # blocked by the caller over fork
    threading.Thread(target=supervisor.kill_when_due, daemon=True).start()
    gave_up = _watch_peers(role, timeout, supervisor.kill)
    _, raw = os.waitpid(child, 0)
    supervisor.reaped()
    _kill_group(child)  # the child leads its own group (runtime.launch): helpers it left behind
    if gave_up.is_set():
        os._exit(EXIT_PEER_TIMEOUT)
    return supervisor.status(raw)


def _watch_peers(role: Role, timeout: float, kill: Callable[[], None]) -> threading.Event:
    """Start watching this task's peers; the event is set (after the one-line message)
    when one did not come up within ``timeout`` and the child was killed for it."""
    gave_up = threading.Event()
    peers, own = watch_spec(role)
    if peers:

        def on_timeout(missing: list[Address], waited: float) -> None:
            print(missing_peer_message(role.describe(), missing, waited), file=sys.stderr, flush=True)
            gave_up.set()  # after the message: the main thread exits as soon as it is set
            kill()

        PeerWatch(peers, timeout, on_timeout, own).start()
    return gave_up


def start_watcher(role: Role, timeout: float) -> subprocess.Popen[bytes] | None:
    """For ``tfslurm.run`` outside the CLI: a watcher process that SIGKILLs this process
    with a clear message when a peer does not come up. None when nothing needs watching."""
    peers, own = watch_spec(role)
    if not peers:
        return None
    argv = [
        sys.executable,
        "-m",
        "tfslurm.runtime.supervise",
        "--pid",
        str(os.getpid()),
        "--timeout",
        str(timeout),
        "--role",
        role.describe(),
    ]
    if own is not None:
        argv += ["--own-port", str(own)]
    argv += [f"{a.job}:{a.index}={a.host}:{a.port}" for a in peers]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL)


def _watcher_main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tfslurm.runtime.supervise")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--timeout", type=float, required=True)
    p.add_argument("--role", default="this task")
    p.add_argument("--own-port", type=int, default=None)
    p.add_argument("peers", nargs="+", help="job:index=host:port")
    args = p.parse_args(argv)
    peers = []
    for text in args.peers:
        name, _, addr = text.partition("=")
        job, _, index = name.partition(":")
        peers.append(Address.parse(job, int(index), addr))
    done = threading.Event()
    training = Process(args.pid)
    if os.getppid() != args.pid:  # gone before it could be named: nothing to watch
        return 0

    def on_timeout(missing: list[Address], waited: float) -> None:
        print(missing_peer_message(args.role, missing, waited), file=sys.stderr, flush=True)
        training.kill()
        done.set()

    watch = PeerWatch(peers, args.timeout, on_timeout, args.own_port).start()
    while not done.is_set() and not watch.all_seen.is_set():
        if os.getppid() != args.pid:  # the training process is gone
            return 0
        done.wait(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(_watcher_main())
