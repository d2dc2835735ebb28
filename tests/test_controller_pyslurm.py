"""Choosing the pyslurm backend: a pyslurm that is missing, ends the process when libslurm
starts, is built for another Slurm release or cannot import never breaks a job: one line
on stderr, then the commands.

Each case runs ``controller()`` in a fresh Python whose ``pyslurm`` is a small stand-in
written here (the real one needs a Slurm built by hand: docs/pyslurm.md); the stand-in
does what the real one does at the points the choice depends on: its import reads
PYSLURM_DISABLE_AUTO_INIT, ``slurm_init`` ends the process as libslurm's fatal() does
without a configuration, ``slurmctld.Config.load().version`` is the controller's version.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tfslurm.controller import pyslurm_backend as pb

CHOOSE = (
    "import os, sys\n"
    "from tfslurm.controller import controller\n"
    "first = controller().name\n"
    "second = controller().name\n"
    "print(first, second, os.environ.get('PYSLURM_DISABLE_AUTO_INIT'), "
    "getattr(sys.modules.get('pyslurm'), 'imported_with', None))\n"
)


def stand_in(
    tmp_path: Path, version: str = "25.11.2", controller: str = "25.11.7", init: str = "", load: str = ""
) -> Path:
    """A ``pyslurm`` package in ``tmp_path``: ``init`` is the body of ``slurm_init`` (empty:
    it works), ``load`` runs before ``Config.load`` answers ``controller``."""
    package = tmp_path / "stand-in" / "pyslurm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        textwrap.dedent(
            f"""\
            import os, signal, sys, time
            __version__ = {version!r}
            imported_with = os.environ.get("PYSLURM_DISABLE_AUTO_INIT")
            if os.environ.get("STAND_IN_LOG"):
                with open(os.environ["STAND_IN_LOG"], "a") as log:
                    log.write(f"imported in {{os.getpid()}}\\n")
            class PyslurmError(Exception):
                pass
            def slurm_init(config_path=None):
                {init or "pass"}
            class Config:
                @staticmethod
                def load():
                    {load or "pass"}
                    return type("C", (), {{"version": {controller!r}}})()
            slurmctld = type("slurmctld", (), {{"Config": Config}})
            if not imported_with:
                slurm_init()
            """
        )
    )
    return package.parent


def choose(path: Path | None, script: str = CHOOSE, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "TFSLURM", "PYSLURM"))}
    paths = [str(path)] if path else []
    clean["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.run(
        [sys.executable, "-c", script],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


INSTALLED = pytest.mark.skipif(
    importlib.util.find_spec("pyslurm") is not None, reason="pyslurm is installed here"
)


@INSTALLED
def test_without_pyslurm_auto_takes_the_commands_silently():
    done = choose(None)
    assert (done.returncode, done.stdout, done.stderr) == (0, "commands commands None None\n", "")


@INSTALLED
def test_without_pyslurm_asking_for_it_says_so_once():
    done = choose(None, TFSLURM_CONTROLLER="pyslurm")
    assert (done.returncode, done.stdout) == (0, "commands commands None None\n")
    assert done.stderr == "tfslurm: pyslurm is not installed; using scontrol and sinfo\n"


def test_a_matching_pyslurm_is_chosen_imported_without_auto_init(tmp_path):
    done = choose(stand_in(tmp_path))
    # the variable was set while pyslurm was imported, and is gone again for the tasks
    assert (done.returncode, done.stdout, done.stderr) == (0, "pyslurm pyslurm None 1\n", "")


def test_a_libslurm_that_ends_the_process_is_caught_in_the_probe(tmp_path):
    fatal = "sys.stderr.write('python: fatal: Could not establish a configuration source\\n'); os._exit(1)"
    done = choose(stand_in(tmp_path, init=fatal))
    assert (done.returncode, done.stdout) == (0, "commands commands None 1\n")
    assert done.stderr == (
        "tfslurm: pyslurm 25.11 cannot be used here: libslurm ended the process (exit status 1): "
        "Could not establish a configuration source; using scontrol and sinfo\n"
    )


def test_a_pyslurm_for_another_release_is_refused(tmp_path):
    done = choose(stand_in(tmp_path, version="24.11.1", controller="25.11.7"))
    assert (done.returncode, done.stdout) == (0, "commands commands None 1\n")
    assert done.stderr == (
        "tfslurm: pyslurm is built for Slurm 24.11 but the controller runs Slurm 25.11; "
        "using scontrol and sinfo\n"
    )


def test_a_controller_that_does_not_answer_pyslurm_is_one_line(tmp_path):
    load = "raise PyslurmError('Zero Bytes were transmitted or received')"
    done = choose(stand_in(tmp_path, load=load))
    assert done.stderr == (
        "tfslurm: pyslurm 25.11 gets no answer from the controller (PyslurmError: Zero Bytes were "
        "transmitted or received); pyslurm must be built for the Slurm release the controller "
        "runs; using scontrol and sinfo\n"
    )


def test_a_pyslurm_that_does_not_import_is_one_line(tmp_path):
    package = stand_in(tmp_path)
    (package / "pyslurm" / "__init__.py").write_text(
        "raise ImportError('libslurmfull.so: cannot open shared object file')\n"
    )
    done = choose(package)
    assert (done.returncode, done.stdout) == (0, "commands commands None None\n")
    assert done.stderr == (
        "tfslurm: pyslurm does not import (ImportError: libslurmfull.so: cannot open shared "
        "object file); using scontrol and sinfo\n"
    )


def test_an_unreadable_slurm_conf_is_refused_before_libslurm_waits_on_it(tmp_path):
    done = choose(stand_in(tmp_path), SLURM_CONF=str(tmp_path / "absent.conf"))
    assert (done.returncode, done.stdout) == (0, "commands commands None None\n")
    assert done.stderr == (
        f"tfslurm: pyslurm cannot be used here: SLURM_CONF={tmp_path}/absent.conf is not a "
        "readable file; using scontrol and sinfo\n"
    )


def test_commands_asked_for_never_import_pyslurm(tmp_path):
    done = choose(stand_in(tmp_path), TFSLURM_CONTROLLER="commands")
    assert (done.returncode, done.stdout, done.stderr) == (0, "commands commands None None\n", "")


def test_a_probe_that_hangs_is_given_up_after_its_timeout(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(stand_in(tmp_path, load="signal.pause()")))
    monkeypatch.delitem(sys.modules, "pyslurm", raising=False)
    import pyslurm  # the stand-in

    for fork in (True, False):
        t0 = time.monotonic()
        assert pb.probe(pyslurm, timeout=0.5, fork=fork) == "error no answer from the controller within 0.5 s"
        assert time.monotonic() - t0 < 5


THREADED = "import threading, time\nthreading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n"


@pytest.mark.parametrize("threaded", [False, True], ids=["one thread: fork", "threads: fresh python"])
def test_the_probe_forks_only_a_process_of_one_thread(tmp_path, threaded):
    log = tmp_path / "imports"
    fatal = "sys.stderr.write('python: fatal: Unable to process configuration file\\n'); os._exit(1)"
    for init, said in (
        ("", ""),
        (fatal, "tfslurm: pyslurm 25.11 cannot be used here: libslurm ended the process (exit "
         "status 1): Unable to process configuration file; using scontrol and sinfo\n"),
    ):  # fmt: skip
        log.unlink(missing_ok=True)
        path = stand_in(tmp_path / f"{bool(init)}", init=init)
        done = choose(path, script=(THREADED if threaded else "") + CHOOSE, STAND_IN_LOG=str(log))
        assert (done.returncode, done.stderr) == (0, said)
        assert done.stdout.split()[0] == ("commands" if init else "pyslurm")
        assert len(log.read_text().splitlines()) == (2 if threaded else 1)  # the fresh Python's own


@pytest.mark.parametrize(
    ("version", "release"),
    [("25.11.2", "25.11"), ("25.11.7", "25.11"), ("26.05", "26.05"), (" 24.11.0\n", "24.11")],
)
def test_release_is_major_dot_minor(version, release):
    assert pb.release_of(version) == release
