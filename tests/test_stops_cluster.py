"""Every way Slurm stops a job, on a real local cluster configured for preemption
(partition_prio, partitions low = REQUEUE and low-cancel = CANCEL with a GraceTime, high
preempts them; RequeueExit=85), with the templates and tensorflow-cpu, plus the
supervisor fault tests (F1: no orphans, F2: killed saves; their unit tests are in
tests/test_stops.py).

One 2-node cluster serves every test here. Graces are a few seconds (the machine may have
2 cores); figures are printed, not asserted (bench note: docs/preemption.md).
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import needs
from jobs import (
    completed,
    example,
    in_sync,
    job_env,
    job_field,
    kill_task,
    node_processes,
    preempted_at,
    ps_done,
    release,
    resumed,
    submit,
    tfslurm_command,
    wait_for,
    wait_requeued_then_release,
)
from stopping import GRACE, preempt, preemption_outlives_requeue, usr1_to_steps_requeued_by_exit

pytestmark = [pytest.mark.cluster, pytest.mark.train]


@pytest.fixture(scope="module")
def preempt_cluster(slurm_cluster_factory):
    return slurm_cluster_factory(
        num_nodes=2, gpus=0, preempt_grace=GRACE, extra_conf_lines=["RequeueExit=85"]
    )


# ---------------------------------------------------------------- MWMS, real preemption
@pytest.mark.tf
@needs("tensorflow")
def test_mwms_preempted_in_gracetime_resumes_to_equal_weights(preempt_cluster, tmp_path):
    """PreemptMode=REQUEUE + GraceTime: SIGTERM to every task (MWMS's own C handler would
    swallow it); the tasks checkpoint on it, exit 85, the job is requeued, resumes from
    that step, and ends COMPLETED with the weights of an uninterrupted run."""
    cluster, steps = preempt_cluster, 300
    program = example("mwms", steps=steps, log_every=20)
    ref_dir, run_dir = tmp_path / "ref", tmp_path / "run"
    ref_dir.mkdir(), run_dir.mkdir()
    # the uninterrupted reference runs at the same time in "high" (never preempted; it
    # needs one CPU per node, so it preempts nobody)
    ref, ref_log = submit(cluster, ref_dir, "mwms.sbatch", *program, options=("-p", "high"))
    job, log = submit(
        cluster, run_dir, "mwms.sbatch", *program, "--step-delay", "0.05", options=("-p", "low")
    )
    wait_for(log, r"step 40/300", timeout=120)
    reference = in_sync(completed(cluster, ref, ref_log, timeout=120), steps)
    sent = time.monotonic()
    preemptor = preempt(cluster, tmp_path)
    stopped_at = preempted_at(log)
    took = time.monotonic() - sent
    # plant what a killed save leaves behind: the next start removes it (F2)
    ckpt = run_dir / "ckpt"
    (ckpt / "ckpt-999_temp").mkdir(parents=True, exist_ok=True)
    (ckpt / "ckpt-999_temp" / "part-00000-of-00001.data-00000-of-00001").write_text("x")
    (ckpt / ".scratch-worker-1" / "ckpt-5_temp").mkdir(parents=True, exist_ok=True)
    wait_requeued_then_release(cluster, job, timeout=90)
    assert cluster.wait_job(preemptor, timeout=60) == "COMPLETED"
    if preemption_outlives_requeue():  # 24.11: run 2 trains to the end, then Slurm requeues again
        wait_for(log, rf"\[worker:0\] final step {steps} weights", timeout=150)
        wait_requeued_then_release(cluster, job, restarts=2, timeout=90)
    text = completed(cluster, job, log)
    if preemption_outlives_requeue():  # the third run resumes at the end and trains nothing
        assert resumed(text, restart=2) == [("0", str(steps)), ("1", str(steps))], text[-3000:]
    else:
        assert "restart 2:" not in text, text[-3000:]
    assert re.search(r"tfslurm run: worker:\d: SIGTERM \(preemption", text), text[-3000:]
    assert re.search(r"stopped early by SIGTERM: exit 85", text), text[-3000:]
    assert "tfslurm: requeueing job" in text
    assert resumed(text) == [("0", str(stopped_at)), ("1", str(stopped_at))], text[-3000:]
    assert in_sync(text, steps) == reference  # bit-identical to the uninterrupted run
    assert "removed" in text and "(left by a killed save)" in text
    assert sorted(p.name for p in ckpt.iterdir() if "_temp" in p.name or p.name.startswith(".scratch")) == []
    print(
        f"\nMWMS PreemptMode=REQUEUE GraceTime={GRACE}: checkpoint at step {stopped_at} "
        f"{took:.1f} s after the preemptor was submitted; 0 steps lost; end to end "
        f"{time.monotonic() - sent:.1f} s after preemption"
    )


WAIT_FOR_STOP = (
    "import time, tfslurm.runtime as r\n"
    "print('ready', flush=True)\n"
    "while not r.requested(): time.sleep(0.05)\n"
    "print('stopping', flush=True)\n"
)


# ---------------------------------------------------------------- restart cap (no TF)
def test_restart_loop_stops_at_the_cap_with_one_line(preempt_cluster, tmp_path):
    """Every run is stopped by `scancel --signal=TERM` to its steps and requeued; the third
    run (restart 2) is over TFSLURM_MAX_RESTARTS=1: one line, exit 86, the job FAILED."""
    cluster = preempt_cluster
    script = tmp_path / "prog.py"
    script.write_text(WAIT_FOR_STOP)
    job, log = submit(
        cluster,
        tmp_path,
        "mwms.sbatch",
        "python",
        str(script),
        options=("-p", "low", "--export", "ALL,TFSLURM_MAX_RESTARTS=1"),
    )
    for run in (1, 2):
        wait_for(log, rf"run {run}, nodes[\s\S]*ready[\s\S]*ready", timeout=60)
        cluster.run(["scancel", "--signal=TERM", str(job)], timeout=10)
        wait_requeued_then_release(cluster, job, restarts=run)
    state = cluster.wait_job(job, timeout=60)
    text = log.read_text()
    assert state == "FAILED", text[-2000:]
    assert job_field(cluster, job, "ExitCode") == "86:0"
    capped = re.findall(r"^tfslurm run: error: (.*)$", text, re.MULTILINE)  # the batch script's check
    assert capped == [
        (
            "the job was restarted 2 times, more than --max-restarts 1: not starting "
            "again (exit 86; earlier runs of this log say why they stopped)"
        )
    ], text
    assert text.count("stopped early by SIGTERM: exit 85") == 4  # 2 tasks x 2 runs
    assert "run 3, nodes" in text and "run 4" not in text


# ---------------------------------------------------------------- F1: no orphans (no TF)
def _pids_with(cluster, cmdline: bytes) -> list[int]:
    """Processes of ``cluster``'s nodes running exactly ``cmdline``."""
    return [pid for pid, _, command in node_processes(cluster) if command == cmdline]


