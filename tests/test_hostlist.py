"""Unit and property tests of tfslurm.hostlist (no Slurm needed).

The differential tests against the real scontrol live in test_hostlist_scontrol.py; the
expected values here were checked against scontrol 22.05.8 too (except where the test
says newer Slurm is followed).
"""

from __future__ import annotations

import collections
import itertools
import random
import re
import subprocess
import sys
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from importcost import added_by
from tfslurm import errors, hostlist
from tfslurm.hostlist import (
    HostlistError,
    compress,
    compress_counts,
    compression,
    count,
    expand,
    expand_counts,
    grammar,
    groups,
    index_of,
    natural,
    nth,
)

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


# ---- compress -------------------------------------------------------------------------

# (hosts, scontrol show hostlist, scontrol show hostlistsorted), observed with 22.05.8
COMPRESS_CASES = [
    ("n1,n2,n3", "n[1-3]", "n[1-3]"),
    ("n2,n1,n3", "n[2,1,3]", "n[1-3]"),
    ("n1,n1,n2", "n[1,1-2]", "n[1,1-2]"),
    ("n9,n10,n010", "n[9-10,010]", "n[9-10,010]"),
    ("n01,n1", "n[01,1]", "n[1,01]"),
    ("n099,n100,n1000", "n[099-100,1000]", "n[099-100,1000]"),
    ("n1,m1,n2", "n1,m1,n2", "m1,n[1-2]"),
    ("a,b,a", "a,b,a", "a,a,b"),
    ("n,n1,n2", "n,n[1-2]", "n,n[1-2]"),
    ("n1,n,n2", "n1,n,n2", "n,n[1-2]"),
    ("a1b2,a1b3", "a1b[2-3]", "a1b[2-3]"),
    ("n001,n2,n03", "n[001,2,03]", "n[2,03,001]"),
    ("n0,n00,n000", "n[0,00,000]", "n[0,00,000]"),
    ("1,2,3", "[1-3]", "[1-3]"),
    ("n01,n02,n1,n2", "n[01-02,1-2]", "n[1-2,01-02]"),
    ("n1-ib,n2-ib", "n1-ib,n2-ib", "n1-ib,n2-ib"),
    ("n10,n9", "n[10,9]", "n[9-10]"),
    ("n3,n1-3", "n3,n1-3", "n3,n1-3"),
    ("n1,n2,n3,n2", "n[1-3,2]", "n[1-2,2-3]"),
    ("n1,n2,n3,n4,n5,n2,n3", "n[1-5,2-3]", "n[1-2,2-3,3-5]"),
    ("n5,n1,n2,n3,n4,n5", "n[5,1-5]", "n[1-5,5]"),
    ("n1,n01,n001,n2,n02", "n[1,01,001,2,02]", "n[1-2,01-02,001]"),
    ("n5,n1-2,n0,n", "n5,n1-2,n0,n", "n,n[0,5],n1-2"),
    # prefixes sort in strnatcmp's natural order; non-ASCII bytes count as negative chars
    ("r2n1,r10n1,r1n1,r02n1", "r2n1,r10n1,r1n1,r02n1", "r02n1,r1n1,r2n1,r10n1"),
    ("1_0,100_0,0_0", "1_0,100_0,0_0", "0_0,1_0,100_0"),
    ("x9y1,x10y1,x09y1,x010y1", "x9y1,x10y1,x09y1,x010y1", "x010y1,x09y1,x9y1,x10y1"),
    ("a\u00e91,a1,a", "a\u00e91,a1,a", "a\u00e91,a,a1"),
]


@pytest.mark.parametrize("hosts,plain,ordered", COMPRESS_CASES)
def test_compress_table(hosts: str, plain: str, ordered: str) -> None:
    names = hosts.split(",")
    assert compress(names) == plain
    assert compress(names, sort=True) == ordered
    assert compress(iter(names)) == plain  # any iterable


def test_compress_empty() -> None:
    assert compress([]) == ""
    assert compress([], sort=True) == ""


@pytest.mark.parametrize(
    "bad",
    [
        ["n1", ""],
        ["a b"],
        ["n[1]"],
        ["a,b"],
        ["x\ty"],
        ["n]"],
        ["a\rb"],
        ["a\vb"],
        ["a\x00"],
        [None],
        [3],
        "n1,n2",
    ],
)
def test_compress_rejects_names_that_would_not_read_back(bad) -> None:
    with pytest.raises(HostlistError):
        compress(bad)
    with pytest.raises(HostlistError):
        compress(bad, sort=True)


@settings(max_examples=500)
@given(st.lists(st.text(max_size=8), max_size=8), st.booleans())
def test_compress_of_any_text_gives_a_string_or_hostlist_error(hosts: list[str], sort: bool) -> None:
    try:
        text = compress(hosts, sort=sort)
    except HostlistError as exc:
        assert "\n" not in str(exc)
    else:
        assert collections.Counter(expand(text)) == collections.Counter(hosts)


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


