"""The templates train in a container (tensorflow-cpu in the image of tests/images.sh) on
the real local cluster, through TFSLURM_CONTAINER (docs/containers.md), and every stop path
reaches the program in the container.

* MWMS preempted (PreemptMode=REQUEUE, GraceTime), per runtime: SIGTERM reaches the
  program in the container as the preemption signal, it checkpoints, the job is requeued,
  resumes at that step and ends COMPLETED with the weights of an uninterrupted bare run.
* ``scancel --signal=USR1`` to the steps, per runtime: the same, requeued by
  RequeueExit=85.
* Both also with ``podman run --rm``, whose exit status after Slurm's signal is podman's own
  (127 or 143), not the program's 85.
* ps.sbatch (both runtimes): the chief's program in the container; every step runs.

The image has no Python of this machine: a program that ran at all ran in the container.
The cluster is tests/test_stops_cluster.py's (the same options: one cluster for both).
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from conftest import needs, skip_without
from containers import (
    image_root,  # noqa: F401  (the `root` fixture)
    prefix,
)
from jobs import (
    completed,
    example,
    in_sync,
    preempted_at,
    ps_done,
    resumed,
    submit,
    wait_for,
    wait_requeued_then_release,
)
from stopping import GRACE, preempt, preemption_outlives_requeue, usr1_to_steps_requeued_by_exit

pytestmark = [pytest.mark.cluster, pytest.mark.train, pytest.mark.tf, needs("tensorflow")]


@pytest.fixture(scope="module")
def preempt_cluster(slurm_cluster_factory, root):
    return slurm_cluster_factory(
        num_nodes=2, gpus=0, preempt_grace=GRACE, extra_conf_lines=["RequeueExit=85"]
    )


def contained(runtime: str, root: Path, work: Path, *options: str) -> tuple[str, ...]:
    """sbatch options that run the job's programs in ``runtime``'s container (``podman --rm``:
    podman with --rm). PATH (ch-run passes the caller's on): this checkout's Python outside,
    the image's /usr/local/bin inside, where that directory does not exist."""
    work.chmod(0o755)
    path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    name, _, remove = runtime.partition(" ")
    container = " ".join(prefix(name, root, work, remove=remove == "--rm"))
    return ("--export", f"ALL,PATH={path},TFSLURM_CONTAINER={container}", *options)


# podman --rm is the usr1 test's: a requeue with a container removed at each exit
@pytest.mark.parametrize("runtime", ["charliecloud", "podman"])
def test_mwms_in_container_preempted_resumes_to_equal_weights(preempt_cluster, root, tmp_path, runtime):
    cluster, steps = preempt_cluster, 300
    program = example("mwms", steps=steps, log_every=20)
    ref_dir, run_dir = tmp_path / "ref", tmp_path / "run"
    ref_dir.mkdir(), run_dir.mkdir()
    ref, ref_log = submit(cluster, ref_dir, "mwms.sbatch", *program, options=("-p", "high"))  # bare
    options = contained(runtime, root, run_dir, "-p", "low")
    job, log = submit(cluster, run_dir, "mwms.sbatch", *program, "--step-delay", "0.05", options=options)
    wait_for(log, r"step 40/300", timeout=120)
    reference = in_sync(completed(cluster, ref, ref_log, timeout=120), steps)
    sent = time.monotonic()
    preemptor = preempt(cluster, tmp_path)
    stopped_at = preempted_at(log)
    wait_requeued_then_release(cluster, job, timeout=90)
    assert cluster.wait_job(preemptor, timeout=60) == "COMPLETED"
    if preemption_outlives_requeue():  # 24.11: run 2 trains to the end, then Slurm requeues again
        wait_for(log, rf"\[worker:0\] final step {steps} weights", timeout=150)
        wait_requeued_then_release(cluster, job, restarts=2, timeout=90)
    text = completed(cluster, job, log)
    assert re.search(r"tfslurm run: worker:\d: SIGTERM \(preemption", text), text[-3000:]
    assert re.search(r"stopped early by SIGTERM: exit 85", text), text[-3000:]
    assert "tfslurm: requeueing job" in text
    assert resumed(text) == [("0", str(stopped_at)), ("1", str(stopped_at))], text[-3000:]
    assert in_sync(text, steps) == reference  # bit-identical to the uninterrupted bare run
    print(
        f"\nMWMS in {runtime}, PreemptMode=REQUEUE GraceTime={GRACE}: checkpoint at step "
        f"{stopped_at}, 0 steps lost, weights equal to the bare run; "
        f"{time.monotonic() - sent:.1f} s from preemption to COMPLETED"
    )


@pytest.mark.parametrize("runtime", ["charliecloud", "podman", "podman --rm"])
def test_mwms_in_container_usr1_to_steps_requeues(preempt_cluster, root, tmp_path, runtime):
    options = contained(runtime, root, tmp_path, "-p", "low")
    options = (options[0], options[1] + ",TFSLURM_REQUEUE=exit", *options[2:])
    _, stopped_at, seconds = usr1_to_steps_requeued_by_exit(preempt_cluster, tmp_path, *options)
    print(
        f"\nMWMS in {runtime}, scancel --signal=USR1 (steps): checkpoint at step "
        f"{stopped_at}, 0 steps lost, {seconds:.1f} s to COMPLETED"
    )


@pytest.mark.parametrize("runtime", ["charliecloud", "podman"])
def test_ps_template_chief_in_container(preempt_cluster, root, tmp_path, runtime):
    """ps.sbatch: the chief's program (the coordinator) runs in the container; the ps and
    worker tasks are TF servers of ``tfslurm run`` itself, outside it."""
    program = example("ps", steps=60, log_every=20, step_delay=0.02)
    job, log = submit(
        preempt_cluster, tmp_path, "ps.sbatch", *program, options=contained(runtime, root, tmp_path)
    )
    text = completed(preempt_cluster, job, log)
    assert ps_done(text) == (60, 60), text[-3000:]


@pytest.mark.parametrize("runtime", ["charliecloud", "podman"])
@pytest.mark.parametrize("framework", ["jax", "torch"])
def test_framework_template_with_the_container_as_program(
    preempt_cluster, root, tmp_path, framework, runtime
):
    """jax.sbatch, torch.sbatch: the task exports ``tfslurm env``'s variables, then runs the
    program, here the container command: ch-run passes them on, podman with --env-host."""
    skip_without(framework)
    tmp_path.chmod(0o755)
    container = prefix(runtime, root, tmp_path, env_host=True)
    if runtime == "charliecloud":  # ch-run starts in /, podman in the image's directory
        container = [container[0], "-c", str(tmp_path), *container[1:]]
    else:  # before --rootfs: the word after it is the image, where podman's options end
        container[-2:-2] = ["-w", str(tmp_path)]
    program = [*container, "python", "-m", "tfslurm.examples.collective", framework]
    path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    job, log = submit(
        preempt_cluster, tmp_path, f"{framework}.sbatch", *program, options=("--export", f"ALL,PATH={path}")
    )
    text = completed(preempt_cluster, job, log, timeout=180)
    sums = sorted(line.split(": ", 1)[1] for line in text.splitlines() if " sum " in line)
    assert sums == ["rank 0 of 2: sum 3 (expected 3)", "rank 1 of 2: sum 3 (expected 3)"], text[-3000:]
