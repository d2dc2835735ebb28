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
from collections.abc import Iterable, Iterator
from typing import Any


class Preemption:
    """The preemption flag of this process. ``install()`` makes its :meth:`on_signal` the
    handler; the process's signal table then holds it, which is how :func:`installed` and
    :func:`requested` find it without any state of this module.

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

    def on_signal(self, signum: int, frame: Any) -> None:
        self.request()

    def install(self, also: tuple[int, ...] = ()) -> Preemption:
        """Handle the preemption signal, and ``also`` these (e.g. SIGTERM: a handler TF may
        replace, which is why ``tfslurm run``'s parent translates it)."""
        for signum in dict.fromkeys((self.signum, *also)):
            signal.signal(signum, self.on_signal)
        return self


def _flags(signals: Iterable[int]) -> Iterator[Preemption]:
    """The flags whose handlers this process has for ``signals``."""
    for signum in signals:
        try:
            owner = getattr(signal.getsignal(signum), "__self__", None)
        except ValueError:  # a signal number Python cannot ask about
            continue
        if isinstance(owner, Preemption):
            yield owner


def installed(signum: int | None = None) -> Preemption | None:
    """The flag this process handles the preemption signal ``signum`` with (any preemption
    signal when None); None when there is none."""
    candidates = signal.valid_signals() if signum is None else (signum,)
    return next((f for f in _flags(candidates) if signum in (None, f.signum)), None)


def install(signum: int, also: tuple[int, ...] = ()) -> Preemption:
    """Handle the preemption signal ``signum`` and ``also`` these stop signals in this
    process, and return the flag. A signal's handler is process state: the flag already
    installed for ``signum`` is returned as it is when nothing is added, and a new one
    keeps a request the old one had."""
    previous = installed(signum)
    if previous is not None and not also:
        return previous
    return Preemption(signum, previous.received_at if previous else None).install(also)


def requested() -> bool:
    """True once this process received the preemption signal (False if none installed):
    asked of the handlers in this process's signal table."""
    return any(flag.requested for flag in _flags(signal.valid_signals()))


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
