"""Unit and property tests of tfslurm.hostlist's reading (no Slurm needed): expand, the
counted form, count / nth / index_of, errors and properties of reading. Compression is in
test_hostlist_compress.py; inputs at the limits and the reader of short expressions in
test_hostlist_limits.py.

The differential tests against the real scontrol live in test_hostlist_scontrol.py; the
expected values here were checked against scontrol 22.05.8 too (except where the test
says newer Slurm is followed).
"""

from __future__ import annotations

import collections
import subprocess
import sys
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfslurm import errors, hostlist
from tfslurm.hostlist import (
    HostlistError,
    compress,
    compress_counts,
    compression,
    count,
    expand,
    expand_counts,
    index_of,
    nth,
)

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

# ---- expand ---------------------------------------------------------------------------

EXPAND_CASES = {
    "n1": ["n1"],
    "n[1-3]": ["n1", "n2", "n3"],
    "n[8-010]": ["n8", "n9", "n10"],  # width from the low bound's text
    "n[098-102]": ["n098", "n099", "n100", "n101", "n102"],
    "n[01-2]": ["n01", "n02"],
    "n[9-10,010]": ["n9", "n10", "n010"],
    "n[2,1,3]": ["n2", "n1", "n3"],  # order kept
    "n[1-3,2-4]": ["n1", "n2", "n3", "n2", "n3", "n4"],  # duplicates kept
    "n1,n1": ["n1", "n1"],
    "n[1,1-2]": ["n1", "n1", "n2"],
    "n[1-2],,m1": ["n1", "n2", "m1"],  # empty items skipped
    "n[1-2] m[3]": ["n1", "n2", "m3"],  # blanks separate
    "a\tb c , d": ["a", "b", "c", "d"],
    "": [],
    " , ,\t": [],
    "[1-2]": ["1", "2"],
    "n[007]": ["n007"],
    "rack[1-2]-n[01-02]": ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"],
    "n[1-2][3-4]": ["n13", "n14", "n23", "n24"],
    # Slurm's order for 3+ groups: second-to-last group outermost, last innermost.
    "x[1-2]y[1-2]z[1-2]": [
        "x1y1z1",
        "x1y1z2",
        "x2y1z1",
        "x2y1z2",
        "x1y2z1",
        "x1y2z2",
        "x2y2z1",
        "x2y2z2",
    ],
    # Slurm >= 23.11: a shared suffix after the last bracket.
    "node[1-2]-ib": ["node1-ib", "node2-ib"],
    "gpu[01-02]-ib,cpu7": ["gpu01-ib", "gpu02-ib", "cpu7"],
    "a[1-2]b[3]c": ["a1b3c", "a2b3c"],
    "n[00000000000000000000001-2]": [
        "n00000000000000000000001",
        "n00000000000000000000002",
    ],
    "n[18446744073709551615]": ["n18446744073709551615"],
    # 2**64 - 1 alone, after a number that is not one below, or after one written wider
    "n[18446744073709551615,18446744073709551614]": ["n18446744073709551615", "n18446744073709551614"],
    "n18446744073709551615,n18446744073709551615": ["n18446744073709551615"] * 2,
    "n[018446744073709551614,18446744073709551615]": ["n018446744073709551614", "n18446744073709551615"],
    "n[1-2]x[18446744073709551615]": ["n1x18446744073709551615", "n2x18446744073709551615"],
    "n1844674407370955161[4-5]": ["n18446744073709551614", "n18446744073709551615"],  # Slurm's numbers: 4-5
}


@pytest.mark.parametrize("expr", list(EXPAND_CASES))
def test_expand_table(expr: str) -> None:
    assert expand(expr) == EXPAND_CASES[expr]
    assert count(expr) == len(EXPAND_CASES[expr])


def test_four_groups_follow_slurm_nesting() -> None:
    hosts = expand("w[1-2]x[1-2]y[1-2]z[1-2]")
    # loops from outer to inner: y, x, w, z (observed with scontrol 22.05.8)
    expected = [f"w{w}x{x}y{y}z{z}" for y in (1, 2) for x in (1, 2) for w in (1, 2) for z in (1, 2)]
    assert hosts == expected


