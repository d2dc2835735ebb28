"""MultiWorkerMirroredStrategy with a custom training loop (Keras 3 ``fit`` is broken under
MWMS), preemption-safe: on the preemption signal every worker stops at the same step, the
chief writes a checkpoint, and a requeued run resumes from it with the step count going on.

Run: ``srun tfslurm run -- python -m tfslurm.examples.mwms --steps 200``.
Every worker prints ``final step N weights <digest>``: the digests are equal when the
workers stayed in sync.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from tfslurm.examples import common

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from tfslurm.runtime.api import RunContext


def main(ctx: RunContext, args: argparse.Namespace) -> int:
    import tensorflow as tf

    strategy = ctx.strategy
    tag = f"{ctx.role.job}:{ctx.role.index}"
    with strategy.scope():
        w = tf.Variable(tf.random.normal([common.FEATURES, 1], seed=ctx.role.index), name="w")
        b = tf.Variable(0.0, name="b")
        step = tf.Variable(0, dtype=tf.int64, name="step")
    checkpoints = common.restored_checkpoints(ctx, args, tag, tf.train.Checkpoint(w=w, b=b, step=step))
    x, y = common.batch(tf, args.batch, seed=1000 + ctx.role.index)

    def replica_grads(x: Any, y: Any) -> tuple[Any, ...]:
        with tf.GradientTape() as tape:
            loss = common.loss(tf, x, y, w, b)
        return (loss, *tape.gradient(loss, [w, b]))

    @tf.function
    def train_step(x: Any, y: Any) -> Any:
        loss, gw, gb = strategy.run(replica_grads, args=(x, y))
        mean = tf.distribute.ReduceOp.MEAN
        loss, gw, gb = (strategy.reduce(mean, t, axis=None) for t in (loss, gw, gb))
        w.assign_sub(args.lr * gw)
        b.assign_sub(args.lr * gb)
        step.assign_add(1)
        return loss

    started = time.time()
    if ctx.is_chief:
        common.say(
            tag,
            f"training {args.steps} steps on "
            f"{strategy.num_replicas_in_sync} workers from step {int(step.numpy())}",
        )
    while int(step.numpy()) < args.steps:
        loss = float(train_step(x, y))
        current = int(step.numpy())
        if ctx.is_chief and (current % args.log_every == 0 or current == args.steps):
            common.say(tag, f"step {current}/{args.steps} loss {loss:.5f}")
        if args.step_delay:
            time.sleep(args.step_delay)
        if checkpoints is not None and args.checkpoint_every and (current % args.checkpoint_every == 0):
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
    common.say(
        tag,
        f"final step {int(step.numpy())} weights "
        f"{common.digest(w.numpy(), b.numpy())} "
        f"({time.time() - started:.2f} s training)",
    )
    return 0


def cli(argv: Sequence[str] | None = None) -> int:
    args = common.parse(common.parser("MWMS custom-loop example"), argv)
    import tfslurm

    return tfslurm.run(lambda ctx: main(ctx, args))


if __name__ == "__main__":
    raise SystemExit(cli())
