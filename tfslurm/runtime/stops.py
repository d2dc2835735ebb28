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

import os
import signal
from collections.abc import Mapping

from tfslurm.errors import StopError

# The program checkpointed and stopped before its training was done: requeue the job.
EXIT_STOPPED = 85
# The job was restarted more often than --max-restarts allows: do not start (or requeue).
EXIT_RESTART_CAP = 86

DEFAULT_STOP_SIGNALS = ("TERM",)  # plus the preemption signal itself


def signal_number(name: str | int, what: str = "preemption signal") -> int:
    """``USR1``, ``SIGUSR1``, ``10`` -> 10; a one-line error otherwise."""
    text = str(name).strip()
    if isinstance(name, int) or (text.isascii() and text.isdigit()):
        number = int(text)
        try:
            signal.Signals(number)
        except ValueError:
            raise StopError(f"{what} {name!r} is not a signal number") from None
    else:
        upper = text.upper()
        upper = upper if upper.startswith("SIG") else "SIG" + upper
        try:
            number = int(signal.Signals[upper])
        except KeyError:
            raise StopError(f"{what} {name!r} is not a signal name (try USR1, USR2, TERM)") from None
    if number in (signal.SIGKILL, signal.SIGSTOP):
        raise StopError(f"{what} {name!r} cannot be caught")
    return number


def stop_signals(text: str | None, preempt: int) -> tuple[int, ...]:
    """The signals that ask for checkpoint-and-stop: ``TERM,USR2`` (TFSLURM_STOP_SIGNALS or
    ``--stop-signals``; default SIGTERM), always with the preemption signal itself."""
    names = DEFAULT_STOP_SIGNALS if text is None else [t for t in text.split(",") if t.strip()]
    numbers = [signal_number(n, "stop signal") for n in names]
    if signal.SIGINT in numbers:
        raise StopError(
            "stop signal INT: SIGINT stays Ctrl-C (forwarded, then the program "
            "is ended); choose TERM, USR1, USR2, ..."
        )
    return tuple(dict.fromkeys([preempt, *numbers]))


def describe(signum: int) -> str:
    """Why this signal probably came, for the one-line log."""
    name = signal.Signals(signum).name
    if signum == signal.SIGTERM:
        return (
            f"{name} (preemption, scancel or scontrol requeue: Slurm sends SIGKILL after GraceTime/KillWait)"
        )
    return f"{name} (the time-limit warning of --signal, or scancel --signal)"


def max_restarts(value: int | str | None, env: Mapping[str, str] | None = None) -> int | None:
    """``--max-restarts`` or TFSLURM_MAX_RESTARTS: an integer >= 0, or None (no cap)."""
    if value is None:
        value = (os.environ if env is None else env).get("TFSLURM_MAX_RESTARTS") or None
        if value is None:
            return None
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()):
        raise StopError(
            f"max restarts {value!r} is not an integer >= 0 "
            "(--max-restarts / TFSLURM_MAX_RESTARTS; unset for no cap)"
        )
    return int(text)


def stop_grace(value: float | str | None, env: Mapping[str, str] | None = None) -> float | None:
    """``--stop-grace`` or TFSLURM_STOP_GRACE: seconds >= 0 from a stop signal to SIGKILL,
    or None (leave it to Slurm)."""
    if value is None:
        value = (os.environ if env is None else env).get("TFSLURM_STOP_GRACE") or None
        if value is None:
            return None
    try:
        seconds = float(str(value).strip())
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):  # also refuses nan
        raise StopError(
            f"stop grace {value!r} is not a number of seconds >= 0 "
            "(--stop-grace / TFSLURM_STOP_GRACE; unset: Slurm's SIGKILL)"
        )
    return seconds


def restart_count(env: Mapping[str, str] | None = None) -> int:
    """This run's restart number (SLURM_RESTART_COUNT, through ``Step``). Only that variable
    is read: the cap is checked before anything else, and a task whose role comes from
    TF_CONFIG must not fail on some other SLURM_* variable here."""
    from tfslurm.step import Step

    env = os.environ if env is None else env
    return Step.from_environ({k: env[k] for k in ("SLURM_RESTART_COUNT",) if k in env}).restart_count


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
