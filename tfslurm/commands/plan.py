"""``tfslurm plan``: the TF cluster plan of the current step as an aligned table.

One row per rank: rank, job, task index, ``host:port`` and GPUs as far as this task can
know them (``?`` = another node's, not knowable here; ``-`` = none; ``*`` marks this task).
The options here are shared by ``tfslurm tf-config`` and ``tfslurm env``.

Under ``srun`` every task computes the plan (so each checks it), but only rank 0 prints it:
one table per step instead of one per task, interleaved. ``--all-tasks`` prints every
task's own view (its own GPUs filled in). ``--json`` prints the same rows as JSON.

``--dry-run --nodelist NODES -- <srun or sbatch options>`` prints the plan those options
would give, without Slurm: ``tfslurm.dryrun`` models the step's variables, read here like
a task's, and each task's own GPUs fill its row. It reads nothing of the environment.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from tfslurm import hostlist
from tfslurm.errors import HostlistError, PlanError
from tfslurm.gpus import MAX_DEVICES
from tfslurm.numbers import ascii_int
from tfslurm.plan import Plan, PlanOptions, aligned, resolve_plan
from tfslurm.step import Step

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


def _number(text: str, low: int, high: int, what: str) -> int:
    """``text`` as a decimal integer in ``low..high``, else the argparse error that says so
    (the option named: the plan's own check would name its argument, ``port_base``)."""
    value = ascii_int(text)
    if value is None or not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}: give one of {low}..{high}")
    return value


def _port(text: str) -> int:
    return _number(text, 1, 65535, "a port")


def _gpus(text: str) -> int:
    return _number(text, 0, MAX_DEVICES, "a GPU count")


def add_plan_options(parser: argparse.ArgumentParser) -> None:
    """Options every plan-printing command takes."""
    parser.add_argument(
        "--jobs", metavar="SPEC",
        help="jobs in rank order, e.g. 'chief:1,worker:*' (default: $TFSLURM_TF_DIST, else all workers)",
    )  # fmt: skip
    parser.add_argument(
        "--port-base", metavar="PORT", type=_port,
        help="first port on each node (default: reserved ports, else derived from job and step id)",
    )  # fmt: skip
    parser.add_argument(
        "--host-template", metavar="TEMPLATE",
        help="host name of a node, e.g. '{node}-ib' (default: $TFSLURM_HOST_TEMPLATE, else the node name)",
    )  # fmt: skip


def add_gpu_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gpus-per-task", metavar="N", type=_gpus,
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
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    dry = parser.add_argument_group("dry run (no Slurm: the plan srun/sbatch options would give)")
    dry.add_argument(
        "--dry-run", action="store_true",
        help="model the step of the srun/sbatch options given after '--' instead of reading this step",
    )  # fmt: skip
    dry.add_argument(
        "--nodelist", metavar="NODES",
        help="the nodes the job may use, in Slurm's node order (a partition's, or a job's SLURM_JOB_NODELIST)",
    )  # fmt: skip
    dry.add_argument("--cpus-per-node", metavar="N", type=int, help="CPUs of each node (how -n spreads)")
    dry.add_argument(
        "--gpus-per-node-available",
        metavar="N",
        type=int,
        help="GPUs of each node (checked against the request)",
    )
    dry.add_argument("slurm_options", nargs="*", metavar="-- OPTIONS", help="srun/sbatch options (--dry-run)")


def run(args: argparse.Namespace) -> int:
    if args.dry_run:
        return _dry_run(args)
    for given, name in ((args.slurm_options, "srun options"), (args.nodelist, "--nodelist")):
        if given:
            raise PlanError(f"{name} are only for --dry-run (add --dry-run, or leave them out)")
    plan = resolve_plan(Step.from_environ(), args.jobs, plan_options(args))
    print_gpu_warnings(plan)  # every task: each warning is said by the task it concerns
    if plan.rank not in (None, 0) and not args.all_tasks:
        return 0  # checked here too; rank 0 prints the step's one table
    if args.json:
        rows = [plan.row(rank) for rank in range(plan.cluster.num_tasks)]
        rule = plan.cluster.ports
        print(json.dumps({"ranks": rows, "ports": rule.describe() if rule is not None else None}))
        return 0
    table = plan.table()
    print(table)
    if not args.all_tasks and plan.cluster.num_tasks > 1 and "?" in table:
        print(
            "(? = GPUs of a task on another node, known only there: --all-tasks prints each task's own view)"
        )
    return 0


def _dry_run(args: argparse.Namespace) -> int:
    # lazy: only a dry run models a step
    from tfslurm.dryrun import dry_run, parse_options, step_environments

    if not args.nodelist:
        raise PlanError("--dry-run needs --nodelist, the nodes the job may use (e.g. 'gpu[01-04]')")
    if args.cpus_per_node is not None and args.cpus_per_node < 1:
        raise PlanError(f"--cpus-per-node {args.cpus_per_node} must be at least 1")
    if args.gpus_per_node_available is not None and args.gpus_per_node_available < 0:
        raise PlanError(f"--gpus-per-node-available {args.gpus_per_node_available} must be 0 or more")
    try:
        nodes = hostlist.expand(args.nodelist)
    except HostlistError as exc:
        raise PlanError(f"--nodelist: {exc}") from None
    slurm = parse_options(args.slurm_options)
    envs = step_environments(
        slurm, nodes, cpus_per_node=args.cpus_per_node, gpus_available=args.gpus_per_node_available
    )
    # each task's variables read as that task reads its own
    result = dry_run([Step.from_environ(env) for env in envs], slurm, args.jobs, plan_options(args))
    for note in result.notes:
        print(f"tfslurm plan: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps({"ranks": list(result.rows), "ports": result.ports}))
        return 0
    print(_dry_table(result.rows))
    print(f"ports: {result.ports}")
    if any(row["gpus"] == [] for row in result.rows):
        print("(- = no GPUs)")
    return 0


def _dry_table(rows: Sequence[Mapping[str, object]]) -> str:
    """The modelled step's rows, aligned: rank, job, task index, node, local id, GPUs."""
    lines = [["RANK", "JOB", "TASK", "NODE", "LOCAL", "GPUS"]]
    for row in rows:
        gpus = row["gpus"]
        shown = ",".join(gpus) if isinstance(gpus, list) else "?"
        cells = (row["rank"], row["job"], row["index"], row["node"], row["local_id"])
        lines.append([*(str(cell) for cell in cells), shown or "-"])
    return aligned(lines, right=(True, False, True, False, True))
