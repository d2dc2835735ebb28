"""The SPANK plugin's C parsers, checked without Slurm: the jobs spec checker
(``plugin/src/spec.c``) and the host template check, built into ``spec_test`` from sources
that include no Slurm header, so the results are the same on every Slurm version. Three
ways: the C unit tests, random and hostile input under AddressSanitizer/UBSan and under
valgrind, and hypothesis differential tests against the Python side (``tfslurm/jobspec.py``,
``tfslurm/plan.py``), which applies the same rules in every task.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from plugin_build import build_tools_missing, make, plugin_work_dir
from tfslurm import plan as plan_module
from tfslurm.errors import JobSpecError, PlanError
from tfslurm.jobspec import parse_jobs, split_spec

pytestmark = pytest.mark.pure


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with ``spec_test`` built in it."""
    out = plugin_work_dir(tmp_path_factory, "spec-test", slurm_headers=False)
    done = make(out, str(out / "spec_test"))
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_c_unit_tests_pass(build_dir: Path) -> None:
    done = subprocess.run([str(build_dir / "spec_test"), "unit"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
    assert "all cases passed" in done.stdout


def test_parser_under_address_sanitizer(tmp_path: Path) -> None:
    """Hostile input (long, empty, non-ASCII, separators, newlines, unterminated buffers)
    and 100,000 random inputs, each in a heap buffer of exactly its size, under ASan+UBSan."""
    missing = build_tools_missing(slurm_headers=False)
    if missing:
        pytest.skip(missing)
    done = make(tmp_path, "asan", FUZZ_ITERATIONS="100000")
    if done.returncode != 0 and "LeakSanitizer has encountered a fatal error" in done.stderr:
        # LSan cannot stop the world without ptrace (some containers); ASan itself still runs
        done = make(
            tmp_path, "asan", FUZZ_ITERATIONS="100000", ASAN_RUN_OPTIONS="detect_leaks=0:abort_on_error=1"
        )
    if done.returncode != 0 and "libasan" in done.stderr:
        pytest.skip("compiler has no AddressSanitizer runtime")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "spec_test fuzz: 100000 inputs" in done.stdout
    assert "0 disagreement(s)" in done.stdout
    assert "ERROR: AddressSanitizer" not in done.stderr


def test_parser_under_valgrind(build_dir: Path) -> None:
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind not installed")
    binary = str(build_dir / "spec_test")
    for args in (["unit"], ["fuzz", "3000", "7"]):
        done = subprocess.run(
            ["valgrind", "--error-exitcode=99", "--leak-check=full", "-q", binary, *args],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "Invalid read" not in done.stderr and "definitely lost" not in done.stderr


# --- the C parser agrees with tfslurm/jobspec.py --------------------------------------


def c_verdicts(build_dir: Path, specs: list[str], mode: str = "check") -> list[str]:
    """'OK' or 'ERR <reason>' from the C checker (``spec_test check`` for jobs specs,
    ``check-template`` for host templates) for each text."""
    data = b"".join(s.encode("utf-8", "surrogatepass") + b"\0" for s in specs)
    done = subprocess.run([str(build_dir / "spec_test"), mode], input=data, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode("ascii").splitlines()
    assert len(lines) == len(specs)
    return lines


def python_accepts(spec: str) -> bool:
    """Whether some step could run this spec: split_spec accepts it and parse_jobs accepts
    it for at least one task count (the C side cannot know the step's size)."""
    try:
        entries = split_spec(spec)
    except JobSpecError:
        return False
    fixed = sum(count or 0 for _, count in entries)
    for num_tasks in {max(fixed, 1), fixed + 1}:
        try:
            parse_jobs(spec, num_tasks)
            return True
        except JobSpecError:
            continue
    return False


NAMES = st.sampled_from(
    [
        "worker",
        "ps",
        "chief",
        "evaluator",
        "W2",
        "a_b",
        "x",
        "Worker",
        "wokrer",
        "workers",
        "PS",
        "p",
        "chef",
        "wrkr",
        "ps2x",
    ]
)
COUNTS = st.sampled_from(["*", "0", "1", "2", "3", "007", "123456789012345678", "1234567890123456789"])
BLANK = st.sampled_from(["", "", "", " ", "\t", "  "])
# Noise that may turn a good spec into a bad one: separators, signs, control and non-ASCII.
NOISE = st.sampled_from(
    [",", ":", "*", "-", "+", ";", "=", "", " ", "\n", "\r", "\x0b", "\x1c", "\x7f",
     "\u00e9", "\u00a0", "\u2003", "\U0001f600", "{", "1", "A"]
)  # fmt: skip


@st.composite
def specs(draw: st.DrawFn) -> str:
    entries = draw(st.lists(st.tuples(BLANK, NAMES, BLANK, BLANK, COUNTS, BLANK), min_size=1, max_size=5))
    text = ",".join(f"{a}{n}{b}:{c}{k}{d}" for a, n, b, c, k, d in entries)
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(NOISE) + text[at:]
    return text


ASCII_BLANKS = set(" \t")


def plain(spec: str) -> bool:
    """Printable ASCII plus space and tab: where the two parsers must agree exactly."""
    return all(c in ASCII_BLANKS or " " <= c <= "~" for c in spec)


@pytest.mark.parametrize(
    "spec",
    ["worker:4", "chief:1,ps:2,worker:*", " ps : 1 ,\tworker:* ", "worker:0,ps:*", "Ab_1:2",
     "worker", "worker:", "worker:-1", "worker:*,ps:*", "ps:1,ps:2", "chief:2", "worker:0",
     "", "   ", ",", "worker:1,", "wor ker:1", "worker:1:2", "x" * 5000 + ":1",
     "worker:1234567890123456789", "w" * 4094 + ":1", "w" * 4095 + ":1",
     "Worker:*", "wokrer:2", "ps:1,workers:*", "PS:1,worker:*", "chef:1,worker:*", "evaluatr:1,worker:*",
     "wrkr:2", "learner:1,actor:*"],
)  # fmt: skip
def test_c_and_python_agree_on_examples(build_dir: Path, spec: str) -> None:
    (verdict,) = c_verdicts(build_dir, [spec])
    assert (verdict == "OK") == python_accepts(spec), (spec[:80], verdict)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(specs(), min_size=1, max_size=25))
@example(batch=["worker:4\n", "\nworker:4", "worker:4\u00a0", "ps:1,\x1cworker:*"])
def test_c_parser_matches_python(build_dir: Path, batch: list[str]) -> None:
    """The verdicts are equal, on control characters and non-ASCII too (Python walks the
    spec's UTF-8 bytes as C does; test_spec_messages.py compares the messages), and C
    refuses every control character and non-ASCII byte."""
    for spec, verdict in zip(batch, c_verdicts(build_dir, batch), strict=True):
        assert (verdict == "OK") == python_accepts(spec), (spec, verdict)
        if not plain(spec):
            assert verdict != "OK", (spec, "C accepted a control or non-ASCII character")
        if verdict != "OK":
            assert verdict.startswith("ERR ") and verdict[4:].isprintable()


# --- the plugin's host_template= check agrees with tfslurm/plan.py's -------------------


def c_template_verdicts(build_dir: Path, templates: list[str]) -> list[bool]:
    return [line == "OK" for line in c_verdicts(build_dir, templates, "check-template")]


def python_accepts_template(template: str) -> bool:
    try:
        plan_module._host_template(template, None)
    except PlanError:
        return False
    return True


TEMPLATE_CASES = [
    "{node}",
    "{node}-ib",
    "{node}.cluster.example.org",
    "ib-{node}",
    "node-ib",
    "{node}{node}",  # refused by both: a template names one node's address
    "{node}\r",  # control characters and NUL: refused by both
    "{node}\x01",
    "{node}\x7f",
    "{node}\t",
    "{node} x",
    "é{node}",
    "{node}:8888",
    "{node};x",
    "{node},x",
    "{node}/x",
    "{nodes}",
    "{node}}",
    "{{node}",
    "{host}",
    "",
    "{node}" + "x" * 249,  # 255 characters: the plugstack argument's longest (TFD_TEMPLATE_MAX)
]


def test_c_and_python_host_template_checks_agree_on_the_table(build_dir: Path) -> None:
    verdicts = c_template_verdicts(build_dir, TEMPLATE_CASES)
    expected = [python_accepts_template(t) for t in TEMPLATE_CASES]
    assert verdicts == expected, [
        t for t, c, p in zip(TEMPLATE_CASES, verdicts, expected, strict=True) if c != p
    ]
    assert expected[:4] == [True] * 4 and expected[4:-1] == [False] * (len(TEMPLATE_CASES) - 5)
    assert expected[-1]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.text(st.sampled_from("{node}-.ab:;,/ \t\r\x00\x7fé") | st.characters(), max_size=12),
        min_size=1,
        max_size=20,
    )
)
def test_c_and_python_host_template_checks_agree(build_dir: Path, templates: list[str]) -> None:
    templates = [t for t in templates if "\x00" not in t]  # C strings end at a NUL
    assert c_template_verdicts(build_dir, templates) == [python_accepts_template(t) for t in templates]
