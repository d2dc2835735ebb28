"""``tfslurm demo`` for real: a throwaway cluster, the MWMS template, streamed progress."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import skip_without

pytestmark = pytest.mark.train

TFSLURM = [sys.executable, "-m", "tfslurm"]


def _need_tensorflow() -> None:
    skip_without("tensorflow")


def _sigint_default() -> None:
    """Ctrl-C reaches the demo as it does in a terminal, even where this suite was started
    with SIGINT ignored (a background job of a non-interactive shell inherits SIG_IGN, and
    Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def _demo(
    *args: str,
    env: dict[str, str] | None = None,
    as_user: tuple[str, ...] = (),
    cwd: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``tfslurm demo ARGS`` run to its end (``as_user``: the command that runs it as another user)."""
    argv = [*as_user, *TFSLURM, "demo", *args]
    env = _clean_env() if env is None else env
    return subprocess.run(
        argv, capture_output=True, text=True, check=False, timeout=timeout, env=env, cwd=cwd
    )


def _start_demo(*args: str) -> subprocess.Popen[str]:
    """``tfslurm demo ARGS`` started as from a terminal (Ctrl-C reaches it), its output in one pipe."""
    return subprocess.Popen(
        [*TFSLURM, "demo", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_clean_env(),
        preexec_fn=_sigint_default,
    )


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


@pytest.mark.cluster
@pytest.mark.tf
def test_demo_trains_across_nodes_and_cleans_up(slurm_cluster_factory):
    slurm_cluster_factory()  # skips (or fails in CI) where no cluster can run
    _need_tensorflow()
    started = time.monotonic()
    done = _demo(timeout=300)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"\| 0: RANK +JOB +TASK +HOST:PORT +GPUS", out)
    assert re.search(r"\| 0: +0 +worker +0 +node1:\d+ +0,1 \*", out)
    assert re.search(r"\| 0: +1 +worker +1 +node2:\d+", out)
    assert "step 200/200" in out and "step 100/200" in out
    assert re.search(r"COMPLETED .*final weights identical on all 2 workers", out)
    state = re.search(r"\(state (\S+)\)", out).group(1)
    assert not _processes_mentioning(state), "demo left cluster processes behind"
    assert elapsed < 120, elapsed
    print(f"\ntfslurm demo end to end: {elapsed:.1f} s")


@pytest.mark.cluster
@pytest.mark.tf
def test_demo_ctrl_c_tears_the_cluster_down(slurm_cluster_factory):
    slurm_cluster_factory()
    _need_tensorflow()
    proc = _start_demo("--steps", "100000")
    lines = []
    state = None
    try:
        for line in proc.stdout:
            lines.append(line)
            found = re.search(r"\(state (\S+)\)", line)
            state = state or (found.group(1) if found else None)
            if "training 100000 steps" in line:
                break
        assert state, "".join(lines)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, "".join(lines) + rest
    assert "interrupted; the cluster was stopped" in rest
    assert not _processes_mentioning(state)


def test_demo_without_cluster_support_is_one_clear_line():
    env = _clean_env()
    env["TFSLURM_NO_CLUSTER"] = "1"
    done = _demo(env=env)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("tfslurm demo: error: cannot start a local Slurm cluster:")


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to switch to an unprivileged user"
)
def test_demo_as_non_root_says_so():
    env = _clean_env()
    env["HOME"] = "/tmp"
    done = _demo(env=env, as_user=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"), cwd="/tmp")
    assert done.returncode == 2, done.stderr
    assert re.fullmatch(
        r"tfslurm demo: error: cannot start a local Slurm cluster: needs root[^\n]*\n", done.stderr
    ), done.stderr


def test_demo_rejects_bad_options():
    done = _demo("--nodes", "0")
    assert done.returncode == 2
    assert done.stderr.strip() == "tfslurm demo: error: --nodes 0: choose 1 to 16"
    done = _demo("--timeout", "nan")
    assert done.returncode == 2
    assert done.stderr.strip() == "tfslurm demo: error: --timeout nan: choose a positive number of seconds"


def test_demo_rejects_bad_cluster_options_in_one_line():
    for args, needle in (
        (["--state-dir", "rel/dir"], "--state-dir 'rel/dir': must be an absolute path"),
        (["--ctld-port", "80"], "--ctld-port 80: expected an integer in 1024..65534"),
        (["--resv-ports", "30000-20000"], "--resv-ports '30000-20000': expected LOW-HIGH"),
    ):
        done = _demo(*args)
        assert done.returncode == 2
        assert done.stderr.strip() == f"tfslurm demo: error: {needle}" or (
            len(done.stderr.splitlines()) == 1 and needle in done.stderr
        ), done.stderr


@pytest.mark.cluster
@pytest.mark.tf
def test_demo_takes_its_state_dir_and_ports(slurm_cluster_factory, tmp_path):
    """--state-dir, --ctld-port and --resv-ports reach the cluster the demo starts."""
    slurm_cluster_factory()
    _need_tensorflow()
    state = Path(f"/tmp/tfs-demo-opts-{os.getpid()}")
    port = 30000 + os.getpid() % 2000 * 2
    proc = _start_demo(
        "--steps",
        "100000",
        "--state-dir",
        str(state),
        "--ctld-port",
        str(port),
        "--resv-ports",
        "21000-21100",
    )
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "cluster up" in line:
                break
        assert f"(state {state})" in "".join(lines), "".join(lines)
        conf = (state / "etc" / "slurm.conf").read_text()
        assert f"SlurmctldPort={port}\n" in conf and "MpiParams=ports=21000-21100\n" in conf
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, "".join(lines) + rest
    assert not _processes_mentioning(str(state))
    shutil.rmtree(state, ignore_errors=True)
