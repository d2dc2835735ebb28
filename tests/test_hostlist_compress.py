"""Unit and property tests of tfslurm.hostlist's compression (no Slurm needed): the
scontrol tables, sorted compress against the host-by-host text, overlaps and prefixes.

The expected values were checked against scontrol 22.05.8 (except where the test says
newer Slurm is followed); the differential tests are in test_hostlist_scontrol.py.
"""

from __future__ import annotations

import collections
import random
import re
import tracemalloc
from collections import Counter

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tfslurm import hostlist
from tfslurm.hostlist import (
    HostlistError,
    compress,
    compression,
    count,
    expand,
    expand_counts,
    groups,
    index_of,
    natural,
    nth,
)

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

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


# ---- properties of compress -----------------------------------------------------------


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
