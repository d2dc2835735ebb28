"""TFSLURM_CONTAINER: the container command ``tfslurm run`` starts the program with, per
runtime (tfslurm.runtime.container), and stop signals reaching a Python program through it,
without Slurm or a container runtime (``env --`` stands in for one). The same command typed
before the program (``tfslurm run -- ch-run IMG -- python prog.py``) in the real ch-run and
podman, outside Slurm. The real runtimes on the real cluster:
tests/test_containers_cluster.py, test_containers_training_cluster.py."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import containers
from conftest import SINGLE_WORKER, tfslurm_run
from containers import image_root  # noqa: F401  (the `root` fixture)
from tfslurm.errors import ContainerError
from tfslurm.runtime.container import (
    GivenProgram,
    container_prefix,
    container_start,
    given_program,
    passed_names,
)
from tfslurm.runtime.life import RunConfig
from tfslurm.settings import Settings

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

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


def test_podman_writes_the_container_id_for_its_signaller():
    prefix = ("podman", "--runtime", "runc", "run", "--rm", "IMAGE")
    start = container_start(prefix, ("python",), {}, "/w", cidfile="/tmp/t/cid")
    assert start.argv == (
        "podman", "--runtime", "runc", "run", "--network=host", "-w", "/w", "-e", "TFSLURM_WATCHED",
        "--cidfile", "/tmp/t/cid", "--rm", "IMAGE", "python",
    )  # fmt: skip
    assert start.signaller == ("podman", "--runtime", "runc", "kill", "--cidfile", "/tmp/t/cid", "--signal")


@pytest.mark.parametrize("given", [("--cidfile", "/mine"), ("--cidfile=/mine",)])
def test_podman_signals_through_a_container_id_file_given(given):
    start = container_start(("podman", "run", *given, "IMAGE"), ("python",), {}, "/w", cidfile="/tmp/t/cid")
    assert "/tmp/t/cid" not in start.argv and start.argv[-3:] == (*given[-1:], "IMAGE", "python")
    assert start.signaller == ("podman", "kill", "--cidfile", "/mine", "--signal")


def test_only_podman_has_a_signaller():
    for prefix in (("ch-run", "/img", "--"), ("apptainer", "exec", "img.sif")):
        assert container_start(prefix, ("python",), {}, "/w", cidfile="/tmp/t/cid").signaller == ()


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


# A runtime that loses its program's status, as podman does when Slurm's SIGTERM to every
# process of the step reaches it while it tears the container down: it exits 143.
LOSSY_RUNTIME = (
    "import signal, subprocess, sys\n"
    "child = subprocess.Popen(sys.argv[1:])\n"
    "signal.signal(signal.SIGUSR1, lambda s, f: child.send_signal(s))\n"
    "child.wait()\n"
    "sys.exit(143)\n"
)


def lossy_run(tmp_path, program: str, stop: bool):
    (tmp_path / "prog.py").write_text(program)
    (tmp_path / "runtime.py").write_text(LOSSY_RUNTIME)
    container = f"{sys.executable} {tmp_path / 'runtime.py'}"
    proc = tfslurm_run("--", sys.executable, str(tmp_path / "prog.py"), TFSLURM_CONTAINER=container)
    assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
    if stop:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out, err


def test_a_runtime_status_after_a_stop_is_the_stopped_status(tmp_path):
    """After a stop signal the job must be requeued, not fail: 85, not the runtime's 143."""
    rc, out, err = lossy_run(tmp_path, PROGRAM, stop=True)
    assert (out.split()[-1:], rc) == (["USR1"], 85), err
    assert (
        "the container runtime ended with its own status 143 after SIGTERM: exit 85 (not 0: "
        "training is unfinished; the template requeues the job)"
    ) in err


def test_a_runtime_status_without_a_stop_is_kept(tmp_path):
    rc, _, err = lossy_run(tmp_path, "print('ready', flush=True)\n", stop=False)
    assert rc == 143 and "exit 85" not in err, err


