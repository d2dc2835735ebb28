"""Shared bits of the example programs: quiet TF defaults, options, data, the linear model
and its synchronous training step, a weight digest."""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from collections.abc import Sequence
from typing import Any

# TF reads these when it is imported: keep its start-up log short on CPU-only machines.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

FEATURES = 4
TRUE_W = [[1.0], [-2.0], [3.0], [0.5]]
TRUE_B = 0.25


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=200, help="total training steps")
    p.add_argument("--batch", type=int, default=32, help="batch size per worker")
    p.add_argument("--lr", type=float, default=0.05, help="learning rate")
    p.add_argument("--log-every", type=int, default=20, help="print progress every N steps")
    p.add_argument("--check-every", type=int, default=5, help="check for preemption every N steps")
    p.add_argument(
        "--checkpoint-dir",
        default=None,
        help="checkpoint directory on a filesystem all nodes share "
        "(default: $TFSLURM_CHECKPOINT_DIR; none = no checkpoints)",
    )
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        help="also checkpoint every N steps (0: only on preemption and at the end)",
    )
    p.add_argument(
        "--step-delay",
        type=float,
        default=0.0,
        help="sleep this long after each step (to watch or preempt a short run); "
        "the sleep counts as the rank's own work (ctx.own_time)",
    )
    p.add_argument(
        "--slow-node",
        default=None,
        help="the rank on this node sleeps --slow-by times longer after each step: a straggler, to test",
    )
    p.add_argument("--slow-by", type=float, default=1.5, help="how much longer --slow-node sleeps (a factor)")
    return p


def parse(
    p: argparse.ArgumentParser, argv: Sequence[str] | None = None, need_checkpoint_dir: bool = False
) -> argparse.Namespace:
    args = p.parse_args(argv)
    for name in ("batch", "log_every", "check_every"):  # divisors and tensor shapes
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    if args.slow_by < 1:
        p.error(f"--slow-by {args.slow_by}: must be at least 1 (a factor)")
    if args.checkpoint_every < 0:
        p.error(f"--checkpoint-every {args.checkpoint_every}: must be 0 (off) or more")
    if args.checkpoint_dir is None:
        args.checkpoint_dir = os.environ.get("TFSLURM_CHECKPOINT_DIR") or None
    if need_checkpoint_dir and not args.checkpoint_dir:
        p.error("--checkpoint-dir (or TFSLURM_CHECKPOINT_DIR) is required")
    return args


def batch(tf: Any, rows: int, seed: int) -> tuple[Any, Any]:
    """A deterministic batch of y = x.w + b + noise; every worker gets its own seed."""
    gen = tf.random.Generator.from_seed(seed)
    x = gen.normal([rows, FEATURES])
    y = tf.matmul(x, tf.constant(TRUE_W)) + TRUE_B + 0.01 * gen.normal([rows, 1])
    return x, y


def loss(tf: Any, x: Any, y: Any, w: Any, b: Any) -> Any:
    """Mean squared error of the linear model ``x.w + b``."""
    return tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))


def mwms_model(tf: Any, ctx: Any) -> tuple[Any, Any, Any]:
    """The weights, the bias and the step counter of an MWMS worker, in the strategy's scope.
    Each worker draws its own initial weights: MWMS must broadcast worker 0's."""
    with ctx.strategy.scope():
        w = tf.Variable(tf.random.normal([FEATURES, 1], seed=ctx.role.index), name="w")
        b = tf.Variable(0.0, name="b")
        step = tf.Variable(0, dtype=tf.int64, name="step")
    return w, b, step


def mwms_train_step(tf: Any, ctx: Any, args: argparse.Namespace, w: Any, b: Any, step: Any) -> Any:
    """``train_step(x, y) -> loss``: one SGD step of every worker with the mean of their
    gradients (all-reduced by MWMS), counted in ``step``."""
    strategy = ctx.strategy

    def replica_grads(x: Any, y: Any) -> tuple[Any, ...]:
        with tf.GradientTape() as tape:
            mse = loss(tf, x, y, w, b)
        return (mse, *tape.gradient(mse, [w, b]))

    @tf.function
    def train_step(x: Any, y: Any) -> Any:
        mse, gw, gb = strategy.run(replica_grads, args=(x, y))
        mean = tf.distribute.ReduceOp.MEAN
        mse, gw, gb = (strategy.reduce(mean, t, axis=None) for t in (mse, gw, gb))
        w.assign_sub(args.lr * gw)
        b.assign_sub(args.lr * gb)
        step.assign_add(1)
        return mse

    return train_step


def stepped(ctx: Any, tag: str, args: argparse.Namespace, current: int, mse: float) -> None:
    """After step ``current`` of an MWMS worker: the chief reports progress every
    ``--log-every`` steps and at the last; every worker waits ``--step-delay`` (the one on
    ``--slow-node`` ``--slow-by`` times longer) as its own work in the next step."""
    ctx.step(current)
    if ctx.is_chief and (current % args.log_every == 0 or current == args.steps):
        say(tag, f"step {current}/{args.steps} loss {mse:.5f}")
    if args.step_delay:
        slow = args.slow_node is not None and ctx.role.address().node == args.slow_node
        with ctx.own_time():
            time.sleep(args.step_delay * (args.slow_by if slow else 1.0))


def restored_checkpoints(ctx: Any, args: argparse.Namespace, tag: str, checkpoint: Any) -> Any:
    """The run's checkpoint manager restored to its latest checkpoint (None without
    ``--checkpoint-dir``); says where it resumed from after a requeue."""
    if not args.checkpoint_dir:
        return None
    checkpoints = ctx.checkpoints(checkpoint, args.checkpoint_dir)
    for left in checkpoints.removed:
        say(tag, f"removed {left} (left by a killed save)")
    path = checkpoints.restore()
    if path:
        say(tag, f"restart {ctx.restart_count}: resumed from {path} at step {int(checkpoint.step.numpy())}")
    return checkpoints


def digest(*arrays: Any) -> str:
    """sha256 of the raw bytes of the arrays: equal iff the weights are bit-identical."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def say_weights(tag: str, what: str, started: float, *arrays: Any) -> None:
    """The line a finished run ends with: ``<what> weights <digest> (N s training)``."""
    say(tag, f"{what} weights {digest(*arrays)} ({time.time() - started:.2f} s training)")


def say(tag: str, text: str) -> None:
    print(f"[{tag}] {text}", flush=True)
