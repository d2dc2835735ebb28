"""A training program without TensorFlow for the node-loss tests, started by ``tfslurm run``
in every task of a step: ``python stepper.py DIR STEPS DELAY [HANG_AT]``.

Every task counts steps from the checkpoint ``DIR/step`` (rank 0 writes it every 5 steps
and at the end) to STEPS, sleeping DELAY seconds per step; rank 0 prints ``resumed at step
N``, ``step N/STEPS`` and ``finished STEPS steps on W tasks``. With HANG_AT, rank 0 stops
answering at that step once (a stuck task; ``DIR/hung`` marks that it did).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

CHECKPOINT_EVERY = 5


def main() -> int:
    where, steps, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    hang_at = int(sys.argv[4]) if len(sys.argv) > 4 else None
    rank, tasks = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_STEP_NUM_TASKS"])
    checkpoint = os.path.join(where, "step")
    try:
        with open(checkpoint) as f:
            start = int(f.read())
    except FileNotFoundError:
        start = 0
    if rank == 0:
        print(f"resumed at step {start} on {tasks} tasks, rank 0 on {socket.gethostname()}", flush=True)
    for step in range(start + 1, steps + 1):
        time.sleep(delay)
        if rank != 0:
            continue
        print(f"step {step}/{steps}", flush=True)
        if hang_at == step and not os.path.exists(os.path.join(where, "hung")):
            open(os.path.join(where, "hung"), "w").close()
            signal.pause()  # until the step is ended
        if step % CHECKPOINT_EVERY == 0 or step == steps:
            with open(checkpoint + ".tmp", "w") as f:
                f.write(str(step))
            os.replace(checkpoint + ".tmp", checkpoint)
    if rank == 0:
        print(f"finished {steps} steps on {tasks} tasks", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
