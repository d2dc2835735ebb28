"""``tfslurm template NAME [DEST]``: write one of the sbatch templates, to start a job from.

The templates are package data, so every installation has them, wherever it is installed
(``--list`` names them). An existing file is kept unless ``--force`` is given.
"""

from __future__ import annotations

import argparse
import os

from tfslurm.errors import TfslurmError, clip
from tfslurm.runtime.templates import SUFFIX, TEMPLATES, summary, template_text

NAMES = tuple(name.removesuffix(SUFFIX) for name in TEMPLATES)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", nargs="?", help=f"the template: {', '.join(NAMES)}")
    parser.add_argument(
        "dest", metavar="DEST", nargs="?",
        help="the file to write, or a directory to write NAME.sbatch into (default: ./NAME.sbatch)",
    )  # fmt: skip
    parser.add_argument("--force", action="store_true", help="overwrite DEST if it exists")
    parser.add_argument("--list", action="store_true", help="list the templates and what each is for")


def run(args: argparse.Namespace) -> int:
    if args.list:
        if args.name is not None:
            raise TfslurmError(f"give --list or a template NAME ({clip(args.name)!r}), not both")
        width = max(map(len, NAMES))
        for name, file in zip(NAMES, TEMPLATES, strict=True):
            print(f"{name:<{width}}  {summary(template_text(file))}")
        return 0
    if args.name is None:
        raise TfslurmError("give a template NAME (tfslurm template --list names them)")
    name = args.name.removesuffix(SUFFIX)
    if name not in NAMES:
        raise TfslurmError(f"no template {clip(args.name)!r}; the templates: {', '.join(NAMES)}")
    file = name + SUFFIX
    dest = args.dest or file
    if os.path.isdir(dest):
        dest = os.path.join(dest, file)
    text = template_text(file)
    try:
        # "x": an existing file is refused by the open itself, not by a check before it
        with open(dest, "w" if args.force else "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise TfslurmError(f"{clip(dest)!r} exists; give --force to overwrite it") from None
    except OSError as exc:
        raise TfslurmError(f"cannot write {clip(dest)!r}: {exc.strerror}") from None
    print(f"wrote {dest} (submit it: sbatch {dest} [PROGRAM [ARGS...]])")
    return 0
