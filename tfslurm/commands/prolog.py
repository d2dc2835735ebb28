"""``tfslurm prolog``: the TaskProlog hook, and the wrapper that slurm.conf points at.

Without options it prints this task's ``export`` lines (see :mod:`tfslurm.prolog`); Slurm
runs it through the wrapper, which skips Python entirely for jobs without ``--tf-dist``.
``--node`` prints the lines of every task of the step on this node (the plugin's ``prolog=``
mode runs the wrapper that way, once per node).
``--write-wrapper PATH`` writes that wrapper for this installation's Python.
"""

from __future__ import annotations

import argparse
import sys

from tfslurm import prolog


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--write-wrapper", metavar="PATH",
        help="write the TaskProlog= shell wrapper to PATH (mode 0755) and print the config lines",
    )  # fmt: skip
    what.add_argument(
        "--print-wrapper", action="store_true",
        help="print the TaskProlog= shell wrapper instead of writing it",
    )  # fmt: skip
    what.add_argument(
        "--node", action="store_true",
        help="print the lines of every task of this step on this node (run in its first task)",
    )  # fmt: skip
    parser.add_argument(
        "--python", metavar="EXE",
        help="interpreter the wrapper runs (default: this one, %(default)s)",
        default=sys.executable,
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    if args.print_wrapper:
        sys.stdout.write(prolog.wrapper_script(args.python))
        return 0
    if args.write_wrapper:
        path = prolog.write_wrapper(args.write_wrapper, args.python)
        print(f"wrote {path}")
        print(f"set-up A, plugstack.conf:  optional <LIBDIR>/spank_tfslurm.so prolog={path}")
        print(f"set-up B, slurm.conf on every node:  TaskProlog={path}")
        print(f"per job, no admin needed:  srun --task-prolog={path} ...")
        return 0
    return prolog.main(argv=["--node"] if args.node else None)
