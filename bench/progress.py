"""What reporting its progress costs a rank: ``ctx.step(n)`` and one ``ctx.own_time()``
block a step, against the step itself.

    python bench/progress.py [--steps 20000] [--repeat 5]

A real :class:`~tfslurm.runtime.progress.Beacon` (its heartbeat thread running) sends to a
real :class:`~tfslurm.runtime.progress.ProgressBoard` in another process on this host, as
under ``tfslurm supervise``. Prints the cost per step in microseconds (median
of the repeats, and the max) and its share of named anchor step times: 10 ms (a small
model's synchronous step on GPUs) and 1 ms (about the shortest step worth distributing).
The goal is under 1 % of the step time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from tfslurm.runtime.progress import Beacon, ProgressTarget

ANCHORS_S = {"10 ms step": 0.010, "1 ms step": 0.001}
BOARD = (
    "import sys\n"
    "from tfslurm.runtime.progress import ProgressBoard\n"
    "board = ProgressBoard()\n"
    "board.next_launch()\n"
    "print(board.address('127.0.0.1'), flush=True)\n"
    "sys.stdin.read()\n"
)


def per_step_us(beacon: Beacon, steps: int) -> float:
    """Microseconds per step of a loop whose step is only the reporting."""
    start = time.perf_counter()
    for step in range(steps):
        with beacon.own_time():
            pass
        beacon.step(step)
    return (time.perf_counter() - start) / steps * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    board = subprocess.Popen(
        [sys.executable, "-c", BOARD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert board.stdout is not None
        target = ProgressTarget.parse(board.stdout.readline().strip())
        beacon = Beacon(target, 0, "worker:0", "node1").start()
        runs = [per_step_us(beacon, args.steps) for _ in range(args.repeat)]
    finally:
        board.kill()
    median, worst = statistics.median(runs), max(runs)
    print(f"progress report (step + own_time), {args.repeat} runs of {args.steps} steps:")
    print(f"  {median:.2f} us a step (median), {worst:.2f} us (max)")
    for name, seconds in ANCHORS_S.items():
        share = median * 1e-6 / seconds * 100
        print(f"  vs {name}: {share:.3f} % of the step (goal < 1 %): {'PASS' if share < 1 else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
