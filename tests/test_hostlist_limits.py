"""Unit and property tests of tfslurm.hostlist at its limits (no Slurm needed): the most
hosts, memory near the floor, numbers at the 64-bit limit, runs of one-group items, and
short expressions read without regular expressions agreeing with the long reading.
Their timing is in bench/limits.py.
"""

from __future__ import annotations

import itertools
import random
import re
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from importcost import added_by
from tfslurm import hostlist
from tfslurm.hostlist import (
    HostlistError,
    compress,
    compression,
    count,
    expand,
    grammar,
    groups,
    index_of,
    natural,
    nth,
)

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

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
