"""``tfslurm prolog``: the TaskProlog hook, and the wrapper that slurm.conf points at.

Without options it prints this task's ``export`` lines (see :mod:`tfslurm.prolog`); Slurm
runs it through the wrapper, which skips Python entirely for jobs without ``--tf-dist``.
``--node`` prints the lines of every task of the step on this node (the plugin's ``prolog=``
mode runs the wrapper that way, once per node).
``--write-wrapper PATH`` writes that wrapper for this installation's Python and prints the
configuration lines that name it, by its absolute path.
"""

from __future__ import annotations

import argparse
import os
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
        help="interpreter the wrapper runs: a path, or a command name looked up on PATH "
        "(default: this one, %(default)s)",
        default=sys.executable,
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    if not (args.print_wrapper or args.write_wrapper):
        return prolog.main(argv=["--node"] if args.node else None)
    python = prolog.find_python(args.python, os.environ.get("PATH", os.defpath))
    if args.print_wrapper:
        sys.stdout.write(prolog.wrapper_script(python))
        return 0
    path = prolog.write_wrapper(args.write_wrapper, python)
    print(f"wrote {path}")
    print(f"set-up A, plugstack.conf:  optional <LIBDIR>/spank_tfslurm.so prolog={path}")
    print(f"set-up B, slurm.conf on every node:  TaskProlog={path}")
    print(f"per job, no admin needed:  srun --task-prolog={path} ...")
    return 0
