"""One release everywhere: ``tfslurm --version``, the plugin built with the same release, and
the one line a step prints when the plugin and the hook come from different releases
(docs/admin-guide.md, "Versions").

The cluster tests build the plugin twice, with the package's release and with another one
(``TFD_VERSION=``), and run a ``--tf-dist`` step through the plugin's ``prolog=`` mode with
the wrapper of this tree, whose per-node run states the package's release.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from plugin_build import PLUGIN_DIR, PLUGIN_NAME, build_tools_missing, make, plugin_work_dir
from tfslurm import __version__, prolog
from tfslurm.localcluster import LocalCluster

ROOT = Path(__file__).resolve().parents[1]
OTHER_RELEASE = "0.0.1+other"
# The start of the mismatch line (plugin/src/version.c); the rest names both releases.
MISMATCH = "tfslurm: the plugin is version "
STEP = ("--tf-dist=worker:*", "-N2", "-n4", "--ntasks-per-node=2")


def test_cli_prints_the_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tfslurm", "--version"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"tfslurm {__version__}\n", "")


def test_the_package_metadata_reads_the_one_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"] and "version" not in project["project"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tfslurm.__version__"}


def test_plugin_and_hook_name_the_version_line_alike() -> None:
    version_h = (PLUGIN_DIR / "src" / "version.h").read_text()
    assert f'#define TFD_VERSION_LINE "{prolog.VERSION_LINE}"\n' in version_h


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The plugin of this tree's release and the same sources claiming another release."""
    work = plugin_work_dir(tmp_path_factory, "versions")
    built = {}
    for name, variables in (("same", {}), ("other", {"TFD_VERSION": OTHER_RELEASE})):
        done = make(work / name, "all", **variables)
        assert done.returncode == 0, done.stdout + done.stderr
        built[name] = work / name / PLUGIN_NAME
    built["wrapper"] = prolog.write_wrapper(work / "tfslurm-taskprolog")
    return built


def test_plugin_states_the_release_it_was_built_from(builds: dict[str, Path]) -> None:
    """Read from tfslurm/__init__.py by default, in the --tf-dist help text."""
    assert f"(docs/tf-dist.md; tfslurm {__version__}).".encode() in builds["same"].read_bytes()
    assert f"(docs/tf-dist.md; tfslurm {OTHER_RELEASE}).".encode() in builds["other"].read_bytes()


@pytest.mark.parametrize("release", ["", "1.0 beta", "1.0'; rm -rf /", '1"'])
def test_a_release_unfit_for_a_c_string_is_refused(tmp_path: Path, release: str) -> None:
    missing = build_tools_missing()
    if missing:
        pytest.skip(missing)
    done = make(tmp_path, "all", TFD_VERSION=release)
    assert done.returncode != 0
    assert "plugin/Makefile: cannot use the release" in done.stderr and "TFD_VERSION=X.Y.Z" in done.stderr
    assert not (tmp_path / PLUGIN_NAME).exists()


def test_a_new_release_rebuilds_the_plugin(tmp_path: Path) -> None:
    missing = build_tools_missing()
    if missing:
        pytest.skip(missing)
    for release in ("9.9.9", "9.9.10"):
        done = make(tmp_path, "all", TFD_VERSION=release)
        assert done.returncode == 0, done.stderr
        assert f"tfslurm {release})".encode() in (tmp_path / PLUGIN_NAME).read_bytes()


# --- on a real cluster ----------------------------------------------------------------------


def cluster_with(factory: Callable[..., LocalCluster], plugin: Path, wrapper: Path) -> LocalCluster:
    return factory(num_nodes=2, gpus=0, plugstack_lines=[f"optional {plugin} prolog={wrapper}"])


def slurmd_logs(cluster: LocalCluster) -> str:
    return "".join(
        p.read_text(errors="replace") for p in Path(cluster.files.path("log")).glob("slurmd-*.log")
    )


def mismatch_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if MISMATCH in line]


@pytest.mark.cluster
def test_a_plugin_of_another_release_says_so_once_per_node(
    slurm_cluster_factory: Callable[..., LocalCluster], builds: dict[str, Path]
) -> None:
    cluster = cluster_with(slurm_cluster_factory, builds["other"], builds["wrapper"])
    assert f"tfslurm: plugin version {OTHER_RELEASE}" in slurmd_logs(cluster)  # slurmd at start
    logged_before = len(mismatch_lines(slurmd_logs(cluster)))
    done = cluster.srun(*STEP, "sh", "-c", 'test -n "$TF_CONFIG"', timeout=120)
    assert done.returncode == 0, done.stderr  # a mismatch never fails a task
    shown = mismatch_lines(done.stderr)
    want = (
        f"{MISMATCH}{OTHER_RELEASE} but the hook {builds['wrapper']} is version {__version__}; "
        'install both from one release (docs/admin-guide.md, "Versions")'
    )
    assert shown == [want, want], done.stderr  # the first task of each of the 2 nodes
    logged = mismatch_lines(slurmd_logs(cluster))[logged_before:]
    assert len(logged) == 2 and all(line.endswith(want) for line in logged), logged


@pytest.mark.cluster
def test_a_plugin_and_hook_of_one_release_say_nothing(
    slurm_cluster_factory: Callable[..., LocalCluster], builds: dict[str, Path]
) -> None:
    cluster = cluster_with(slurm_cluster_factory, builds["same"], builds["wrapper"])
    assert f"tfslurm: plugin version {__version__}" in slurmd_logs(cluster)
    done = cluster.srun(*STEP, "sh", "-c", 'test -n "$TF_CONFIG"', timeout=120)
    assert done.returncode == 0, done.stderr
    assert "tfslurm" not in done.stderr, done.stderr
    assert mismatch_lines(slurmd_logs(cluster)) == []
