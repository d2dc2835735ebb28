"""The ``tfslurm run`` parent: it forwards signals to its program, watches the peers and
reports its child's status.

TF holds the GIL while a strategy waits for its peers. Measured: while
``MultiWorkerMirroredStrategy()`` (or a PSS chief) blocks on a missing peer, no Python
thread of that process runs, so a watchdog thread cannot report anything. The watcher
therefore lives in another process:

* ``tfslurm run`` forks before TensorFlow is imported (``runtime.launch``): the child runs
  the program, the parent (tiny, no TF; :class:`ProgramParent`) watches the peers, passes
  signals on and reports the child's status. A stop signal (SIGTERM, the preemption
  signal...) reaches the child as the preemption signal, since MWMS workers swallow SIGTERM
  in TF's own C handler; the child checkpoints and stops, or Slurm's SIGKILL ends it after
  GraceTime/KillWait (see stops.py). SIGINT is passed on and the child SIGKILLed after a
  short grace period. The child dies with this process (PR_SET_PDEATHSIG) and leads a
  process group this process ends.
* ``tfslurm.run(main)`` without the CLI starts a watcher process instead
  (``runtime.watcher``) that kills the training process (SIGKILL) after printing the error.

Both wait for the peers the one way, :func:`tfslurm.runtime.peers.wait_for_peers`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading

from tfslurm.runtime import stops
from tfslurm.runtime.container import ContainerStart
from tfslurm.runtime.exits import EXIT_PEER_TIMEOUT, EXIT_STOPPED
from tfslurm.runtime.life import RunConfig
from tfslurm.runtime.peers import wait_for_peers
from tfslurm.runtime.progress import cut_off_line, watch_reach
from tfslurm.runtime.roles import Role

TERM_GRACE = 5.0
# A container runtime's own statuses, not its program's: it could not start or run the
# container (125-127), or Slurm's SIGTERM to every process of the step ended it (143).
# Measured with podman 4.3: when the first task to exit 85 ends the step, another task's
# podman, still tearing its container down, gets that SIGTERM and exits 143 ("container
# not running") although its program exited 85; with --rm it exits 127.
RUNTIME_STATUSES = (125, 126, 127, 128 + signal.SIGTERM)


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
    started): nothing the parent started outlives it."""
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


class ProgramParent:
    """The ``tfslurm run`` parent's state while its child runs: which stop signal came
    first, and when the child is SIGKILLed after a stop or an interrupt (the first deadline
    set wins). ``on_signal`` is the handler of every forwarded signal."""

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
        config: RunConfig,
        translate: bool = True,
        container: ContainerStart | None = None,
    ) -> None:
        self.role = role
        self.process = Process(child)  # before any wait: the child cannot have been reaped yet
        self.stop = config.stop_signals
        self.preempt = config.preempt
        self.stop_grace = config.stop_grace
        self.translate = translate
        self.container = container
        self.stopped_by: int | None = None
        self._grace: float | None = None
        self._stopping = threading.Event()
        self._reaped = threading.Event()

    def on_signal(self, signum: int, frame: object) -> None:
        if signum in self.stop:
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
        if rc in (0, EXIT_STOPPED):
            why = f"stopped early by {name}"
        elif self.container is not None and rc in RUNTIME_STATUSES:
            why = f"the container runtime ended with its own status {rc} after {name}"
        else:
            return rc
        print(
            f"tfslurm run: {self.role.job}:{self.role.index}: {why}: exit {EXIT_STOPPED} "
            "(not 0: training is unfinished; the template requeues the job)",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_STOPPED


def run_parent(
    child: int,
    role: Role,
    config: RunConfig,
    translate: bool = True,
    container: ContainerStart | None = None,
) -> int:
    """Parent side of ``tfslurm run``: watch peers, pass the config's forwarded signals on,
    return the child's exit status (128+N for a signal); exits 3 itself when a peer never
    came up.

    A stop signal reaches the program as the preemption signal (its Python handler: under
    MWMS TF's C handler owns SIGTERM in the child; a command that is not an in-process
    Python program, ``translate=False``, gets the signal as it came), and the child then
    has until Slurm's SIGKILL (GraceTime/KillWait) to checkpoint, or the config's stop grace
    when given. If it then exits 0, the status becomes EXIT_STOPPED: the training was cut
    short and the job must not end COMPLETED; so it does when the child runs a ``container``
    runtime that ends with a status of its own. SIGINT (and SIGTERM when it is not a stop
    signal) is passed on and the child SIGKILLed TERM_GRACE seconds later."""
    parent = ProgramParent(child, role, config, translate, container)
    forward = config.forwarded
    for signum in forward:
        signal.signal(signum, parent.on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, forward)  # blocked by the caller over fork
    threading.Thread(target=parent.kill_when_due, daemon=True).start()
    gave_up = threading.Event()

    def on_missing() -> None:
        gave_up.set()  # after the message: the main thread exits as soon as it is set
        parent.kill()

    if config.progress is not None:  # under tfslurm supervise: end the program if cut off
        target = config.progress

        def on_cut_off(silent: float) -> None:
            print(
                cut_off_line(f"{role.job}:{role.index}", target, silent, "the program"),
                file=sys.stderr,
                flush=True,
            )
            parent.kill()
            _kill_group(child)

        threading.Thread(target=watch_reach, args=(target, on_cut_off), daemon=True).start()
    wait_for_peers(role, config.peer_timeout, on_missing)
    _, raw = os.waitpid(child, 0)
    parent.reaped()
    _kill_group(child)  # the child leads its own group (runtime.launch): helpers it left behind
    if gave_up.is_set():
        os._exit(EXIT_PEER_TIMEOUT)
    return parent.status(raw)
