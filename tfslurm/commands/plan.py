"""``tfslurm plan``: the TF cluster plan of the current step as an aligned table.

One row per rank: rank, job, task index, ``host:port`` and GPUs as far as this task can
know them (``?`` = another node's, not knowable here; ``-`` = none; ``*`` marks this task).
The options here are shared by ``tfslurm tf-config`` and ``tfslurm env``.

Under ``srun`` every task computes the plan (so each checks it), but only rank 0 prints it:
one table per step instead of one per task, interleaved. ``--all-tasks`` prints every
task's own view (its own GPUs filled in).
"""

from __future__ import annotations

import argparse
import sys

from tfslurm.plan import Plan, PlanOptions, resolve_plan
from tfslurm.step import Step


def add_plan_options(parser: argparse.ArgumentParser) -> None:
    """Options every plan-printing command takes."""
    parser.add_argument(
        "--jobs", metavar="SPEC",
        help="jobs in rank order, e.g. 'chief:1,worker:*' (default: $TFSLURM_TF_DIST, else all workers)",
    )  # fmt: skip
    parser.add_argument(
        "--port-base", metavar="PORT", type=int,
        help="first port on each node (default: reserved ports, else derived from job and step id)",
    )  # fmt: skip
    parser.add_argument(
        "--host-template", metavar="TEMPLATE",
        help="host name of a node, e.g. '{node}-ib' (default: $TFSLURM_HOST_TEMPLATE, else the node name)",
    )  # fmt: skip


def add_gpu_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gpus-per-task", metavar="N", type=int,
        help="share the node's GPUs out N per task (default: as Slurm bound them)",
    )  # fmt: skip


def plan_options(args: argparse.Namespace, gpus: bool = True) -> PlanOptions:
    """The plan options given on the command line (``gpus=False``: no GPU assignment)."""
    return PlanOptions(
        port_base=args.port_base,
        host_template=args.host_template,
        gpus_per_task=getattr(args, "gpus_per_task", None) if gpus else None,
        assign=gpus,
        # --iface where a command has it (None: TFSLURM_IFACE); the table and TF_CONFIG
        # commands show the plan on node names, whatever TFSLURM_IFACE says
        iface=getattr(args, "iface", ""),
    )


def print_gpu_warnings(plan: Plan) -> None:
    """This task's GPU warnings (``tfslurm.gpus.gpu_warnings``), one line each on stderr."""
    for line in plan.gpus.warnings if plan.gpus is not None else ():
        print(line, file=sys.stderr, flush=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)
    add_gpu_options(parser)
    parser.add_argument(
        "--all-tasks", action="store_true",
        help="print the table in every task of the step (default: rank 0 only, once per step)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    plan = resolve_plan(Step.from_environ(), args.jobs, plan_options(args))
    print_gpu_warnings(plan)  # every task: each warning is said by the task it concerns
    if plan.rank not in (None, 0) and not args.all_tasks:
        return 0  # checked here too; rank 0 prints the step's one table
    table = plan.table()
    print(table)
    if not args.all_tasks and plan.cluster.num_tasks > 1 and "?" in table:
        print(
            "(? = GPUs of a task on another node, known only there: --all-tasks prints each task's own view)"
        )
    return 0
