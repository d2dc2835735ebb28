"""The container runtimes of the container tests: the image (tests/images.sh) and the
command each runtime is started with on this machine (docs/containers.md).

The image has no tfslurm of its own: where a test wants tfslurm in the container, the
checkout under test is bind-mounted at /opt/tfslurm (the image's Python has that directory
on its path), so the container runs this checkout's code, never a stale copy.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import DECLARED, declared_absent, skip_or_fail

CHECKOUT = Path(__file__).resolve().parent.parent
IMAGES_SH = CHECKOUT / "tests" / "images.sh"
RUNTIMES = ("charliecloud", "podman")
LABEL = "tfslurm-test=1"


def skip_unless_runtimes() -> None:
    """Skip (even in CI) where install.sh declared the container runtimes absent; skip or,
    in CI, fail where they are missing otherwise."""
    why = declared_absent().get("containers")
    if why:
        pytest.skip(f"containers are not tested here: {why} {DECLARED}")
    missing = [c for c in ("ch-run", "podman", "debootstrap") if shutil.which(c) is None]
    if missing:
        skip_or_fail(f"{', '.join(missing)} not installed (Debian: charliecloud, podman, debootstrap)")


def image() -> Path:
    """The image's root directory, built once by tests/images.sh (minutes) and cached."""
    python = Path(sys.prefix) / "bin" / "python"
    done = subprocess.run(
        [str(IMAGES_SH), str(python)], capture_output=True, text=True, timeout=1800, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"tests/images.sh failed: {done.stderr.strip()[-2000:]}", pytrace=False)
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module", name="root")
def image_root() -> Iterator[Path]:
    """``root``: the cached image for a module's tests, its podman containers removed after
    them (a module takes it with ``from containers import image_root``)."""
    skip_unless_runtimes()
    yield image()
    remove_containers()


def podman_base() -> list[str]:
    """``podman [--runtime runc] run`` plus this machine's limits.

    podman asks for higher open-file and process limits than a process without
    CAP_SYS_RESOURCE may set (this machine's containers have none), so the limits are given
    as they are here (processes: at most kernel.pid_max, which runc will not exceed); crun
    refuses a hybrid cgroup v1/v2 hierarchy, runc does not."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    nproc = pid_max if nproc == resource.RLIM_INFINITY else min(nproc, pid_max)
    runtime = ["--runtime", "runc"] if Path("/sys/fs/cgroup/unified").is_dir() else []
    # No --rm by default: the run is then left to inspect. remove_containers() removes the
    # containers by this label. (With --rm, podman 4.3 removing the container while Slurm's
    # SIGTERM comes exits 127 for a task that exited 85: tfslurm run takes that as 85.)
    return ["podman", *runtime, "run", "--label", LABEL, "--ulimit", f"nofile={nofile}:{nofile}",
            "--ulimit", f"nproc={nproc}:{nproc}"]  # fmt: skip


def remove_containers() -> None:
    """Remove the exited containers the tests' podman runs left (they run without --rm)."""
    subprocess.run(["podman", "container", "prune", "-f", "--filter", f"label={LABEL}"],
                   capture_output=True, timeout=120, check=False)  # fmt: skip


def prefix(
    runtime: str,
    root: Path,
    work: Path,
    *,
    with_tfslurm: bool = True,
    env_host: bool = False,
    remove: bool = False,
) -> list[str]:
    """The command that starts a program in the image: ``work`` (the test's directory) at
    the same path inside, the checkout at /opt/tfslurm when ``with_tfslurm``. ``env_host``
    (podman): the whole caller's environment passes, as ch-run's does; ``remove`` (podman):
    ``--rm``, as users often start it."""
    if runtime == "charliecloud":  # ch-run binds the host's /tmp: work is there already
        mount = ["-b", f"{CHECKOUT}:/opt/tfslurm"] if with_tfslurm else []
        return ["ch-run", *mount, str(root), "--"]
    mount = ["-v", f"{CHECKOUT}:/opt/tfslurm:ro"] if with_tfslurm else []
    return [*podman_base(), *(["--rm"] if remove else []), "--network=host", *(["--env-host"] if env_host else []), *mount, "-v", f"{work}:{work}",
            "--rootfs", f"{root}:O"]  # fmt: skip


def user_env() -> dict[str, str]:
    """What a user's shell has and the test cluster's tasks may lack: ch-run needs $USER."""
    return {"USER": os.environ.get("USER") or "root"}
