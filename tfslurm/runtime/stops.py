"""How a run ends when Slurm stops it early: which signals mean "stop", what status the
run exits with, and when a restarted job must give up.

Every way Slurm stops a job reaches the tasks as a signal: the time-limit warning
(``--signal``, USR1 by default), preemption and ``scontrol requeue`` (SIGTERM, then SIGKILL
after GraceTime or KillWait), ``scancel --signal``. ``tfslurm run``'s parent process
catches every stop signal and tells the program through the preemption signal (a Python
handler TF does not replace: MultiWorkerMirroredStrategy installs its own C-level SIGTERM
handler, so SIGTERM itself never reaches Python there). A program stopped that way must not
exit 0: the job would end COMPLETED with training unfinished. It exits ``EXIT_STOPPED``,
which the templates turn into a requeue (``scontrol requeue``, or slurm.conf
``RequeueExit=85`` where there is no scontrol).
"""

from __future__ import annotations

import signal

from tfslurm.runtime.exits import EXIT_RESTART_CAP


def describe(signum: int) -> str:
    """Why this signal probably came, for the one-line log."""
    name = signal.Signals(signum).name
    if signum == signal.SIGTERM:
        return (
            f"{name} (preemption, scancel or scontrol requeue: Slurm sends SIGKILL after GraceTime/KillWait)"
        )
    return f"{name} (the time-limit warning of --signal, or scancel --signal)"


def restart_cap_message(restarts: int, cap: int | None) -> str | None:
    """The one-line reason to stop when this run is restart number ``restarts`` and the cap
    is ``cap``; None when the run may go on."""
    if cap is None or restarts <= cap:
        return None
    return (
        f"the job was restarted {restarts} times, more than --max-restarts {cap}: "
        f"not starting again (exit {EXIT_RESTART_CAP}; earlier runs of this log say why "
        "they stopped)"
    )


def ignore_signals(signals: tuple[int, ...]) -> None:
    """Once a task has its status: the first task to exit non-zero ends the step (srun
    --kill-on-bad-exit sends SIGTERM to the rest), and Python's shutdown puts the default
    action back for signals with Python handlers, so a task that already has its status
    would die of that SIGTERM (143) instead. SIG_IGN survives the shutdown."""
    for signum in signals:
        signal.signal(signum, signal.SIG_IGN)
