"""TFSLURM_CONTAINER: the container command ``tfslurm run`` starts the program with, per
runtime (tfslurm.runtime.container), and stop signals reaching a Python program through it,
without Slurm or a container runtime (``env --`` stands in for one). The real runtimes on
the real cluster: tests/test_containers_cluster.py, test_containers_training_cluster.py."""

from __future__ import annotations

import signal
import sys

import pytest

from conftest import tfslurm_run
from tfslurm.errors import ContainerError
from tfslurm.runtime.container import container_prefix, container_start, passed_names
from tfslurm.settings import Settings

ENV = {
    "TF_CONFIG": "{}",
    "CUDA_VISIBLE_DEVICES": "1",
    "SLURM_PROCID": "0",
    "PATH": "/host/bin",
    "HOME": "/home/u",
    "PYTHONPATH": "/host/lib",
    "USER": "u",
    "BASH_FUNC_f%%": "() { :; }",
    "TFSLURM_CONTAINER": "ch-run /img --",
    "TFSLURM_WATCHED": "1",
}


def test_ch_run_gets_the_task_directory_and_keeps_the_environment():
    start = container_start(("ch-run", "/img", "--"), ("python", "t.py"), ENV, "/work/dir")
    assert start.argv == ("ch-run", "--cd=/work/dir", "/img", "--", "python", "t.py")
    assert start.env == {k: v for k, v in ENV.items() if k != "TFSLURM_CONTAINER"} | {
        "TFSLURM_WATCHED": "container"
    }


@pytest.mark.parametrize("given", [("-c", "/x"), ("--cd=/x",), ("--cd", "/x"), ("-c/x",)])
def test_ch_run_keeps_a_directory_given(given):
    start = container_start(("ch-run", *given, "/img", "--"), ("python", "t.py"), ENV, "/work")
    assert start.argv == ("ch-run", *given, "/img", "--", "python", "t.py")


def test_ch_run_gets_a_user_where_none_is_set():
    env = {k: v for k, v in ENV.items() if k != "USER"}
    start = container_start(("ch-run", "/img", "--"), ("python",), env, "/w")
    assert start.env["USER"]


def test_podman_gets_every_variable_but_the_hosts_paths_after_run():
    prefix = ("podman", "--runtime", "runc", "run", "--rm", "IMAGE")
    start = container_start(prefix, ("python", "t.py"), ENV, "/w")
    names = ["CUDA_VISIBLE_DEVICES", "SLURM_PROCID", "TFSLURM_WATCHED", "TF_CONFIG", "USER"]
    passed = [word for name in names for word in ("-e", name)]
    assert start.argv == (
        "podman", "--runtime", "runc", "run", "--network=host", "-w", "/w", *passed,
        "--rm", "IMAGE", "python", "t.py",
    )  # fmt: skip
    assert passed_names(ENV) == [
        "CUDA_VISIBLE_DEVICES", "SLURM_PROCID", "TFSLURM_CONTAINER", "TFSLURM_WATCHED", "TF_CONFIG", "USER",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "given, added",
    [
        (("--network", "slirp4netns"), ("-w", "/w")),
        (("--net=none",), ("-w", "/w")),
        (("-w", "/x"), ("--network=host",)),
        (("--workdir=/x",), ("--network=host",)),
    ],
)
def test_podman_keeps_the_network_and_directory_given(given, added):
    start = container_start(("podman-hpc", "run", *given, "IMAGE"), ("python",), {}, "/w")
    assert start.argv == ("podman-hpc", "run", *added, "-e", "TFSLURM_WATCHED", *given, "IMAGE", "python")


def test_other_commands_run_as_given():
    start = container_start(("apptainer", "exec", "img.sif"), ("python", "t.py"), ENV, "/w")
    assert start.argv == ("apptainer", "exec", "img.sif", "python", "t.py")
    assert "TFSLURM_CONTAINER" not in start.env


@pytest.mark.parametrize(
    "setting, message",
    [
        ("ch-run '/img --", 'TFSLURM_CONTAINER="ch-run \'/img --" cannot be split into words'),
        ("podman --rm IMAGE", "TFSLURM_CONTAINER='podman --rm IMAGE' is a podman command without 'run'"),
    ],
)
def test_unusable_container_commands_are_one_line_errors(setting, message):
    with pytest.raises(ContainerError) as raised:
        container_start(container_prefix(setting), ("python",), {}, "/w")
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_blank_setting_is_no_container():
    assert Settings.from_environ({"TFSLURM_CONTAINER": "  "}).container is None


PROGRAM = (
    "import os, signal, sys, time\n"
    "got = []\n"
    "signal.signal(signal.SIGUSR1, lambda s, f: got.append('USR1'))\n"
    "signal.signal(signal.SIGTERM, lambda s, f: got.append('TERM'))\n"
    "print('ready', os.environ.get('TFSLURM_WATCHED'), 'TFSLURM_CONTAINER' in os.environ, flush=True)\n"
    "end = time.time() + 20\n"
    "while not got and time.time() < end: time.sleep(0.02)\n"
    "print(*got, flush=True)\n"
)


@pytest.mark.parametrize("container", ["env --", "/usr/bin/env"])
def test_sigterm_reaches_a_python_program_in_a_container_as_usr1(tmp_path, container):
    (tmp_path / "prog.py").write_text(PROGRAM)
    # this Python, by path: a Debian root (tests/matrix.sh) has no `python` on PATH
    proc = tfslurm_run("--", sys.executable, str(tmp_path / "prog.py"), TFSLURM_CONTAINER=container)
    assert proc.stdout is not None and proc.stdout.readline().split() == ["ready", "container", "False"]
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert (out.split(), proc.returncode) == (["USR1"], 85), err


def test_a_command_in_a_container_gets_sigterm_as_it_came(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    program = f"exec {sys.executable} {tmp_path / 'prog.py'}"
    proc = tfslurm_run("--", "sh", "-c", program, TFSLURM_CONTAINER="env --")
    assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert out.split() == ["TERM"], err


def test_bad_container_setting_fails_tfslurm_run_with_one_line():
    proc = tfslurm_run("--", "python", "x.py", TFSLURM_CONTAINER="podman --rm IMAGE")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and err.strip().splitlines()[-1].startswith(
        "tfslurm run: error: TFSLURM_CONTAINER='podman --rm IMAGE' is a podman command without 'run'"
    ), err
