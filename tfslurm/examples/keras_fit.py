"""Keras ``model.fit`` with ``keras.callbacks.BackupAndRestore``, stopped and resumed by
Slurm: one task (Keras 3 ``fit`` does not work under MultiWorkerMirroredStrategy).

BackupAndRestore saves the model and the epoch at the end of every epoch and restores them
when ``fit`` starts again. ``StopOnSignal`` ends ``fit`` at the next epoch end once
``tfslurm run`` reported a stop signal (preemption SIGTERM, the time-limit signal...), after
BackupAndRestore has saved that epoch. It raises instead of setting ``stop_training``:
BackupAndRestore deletes its backup when ``fit`` ends normally. The run then exits 85 and the
template requeues the job; the next run's ``fit`` continues from the saved epoch.

Run: ``sbatch -N1 mwms.sbatch python -m tfslurm.examples.keras_fit --epochs 40``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from typing import Any

import tfslurm
from tfslurm.examples import common
from tfslurm.runtime import RunContext, requested


class Stopped(Exception):
    """fit ended at an epoch boundary because a stop signal came."""


def main(ctx: RunContext, args: argparse.Namespace) -> int:
    import keras  # Keras and TensorFlow once tfslurm.run has set this task's variables
    import tensorflow as tf

    class StopOnSignal(keras.callbacks.Callback):  # type: ignore[misc]  # Keras is untyped
        def on_train_begin(self, logs: Any = None) -> None:  # after BackupAndRestore restored the epoch
            first = getattr(self.model, "_initial_epoch", None) or 0
            common.say(tag, f"restart {ctx.restart_count}: fit starts at epoch {first}")

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            common.say(tag, f"epoch {epoch + 1}/{args.epochs} loss {logs['loss']:.5f}")
            if args.step_delay:
                time.sleep(args.step_delay)
            if requested():
                raise Stopped(epoch + 1)

    tag = f"{ctx.role.job}:{ctx.role.index}"
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.Input((common.FEATURES,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(args.lr), loss="mse")
    x, y = common.batch(tf, args.batch * 8, seed=1000)
    backup = keras.callbacks.BackupAndRestore(os.path.join(args.checkpoint_dir, "backup"))
    started = time.time()
    try:  # BackupAndRestore first: it has saved the epoch when StopOnSignal raises
        model.fit(
            x.numpy(),
            y.numpy(),
            batch_size=args.batch,
            epochs=args.epochs,
            shuffle=False,
            verbose=0,
            callbacks=[backup, StopOnSignal()],
        )
    except Stopped as stop:
        common.say(tag, f"stopped at epoch {stop.args[0]}: BackupAndRestore saved it")
        return 0
    common.say_weights(tag, f"final epoch {args.epochs}", started, *(v.numpy() for v in model.weights))
    return 0


def cli(argv: Sequence[str] | None = None) -> int:
    p = common.parser("Keras fit with BackupAndRestore")
    p.add_argument("--epochs", type=int, default=40, help="epochs (8 steps each)")
    args = common.parse(p, argv, need_checkpoint_dir=True)
    if args.epochs < 1:
        p.error(f"--epochs {args.epochs}: must be at least 1")
    return tfslurm.run(lambda ctx: main(ctx, args))


if __name__ == "__main__":
    raise SystemExit(cli())