@st.composite
def overlapping_runs(draw) -> list[str]:
    """Runs that overlap (as sorted compress's coalesce splits them): few prefixes, some
    names without a numeric tail, widths of one class or mixed, repeats."""
    hosts: list[str] = []
    widths = draw(st.sampled_from([(0,), (3,), (0, 1), (0, 2, 3), (1, 2)]))
    for _ in range(draw(st.integers(1, 6))):
        prefix = draw(st.sampled_from(["n", "n", "a1b", ""]))
        suffix = draw(st.sampled_from(["", "", "", "-ib"]))
        start = draw(st.sampled_from([0, 8, 9, 98, 99]) | st.integers(0, 120))  # digit boundaries
        width = draw(st.sampled_from(widths))
        hosts += [f"{prefix}{n:0{width}d}{suffix}" for n in range(start, start + draw(st.integers(1, 40)))]
    if draw(st.booleans()):
        hosts = draw(st.permutations(hosts))
    return hosts


@settings(max_examples=600, deadline=None)
@given(overlapping_runs())
@example(["n9", "n10", "n00", "n9", "n10"])  # Slurm's split loses n00: hosts sorted one by one
@example(["n9", "n10", "n00", "n9", "n10", "x", "n"])  # the same, names without a number
def test_sorted_compress_merges_overlaps_splits_runs_as_slurm(hosts: list[str]) -> None:
    """The by-prefix merge of overlapping runs (linear after a sort) writes exactly what the
    literal transcription of hostlist_coalesce + collapse writes (quadratic in overlaps)."""
    literal = compression.compress_by_host(hosts, True)
    assert compression.compress_by_host(hosts, True, fast=True) == literal
    assert compress(hosts, sort=True) == literal


@st.composite
def names_among_numbered(draw) -> list[str]:
    """Hosts of which some have no numeric tail, some equal another's prefix, in any order."""
    names = st.sampled_from(["n", "a", "r2n", "r10n", "n1x", "x-", "é", "n2é"])
    numbered = st.builds(
        lambda prefix, number, width: f"{prefix}{number:0{width}d}",
        st.sampled_from(["n", "a", "r2n", "r10n", "x-", "é"]),
        st.integers(0, 12),
        st.sampled_from([0, 0, 2, 3]),
    )
    return draw(st.lists(st.one_of(names, numbered, numbered), min_size=1, max_size=16))


@settings(max_examples=600, deadline=None)
@given(names_among_numbered())
# n9 and n10 are pushed as two runs (r10n stands between them), so n01 sorts between them
@example(["x-0", "n01", "x-3", "é11", "é008", "n9", "r10n", "n10", "n1x", "a", "r10n01"])
def test_sorted_compress_of_mixed_names_is_host_by_host_text(hosts: list[str]) -> None:
    """Names without a number are sorted apart from the numbered hosts, which take the
    column path; the text is the literal transcription's on every input."""
    assert compress(hosts, sort=True) == compression.compress_by_host(hosts, True)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.integers(0, 130), min_size=2, max_size=60),
    st.sampled_from([0, 1, 2, 3, 4]),
    st.sampled_from(["n", "a1b-", ""]),
)
@example([9, 10, 10, 11, 0, 5], 0, "n")  # repeats and a digit-count boundary, unpadded
@example([7, 123, 124, 8, 7], 3, "n")  # zero-padded and unpadded of one width
def test_sorted_compress_of_one_prefix_is_the_host_by_host_text(
    numbers: list[int], width: int, prefix: str
) -> None:
    """One prefix, one width class: the numbers are sorted and cut into runs without
    pushing runs first; the text is the literal transcription's."""
    hosts = [f"{prefix}{n:0{width}d}" for n in numbers]
    assert compress(hosts, sort=True) == compression.compress_by_host(hosts, True)


@st.composite
def many_prefixes(draw) -> list[str]:
    """Hosts whose prefixes mostly differ (what Slurm writes for products of brackets),
    with digits inside the prefixes, zero-padded and unpadded tails of every width class
    after the same prefix, repeats, non-ASCII, and names without a number among them."""
    prefix = st.builds(
        lambda head, number, width, tail: f"{head}{number:0{width}d}{tail}",
        st.sampled_from(["n", "r", "é", "", "x-", "a1b"]),
        st.integers(0, 120),
        st.sampled_from([0, 0, 2, 3]),
        st.sampled_from(["x", "-", "n", "é", "_"]),
    )
    pool = draw(st.lists(prefix, min_size=1, max_size=12))
    numbered = st.builds(
        lambda p, number, width: f"{p}{number:0{width}d}",
        st.sampled_from(pool),
        st.integers(0, 120),
        st.sampled_from([0, 0, 2, 3]),
    )
    return draw(
        st.lists(st.one_of(numbered, numbered, numbered, st.sampled_from(pool)), min_size=1, max_size=40)
    )


