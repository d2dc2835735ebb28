"""Where the sbatch templates are: package data when installed, the repository otherwise."""

from __future__ import annotations

import os
from importlib import resources

from tfslurm.errors import TfslurmError

TEMPLATES = ("mwms.sbatch", "ps.sbatch", "ps-evaluator.sbatch", "jax.sbatch", "torch.sbatch", "keras.sbatch")
SUFFIX = ".sbatch"


def template_path(name: str) -> str:
    """Absolute path of template ``name``: ``tfslurm/data/sbatch_templates/`` (package data,
    e.g. a wheel install) first, then ``sbatch_templates/`` next to the package (a git
    checkout, also installed editable)."""
    try:
        packaged = resources.files("tfslurm") / "data" / "sbatch_templates" / name
        if packaged.is_file():
            return str(packaged)
    except (ModuleNotFoundError, NotADirectoryError, TypeError):  # pragma: no cover
        pass
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    beside = os.path.join(os.path.dirname(package_dir), "sbatch_templates", name)
    if os.path.isfile(beside):
        return beside
    raise TfslurmError(
        f"sbatch template {name!r} not found in tfslurm/data/sbatch_templates or "
        f"{os.path.dirname(beside)}; reinstall tfslurm"
    )


def template_text(name: str) -> str:
    """The text of template ``name`` (one of :data:`TEMPLATES`), from the package data
    where there is some (a wheel may be installed zipped: read through importlib.resources),
    from the checkout's ``sbatch_templates/`` otherwise."""
    packaged = resources.files("tfslurm") / "data" / "sbatch_templates" / name
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    with open(template_path(name), encoding="utf-8") as f:
        return f.read()


def summary(text: str) -> str:
    """What a template is for: its second line's text after ``# tfslurm template:``."""
    lines = text.splitlines()
    line = lines[1] if len(lines) > 1 else ""
    return line.removeprefix("#").strip().removeprefix("tfslurm template:").strip()
