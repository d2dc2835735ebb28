"""Stopping a run (stop signals, exit statuses, the restart cap) and the runtime's fixes for
hostile input (marked T4-T7 below) and faults (F1: no orphans, F2: killed saves), without
Slurm or TensorFlow: ``tfslurm run`` as a real process.

The same paths on the real cluster: tests/test_stops_cluster.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import STOPPABLE, started, tfslurm_run
from tfslurm.errors import TfslurmError
from tfslurm.runtime import exits
from tfslurm.runtime.checkpoints import remove_leftovers
from tfslurm.runtime.life import RunConfig
from tfslurm.settings import Settings, signal_number, stop_signals

# Uses nothing of the installed Slurm (fake sruns, recorded or written environments).
pytestmark = pytest.mark.pure


def one_line_error(proc: subprocess.Popen) -> str:
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfslurm run: error: "), err
    return lines[0]


# ------------------------------------------------------------------ bad input, one line
@pytest.mark.parametrize(
    "args, env, message",
    [
        ((), {"TFSLURM_PREEMPT_SIGNAL": "²"}, "preemption signal '²' is not a signal name"),  # T4
        (("--stop-signals", "TERM,NOPE"), {}, "stop signal 'NOPE' is not a signal name"),
        (("--stop-signals", "KILL"), {}, "stop signal 'KILL' cannot be caught (try USR1, USR2, TERM)"),
        (("--stop-signals", "INT"), {}, "stop signal INT: SIGINT stays Ctrl-C"),
        (("--stop-grace", "-1"), {}, "stop grace '-1' is not a number of seconds >= 0"),
        ((), {"TFSLURM_STOP_GRACE": "nan"}, "stop grace 'nan' is not a number of seconds >= 0"),
        (("--max-restarts", "-1"), {}, "max restarts '-1' is not an integer >= 0"),
        ((), {"TFSLURM_MAX_RESTARTS": "²"}, "max restarts '²' is not an integer >= 0"),
    ],
)
def test_bad_stop_options_are_one_line_errors(args, env, message):
    line = one_line_error(tfslurm_run(*args, "--", "true", **env))
    assert message in line, line


@pytest.mark.parametrize(
    "tf_config, message",
    [
        ("[" * 60_000 + "]" * 60_000, "TF_CONFIG is nested too deeply"),  # T5 (exec: < 128 KiB)
        (
            json.dumps({"cluster": {"worker": ["h:1"]}, "task": {"type": "worker"}}).replace(
                '"worker"}', '"worker", "index": 1e400}'
            ),
            "task index 'inf' is not an integer",
        ),  # T6
        (
            json.dumps({"cluster": {"worker": ["a:²"]}, "task": {"type": "worker", "index": 0}}),
            "cluster address 'a:²' of worker:0 is not host:port",
        ),  # T7
        (
            json.dumps({"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": 1.5}}),
            "task index '1.5' is not an integer",
        ),
    ],
)
def test_hostile_tf_config_is_a_one_line_error(tf_config, message):
    line = one_line_error(tfslurm_run("--", "true", tf_config=tf_config))
    assert message in line, line


def test_tf_config_nested_100000_deep_in_process():
    from tfslurm.runtime.roles import RoleError, role_from_tf_config

    with pytest.raises(RoleError, match=r"^TF_CONFIG is nested too deeply"):
        role_from_tf_config("[" * 100_000 + "]" * 100_000)


@given(st.text(max_size=12))
def test_signal_names_either_parse_or_are_stop_errors(text):
    try:
        number = signal_number(text)
    except TfslurmError as exc:
        assert "\n" not in str(exc)
    else:
        assert signal.Signals(number).name.startswith("SIG")


def test_stop_signals_always_include_the_preemption_signal():
    usr1, term, usr2 = signal.SIGUSR1, signal.SIGTERM, signal.SIGUSR2
    assert stop_signals(None, usr1) == (usr1, term)
    assert stop_signals("USR2, SIGTERM", usr1) == (usr1, usr2, term)
    assert stop_signals("", usr2) == (usr2,)  # only the preemption signal itself


# ------------------------------------------------------------------ restart cap
def test_restart_cap_is_one_line_and_exit_86():
    proc = tfslurm_run("--max-restarts", "2", "--", "true", SLURM_RESTART_COUNT="3")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == exits.EXIT_RESTART_CAP == 86
    assert err.strip().splitlines() == [
        (
            "tfslurm run: error: the job was restarted 3 times, more than --max-restarts 2: not "
            "starting again (exit 86; earlier runs of this log say why they stopped)"
        )
    ]
    proc = tfslurm_run("--", "true", SLURM_RESTART_COUNT="2", TFSLURM_MAX_RESTARTS="2")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err  # at the cap, not over it: runs
    proc = tfslurm_run("--", "true", SLURM_RESTART_COUNT="1", TFSLURM_MAX_RESTARTS="0")
    assert proc.wait(30) == 86


def test_cap_check_needs_no_step_and_runs_nothing():
    """The templates' batch script runs `tfslurm run --cap-check` (no step, no TF_CONFIG)."""
    for count, status in (("1", 0), ("2", 86)):
        proc = tfslurm_run("--cap-check", tf_config="", SLURM_RESTART_COUNT=count, TFSLURM_MAX_RESTARTS="1")
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == status and out == "", err
        assert len(err.splitlines()) == status // 86


