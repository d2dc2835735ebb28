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

import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import needs
from tfslurm.runtime.templates import template_path

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.tf,
    needs("tensorflow"),
]


def tfslurm_command() -> str:
    beside = Path(sys.executable).with_name("tfslurm")
    found = str(beside) if beside.exists() else shutil.which("tfslurm")
    if not found:
        pytest.fail("the tfslurm command is not installed next to this Python", pytrace=False)
    return found


def job_env(tmp: Path) -> dict[str, str]:
    return {
        "TFSLURM": tfslurm_command(),
        "TFSLURM_CHECKPOINT_DIR": str(tmp / "ckpt"),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "no_proxy": "*",
        "TFSLURM_PEER_TIMEOUT": "60",
    }


def submit(
    cluster, tmp: Path, template: str, *program: str, options: tuple[str, ...] = ()
) -> tuple[int, Path]:
    out = cluster.run(
        [
            "sbatch",
            "--parsable",
            "--output",
            str(tmp / "job-%j.out"),
            *options,
            template_path(template),
            *program,
        ],
        env_extra=job_env(tmp),
        cwd=str(tmp),
    )
    assert out.returncode == 0, out.stderr
    job = int(out.stdout.strip().split(";")[0])
    return job, tmp / f"job-{job}.out"


def wait_for(path: Path, pattern: str, timeout: float = 90) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        found = re.search(pattern, text, re.MULTILINE)
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{pattern!r} not in {path} after {timeout} s:\n{text[-3000:]}")


def job_field(cluster, job: int, name: str) -> str:
    out = cluster.run(["scontrol", "-o", "show", "job", str(job)], timeout=10)
    found = re.search(rf"\b{name}=(\S*)", out.stdout)
    return found.group(1) if found else ""