@settings(max_examples=600, deadline=None)
@given(many_prefixes(), st.booleans())
# n9x and n10x: one prefix each side of a digit-run boundary; é sorts before ASCII
@example(["n9x1", "n10x1", "n9x01", "é1", "n9x", "n9x1", "r7_2", "r07_2", "n9x10", "n9x07"], True)
def test_compress_of_many_prefixes_is_the_host_by_host_text(hosts: list[str], sort: bool) -> None:
    """Lists of mostly distinct prefixes are sorted by one string key per row (natural
    order of the prefix, then width, padding and number); the text is the literal
    transcription's on every input, and the rows' order is the column sorts' (a wrong
    order can hide behind the host-by-host fallback for overlaps)."""
    assert compress(hosts, sort=sort) == compression.compress_by_host(hosts, sort)
    pushed = compression.push_hosts(hosts, compression.host_columns(hosts, "\n".join(hosts)))
    if pushed is not None and pushed.columns is not None:
        keyed = compression.row_sort_keys(pushed)
        assert keyed is not None
        row_keys, name_keys = keyed
        by_keys = sorted(range(len(row_keys)), key=row_keys.__getitem__)
        assert by_keys == compression.columns_order(pushed.columns)
        # each name sorts before the rows of the prefix it equals, after smaller prefixes
        for name, key in zip(pushed.names, name_keys, strict=True):
            prefixes = [p for p, k in zip(pushed.columns.prefixes, row_keys, strict=True) if k < key]
            assert all(natural.natural_key(p) <= natural.natural_key(name) for p in prefixes)
            assert all(
                k.startswith(key) for p, k in zip(pushed.columns.prefixes, row_keys, strict=True) if p == name
            )


def test_zero_padding_past_20_digits_keeps_the_same_text() -> None:
    # found by the fuzz target: 271,524 hosts of which some end in a 30-digit zero-padded
    # number; the last unpadded host overlaps the first padded one in value, an overlap of
    # incompatible widths that Slurm's coalesce leaves alone (so must the fast paths)
    hosts = expand("r2n[347-359,000000000000000001123]6[1147-1157,234-244][495-497]4")
    assert compression.push_hosts(hosts, compression.host_columns(hosts, "\n".join(hosts))) is not None
    for sort in (False, True):
        assert compress(hosts, sort=sort) == compression.compress_by_host(hosts, sort)
        assert Counter(expand(compress(hosts, sort=sort))) == Counter(hosts)


def test_sorted_compress_of_large_overlaps() -> None:
    # four overlapping 60,000-host runs, some with names without a numeric tail among
    # them. Speed is in bench/hostlist.py and the fuzz target; here, the result.
    cases = [
        "n[0-60000],n[5-60005],n[10-60010],n[100-60100]",
        "n[0-60000]x,n[5-60005]x,n[10-60010],n[100-60100]",
        "n[000-60000],n[005-60005]",
    ]
    for expression in cases:
        hosts = expand(expression)
        text = compress(hosts, sort=True)
        back = expand(text)
        assert Counter(back) == Counter(hosts)
        numeric = [host for host in back if host[-1].isdigit()]
        assert numeric == sorted(numeric, key=lambda host: int(host[1:]))


def test_numbers_past_64_bits_are_refused() -> None:
    # Slurm saturates such numbers (n18446744073709551616 becomes
    # n18446744073709551615) or crashes, so no node has such a name: refused everywhere.
    for hosts in (
        ["n18446744073709551616"],
        ["n1", "n" + "1" * 5000],
        ["20000000000000000000", "n1"],
        ["n1-ib", "a18446744073709551616"],
    ):
        for sort in (False, True):
            with pytest.raises(HostlistError, match="64-bit limit"):
                compress(hosts, sort=sort)
            with pytest.raises(HostlistError, match="64-bit limit"):
                compression.compress_by_host(hosts, sort)
    # the largest number and long zero-padded numbers are still hosts
    top = ["n18446744073709551615", "n18446744073709551614"]
    assert compress(top) == "n[18446744073709551615,18446744073709551614]"
    assert compress(["n1", top[0], top[0]], sort=True) == "n[1,18446744073709551615,18446744073709551615]"
    padded = ["n" + "0" * 5000 + "1", "n" + "0" * 5000 + "2"]
    assert expand(compress(padded)) == padded
    assert count("n[18446744073709551615],x18446744073709551616y") == 2  # not a tail


