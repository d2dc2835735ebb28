"""A real TensorFlow run through tfslurm.SlurmClusterResolver on the real Slurm cluster.

MultiWorkerMirroredStrategy, 2 workers on 2 nodes (tensorflow-cpu), a custom training loop
(Keras 3 ``model.fit`` under MWMS is broken upstream: keras-team/keras#20585). Each worker
starts from a different seed and trains on different data, so the final weights agree only
if MWMS really broadcast the initial variables and all-reduced every gradient over the
addresses the resolver gave it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import needs

pytestmark = [pytest.mark.cluster, pytest.mark.train, pytest.mark.tf, needs("tensorflow")]

WORKER = r"""
import json, os, sys
import numpy as np
import tfslurm

resolver = tfslurm.SlurmClusterResolver()  # before TF: sets CUDA_VISIBLE_DEVICES in time
rank = int(os.environ["SLURM_PROCID"])
import tensorflow as tf

tf.random.set_seed(100 + rank)  # different on purpose: MWMS must broadcast worker 0's
strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3, activation="tanh"),
                                 tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
initial = [w.numpy().tolist() for w in model.trainable_variables]
data = np.random.RandomState(rank).rand(8, 4).astype("float32")  # each worker its own batch
target = data.sum(axis=1, keepdims=True)
global_batch = 8 * strategy.num_replicas_in_sync

@tf.function
def train_step(x, y):
    def replica_step(x, y):
        with tf.GradientTape() as tape:
            per_example = tf.reduce_mean(tf.square(model(x, training=True) - y), axis=1)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    losses = strategy.run(replica_step, args=(x, y))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

losses = [float(train_step(tf.constant(data), tf.constant(target))) for _ in range(5)]
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as out:  # long lines interleave on srun's stdout
    json.dump({
    "rank": rank, "task": [resolver.task_type, resolver.task_id], "node": os.environ["SLURMD_NODENAME"],
    "spec": resolver.cluster_spec().as_dict(), "accelerators": resolver.num_accelerators(),
    "replicas": strategy.num_replicas_in_sync, "initial": initial, "losses": losses,
    "weights": [w.numpy().tolist() for w in model.trainable_variables],
    }, out)
"""


def test_mwms_workers_on_two_nodes_train_to_identical_weights(slurm_cluster: Any, tmp_path: Path) -> None:
    quiet = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0", "PYTHONUNBUFFERED": "1"}
    proc = slurm_cluster.srun(
        "-N2", "--ntasks-per-node=1", "--cpus-per-task=2", "--kill-on-bad-exit=1",
        sys.executable, "-c", WORKER, str(tmp_path), timeout=240, env_extra=quiet,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = sorted((json.loads(p.read_text()) for p in tmp_path.glob("rank*.json")), key=lambda r: r["rank"])
    assert [r["rank"] for r in rows] == [0, 1], proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [r["task"] for r in rows] == [["worker", 0], ["worker", 1]]
    assert rows[0]["node"] != rows[1]["node"]
    assert rows[0]["spec"] == rows[1]["spec"]
    assert [a.rpartition(":")[0] for a in rows[0]["spec"]["worker"]] == [rows[0]["node"], rows[1]["node"]]
    for row in rows:
        assert row["accelerators"] == {}  # CPU-only step: MWMS must not look for GPUs
        assert row["replicas"] == 2
        assert row["weights"] != row["initial"], "no training happened"
    assert rows[0]["initial"] == rows[1]["initial"], "initial weights were not broadcast"
    assert rows[0]["weights"] == rows[1]["weights"], "the workers ended with different weights"
    assert rows[0]["losses"] == rows[1]["losses"]
    assert rows[0]["losses"][-1] < rows[0]["losses"][0]