def wait_requeued_then_release(cluster, job: int, timeout: float = 60) -> None:
    """Wait until the job is back in the queue, then start it soon: Slurm makes a requeued
    job eligible only cred_expire (120 s) + 1 s later, far too slow for a test. Starting it
    at once fails ("Job credential revoked") while the nodes still hold the old job's
    revoked credential, so wait a few seconds first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job_field(cluster, job, "Restarts") == "1" and job_field(cluster, job, "JobState") == "PENDING":
            time.sleep(3)
            cluster.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], timeout=10)
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job} was not requeued within {timeout} s")


def node_processes(cluster: Any) -> list[tuple[int, list[bytes], bytes]]:
    """(pid, environment entries, command line) of every process running in the cluster's
    nodes. All "nodes" of a test cluster share this machine's PID namespace, and so do other
    clusters running at the same time: only processes in this cluster's node network
    namespaces count (its SLURM_CONF path alone is not enough, as the versions matrix runs
    the same test at the same /tmp path in another root)."""
    from tfslurm.localcluster import procs

    found = []
    for pid in procs.pids_in_netns(cluster._network.netns_inodes()):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        found.append((pid, environ, cmdline))
    return found


def task_pids(cluster: Any, job: int, procid: int) -> list[int]:
    """PIDs of ``tfslurm run`` processes of task ``procid`` of ``job``."""
    wanted = {f"SLURM_JOB_ID={job}", f"SLURM_PROCID={procid}", f"SLURM_CONF={cluster.slurm_conf}"}
    wanted_bytes = {entry.encode() for entry in wanted}
    return [
        pid
        for pid, environ, cmdline in node_processes(cluster)
        if wanted_bytes <= set(environ) and b"tfslurm" in cmdline and b"run" in cmdline
    ]


def kill_task(cluster: Any, job: int, procid: int) -> None:
    pids = task_pids(cluster, job, procid)
    assert pids, f"no process of task {procid} of job {job}"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)


def finish_times(text: str) -> dict[str, float]:
    """role -> the time its tfslurm run reported finishing (chief: program finished;
    servers: exiting 0 after the chief)."""
    times = {}
    for m in re.finditer(
        r"tfslurm run: (\w+:\d+): (?:program finished, exit 0|chief finished, exiting 0) \(t=([\d.]+)", text
    ):
        times[m.group(1)] = float(m.group(2))
    return times


def test_mwms_preempt_requeue_resume_identical_weights(slurm_cluster, tmp_path):
    started = time.monotonic()
    job, log = submit(
        slurm_cluster,
        tmp_path,
        "mwms.sbatch",
        "python",
        "-m",
        "tfslurm.examples.mwms",
        "--steps",
        "300",
        "--step-delay",
        "0.02",
        "--log-every",
        "20",
    )
    wait_for(log, r"step 40/300")
    slurm_cluster.run(["scancel", "--batch", "--signal=USR1", str(job)], timeout=10)
    saved = wait_for(log, r"preempted: checkpoint \S+ saved at step (\d+)")
    stopped_at = int(saved.group(1))
    wait_requeued_then_release(slurm_cluster, job)
    assert slurm_cluster.wait_job(job, timeout=120) == "COMPLETED"
    text = log.read_text()
    assert "tfslurm: requeueing job" in text
    assert "run 2" in text
    resumed = re.findall(r"\[worker:(\d)\] restart 1: resumed from \S+ at step (\d+)", text)
    assert sorted(resumed) == [("0", str(stopped_at)), ("1", str(stopped_at))], text[-3000:]
    assert re.search(rf"training 300 steps on 2 workers from step {stopped_at}\b", text)
    finals = dict(re.findall(r"\[(worker:\d)\] final step 300 weights (\w+)", text))
    assert set(finals) == {"worker:0", "worker:1"}, text[-3000:]
    assert finals["worker:0"] == finals["worker:1"]
    assert 0 < stopped_at < 300
    print(f"\nMWMS preempt+requeue+resume end to end: {time.monotonic() - started:.1f} s")


def test_ps_worker_killed_training_completes(slurm_cluster, tmp_path):
    started = time.monotonic()
    job, log = submit(
        slurm_cluster,
        tmp_path,
        "ps.sbatch",
        "python",
        "-m",
        "tfslurm.examples.ps",
        "--steps",
        "120",
        "--step-delay",
        "0.03",
        "--log-every",
        "20",
    )
    wait_for(log, r"step 20/120")
    kill_task(slurm_cluster, job, 3)  # rank 3 = worker 1
    slurm_cluster.wait_job(job, timeout=120)  # FAILED: srun reports the killed task
    text = log.read_text()
    done = re.search(r"scheduled (\d+) steps, ps step counter (\d+)", text)
    assert done, text[-3000:]
    assert int(done.group(1)) == 120 and int(done.group(2)) >= 120
    times = finish_times(text)
    assert {"chief:0", "ps:0", "worker:0"} <= set(times), text[-3000:]
    assert "worker:1" not in times
    for role in ("ps:0", "worker:0"):
        assert 0 <= times[role] - times["chief:0"] < 2.0, (role, times)
    print(f"\nPS with a worker killed end to end: {time.monotonic() - started:.1f} s")


def test_ps_failure_requeues_and_resumes(slurm_cluster, tmp_path):
    started = time.monotonic()
    job, log = submit(
        slurm_cluster,
        tmp_path,
        "ps.sbatch",
        "python",
        "-m",
        "tfslurm.examples.ps",
        "--steps",
        "100",
        "--step-delay",
        "0.03",
        "--log-every",
        "10",
        "--checkpoint-every",
        "10",
    )
    wait_for(log, r"step 30/100")
    kill_task(slurm_cluster, job, 1)  # rank 1 = the parameter server
    wait_for(log, r"a parameter server failed")
    wait_requeued_then_release(slurm_cluster, job)
    assert slurm_cluster.wait_job(job, timeout=120) == "COMPLETED"
    text = log.read_text()
    assert re.search(r"tfslurm run: error: chief:0 .*a parameter server failed .*restart the job", text)
    assert "requeueing job" in text
    resumed = re.search(r"restart 1: resumed from \S+ at step (\d+)", text)
    # the ps died after step 30 was logged: the last checkpoint is step 20 or 30
    assert resumed and int(resumed.group(1)) in (20, 30, 40), text[-3000:]
    done = re.search(r"scheduled (\d+) steps, ps step counter (\d+)", text)
    assert done and int(done.group(2)) >= 100, text[-3000:]
    assert int(done.group(1)) == 100 - int(resumed.group(1))
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