def test_sorted_compress_of_names_takes_under_3x_the_memory() -> None:
    rng = random.Random(5)
    for shape in ("{}", "{}1x"):  # names without a number; with one, not at the end
        names = [shape.format("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=8))) for _ in range(50_000)]
        peaks = []
        for sort in (False, True):
            tracemalloc.start()
            try:
                compress(names, sort=sort)
                peaks.append(tracemalloc.get_traced_memory()[1])
            finally:
                tracemalloc.stop()
        assert peaks[1] <= 3 * peaks[0], (shape, peaks)


def test_compress_refuses_a_range_ending_at_2_64_minus_1() -> None:
    # what compress would write for these (n[...614-...615]) crashes Slurm 22.05, and
    # expand refuses it: no node list can hold them in this order
    top = ["n18446744073709551614", "n18446744073709551615"]
    message = "bad host name 'n18446744073709551615': ends a range of several hosts at Slurm's 64-bit limit"
    for hosts, sort in ((top, False), (top, True), (top[::-1], True), (["x", *top, "y"], False)):
        with pytest.raises(HostlistError, match=re.escape(message)):
            compress(hosts, sort=sort)
    assert compress(["n018446744073709551614", top[1]]) == "n[018446744073709551614,18446744073709551615]"
    for expr in (
        "n[18446744073709551614-18446744073709551615]",
        "n18446744073709551614,n18446744073709551615",
    ):
        for call in (count, lambda e: nth(e, 0), lambda e: index_of(e, "n18446744073709551614")):
            with pytest.raises(HostlistError, match="only one host may reach"):
                call(expr)


def test_long_digit_strings_never_reach_int_limits() -> None:
    # Python refuses int() of digit strings over 4300 characters; leading zeros count.
    zeros = "0" * 5000
    assert expand_counts(zeros + "3(x" + zeros + "2)") == [3, 3]
    assert expand(f"n[{zeros}1]") == [f"n{zeros}1"]
    assert index_of(f"n[{zeros}1-{zeros}3]", f"n{zeros}2") == 1
    for host in (f"n{zeros}2", "n" + "7" * 5000):
        with pytest.raises(HostlistError, match="is not in"):
            index_of("n[1-3]", host)


@pytest.mark.parametrize(
    "hosts, expected",
    [
        # Slurm 22.05 prints n[9,9-10,10] (n00 lost); a copy of its split invented n01-n08.
        ("n9 n10 n00 n9 n10", "n[9,9,00,10,10]"),
        ("n00 n9 n10 n9", None),
        ("n9 n10 n9 n10", "n[9,9-10,10]"),  # Slurm's own answer, where it keeps the hosts
        ("n1 n2 n3 n2 n3 n4", "n[1-2,2-3,3-4]"),
        ("a-x b9 b10 b00 b9 b10 a-x", None),
    ],
)
def test_sorted_compress_keeps_exactly_the_hosts(hosts: str, expected: str | None) -> None:
    names = hosts.split()
    text = hostlist.compress(names, sort=True)
    if expected is not None:
        assert text == expected
    assert Counter(hostlist.expand(text)) == Counter(names)
    # already sorted: compressing the expansion again changes nothing
    assert hostlist.compress(hostlist.expand(text), sort=True) == text


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["n", "a-", "rack1-n"]), st.integers(0, 120), st.integers(1, 3)),
        max_size=30,
    )
)
def test_sorted_compress_never_invents_or_loses_hosts(parts: list[tuple[str, int, int]]) -> None:
    names = [f"{prefix}{number:0{width}d}" for prefix, number, width in parts]
    text = hostlist.compress(names, sort=True)
    assert Counter(hostlist.expand(text)) == Counter(names)


# ---- the limits (their timing: bench/limits.py) -------------------------------------------


def test_count_of_many_bracket_free_hosts() -> None:
    for expr in ("n," * (hostlist.MAX_HOSTS - 1) + "n", "n[1]," + "n," * (hostlist.MAX_HOSTS - 2) + "n"):
        assert count(expr) == hostlist.MAX_HOSTS


def test_sorted_compress_of_names_without_numbers() -> None:
    small = expand("h[1-70]x[1-100]J,a[1-5]-b,h[01-3]x0J")
    text = compress(small, sort=True)
    assert text == ",".join(sorted(small, key=natural.natural_key))
    assert text == compression.compress_by_host(small, True)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.text(st.sampled_from("ab-_.~Z0123456789") | st.characters(), min_size=1, max_size=12), max_size=30
    )
)
def test_natural_keys_sort_as_natural_key(names: list[str]) -> None:
    names = [n for n in names if "\n" not in n]
    assert natural.natural_sorted(names) == sorted(names, key=natural.natural_key)