def test_sigkill_of_the_supervisor_ends_the_program_and_the_step(preempt_cluster, tmp_path):
    cluster = preempt_cluster
    marker = f"333.{time.time_ns() % 1000000}"
    srun = subprocess.Popen(
        ["srun", "-N1", "-n1", tfslurm_command(), "run", "--", "sleep", marker],
        env={**cluster.env, **job_env(tmp_path)},
        cwd=str(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        sleeper: list[int] = []
        deadline = time.monotonic() + 30
        while not sleeper and time.monotonic() < deadline:
            sleeper = _pids_with(cluster, f"sleep\0{marker}\0".encode())
            time.sleep(0.1)
        assert len(sleeper) == 1, srun.stderr.read() if srun.poll() is not None else "no sleep"
        child = int(Path(f"/proc/{sleeper[0]}/stat").read_text().rsplit(")", 1)[1].split()[1])
        supervisor = int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert b"tfslurm" in Path(f"/proc/{supervisor}/cmdline").read_bytes()
        killed = time.monotonic()
        import os

        os.kill(supervisor, signal.SIGKILL)
        srun.wait(30)  # the step ends: nothing of the task is left to wait for
        took = time.monotonic() - killed
        deadline = time.monotonic() + 5
        while _pids_with(cluster, f"sleep\0{marker}\0".encode()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _pids_with(cluster, f"sleep\0{marker}\0".encode()) == []
        assert srun.returncode != 0  # the task was killed: never success
        print(f"\nSIGKILL of tfslurm run: step ended {took:.2f} s later, no process left")
    finally:
        if srun.poll() is None:
            srun.kill()
            srun.wait()


# ---------------------------------------------------------------- signal to the steps
@pytest.mark.tf
@needs("tensorflow")
def test_mwms_signal_to_steps_requeues_by_exit_code_no_scontrol(preempt_cluster, tmp_path):
    """`scancel --signal=USR1 JOB` (to the tasks, not the batch script) does not end the job
    COMPLETED part way: the tasks checkpoint and exit 85; with TFSLURM_REQUEUE=exit the
    script runs no Slurm command and exits 85, and slurm.conf RequeueExit=85 requeues the
    job; the next run finishes every step."""
    text, stopped_at, seconds = usr1_to_steps_requeued_by_exit(
        preempt_cluster, tmp_path, "-p", "low", "--export", "ALL,TFSLURM_REQUEUE=exit"
    )
    assert "tfslurm: requeueing job" not in text  # no scontrol
    print(
        f"\nMWMS scancel --signal=USR1 (steps) -> RequeueExit=85: checkpoint at step "
        f"{stopped_at}, 0 steps lost, {seconds:.1f} s to COMPLETED"
    )


# ---------------------------------------------------------------- PS + ClusterCoordinator
# PreemptMode=REQUEUE for PS behaves the same (measured: checkpoint on SIGTERM, 0 steps lost,
# 41-50 s to COMPLETED); only CANCEL runs here, to keep the suite short (REQUEUE: MWMS test).
@pytest.mark.parametrize("partition", ["low-cancel"])
@pytest.mark.tf
@needs("tensorflow")
def test_ps_preempted_with_gracetime_checkpoints_and_resumes(preempt_cluster, tmp_path, partition):
    """ParameterServerStrategy, preempted: SIGTERM to every task; the ps and workers stay up
    while the chief checkpoints from them, the chief exits 85 and the template requeues the
    job — with PreemptMode=CANCEL too: `scontrol requeue` from the batch script succeeds
    during the GraceTime, so the job comes back and ends COMPLETED (22.05, 26.05); 24.11 ends
    it PREEMPTED after that run all the same. Every step is trained exactly once after the
    resume."""
    cluster, steps = preempt_cluster, 150
    program = example("ps", steps=steps, step_delay=0.03, log_every=10)
    job, log = submit(cluster, tmp_path, "ps.sbatch", *program, options=("-p", partition))
    wait_for(log, r"step 30/150", timeout=120)
    sent = time.monotonic()
    preemptor = preempt(cluster, tmp_path)
    stopped_at = preempted_at(log)
    wait_requeued_then_release(cluster, job, timeout=90)
    assert cluster.wait_job(preemptor, timeout=60) == "COMPLETED"
    # 24.11 ends the job PREEMPTED after the requeued run, which trains to the end (below)
    end = "PREEMPTED" if preemption_outlives_requeue() else "COMPLETED"
    text = completed(cluster, job, log, state=end)
    assert "restart 2:" not in text, text[-3000:]
    assert re.search(r"ps:0: SIGTERM received: staying up until the chief", text), text[-3000:]
    assert "stopped early by SIGTERM: exit 85" in text
    assert "tfslurm: requeueing job" in text
    resumed_at = re.search(r"resumed from \S+ at step (\d+)", text)
    assert resumed_at and int(resumed_at.group(1)) == stopped_at, text[-3000:]
    scheduled, counter = ps_done(text)
    assert scheduled == steps - stopped_at and counter >= steps, (scheduled, counter, stopped_at)
    print(
        f"\nPS {partition} GraceTime={GRACE}: checkpoint at step {stopped_at}, 0 steps lost, "
        f"{time.monotonic() - sent:.1f} s from preemption to COMPLETED"
    )


# ---------------------------------------------------------------- TF's own handler
@pytest.mark.tf
@needs("tensorflow")
def test_mwms_tf_preemption_handler_with_termination_config(preempt_cluster, tmp_path):
    """tf.distribute.experimental.PreemptionCheckpointHandler with
    tfslurm.termination_config(): SIGTERM to the steps, TF saves on every worker and exits
    85, the template requeues, TF's handler restores, every step is trained once."""
    cluster, steps = preempt_cluster, 200
    program = example("mwms_handler", steps=steps, step_delay=0.03, log_every=20)
    job, log = submit(cluster, tmp_path, "mwms.sbatch", *program, options=("-p", "low"))
    wait_for(log, r"step 40/200", timeout=120)
    sent = time.monotonic()
    cluster.run(["scancel", "--signal=TERM", str(job)], timeout=10)
    wait_for(log, r"checkpoint saved by PreemptionCheckpointHandler after a stop signal: exit 85", timeout=60)
    wait_requeued_then_release(cluster, job, timeout=90)
    text = completed(cluster, job, log)
    starts = re.findall(r"\[worker:(\d)\] restart 1: PreemptionCheckpointHandler starts at step (\d+)", text)
    assert len(starts) == 2 and starts[0][1] == starts[1][1] and int(starts[0][1]) > 40, text[-3000:]
    in_sync(text, steps)
    print(
        f"\nMWMS + PreemptionCheckpointHandler + termination_config: stopped and resumed at "
        f"step {starts[0][1]}, {time.monotonic() - sent:.1f} s to COMPLETED"
    )


@pytest.mark.tf
@needs("tensorflow")
def test_keras_fit_backup_and_restore_stopped_and_resumed(preempt_cluster, tmp_path):
    """Keras fit + BackupAndRestore in one task: SIGTERM to the step, fit ends at the
    epoch's end after the backup, exit 85, requeue, fit continues from that epoch."""
    cluster, epochs = preempt_cluster, 60
    program = example("keras_fit", epochs=epochs, step_delay=0.1)
    job, log = submit(cluster, tmp_path, "mwms.sbatch", *program, options=("-p", "low", "-N1"))
    wait_for(log, r"epoch 10/60", timeout=120)
    sent = time.monotonic()
    cluster.run(["scancel", "--signal=TERM", str(job)], timeout=10)
    stopped = int(wait_for(log, r"stopped at epoch (\d+): BackupAndRestore saved it", timeout=60).group(1))
    wait_requeued_then_release(cluster, job, timeout=90)
    text = completed(cluster, job, log)
    assert re.search(rf"restart 1: fit starts at epoch {stopped}\b", text), text[-3000:]
    assert re.search(rf"final epoch {epochs} weights \w+", text), text[-3000:]
    print(
        f"\nKeras fit + BackupAndRestore: stopped at epoch {stopped}, resumed there, "
        f"{time.monotonic() - sent:.1f} s to COMPLETED"
    )


# ---------------------------------------------------------------- admin requeue, node failure
def epilogs_received(cluster) -> int:
    """How many epilog-complete messages (one per node and run of a job) the controller has
    received since it started, as sdiag counts them."""
    out = cluster.run(["sdiag"], timeout=10).stdout
    found = re.search(r"MESSAGE_EPILOG_COMPLETE\s*\(\s*6012\)\s*count:(\d+)", out)
    assert found, f"no MESSAGE_EPILOG_COMPLETE count in sdiag's output:\n{out}"
    return int(found.group(1))


def wait_quiet(cluster, job: int, epilogs: int, timeout: float) -> None:
    """Until every node is idle, no process of ``job`` runs on them any more and the
    controller has had ``epilogs`` epilog-complete messages. A node set DOWN is no longer
    waited for, but its late epilog-complete is still counted against the job: when it
    comes after the next run has started (seen on 22.05 in 2 of 7 runs under load), that run
    has one node fewer as far as srun is told ("SLURM_JOB_NUM_NODES environment variable
    conflicts with allocated node count (2 != 1)"), and its step waits for ever."""
    marker = f"SLURM_JOB_ID={job}".encode()
    deadline = time.monotonic() + timeout
    while True:
        states = cluster.run(["sinfo", "-h", "-N", "-o", "%T"], timeout=10).stdout.split()
        left = [pid for pid, environ, _ in node_processes(cluster) if marker in environ]
        received = epilogs_received(cluster)
        if set(states) == {"idle"} and not left and received >= epilogs:
            return
        assert time.monotonic() < deadline, (
            f"nodes {states}, processes of job {job} left: {left}, epilogs {received} of {epilogs}"
        )
        time.sleep(0.2)


@pytest.mark.tf
@needs("tensorflow")
def test_mwms_scontrol_requeue_then_node_failure_both_resume(preempt_cluster, tmp_path):
    """`scontrol requeue` (SIGTERM, SIGKILL after KillWait=2 s): the tasks checkpoint on the
    SIGTERM, 0 steps lost. Then a node fails (set DOWN) in the resumed run: Slurm requeues
    the --requeue job, which resumes from its last checkpoint (<= 20 steps lost: periodic
    every 20; a node set DOWN keeps its processes, which get SIGTERM and checkpoint too)."""
    cluster, steps = preempt_cluster, 200
    program = example("mwms", steps=steps, step_delay=0.03, log_every=20, checkpoint_every=20)
    job, log = submit(cluster, tmp_path, "mwms.sbatch", *program, options=("-p", "low"))
    wait_for(log, r"step 40/200", timeout=120)
    cluster.run(["scontrol", "requeue", str(job)], timeout=10)
    saved = preempted_at(log, timeout=30)
    wait_requeued_then_release(cluster, job, timeout=90)
    wait_for(log, r"restart 1: resumed from \S+ at step \d+[\s\S]*step (1[0-9]\d)/200", timeout=120)
    node = "node2"
    epilogs = epilogs_received(cluster)
    try:
        cluster.run(["scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=test"], timeout=10)
        wait_restarted = time.monotonic()
        while job_field(cluster, job, "Restarts") != "2" and time.monotonic() - wait_restarted < 60:
            time.sleep(0.2)
    finally:
        cluster.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], timeout=10)
    assert job_field(cluster, job, "Restarts") == "2", log.read_text()[-3000:]
    before_failure = max(int(s) for s in re.findall(r"step (\d+)/200", log.read_text()))
    # The DOWN node's tasks live on and checkpoint; the requeued job keeps its id, so a run
    # started before they are gone (and the node idle again) has its step 12.0 killed by
    # the clean-up meant for the earlier run (24.11 and 26.05: run 3 ends FAILED), and one
    # started before both nodes' epilogs of run 2 are in waits for ever (22.05).
    wait_quiet(cluster, job, epilogs + len(cluster.nodes), timeout=60)
    release(cluster, job)
    text = completed(cluster, job, log, timeout=300)
    resumed_at = dict(re.findall(r"restart (\d): resumed from \S+ at step (\d+)", text))
    assert resumed_at["1"] == str(saved), text[-3000:]  # scontrol requeue: 0 steps lost
    # at most one interval (20) is lost: the last periodic checkpoint, or (as here, where a
    # DOWN node's processes still live and get SIGTERM) the one taken on the signal
    assert int(resumed_at["2"]) >= before_failure - 20, (before_failure, resumed_at)
    in_sync(text, steps)
    print(
        f"\nscontrol requeue: checkpoint at step {saved}, 0 lost; node failure after step "
        f"~{before_failure}: resumed at {resumed_at['2']} (periodic checkpoint every 20)"
    )


# ---------------------------------------------------------------- in-allocation restart
@pytest.mark.tf
@needs("tensorflow")
def test_mwms_failed_step_reruns_in_the_allocation(preempt_cluster, tmp_path):
    """TFSLURM_STEP_RESTARTS=1: a worker SIGKILLed mid-training fails the step; the
    template runs it again in the same allocation (srun only: no requeue, no queue wait)
    and it resumes from the last periodic checkpoint."""
    cluster, steps = preempt_cluster, 200
    program = example("mwms", steps=steps, step_delay=0.03, log_every=20, checkpoint_every=20)
    options = ("-p", "low", "--export", "ALL,TFSLURM_STEP_RESTARTS=1")
    job, log = submit(cluster, tmp_path, "mwms.sbatch", *program, options=options)
    wait_for(log, r"step 60/200", timeout=120)
    killed = time.monotonic()
    kill_task(cluster, job, 1)
    text = completed(cluster, job, log)
    assert re.search(
        r"tfslurm: step failed \(exit \d+\): running it again in this allocation "
        r"\(0 more\)",
        text,
    ), text[-3000:]
    assert job_field(cluster, job, "Restarts") == "0"
    rerun = resumed(text, restart=0)
    assert len(rerun) == 2 and rerun[0][1] == rerun[1][1], text[-3000:]
    assert int(rerun[0][1]) >= 60 and int(rerun[0][1]) % 20 == 0
    in_sync(text, steps)
    print(
        f"\nMWMS worker killed, step re-run in the allocation: resumed at step "
        f"{rerun[0][1]}, {time.monotonic() - killed:.1f} s from the kill to COMPLETED"
    )
