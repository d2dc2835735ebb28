"""MultiWorkerMirroredStrategy with TensorFlow's own ``PreemptionCheckpointHandler``,
configured for Slurm by ``tfslurm.termination_config()``.

TF's handler restores the newest checkpoint when it is created, and ``handler.run(step)``
saves on every worker at the same step once any worker was told to stop (SIGTERM from a
preemption, ``scancel --signal``, the time-limit signal: ``tfslurm run`` turns each into the
flag the config watches), then exits 85 so the template requeues the job.

Run: ``srun tfslurm run -- python -m tfslurm.examples.mwms_handler --checkpoint-dir DIR``.
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

    import tfslurm

    strategy = ctx.strategy
    tag = f"{ctx.role.job}:{ctx.role.index}"
    with strategy.scope():
        w = tf.Variable(tf.random.normal([common.FEATURES, 1], seed=ctx.role.index), name="w")
        b = tf.Variable(0.0, name="b")
        step = tf.Variable(0, dtype=tf.int64, name="step")
    checkpoint = tf.train.Checkpoint(w=w, b=b, step=step)
    handler = tf.distribute.experimental.PreemptionCheckpointHandler(
        strategy.cluster_resolver,
        checkpoint,
        args.checkpoint_dir,
        termination_config=tfslurm.termination_config(),
    )
    common.say(
        tag, f"restart {ctx.restart_count}: PreemptionCheckpointHandler starts at step {int(step.numpy())}"
    )
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
    while int(step.numpy()) < args.steps:
        loss = float(handler.run(train_step, x, y))  # saves and exits 85 after a stop
        current = int(step.numpy())
        if ctx.is_chief and (current % args.log_every == 0 or current == args.steps):
            common.say(tag, f"step {current}/{args.steps} loss {loss:.5f}")
        if args.step_delay:
            time.sleep(args.step_delay)
    common.say(
        tag,
        f"final step {int(step.numpy())} weights "
        f"{common.digest(w.numpy(), b.numpy())} ({time.time() - started:.2f} s training)",
    )
    return 0


def cli(argv: Sequence[str] | None = None) -> int:
    p = common.parser("MWMS with TF's PreemptionCheckpointHandler")
    args = common.parse(p, argv)
    if not args.checkpoint_dir:
        p.error("--checkpoint-dir (or TFSLURM_CHECKPOINT_DIR) is required")
    import tfslurm

    return tfslurm.run(lambda ctx: main(ctx, args))


if __name__ == "__main__":
    raise SystemExit(cli())
