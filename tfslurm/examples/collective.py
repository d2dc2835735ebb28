"""One collective per runtime, from nothing but the variables ``tfslurm env --for`` exports.

``python -m tfslurm.examples.collective jax|torch|keras`` in every task of a step, after
``vars=$(tfslurm env --for RUNTIME) || exit; eval "$vars"`` (the sbatch templates do that)
or with the site's TaskProlog and ``TFSLURM_FOR=RUNTIME``. Each process adds ``rank + 1`` over all processes
(Keras: fits a one-weight model with ``DataParallel``) and prints
``rank R of N: sum S (expected E)``; a wrong sum exits 1, so the job fails.
"""

from __future__ import annotations

import os
import sys


def _jax() -> tuple[int, int, float]:
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    # JAX reads JAX_COORDINATOR_ADDRESS (and JAX_LOCAL_DEVICE_IDS) itself; the count and the
    # id are passed so that JAX's own Slurm guess is not used.
    jax.distributed.initialize(
        num_processes=int(os.environ["JAX_NUM_PROCESSES"]), process_id=int(os.environ["JAX_PROCESS_ID"])
    )
    rank, size = jax.process_index(), jax.process_count()
    total = float(np.sum(multihost_utils.process_allgather(np.array([rank + 1.0]))))
    jax.distributed.shutdown()
    return rank, size, total


def _torch() -> tuple[int, int, float]:
    import torch
    import torch.distributed as dist

    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")  # env://
    rank, size = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([rank + 1.0], device="cuda:0" if torch.cuda.is_available() else "cpu")
    dist.all_reduce(value)
    dist.destroy_process_group()
    return rank, size, float(value.item())


def _keras() -> tuple[int, int, float]:
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras
    import numpy as np

    keras.distribution.initialize()  # reads KERAS_DISTRIBUTION_*
    rank = int(os.environ["KERAS_DISTRIBUTION_PROCESS_ID"])
    size = int(os.environ["KERAS_DISTRIBUTION_NUM_PROCESSES"])
    devices = keras.distribution.list_devices()
    keras.distribution.set_distribution(
        keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False)
    )
    keras.utils.set_random_seed(1)
    x = np.linspace(-1, 1, 16 * size, dtype="float32").reshape(-1, 1)[rank::size]  # this process's shard
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    loss = model.fit(x, 3 * x + 1, batch_size=8, epochs=20, verbose=0).history["loss"][-1]
    print(f"rank {rank}: loss {loss:.3g}, kernel {float(model.layers[0].kernel.numpy().ravel()[0]):.4f}")
    import jax
    from jax.experimental import multihost_utils

    total = float(np.sum(multihost_utils.process_allgather(np.array([rank + 1.0]))))
    return jax.process_index(), jax.process_count(), total


RUNTIMES = {"jax": _jax, "torch": _torch, "keras": _keras}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in RUNTIMES:
        print(f"usage: python -m tfslurm.examples.collective {'|'.join(RUNTIMES)}", file=sys.stderr)
        return 2
    rank, size, total = RUNTIMES[args[0]]()
    expected = size * (size + 1) / 2
    print(f"rank {rank} of {size}: sum {total:g} (expected {expected:g})", flush=True)
    return 0 if total == expected else 1


if __name__ == "__main__":
    sys.exit(main())