def test_natural_keys_of_many_names_share_one_encoding() -> None:
    # Keys made 65,536 names at a time, each batch choosing its own encoding (ASCII or
    # UTF-8 bytes as signed chars), would not compare across batches: a non-ASCII name
    # after the first batch would sort after "a0x" although strnatcmp puts it first.
    names = [f"a{i}x" for i in range(65_536)] + ["éz"]
    assert natural.natural_order(names)[:2] == [65_536, 0]
    assert compress(names, sort=True).startswith("éz,a0x,a1x,")


def test_expanding_scattered_hosts_stays_near_the_memory_floor() -> None:
    # what Slurm writes for shuffled hosts is one long bracket of single numbers (with a
    # span or two); expanding it must not peak at a multiple of the list it returns
    numbers = list(range(200_000))
    random.Random(42).shuffle(numbers)
    numbers[10:12] = [7, 8]  # a span
    hosts = [f"n{i}" for i in numbers]
    text = compress(hosts)
    assert "-" in text
    floor = sys.getsizeof(hosts) + sum(map(sys.getsizeof, hosts))
    del hosts
    expanded, peak = _expand_traced(text)
    assert expanded == [f"n{i}" for i in numbers]
    assert peak < 1.5 * floor, (peak, floor)


def _expand_traced(text: str) -> tuple[list[str], int]:
    """expand(text) and the peak of the memory it allocated (tracemalloc)."""
    tracemalloc.start()
    try:
        expanded = expand(text)
        return expanded, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_expanding_scattered_brackets_stays_near_memory_floor() -> None:
    # 25 items of 4,000 scattered numbers each: what expand keeps of the parsed groups
    # (their split parts, from the 64-bit check of "n1[...]") is gone before the hosts
    numbers = list(range(100_000))
    random.Random(7).shuffle(numbers)
    chunks = [numbers[i : i + 4_000] for i in range(0, len(numbers), 4_000)]
    text = ",".join(f"n{k}[" + ",".join(map(str, chunk)) + "]" for k, chunk in enumerate(chunks))
    hosts = [f"n{k}{n}" for k, chunk in enumerate(chunks) for n in chunk]
    floor = sys.getsizeof(hosts) + sum(map(sys.getsizeof, hosts))
    expanded, peak = _expand_traced(text)
    assert expanded == hosts
    assert peak < 1.5 * floor, (peak, floor)


def test_multi_group_trailing_numbers_checked_without_expanding() -> None:
    # the digits after the last non-digit span groups and texts: found by the fuzz target
    # (expanding the 900k hosts, three times, takes seconds to accept or refuse them)
    ok = "n[000000000000000000001-5000][00-99]"
    assert count(ok) == 500_000
    bad = "é[000000000000000000086-0770][1134][000000000000000000218-643]"
    with pytest.raises(HostlistError, match="64-bit limit"):
        count(bad)
    for expr, refused in [("1844674407370955161[5-6]", True), ("1844674407370955161[4-5]", False),
                          ("n[0-1]8446744073709551615", False), ("n[1-2]8446744073709551616", True),
                          ("0" * 30 + "[1-3]" + "0" * 17, False), ("0[99,1]" + "0" * 18, True)]:  # fmt: skip
        if refused:
            with pytest.raises(HostlistError, match="64-bit limit"):
                expand(expr)
        else:
            assert len(expand(expr)) == count(expr)


def test_compress_writes_ranges_that_read_back() -> None:
    # Slurm 22.05 writes n[0-69999], which its own parser (and expand) refuses as over
    # 65,536 hosts in a range; found by the fuzz target
    hosts = [f"n{i}" for i in range(70_000)]
    for sort in (False, True):
        assert compress(hosts, sort=sort) == "n[0-65535,65536-69999]"
        assert compression.compress_by_host(hosts, sort) == "n[0-65535,65536-69999]"
    assert compress([f"x{i:06d}" for i in range(65_537)]) == "x[000000-065535,065536]"
    assert expand(compress(hosts)) == hosts


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 10**12), st.integers(0, 2000), st.integers(0, 16)),
        min_size=60,
        max_size=120,
    )
)
def test_span_digit_counts_in_bulk_equal_one_by_one(drawn: list[tuple[int, int, int]]) -> None:
    """The group's character count (what MAX_CHARS bounds) made C-level for many spans."""
    spans = [(index, low, low + length + 1, width) for index, (low, length, width) in enumerate(drawn)]
    expected = sum(groups.span_digits(low, high, width) for _, low, high, width in spans)
    assert groups.spans_digits(spans) == expected
    assert expected == sum(
        len(f"{n:0{width}d}") for _, low, high, width in spans[:3] for n in range(low, high + 1)
    ) + sum(groups.span_digits(low, high, width) for _, low, high, width in spans[3:])


# ---- runs of one-group items (what compress writes for hosts whose prefixes differ) -------

