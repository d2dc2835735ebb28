"""MultiWorkerMirroredStrategy with a custom training loop (Keras 3 ``fit`` is broken under
MWMS), preemption-safe: on the preemption signal every worker stops at the same step, the
chief writes a checkpoint, and a requeued run resumes from it with the step count going on.

Run: ``srun tfslurm run -- python -m tfslurm.examples.mwms --steps 200``.
Every worker prints ``final step N weights <digest>``: the digests are equal when the
workers stayed in sync.
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
    checkpoints = common.restored_checkpoints(ctx, args, tag, tf.train.Checkpoint(w=w, b=b, step=step))
    x, y = common.batch(tf, args.batch, seed=1000 + ctx.role.index)
    train_step = common.mwms_train_step(tf, ctx, args, w, b, step)
    started = time.time()
    if ctx.is_chief:
        workers = ctx.strategy.num_replicas_in_sync
        common.say(tag, f"training {args.steps} steps on {workers} workers from step {int(step.numpy())}")
    while int(step.numpy()) < args.steps:
        loss = float(train_step(x, y))
        current = int(step.numpy())
        common.stepped(ctx, tag, args, current, loss)
        if checkpoints is not None and args.checkpoint_every and (current % args.checkpoint_every == 0):
            if current == args.slow_save_at:  # a save that takes long (a slow filesystem)
                time.sleep(args.slow_save)
            checkpoints.save(current)
        if current % args.check_every == 0 and ctx.should_stop():
            if checkpoints is not None:
                path = checkpoints.save(current)
                if ctx.is_chief:
                    common.say(tag, f"preempted: checkpoint {path} saved at step {current}")
            else:
                common.say(tag, f"preempted at step {current} (no --checkpoint-dir)")
            return 0
    if checkpoints is not None:
        checkpoints.save(int(step.numpy()))
    common.say_weights(tag, f"final step {int(step.numpy())}", started, w.numpy(), b.numpy())
    return 0


def cli(argv: Sequence[str] | None = None) -> int:
    p = common.parser("MWMS custom-loop example")
    p.add_argument(
        "--slow-save", type=float, default=0.0, help="seconds the save at --slow-save-at takes more, to test"
    )
    p.add_argument("--slow-save-at", type=int, default=-1, help="the periodic checkpoint's step that is slow")
    args = common.parse(p, argv)
    return tfslurm.run(lambda ctx: main(ctx, args))


if __name__ == "__main__":
    raise SystemExit(cli())
