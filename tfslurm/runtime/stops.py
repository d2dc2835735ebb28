"""How a run ends when Slurm stops it early: which signals mean "stop", what status the
run exits with, and when a restarted job must give up.

Every way Slurm stops a job reaches the tasks as a signal: the time-limit warning
(``--signal``, USR1 by default), preemption and ``scontrol requeue`` (SIGTERM, then SIGKILL
after GraceTime or KillWait), ``scancel --signal``. ``tfslurm run``'s supervising process
catches every stop signal and tells the program through the preemption signal (a Python
handler TF does not replace: MultiWorkerMirroredStrategy installs its own C-level SIGTERM
handler, so SIGTERM itself never reaches Python there). A program stopped that way must not
exit 0: the job would end COMPLETED with training unfinished. It exits ``EXIT_STOPPED``,
which the templates turn into a requeue (``scontrol requeue``, or slurm.conf
``RequeueExit=85`` where there is no scontrol).
"""

from __future__ import annotations

import signal
from collections.abc import Mapping

from tfslurm import settings
from tfslurm.runtime.exits import EXIT_RESTART_CAP
from tfslurm.settings import Settings
from tfslurm.step import restart_count_from_environ

DEFAULT_STOP_SIGNALS = settings.DEFAULT_STOP_SIGNALS  # plus the preemption signal itself

# Parsed where the setting is read (tfslurm.settings); the names stay here for callers.
signal_number = settings.signal_number
stop_signals = settings.stop_signals


def describe(signum: int) -> str:
    """Why this signal probably came, for the one-line log."""
    name = signal.Signals(signum).name
    if signum == signal.SIGTERM:
        return (
            f"{name} (preemption, scancel or scontrol requeue: Slurm sends SIGKILL after GraceTime/KillWait)"
        )
    return f"{name} (the time-limit warning of --signal, or scancel --signal)"


def max_restarts(
    value: int | str | None, env: Mapping[str, str] | None = None, *, given: Settings | None = None
) -> int | None:
    """``--max-restarts``, else TFSLURM_MAX_RESTARTS (of ``given``, else of ``env``): an
    integer >= 0, or None (no cap)."""
    if value is None:
        return (given or Settings.from_environ(env)).max_restarts()
    return settings.parse_max_restarts(value)


def stop_grace(
    value: float | str | None, env: Mapping[str, str] | None = None, *, given: Settings | None = None
) -> float | None:
    """``--stop-grace``, else TFSLURM_STOP_GRACE (of ``given``, else of ``env``): seconds
    >= 0 from a stop signal to SIGKILL, or None (leave it to Slurm)."""
    if value is None:
        return (given or Settings.from_environ(env)).stop_grace()
    return settings.parse_stop_grace(value)


def restart_count(env: Mapping[str, str] | None = None) -> int:
    """This run's restart number (SLURM_RESTART_COUNT, through ``tfslurm.step``). Only that
    variable is read: the cap is checked before anything else, and a task whose role comes
    from TF_CONFIG must not fail on some other SLURM_* variable here."""
    return restart_count_from_environ(env)


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