BAD_EXPRS = {
    "n[3-1]": "reversed range '3-1'",
    "n[1-2": "never closed",
    "n[1-2,4": "never closed",
    "n1]": "']' without '['",
    "a]b[1-2]": "']' without '['",
    "a[[1-2]]": "nested '['",
    "a[1-2b[3-4]": "nested '['",
    "n[1-3]]": "']' without '['",
    "n[]": "empty brackets",
    "n[a]": "'a'",
    "n[1-x]": "'1-x'",
    "n[1-]": "'1-'",
    "n[-2]": "'-2'",
    "n[1,,2]": "''",
    "n[1-2-3]": "'1-2-3'",
    "n[ 1-2]": "' 1-2'",  # Slurm 22.05 reads this as n01,n02 (strtoul skips the blank)
    "n[+1]": "'+1'",
    "n[1, 2]": "' 2'",
    "n[0-65536]": "65537 hosts",
    "n[1-99999999999]": "99999999999 hosts",
    "n[99999999999999999999999]": "64-bit",
    "a[1-40000,1-40000]b[1]": "non-final group",
    "a[1-65536]b[1-65536]": "more than 1048576 hosts",
    # Slurm 22.05 keeps a newline in a host name (or says Invalid hostlist)
    "q[1]\nb": "newline at offset 4",
    "q1\nb": "newline at offset 2",
    "n[1\n2]": "newline at offset 3",
    # Slurm saturates or crashes on numbers past 2**64 - 1
    "n18446744073709551616": "64-bit",
    "n[18446744073709551614-18446744073709551616]": "64-bit",
    "n1844674407370955161[5-6]": "64-bit",
    "n[1-2]8446744073709551616": "64-bit",
    "a,18446744073709551616": "64-bit",
    "n000000000000000000018446744073709551616": "64-bit",
    # Slurm 22.05 crashes on a range of several hosts ending at 2**64 - 1, however written
    "n[18446744073709551614-18446744073709551615]": "host 'n18446744073709551615' ends a range",
    "n[18446744073709551614,18446744073709551615]": "Slurm's 64-bit limit (2**64 - 1)",
    "n18446744073709551614,n[18446744073709551615]": "64-bit limit",
    "n18446744073709551614,n18446744073709551615": "host 'n18446744073709551615' ends a range",
    "x[1-2]n[018446744073709551614-018446744073709551615]": "host 'x1n018446744073709551615'",
    # ... and loops forever on 2**64 - 1 in a group before the last
    "n[18446744073709551615]x[1]": "bracket group 1 holds 18446744073709551615",
}


@pytest.mark.parametrize("expr", list(BAD_EXPRS))
def test_expand_rejects(expr: str) -> None:
    with pytest.raises(HostlistError) as info:
        expand(expr)
    message = str(info.value)
    assert "\n" not in message
    assert repr(expr) in message  # names the input
    assert BAD_EXPRS[expr] in message  # and the bad part
    with pytest.raises(HostlistError):
        count(expr)


def test_hostlist_error_is_the_shared_class() -> None:
    assert hostlist.HostlistError is errors.HostlistError
    assert issubclass(HostlistError, errors.TfslurmError)
    assert issubclass(HostlistError, ValueError)


def test_huge_ranges_fail_before_allocating() -> None:
    tracemalloc.start()
    try:
        for expr in (
            "n[1-99999999999]",
            "a[0-65535]b[0-65535]c[0-65535]",
            "x" * 1000 + "[1-60000]," * 50,
        ):
            with pytest.raises(HostlistError):
                expand(expr)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, f"rejecting huge expressions allocated {peak} bytes"


