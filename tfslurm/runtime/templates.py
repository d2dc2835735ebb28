"""Where the sbatch templates are: package data when installed, the repository otherwise."""

from __future__ import annotations

import os
from importlib import resources

from tfslurm.errors import TfslurmError

TEMPLATES = ("mwms.sbatch", "ps.sbatch", "ps-evaluator.sbatch", "jax.sbatch", "torch.sbatch", "keras.sbatch")


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
