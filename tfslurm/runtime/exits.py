"""The exit statuses a tfslurm run ends with, each defined once.

The templates, ``tfslurm supervise`` and a job's dependencies read these numbers: a stopped
training must never end with 0 (the job would be COMPLETED), and each way of ending has its
own status so that the batch script can tell requeue from give-up from failure.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Bad input or a usage error, said in one line on stderr (every tfslurm command).
EXIT_USAGE = 2
#: A peer did not come up within the peer timeout (``runtime.peers``).
EXIT_PEER_TIMEOUT = 3
#: A parameter server failed: the run must restart from its checkpoint (``runtime.api``).
EXIT_PS_FAILED = 75
#: The program checkpointed and stopped before its training was done: requeue the job.
EXIT_STOPPED = 85
#: The job was restarted more often than ``--max-restarts`` allows: do not start again.
EXIT_RESTART_CAP = 86
#: Statuses that end ``tfslurm supervise``'s relaunch loop whatever failed: finished,
#: stopped to be requeued, refused by the restart cap, a parameter server lost (requeued).
FINAL_STATUSES = frozenset({0, EXIT_STOPPED, EXIT_RESTART_CAP, EXIT_PS_FAILED})

#: What each status tells the one who reads it: the ``exit status`` list of ``--help``.
MEANINGS: dict[int, str] = {
    EXIT_USAGE: "bad input or usage: one line on stderr says which and how to fix it",
    EXIT_PEER_TIMEOUT: "a peer did not come up within the peer timeout",
    EXIT_PS_FAILED: "a parameter server failed: restart the job from its checkpoint",
    EXIT_STOPPED: "the training stopped before it was done: requeue the job",
    EXIT_RESTART_CAP: "the job was restarted more often than the restart cap allows: not started",
}


def help_epilog(statuses: Iterable[int], otherwise: str) -> str:
    """The ``exit status`` section of a command's ``--help``: ``statuses`` with their
    :data:`MEANINGS`, then ``otherwise``, what any other status is."""
    rows = [f"  {status:<7}{MEANINGS[status]}" for status in statuses]
    return "\n".join(["exit status:", *rows, f"  {'other':<7}{otherwise}"])