# ------------------------------------------------------------------ stop -> never 0
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1])
def test_a_stop_signal_asks_the_program_and_the_run_exits_85(tmp_path, signum):
    proc = started(tmp_path, STOPPABLE)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert out.strip() == "stopped"
    assert proc.returncode == exits.EXIT_STOPPED, err
    name = signal.Signals(signum).name
    assert f"tfslurm run: worker:0: {name} (" in err
    assert f"stopped early by {name}: exit 85 (not 0: training is unfinished" in err


def test_sigterm_is_not_forwarded_and_nothing_kills_early(tmp_path):
    """The program's own SIGTERM handler (TF's, under MWMS) is bypassed: it gets the
    preemption signal, and no SIGKILL comes before Slurm's."""
    program = (
        "import signal, threading\n"
        "got = []\n"
        "signal.signal(signal.SIGTERM, lambda *a: got.append('TERM'))\n"
        "signal.signal(signal.SIGUSR1, lambda *a: got.append('USR1'))\n"
        "print('ready', flush=True)\n"
        "threading.Event().wait(6.5)\n"  # past TERM_GRACE (5 s): nothing SIGKILLs it
        "print(got, flush=True)\n"
    )
    proc = started(tmp_path, program)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert out.strip() == "['USR1']"
    assert proc.returncode == 85, err


def test_a_failing_program_keeps_its_status_after_a_stop(tmp_path):
    proc = started(
        tmp_path, "import time\nprint('ready', flush=True)\ntime.sleep(0.5)\nraise SystemExit(3)\n"
    )
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err


# ------------------------------------------------------------------ F1: no orphans
def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize(
    "program",
    [
        ["sh", "-c", "echo $$; exec sleep 333"],  # a command: tfslurm run -> child -> sleep
        [sys.executable, "-c", "import os, signal; print(os.getpid(), flush=True); signal.pause()"],
    ],
)
def test_sigkill_of_tfslurm_run_leaves_no_process_behind(program):
    proc = tfslurm_run("--", *program)
    pid = int(proc.stdout.readline())
    children = [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
    assert _alive(pid) and children
    proc.kill()  # SIGKILL: no handler of tfslurm run runs
    proc.wait(10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in [pid, *children]):
        time.sleep(0.05)
    assert not any(_alive(p) for p in [pid, *children]), (pid, children)


# ------------------------------------------------------------------ F2: killed saves
def test_leftovers_of_killed_saves_are_removed(tmp_path):
    ckpt = tmp_path / "ckpt"
    (ckpt / ".scratch-worker-1" / "ckpt-91_temp").mkdir(parents=True)
    (ckpt / ".scratch-worker-1" / "ckpt-91_temp" / "part-00000-of-00001.data").write_text("x")
    (ckpt / ".scratch-worker-3").mkdir()
    (ckpt / "ckpt-92_temp").mkdir()
    (ckpt / "ckpt-92_temp" / "part").write_text("x")
    for name in ("checkpoint", "ckpt-90.index", "ckpt-90.data-00000-of-00001", "notes_temp"):
        (ckpt / name).write_text("keep")
    mine = ckpt / ".scratch-worker-1"
    assert remove_leftovers(str(ckpt), str(mine), is_chief=False) == [str(mine)]
    assert (ckpt / "ckpt-92_temp").exists()  # only the chief cleans the shared directory
    removed = remove_leftovers(str(ckpt), str(ckpt), is_chief=True)
    assert removed == [str(ckpt / ".scratch-worker-3"), str(ckpt / "ckpt-92_temp")]
    assert sorted(p.name for p in ckpt.iterdir()) == [
        "checkpoint",
        "ckpt-90.data-00000-of-00001",
        "ckpt-90.index",
        "notes_temp",
    ]
    assert remove_leftovers(str(tmp_path / "absent"), str(tmp_path / "absent"), True) == []


# ------------------------------------------------------------------ termination_config
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"grace_period": -1}, "grace_period -1: expected seconds >= 0"),
        ({"grace_period": float("nan")}, "grace_period nan: expected seconds >= 0"),
        ({"grace_period": "5"}, "grace_period '5': expected seconds >= 0"),
        ({"exit_code": 0}, "exit_code 0: expected 1..255"),
        ({"signal": "NOPE"}, "preemption signal 'NOPE' is not a signal name"),
    ],
)
def test_termination_config_bad_input_is_one_line(kwargs, message):
    import tfslurm

    with pytest.raises(TfslurmError) as caught:
        tfslurm.termination_config(**kwargs)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_termination_config_attribute_does_not_import_tf():
    code = "import sys, tfslurm; f = tfslurm.termination_config; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_restart_count_is_read_through_step_and_alone():
    def restarts(env: dict[str, str]) -> int:
        return RunConfig.for_command(Settings(), env).restarts

    assert restarts({"SLURM_RESTART_COUNT": "4", "SLURM_GTIDS": "junk"}) == 4
    assert restarts({}) == 0
    with pytest.raises(TfslurmError, match="SLURM_RESTART_COUNT='x'"):
        restarts({"SLURM_RESTART_COUNT": "x"})
