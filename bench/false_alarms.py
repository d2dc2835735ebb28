"""No false alarm: runs whose steps sometimes take long are never taken for a failure
(root, Debian slurm-wlm, tensorflow-cpu).

    PYTHONPATH=. python bench/false_alarms.py [--runs 20] [--slow 30]

Starts a 4-node local cluster and submits, one after another, ``--runs`` jobs of
``mwms.sbatch`` with ``SBATCH_NO_KILL=set TFSLURM_SPARE_NODES=1`` (so the supervisor's probe,
hang and straggler watches are all on, with their defaults): three workers and a spare, 40
steps, a checkpoint every 10 steps, the one at step 20 taking ``--slow`` seconds more on
every worker (a slow save). Counts, per run, the supervisor's lines that act on a failure
(a relaunch, a silent node, a hung rank, a straggler, a stuck step) and the job's end state.
Prints one line per run and the total; exit status 1 if any run had one or did not end
COMPLETED. The figure in docs/fault-tolerance.md.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from tfslurm.localcluster import LocalCluster, missing_requirements
from tfslurm.runtime.templates import template_path

ALARMS = re.compile(
    r"tfslurm: (?:relaunch \d|.* silent: |rank \d+ .* hung: |rank \d+ .* straggles: |no step line for )"
)


def one_run(cluster: LocalCluster, work: Path, slow: float) -> tuple[str, list[str], float]:
    work.mkdir()
    work.chmod(0o755)
    env = {
        "TFSLURM": str(Path(sys.executable).with_name("tfslurm")),
        "TFSLURM_CHECKPOINT_DIR": str(work / "ckpt"),
        "SBATCH_NO_KILL": "set",
        "TFSLURM_SPARE_NODES": "1",
        "no_proxy": "*",
    }
    program = ["python", "-m", "tfslurm.examples.mwms", "--steps", "40", "--step-delay", "0.05"]
    program += [
        "--log-every",
        "1",
        "--checkpoint-every",
        "10",
        "--slow-save",
        str(slow),
        "--slow-save-at",
        "20",
    ]
    started = time.monotonic()
    out = cluster.run(
        ["sbatch", "--parsable", "-N4", "-o", str(work / "job.out"), template_path("mwms.sbatch"), *program],
        env_extra=env,
        cwd=str(work),
    )
    job = int(out.stdout.split(";")[0])
    state = cluster.wait_job(job, timeout=slow + 300)
    text = (work / "job.out").read_text()
    return state, [m.group(0) for m in ALARMS.finditer(text)], time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--slow", type=float, default=30.0, help="seconds the slow save takes more")
    args = parser.parse_args()
    missing = missing_requirements()
    if missing:
        print("cannot run: " + "; ".join(missing), file=sys.stderr)
        return 1
    bad = 0
    with tempfile.TemporaryDirectory(prefix="tfslurm-false-alarms-") as tmp:
        os.chmod(tmp, 0o755)
        with LocalCluster(num_nodes=4, gpus=0) as cluster:
            for n in range(args.runs):
                state, alarms, took = one_run(cluster, Path(tmp) / f"run{n}", args.slow)
                bad += state != "COMPLETED" or bool(alarms)
                print(f"run {n + 1}: {state}, {len(alarms)} alarm(s) {alarms} ({took:.0f} s)", flush=True)
                cluster.wait_idle()
    print(
        f"MWMS 3 workers + 1 spare, a {args.slow:g} s save at step 20 of 40: {bad} of {args.runs} runs raised an alarm or did not end COMPLETED"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
