"""One explanation per bad jobs spec: the plugin's checker (``plugin/src/spec.c``) and
``tfslurm/jobspec.py`` refuse the same specs with the same line, taken from one table,
``tfslurm/data/spec_messages.def``.

The C side runs as the plugin's unit test program (``spec_test check-message``, built
without Slurm), which prints the line ``--tf-dist`` shows after its name.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from plugin_build import make, plugin_work_dir
from tfslurm.errors import JobSpecError
from tfslurm.jobspec import split_spec

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "tfslurm" / "data" / "spec_messages.def"
ENTRY = re.compile(r'^TFD_SPEC_MESSAGE\((\w+), "([^"\\]*)"\)$')


@pytest.fixture(scope="module")
def spec_test(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = plugin_work_dir(tmp_path_factory, "spec-messages", slurm_headers=False)
    done = make(out, str(out / "spec_test"))
    assert done.returncode == 0, done.stdout + done.stderr
    return out / "spec_test"


def c_lines(spec_test: Path, specs: list[str]) -> list[str]:
    """'OK' or the C checker's whole message for each spec (given as the plugin gets it:
    UTF-8, undecodable bytes back as they came)."""
    data = b"".join(s.encode("utf-8", "surrogateescape") + b"\0" for s in specs)
    done = subprocess.run([str(spec_test), "check-message"], input=data, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode("ascii").splitlines()
    assert len(lines) == len(specs)
    return [line if line == "OK" else line.removeprefix("ERR ") for line in lines]


def python_line(spec: str) -> str:
    try:
        split_spec(spec)
    except JobSpecError as error:
        return str(error)
    return "OK"


def test_the_table_is_one_both_sides_read() -> None:
    """Every entry line parses (both sides read the same text), uses only %s, and each
    message is used by both sides, except the C-only NULL spec."""
    lines = [line for line in TABLE.read_text("ascii").splitlines() if line.startswith("TFD_SPEC_MESSAGE")]
    entries = [ENTRY.match(line) for line in lines]
    assert all(entries), [line for line, m in zip(lines, entries, strict=True) if not m]
    names = [m.group(1) for m in entries if m]
    assert len(names) == len(set(names)) >= 15
    for m in entries:
        assert m and re.sub("%s", "", m.group(2)).count("%") == 0, m and m.group(2)
    c_source = (ROOT / "plugin" / "src" / "spec.c").read_text()
    py_source = (ROOT / "tfslurm" / "jobspec.py").read_text()
    assert '#include "../../tfslurm/data/spec_messages.def"' in c_source
    assert [n for n in names if f"MSG_{n}" not in c_source] == []
    assert [n for n in names if f'"{n}"' not in py_source] == ["NO_SPEC"]


EXAMPLES = [
    "ps:1;worker:3", "ps:1,,worker:3", "ps", "Worker:2", "ps:x", "9ps:1", "ps:1,ps:2",
    "ps:*,worker:*", "chief:2", "ps:0", "", "  \t", ",", "worker:1,", ":4", "worker:",
    "worker:-1", "worker::4", "wor ker:1", "wor-ker:1", "worker:4 5", "worker:**",
    "evaluator:007", "chief:1,worker:*", " ps : 1 ,\tworker:* ", "a\\b:1", "ps:1,'x:2",
    "worker:1234567890123456789", "x" * 61, "x" * 60 + ":1;", "x" * 5000, "w" * 4094 + ":1",
    "w" * 4095 + ":1", "worker:4\n", "w\u00f6rker:1", "worker:\udcff", "ps:1\x7f",
]  # fmt: skip


@pytest.mark.parametrize("spec", EXAMPLES, ids=range(len(EXAMPLES)))
def test_same_verdict_and_message_on_examples(spec_test: Path, spec: str) -> None:
    (c_line,) = c_lines(spec_test, [spec])
    assert python_line(spec) == c_line


def test_a_refused_spec_reads_the_same_on_both_sides(spec_test: Path) -> None:
    """What a user who typed --tf-dist='ps:1;worker:3' reads from srun and from tfslurm."""
    expected = (
        "jobs spec 'ps:1;worker:3': unexpected ';' at byte 4 after the count of job 'ps'; "
        "separate jobs with ','"
    )
    assert c_lines(spec_test, ["ps:1;worker:3"]) == [expected]
    with pytest.raises(JobSpecError) as error:
        split_spec("ps:1;worker:3")
    assert str(error.value) == expected


# Fragments that build specs near the grammar's edges; OTHER adds bytes the plugin refuses
# wherever they stand (control, non-ASCII, an undecodable byte from the environment).
FRAGMENTS = st.sampled_from(
    ["worker", "ps", "chief", "evaluator", "Worker", "wokrer", "PS", "a_b", "W2", "x", "9", "_",
     ":", ":", ",", ",", "*", ";", "=", "-", " ", "\t", "0", "1", "2", "007", "1234567890123456789",
     "'", "\\"]
)  # fmt: skip
OTHER = st.sampled_from(["\n", "\x1b", "\x7f", "\u00e9", "\u00a0", "\U0001f600", "\udcff"])


@st.composite
def near_specs(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.one_of(FRAGMENTS, FRAGMENTS, FRAGMENTS, OTHER), max_size=12))
    return "".join(parts)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(near_specs(), min_size=1, max_size=30))
@example(batch=["ps:1,worker:*", "chief:1,ps:2,worker:3", "ps:0,worker:0"])
def test_same_verdict_and_message_on_random_specs(spec_test: Path, batch: list[str]) -> None:
    assert [python_line(spec) for spec in batch] == c_lines(spec_test, batch)


def test_a_valid_spec_reads_no_table() -> None:
    """The TaskProlog hook parses a valid spec in every task: the table is read only for
    a refusal."""
    code = "\n".join(
        [
            f"import sys; sys.path.insert(0, {str(ROOT)!r})",
            "from tfslurm import jobspec",
            "jobspec.split_spec('chief:1,ps:2,worker:*')",
            "print(bool(jobspec._MESSAGES))",
            "try:\n    jobspec.split_spec('ps')\nexcept ValueError:\n    print(bool(jobspec._MESSAGES))",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.split() == ["False", "True"]
