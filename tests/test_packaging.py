"""The Python distribution: ``python -m build`` makes an sdist and a wheel that hold the
sbatch templates (package data), and ``tfslurm template`` works from the installed wheel.

The plugin's packages (``make -C plugin deb|spec|rpm``) are in ``test_plugin.py`` and, loaded
into a real Slurm from the installed .deb, in ``test_site_hook_cluster.py``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tfslurm import __version__
from tfslurm.runtime.templates import TEMPLATES

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "tfslurm", "sbatch_templates")


def test_package_data_templates_are_the_repository_s() -> None:
    """One copy: tfslurm/data/sbatch_templates is the top-level directory (a link), so the
    templates users submit from a checkout and the packaged ones cannot drift apart."""
    data = ROOT / "tfslurm" / "data" / "sbatch_templates"
    assert data.resolve() == (ROOT / "sbatch_templates").resolve()
    assert sorted(TEMPLATES) == sorted(p.name for p in (ROOT / "sbatch_templates").iterdir())


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build`` (sdist, then the wheel from it) of a copy of the sources; no
    build isolation: it runs offline with the test extra's setuptools."""
    if importlib.util.find_spec("build") is None:
        pytest.skip("the 'build' package is not installed (pip install -e '.[test]')")
    work = tmp_path_factory.mktemp("dist")
    src = work / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(ROOT / name, src / name)
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(work / "out"), str(src)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return work / "out"


def test_wheel_holds_the_package_and_its_data(dist: Path) -> None:
    (wheel,) = dist.glob(f"tfslurm-{__version__}-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for template in TEMPLATES:
            packed = z.read(f"tfslurm/data/sbatch_templates/{template}")
            assert packed == (ROOT / "sbatch_templates" / template).read_bytes(), template
        # the jobs spec messages the plugin compiles in: one file, read by the package too
        table = z.read("tfslurm/data/spec_messages.def")
    modules = {
        str(p.relative_to(ROOT)) for p in (ROOT / "tfslurm").rglob("*.py") if "__pycache__" not in p.parts
    }
    assert modules <= names
    assert {"tfslurm/py.typed", "tfslurm/data/taskprolog.sh.in"} <= names
    assert table == (ROOT / "tfslurm" / "data" / "spec_messages.def").read_bytes()
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_sdist_holds_the_templates_as_files(dist: Path) -> None:
    (sdist,) = dist.glob(f"tfslurm-{__version__}.tar.gz")
    prefix = f"tfslurm-{__version__}/tfslurm/data/sbatch_templates/"
    with tarfile.open(sdist) as tar:
        members = {m.name: m for m in tar.getmembers() if m.name.startswith(prefix)}
    assert sorted(members) == sorted(prefix + t for t in TEMPLATES)
    assert all(m.isfile() for m in members.values())


def test_template_command_works_from_the_installed_wheel(dist: Path, tmp_path: Path) -> None:
    """A pure wheel unpacked is an installed one: there is no checkout beside it, so the
    template (and the jobs spec messages) can only come from the package data."""
    (wheel,) = dist.glob("*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    dest = tmp_path / "job.sbatch"
    code = (
        "import sys, tfslurm; from tfslurm.cli import main; from tfslurm.jobspec import split_spec\n"
        "assert tfslurm.__file__.startswith(sys.argv[1]), tfslurm.__file__\n"
        "try:\n    split_spec('ps')\nexcept ValueError as error:\n    print(error)\n"
        "sys.exit(main(['template', 'ps-evaluator', sys.argv[2]]))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {"PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(site), str(dest)],
        capture_output=True, text=True, timeout=60, check=False, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "jobs spec 'ps': job 'ps' has no count; write ps:N or ps:*"
    assert dest.read_bytes() == (ROOT / "sbatch_templates" / "ps-evaluator.sbatch").read_bytes()