# A podman whose own passing on of signals is broken (as once its ``runc kill`` died of
# Slurm's SIGTERM to the step): only ``podman kill --cidfile F --signal N`` reaches the program.
DEAF_PODMAN = """#!{python}
import os, signal, subprocess, sys
args = sys.argv[1:]
cidfile = args[args.index("--cidfile") + 1]
if args[0] == "kill":
    os.kill(int(open(cidfile).read()), int(args[-1]))
    sys.exit(0)
for signum in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):
    signal.signal(signum, signal.SIG_IGN)
# a session of its own, as under podman's conmon: killing this process leaves it running
program = subprocess.Popen(
    args[args.index("IMAGE") + 1 :],
    preexec_fn=lambda: signal.signal(signal.SIGUSR1, signal.SIG_DFL),
    start_new_session=True,
)
open(cidfile, "w").write(str(program.pid))
status = program.wait()
sys.exit(128 - status if status < 0 else status)
"""


def deaf_podman(tmp_path: Path, program: str, **env: str) -> subprocess.Popen[str]:
    """``tfslurm run`` of ``program`` in the deaf podman's container."""
    (tmp_path / "prog.py").write_text(program)
    podman = tmp_path / "podman"
    podman.write_text(DEAF_PODMAN.format(python=sys.executable))
    podman.chmod(0o755)
    container = f"{podman} run IMAGE"
    return tfslurm_run("--", sys.executable, str(tmp_path / "prog.py"), TFSLURM_CONTAINER=container, **env)


def test_a_stop_reaches_the_program_past_a_deaf_podman(tmp_path):
    (tmp_path / "tmp").mkdir()
    proc = deaf_podman(tmp_path, PROGRAM, TMPDIR=str(tmp_path / "tmp"))
    assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert (out.split(), proc.returncode) == (["USR1"], 85), err
    assert list((tmp_path / "tmp").iterdir()) == [], "the container ID's directory is removed"


STUBBORN = (
    "import os, signal\n"
    "signal.signal(signal.SIGUSR1, signal.SIG_IGN)\n"
    "print('ready', os.getpid(), flush=True)\n"
    "signal.pause()\n"  # until a signal it does not ignore ends it
)


