"""TensorFlow's own preemption mechanism on Slurm: a ``TerminationConfig`` for
``tf.distribute.experimental.PreemptionCheckpointHandler``.

TF's handler either installs a SIGTERM handler (which MWMS's C-level handler and Slurm's
signal choice defeat) or polls a ``termination_watcher_fn``. Here the watcher is tfslurm's
preemption flag, which ``tfslurm run`` sets on every stop signal (SIGTERM, the preemption
signal, ``--stop-signals``); the handler then saves on every worker at the same step, and the
exit function ends the run with status 85 (requeue, never COMPLETED).
"""

from __future__ import annotations

import math
import sys
from typing import Any

from tfslurm.errors import StopError
from tfslurm.numbers import is_int_in
from tfslurm.runtime import exits, preemption
from tfslurm.settings import Settings, signal_number


def termination_config(
    grace_period: float = 0, exit_code: int = exits.EXIT_STOPPED, signal: str | int | None = None
) -> Any:
    """A ``tf.distribute.experimental.TerminationConfig`` for Slurm.

    ``grace_period``: seconds from the signal to Slurm's SIGKILL that TF may use to keep
    training before it saves (0: save at the next step; keep it below GraceTime minus the
    save time). ``exit_code``: the status after the save (85 makes the templates requeue).
    ``signal``: the preemption signal (default: the one this process already handles, as
    under ``tfslurm run`` or ``tfslurm.run``, else TFSLURM_PREEMPT_SIGNAL or USR1).
    """
    if (
        isinstance(grace_period, bool)
        or not isinstance(grace_period, (int, float))
        or not (math.isfinite(grace_period) and grace_period >= 0)
    ):
        raise StopError(f"grace_period {grace_period!r}: expected seconds >= 0")
    if not is_int_in(exit_code, 1, 255):
        raise StopError(
            f"exit_code {exit_code!r}: expected 1..255 (0 would report a stopped training as COMPLETED)"
        )
    if signal is not None:
        flag = preemption.install(signal_number(signal))
    else:  # a program's entry point: the settings are read here when no flag is installed
        flag = preemption.installed() or preemption.install(Settings.from_environ().preempt_signal())
    import tensorflow as tf  # here: importing tfslurm never loads TensorFlow

    def exit_fn() -> None:
        print(
            f"tfslurm: checkpoint saved by PreemptionCheckpointHandler after a stop signal: exit {exit_code}",
            file=sys.stderr,
            flush=True,
        )
        sys.stdout.flush()
        raise SystemExit(exit_code)

    return tf.distribute.experimental.TerminationConfig(
        termination_watcher_fn=lambda: flag.requested,
        exit_fn=exit_fn,
        grace_period=grace_period,
    )
