"""Preemption: a signal before the time limit becomes a flag the training loop checks.

Slurm sends the signal chosen with ``#SBATCH --signal=B:USR1@120`` (to the batch shell,
which forwards it to the step) or ``--signal=USR1@120`` (to every task). The handler only
sets a flag; the program checkpoints at its next step boundary and returns, and the batch
script runs ``scontrol requeue``. On restart ``SLURM_RESTART_COUNT`` > 0 and the program
restores its last checkpoint, so the step count continues.

Under MultiWorkerMirroredStrategy every worker must stop at the *same* step (the steps are
collectives), so ``agreed_stop`` all-reduces the flag: if any worker saw the signal, all stop.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from tfslurm.errors import PreemptionError, StopError
from tfslurm.runtime import stops
from tfslurm.settings import DEFAULT_PREEMPT_SIGNAL, Settings

DEFAULT_SIGNAL = DEFAULT_PREEMPT_SIGNAL


def signal_number(name: str | int | None, settings: Settings | None = None) -> int:
    """``USR1``, ``SIGUSR1``, ``10`` -> 10; None: TFSLURM_PREEMPT_SIGNAL of ``settings``
    (default: read from ``os.environ``), else USR1."""
    if name is None:
        return (Settings.from_environ() if settings is None else settings).preempt_signal()
    try:
        return stops.signal_number(name)
    except StopError as exc:
        raise PreemptionError(str(exc)) from None


class Preemption:
    """The preemption flag of this process. ``install()`` sets the signal handler.

    A plain attribute, no lock: the handler can run again while it is already running
    (the signal arrives twice, from srun and from tfslurm run's parent), and a handler
    that takes a lock would then deadlock on it.
    """

    __slots__ = ("received_at", "signum")

    def __init__(self, signum: int, received_at: float | None = None) -> None:
        self.signum = signum
        self.received_at = received_at

    @property
    def requested(self) -> bool:
        return self.received_at is not None

    def request(self) -> None:
        """Set the flag by hand (what the signal handler does)."""
        if self.received_at is None:
            self.received_at = time.time()

    def install(self, also: tuple[int, ...] = ()) -> Preemption:
        """Handle the preemption signal, and ``also`` these (e.g. SIGTERM: a handler TF may
        replace, which is why ``tfslurm run``'s parent translates it)."""

        def handler(signum: int, frame: Any) -> None:
            self.request()

        for signum in dict.fromkeys((self.signum, *also)):
            signal.signal(signum, handler)
        return self


_current: Preemption | None = None


def install(
    name: str | int | None = None, also: tuple[int, ...] = (), settings: Settings | None = None
) -> Preemption:
    """Install (once per process) the handler for the preemption signal (``name``, else
    that of ``settings``; see :func:`signal_number`) and ``also`` these stop signals, and
    return the flag.

    A signal's handler is process state, so there is one flag per process.
    """
    global _current
    signum = signal_number(name, settings)
    if _current is None or _current.signum != signum or also:
        previous = _current
        _current = Preemption(signum).install(also)
        if previous is not None and previous.requested:
            _current.request()
    return _current


def requested() -> bool:
    """True once this process received the preemption signal (False if none installed)."""
    return _current is not None and _current.requested


def agreed_stop(strategy: Any, local_flag: bool) -> bool:
    """True on every worker if any worker's flag is set (one small all-reduce under MWMS;
    just the local flag for other strategies)."""
    import tensorflow as tf  # here: importing the runtime never loads TensorFlow

    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return local_flag

    agree: Any = getattr(strategy, "_tfslurm_agree", None)
    if agree is None:

        def flag_sum(value: Any) -> Any:
            per_replica = strategy.run(tf.identity, args=(value,))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        agree = tf.function(flag_sum)  # traced once: eager collectives are slow and noisy
        strategy._tfslurm_agree = agree
    total = agree(tf.constant(1.0 if local_flag else 0.0))
    return float(total.numpy()) > 0.0
