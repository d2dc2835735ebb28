"""Shared bits of the example programs: quiet TF defaults, data, a weight digest."""

from __future__ import annotations

import argparse
import hashlib
import os
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
        help="sleep this long after each step (to watch or preempt a short run)",
    )
    return p


def parse(p: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> argparse.Namespace:
    args = p.parse_args(argv)
    for name in ("batch", "log_every", "check_every"):  # divisors and tensor shapes
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    if args.checkpoint_every < 0:
        p.error(f"--checkpoint-every {args.checkpoint_every}: must be 0 (off) or more")
    if args.checkpoint_dir is None:
        args.checkpoint_dir = os.environ.get("TFSLURM_CHECKPOINT_DIR") or None
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


def say(tag: str, text: str) -> None:
    print(f"[{tag}] {text}", flush=True)
