"""A watcher outside the TF process: TF holds the GIL while a strategy waits for its peers.

Measured: while ``MultiWorkerMirroredStrategy()`` (or a PSS chief) blocks on a missing
peer, no Python thread of that process runs, so a watchdog thread cannot report anything.
The watcher therefore lives in another process:

* ``tfslurm run`` forks before TensorFlow is imported: the child runs the program, the
  parent (tiny, no TF) watches the peers, forwards signals and reports the child's status.
  On SIGTERM/SIGINT the child gets the signal and, after a grace period, SIGKILL: MWMS
  workers swallow SIGTERM, so without this ``scancel`` always waits for KillWait.
* ``tfslurm.run(main)`` without the CLI starts ``python -m tfslurm.runtime.supervise`` as a
  watcher that kills the training process (SIGKILL) after printing the error.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence

from tfslurm.runtime.peers import EXIT_PEER_TIMEOUT, PeerWatch, missing_peer_message
from tfslurm.runtime.roles import Address, Role

TERM_GRACE = 5.0


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


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def supervise(child: int, role: Role, timeout: float, forward: Sequence[int]) -> int:
    """Parent side of ``tfslurm run``: watch peers, forward signals, return the child's
    exit status (128+N for a signal); exits 3 itself when a peer never came up."""
    stopping = threading.Event()
    reaped = threading.Event()

    def kill_later() -> None:
        stopping.wait()
        if not reaped.wait(TERM_GRACE):
            _kill(child)

    def on_signal(signum: int, frame: object) -> None:
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            return
        if signum in (signal.SIGTERM, signal.SIGINT):
            stopping.set()

    for signum in forward:
        signal.signal(signum, on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, forward)  # blocked by the caller over fork
    threading.Thread(target=kill_later, daemon=True).start()

    peers, own = watch_spec(role)
    gave_up = threading.Event()
    if peers:
        def on_timeout(missing: list[Address], waited: float) -> None:
            print(missing_peer_message(role.describe(), missing, waited),
                  file=sys.stderr, flush=True)
            gave_up.set()  # after the message: the main thread exits as soon as it is set
            _kill(child)

        PeerWatch(peers, timeout, on_timeout, own).start()
    _, raw = os.waitpid(child, 0)
    reaped.set()
    if gave_up.is_set():
        os._exit(EXIT_PEER_TIMEOUT)
    return _status(raw)


def start_watcher(role: Role, timeout: float) -> subprocess.Popen | None:
    """For ``tfslurm.run`` outside the CLI: a watcher process that SIGKILLs this process
    with a clear message when a peer does not come up. None when nothing needs watching."""
    peers, own = watch_spec(role)
    if not peers:
        return None
    argv = [sys.executable, "-m", "tfslurm.runtime.supervise", "--pid", str(os.getpid()),
            "--timeout", str(timeout), "--role", role.describe()]
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

    def on_timeout(missing: list[Address], waited: float) -> None:
        print(missing_peer_message(args.role, missing, waited), file=sys.stderr, flush=True)
        _kill(args.pid)
        done.set()

    watch = PeerWatch(peers, args.timeout, on_timeout, args.own_port).start()
    while not done.is_set() and not watch.all_seen.is_set():
        if os.getppid() != args.pid:  # the training process is gone
            return 0
        done.wait(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(_watcher_main())
