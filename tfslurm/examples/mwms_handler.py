"""MultiWorkerMirroredStrategy with TensorFlow's own ``PreemptionCheckpointHandler``,
configured for Slurm by ``tfslurm.termination_config()``.

TF's handler restores the newest checkpoint when it is created, and ``handler.run(step)``
saves on every worker at the same step once any worker was told to stop (SIGTERM from a
preemption, ``scancel --signal``, the time-limit signal: ``tfslurm run`` turns each into the
flag the config watches), then exits 85 so the template requeues the job.

Run: ``srun tfslurm run -- python -m tfslurm.examples.mwms_handler --checkpoint-dir DIR``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import tfslurm
from tfslurm.examples import common
from tfslurm.runtime import RunContext


def main(ctx: RunContext, args: argparse.Namespace) -> int:
    import tensorflow as tf  # imported once tfslurm.run has set this task's variables

    tag = f"{ctx.role.job}:{ctx.role.index}"
    w, b, step = common.mwms_model(tf, ctx)
    checkpoint = tf.train.Checkpoint(w=w, b=b, step=step)
    handler = tf.distribute.experimental.PreemptionCheckpointHandler(
        ctx.strategy.cluster_resolver,
        checkpoint,
        args.checkpoint_dir,
        termination_config=tfslurm.termination_config(),
    )
    common.say(
        tag, f"restart {ctx.restart_count}: PreemptionCheckpointHandler starts at step {int(step.numpy())}"
    )
    x, y = common.batch(tf, args.batch, seed=1000 + ctx.role.index)
    train_step = common.mwms_train_step(tf, ctx, args, w, b, step)
    started = time.time()
    while int(step.numpy()) < args.steps:
        loss = float(handler.run(train_step, x, y))  # saves and exits 85 after a stop
        common.stepped(ctx, tag, args, int(step.numpy()), loss)
    common.say_weights(tag, f"final step {int(step.numpy())}", started, w.numpy(), b.numpy())
    return 0


def cli(argv: Sequence[str] | None = None) -> int:
    p = common.parser("MWMS with TF's PreemptionCheckpointHandler")
    args = common.parse(p, argv, need_checkpoint_dir=True)
    return tfslurm.run(lambda ctx: main(ctx, args))


if __name__ == "__main__":
    raise SystemExit(cli())
