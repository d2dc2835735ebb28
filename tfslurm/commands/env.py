"""``tfslurm env``: the variables this task needs, as ``export`` lines or JSON.

``TF_CONFIG`` (or, when it would exceed the 131,060 bytes a variable can carry through
exec, ``TFSLURM_DESCRIPTOR``, from which tfslurm rebuilds the plan in-process) and this
task's GPU variables (``CUDA_VISIBLE_DEVICES`` ...). ``eval "$(tfslurm env)"`` in a task.
"""

from __future__ import annotations

import argparse
import json
import shlex

from tfslurm.commands.plan import add_gpu_options, add_plan_options, plan_options, print_gpu_warnings

HELP = "print the variables this task needs (export lines or JSON)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)
    add_gpu_options(parser)
    parser.add_argument(
        "--format", choices=("sh", "json"), default="sh",
        help="sh: export lines for eval (default); json: one object",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from tfslurm.plan import plan_from_environ

    plan = plan_from_environ(jobs=args.jobs, **plan_options(args))
    print_gpu_warnings(plan)
    variables = plan.task_env()
    if args.format == "json":
        print(json.dumps(variables, separators=(",", ":")))
    else:
        for name, value in variables.items():
            print(f"export {name}={shlex.quote(value)}")
    return 0
