"""``tfslurm hostlist ...`` end to end, through the installed command line."""

from __future__ import annotations

import subprocess

import pytest

from conftest import tfslurm_cli

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure


def tfslurm(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return tfslurm_cli("hostlist", *args, stdin=stdin)


def test_expand_prints_one_host_per_line() -> None:
    done = tfslurm("expand", "rack[1-2]-n[01-02]")
    assert done.returncode == 0
    assert done.stdout == "rack1-n01\nrack1-n02\nrack2-n01\nrack2-n02\n"


def test_expand_with_delimiter_and_empty_list() -> None:
    assert tfslurm("expand", "-d", " ", "n[1-3]").stdout == "n1 n2 n3\n"
    empty = tfslurm("expand", "")
    assert (empty.returncode, empty.stdout) == (0, "")


def test_compress_from_arguments_and_stdin() -> None:
    assert tfslurm("compress", "n3", "n1", "n2").stdout == "n[3,1-2]\n"
    assert tfslurm("compress", "--sorted", "n3", "n1", "n[2,7]").stdout == "n[1-3,7]\n"
    assert tfslurm("compress", stdin="n1\nn2\nn5\n").stdout == "n[1-2,5]\n"


def test_count() -> None:
    assert tfslurm("count", "n[1-1000],m").stdout == "1001\n"


def test_errors_are_one_line_on_stderr_with_status_2() -> None:
    for args in (("expand", "n[3-1]"), ("count", "n[1-99999999999]"), ("expand", "n[1-2")):
        done = tfslurm(*args)
        assert done.returncode == 2
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("tfslurm hostlist: error: bad hostlist")


def test_hostile_input_gives_one_bounded_line() -> None:
    # a newline inside the expression and a 1 MB expression
    for done in (
        tfslurm("expand", "n[1\n2]"),
        tfslurm("compress", stdin="n[" + "1," * 500_000 + "x]"),
    ):
        assert done.returncode == 2
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and len(lines[0]) <= 330, done.stderr[:1000]
        assert lines[0].startswith("tfslurm hostlist: error: bad hostlist")
