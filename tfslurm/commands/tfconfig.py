"""``tfslurm tf-config``: print this task's TF_CONFIG (compact JSON, one line).

Run it as a task of a step (under srun). In a batch script, outside Slurm, or with a jobs
spec that does not add up to the step's tasks it prints one error line and exits 2.
"""

from __future__ import annotations

import argparse

from tfslurm.commands.plan import add_plan_options, plan_options
from tfslurm.plan import resolve_plan
from tfslurm.step import Step


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)


def run(args: argparse.Namespace) -> int:
    plan = resolve_plan(Step.from_environ(), args.jobs, plan_options(args, gpus=False))
    print(plan.tf_config())
    return 0