_ULONG_MAX = 2**64 - 1


def _one_group_hosts(item: str, pushed: list[tuple[str, str, int, int]] | None = None) -> list[str] | None:
    """The hosts of ``prefix[body]tail`` by the grammar's rules, written out directly
    (independent of the parser): None where the item is refused. ``pushed`` gets each
    host as Slurm holds it: prefix, tail, number, width."""
    prefix, rest = item.split("[")
    body, tail = rest.split("]")
    hosts = []
    for part in body.split(","):
        matched = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", part)
        if matched is None:
            return None
        low_text, high_text = matched[1], matched[2] or matched[1]
        low, high = int(low_text), int(high_text)
        if high > _ULONG_MAX or high < low or high - low >= hostlist.MAX_RANGE_HOSTS:
            return None
        hosts += [f"{prefix}{n:0{len(low_text)}d}{tail}" for n in range(low, high + 1)]
        if pushed is not None:
            pushed += [(prefix, tail, n, len(low_text)) for n in range(low, high + 1)]
    for host in hosts:
        digits = host[len(host.rstrip("0123456789")) :].lstrip("0")
        if len(digits) > 20 or int(digits or "0") > _ULONG_MAX:
            return None
    return hosts


def _top_of_a_range(pushed: list[tuple[str, str, int, int]]) -> str | None:
    """The first host Slurm joins, as 2**64 - 1, onto the host before it (one below, the
    same prefix and tail, widths that agree), written out; None if there is none."""
    for before, (prefix, tail, number, width) in itertools.pairwise(pushed):
        joins = before[:3] == (prefix, tail, number - 1) and max(before[3], 20) == max(width, 20)
        if number == _ULONG_MAX and joins:
            return f"{prefix}{number:0{width}d}{tail}"
    return None


_run_number = st.one_of(
    st.integers(0, 1300).map(str),
    st.builds(lambda n, width: f"{n:0{width}d}", st.integers(0, 99), st.integers(2, 25)),
    st.integers(_ULONG_MAX - 3, _ULONG_MAX + 2).map(str),
    st.integers(10**17, 10**19).map(str),
)


@st.composite
def _run_body(draw) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        low = draw(_run_number)
        pick = draw(st.integers(0, 9))
        if pick < 5:
            parts.append(low)
        elif pick < 9:
            parts.append(f"{low}-{int(low) + draw(st.integers(0, 6))}")
        else:  # refused: reversed, too long, not digits, empty
            parts.append(draw(st.sampled_from(["5-3", "1-70000", "x", "", "1-", "²"])))
    return ",".join(parts)


_run_prefix = st.one_of(
    st.text(st.sampled_from("abn-_.x\x00é"), max_size=4).map(lambda text: text + "r"),
    st.text(st.sampled_from("abn-_.x0123456789"), max_size=8),
    st.text(st.sampled_from("0123456789"), max_size=22),  # trailing digits: the 64-bit check
)
_run_tail = st.one_of(
    st.sampled_from(["", "", "-ib", "5", "0" * 17]),  # shared by many items
    st.text(st.sampled_from("-ibx\x00"), max_size=3),
    st.text(st.sampled_from("0123456789"), max_size=21),  # joins the trailing number
    st.text(st.sampled_from("0123456789"), min_size=19, max_size=21).map(lambda digits: "x" + digits),
)


def _assert_refused_as_alone(expr: str, item: str) -> str:
    """expand and count of ``expr`` give the error ``item`` gives alone, naming ``expr``;
    returns what the error says of the item."""
    with pytest.raises(HostlistError) as alone:
        expand(item)
    what = str(alone.value).removeprefix(f"bad hostlist {grammar.show(item)}: ")
    for function in (expand, count):
        with pytest.raises(HostlistError) as whole:
            function(expr)
        assert str(whole.value) == f"bad hostlist {grammar.show(expr)}: {what}"
    return what


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            _run_prefix, st.sampled_from(["1", "1-3", "10390,1306,1200", "07-8,1"]) | _run_body(), _run_tail
        ),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from([",", ",", ",,", " ", "\t", ", ", None]),
    st.data(),
)
def test_runs_of_one_group_items_expand_as_each_item_alone(
    items: list[tuple[str, str, str]], separator: str | None, data
) -> None:
    """Items of one bracket group are planned a run at a time (the same "[body]tail" parsed
    once, the 64-bit check only for prefixes that can reach it) and written from one text
    per group and tail: the result is each item's hosts in turn, and an error is the first
    refused item's."""
    texts = [f"{prefix}[{body}]{tail}" for prefix, body, tail in items]
    if separator is not None:
        expr = separator.join(texts)  # one separator throughout (',' is compress's)
    else:  # each its own
        expr = texts[0]
        for text in texts[1:]:
            expr += data.draw(st.sampled_from([",", ",,", " ", "\t", ", "])) + text
    expected: list[str] = []
    pushed: list[tuple[str, str, int, int]] = []
    refused = None
    for text in texts:
        hosts = _one_group_hosts(text, pushed)
        if hosts is None:
            refused = text
            break
        expected += hosts
    if refused is not None:
        _assert_refused_as_alone(expr, refused)
        return
    top = _top_of_a_range(pushed)
    if top is not None:  # Slurm would join hosts, of one item or several, into that range
        with pytest.raises(HostlistError) as info:
            count(expr)
        assert (
            str(info.value)
            == f"bad hostlist {grammar.show(expr)}: host {grammar.show(top, 40)} {grammar.AT_64_BITS}"
        )
        return
    assert expand(expr) == expected
    assert count(expr) == len(expected)
    for index in data.draw(st.lists(st.integers(0, len(expected) - 1), max_size=5)):
        assert nth(expr, index) == expected[index]
        assert index_of(expr, expected[index]) == expected.index(expected[index])


