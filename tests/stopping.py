"""Stopping a template job the ways Slurm does, shared by the cluster tests of stops
(``test_stops_cluster.py``) and of stops inside containers
(``test_containers_training_cluster.py``): a preempting job, a USR1 to the steps that the
job answers by exit status 85, and which Slurm keeps a preemption pending across a requeue.
"""

from __future__ import annotations

import time
from pathlib import Path

from jobs import (
    completed,
    example,
    in_sync,
    preempted_at,
    resumed,
    submit,
    wait_for,
    wait_requeued_then_release,
)
from tfslurm.localcluster import slurm_version

# GraceTime of the low partitions: long enough for TF to checkpoint and exit on 2 cores shared
# with the other Slurm versions' suites; a job that ends sooner costs nothing more
GRACE = 20


def preemption_outlives_requeue() -> bool:
    """Slurm 24.11 keeps a preemption's action pending across a `scontrol requeue` made in the
    GraceTime: PreemptMode=REQUEUE requeues the job once more after its next run ends, and
    PreemptMode=CANCEL ends the job PREEMPTED after its next run, though that run trained to
    the end (seen on 24.11.5, every run). 22.05.8 and 26.05.5 do neither."""
    return slurm_version() == "24.11"


def preempt(cluster, tmp: Path) -> int:
    """A job in the high partition that needs both nodes whole: it preempts the low job."""
    out = cluster.run(
        [
            "sbatch",
            "--parsable",
            "-p",
            "high",
            "-N2",
            "--exclusive",
            "--output",
            str(tmp / "preemptor-%j.out"),
            "--wrap",
            "sleep 1",
        ],
        cwd=str(tmp),
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def usr1_to_steps_requeued_by_exit(cluster, tmp: Path, *options: str) -> tuple[str, int, float]:
    """The MWMS template (sbatch ``options``, which must set TFSLURM_REQUEUE=exit) stopped by
    ``scancel --signal=USR1`` at step 40 of 200, requeued by exit status 85, released, run to
    the end: every worker resumed at the checkpoint and the workers agree. (log, the step of
    the checkpoint, seconds from the signal to COMPLETED)."""
    steps = 200
    program = example("mwms", steps=steps, step_delay=0.03, log_every=20)
    job, log = submit(cluster, tmp, "mwms.sbatch", *program, options=options)
    wait_for(log, r"step 40/200", timeout=120)
    sent = time.monotonic()
    cluster.run(["scancel", "--signal=USR1", str(job)], timeout=10)
    stopped_at = preempted_at(log)
    wait_requeued_then_release(cluster, job, timeout=90)
    text = completed(cluster, job, log)
    assert "tfslurm: training stopped early: exit 85 (RequeueExit=85" in text, text[-3000:]
    assert resumed(text) == [("0", str(stopped_at)), ("1", str(stopped_at))], text[-3000:]
    in_sync(text, steps)
    return text, stopped_at, time.monotonic() - sent
