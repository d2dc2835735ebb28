"""A set-up step killed half-way never poisons the next run. The container image's build
(tests/images.sh) and a version root's build (tests/matrix.sh --build-only) run here with
stand-ins for debootstrap and chroot on PATH, which build nothing: what is tested is the
scripts' own handling of their mounts and their half-made trees. Each build is SIGKILLed
while its mounts are up (no trap runs), must leave no mount behind, and the next run must
complete; a mount that an older build left on the tree is cleared, never deleted through.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure

CHECKOUT = Path(__file__).resolve().parents[1]

# debootstrap --variant=minbase SUITE ROOT MIRROR: the few directories the scripts write to
DEBOOTSTRAP = """#!/bin/sh
mkdir -p "$3/proc" "$3/etc/apt/apt.conf.d" "$3/usr/sbin" "$3/usr/local/bin" "$3/tmp" "$3/var/lib/apt/lists"
"""
# chroot ROOT COMMAND...: once, the command that matches $HANG_ON marks $HANG_AT and
# hangs (the test kills the build there); sysconfig's question gets a site-packages; the
# rest succeeds doing nothing
CHROOT = """#!/bin/sh
root=$1; shift
case "$*" in *sysconfig*) mkdir -p "$root/opt/venv/site"; echo /opt/venv/site; exit 0 ;; esac
if [ -n "${HANG_AT:-}" ] && [ ! -e "$HANG_AT" ] && case "$*" in *"$HANG_ON"*) true ;; *) false ;; esac; then
    touch "$HANG_AT"
    exec sleep 600
fi
exit 0
"""


@pytest.fixture
def tools(tmp_path: Path) -> dict[str, str]:
    """The environment of a build with the stand-ins first on PATH."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare (the scripts mount)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("debootstrap", DEBOOTSTRAP), ("chroot", CHROOT)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def mounts_under(path: Path) -> list[str]:
    prefix = f"{path}/"
    return [
        line.split()[1]
        for line in Path("/proc/mounts").read_text().splitlines()
        if line.split()[1].startswith(prefix)
    ]


def killed_while_hanging(argv: list[str], env: dict[str, str], hang_at: Path, hang_on: str) -> None:
    """Run ``argv`` until its stand-in chroot hangs on ``hang_on``, then SIGKILL it all."""
    build = subprocess.Popen(
        argv, env={**env, "HANG_AT": str(hang_at), "HANG_ON": hang_on},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not hang_at.exists() and build.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert hang_at.exists(), f"the build never reached {hang_on!r}: rc {build.poll()}"
    finally:
        os.killpg(build.pid, signal.SIGKILL)
        _, err = build.communicate(timeout=30)
    assert build.returncode == -signal.SIGKILL, err


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_an_image_build_killed_half_way_leaves_no_mount_and_the_next_builds(tools, tmp_path):
    cache = tmp_path / "images"
    root = cache / "bookworm-py"
    env = {**tools, "TFSLURM_IMAGE_CACHE": str(cache)}
    argv = [str(CHECKOUT / "tests" / "images.sh"), sys.executable]
    # killed in pip's step: /proc and this machine's pip settings are mounted in the image
    killed_while_hanging(argv, env, tmp_path / "hung", "-m venv")
    assert mounts_under(root) == []
    assert not (root / ".tfslurm-image-ready").exists()
    done = run(argv, env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == str(root)
    assert (root / ".tfslurm-image-ready").exists() and mounts_under(root) == []


def test_a_mount_an_older_image_build_left_is_cleared_not_deleted_through(tools, tmp_path):
    cache = tmp_path / "images"
    root = cache / "bookworm-py"
    kept = tmp_path / "pip-settings"  # as a read-only bind mount of the machine's pip settings
    kept.mkdir()
    (kept / "pip.conf").write_text("[global]\n")
    (root / "etc" / "xdg" / "pip").mkdir(parents=True)
    subprocess.run(["mount", "--bind", "-o", "ro", str(kept), str(root / "etc" / "xdg" / "pip")], check=True)
    try:
        done = run(
            [str(CHECKOUT / "tests" / "images.sh"), sys.executable],
            {**tools, "TFSLURM_IMAGE_CACHE": str(cache)},
        )
    finally:
        for path in reversed(mounts_under(root)):
            subprocess.run(["umount", "-l", path], check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (kept / "pip.conf").read_text() == "[global]\n"  # not deleted through the mount
    assert (root / ".tfslurm-image-ready").exists()


def test_a_root_build_killed_half_way_leaves_no_mount_and_the_next_builds(tools, tmp_path):
    cache = tmp_path / "matrix"
    root = cache / "trixie"
    env = {**tools, "TFSLURM_MATRIX_CACHE": str(cache)}
    argv = [str(CHECKOUT / "tests" / "matrix.sh"), "trixie", "--build-only"]
    # killed in apt-get's step: /proc is mounted in the root
    killed_while_hanging(argv, env, tmp_path / "hung", "apt-get update")
    assert mounts_under(root) == []
    assert not (root / ".tfslurm-root-ready").exists()
    done = run(argv, env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "matrix.sh: trixie root ready" in done.stdout, done.stdout
    assert (root / ".tfslurm-root-ready").exists() and mounts_under(root) == []
