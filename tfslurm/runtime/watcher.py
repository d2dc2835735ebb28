"""The peer watcher of ``tfslurm.run(main)`` outside ``tfslurm run``: a process of its own.

TF holds the GIL while a strategy waits for its peers, so no thread of the training process
can report a missing one, and that process cannot fork once TF is imported. It therefore
starts ``python -c`` of :func:`main` (:func:`start_watcher`), which takes the role from
the TF_CONFIG of the environment it inherits (the task's, installed before it starts) and
waits for the peers the one way (:func:`tfslurm.runtime.peers.wait_for_peers`); when one
does not come up it prints the error and SIGKILLs the training process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence

from tfslurm.runtime.parent import Process
from tfslurm.runtime.peers import wait_for_peers, watch_spec
from tfslurm.runtime.roles import Role, role_from_tf_config

# The watcher's entry: its arguments are the training process's PID, the peer timeout
# and the role's description (the role itself is the TF_CONFIG of its environment).
ENTRY = "import sys; from tfslurm.runtime.watcher import main; sys.exit(main(sys.argv[1:]))"


def start_watcher(role: Role, timeout: float) -> subprocess.Popen[bytes] | None:
    """For ``tfslurm.run`` outside the CLI (TF_CONFIG already in ``os.environ``): a watcher
    process that SIGKILLs this process with a clear message when a peer does not come up.
    None when nothing needs watching."""
    peers, _ = watch_spec(role)
    if not peers:
        return None
    argv = [sys.executable, "-c", ENTRY, str(os.getpid()), repr(timeout), role.source]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL)


def main(argv: Sequence[str]) -> int:
    """The watcher process: ``PID TIMEOUT SOURCE``, as :func:`start_watcher` passes them."""
    pid, timeout, source = int(argv[0]), float(argv[1]), argv[2]
    training = Process(pid)  # first: then a PID checked below cannot be another's later
    if os.getppid() != pid:  # gone before it could be named: nothing to watch
        return 0
    given = role_from_tf_config(os.environ["TF_CONFIG"])
    role = Role(given.cluster, given.job, given.index, source)
    done = threading.Event()

    def on_missing() -> None:
        training.kill()
        done.set()

    watch = wait_for_peers(role, timeout, on_missing)
    while watch is not None and not done.is_set() and not watch.all_seen.is_set():
        if os.getppid() != pid:  # the training process is gone
            return 0
        done.wait(0.5)
    return 0
