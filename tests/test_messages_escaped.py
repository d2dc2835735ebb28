"""Every value a warning or an error shows is escaped one way (``errors.one_line``: as
``repr()`` escapes), and every number is bounded before ``int()``: names and values holding
each C0 (0x00-0x1f) and C1 (0x80-0x9f) control character and DEL, and numbers of more
digits than CPython converts, give printable one-line messages, never raw control
characters or a traceback."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from tfslurm.errors import MAX_MESSAGE, TfslurmError, escaped, one_line
from tfslurm.numbers import ascii_int

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))]
RAW = frozenset(CONTROLS)
HUGE = "9" * 5000  # past CPython's 4,300-digit limit on int()
MAX_LINE_BYTES = 1024

# One task of a one-node step: four tasks, two GPUs (a warning: fewer GPUs than tasks).
TASK = {
    "SLURM_JOB_ID": "1",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "0",
    "SLURM_STEP_NODELIST": "n1",
    "SLURMD_NODENAME": "n1",
    "SLURM_STEP_TASKS_PER_NODE": "4",
    "SLURM_GTIDS": "0,1,2,3",
    "SLURM_GPUS_ON_NODE": "2",
    "SLURM_STEP_GPUS": "0,1",
    "CUDA_VISIBLE_DEVICES": "0,1",
}


def printable_line(text: str) -> None:
    assert not RAW.intersection(text), repr(text)
    assert text.isprintable(), repr(text)
    assert len(text.encode("utf-8", "surrogateescape")) <= MAX_LINE_BYTES, repr(text)


def error_of(action: Callable[[], object]) -> str:
    with pytest.raises(TfslurmError) as caught:
        action()
    message = str(caught.value)
    assert len(message) <= MAX_MESSAGE
    printable_line(message)
    return message


def plan_of(env: dict[str, str]) -> object:
    from tfslurm.plan import PlanOptions, plan_for
    from tfslurm.step import Step

    return plan_for(Step.from_environ(env), options=PlanOptions(assign=True))


def tf_config(job: str, host: str, index: object = 0) -> str:
    return json.dumps({"cluster": {job: [host]}, "task": {"type": job, "index": index}})


# --- the escaping itself -----------------------------------------------------------------


@pytest.mark.parametrize("char", CONTROLS, ids=lambda c: f"{ord(c):#04x}")
def test_escaped_writes_every_control_character_as_repr_does(char: str) -> None:
    assert escaped(f"a{char}b") == repr(f"a{char}b")[1:-1]
    assert str(TfslurmError(f"value a{char}b")) == f"value {repr(f'a{char}b')[1:-1]}"


def test_escaped_leaves_printable_text_and_backslashes_alone() -> None:
    assert escaped("n1 ²٣ a\\x1b") == "n1 ²٣ a\\x1b"
    assert escaped("n\udcff1") == "n\\udcff1"  # an undecodable byte is shown, not written raw


def test_one_line_escapes_only_the_ends_it_keeps_of_a_long_text() -> None:
    line = one_line("\x1b" * 1_000_000)
    assert len(line) == MAX_MESSAGE and " ... " in line
    printable_line(line)


def test_ascii_int_bounds_the_digits_before_converting() -> None:
    assert ascii_int("0042") == 42
    assert ascii_int("9" * 19) == int("9" * 19)
    assert ascii_int("9" * 20) is None
    assert ascii_int(HUGE) is None
    for text in ("", " 1", "+1", "-1", "1.0", "²", "٣", "1\x0b"):
        assert ascii_int(text) is None


# --- every path a message or warning takes -----------------------------------------------


def _gpu_warning(v: str) -> list[str]:
    # Built from a layout: a hostlist splits names at blanks, and Slurm's names are bytes.
    from tfslurm.gpus import assign_gpus, gpu_warnings
    from tfslurm.layout import block_layout
    from tfslurm.step import Step

    name = f"n{v}1"
    step = Step.from_environ(TASK)
    layout = block_layout([name], [4])
    warnings = gpu_warnings(step, layout, assign_gpus(step, layout), dev_dir="/nonexistent-dev")
    assert warnings, "the step's shape gives a warning"
    return list(warnings)


def _slurm_env(v: str) -> list[str]:
    return [error_of(lambda: plan_of({**TASK, "SLURM_PROCID": f"1{v}2"}))]


def _layout(v: str) -> list[str]:
    env = {**TASK, "SLURM_STEP_NODELIST": f"a{v}1,b1", "SLURM_STEP_TASKS_PER_NODE": "1,1"}
    return [error_of(lambda: plan_of({**env, "SLURM_NODEID": "0", "SLURMD_NODENAME": "b1"}))]


def _ports(v: str) -> list[str]:
    return [
        error_of(lambda: plan_of({**TASK, "TFSLURM_PORT_BASE": f"2{v}0"})),
        error_of(lambda: plan_of({**TASK, "SLURM_STEP_RESV_PORTS": f"20000-2{v}3"})),
    ]


def _settings(v: str) -> list[str]:
    from tfslurm.settings import Settings

    settings = Settings.from_environ(
        {
            "TFSLURM_UNEVEN_GPUS": f"w{v}x",
            "TFSLURM_PEER_TIMEOUT": f"3{v}5",
            "TFSLURM_PREEMPT_SIGNAL": f"USR{v}1",
            "TFSLURM_STOP_SIGNALS": f"TERM,U{v}SR2",
            "TFSLURM_MAX_RESTARTS": f"1{v}2",
            "TFSLURM_STOP_GRACE": f"1{v}x",
        }
    )
    return [
        error_of(settings.uneven_gpus),
        error_of(settings.peer_timeout),
        error_of(settings.preempt_signal),
        error_of(lambda: settings.stop_signals(10)),
        error_of(settings.max_restarts),
        error_of(settings.stop_grace),
    ]


def _tf_config(v: str) -> list[str]:
    from tfslurm.runtime.roles import role_from_tf_config

    return [
        error_of(lambda: role_from_tf_config(tf_config(f"worker{v}", "n1:2222"))),
        error_of(lambda: role_from_tf_config(tf_config("worker", f"n{v}1"))),
        error_of(lambda: role_from_tf_config(tf_config("worker", "n1:2222", f"0{v}1"))),
        error_of(lambda: role_from_tf_config(f'{{"cluster": {{"worker": ["n1:2222"]}}}}{v}')),
    ]


def _descriptor(v: str) -> list[str]:
    from tfslurm.plan import Plan

    text = f"tfslurm1;nodes=n1;tasks=1;map=block;ports=d23456;jobs=worker:1{v};host={{node}}"
    return [error_of(lambda: Plan.from_descriptor(text))]


def _hook(v: str) -> list[str]:
    from tfslurm import prolog

    out = io.StringIO()
    status = prolog.main({**TASK, "TFSLURM_TF_DIST": f"worker:{v}*", "SLURMD_NODENAME": f"n{v}"}, out)
    lines = out.getvalue().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("print tfslurm prolog ("), lines
    return lines


PATHS = {
    "gpu warning": _gpu_warning,
    "SlurmEnvError": _slurm_env,
    "layout": _layout,
    "ports": _ports,
    "settings": _settings,
    "TF_CONFIG": _tf_config,
    "descriptor": _descriptor,
    "TaskProlog print": _hook,
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("char", CONTROLS, ids=lambda c: f"{ord(c):#04x}")
def test_no_raw_control_character_reaches_a_message(path: str, char: str) -> None:
    for line in PATHS[path](char):
        printable_line(line)


def test_escape_sequences_in_a_node_name_are_escaped_in_warnings() -> None:
    lines = _gpu_warning("\x1b[2J")
    assert any("node n\\x1b[2J1 has 2 GPU(s) for 4 tasks" in line for line in lines), lines


def test_the_node_id_error_quotes_the_node_it_names() -> None:
    env = {**TASK, "SLURM_STEP_NODELIST": "a\x1b3,n1", "SLURM_STEP_TASKS_PER_NODE": "1,1"}
    message = error_of(lambda: plan_of({**env, "SLURM_NODEID": "0", "SLURMD_NODENAME": "n1"}))
    assert "SLURM_NODEID=0 names 'a\\x1b3' in SLURM_STEP_NODELIST ('a\\x1b3,n1')" in message


# --- numbers past int()'s limit ----------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "error"),
    [
        ("SLURM_PROCID", "SLURM_PROCID="),
        ("SLURM_JOB_ID", "SLURM_JOB_ID="),
        ("SLURM_GTIDS", "SLURM_GTIDS="),
        ("SLURM_DIST_PLANESIZE", "SLURM_DIST_PLANESIZE="),
        ("TFSLURM_PORT_BASE", "TFSLURM_PORT_BASE="),
        ("SLURM_STEP_RESV_PORTS", "SLURM_STEP_RESV_PORTS="),
    ],
)
def test_a_huge_number_in_a_variable_is_a_one_line_error(variable: str, error: str) -> None:
    assert error in error_of(lambda: plan_of({**TASK, variable: HUGE}))


def test_huge_numbers_in_settings_are_one_line_errors() -> None:
    from tfslurm.settings import Settings

    settings = Settings.from_environ(
        {"TFSLURM_PREEMPT_SIGNAL": HUGE, "TFSLURM_STOP_SIGNALS": HUGE, "TFSLURM_MAX_RESTARTS": HUGE}
    )
    assert "is not a signal number" in error_of(settings.preempt_signal)
    assert "is not a signal number" in error_of(lambda: settings.stop_signals(10))
    assert "is not an integer >= 0" in error_of(settings.max_restarts)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            '{"cluster": {"worker": ["n1:2222"]}, "task": {"type": "worker", "index": ' + HUGE + "}}",
            "TF_CONFIG holds a number too long to be a task index or port",
        ),
        (
            '{"cluster": {"worker": ["n1:2222"]}, "task": {"type": "worker", "index": "' + HUGE + '"}}',
            "TF_CONFIG task index '99999",
        ),
        (
            '{"cluster": {"worker": {"' + HUGE + '": "n1:2222"}}, "task": {"type": "worker", "index": 0}}',
            "TF_CONFIG job 'worker' has non-integer task indices",
        ),
        (
            '{"cluster": {"worker": ["n1:' + HUGE + '"]}, "task": {"type": "worker", "index": 0}}',
            "of worker:0 is not host:port",
        ),
    ],
    ids=["index", "index-string", "index-key", "port"],
)
def test_a_huge_number_in_tf_config_is_a_one_line_role_error(text: str, fragment: str) -> None:
    from tfslurm.runtime.roles import role_from_tf_config

    assert fragment in error_of(lambda: role_from_tf_config(text))


@pytest.mark.parametrize(
    ("field", "fragment"),
    [
        ("tasks=" + HUGE, "number too large"),
        ("jobs=worker:" + HUGE, "bad jobs entry 'worker:999"),
        ("ports=d" + HUGE, "is not an encoded port rule"),
        ("map=runs:" + HUGE, "number too large"),
    ],
    ids=["tasks", "jobs", "ports", "map"],
)
def test_a_huge_number_in_the_descriptor_is_a_one_line_plan_error(field: str, fragment: str) -> None:
    from tfslurm.plan import Plan

    fields = {
        "nodes": "n1",
        "tasks": "1",
        "map": "block",
        "ports": "d23456",
        "jobs": "worker:1",
        "host": "{node}",
    }
    key, value = field.split("=", 1)
    text = "tfslurm1;" + ";".join(f"{k}={value if k == key else v}" for k, v in fields.items())
    message = error_of(lambda: Plan.from_descriptor(text))
    assert message.startswith("plan descriptor") and fragment in message


# --- the command's stderr ----------------------------------------------------------------


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    base = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PYTHONIOENCODING": "utf-8:strict"}
    return subprocess.run(
        [sys.executable, "-m", "tfslurm", *args], env={**base, **env}, capture_output=True, timeout=60
    )


def stderr_lines(done: subprocess.CompletedProcess[bytes], command: str) -> list[str]:
    """Printable lines of at most 1 kB, exactly one of them an error line, the last."""
    lines = done.stderr.decode("utf-8", "surrogateescape").splitlines()
    for line in lines:
        printable_line(line)
    errors = [line for line in lines if line.startswith(f"tfslurm {command}: error: ")]
    assert done.returncode == 2 and len(errors) == 1 and lines[-1] == errors[0], (done.returncode, lines)
    return lines


@pytest.mark.parametrize("char", ["\x1b", "\x0b", "\r", "\x85", "\x7f"], ids=repr)
def test_tfslurm_run_stderr_is_printable_lines_and_one_error(char: str) -> None:
    good = tf_config("worker", "n1:2222")
    cases = [
        {"TF_CONFIG": tf_config(f"worker{char}", "n1:2222")},
        {"TF_CONFIG": tf_config("worker", f"n{char}1:2222")},  # the role line, then: no program
        {"TF_CONFIG": good, "TFSLURM_PREEMPT_SIGNAL": f"USR{char}"},
        {**TASK, "SLURMD_NODENAME": f"n{char}1"},
    ]
    for env in cases:  # no program: after the role line, that is the one error
        stderr_lines(run_cli(["run"], env), "run")


@pytest.mark.parametrize(
    "env",
    [
        {
            "TF_CONFIG": '{"cluster": {"worker": ["n1:2222"]}, "task": {"type": "worker", "index": '
            + HUGE
            + "}}"
        },
        {"TF_CONFIG": tf_config("worker", "n1:2222"), "TFSLURM_PREEMPT_SIGNAL": HUGE},
        {"TF_CONFIG": tf_config("worker", "n1:2222"), "TFSLURM_MAX_RESTARTS": HUGE},
    ],
    ids=["tf-config-index", "preempt-signal", "max-restarts"],
)
def test_tfslurm_run_refuses_huge_numbers_in_one_line(env: dict[str, str]) -> None:
    stderr_lines(run_cli(["run", "--", "true"], env), "run")


def test_an_unrecognised_argument_is_escaped_in_the_usage_error() -> None:
    done = run_cli(["layout", "\x1b[2J"], {})
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "\\x1b[2J" in lines[0]
    printable_line(lines[0])