def test_too_many_plain_hosts_fail_before_they_are_built() -> None:
    text = "ab," * (4 * hostlist.MAX_HOSTS)  # 12 MiB of text; 4M host strings would be ~250 MB
    tracemalloc.start()
    try:
        with pytest.raises(HostlistError, match="more than 1048576 hosts"):
            expand(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(text), f"rejecting {len(text)} characters allocated {peak} bytes"
    assert len(expand("a," * hostlist.MAX_HOSTS + ",,,")) == hostlist.MAX_HOSTS
    assert expand("," * (2 * hostlist.MAX_HOSTS)) == []


def test_long_names_bound_the_characters() -> None:
    with pytest.raises(HostlistError, match="characters"):
        expand("x" * 2000 + "[1-60000]")


def test_non_string_input() -> None:
    with pytest.raises(HostlistError):
        expand(None)  # type: ignore[arg-type]
    with pytest.raises(HostlistError):
        expand(b"n[1-2]")  # type: ignore[arg-type]


def test_long_error_messages_are_shortened() -> None:
    expr = "n[1-3]," * 5000 + "n[3-1]"
    with pytest.raises(HostlistError) as info:
        expand(expr)
    assert len(str(info.value)) < 400


HOSTILE_ERRORS = [
    "n[1\n2]",
    "n[" + "1," * 500_000 + "x]",
    "n[" + "1," * 500_000 + "3-1]",
    "n[\x00" + "\x01" * 500 + "]",
    "a" * 100_000 + "[1-70000]b[1]",
    "n[" + "9" * 5000 + "]",
    "\udcff" * 1000 + "[",
]


@pytest.mark.parametrize("expr", HOSTILE_ERRORS, ids=range(len(HOSTILE_ERRORS)))
def test_error_messages_are_one_bounded_line(expr: str) -> None:
    # one line, at most 300 characters, whatever the input
    for function in (expand, count, expand_counts, lambda t: compress([t]), lambda t: nth(t, 0)):
        with pytest.raises(HostlistError) as info:
            function(expr)
        message = str(info.value)
        assert "\n" not in message and "\r" not in message
        assert len(message) <= 300, message


# ---- counts ---------------------------------------------------------------------------

COUNT_CASES = {
    "2(x3),1": [2, 2, 2, 1],
    "1,2,1(x3),3,2": [1, 2, 1, 1, 1, 3, 2],
    "4": [4],
    "": [],
    "0(x2)": [0, 0],
    "65535(x1)": [65535],  # Slurm never writes (x1) but reading it is harmless
}


@pytest.mark.parametrize("expr", list(COUNT_CASES))
def test_expand_counts(expr: str) -> None:
    assert expand_counts(expr) == COUNT_CASES[expr]


@pytest.mark.parametrize(
    "expr",
    [
        "2(x0)",
        "2(x)",
        "a",
        "1,,2",
        "(x2)",
        "2(x3",
        "2x3",
        "-1",
        "2(x3)(x2)",
        "1(x99999999)",
        "١",  # noqa: RUF001 - an Arabic-Indic digit, not an ASCII one, on purpose
    ],
)
def test_expand_counts_rejects(expr: str) -> None:
    with pytest.raises(HostlistError) as info:
        expand_counts(expr)
    assert repr(expr) in str(info.value)


def test_compress_counts_format() -> None:
    assert compress_counts([2, 2, 2, 1]) == "2(x3),1"
    assert compress_counts([1, 2, 1, 1, 1, 3, 2]) == "1,2,1(x3),3,2"
    assert compress_counts([5]) == "5"  # never (x1)
    assert compress_counts([]) == ""
    for bad in ([-1], [1.0], ["2"], [True]):
        with pytest.raises(HostlistError):
            compress_counts(bad)  # type: ignore[arg-type]


@given(
    st.lists(st.integers(0, 70000), max_size=60).flatmap(
        lambda xs: st.just(xs) | st.lists(st.sampled_from(xs or [1]), max_size=60)
    )
)
def test_counts_round_trip(counts: list[int]) -> None:
    text = compress_counts(counts)
    assert expand_counts(text) == counts
    assert "(x1)" not in text and "(x0)" not in text


# ---- count / nth / index_of ------------------------------------------------------------


def test_nth_and_index_of_without_expanding() -> None:
    expr = "n[1-60000],m[00001-60000]"
    assert count(expr) == 120000
    assert nth(expr, 0) == "n1"
    assert nth(expr, 59999) == "n60000"
    assert nth(expr, 60000) == "m00001"
    assert nth(expr, -1) == "m60000"
    assert index_of(expr, "m00002") == 60001
    assert index_of(expr, "n7") == 6
    for missing in ("m2", "n0", "n60001", "n007", "x"):
        with pytest.raises(HostlistError, match="not in"):
            index_of(expr, missing)
    for index in (120000, -120001):
        with pytest.raises(HostlistError, match="out of range"):
            nth(expr, index)
    with pytest.raises(HostlistError):
        nth(expr, "1")  # type: ignore[arg-type]


# ---- properties -----------------------------------------------------------------------

_name_chars = st.sampled_from("abn-_.x0123456789")
_digits = st.text(st.sampled_from("0123456789"), min_size=1, max_size=4)
hosts_strategy = st.lists(
    st.builds(lambda a, b: a + b, st.text(_name_chars, max_size=5), _digits | st.just("")).filter(bool),
    max_size=40,
)


@st.composite
def runs_of_hosts(draw) -> list[str]:
    """Host lists made of consecutive runs (what compress merges), shuffled or not."""
    hosts: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        prefix = draw(st.sampled_from(["n", "node", "a1b", "", "r1-n", "x-", "gpu"]))
        start = draw(st.integers(0, 1100))
        width = draw(st.integers(0, 5))
        length = draw(st.integers(1, 12))
        hosts += [f"{prefix}{n:0{width}d}" for n in range(start, start + length)]
    if draw(st.booleans()) and hosts:
        hosts += draw(st.lists(st.sampled_from(hosts), max_size=8))
    if draw(st.booleans()):
        hosts = draw(st.permutations(hosts))
    return hosts


@settings(max_examples=300)
@given(st.one_of(hosts_strategy, runs_of_hosts()))
def test_expand_compress_round_trip(hosts: list[str]) -> None:
    assert expand(compress(hosts)) == hosts
    ordered = expand(compress(hosts, sort=True))
    assert collections.Counter(ordered) == collections.Counter(hosts)


@st.composite
def expressions(draw) -> str:
    items = []
    for _ in range(draw(st.integers(0, 4))):
        text = draw(st.text(_name_chars, max_size=3))
        for _ in range(draw(st.integers(0, 3))):
            ranges = []
            for _ in range(draw(st.integers(1, 2))):
                low = draw(st.integers(0, 120))
                width = draw(st.integers(0, 4))
                part = f"{low:0{width}d}"
                if draw(st.booleans()):
                    part += f"-{draw(st.integers(low, low + 5))}"
                ranges.append(part)
            text += "[" + ",".join(ranges) + "]" + draw(st.text(_name_chars, max_size=2))
        items.append(text)
    return draw(st.sampled_from([",", " ", ",,", "\t"])).join(items)


@settings(max_examples=300, deadline=None)
@given(expressions(), st.data())
def test_count_nth_index_of_agree_with_expand(expr: str, data) -> None:
    hosts = expand(expr)
    assert count(expr) == len(hosts)
    if hosts:
        for i in data.draw(st.lists(st.integers(-len(hosts), len(hosts) - 1), max_size=20)):
            assert nth(expr, i) == hosts[i]
            assert index_of(expr, hosts[i]) == hosts.index(hosts[i])
    assert expand(compress(hosts)) == hosts


@settings(max_examples=1000)
@given(st.text(st.sampled_from("n01-9[],x \t+(") | st.characters(), max_size=40))
def test_arbitrary_text_gives_hosts_or_hostlist_error(text: str) -> None:
    for function in (
        expand,
        count,
        expand_counts,
        lambda t: nth(t, 0),
        lambda t: index_of(t, "n1"),
    ):
        try:
            function(text)
        except HostlistError as exc:
            assert "\n" not in str(exc)


def test_import_is_light() -> None:
    code = (
        "import sys, time; t = time.perf_counter(); import tfslurm.hostlist; "
        "print(time.perf_counter() - t); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'hostlist')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    _seconds, modules = out.stdout.splitlines()
    assert modules == "[]"


@settings(max_examples=400, deadline=None)
@given(st.one_of(hosts_strategy, runs_of_hosts()), st.booleans())
def test_column_path_equals_host_by_host_path(hosts: list[str], sort: bool) -> None:
    """compress() takes a C-level column path for most lists; it must equal the
    host-by-host transcription of Slurm's algorithm on every input."""
    assert compress(hosts, sort=sort) == compression.compress_by_host(hosts, sort)
