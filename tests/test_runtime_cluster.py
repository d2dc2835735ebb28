"""tfslurm run on the real local Slurm cluster with tensorflow-cpu, through the templates.

Each test is one sbatch job of a template in ``sbatch_templates/`` (so the templates run
for real), with the shipped example programs:

* MWMS, 2 workers on 2 nodes, preempted with SIGUSR1 mid-training: checkpoint, requeue,
  the resumed run continues the step count, and both workers end with identical weights;
* PS, chief + 1 ps + 2 workers, one worker SIGKILLed mid-training: every scheduled step
  still runs, the ps and the surviving worker exit 0 within 2 s of the chief;
* PS, the parameter server SIGKILLed: the chief reports it in one line, requeues the job,
  and the next run resumes from the last checkpoint and finishes;
* a peer that never starts: a clear error after --peer-timeout, not a hang.

TF's import takes seconds per process on 2 cores, so every test is a single short job.
"""

from __future__ import annotations

import re
import time

import pytest

from conftest import needs
from jobs import (
    completed,
    example,
    final_digests,
    finish_times,
    job_env,
    kill_task,
    preempted_at,
    ps_done,
    resumed,
    submit,
    tfslurm_command,
    wait_for,
    wait_requeued_then_release,
)

pytestmark = [pytest.mark.cluster, pytest.mark.train, pytest.mark.tf, needs("tensorflow")]


def test_mwms_preempt_requeue_resume_identical_weights(slurm_cluster, tmp_path):
    started = time.monotonic()
    program = example("mwms", steps=300, step_delay=0.02, log_every=20)
    job, log = submit(slurm_cluster, tmp_path, "mwms.sbatch", *program)
    wait_for(log, r"step 40/300")
    slurm_cluster.run(["scancel", "--batch", "--signal=USR1", str(job)], timeout=10)
    stopped_at = preempted_at(log, timeout=90)
    wait_requeued_then_release(slurm_cluster, job)
    text = completed(slurm_cluster, job, log, timeout=120)
    assert "tfslurm: requeueing job" in text
    assert "run 2" in text
    assert resumed(text) == [("0", str(stopped_at)), ("1", str(stopped_at))], text[-3000:]
    assert re.search(rf"training 300 steps on 2 workers from step {stopped_at}\b", text)
    finals = final_digests(text, 300)
    assert set(finals) == {"worker:0", "worker:1"}, text[-3000:]
    assert finals["worker:0"] == finals["worker:1"]
    assert 0 < stopped_at < 300
    print(f"\nMWMS preempt+requeue+resume end to end: {time.monotonic() - started:.1f} s")


def test_ps_worker_killed_training_completes(slurm_cluster, tmp_path):
    started = time.monotonic()
    program = example("ps", steps=120, step_delay=0.03, log_every=20)
    job, log = submit(slurm_cluster, tmp_path, "ps.sbatch", *program)
    wait_for(log, r"step 20/120")
    kill_task(slurm_cluster, job, 3)  # rank 3 = worker 1
    slurm_cluster.wait_job(job, timeout=120)  # FAILED: srun reports the killed task
    text = log.read_text()
    scheduled, counter = ps_done(text)
    assert scheduled == 120 and counter >= 120
    times = finish_times(text)
    assert {"chief:0", "ps:0", "worker:0"} <= set(times), text[-3000:]
    assert "worker:1" not in times
    for role in ("ps:0", "worker:0"):
        assert 0 <= times[role] - times["chief:0"] < 2.0, (role, times)
    print(f"\nPS with a worker killed end to end: {time.monotonic() - started:.1f} s")


def test_ps_failure_requeues_and_resumes(slurm_cluster, tmp_path):
    started = time.monotonic()
    program = example("ps", steps=100, step_delay=0.03, log_every=10, checkpoint_every=10)
    job, log = submit(slurm_cluster, tmp_path, "ps.sbatch", *program)
    wait_for(log, r"step 30/100")
    kill_task(slurm_cluster, job, 1)  # rank 1 = the parameter server
    wait_for(log, r"a parameter server failed")
    wait_requeued_then_release(slurm_cluster, job)
    text = completed(slurm_cluster, job, log, timeout=120)
    assert re.search(r"tfslurm run: error: chief:0 .*a parameter server failed .*restart the job", text)
    assert "requeueing job" in text
    resumed_at = re.search(r"restart 1: resumed from \S+ at step (\d+)", text)
    # the ps died after step 30 was logged: the last checkpoint is step 20 or 30
    assert resumed_at and int(resumed_at.group(1)) in (20, 30, 40), text[-3000:]
    scheduled, counter = ps_done(text)
    assert counter >= 100, text[-3000:]
    assert scheduled == 100 - int(resumed_at.group(1))
    print(f"\nPS failure -> requeue -> resume end to end: {time.monotonic() - started:.1f} s")


def test_missing_peer_is_a_clear_error(slurm_cluster, tmp_path):
    started = time.monotonic()
    program = (
        f'if [ "$SLURM_PROCID" = 1 ]; then sleep 60; else exec {tfslurm_command()} run '
        "--peer-timeout 3 -- python -m tfslurm.examples.mwms --steps 5; fi"
    )
    out = slurm_cluster.srun(
        "-N2", "-n2", "--kill-on-bad-exit=1", "bash", "-c", program, timeout=90, env_extra=job_env(tmp_path)
    )
    assert out.returncode != 0
    assert re.search(
        r"tfslurm run: error: worker:0 .*: peer worker:1 at node\d:\d+ did not come "
        r"up within \d+ s",
        out.stderr,
    ), out.stderr[-2000:]
    elapsed = time.monotonic() - started
    assert elapsed < 60, elapsed
    print(f"\nmissing peer reported after {elapsed:.1f} s (timeout 3 s + TF import)")
