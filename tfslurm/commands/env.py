"""``tfslurm env``: the variables this task needs, as ``export`` lines or JSON.

``TF_CONFIG`` (or, when it would exceed the 131,060 bytes a variable can carry through
exec, ``TFSLURM_DESCRIPTOR``, from which tfslurm rebuilds the plan in-process) and this
task's GPU variables (``CUDA_VISIBLE_DEVICES`` ...). In a task:
``vars=$(tfslurm env) || exit; eval "$vars"`` (a bare ``eval "$(...)"`` would exit 0 when
this command failed, with nothing set).
``--for keras,jax,torch`` adds (or, without ``tf``, gives instead of TF's) the variables
of those runtimes from the same plan, and ``--iface NAME`` advertises every node by its
address on that interface (``tfslurm.frameworks``, ``tfslurm.iface``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex

from tfslurm.commands.plan import add_gpu_options, add_plan_options, plan_options, print_gpu_warnings
from tfslurm.frameworks import parse_runtimes, runtime_env
from tfslurm.plan import resolve_plan
from tfslurm.settings import Settings
from tfslurm.step import Step


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_plan_options(parser)
    add_gpu_options(parser)
    parser.add_argument(
        "--for", dest="runtimes", metavar="RUNTIMES", action="append",
        help="runtimes to give variables for: tf, keras, jax, torch, comma-separated or repeated "
        "(default: $TFSLURM_FOR, else tf)",
    )  # fmt: skip
    parser.add_argument(
        "--iface", metavar="NAME",
        help="advertise each node by its address on this network interface and set "
        "NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME (default: $TFSLURM_IFACE)",
    )  # fmt: skip
    parser.add_argument(
        "--format", choices=("sh", "json"), default="sh",
        help="sh: export lines for eval (default); json: one object",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    settings = Settings.from_environ()  # read once: the runtimes, then the plan's settings
    chosen = ",".join(args.runtimes) if args.runtimes else settings.frameworks
    runtimes = parse_runtimes(chosen)  # before the plan: a typo is named first
    plan = resolve_plan(Step.from_environ(settings=settings), args.jobs, plan_options(args))
    print_gpu_warnings(plan)
    variables = runtime_env(plan, runtimes, os.environ)  # the task's own KERAS_BACKEND counts
    if args.format == "json":
        print(json.dumps(variables, separators=(",", ":")))
    else:
        for name, value in variables.items():
            print(f"export {name}={shlex.quote(value)}")
    return 0
