"""ParameterServerStrategy + ClusterCoordinator, with an optional side-car evaluator.

The chief (coordinator) schedules training steps on the workers; the variables live on the
parameter servers. ps and worker tasks never run this file's ``main``: ``tfslurm.run``
starts their TF servers and ends them soon after the chief finishes. A worker that dies is
left behind (its steps are retried on the others); a parameter server that dies ends the
run with exit 75 so that a requeue restarts it from the last checkpoint.

The evaluator task (jobs spec with ``evaluator:1``) follows the chief's checkpoints and
prints the loss of each, until the chief has finished.

Run: ``srun tfslurm run --jobs chief:1,ps:1,worker:* -- python -m tfslurm.examples.ps``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import tfslurm
from tfslurm.examples import common
from tfslurm.runtime import RunContext


def build(tf: Any) -> tuple[Any, Any, Any]:
    w = tf.Variable(tf.zeros([common.FEATURES, 1]), name="w")
    b = tf.Variable(0.0, name="b")
    step = tf.Variable(0, dtype=tf.int64, name="step")
    return w, b, step


def evaluate(ctx: RunContext, args: argparse.Namespace) -> int:
    """Evaluator: load each new checkpoint of the chief and report its loss."""
    import tensorflow as tf  # imported once tfslurm.run has set this task's variables

    if not args.checkpoint_dir:
        common.say("evaluator:0", "no --checkpoint-dir: nothing to evaluate")
        return 0
    w, b, step = build(tf)
    checkpoint = tf.train.Checkpoint(w=w, b=b, step=step)
    x, y = common.batch(tf, 256, seed=7)
    last, seen = None, 0
    while True:
        path = ctx.wait_for_checkpoint(args.checkpoint_dir, last)
        if path is None:
            break
        checkpoint.restore(path).expect_partial()
        loss = float(common.loss(tf, x, y, w, b))
        common.say("evaluator:0", f"evaluated {path} (step {int(step.numpy())}): loss {loss:.5f}")
        last, seen = path, seen + 1
    common.say("evaluator:0", f"chief finished; evaluated {seen} checkpoints")
    return 0


def train(ctx: RunContext, args: argparse.Namespace) -> int:
    """Chief: schedule steps on the workers through the ClusterCoordinator."""
    import tensorflow as tf  # imported once tfslurm.run has set this task's variables

    strategy, coordinator = ctx.strategy, ctx.coordinator
    with strategy.scope():
        w, b, step = build(tf)
    checkpoints = common.restored_checkpoints(ctx, args, "chief:0", tf.train.Checkpoint(w=w, b=b, step=step))

    @tf.function
    def worker_step() -> Any:
        x = tf.random.normal([args.batch, common.FEATURES])
        y = tf.matmul(x, tf.constant(common.TRUE_W)) + common.TRUE_B
        with tf.GradientTape() as tape:
            loss = common.loss(tf, x, y, w, b)
        gw, gb = tape.gradient(loss, [w, b])
        w.assign_sub(args.lr * gw)
        b.assign_sub(args.lr * gb)
        step.assign_add(1)
        return loss

    first = int(step.numpy())
    workers = ctx.role.cluster.count_of("worker")
    common.say("chief:0", f"scheduling steps {first + 1}..{args.steps} on {workers} workers")
    started = time.time()
    scheduled, loss = 0, None
    for current in range(first + 1, args.steps + 1):
        loss = coordinator.schedule(worker_step)
        scheduled += 1
        if args.step_delay:
            time.sleep(args.step_delay)
        if current % args.log_every == 0:
            coordinator.join()
            # the steps done so far are known only here: the supervisor times them, and a
            # worker whose heartbeats stop is hung after 3 such intervals, not the start-up's 60 s
            ctx.step(current)
            common.say(
                "chief:0",
                f"step {current}/{args.steps} loss "
                f"{float(loss.fetch()):.5f} (ps step counter {int(step.numpy())})",
            )
        if checkpoints is not None and args.checkpoint_every and (current % args.checkpoint_every == 0):
            coordinator.join()
            checkpoints.save(current)
        if current % args.check_every == 0 and ctx.should_stop():
            coordinator.join()
            if checkpoints is not None:
                path = checkpoints.save(int(step.numpy()))
                common.say("chief:0", f"preempted: checkpoint {path} saved at step {int(step.numpy())}")
            return 0
    coordinator.join()
    if checkpoints is not None:
        checkpoints.save(int(step.numpy()))
    counted = f"scheduled {scheduled} steps, ps step counter {int(step.numpy())}, final"
    common.say_weights("chief:0", counted, started, w.numpy(), b.numpy())
    return 0


def cli(argv: Sequence[str] | None = None) -> int:
    args = common.parse(common.parser("ParameterServerStrategy example"), argv)

    def main(ctx: RunContext) -> int:
        if ctx.role.job == "evaluator":
            return evaluate(ctx, args)
        return train(ctx, args)

    return tfslurm.run(main, jobs="chief:1,ps:1,worker:*")


if __name__ == "__main__":
    raise SystemExit(cli())
