"""Differential tests: tfslurm.hostlist against the real ``scontrol`` (Debian's Slurm 22.05).

``scontrol show hostnames|hostlist|hostlistsorted`` needs no daemons (see
scontrol_oracle.py). Without scontrol these tests skip, except with ``CI=true`` where a
skip is a failure. Where 22.05 and newer Slurm differ (a suffix after the last ``]``, an
unclosed ``[``) or where 22.05 accepts garbage by accident, the tables below pin both
sides so the documented differences stay true. At the end of the module the number of
cases sent to scontrol is printed.
"""

from __future__ import annotations

import itertools
import os
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scontrol_oracle import CRASHED, PARTIAL, Scontrol
from tfslurm.hostlist import HostlistError, compress, expand, grammar

CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def _examples(count: int) -> settings:
    count = max(1, int(count * float(os.environ.get("TFSLURM_HYPOTHESIS_SCALE", "1"))))
    return settings(max_examples=count, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def scontrol(request: pytest.FixtureRequest):
    oracle = Scontrol.find()
    if oracle is None:
        reason = "scontrol (Debian package slurm-client) is not installed"
        if CI:
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    version = oracle.version()
    yield oracle
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    line = f"\nhostlist differential: {oracle.queries} cases compared with {version or 'scontrol'}"
    if capture is not None:
        with capture.global_and_fixture_disabled():
            print(line)
    else:
        print(line)
    oracle.close()


def _ours(expr: str) -> list[str] | None:
    try:
        return expand(expr)
    except HostlistError:
        return None


# ---- hand-written edge cases ------------------------------------------------------------

AGREE = [
    "n1", "n[1-3]", "n[8-010]", "n[098-102]", "n[01-2]", "n[9-10,010]", "n[2,1,3]",
    "n[1-3,2-4]", "n1,n1", "n[1,1-2]", "n[1-2],,m1", "n[1-2] m[3]", "n[1-2] ,m", "a b,c",
    "[1-2]", "n[1-2],[3-4]", "n[007]", "n[0-0]", "n[00-00]", "n[0-65535]", "rack[1-2]-n[01-02]",
    "n[1-2][3-4]", "x[1-2]y[1-2]z[1-2]", "w[1-2]x[1-2]y[1-2]z[1-2]", "a1b[2-3]", "n1[0-2]",
    "n[1-2]x[3]", "n[1-2,3-4]", "n[01,1]", "node[001-003],node004", "n,n[1-2]",
    "n[99-101]", "n[0099-0101]", "n[9-11,011]", "a-b_c.d[1-2]", "n[1-2],",
    ",n1", "x[1]y[2]z[3]", "n[1-3,2]", "n[5,1-5]", "n[18446744073709551613-18446744073709551614]",
    # rejected by both
    "n[3-1]", "n[]", "n[a]", "n[1-x]", "n[-2]", "n[1,,2]", "n[1,]", "n[,1]", "n[1-2-3]",
    "n[0-65536]", "n[1-99999999999]", "a[1-70000]b[1]",
    "a[1-40000,1-40000]b[1]", "n[1.5]", "n[1--2]",
    # a newline inside a bracket: invalid everywhere
    "n[1\n2]",
]  # fmt: skip

# Where tfslurm follows newer Slurm or is stricter than 22.05's accidental readings:
# expr -> (what scontrol 22.05 prints, what tfslurm gives; None = rejected)
DIFFERENT = {
    "node[1-2]-ib": (None, ["node1-ib", "node2-ib"]),  # suffix: Slurm >= 23.11
    "a[1-2]b[3]c": (None, ["a1b3c", "a2b3c"]),  # suffix after the last group
    "n[1-2": (["n]"], None),  # unclosed: 23.02 rejects, 22.05 tacks on ']'
    "n[1-2,4": (["n]", "4"], None),
    "n[ 1-2]": (
        ["n01", "n02"],
        None,
    ),  # strtoul skips the blank but it counts in the width
    "n[+1-2]": (["n01", "n02"], None),
    "n[1-]": (["n1"], None),
    "a]b[1-2]": (["a]b1", "a]b2"], None),  # stray ']' kept in a host name
    "a[[1-2]": (["a[1", "a[2"], None),  # nested '[' kept in a host name
    "a[1-2b[3-4]": (["a[1-2b3", "a[1-2b4"], None),
    # 22.05 swallows errors in the third-from-last and earlier groups (drops those hosts)
    "a[2-1]b[1]c[1]": (PARTIAL, None),
    "x[1-2],a[x]b[1]c[1-2],y": (PARTIAL, None),
    # a stray ']' after the last group: 22.05 rejects it, 23.11+ read it as a suffix
    "n[1-3]]": (None, None),
    "n[1-2]]x": (None, None),
    # a newline is part of the name in 22.05: one host "q1\nb", printed as two lines
    "q1\nb": (["q1", "b"], None),
    "q[1-2]\nb[3]": (["q1", "b3", "q2", "b3"], None),  # hosts "q1\nb3", "q2\nb3"
    # ... so text after ']' makes it invalid
    "q[1]\nb": (None, None),
    # numbers past 2**64 - 1 are saturated
    "n18446744073709551616": (["n18446744073709551615"], None),
    "n1844674407370955161[5-6]": (["n18446744073709551615", "n18446744073709551616"], None),
}

# What scontrol 23.11 and later (here 24.11.5 and 26.05.5, identical) print where it differs
# from 22.05's answer in DIFFERENT: suffixes after the last group are accepted, an unclosed
# '[' is rejected, a stray ']' after the last group becomes part of the suffix, and a newline
# separates hosts.
SINCE_23_11 = {
    "node[1-2]-ib": ["node1-ib", "node2-ib"],
    "a[1-2]b[3]c": ["a1b3c", "a2b3c"],
    "n[1-2": None,
    "n[1-2,4": None,
    "n[1-3]]": ["n1]", "n2]", "n3]"],
    "n[1-2]]x": ["n1]x", "n2]x"],
    "q[1-2]\nb[3]": ["q1", "q2", "b3"],  # a newline separates, as a blank does
    "q[1]\nb": ["q1", "b"],
}


def slurm_release(scontrol: Scontrol) -> tuple[int, int]:
    """(major, minor) from ``scontrol --version`` ("slurm 22.05.8", "slurm-wlm 24.11.5")."""
    major, minor = scontrol.version().split()[-1].split(".")[:2]
    return int(major), int(minor)


def test_edge_cases_agree_with_scontrol(scontrol: Scontrol) -> None:
    answers = scontrol.hostnames(AGREE)
    mismatches = [(e, a, _ours(e)) for e, a in zip(AGREE, answers, strict=True) if a != _ours(e)]
    assert not mismatches


def test_documented_differences_still_hold(scontrol: Scontrol) -> None:
    exprs = list(DIFFERENT)
    answers = scontrol.hostnames(exprs)
    newer = slurm_release(scontrol) >= (23, 11)
    for expr, answer in zip(exprs, answers, strict=True):
        slurm_22_05, ours = DIFFERENT[expr]
        expected = SINCE_23_11.get(expr, slurm_22_05) if newer else slurm_22_05
        assert answer == expected, f"scontrol now says {answer!r} for {expr!r}"
        assert _ours(expr) == ours


COMPRESS_EDGES = [
    "n1,n2,n3", "n2,n1,n3", "n1,n1,n2", "n9,n10,n010", "n01,n1", "n1,n01", "n09,n10",
    "n099,n100,n1000", "n99,n0100", "n1,m1,n2", "a,b,a", "n,n1,n2", "n1,n,n2", "a1b2,a1b3",
    "n1,n2,n4,n5", "n001,n2,n03", "n0,n00,n000", "1,2,3", "n01,n02,n1,n2", "n1-ib,n2-ib",
    "n10,n9", "n9,n10,n11,n011", "n3,n1-3", "n1,n2,n3,n2", "n1,n2,n3,n4,n5,n2,n3",
    "n5,n1,n2,n3,n4,n5", "n1,n01,n001,n2,n02", "n5,n1-2,n0,n", "n,n,m", "n0,n1,n0,n0",
    "n1,n2,n1,n1,n1", "n0,n0,n1,n1,n2,n2", "x1,x01,x2,x02,x3", "n8,n9,n10,n11,n08,n09",
    "n98,n99,n100,n099,n0100", "n2147483647,n0,n1",
    # prefixes compare in natural order (strnatcmp), bytes as signed chars
    "a1b1,a10b1,a2b1,ab1,a01b1,a-1,a1,a001b1", "1_0,100_0,0_0", "n0a1,n00a1,n1a1,n01a1,na1",
    "x9y1,x10y1,x09y1,x010y1", "a\u00e91,a1,a", "a_1,a1,a-1,A1,a.1,a~1", "r2n1,r10n1,r1n1,r02n1",
]  # fmt: skip


def test_compress_edge_cases_agree_with_scontrol(scontrol: Scontrol) -> None:
    lists = [text.split(",") for text in COMPRESS_EDGES]
    assert [compress(h) for h in lists] == scontrol.hostlist(lists)
    assert [compress(h, sort=True) for h in lists] == scontrol.hostlist(lists, sort=True)


# ---- numbers at 2**64 - 2, 2**64 - 1 and 2**64 ------------------------------------------------

_NEAR_TOP = [2**64 - 3, 2**64 - 2, 2**64 - 1, 2**64]


def _near_top_expressions() -> list[str]:
    """Ranges, lists and host names of numbers at the 64-bit bound, one after the other as
    Slurm would join them, plain or zero-padded, in the last group or one before it."""
    exprs = []
    for low, high in itertools.product(_NEAR_TOP, repeat=2):
        exprs += [f"n[{low}-{high}]", f"n[{low},{high}]", f"n{low},n{high}", f"n[{low}],n{high}"]
        exprs += [f"n[0{low},{high}]", f"n[0{low},0{high}]", f"x[1-2]n[{low}-{high}]"]
    exprs += [f"n[{number}]" for number in _NEAR_TOP] + [f"n[{number}]x[1]" for number in _NEAR_TOP[1:3]]
    return exprs


def test_numbers_at_the_64_bit_bound_against_scontrol(scontrol: Scontrol) -> None:
    """Where scontrol crashes (or loops) tfslurm refuses the range reaching 2**64 - 1;
    where it saturates a number past 2**64 - 1 tfslurm refuses (DIFFERENT); elsewhere
    both give the same answer, so with 22.05 tfslurm refuses only what crashes it."""
    crashed = 0
    for expr in _near_top_expressions():
        answer = scontrol.hostnames_or_crash(expr)
        if answer == CRASHED:
            crashed += 1
            with pytest.raises(HostlistError, match="Slurm's 64-bit limit"):
                expand(expr)
        elif "18446744073709551616" in expr:
            assert _ours(expr) is None, expr
        elif slurm_release(scontrol) < (23, 2):
            assert _ours(expr) == answer, expr
    assert crashed


def test_compress_at_the_64_bit_bound_against_scontrol(scontrol: Scontrol) -> None:
    """scontrol prints n[...614-...615] for these hosts and crashes reading it back;
    tfslurm refuses to write it, and writes what scontrol writes for the others."""
    lists = [[f"n{a}", f"n{b}"] for a, b in itertools.product(_NEAR_TOP[:3], repeat=2)]
    lists += [[f"n0{a}", f"n{b}"] for a, b in itertools.product(_NEAR_TOP[:3], repeat=2)]
    for sort in (False, True):
        for hosts, answer in zip(lists, scontrol.hostlist(lists, sort=sort), strict=True):
            try:
                ours = compress(hosts, sort=sort)
            except HostlistError as error:
                assert grammar.AT_64_BITS in str(error)
                assert answer is not None and scontrol.hostnames_or_crash(answer) == CRASHED, hosts
            else:
                assert ours == answer, hosts


# ---- generated expressions ----------------------------------------------------------------

_text = st.text(st.sampled_from("abn-_.x0123456789"), max_size=3)


@st.composite
def slurm_22_05_expressions(draw) -> str:
    """Expressions 22.05 reads as newer Slurm does: no suffix after the last group."""
    items = []
    for _ in range(draw(st.integers(1, 4))):
        text = draw(_text)
        groups = draw(st.integers(0, 3))
        for g in range(groups):
            parts = []
            for _ in range(draw(st.integers(1, 3))):
                kind = draw(st.sampled_from(["n", "range", "range", "reversed", "junk", "big"]))
                low = draw(st.integers(0, 1200))
                width = draw(st.integers(0, 5))
                if kind == "n":
                    parts.append(f"{low:0{width}d}")
                elif kind == "range":
                    high = draw(st.integers(low, low + 12))
                    parts.append(f"{low:0{width}d}-{high:0{draw(st.integers(0, 5))}d}")
                elif kind == "reversed":
                    parts.append(f"{low + draw(st.integers(1, 9))}-{low}")
                elif kind == "big":
                    parts.append(f"{low}-{low + draw(st.sampled_from([65536, 10**6]))}")
                else:
                    parts.append(draw(st.sampled_from(["", "a", "-1", "1-2-3", "x1", "1--2"])))
            text += "[" + ",".join(parts) + "]"
            if g < groups - 1:
                text += draw(_text)
        items.append(text)
    return draw(st.sampled_from([",", ",", ",,", " "])).join(items)


@_examples(80)
@given(st.lists(slurm_22_05_expressions(), min_size=1, max_size=60))
def test_generated_expressions_agree_with_scontrol(scontrol: Scontrol, exprs: list[str]) -> None:
    answers = scontrol.hostnames(exprs)
    for expr, answer in zip(exprs, answers, strict=True):
        assert _ours(expr) == (None if answer is PARTIAL else answer), expr


def _suffix_after_last_group(expr: str) -> bool:
    return any("]" in item and not item.endswith("]") for item in re.split(r"[,\s]+(?![^\[]*\])", expr))


def _lenient_in_22_05(expr: str) -> bool:
    """Inputs Slurm accepts by accident and tfslurm rejects on purpose (see DIFFERENT).

    Every version reads garbage between a range's first number and its '-' as nothing
    (``n[0n-0]`` is ``n00``); 22.05 more (see DIFFERENT)."""
    depth = 0
    for char in expr:
        if char == "[":
            if depth:
                return True
            depth = 1
        elif char == "]":
            if not depth:
                return True
            depth = 0
    if depth:
        return True
    bodies = re.findall(r"\[([^\[\]]*)\]", expr)
    return any(re.search(r"[\s+]|\d-(,|$)|\d[^\d,-]+-", body) for body in bodies)


@_examples(80)
@given(
    st.lists(
        st.text(st.sampled_from("n01-9[],x"), min_size=1, max_size=14),
        min_size=1,
        max_size=80,
    )
)
def test_random_text_agrees_with_scontrol(scontrol: Scontrol, texts: list[str]) -> None:
    answers = scontrol.hostnames(texts)
    for text, answer in zip(texts, answers, strict=True):
        ours = _ours(text)
        if answer is PARTIAL:
            assert ours is None, text
        elif ours is not None and not _suffix_after_last_group(text):
            assert ours == answer, text
        elif ours is None and not _lenient_in_22_05(text):
            assert answer is None, text


# ---- generated host lists -------------------------------------------------------------------


@st.composite
def host_lists(draw) -> list[str]:
    hosts: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        prefix = draw(
            st.sampled_from(["n", "node", "a1b", "", "r1-n", "x-", "n0", "gpu-", "r10n", "r2n"])
            | st.text(st.sampled_from("ab0129-_.A"), max_size=4)  # natural prefix order
        )
        start = draw(st.sampled_from([0, 1, 7, 8, 9, 95, 98, 99, 100, 998, 1000]) | st.integers(0, 10**6))
        width = draw(st.integers(0, 6))
        length = draw(st.integers(1, 8))
        hosts += [f"{prefix}{n:0{width}d}" for n in range(start, start + length)]
        if draw(st.integers(0, 4)) == 0:
            hosts.append(draw(st.sampled_from(["n", "login", "n1-ib", "a1b"])))
    if draw(st.booleans()):
        hosts += draw(st.lists(st.sampled_from(hosts), max_size=10))
    if draw(st.booleans()):
        hosts = draw(st.permutations(hosts))
    return hosts


@_examples(60)
@given(st.lists(host_lists(), min_size=1, max_size=60))
def test_generated_host_lists_compress_like_scontrol(scontrol: Scontrol, lists: list[list[str]]) -> None:
    assert [compress(h) for h in lists] == scontrol.hostlist(lists)
    # 22.05 loses hosts sorting numbers 2**31 or more apart (a documented difference):
    # a digit-only prefix such as "22" with zero padding makes the host "2200000000"
    lists = [h for h in lists if all(_tail_value(host) < 2**31 for host in h)]
    assert [compress(h, sort=True) for h in lists] == scontrol.hostlist(lists, sort=True)


def _tail_value(host: str) -> int:
    digits = host[len(host.rstrip("0123456789")) :]
    return int(digits) if digits else 0


@_examples(40)
@given(st.lists(slurm_22_05_expressions(), min_size=1, max_size=60))
def test_compress_of_expanded_expressions_like_scontrol(scontrol: Scontrol, exprs: list[str]) -> None:
    """scontrol show hostlist EXPR parses, then compresses: expand + compress must agree.

    Except where a digit (or a group) precedes '[': Slurm keeps the expression's own split there
    (``0[0,0]`` stays ``0[0,0]``) while host names are split at their numeric tail
    (``compress(["00", "00"])`` is ``[00,00]``, as ``scontrol show hostlist 00,00``).
    """
    valid = [e for e in exprs if _ours(e) and " " not in e and not re.search(r"[0-9\]]\[", e)]
    for sort in (False, True):
        answers = scontrol._ask("hostlistsorted" if sort else "hostlist", valid)
        assert [compress(expand(e), sort=sort) for e in valid] == [
            None if a is None else "\n".join(a) for a in answers
        ]


def test_large_shuffled_lists_like_scontrol(scontrol: Scontrol) -> None:
    """A few big lists (thousands of hosts, duplicates, mixed widths) in one go."""
    rng = random.Random(20240607)
    lists = []
    for size in (2000, 5000, 20000):
        hosts = [f"n{rng.randrange(0, 3000):0{rng.choice([0, 0, 3, 4])}d}" for _ in range(size)]
        lists += [hosts, sorted(hosts), [f"tf-gpu{n:03d}" for n in range(size)]]
    assert [compress(h) for h in lists] == scontrol.hostlist(lists)
    assert [compress(h, sort=True) for h in lists] == scontrol.hostlist(lists, sort=True)
