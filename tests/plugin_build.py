"""Building the SPANK plugin (``plugin/``) with its Makefile, out of the source tree.

The plugin's own tests (``test_plugin.py``) and the cluster tests that load it into a real
Slurm build it the same way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

PLUGIN_DIR = Path(__file__).resolve().parent.parent / "plugin"
PLUGIN_NAME = "spank_tfslurm.so"


def build_tools_missing(slurm_headers: bool = True) -> str | None:
    """What the plugin's build lacks here; ``slurm_headers=False``: what the unit test
    program's build (``spec_test``, which needs no Slurm) lacks."""
    for tool in ("make", "cc", "nm"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    if slurm_headers and not Path("/usr/include/slurm/spank.h").exists():
        return "/usr/include/slurm/spank.h not found (install libslurm-dev)"
    return None


def plugin_work_dir(
    tmp_path_factory: Any, name: str, missing: str | None = None, slurm_headers: bool = True
) -> Path:
    """A new directory to build the plugin in, readable by slurmd's users (mode 755). Where
    the build tools (or ``missing``, another need) are absent the test skips; under CI=true,
    where install.sh put them, it fails. ``slurm_headers=False``: for a build that needs
    none (``spec_test``)."""
    missing = build_tools_missing(slurm_headers) or missing
    if missing:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes", "on"):
            pytest.fail(f"CI=true and the plugin cannot be built: {missing}")
        pytest.skip(f"cannot build the plugin: {missing}")
    work: Path = tmp_path_factory.mktemp(name)
    work.chmod(0o755)
    return work


def make(
    out_dir: Path, *targets: str, timeout: float = 300, **variables: str
) -> subprocess.CompletedProcess[str]:
    """Run the plugin Makefile with O=out_dir (the source tree stays clean)."""
    argv = ["make", "-C", str(PLUGIN_DIR), f"O={out_dir}", *targets]
    argv += [f"{name}={value}" for name, value in variables.items()]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def build_plugin(out_dir: Path) -> Path:
    """Build the plugin into out_dir and return the .so."""
    done = make(out_dir, "all")
    assert done.returncode == 0, done.stdout + done.stderr
    return out_dir / PLUGIN_NAME
