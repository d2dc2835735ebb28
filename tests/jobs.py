"""Submitting the sbatch templates to a local test cluster and following their jobs.

The cluster tests (tests/test_runtime_cluster.py, test_stops_cluster.py,
test_templates_cluster.py, test_runtimes_cluster.py) submit one template per test with a
shipped example program, wait for lines of its log, signal or kill its tasks, and read
what the example printed at the end.
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

from tfslurm.errors import ClusterTimeout
from tfslurm.runtime.templates import template_path

PREEMPTED = r"preempted: checkpoint \S+ saved at step (\d+)"
CRED_EXPIRE = 120  # Slurm's default lifetime of a job credential, in seconds
REVOCATION_SETTLES = 3  # seconds after a requeue by which the nodes hold the revocation


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
        # TF's start in a task takes 5-10 s alone and over 60 s with the other versions'
        # suites beside it (a chief in a container, seen once): waiting for peers is not
        # what these tests measure
        "TFSLURM_PEER_TIMEOUT": "120",
    }


def example(name: str, **flags: object) -> tuple[str, ...]:
    """``python -m tfslurm.examples.<name>`` with ``step_delay=0.03`` as ``--step-delay 0.03``."""
    options = (item for flag, value in flags.items() for item in (f"--{flag.replace('_', '-')}", str(value)))
    return ("python", "-m", f"tfslurm.examples.{name}", *options)


def submit(
    cluster: Any, tmp: Path, template: str, *program: str, options: tuple[str, ...] = ()
) -> tuple[int, Path]:
    """sbatch ``template`` with ``program`` as its arguments: (job id, its log file)."""
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


def completed(cluster: Any, job: int, log: Path, timeout: float = 150, state: str = "COMPLETED") -> str:
    """The job's log, once the job ended in ``state``."""
    try:
        ended = cluster.wait_job(job, timeout=timeout)
    except ClusterTimeout as exc:
        # a job that never ends: what Slurm holds of it and its steps, beside what it printed
        held = cluster.run(["squeue", "-h", "-s", "-j", str(job)], timeout=10).stdout
        raise AssertionError(f"{exc}; its steps now:\n{held}{said(log)}") from None
    assert ended == state, said(log)
    return log.read_text()


def said(log: Path) -> str:
    """The supervisor's lines from the whole log, then the log's tail: the tail alone often
    misses why a job went the way it did."""
    text = log.read_text() if log.exists() else ""
    lines = "".join(
        line for line in text.splitlines(keepends=True) if "tfslurm: " in line or "restart " in line
    )
    return f"{lines[-4000:]}---\n{text[-3000:]}"


def wait_for(path: Path, pattern: str, timeout: float = 90) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        found = re.search(pattern, text, re.MULTILINE)
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{pattern!r} not in {path} after {timeout} s:\n{said(path)}")


def preempted_at(log: Path, timeout: float = 60) -> int:
    """The step the example checkpointed at when it was told to stop."""
    return int(wait_for(log, PREEMPTED, timeout).group(1))


def resumed(text: str, restart: int = 1) -> list[tuple[str, str]]:
    """(worker index, step) of each MWMS worker that resumed from a checkpoint in that run."""
    return sorted(re.findall(rf"\[worker:(\d)\] restart {restart}: resumed from \S+ at step (\d+)", text))


def final_digests(text: str, steps: int) -> dict[str, str]:
    """MWMS worker -> digest of its weights after ``steps`` steps."""
    return dict(re.findall(rf"\[(worker:\d)\] final step {steps} weights (\w+)", text))


def ps_done(text: str) -> tuple[int, int]:
    """(steps the PS chief scheduled in its last run, the ps's step counter)."""
    done = re.search(r"scheduled (\d+) steps, ps step counter (\d+)", text)
    assert done, text[-3000:]
    return int(done.group(1)), int(done.group(2))


def job_field(cluster: Any, job: int, name: str) -> str:
    out = cluster.run(["scontrol", "-o", "show", "job", str(job)], timeout=10)
    found = re.search(rf"\b{name}=(\S*)", out.stdout)
    return found.group(1) if found else ""


