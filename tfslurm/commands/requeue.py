"""``tfslurm requeue [--hold] [JOB]``: put a job back in the queue through the controller
interface (``tfslurm.controller``), as the templates do when training stopped early.

Exit status 0 when the controller took the requeue; 1, with one line saying why, when it did
not (no Slurm command or pyslurm here, a job without ``--requeue``): the templates then fall
back to exit 85 (slurm.conf ``RequeueExit=85``). 2, as for every usage error of the command
line, when there is no job to requeue or the job is not written as a Slurm job ID.
"""

from __future__ import annotations

import argparse
import re
import sys

from tfslurm.controller import ControllerError, controller
from tfslurm.errors import one_line, shown
from tfslurm.step import requeue_job_name

# What scontrol requeue takes: job IDs, comma-separated, each optionally an array task
# (1234_7, 1234_[1-3], 1234_*) or a heterogeneous component (1234+1). Anything else is a
# typo, said at once as a usage error rather than as the controller's refusal (exit 1,
# which means "Slurm did not take it").
_ARRAY = r"(?:_(?:\d+|\*|\[[\d,\-]+\]))"
_ITEM = rf"\d+(?:{_ARRAY}|\+\d+)?"
JOB_IDS = re.compile(rf"{_ITEM}(?:,{_ITEM})*")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "job", metavar="JOB", nargs="?", default=None,
        help="the job to requeue (default: this task's job, <array>_<task> in an array job)",
    )  # fmt: skip
    parser.add_argument("--hold", action="store_true", help="requeue held (release it with scontrol release)")
    parser.add_argument(
        "--reason", metavar="TEXT", default="", help="said in the line printed before requeueing"
    )


def run(args: argparse.Namespace) -> int:
    job = args.job or requeue_job_name()
    if not job:
        print(
            "tfslurm requeue: error: not in a Slurm job and no JOB given: nothing to requeue", file=sys.stderr
        )
        return 2
    if not JOB_IDS.fullmatch(job):
        source = "JOB" if args.job else "this task's job (SLURM_JOB_ID / SLURM_ARRAY_JOB_ID)"
        print(
            f"tfslurm requeue: error: {source} {shown(job)} is not a Slurm job ID: "
            "give one such as 1234, or 1234_7 for an array task",
            file=sys.stderr,
        )
        return 2
    why = f" ({one_line(args.reason)})" if args.reason else ""  # one line in the job's log
    print(f"tfslurm: requeueing job {job}{why}", flush=True)
    try:
        controller().requeue(job, hold=args.hold)
    except ControllerError as exc:
        print(f"tfslurm requeue: error: {exc}", file=sys.stderr)
        return 1
    return 0
