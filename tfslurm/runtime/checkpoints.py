"""Checkpoints that work the same under MWMS, PSS and after a requeue.

MWMS: every worker must take part in a save (saving can run collectives), but only the chief
may write to the real directory; the others write to a private scratch directory that is
deleted right after (TF's documented pattern). PSS: only the chief (coordinator) saves; the
variables live on the parameter servers and are read through it. Restoring reads the chief's
directory on every task, which must therefore be on a filesystem all nodes share.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from tfslurm.runtime.roles import Role


class Checkpoints:
    """A ``tf.train.CheckpointManager`` plus the chief/non-chief directory rule."""

    __slots__ = (
        "_tf",
        "checkpoint",
        "directory",
        "manager",
        "max_to_keep",
        "removed",
        "role",
        "strategy",
        "write_dir",
    )

    def __init__(
        self,
        checkpoint: Any,
        directory: str,
        role: Role,
        max_to_keep: int = 3,
        strategy: Any = None,  # MWMS: save() ends with a barrier (see save)
    ) -> None:
        import tensorflow as tf  # here: importing the runtime never loads TensorFlow

        self.checkpoint = checkpoint
        self.directory = directory
        self.role = role
        self.max_to_keep = max_to_keep
        self.strategy = strategy
        self._tf = tf
        self.write_dir = directory
        if not role.is_chief:
            self.write_dir = os.path.join(directory, f".scratch-{role.job}-{role.index}")
        self.removed = remove_leftovers(directory, self.write_dir, role.is_chief)
        self.manager = tf.train.CheckpointManager(checkpoint, self.write_dir, max_to_keep=max_to_keep)

    @property
    def latest(self) -> str | None:
        """The newest checkpoint in the chief's directory, or None."""
        path: str | None = self._tf.train.latest_checkpoint(self.directory)
        return path

    def restore(self) -> str | None:
        """Restore the newest checkpoint if there is one; returns its path."""
        path = self.latest
        if path is not None:
            self.checkpoint.restore(path).expect_partial()
        return path

    def save(self, step: int | None = None) -> str:
        """Save (every MWMS worker must call this); returns the chief's checkpoint path."""
        path: str = self.manager.save(checkpoint_number=step)
        if self.write_dir != self.directory:
            shutil.rmtree(self.write_dir, ignore_errors=True)
        self._barrier()
        return path

    def _barrier(self) -> None:
        """MWMS: no worker returns from save() before the chief has written its files. A
        worker that then exits (stopped early: status 85) ends the step under
        ``srun --kill-on-bad-exit``, which would otherwise kill a chief still writing."""
        tf = self._tf
        if not isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            return
        barrier = getattr(self.strategy, "_tfslurm_barrier", None)
        if barrier is None:
            strategy = self.strategy

            def one() -> Any:
                per_replica = strategy.run(tf.identity, args=(tf.constant(1.0),))
                return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

            barrier = tf.function(one)
            strategy._tfslurm_barrier = barrier
        barrier().numpy()


def remove_leftovers(directory: str, write_dir: str, is_chief: bool) -> list[str]:
    """Remove what killed saves left: this task's scratch directory and, on the chief,
    ``*_temp`` entries and other tasks' ``.scratch-*`` directories. Returns the paths."""
    removed = []
    if write_dir != directory and os.path.lexists(write_dir):
        shutil.rmtree(write_dir, ignore_errors=True)
        removed.append(write_dir)
    if is_chief and os.path.isdir(directory):
        for name in sorted(os.listdir(directory)):
            if name.startswith(".scratch-") or (name.startswith("ckpt") and "_temp" in name):
                path = os.path.join(directory, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    try:
                        os.unlink(path)
                    except OSError:
                        continue
                removed.append(path)
    return removed