def requeued_at(cluster: Any, job: int) -> float:
    """When the controller requeued ``job`` (clock time, to the second): it makes a requeued
    job eligible cred_expire + 1 s later (the test clusters keep Slurm's 120 s)."""
    eligible = job_field(cluster, job, "EligibleTime")
    try:
        return time.mktime(time.strptime(eligible, "%Y-%m-%dT%H:%M:%S")) - (CRED_EXPIRE + 1)
    except ValueError:
        raise AssertionError(
            f"job {job} has no EligibleTime to tell when it was requeued: {eligible!r}"
        ) from None


def release(cluster: Any, job: int) -> None:
    """Start the pending job soon: Slurm makes a requeued job eligible only cred_expire
    (120 s) + 1 s later, far too slow for a test. Starting it at once fails ("Job credential
    revoked"): a node refuses a credential for the job made in or before the second it
    revoked the earlier run's, at the requeue. So wait until the clock is a little past that
    second (the revocation reaches the nodes just after the requeue)."""
    start_from = requeued_at(cluster, job) + REVOCATION_SETTLES
    while time.time() < start_from:
        time.sleep(0.1)
    cluster.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], timeout=10)


def wait_requeued_then_release(cluster: Any, job: int, restarts: int = 1, timeout: float = 60) -> None:
    """Wait until the job is back in the queue for its ``restarts``-th time, then start it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (
            job_field(cluster, job, "Restarts") == str(restarts)
            and job_field(cluster, job, "JobState") == "PENDING"
        ):
            release(cluster, job)
            return
        time.sleep(0.2)
    raise AssertionError(
        f"job {job} was not requeued a {restarts}. time within {timeout} s: "
        f"{job_field(cluster, job, 'JobState')}"
    )


def node_processes(cluster: Any, node: str | None = None) -> list[tuple[int, list[bytes], bytes]]:
    """(pid, environment entries, command line) of every process running in the cluster's
    nodes (``node``: in that one only). All "nodes" of a test cluster share this machine's
    PID namespace, and so do other clusters running at the same time: only processes in this
    cluster's node network namespaces count (its SLURM_CONF path alone is not enough, as the
    versions matrix runs the same test at the same /tmp path in another root)."""
    from tfslurm.localcluster import procs

    network = cluster._network
    inodes = network.netns_inodes() if node is None else [os.stat(network.ns_file(node, "net")).st_ino]
    found = []
    for pid in procs.pids_in_netns(inodes):
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


def program_pids(cluster: Any, job: int, procid: int) -> list[int]:
    """PIDs of the program of task ``procid`` of ``job``: ``tfslurm run`` forks it, so it is
    the one of the task's ``tfslurm run`` processes whose parent is another."""
    pids = task_pids(cluster, job, procid)
    parents = {}
    for pid in pids:
        try:
            parents[pid] = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return [pid for pid, parent in parents.items() if parent in pids]


def step_processes(cluster: Any, job: int, step: int, node: str) -> list[bytes]:
    """Command lines of what runs of step ``job.step`` on ``node``: its tasks (their
    environment names the step) and its slurmstepd."""
    wanted = {f"SLURM_JOB_ID={job}".encode(), f"SLURM_STEP_ID={step}".encode()}
    stepd = f"slurmstepd: [{job}.{step}]".encode()
    return [
        cmdline
        for _, environ, cmdline in node_processes(cluster, node)
        if wanted <= set(environ) or cmdline.startswith(stepd)
    ]


def gone(what: Any, timeout: float) -> float:
    """Poll ``what()`` until it returns nothing; the time (clock) it first did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = what()
        if not left:
            return time.time()
        time.sleep(0.1)
    raise AssertionError(f"still there after {timeout} s: {left}")


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


def in_sync(text: str, steps: int) -> str:
    """The one digest both MWMS workers ended ``steps`` steps with (asserted equal)."""
    finals = final_digests(text, steps)
    assert len(finals) == 2 and len(set(finals.values())) == 1, text[-3000:]
    return next(iter(finals.values()))
