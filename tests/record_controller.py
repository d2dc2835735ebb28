"""Record what Slurm's controller answers tfslurm, through each backend, into
``tests/data/controller/<slurm version>/`` (as root).

    sudo PATH=PREFIX/bin:PREFIX/sbin:$PATH PYTHONPATH=.:SITE_PACKAGES_WITH_PYSLURM \\
        .venv/bin/python tests/record_controller.py [--out DIR]

Starts a throwaway 2-node cluster of the Slurm found on ``PATH`` (``PrologFlags=Contain``,
so jobs have their ``extern`` step) and walks one job through what tfslurm asks about
(docs/pyslurm.md says how the 25.11 recordings were made). At each
stage it asks the same questions of both backends, one right after the other: the commands
(``CommandController``; every command line and its output is kept) and, where pyslurm
imports and matches the controller, pyslurm (the attributes ``pyslurm_backend`` reads,
as plain JSON). A stage is asked again, up to 20 times, until both backends give the same
answers, so a recording never catches a job between two states. One JSON file per stage:

    {"stage", "description", "slurm", "pyslurm", "job_id",
     "commands": [{"argv": [...], "returncode", "stdout", "stderr"}, ...],
     "pyslurm_job": {...} or null, "pyslurm_nodes": [{...}, ...] or null}

``tests/test_controller_replay.py`` replays them through both backends without a cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from controller_replay import agree
from jobs import release
from tfslurm.controller import ControllerError
from tfslurm.controller import pyslurm_backend as pb
from tfslurm.controller.commands import CommandController
from tfslurm.localcluster import ClusterConfig, LocalCluster, slurm_version

HERE = Path(__file__).resolve().parent
BATCH = "#!/bin/sh\nsrun --ntasks-per-node=1 sleep 600\n"
NOKILL_BATCH = BATCH + "sleep 600\n"  # the job outlives its step


class Recorder(CommandController):
    """The commands backend, keeping every command it runs and what it printed."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[dict[str, Any]] = []

    def _call(self, *argv: str) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, env=self.environ, timeout=30, check=False)
        self.calls.append(
            {"argv": list(argv), "returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
        )
        return super()._call(*argv)


def ask(pyslurm: Any, job_id: str | None, raw_id: str | None) -> dict[str, Any]:
    """Both backends' answers about ``job_id`` (its steps too) and every node, right now;
    pyslurm loads the job by its numeric id ``raw_id``."""
    recorder = Recorder()
    answers: dict[str, Any] = {"commands": recorder.calls, "pyslurm_job": None, "pyslurm_nodes": None}
    if pyslurm is not None:
        if raw_id is not None:
            try:
                answers["pyslurm_job"] = pb.job_record(pyslurm.Job.load(int(raw_id)))
            except pyslurm.PyslurmError as exc:
                answers["pyslurm_job"] = {"error": str(exc), "errno": getattr(exc, "errno", None)}
        answers["pyslurm_nodes"] = [pb.node_record(node) for node in pyslurm.Nodes.load().values()]
    if job_id is not None:
        for question in (recorder.job, recorder.steps):
            try:
                question(job_id)
            except ControllerError:
                pass  # the error is recorded with the command's output
    recorder.nodes()
    return answers


def record(
    out: Path, stage: str, description: str, pyslurm: Any, job_id: str | None, raw_id: str | None = None
) -> None:
    """Ask until both backends agree (20 tries), then write ``out/<stage>.json``."""
    raw_id = raw_id or job_id
    for _ in range(20):
        data = {
            "stage": stage,
            "description": description,
            "slurm": os.environ["TFSLURM_RECORDED_SLURM"],
            "pyslurm": getattr(pyslurm, "__version__", None),
            "job_id": job_id,
            "raw_job_id": raw_id,
            **ask(pyslurm, job_id, raw_id),
        }
        if agree(data):
            break
        time.sleep(0.25)
    else:
        print(f"{stage}: the backends never agreed; recorded the last answers", file=sys.stderr)
    (out / f"{stage}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"recorded {stage}", file=sys.stderr)


def wait_for(what: str, check: Any, timeout: float = 60, seen: Any = None) -> None:
    """Poll ``check`` until true; past ``timeout`` exit naming ``what`` and what ``seen()`` says."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}" + (f"; last seen: {seen()}" if seen else ""))
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="directory (default tests/data/controller/<version>)")
    args = parser.parse_args()
    version = slurm_version()
    out = args.out or HERE / "data" / "controller" / version
    out.mkdir(parents=True, exist_ok=True)
    # PrologFlags=Contain: every job also has its "extern" step, as at sites that use it
    config = ClusterConfig(num_nodes=2, gpus=0, timeout=60, extra_conf_lines=["PrologFlags=Contain"])
    with LocalCluster(config) as cluster:
        os.environ.update(cluster.env)
        full = cluster.run(["scontrol", "--version"]).stdout.split()[-1]
        os.environ["TFSLURM_RECORDED_SLURM"] = full
        ctl = pb.load(CommandController, required=False)
        pyslurm = sys.modules["pyslurm"] if ctl is not None else None
        print(f"Slurm {full}, pyslurm {getattr(pyslurm, '__version__', 'absent')}", file=sys.stderr)
        scenario(cluster, out, pyslurm)
    return 0


def scenario(cluster: LocalCluster, out: Path, pyslurm: Any) -> None:
    commands = CommandController()

    def state(job: str) -> str:
        return commands.job(job).state

    def quiet() -> bool:
        return all(node.state == "IDLE" and not node.flags for node in commands.nodes())

    record(out, "idle", "two idle nodes, no job", pyslurm, None)
    job = str(cluster.sbatch(BATCH, "-N2", "--requeue", "-t", "10", "-o", "/dev/null"))
    wait_for("the job to run its step", lambda: any(s.step_id.endswith(".0") for s in commands.steps(job)))
    record(out, "running", "a 2-node job running one srun step", pyslurm, job)
    commands.requeue(job)
    wait_for("the requeued job to be pending", lambda: state(job) == "PENDING")
    wait_for("the nodes to be idle", quiet)
    record(out, "requeued", "right after scontrol requeue", pyslurm, job)
    release(cluster, int(job))
    wait_for("the requeued job to run", lambda: any(s.step_id.endswith(".0") for s in commands.steps(job)))
    record(out, "running-again", "running again after one requeue", pyslurm, job)
    commands.requeue(job, hold=True)
    wait_for("the held job to be pending", lambda: state(job) == "PENDING")
    wait_for("the nodes to be idle", quiet)
    record(out, "requeue-held", "requeued with hold (scontrol requeuehold)", pyslurm, job)
    commands.release(job)
    release(cluster, int(job))
    wait_for("the released job to run", lambda: any(s.step_id.endswith(".0") for s in commands.steps(job)))
    record(out, "released", "running after release", pyslurm, job)
    cluster.run(["scancel", job])
    wait_for(
        "the job to end", lambda: state(job) not in ("RUNNING", "COMPLETING"), seen=lambda: commands.job(job)
    )
    wait_for("the nodes to be idle", quiet)
    record(out, "cancelled", "the job after scancel", pyslurm, job)

    nokill = str(cluster.sbatch(NOKILL_BATCH, "-N2", "--no-kill", "-t", "10", "-o", "/dev/null"))
    wait_for(
        "the --no-kill job to run its step",
        lambda: any(s.step_id.endswith(".0") for s in commands.steps(nokill)),
    )
    record(out, "nokill-running", "a 2-node --no-kill job running one step", pyslurm, nokill)
    down = cluster.nodes[-1]
    # A node lost for good: its slurmd stopped (it cannot register again, which would bring
    # it back at once under ReturnToService=2), then set DOWN as slurmctld would on a timeout.
    slurmd = next(r.pid for r in cluster.live_daemons() if r.name == "slurmd" and r.node == down)
    os.kill(slurmd, signal.SIGSTOP)
    try:
        cluster.run(["scontrol", "update", f"NodeName={down}", "State=DOWN", "Reason=recorded"])
        wait_for(f"{down} to leave the job", lambda: down not in commands.job(nokill).nodes)
        wait_for("the step to end", lambda: not any(s.step_id.endswith(".0") for s in commands.steps(nokill)))
        record(
            out, "nokill-node-down", f"{down} lost (DOWN): the job runs on in its other node", pyslurm, nokill
        )
        wait_for(
            f"{down} to be not responding",
            lambda: "NOT_RESPONDING" in commands.nodes([down])[0].flags,
            timeout=150,
        )
        record(out, "nokill-node-not-responding", f"{down} DOWN and not answering pings", pyslurm, nokill)
    finally:
        os.kill(slurmd, signal.SIGCONT)
    cluster.run(["scancel", nokill])
    cluster.run(["scontrol", "update", f"NodeName={down}", "State=RESUME"])
    wait_for("the nodes to be idle", quiet)
    drained = cluster.nodes[0]
    cluster.run(["scontrol", "update", f"NodeName={drained}", "State=DRAIN", "Reason=recorded"])
    wait_for(f"{drained} to be drained", lambda: "DRAIN" in commands.nodes([drained])[0].flags)
    record(out, "node-drained", f"{drained} drained, no job", pyslurm, None)
    cluster.run(["scontrol", "update", f"NodeName={drained}", "State=RESUME"])

    wait_for("the nodes to be idle", quiet)
    array = str(cluster.sbatch(BATCH, "-N1", "-w", down, "--array=1-2", "-t", "10", "-o", "/dev/null"))
    task = f"{array}_2"
    wait_for("the array tasks to run", lambda: state(task) == "RUNNING")
    raw = cluster.run(["squeue", "--noheader", "--jobs", task, "--format", "%A"]).stdout.strip()
    record(out, "array-task", "task 2 of a 2-task array, by its <array>_<task> name", pyslurm, task, raw)
    record(out, "unknown-job", "a job id the controller never gave", pyslurm, "999999")
    cluster.run(["scancel", array])


if __name__ == "__main__":
    sys.exit(main())