@pytest.mark.parametrize(
    "item, refused",
    [
        ("2[1234567890123456789]", True),  # one digit of the prefix makes 20
        ("1[8446744073709551615]", False),
        ("1[8446744073709551616]", True),
        ("n[1-2]8446744073709551616", True),  # the tail's digits
        ("n[1]8446744073709551615", False),
        ("n[1]x" + "1" * 20, False),  # the tail's digits after a letter
        ("n[1]x" + "2" * 20, True),
        ("9[" + "0" * 25 + "1]", True),  # a group kept as text, zero-padded past 19
        ("[" + "0" * 25 + "1]", False),
        ("n0[" + "0" * 20 + "1]" + "0" * 17, False),
    ],
)
def test_the_64_bit_check_of_items_in_a_run(item: str, refused: bool) -> None:
    expr = f"a[1],{item},b[2]"
    hosts = _one_group_hosts(item)
    assert (hosts is None) == refused
    if hosts is None:
        assert "64-bit limit" in _assert_refused_as_alone(expr, item)
    else:
        assert expand(expr) == ["a1", *hosts, "b2"]
        assert count(expr) == len(hosts) + 2


def test_runs_of_one_group_items_keep_the_bounds_item_by_item() -> None:
    """The bounds are counted item by item in a run as well: the item that crosses one is
    refused before its 64-bit check, and nothing after it is read."""
    limit = hostlist.MAX_HOSTS
    run = ",".join(f"r{i}x[1-64]" for i in range(limit // 64))  # limit hosts exactly
    assert count(run) == limit
    over = f"more than {limit} hosts"
    for expr, error in [
        (run + ",r[1]", over),
        (run + ",r[1],z[5-1]", over),  # the bound first: the bad item after is not read
        (run + ",r[1]" + "9" * 20, over),  # the bound before the 64-bit check
        ("z[5-1]," + run, "reversed range '5-1'"),
        (run[: len(run) // 2] + ",z[5-1]" + run[len(run) // 2 :], "reversed range '5-1'"),
        (run[:-6] + "[1-3]" + "9" * 20, "host 'r16383x399999999999999999999' ends in a number"),
    ]:
        for function in (count, expand):
            with pytest.raises(HostlistError, match=re.escape(error)):
                function(expr)
    # the characters of every host, exactly: 61,992 an item (300 hosts of 204 characters
    # and 792 digits), so 1,082 items are within the bound and 1,083 past it
    wide = ",".join("y" * 100 + f"{i:04d}[1-300]" + "z" * 100 for i in range(1_083))
    with pytest.raises(HostlistError, match=f"more than {hostlist.MAX_CHARS} characters"):
        count(wide)
    assert count(wide.rpartition(",y")[0]) == 1_082 * 300


def test_a_bracket_after_many_prefixes_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    parse = grammar.parse_ranges

    def counted(expr: str, body: str) -> groups.Group:
        parsed.append(body)
        return parse(expr, body)

    monkeypatch.setattr(grammar, "parse_ranges", counted)
    expr = ",".join(f"r{i}x[10390,1306,1200]" for i in range(5_000)) + ",q[1-2]z[3],r[10390,1306,1200]-ib"
    assert count(expr) == 15_005
    assert expand(expr)[-3:] == ["r10390-ib", "r1306-ib", "r1200-ib"]
    assert parsed == ["10390,1306,1200", "1-2", "3"] * 2


# ---- short expressions: read without regular expressions ----------------------------------

_hostile_text = st.text(st.sampled_from("n01-9[],x \t+(\x00é²"), max_size=4)
# Brackets long enough to be checked in bulk: plain ranges, and at most one odd part
# (numbers at the bulk check's limits, ranges at Slurm's, reversed, or not a range).
_plain_part = st.one_of(
    st.integers(0, 1300).map(str),
    st.builds(lambda n, width: f"{n:0{width}d}", st.integers(0, 99), st.integers(2, 19)),
    st.builds(lambda low, more: f"{low}-{low + more}", st.integers(0, 10**19 - 5), st.integers(0, 3)),
    st.builds(lambda low, more: f"{low:0{more % 4}d}-{low + more}", st.integers(0, 120), st.integers(0, 200)),
)
_odd_part = st.sampled_from(
    ["0" * 45 + "1", "0" * 46 + "1", "0" * 64, "0" * 65, "1" * 20, "1-2-3", "1--2", "-1", "", "x", "٣",
     "0-65535", "1-65537", "07-65542", "5-3", "1-x", "²", "1-٣", "1-" + "1" * 20, "1-" + "9" * 5000]
) | st.integers(_ULONG_MAX - 3, _ULONG_MAX + 2).map(str)  # fmt: skip


@st.composite
def _long_body(draw) -> str:
    parts = draw(st.lists(_plain_part, min_size=8, max_size=40))
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), draw(_odd_part))
    return ",".join(parts)


@st.composite
def _short_reading_exprs(draw) -> str:
    """Expressions of the grammar and near it: several groups, runs of one-group items,
    numbers around 2**64, blanks and stray brackets."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.text(st.sampled_from("n01-9[],x \t+(") | st.characters(), max_size=40))
    items = []
    for _ in range(draw(st.integers(0, 6))):
        text = draw(_run_prefix)
        for _ in range(draw(st.integers(0, 3))):
            body = draw(
                st.sampled_from(["1", "1-3", "10390,1306,1200", "07-8,1", "1, 2"])
                | _run_body()
                | _odd_part
                | _long_body()
            )
            text += f"[{body}]" + draw(_run_tail)
        if draw(st.integers(0, 5)) == 0:
            text += draw(_hostile_text)
        items.append(text)
    expr = ""
    for item in items:
        expr += item + draw(st.sampled_from([",", ",", ",,", " ", "\t", ", "]))
    return expr[: -1 if draw(st.booleans()) else len(expr)]


def _reading(expr: str, short: bool) -> object:
    """What plan, expand and count make of ``expr`` (or the error they raise) when it is
    read without regular expressions (``short``) or with them."""
    saved = grammar.SMALL_EXPR
    grammar.SMALL_EXPR = sys.maxsize if short else -1
    try:
        plans = [
            (
                tuple(texts),
                [(g.size, g.digits, g.widest, g.ranges, g.joined(), g.numbers()) for g in item_groups],
                size,
            )
            for texts, item_groups, size in grammar.plan(expr)
        ]
        return plans, expand(expr), count(expr)
    except HostlistError as error:
        return str(error)
    finally:
        grammar.SMALL_EXPR = saved


@settings(max_examples=1000, deadline=None)
@given(_short_reading_exprs())
@example("n[1-2]" + "9" * 20)
@example("a[1]b[2],[3] c[4-5]d,e")
@example("n[1-3")
@example("n]1[")
@example("n[[1]]")
@example("n[1,,2]")
@example("n[" + ",".join(map(str, range(70))) + "-80]")
@example("n[" + "1," * 40 + "1-2-3]")
@example("n[" + "1," * 40 + "٣]")
@example("n[" + "1," * 40 + "1" * 20 + "]")
@example("n[" + "1," * 40 + "]")
@example("n[" + "1," * 40 + "1-x]")
def test_short_and_long_readings_agree(expr: str) -> None:
    assert _reading(expr, short=True) == _reading(expr, short=False)


def test_reading_the_hooks_lists_imports_no_regular_expressions() -> None:
    """What a TaskProlog reads (Slurm's node and task-count lists) costs no import of re,
    nor of functools, collections, enum or typing."""
    code = (
        f"import sys; sys.path.insert(0, {str(Path(grammar.__file__).parents[2])!r})\n"
        "from tfslurm import hostlist\n"
        "for nodes in ('node[1-128]', 'n[001-004],gpu[1-2]', 'rack[1-2]-n[1-4]', 'a,b,c'):\n"
        "    assert hostlist.count(nodes) == len(hostlist.expand(nodes))\n"
        "assert hostlist.expand_counts('4(x128),2') == [4] * 128 + [2]\n"
        f"assert hostlist.count({','.join(f'n{i}[1-{i}]' for i in range(1, 150))!r}) == 11175\n"
        f"assert hostlist.count({'n[' + ','.join(map(str, range(1, 600, 2))) + ']'!r}) == 300\n"
    )
    assert added_by(code, ("re", "functools", "collections", "enum", "typing")) == []
