"""A task of the runtime tests: join a runtime's cluster from tfslurm's plan, run one
collective, and print one JSON line: rank, what the collective gave and the remote
addresses of this process's own TCP connections (to check which network carried them).

Usage: python runtime_task.py jax|torch|torch-env|keras OUTDIR [IFACE]

``torch-env`` uses nothing of tfslurm: ``init_process_group`` reads the variables the
TaskProlog (``TFSLURM_FOR=torch``) exported. Each task writes ``OUTDIR/rankN.json``
(one file per task: srun may split long lines of concurrent tasks).
"""

from __future__ import annotations

import json
import os
import socket
import sys


def peer_addresses() -> list[str]:
    """Remote IPv4 addresses of this process's established TCP connections."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    peers = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                words = line.split()
                remote, state, inode = words[2], words[3], words[9]
                if state != "01" or inode not in inodes:
                    continue
                host = remote.split(":")[0]
                raw = bytes.fromhex(host)[-4:][::-1]  # little-endian words; v4-mapped last
                peers.add(socket.inet_ntoa(raw))
    return sorted(peers)


def torch_all_reduce(
    rank: int, iface: str | None, by_tfslurm: bool
) -> tuple[float, dict[str, object], list[str]]:
    """Sum rank + 1 over every process with gloo, set up by tfslurm.torch or (torch-env) by
    torch alone from the variables the TaskProlog exported."""
    import torch
    import torch.distributed as dist

    if by_tfslurm:
        import tfslurm.torch

        tfslurm.torch.init_process_group("gloo", iface=iface)
    else:
        dist.init_process_group("gloo")
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    seen: dict[str, object] = {"rank": dist.get_rank(), "size": dist.get_world_size()}
    seen.update(
        {k: os.environ.get(k) for k in ("MASTER_ADDR", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")}
    )
    peers = peer_addresses()
    dist.destroy_process_group()
    return value.item(), seen, peers


def main() -> None:
    runtime, out = sys.argv[1], sys.argv[2]
    iface = sys.argv[3] if len(sys.argv) > 3 else None
    rank = int(os.environ["SLURM_PROCID"])
    node = os.environ["SLURMD_NODENAME"]
    seen: dict[str, object] = {}
    if runtime in ("torch", "torch-env"):
        result, seen, peers = torch_all_reduce(rank, iface, by_tfslurm=runtime == "torch")
    elif runtime == "jax":
        import jax
        import numpy as np
        from jax.experimental import multihost_utils

        import tfslurm.jax

        plan = tfslurm.jax.initialize(iface=iface)
        gathered = multihost_utils.process_allgather(np.array([rank + 1.0]))
        result = float(np.sum(gathered))
        seen = {"rank": jax.process_index(), "size": jax.process_count()}
        peers = peer_addresses()
        jax.distributed.shutdown()
    elif runtime == "keras":
        import numpy as np

        import tfslurm.keras

        plan = tfslurm.keras.initialize(iface=iface)  # before Keras' import: it sets the backend
        import keras

        assert keras.backend.backend() == "jax", keras.backend.backend()
        devices = keras.distribution.list_devices()
        distribution = keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False)
        keras.distribution.set_distribution(distribution)
        keras.utils.set_random_seed(1)
        x = np.linspace(-1, 1, 64, dtype="float32").reshape(-1, 1)
        x = x[rank :: plan.cluster.num_tasks]  # each process feeds its own shard of every batch
        y = 3 * x + 1
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
        history = model.fit(x, y, batch_size=16, epochs=20, verbose=0)
        kernel = float(model.layers[0].kernel.numpy().ravel()[0])
        result = {"devices": len(devices), "loss": history.history["loss"][-1], "kernel": kernel}
        seen = {"rank": __import__("jax").process_index(), "size": __import__("jax").process_count()}
        peers = peer_addresses()
    else:
        raise SystemExit(f"unknown runtime {runtime!r}")
    record = {
        "procid": rank,
        "node": node,
        "localid": int(os.environ["SLURM_LOCALID"]),
        "result": result,
        "seen": seen,
        "peers": peers,
    }
    path = os.path.join(out, f"rank{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.rename(path + ".tmp", path)


if __name__ == "__main__":
    main()
