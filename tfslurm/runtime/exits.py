"""The exit statuses a tfslurm run ends with, each defined once.

The templates, ``tfslurm supervise`` and a job's dependencies read these numbers: a stopped
training must never end with 0 (the job would be COMPLETED), and each way of ending has its
own status so that the batch script can tell requeue from give-up from failure.
"""

from __future__ import annotations

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
