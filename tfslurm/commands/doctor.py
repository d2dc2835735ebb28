"""``tfslurm doctor``: check a site, an allocation, or both, before a real training run.

On a login node (no job): Slurm's commands, the SPANK plugin, one release for the plugin
and tfslurm, the hook's wrappers (:mod:`tfslurm.doctor.site`). In an allocation (a salloc
shell, a batch script) the same, then one short step over every node
(:mod:`tfslurm.doctor.gather`, :mod:`tfslurm.doctor.node`). ``--submit -- OPTIONS`` submits a
short job with those sbatch options that runs the allocation's checks, waits for it and
prints its findings with the login node's.

One line per finding, naming the nodes and the fix; ``--json`` prints ``{"findings":
[...], "checked": [...]}``. Exit status 0: nothing found; 1: a finding; 2: bad usage.

This module is the entry point: it alone reads the environment, and hands the checks what
they need.
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import sys
import tempfile
import time

from tfslurm import __version__, hostlist
from tfslurm.doctor import findings, site
from tfslurm.doctor.findings import Finding, Report
from tfslurm.doctor.gather import REPORT_TIMEOUT_S, Gathering, step_report
from tfslurm.doctor.node import FRAMEWORKS, MARKER_PREFIX, NodeCheck, run_node
from tfslurm.errors import HostlistError, SlurmEnvError
from tfslurm.plan import PlanOptions, plan_for
from tfslurm.runtime.exits import EXIT_USAGE, MEANINGS
from tfslurm.settings import TF_DIST_VARIABLE
from tfslurm.step import Step, job_nodelist

DEFAULT_TIMEOUT_S = 120.0
# how salloc and sbatch pass --tf-dist on to the steps (the plugin's SPANK option variable)
_SPANK_OPTION = "_SLURM_SPANK_OPTION_tfslurm_"
_FINISHED = (
    "",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
)


def _frameworks(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in FRAMEWORKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r} names no framework tfslurm doctor checks; use a comma-separated list of {', '.join(FRAMEWORKS)}"
        )
    return names


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds from 1 to 3600")
    return value


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "\n".join(
        [
            "exit status:",
            f"  {findings.EXIT_HEALTHY:<7}healthy: nothing found (one summary line)",
            f"  {findings.EXIT_FINDING:<7}a finding: one line each, naming the nodes and the fix",
            f"  {EXIT_USAGE:<7}{MEANINGS[EXIT_USAGE]}",
        ]
    )
    parser.add_argument("--json", action="store_true", help='print {"findings": [...], "checked": [...]}')
    parser.add_argument(
        "--framework", metavar="LIST", type=_frameworks, default=(),
        help="frameworks that must import on every node: tensorflow, jax, torch, keras (comma-separated)",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", metavar="S", type=_timeout, default=DEFAULT_TIMEOUT_S,
        help="seconds the nodes (or the --submit job) have to answer (default %(default)g)",
    )  # fmt: skip
    parser.add_argument(
        "--submit", action="store_true",
        help="submit a short job with the sbatch options after '--' that checks its allocation, wait for it",
    )  # fmt: skip
    parser.add_argument("sbatch_options", nargs="*", metavar="-- OPTIONS", help="sbatch options (--submit)")
    # the step's own tasks: the gathering point's address, the wrappers to check there
    parser.add_argument("--node-check", metavar="HOST:PORT", type=_address, help=argparse.SUPPRESS)
    parser.add_argument("--wrapper", action="append", default=[], help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.node_check:
        return _node(args)
    if args.sbatch_options and not args.submit:
        raise SlurmEnvError("sbatch options are only for --submit (add --submit, or leave them out)")
    step = Step.from_environ()
    if step.context == "step":
        raise SlurmEnvError(
            "tfslurm doctor runs its own step: run it on a login node, in a salloc shell or a batch script, not under srun"
        )
    if args.submit and step.context != "outside":
        raise SlurmEnvError("--submit is for a login node: in an allocation, run tfslurm doctor without it")
    env = dict(os.environ)
    commands = site.Commands(env)
    here = socket.gethostname()
    report = site.site_report(commands, __version__, here)
    if args.submit:
        report = report.plus(_submitted(args, commands, here))
    elif step.context != "outside":
        report = report.plus(_allocation(args, step, env, commands, here))
    print(report.as_json() if args.json else report.text(), flush=True)
    return report.status


def _allocation(
    args: argparse.Namespace, step: Step, env: dict[str, str], commands: site.Commands, here: str
) -> Report:
    text = job_nodelist(env)
    try:
        nodes = hostlist.expand(text or "")
    except HostlistError as exc:
        raise SlurmEnvError(f"SLURM_JOB_NODELIST: {exc}") from None
    if not nodes:
        raise SlurmEnvError("SLURM_JOB_NODELIST is not set: this allocation names no nodes")
    gathering = Gathering(nodes, here)
    argv = [
        "srun", f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}", "--ntasks-per-node=1",
        "--job-name=tfslurm-doctor", sys.executable, "-m", "tfslurm", "doctor",
        "--node-check", f"{here}:{gathering.port}",
    ]  # fmt: skip
    if args.framework:
        argv += ["--framework", ",".join(args.framework)]
    for path in _wrappers(commands):
        argv += ["--wrapper", path]
    # the doctor's step is no --tf-dist step, whatever the allocation asked for: its one
    # task per node must not be refused by a spec that does not fit it
    plain = {k: v for k, v in env.items() if k != TF_DIST_VARIABLE and _SPANK_OPTION not in k}
    tail = gathering.run(argv, plain, args.timeout, REPORT_TIMEOUT_S)
    return step_report(nodes, gathering.replies, f"{here}:{gathering.port}", tail)


def _wrappers(commands: site.Commands) -> list[str]:
    """The hook wrappers the site configures: each node checks its own copy."""
    values = site.config_values(commands(["scontrol", "show", "config"]).output)
    lines = (
        site.plugin_lines(values["PlugStackConfig"], site.read_text) if values.get("PlugStackConfig") else []
    )
    paths = [line.prolog for line in lines if line.prolog]
    if values.get("TaskProlog"):
        paths.append(values["TaskProlog"])
    return list(dict.fromkeys(paths))


def _node(args: argparse.Namespace) -> int:
    step = Step.from_environ()
    if step.context != "step":
        raise SlurmEnvError("--node-check is run by tfslurm doctor in its own step, not by hand")
    plan = plan_for(step, "worker:*", PlanOptions(assign=False))
    own = plan.own
    env = dict(os.environ)
    planned = plan.task_env()
    node = step.node_name or own.node
    check = NodeCheck(
        node=node,
        host=own.host,
        port=own.port,
        peers=[(t.node, t.host, t.port) for t in plan.tasks if t.rank != own.rank],
        gather=args.node_check,
        marker=f"{MARKER_PREFIX}{step.job_id}.{step.step_id}-",
        gpus=step.gpus,
        frameworks=args.framework,
        container=step.settings.container,
        env=env | planned,
        cwd=os.getcwd(),
        python=sys.executable,
    )
    commands = site.Commands(env)

    def wrappers() -> tuple[list[Finding], list[str]]:
        report = Report()
        for path in args.wrapper:
            found, release = site.wrapper_report(path, "the hook", commands, node)
            report = report.plus(found)
            if release is not None and release != __version__:
                message = (
                    f"the hook's wrapper {path} runs tfslurm {release} here but this tfslurm is {__version__}"
                )
                fix = f"install one release everywhere, then {site.WRITE_WRAPPER.format(path=path)}"
                report = report.plus(Report([Finding("version", [node], message, fix)]))
        return list(report.findings), list(report.checked)

    return run_node(check, list(planned), wrappers)


def _submitted(args: argparse.Namespace, commands: site.Commands, here: str) -> Report:
    """The findings of a job that ran ``tfslurm doctor --json`` in its allocation."""
    inner = [sys.executable, "-m", "tfslurm", "doctor", "--json", "--timeout", f"{args.timeout:g}"]
    if args.framework:
        inner += ["--framework", ",".join(args.framework)]
    fd, out = tempfile.mkstemp(prefix=".tfslurm-doctor-", suffix=".json", dir=os.getcwd())
    os.close(fd)
    err = out[: -len(".json")] + ".err"
    try:
        script = f"#!/bin/sh\nexec {shlex.join(inner)}\n"
        with open(out[: -len(".json")] + ".sh", "w", encoding="utf-8") as f:
            f.write(script)
        submitted = commands(
            ["sbatch", "--parsable", "--job-name=tfslurm-doctor", f"--output={out}", f"--error={err}",
             *args.sbatch_options, out[: -len(".json")] + ".sh"]
        )  # fmt: skip
        job = submitted.output.strip().split(";")[0].split()[-1] if submitted.status == 0 else ""
        if not job.isdigit():
            message = f"sbatch {shlex.join(args.sbatch_options)} failed: {submitted.last_line}"
            return Report(
                [
                    Finding(
                        "allocation", [here], message, "fix the sbatch options (sbatch's message says which)"
                    )
                ]
            )
        state = _wait_job(commands, job, args.timeout + 120)
        if state not in _FINISHED:
            commands(["scancel", job])
            message = f"job {job} did not finish within {args.timeout + 120:g} s (state {state})"
            return Report(
                [
                    Finding(
                        "allocation",
                        [here],
                        message,
                        "check the queue (squeue -j JOB) and the partition's limits; raise --timeout",
                    )
                ]
            )
        return _job_report(job, out, err, here)
    finally:
        for path in (out, err, out[: -len(".json")] + ".sh"):
            try:
                os.unlink(path)
            except OSError:
                pass


def _wait_job(commands: site.Commands, job: str, limit: float) -> str:
    deadline = time.monotonic() + limit
    state = "PENDING"
    while time.monotonic() < deadline:
        ran = commands(["squeue", "-h", "-j", job, "-o", "%T"])
        state = ran.output.strip() if ran.status == 0 else ""
        if state in _FINISHED:
            return state
        time.sleep(0.5)
    return state


def _job_report(job: str, out: str, err: str, here: str) -> Report:
    text = site.read_text(out) or ""
    for line in reversed(text.splitlines()):
        try:
            return findings.Report.from_json(line)
        except ValueError:
            continue
    said = [line for line in (site.read_text(err) or "").splitlines() if line.strip()]
    why = said[-1].strip() if said else "it printed nothing"
    message = f"job {job} printed no findings into {out}: {why}"
    fix = "run from a directory the job's nodes share (its output is written there), and see the job's error output"
    return Report([Finding("allocation", [here], message, fix)])