def test_a_stop_grace_kills_the_program_in_a_podman_container(tmp_path):
    """The program under podman is not a process of tfslurm run's: the grace's SIGKILL
    reaches it through ``podman kill``, or it would outlive the step."""
    (tmp_path / "tmp").mkdir()
    proc = deaf_podman(tmp_path, STUBBORN, TFSLURM_STOP_GRACE="1", TMPDIR=str(tmp_path / "tmp"))
    assert proc.stdout is not None
    ready, pid = proc.stdout.readline().split()
    assert ready == "ready"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGKILL, err  # as without a container
    assert list((tmp_path / "tmp").iterdir()) == [], "the container ID's directory is removed"
    deadline = time.monotonic() + 10
    while running(int(pid)):
        assert time.monotonic() < deadline, f"the program in the container (pid {pid}) outlived tfslurm run"
        time.sleep(0.05)


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie waiting to be reaped)."""
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def test_bad_container_setting_fails_tfslurm_run_with_one_line():
    proc = tfslurm_run("--", "python", "x.py", TFSLURM_CONTAINER="podman --rm IMAGE")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and err.strip().splitlines()[-1].startswith(
        "tfslurm run: error: TFSLURM_CONTAINER='podman --rm IMAGE' is a podman command without 'run'"
    ), err


@pytest.mark.parametrize(
    "argv, at",
    [
        (("ch-run", "/img", "--", "python", "t.py"), 3),
        (("/usr/bin/ch-run", "-b", "/a:/b", "-c", "/w", "/img", "--", "python", "-m", "m", "--", "x"), 7),
        (("podman", "run", "IMG", "python", "t.py"), 3),
        (("podman", "--runtime", "runc", "run", "--rm", "-it", "IMG", "python"), 7),
        (("podman", "run", "-e", "A", "-eB=1", "-ie", "C", "--name", "n", "--env-host", "IMG", "x"), 11),
        (("podman", "run", "--network=host", "--rootfs", "/root:O", "sh", "-c", "x"), 5),
        (("podman", "run", "--rm", "--", "IMG", "python"), 5),
        (("podman-hpc", "run", "-v", "/a:/a", "IMG", "python"), 5),
    ],
)
def test_a_container_command_typed_before_the_program_is_split_off(argv, at):
    assert given_program(argv) == GivenProgram(argv[:at], argv[at:])


@pytest.mark.parametrize(
    "argv",
    [
        ("python", "t.py"),
        ("podman", "ps"),
        ("apptainer", "version"),
        ("env", "ch-run", "/img", "--", "x"),
        (),
    ],
)
def test_other_programs_are_no_container_command(argv):
    assert given_program(argv) == GivenProgram((), argv)


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ("ch-run", "/img", "python", "t.py"),
            "'ch-run /img python t.py': ch-run needs -- between the image",
        ),
        (
            ("ch-run", "/img", "--"),
            "'ch-run /img --' names no program to run in the container: name it after",
        ),
        (
            ("podman", "run", "-e", "A", "IMG"),
            "'podman run -e A IMG' names no program to run in the container",
        ),
        (("apptainer", "exec", "x.sif", "python"), "'apptainer exec x.sif python' after -- is not supported"),
        (("singularity", "run", "x.sif"), "'singularity run x.sif' after -- is not supported"),
    ],
)
def test_container_commands_not_run_are_one_line_errors(argv, message):
    with pytest.raises(ContainerError) as raised:
        given_program(argv)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_a_container_command_typed_wins_over_the_setting():
    settings = Settings.from_environ({"TFSLURM_CONTAINER": "ch-run /img --"})
    typed = RunConfig.for_command(settings, {}, container=("podman", "run", "IMG"))
    assert typed.container == ("podman", "run", "IMG")
    assert RunConfig.for_command(settings, {}).container == ("ch-run", "/img", "--")


def test_an_apptainer_command_fails_tfslurm_run_with_one_line():
    proc = tfslurm_run("--", "apptainer", "exec", "tf.sif", "python", "train.py")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and err.strip().splitlines() == [
        "tfslurm run: error: 'apptainer exec tf.sif python train.py' after -- is not supported (a stop "
        "signal would not reach the program as the preemption signal): set "
        "TFSLURM_CONTAINER='apptainer exec IMAGE' and run tfslurm run -- python train.py"
    ], err


# What the program in the container got: the plan's variables, its directory, and the
# signals that came within 0.3 s of the first (a raw SIGTERM after the translated one too).
SEEING = (
    "import json, os, signal, time\n"
    "got = []\n"
    "signal.signal(signal.SIGUSR1, lambda s, f: got.append('USR1'))\n"
    "signal.signal(signal.SIGTERM, lambda s, f: got.append('TERM'))\n"
    "names = ('TF_CONFIG', 'TFSLURM_ROLE', 'TFSLURM_WATCHED', 'TFSLURM_CONTAINER')\n"
    "print(json.dumps({n: os.environ.get(n) for n in names} | {'cwd': os.getcwd()}), flush=True)\n"
    "end = time.time() + 20\n"
    "while not got and time.time() < end: time.sleep(0.02)\n"
    "time.sleep(0.3)\n"
    "print(*got, flush=True)\n"
)


@pytest.mark.parametrize("runtime", ["charliecloud", "podman"])
def test_sigterm_reaches_a_program_typed_after_a_container_command_as_usr1(tmp_path, root, runtime):
    """``tfslurm run -- ch-run IMG -- python prog.py`` (and podman's): run as with
    TFSLURM_CONTAINER, not as a plain command that gets the raw SIGTERM and, in podman,
    none of the plan's variables."""
    (tmp_path / "prog.py").write_text(SEEING)
    (tmp_path / "tmp").mkdir()
    container = containers.prefix(runtime, root, tmp_path, with_tfslurm=False)
    # podman's container ID goes under TMPDIR; ch-run binds the host's TMPDIR at /tmp: keep it
    scratch = {"TMPDIR": str(tmp_path / "tmp")} if runtime == "podman" else {}
    proc = tfslurm_run("--", *container, "python", "prog.py", cwd=tmp_path, **scratch)
    assert proc.stdout is not None
    seen = json.loads(proc.stdout.readline() or "{}")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert seen | {"TF_CONFIG": json.loads(seen.get("TF_CONFIG") or "{}")} == {
        "TF_CONFIG": json.loads(SINGLE_WORKER),
        "TFSLURM_ROLE": "worker:0",
        "TFSLURM_WATCHED": "container",
        "TFSLURM_CONTAINER": None,
        "cwd": str(tmp_path),
    }, err
    # podman passes the signal on itself and through `podman kill`: twice (docs/containers.md)
    assert (set(out.split()), proc.returncode) == ({"USR1"}, 85), err
    assert list((tmp_path / "tmp").iterdir()) == [], "the container ID's directory is removed"
