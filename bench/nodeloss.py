"""What a lost node costs a job with a hot spare (root, Debian slurm-wlm, tensorflow-cpu).

    PYTHONPATH=. python bench/nodeloss.py [--runs 3] [--kill | --silent | --partition | --hang | --straggler] [--ps]

Starts a 4-node local cluster (SlurmdTimeout 5 s) and submits ``mwms.sbatch`` with
``SBATCH_NO_KILL=set TFSLURM_SPARE_NODES=1``: three workers and one spare, the MWMS
example with a checkpoint every 10 steps. When worker 0 logs step 45, node2 is set DOWN
(``scontrol update``; ``--kill``: its slurmd and processes SIGKILLed instead; ``--silent``:
its links taken down, then every process on it SIGKILLed, on a cluster with Slurm's default
SlurmdTimeout of 300 s, so that only the supervisor's own probe finds it; node2 is brought
back once the training finished, which ends the job; ``--partition``: only its links taken
down, its processes alive, on that cluster, and brought back once the relaunch trained;
``--hang``: worker 1's program SIGSTOPped, nothing else; ``--straggler``: nothing is lost,
the worker on node2 is 1.5 times slower in its own part of every step from the start, with
``TFSLURM_STRAGGLER=replace``: the step at which it is named stands for the loss, and the
figures count from the line that names it). Prints, per run and as medians
and maxima: the
seconds from the loss to the step's failure (detection; ``--silent``, ``--partition``,
``--hang``: the supervisor's line naming the node or the rank), to the relaunch, to the first step trained again, and the steps trained
twice. ``--ps``:
``ps.sbatch`` with two tasks per node instead (chief and ps on node1, two workers on each of
node2 and node3, node4 the spare), node2 lost when the chief logs step 45. These are the
figures in docs/fault-tolerance.md.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tfslurm.localcluster import LocalCluster, missing_requirements, nodefail, procs
from tfslurm.runtime.templates import template_path

RELAUNCH = re.compile(
    r"tfslurm: relaunch 1 \((?:node node2 lost|no node lost)\): controller asked in [\d.]+ s, srun started ([\d.]+) s, "
    r"first step trained again \(step \d+\) [\d.]+ s after the step failed \(failed at ([\d.]+), step at ([\d.]+)\)"
)


SILENT = re.compile(
    r"tfslurm: (?:node node2 silent|rank \d+ \(worker:\d+ on node2\) (?:hung|straggles)): .* \(at ([\d.]+)\)"
)
NAMED = ("silent", "partition", "hang", "straggler")  # the ways the supervisor finds itself and names
STRAGGLER = re.compile(r"straggles: .* \(to step (\d+)\)")


def program_of(cluster: LocalCluster, job: int, procid: int) -> int:
    """The PID of task ``procid``'s program: the process ``tfslurm run`` forked, the one of
    the task's processes whose parent is another of them; a TF server (PS) runs in the
    task's own process, then that one."""
    pids = []
    for pid in procs.pids_in_netns(cluster._network.netns_inodes()):
        try:
            environ = set(Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if {f"SLURM_JOB_ID={job}".encode(), f"SLURM_PROCID={procid}".encode()} <= environ:
            pids.append(pid)
    for pid in pids:
        parent = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
        if parent in pids:
            return pid
    if len(pids) == 1:
        return pids[0]
    raise SystemExit(f"no program of task {procid} of job {job}")


def wait_for(path: Path, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pattern.search(path.read_text()) if path.exists() else None
        if found:
            return found
        time.sleep(0.05)
    raise SystemExit(f"{pattern.pattern!r} not in {path} after {timeout} s")


# per strategy: the template, the example, sbatch's extra options, the step line of the
# task that logs the training, and the line with the step a run resumes after
STRATEGIES = {
    "mwms": ("mwms.sbatch", "tfslurm.examples.mwms", (), r"\[worker:0\] step (\d+)/",
             r"\[worker:0\] restart 0: resumed from \S+ at step (\d+)"),
    "ps": ("ps.sbatch", "tfslurm.examples.ps", ("--ntasks-per-node=2",), r"\[chief:0\] step (\d+)/",
           r"\[chief:0\] scheduling steps (\d+)\.\."),
}  # fmt: skip


def one_run(cluster: LocalCluster, work: Path, how: str, strategy: str) -> dict[str, float]:
    template, example, options, step_line, resume_line = STRATEGIES[strategy]
    work.mkdir()
    work.chmod(0o755)
    tfslurm = str(Path(sys.executable).with_name("tfslurm"))
    env = {
        "TFSLURM": tfslurm,
        "TFSLURM_CHECKPOINT_DIR": str(work / "ckpt"),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "SBATCH_NO_KILL": "set",
        "TFSLURM_SPARE_NODES": "1",
        "no_proxy": "*",
    }
    program = ["python", "-m", example, "--steps", "200", "--step-delay", "0.05"]
    program += ["--log-every", "1", "--checkpoint-every", "10"]
    if how == "straggler":
        program += ["--slow-node", "node2", "--slow-by", "1.5"]
        env["TFSLURM_STRAGGLER"] = "replace"
    out = cluster.run(
        [
            "sbatch",
            "--parsable",
            "-N4",
            *options,
            "-o",
            str(work / "job.out"),
            template_path(template),
            *program,
        ],
        env_extra=env,
        cwd=str(work),
    )
    job, log = int(out.stdout.split(";")[0]), work / "job.out"
    if how == "straggler":
        named = wait_for(log, SILENT, 180)
        lost = float(named.group(1))
    else:
        wait_for(log, re.compile(step_line.replace(r"(\d+)", "45")), 180)
    if how == "straggler":
        pass
    elif how == "silent":
        nodefail.silence_node(cluster, "node2")
        lost = time.time()
    elif how == "partition":
        nodefail.partition_node(cluster, "node2")
        lost = time.time()
    elif how == "hang":
        # MWMS: worker 1 on node2; PS (chief, ps on node1): worker 0, the server on node2
        os.kill(program_of(cluster, job, 2 if strategy == "ps" else 1), signal.SIGSTOP)
        lost = time.time()
    elif how == "kill":
        nodefail.kill_node(cluster, "node2")
        lost = time.time()
    else:
        cluster.run(["scontrol", "update", "NodeName=node2", "State=DOWN", "Reason=bench"])
        lost = time.time()
    found = wait_for(log, RELAUNCH, 180)
    silent = SILENT.search(log.read_text()) if how in NAMED else None
    if how == "partition":
        nodefail.heal_node(cluster, "node2")
    if how == "silent":  # the job ends when Slurm hears from node2 again (its old step)
        wait_for(log, re.compile(r"tfslurm run: .*program finished, exit 0|final step 200"), 300)
        nodefail.restore_node(cluster, "node2")
    state = cluster.wait_job(job, timeout=180)
    text = log.read_text()
    failed_at = text.index("Node failure on node2" if silent is None else silent.group(0))
    if how == "straggler":  # the step it was named at; the steps past the stop's checkpoint
        named_step = int(STRAGGLER.search(text).group(1))  # type: ignore[union-attr]
        resumed = int(re.findall(resume_line, text)[0])
        last = int(re.findall(step_line, text[: text.index("relaunching on")])[-1])
        stepped = float(found.group(3))
        nodefail.revive_node(cluster, "node2")
        cluster.wait_idle()
        if state != "COMPLETED":
            raise SystemExit(f"job {job} ended {state}: {text[-2000:]}")
        return {
            "named_at_step": named_step,
            "first_step": stepped - lost,
            "steps_again": last - resumed,
        }
    failed_step = int(re.findall(step_line, text[:failed_at])[-1])
    if strategy == "ps":  # the relaunched chief schedules from the step after its checkpoint
        resumed = int(re.findall(resume_line, text)[1]) - 1
    else:
        resumed = int(re.findall(resume_line, text)[0])
    failed, started, stepped = float(found.group(2)), float(found.group(1)), float(found.group(3))
    nodefail.revive_node(cluster, "node2")
    cluster.wait_idle()
    if state != "COMPLETED":
        raise SystemExit(f"job {job} ended {state}: {text[-2000:]}")
    return {
        "detect": (float(silent.group(1)) if silent else failed) - lost,
        "relaunch": failed + started - lost,
        "first_step": stepped - lost,
        "steps_again": failed_step - resumed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--kill", action="store_true", help="kill node2 instead of setting it DOWN")
    how.add_argument(
        "--silent", action="store_true", help="take node2's links down, then kill it (SlurmdTimeout 300 s)"
    )
    how.add_argument("--partition", action="store_true", help="take node2's links down, its processes alive")
    how.add_argument("--hang", action="store_true", help="SIGSTOP a worker's program on node2")
    how.add_argument("--straggler", action="store_true", help="the worker on node2 1.5x slower; replace")
    parser.add_argument(
        "--ps", action="store_true", help="ParameterServerStrategy (ps.sbatch) instead of MWMS"
    )
    args = parser.parse_args()
    missing = missing_requirements()
    if missing:
        print("cannot run: " + "; ".join(missing), file=sys.stderr)
        return 1
    rows = []
    with tempfile.TemporaryDirectory(prefix="tfslurm-nodeloss-") as tmp:
        os.chmod(tmp, 0o755)
        how = next(
            (h for h in ("silent", "partition", "hang", "straggler", "kill") if getattr(args, h)), "down"
        )
        quiet_slurm = how in ("silent", "partition")  # only the supervisor's own finding counts
        with LocalCluster(num_nodes=4, gpus=0, slurmd_timeout=300 if quiet_slurm else 5) as cluster:
            for n in range(args.runs):
                row = one_run(cluster, Path(tmp) / f"run{n}", how, "ps" if args.ps else "mwms")
                rows.append(row)
                print("  ".join(f"{k} {v:.2f}" for k, v in row.items()), flush=True)
    how = {
        "silent": "links down, then every process killed (SlurmdTimeout 300 s)",
        "partition": "links down, processes alive (SlurmdTimeout 300 s)",
        "hang": "a worker's program on node2 SIGSTOPped (PS: its server)",
        "straggler": "the worker on node2 1.5x slower in its own time, TFSLURM_STRAGGLER=replace",
        "kill": "slurmd and processes killed (SlurmdTimeout 5 s)",
        "down": "scontrol update State=DOWN",
    }[how]
    what = "PS chief+ps, 4 workers + 1 spare" if args.ps else "MWMS 3 workers + 1 spare"
    when = "slow from the start" if how.startswith("the worker on node2") else "lost at step 45"
    print(f"{what}, node2 {when} ({how}), median (max) of {args.runs}:")
    for key, label in (
        ("named_at_step", "straggler named at step"),
        ("detect", "loss -> step failed"),
        ("relaunch", "loss -> srun relaunched"),
        ("first_step", "loss (named) -> first step trained"),
        ("steps_again", "steps trained again"),
    ):
        values = [r[key] for r in rows if key in r]
        if not values:
            continue
        unit = "" if key in ("steps_again", "named_at_step") else " s"
        print(f"  {label:<28} {statistics.median(values):6.2f}{unit} ({max(values):.2f}{unit})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
