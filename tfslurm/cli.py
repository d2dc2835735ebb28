"""The ``tfslurm`` command line.

Each subcommand lives in its own module under ``tfslurm.commands`` and is imported only
when it is run, so ``tfslurm prolog`` (run for every task at a site) pays for nothing else.
A module provides ``add_arguments(parser)`` and ``run(args) -> int``; its one-line help
is in ``COMMANDS`` here, so that ``tfslurm --help`` imports no command module.
"""

from __future__ import annotations

import argparse
import importlib
import io
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from tfslurm import __version__
from tfslurm.errors import TfslurmError, one_line

# name -> (module under tfslurm.commands, one-line help). Help text lives here so that
# building the parser does not import every command module.
COMMANDS: dict[str, tuple[str, str]] = {
    "hostlist": ("hostlist", "expand, compress and count Slurm hostlists"),
    "layout": ("layout", "show the rank -> node map of the current step"),
    "plan": ("plan", "show the TF cluster plan of the current step"),
    "tf-config": ("tfconfig", "print this task's TF_CONFIG"),
    "env": ("env", "print the variables this task needs (export lines or JSON)"),
    "prolog": ("prolog", "TaskProlog hook: print export lines for this task"),
    "run": ("run", "run a TF program as this task's role (chief/worker/ps/evaluator)"),
    "supervise": ("supervise", "run the training step from a batch script; relaunch it when a node is lost"),
    "requeue": ("requeue", "put this job back in the queue (the templates' requeue)"),
    "template": ("template", "write an sbatch template (mwms, ps, ...) to start a job from"),
    "doctor": ("doctor", "check the site or an allocation before a training run (one line per finding)"),
    "cluster": ("cluster", "start or stop a throwaway local Slurm cluster (root)"),
    "demo": ("demo", "train with TF across a throwaway local Slurm cluster (root)"),
}


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other tfslurm error (the usage is in --help).

    Subcommand parsers are built from this class too (``add_subparsers`` uses the type
    of its parent)."""

    def error(self, message: str) -> NoReturn:
        # argparse quotes some arguments raw (an unrecognised one): escaped like any error
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # A command's parser refuses what it does not know itself, so that the error names
        # the command and its --help (argparse would hand the words up to "tfslurm").
        known, extra = super().parse_known_args(args, namespace)
        if extra and self._subparsers is None:
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        return known, extra


def _load(name: str) -> ModuleType:
    return importlib.import_module(f"tfslurm.commands.{COMMANDS[name][0]}")


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tfslurm",
        description="TensorFlow distributed training on Slurm.",
    )
    parser.add_argument("--version", action="version", version=f"tfslurm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (_module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == wanted:  # only the command being run gets its full argument set
            _load(name).add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    # Host names are bytes to Slurm: a name that is not UTF-8 (it reaches Python as
    # surrogates, from the environment or arguments) is written back as the same bytes, in
    # any locale, instead of a UnicodeEncodeError traceback in the middle of the output.
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="surrogateescape")
    try:
        return int(_load(args.command).run(args) or 0)
    except TfslurmError as exc:
        print(f"tfslurm {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
