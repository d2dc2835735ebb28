"""Writing hostlists: the text Slurm writes for a list of hosts, and for a list of counts.

:func:`compress` takes host names (any iterable of ``str``, not one string) and returns the
hostlist ``scontrol show hostlist`` prints for them, Slurm's ``hostlist_ranged_string``
after ``hostlist_push_host`` of each host: order and duplicates are kept, and a host joins
the range before it only when it has the same prefix and the next number in a compatible
width (``["n2", "n1", "n3"]`` gives ``"n[2,1,3]"``, ``["n09", "n10"]`` ``"n[09-10]"``).
With ``sort=True`` it returns what ``scontrol show hostlistsorted`` prints: the hosts in
Slurm's ``hostlist_sort`` order (prefixes in natural, strnatcmp, order, then numbers),
overlapping ranges split and neighbouring ones joined as ``hostlist_coalesce`` and
``hostlist_collapse`` do, duplicates still kept. :func:`compress_counts` takes
non-negative integers and returns Slurm's task-count text (``SLURM_TASKS_PER_NODE``):
``[2, 2, 2, 1]`` gives ``"2(x3),1"``.

The result always reads back, through :func:`tfslurm.hostlist.expand`, as the same
hosts, which is where it parts from Slurm 22.05: a range of more than ``MAX_RANGE_HOSTS``
hosts is written in pieces of at most that many (22.05 writes ``n[0-69999]``, which its
own parser refuses). Bad input is a :class:`HostlistError` naming the host: an empty
name, one with a blank, ``,``, ``[`` or ``]`` (the text would not read back), one ending
in a number past 2**64 - 1, and a range of several hosts ending at 2**64 - 1 (Slurm
crashes reading it).

Two implementations of ``compress`` are kept on purpose, and the tests and the fuzz
target check that they give the same text. Host by host (:func:`compress_by_host`) is
Slurm's code transcribed step by step: the reference, and the one path that takes every
valid input. Column-wise, the same text is computed with whole-list passes over the
hosts' prefixes, numbers and widths instead of Python code per host, for the lists whose
numbers fit in 64 bits and 64 digits: ``bench/hostlist.py``'s sorted rows rest on it
(100k shuffled hosts sorted 3-5x faster than host by host on a 2-core VM, unsorted
1.1-2x). Merging the two would give up either the literal transcription or the speed.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, TypeAlias

from tfslurm.errors import HostlistError, clip
from tfslurm.hostlist.grammar import (
    AT_64_BITS,
    MAX_RANGE_HOSTS,
    OVER_64_BITS,
    TOP,
    ULONG_MAX,
    plan,
    show,
    top_of_run,
)
from tfslurm.hostlist.natural import natural_keys, natural_order, natural_sorted, prefix_ranks, put_at
from tfslurm.numbers import is_int_in

# A run of hosts as the compressors keep it: [prefix, low, high, width], changed in place.
_Run: TypeAlias = list[Any]


# Longest numeric tail (zero padding included) the column-wise compress reads with int();
# longer ones take the host-by-host path (Python refuses int() of 4,300+ digits).
_COLUMN_DIGITS = 64


# ---- compress: Slurm's hostlist_push_host + hostlist_ranged_string (+ hostlist_sort) ----
#
# A compressed list is a sequence of runs. A run is either a single host without a
# numeric tail, or prefix + the numbers lo..hi written with `width` digits (zero-padded).
# Runs are mutable lists [prefix, lo, hi, width], lo = -1 marking a single host, because
# Slurm's width reconciliation (``_width_equiv``) changes widths as it compares.

_PREFIX, _LO, _HI, _WIDTH = 0, 1, 2, 3
_PREFIX_OF = operator.itemgetter(_PREFIX)
_LOW = operator.itemgetter(_LO)
_HIGH = operator.itemgetter(_HI)
# Separators, brackets, and the other blanks Slurm's prefix comparison would skip.
_BAD_HOST_CHARS = ",[] \t\n\v\f\r\x00"


def _digits_of(number: int) -> int:
    return len(str(number))


def _width_equiv(a: _Run, b: _Run) -> bool:
    """Slurm's ``_width_equiv``: may a's and b's numbers share a width? Adopts it if so.

    Two widths are compatible when writing one run's low number with the other's width
    does not change its zero padding; that run then takes the other's width.
    """
    wa, wb = a[_WIDTH], b[_WIDTH]
    if wa == wb:
        return True
    da, db = _digits_of(a[_LO]), _digits_of(b[_LO])
    a_same = max(wa - da, 0) == max(wb - da, 0)
    b_same = max(wb - db, 0) == max(wa - db, 0)
    if not a_same:
        if b_same:
            b[_WIDTH] = wa
            return True
        return False
    a[_WIDTH] = wb
    return True


def _compatible(a: _Run, b: _Run) -> bool:
    """What _width_equiv(a, b) answers, without adopting a width (it is asked of copies)."""
    return _width_equiv(list(a), list(b))


def _check_hosts(hosts: Iterable[str]) -> tuple[list[str], str]:
    """The hosts as a list, plus their newline-joined text; rejects unusable names."""
    if isinstance(hosts, str):
        raise HostlistError(
            f"compress() takes a list of host names, not the string {show(hosts, 60)}: "
            "use compress(expand(text))"
        )
    try:
        hosts = list(hosts)
    except TypeError:
        raise HostlistError(f"compress() takes a list of host names, not {type(hosts).__name__}") from None
    try:
        joined = "\n".join(hosts)
    except TypeError:
        bad = next((h for h in hosts if not isinstance(h, str)), None)
        raise HostlistError(f"bad host {clip(repr(bad))}: host names must be strings") from None
    if hosts and (
        any(c in joined for c in _BAD_HOST_CHARS if c != "\n")  # newlines: counted
        or joined.count("\n") != len(hosts) - 1
        or "" in hosts
    ):
        bad = next(h for h in hosts if not h or any(c in h for c in _BAD_HOST_CHARS))
        raise HostlistError(
            f"bad host name {show(bad)}: names must be non-empty, without blanks, ',', '[' or ']'"
        )
    return hosts, joined


def _runs(hosts: list[str]) -> list[_Run]:
    """Slurm's hostlist_push_host for each host: join onto the last run when consecutive."""
    runs: list[_Run] = []
    append = runs.append
    last: _Run = ["", -2, -2, 0]  # sentinel: hi + 1 never equals a number
    last_unpadded = False  # last's width is at most its low number's digit count
    for host in hosts:
        prefix = host.rstrip("0123456789")
        cut = len(prefix)
        digits = host[cut:]
        significant = digits.lstrip("0") if len(digits) > 19 else digits
        if digits and (len(significant) > 20 or int(significant or "0") > ULONG_MAX):
            raise HostlistError(f"bad host name {show(host)}: {OVER_64_BITS}")
        if not digits:  # no numeric tail
            last = [host, -1, -1, 0]
            last_unpadded = False
            append(last)
            continue
        number = int(significant or "0")
        if (
            last[_HI] + 1 == number
            and last[_PREFIX] == prefix
            and last[_LO] >= 0
            and (
                last[_WIDTH] == len(digits)
                # two unpadded numbers are always compatible and change no width
                or (last_unpadded and digits[0] != "0")
                or _width_equiv(last, [prefix, number, number, len(digits)])
            )
        ):
            last[_HI] = number
            continue
        last = [prefix, number, number, len(digits)]
        last_unpadded = digits[0] != "0" or len(digits) == 1
        append(last)
    return runs


def _sort_key(run: _Run, ranks: dict[str, int]) -> tuple[Any, ...]:
    """hostrange_cmp as a key: prefix, single hosts first, then by width class and number.

    Slurm compares runs of one prefix by low number when their widths are compatible and
    by width otherwise. For runs whose low numbers differ by less than 2**31 that is the
    total order below: a run whose low number is shorter than its width (zero-padded)
    ranks by (width, padded first, number); an unpadded one by (its digit count, number).
    """
    rank = ranks[run[_PREFIX]]
    if run[_LO] < 0:
        return (rank, 0)
    digits = _digits_of(run[_LO])
    if digits < run[_WIDTH]:
        return (rank, 1, run[_WIDTH], 0, run[_LO])
    return (rank, 1, digits, 1, run[_LO])


def _coalesce(runs: list[_Run]) -> list[_Run]:
    """Slurm's hostlist_coalesce over sorted runs: split overlapping runs at the overlap.

    Slurm walks pairs right to left and restarts from the end after each split. Only the
    two split runs change, so every pair right of (right half, its right neighbour) was
    already checked and fails again: resuming at that pair (a stack instead of a
    restart) visits the same pairs in the same order, without Slurm's quadratic rescans.
    """
    highs = list(map(_HIGH, runs))
    if not any(map(operator.gt, highs, map(_LOW, runs[1:]))):
        return runs  # no run reaches past the start of the next: nothing overlaps
    left = runs
    right: list[_Run] = []  # processed runs, reversed: right[-1] is the leftmost
    if left:
        right.append(left.pop())
    while left:
        prev, nxt = left[-1], right[-1]
        if (
            prev[_HI] > nxt[_LO]
            and nxt[_LO] >= 0
            and prev[_LO] >= 0
            and prev[_PREFIX] == nxt[_PREFIX]
            and _width_equiv(prev, nxt)
        ):
            low, high = nxt[_LO], min(nxt[_HI], prev[_HI])
            if high < prev[_HI]:
                nxt[_HI] = prev[_HI]
            prev[_HI] = low
            nxt[_LO] = high
            width = prev[_WIDTH]
            for number in range(low, high + 1):
                if number > low:
                    left.append([prev[_PREFIX], number, number, width])
                if number < high:
                    left.append([prev[_PREFIX], number, number, width])
            if len(right) > 1:  # recheck the grown right half against its neighbour
                left.append(right.pop())
        else:
            right.append(left.pop())
    right.reverse()
    return right


def _collapse(runs: list[_Run]) -> list[_Run]:
    """Slurm's hostlist_collapse: join neighbouring consecutive runs, right to left."""
    if not runs:
        return runs
    out: list[_Run] = []
    current = runs[-1]
    for run in reversed(runs[:-1]):
        if (
            run[_HI] + 1 == current[_LO]
            and run[_LO] >= 0
            and run[_PREFIX] == current[_PREFIX]
            and (run[_WIDTH] == current[_WIDTH] or _width_equiv(run, current))
        ):
            run[_HI] = current[_HI]
        else:
            out.append(current)
        current = run
    out.append(current)
    out.reverse()
    return out


def _span_text(low: int, high: int, width: int) -> str:
    """``low-high`` for low < high, in ranges of at most MAX_RANGE_HOSTS hosts: Slurm 22.05
    writes n[0-69999], which its own parser (and expand) refuses."""
    if high - low < MAX_RANGE_HOSTS:
        return f"{low:0{width}d}-{high:0{width}d}"
    pieces = []
    for start in range(low, high + 1, MAX_RANGE_HOSTS):
        stop = min(start + MAX_RANGE_HOSTS - 1, high)
        pieces.append(f"{start:0{width}d}-{stop:0{width}d}" if stop > start else f"{start:0{width}d}")
    return ",".join(pieces)


def _ranged_string(runs: list[_Run]) -> str:
    """Slurm's hostlist_ranged_string: one bracket per stretch of same-prefix numeric runs."""
    parts: list[str] = []
    i = 0
    total = len(runs)
    while i < total:
        run = runs[i]
        prefix, low, high, width = run
        if low < 0:
            parts.append(prefix)
            i += 1
            continue
        nxt = runs[i + 1] if i + 1 < total else None
        if high == low and (nxt is None or nxt[_LO] < 0 or nxt[_PREFIX] != prefix):
            parts.append(f"{prefix}{low:0{width}d}")
            i += 1
            continue
        numbers = []
        while True:
            if high > low:
                numbers.append(_span_text(low, high, width))
            else:
                numbers.append(f"{low:0{width}d}")
            i += 1
            if i >= total:
                break
            run = runs[i]
            if run[_LO] < 0 or run[_PREFIX] != prefix:
                break
            _, low, high, width = run
        parts.append(f"{prefix}[{','.join(numbers)}]")
    return ",".join(parts)


# ---- compress, column-wise --------------------------------------------------------------
#
# The same algorithm over columns (prefixes, lows, highs, widths, unpadded flags) built
# with C-level map()/sort passes, used whenever every host has a numeric tail of at most
# 20 digits. It relies on two facts about Slurm's width reconciliation that the
# host-by-host code above does step by step:
#
# * a run's width never changes while hosts are pushed, and whether two runs' widths are
#   compatible depends only on the texts of their low numbers: both written without
#   leading zeros ("unpadded"), or equally wide, or a padded left run followed by an
#   unpadded run at least as wide;
# * hostrange_cmp orders runs of one prefix by (width of the low number's text, padded
#   first, low number), so four stable sorts reproduce it.
#
# tests/test_hostlist.py checks both paths against each other, and the differential
# tests check them against scontrol.


class _Columns:
    """Runs as columns. ``widths`` and ``unpadded`` are None when no number is zero-padded:
    widths then never change how a number is written or what joins."""

    __slots__ = ("highs", "lows", "one_prefix", "prefixes", "texts", "unpadded", "widths")

    def __init__(
        self,
        prefixes: list[str],
        lows: list[int],
        highs: list[int],  # the very same list as lows while every run is a single host
        widths: list[int] | None,
        unpadded: list[bool] | None,
        one_prefix: bool,  # every run has prefixes[0]
        texts: list[str] | None = None,  # each low number as its host wrote it, if known
    ) -> None:
        self.prefixes = prefixes
        self.lows = lows
        self.highs = highs
        self.widths = widths
        self.unpadded = unpadded
        self.one_prefix = one_prefix
        self.texts = texts

    def take(self, rows: Iterable[int]) -> _Columns:
        """The columns of these rows (in this order)."""
        rows = list(rows)
        lows = list(map(self.lows.__getitem__, rows))
        return _Columns(
            [self.prefixes[0]] * len(rows) if self.one_prefix else list(map(self.prefixes.__getitem__, rows)),
            lows,
            lows if self.highs is self.lows else list(map(self.highs.__getitem__, rows)),
            None if self.widths is None else list(map(self.widths.__getitem__, rows)),
            None if self.unpadded is None else list(map(self.unpadded.__getitem__, rows)),
            self.one_prefix,
            None if self.texts is None else list(map(self.texts.__getitem__, rows)),
        )


def _common_prefix_tails(hosts: list[str], joined: str) -> tuple[str, list[str]] | None:
    """(P, numeric tails) when every host is P followed by digits, found with a few
    whole-text passes instead of one call per host."""
    prefix = hosts[0].rstrip("0123456789")
    if not joined.startswith(prefix) or joined.count("\n" + prefix) != len(hosts) - 1:
        return None
    body = joined[len(prefix) :].replace("\n" + prefix, "\n") if prefix else joined
    if not (body.isascii() and body.replace("\n", "").isdigit()):
        return None
    tails = body.split("\n")
    return None if "" in tails else (prefix, tails)


_HostColumns: TypeAlias = "tuple[_Columns | None, list[int], list[int] | None, list[int], list[str]]"


def host_columns(hosts: list[str], joined: str) -> _HostColumns | None:
    """One row per host that ends in a number (every run a single host), those hosts'
    digit counts, where they stand in ``hosts`` when some host has no numeric tail (None
    when every host has one), where those names stand, and the hosts with a number. The
    columns are None when no host has a number. None when a tail has more than
    _COLUMN_DIGITS digits or a number over 64 bits."""
    count_hosts = len(hosts)
    if not count_hosts:
        return None
    positions: list[int] | None = None
    name_at: list[int] = []
    common = _common_prefix_tails(hosts, joined)
    if common is not None:
        prefixes = [common[0]] * count_hosts
        tails = common[1]
        widths = list(map(len, tails))
        if max(widths) > _COLUMN_DIGITS:
            return None
    else:
        prefixes = list(map(str.rstrip, hosts, itertools.repeat("0123456789")))
        cuts = list(map(len, prefixes))
        widths = list(map(operator.sub, map(len, hosts), cuts))
        if not all(widths):  # names without a number: the rows are the other hosts
            positions = list(itertools.compress(itertools.count(), widths))
            name_at = list(itertools.compress(itertools.count(), map(operator.not_, widths)))
            if not positions:
                return None, [], positions, name_at, []
            hosts = list(map(hosts.__getitem__, positions))
            prefixes = list(map(prefixes.__getitem__, positions))
            cuts = list(map(cuts.__getitem__, positions))
            widths = list(map(widths.__getitem__, positions))
            count_hosts = len(hosts)
        if max(widths) > _COLUMN_DIGITS:
            return None
        tails = list(map(operator.getitem, hosts, map(slice, cuts, itertools.repeat(None))))
    numbers = list(map(int, tails))
    if max(widths) >= 20 and max(numbers) > ULONG_MAX:
        return None  # the host-by-host path names the host in its error
    unpadded: list[bool] | None = None
    if min(tails)[0] == "0":  # some tail starts with 0 (the smallest text does, then)
        # written without leading zeros: the first digit is not 0, or the number is 0
        unpadded = list(
            map(
                operator.or_,
                map(operator.ne, map(operator.itemgetter(0), tails), itertools.repeat("0")),
                map(operator.eq, widths, itertools.repeat(1)),
            )
        )
        if all(unpadded):  # only the number 0: nothing is zero-padded
            unpadded = None
    columns = _Columns(
        prefixes,
        numbers,
        numbers,
        widths if unpadded is not None else None,
        unpadded,
        common is not None or (positions is not None and prefixes.count(prefixes[0]) == count_hosts),
        tails,
    )
    return columns, widths, positions, name_at, hosts


class _Pushed:
    """Slurm's hostlist_push_host over a whole list, column-wise: the runs of the hosts
    that end in a number, and the names that do not (each a run of its own that nothing
    joins, overlaps or brackets with)."""

    __slots__ = ("columns", "first_at", "last_at", "name_at", "names", "numbered", "starts")

    def __init__(
        self,
        columns: _Columns | None,  # None: no host ends in a number
        names: list[str],
        name_at: list[int],  # where each name stands in the list
        numbered: list[str],  # the hosts that end in a number, in order
        starts: list[int] | None,  # the numbered host each row starts at; None: one row each
        first_at: list[int],  # where each row's first host stands; with last_at, [] without names
        last_at: list[int],
    ) -> None:
        self.columns = columns
        self.names = names
        self.name_at = name_at
        self.numbered = numbered
        self.starts = starts
        self.first_at = first_at
        self.last_at = last_at


def push_hosts(hosts: list[str], found: _HostColumns | None) -> _Pushed | None:
    """Push the hosts as runs (``found``: what host_columns gave for them), or None when
    a tail has more than _COLUMN_DIGITS digits or a number over 64 bits (the host-by-host
    path takes those)."""
    if found is None:
        return None
    columns, widths, positions, name_at, numbered = found
    names = list(map(hosts.__getitem__, name_at))
    if columns is None:
        return _Pushed(None, names, name_at, [], None, [], [])
    prefixes, numbers, unpadded = columns.prefixes, columns.lows, columns.unpadded
    count_hosts = len(numbers)
    # A host joins the run of the host before it when it has the same prefix, the next
    # number, and the same width or both numbers unpadded (then its text is exactly how
    # the run writes that number), and no name stands between them.
    joins = map(operator.eq, map(operator.add, numbers, itertools.repeat(1)), numbers[1:])
    if not columns.one_prefix:
        joins = map(operator.and_, joins, map(operator.eq, prefixes, prefixes[1:]))
    if unpadded is not None:
        joins = map(
            operator.and_,
            joins,
            map(operator.or_,
                map(operator.eq, widths, widths[1:]),
                map(operator.and_, unpadded, unpadded[1:])),
        )  # fmt: skip
    if positions is not None:
        joins = map(
            operator.and_,
            joins,
            map(operator.eq, map(operator.add, positions, itertools.repeat(1)), positions[1:]),
        )
    starts = list(itertools.compress(range(1, count_hosts), map(operator.not_, joins)))
    rows: list[int] | None = None  # each row's first host; None: one row per host
    if len(starts) < count_hosts - 1:  # some host joined another
        rows = [0, *starts]
        ends = [*map(operator.sub, starts, itertools.repeat(1)), count_hosts - 1]
        merged = columns.take(rows)
        merged.highs = list(map(numbers.__getitem__, ends))
        columns = merged
    first_at = last_at = positions or []
    if positions is not None and rows is not None:
        first_at = list(map(positions.__getitem__, rows))
        last_at = list(map(positions.__getitem__, ends))
    return _Pushed(columns, names, name_at, numbered, rows, first_at, last_at)


def columns_order(columns: _Columns, ranks: dict[str, int] | None = None) -> list[int]:
    """The rows in hostrange_cmp order (stable: equal rows keep their order); ``ranks``:
    the prefixes' natural order, if known."""
    order = list(range(len(columns.lows)))
    order.sort(key=columns.lows.__getitem__)
    widths, unpadded = columns.widths, columns.unpadded
    if (
        unpadded is not None
        and widths is not None
        and not (min(widths) == max(widths) and min(unpadded) == max(unpadded))  # else one key
    ):
        order.sort(key=unpadded.__getitem__)
        order.sort(key=widths.__getitem__)
    if not columns.one_prefix:
        ranks = ranks or prefix_ranks(columns.prefixes)
        order.sort(key=list(map(ranks.__getitem__, columns.prefixes)).__getitem__)
    return order


def row_sort_keys(pushed: _Pushed) -> tuple[list[str], list[str]] | None:
    """hostrange_cmp as one string per row, and Slurm's order of the names among them as
    one string per name (natural.natural_keys with ``tails``: a row is keyed by its
    first host); None if a name or prefix has a number of 4,096 digits or more. With
    prefixes mostly distinct, one sort by these keys replaces ranking the prefixes and
    four sorts by columns."""
    names = pushed.names
    firsts = pushed.numbered  # each row's first host
    if pushed.starts is not None:
        firsts = list(map(firsts.__getitem__, pushed.starts))
    keys = natural_keys(names + firsts if names else firsts, tails=True)
    if keys is None:
        return None
    return (keys[len(names) :] if names else keys), keys[: len(names)]


def _many_prefixes(columns: _Columns) -> bool:
    """Whether the rows have so many prefixes that one key per row sorts them faster
    (judged by the first 4,096 rows: either way sorts right)."""
    sample = columns.prefixes[:4096]
    return not columns.one_prefix and len(set(sample)) * 4 > len(sample)


def _sorted_one_prefix(columns: _Columns) -> str | None:
    """Sorted compress of single hosts of one prefix whose numbers are of one width class
    (none zero-padded, or all written with one width); None for other columns.

    Why it is the same as sorting and collapsing the pushed runs: where every two runs'
    widths are compatible, hostlist_coalesce leaves the prefix's numbers in order, each
    as often as it was given, and hostlist_collapse cuts that sequence wherever the next
    number is not one more (see _coalesce_by_group), however the hosts were pushed. So
    the numbers are sorted (a C sort of ints), cut and written.
    """
    widths, unpadded = columns.widths, columns.unpadded
    if not columns.one_prefix or columns.highs is not columns.lows:
        return None
    if unpadded is None:  # no number zero-padded: each is written as str() writes it
        width = 0
    elif widths is not None and min(widths) == max(widths):
        width = widths[0]  # all written this wide (the unpadded ones have as many digits)
    else:
        return None
    numbers = sorted(columns.lows)
    total = len(numbers)
    follows = map(operator.eq, map(operator.add, numbers, itertools.repeat(1)), numbers[1:])
    starts = [0, *itertools.compress(range(1, total), map(operator.not_, follows))]
    ends = [*map(operator.sub, starts[1:], itertools.repeat(1)), total - 1]
    spec = f"0{width}d"
    parts = list(map(format, map(numbers.__getitem__, starts), itertools.repeat(spec)))
    spans = list(itertools.compress(range(len(starts)), map(operator.lt, starts, ends)))
    for index in spans:  # runs of several hosts: low-high
        parts[index] = _span_text(numbers[starts[index]], numbers[ends[index]], width)
    prefix = columns.prefixes[0]
    if len(parts) == 1 and not spans:
        return prefix + parts[0]
    return f"{prefix}[{','.join(parts)}]"


def _columns_sort(
    columns: _Columns, ranks: dict[str, int] | None = None, row_keys: list[str] | None = None
) -> _Columns:
    """The rows in hostrange_cmp order: by ``row_keys`` if given (row_sort_keys), else by
    columns (with the prefixes' ``ranks`` if known)."""
    if row_keys is not None:
        return columns.take(sorted(range(len(row_keys)), key=row_keys.__getitem__))
    if columns.one_prefix and columns.highs is columns.lows:
        if columns.unpadded is None:
            lows = sorted(columns.lows)  # single hosts with one order key: sort the numbers
            return _Columns(columns.prefixes, lows, lows, None, None, True)
        widths, unpadded = columns.widths, columns.unpadded
        if widths is not None and min(widths) == max(widths) and not any(unpadded):
            # single hosts all zero-padded to one width: the number is the only key, and
            # the texts (one length) sort as the numbers do
            lows = sorted(columns.lows)
            texts = None if columns.texts is None else sorted(columns.texts)
            return _Columns(columns.prefixes, lows, lows, widths, unpadded, True, texts)
    return columns.take(columns_order(columns, ranks))


def _columns_collapse(columns: _Columns) -> _Columns | None:
    """hostlist_coalesce + hostlist_collapse; None if runs overlap (the slow path splits them)."""
    prefixes, lows, highs = columns.prefixes, columns.lows, columns.highs
    if columns.one_prefix:
        overlapping = map(operator.gt, highs, lows[1:])
    else:
        same = list(map(operator.eq, prefixes, prefixes[1:]))
        if not any(same):  # no two neighbours share a prefix: nothing overlaps or joins
            return columns
        overlapping = map(operator.and_, same, map(operator.gt, highs, lows[1:]))
    # an overlap of incompatible widths (n719 before a zero-padded n0112) is left alone
    # by hostlist_coalesce, as by everything below
    widths = columns.widths
    for row in itertools.compress(itertools.count(), overlapping):
        if widths is None or _compatible(
            ["", lows[row], highs[row], widths[row]], ["", lows[row + 1], highs[row + 1], widths[row + 1]]
        ):
            return None
    if columns.one_prefix:
        joins = map(operator.eq, map(operator.add, highs, itertools.repeat(1)), lows[1:])
    else:
        joins = map(
            operator.and_,
            same,
            map(operator.eq, map(operator.add, highs, itertools.repeat(1)), lows[1:]),
        )
    widths, unpadded = columns.widths, columns.unpadded
    if widths is not None and unpadded is not None:
        compatible = map(
            operator.or_,
            map(operator.or_, map(operator.and_, unpadded, unpadded[1:]), map(operator.eq, widths, widths[1:])),
            map(operator.and_,
                map(operator.and_, map(operator.not_, unpadded), unpadded[1:]),
                map(operator.ge, widths[1:], widths)),
        )  # fmt: skip
        joins = map(operator.and_, joins, compatible)
    starts = list(itertools.compress(range(1, len(lows)), map(operator.not_, joins)))
    if len(starts) == len(lows) - 1:
        return columns
    starts.insert(0, 0)
    ends = [*map(operator.sub, starts[1:], itertools.repeat(1)), len(lows) - 1]
    merged = columns.take(starts)
    merged.highs = list(map(highs.__getitem__, ends))
    return merged


def _columns_string(columns: _Columns) -> str:
    return ",".join(_columns_parts(columns)[1])


def _columns_parts(columns: _Columns, breaks: list[bool] | None = None) -> tuple[list[int], list[str]]:
    """The text of each stretch of neighbouring rows with one prefix (one bracket), and
    the row each starts at. ``breaks``: for each row but the first, whether it starts a
    stretch even when its prefix is the row before's (a name stands between them)."""
    prefixes, lows, highs, widths = (
        columns.prefixes,
        columns.lows,
        columns.highs,
        columns.widths,
    )
    total = len(lows)
    if columns.texts is not None:  # the low numbers as the hosts wrote them
        numbers = list(columns.texts)
    elif widths is None:
        numbers = list(map(str, lows))
    else:
        numbers = list(map(format, lows, map("0{}d".format, widths)))
    # runs of several hosts: low-high, the high number written as wide as the low
    spans = list(itertools.compress(range(total), map(operator.lt, lows, highs)))
    if spans:
        span_highs = list(map(highs.__getitem__, spans))
        if widths is None:
            high_texts = list(map(str, span_highs))
        else:
            high_texts = list(map(format, span_highs, map("0{}d".format, map(widths.__getitem__, spans))))
        dashed = map(operator.add, map(numbers.__getitem__, spans), itertools.repeat("-"))
        put_at(numbers, spans, map(operator.add, dashed, high_texts))
        lengths = map(operator.sub, span_highs, map(lows.__getitem__, spans))
        for row in itertools.compress(spans, map(operator.le, itertools.repeat(MAX_RANGE_HOSTS), lengths)):
            numbers[row] = _span_text(lows[row], highs[row], 0 if widths is None else widths[row])  # split up
    changes: Iterable[bool] | None = None if columns.one_prefix else map(operator.ne, prefixes, prefixes[1:])
    if breaks is not None:
        changes = breaks if changes is None else map(operator.or_, changes, breaks)
    bounds = [0, total] if changes is None else [0, *itertools.compress(range(1, total), changes), total]
    starts = bounds[:-1]
    heads = list(map(prefixes.__getitem__, starts))
    parts = list(map(operator.add, heads, map(numbers.__getitem__, starts)))  # one host each
    # a stretch of several rows, or one run of several hosts, is written in brackets
    several = list(map(operator.ne, map(operator.sub, bounds[1:], starts), itertools.repeat(1)))
    for index in itertools.compress(range(len(starts)), several):
        parts[index] = f"{heads[index]}[{','.join(numbers[bounds[index] : bounds[index + 1]])}]"
    one_run = map(operator.lt, map(lows.__getitem__, starts), map(highs.__getitem__, starts))
    at = list(
        itertools.compress(range(len(starts)), map(operator.and_, map(operator.not_, several), one_run))
    )
    opened = map(operator.add, map(heads.__getitem__, at), itertools.repeat("["))
    inside = map(operator.add, map(numbers.__getitem__, map(starts.__getitem__, at)), itertools.repeat("]"))
    put_at(parts, at, map(operator.add, opened, inside))
    return starts, parts


def _columns_to_runs(columns: _Columns) -> list[_Run]:
    widths = columns.widths
    if widths is None:
        widths = list(map(len, map(str, columns.lows)))
    return [list(row) for row in zip(columns.prefixes, columns.lows, columns.highs, widths, strict=False)]


def compress_by_host(hosts: list[str], sort: bool, fast: bool = False) -> str:
    """compress() host by host, following Slurm's code step by step (the reference);
    ``fast``: overlapping runs of one width class are merged as numbers, and hosts are
    sorted column-wise where the literal split loses some (the same text, tested)."""
    runs = _runs(hosts)
    if sort and len(runs) > 1:
        ranks = prefix_ranks(run[_PREFIX] for run in runs)
        runs.sort(key=lambda run: _sort_key(run, ranks))
        return _coalesced_string(runs, hosts, fast)
    return _ranged_string(runs)


def _uniform_width(runs: list[_Run]) -> int | None:
    """The width to write these numeric runs' numbers with when any two of them are
    compatible and writing them with it changes no number's text: all unpadded (0), or
    all of one width that none outgrows. None otherwise."""
    if all(run[_WIDTH] <= _digits_of(run[_LO]) for run in runs):
        return 0
    width: int = runs[0][_WIDTH]
    if all(run[_WIDTH] == width and _digits_of(run[_HI]) <= width for run in runs):
        return width
    return None


def _coalesce_by_group(runs: list[_Run]) -> list[_Run] | None:
    """hostlist_coalesce + collapse of sorted runs, one prefix at a time; None where
    overlapping runs of a prefix do not share a width class (left to the literal code).

    Why it is the same: coalesce only splits overlapping runs of one prefix, and repeats
    until no neighbours overlap, so where every pair is width-compatible the prefix's
    numbers come out in order, each as often as it was given; collapse then joins
    neighbours whose numbers follow each other, which cuts that sorted sequence wherever
    the next number is not one more (a repeated number starts a new run). Building that
    from the sorted numbers costs a sort instead of Slurm's run-by-run splitting.
    """
    prefixes = list(map(_PREFIX_OF, runs))
    lows = list(map(_LOW, runs))
    overlaps = list(
        itertools.compress(
            range(len(runs) - 1),
            map(
                operator.and_,
                map(operator.eq, prefixes, prefixes[1:]),
                map(operator.gt, map(_HIGH, runs), lows[1:]),
            ),
        )
    )
    # what hostlist_coalesce splits: numeric neighbours of compatible widths (it leaves an
    # overlap of incompatible ones, e.g. n719 before a zero-padded n0112, as it is)
    overlaps = [
        i for i in overlaps if lows[i] >= 0 and lows[i + 1] >= 0 and _compatible(runs[i], runs[i + 1])
    ]
    if not overlaps:
        return _collapse([list(run) for run in runs])
    # the prefix groups with an overlap; the stretches between them only collapse
    groups: list[tuple[int, int]] = []
    for i in overlaps:
        if groups and i < groups[-1][1]:
            continue
        start, stop = i, i + 1
        while start > 0 and prefixes[start - 1] == prefixes[i]:
            start -= 1
        while stop < len(runs) and prefixes[stop] == prefixes[i]:
            stop += 1
        groups.append((start, stop))
    out: list[_Run] = []
    done = 0
    for start, stop in groups:
        out += _collapse([list(run) for run in runs[done:start]])
        done = stop
        group = runs[start:stop]
        numeric = [run for run in group if run[_LO] >= 0]  # sorted after the prefix's others
        width = _uniform_width(numeric)
        if width is None:
            return None
        out += [list(run) for run in group[: len(group) - len(numeric)]]
        numbers = sorted(
            itertools.chain.from_iterable(
                map(range, map(_LOW, numeric), map(operator.add, map(_HIGH, numeric), itertools.repeat(1)))
            )
        )
        cuts = list(
            itertools.compress(
                range(1, len(numbers)),
                map(operator.ne, map(operator.add, numbers, itertools.repeat(1)), numbers[1:]),
            )
        )
        prefix = numeric[0][_PREFIX]
        out += [
            [prefix, numbers[first], numbers[last - 1], width]
            for first, last in zip([0, *cuts], [*cuts, len(numbers)], strict=True)
        ]
    return out + _collapse([list(run) for run in runs[done:]])


def _run_hosts(runs: list[_Run]) -> Iterator[str]:
    """The hosts these runs write (what expand gives back for _ranged_string(runs))."""
    for prefix, low, high, width in runs:
        if low < 0:
            yield prefix
        else:
            numbers = map(format, range(low, high + 1), itertools.repeat(f"0{width}d"))
            yield from map(operator.add, itertools.repeat(prefix), numbers)


def _coalesced_string(runs: list[_Run], hosts: list[str], fast: bool = False) -> str:
    """Slurm's hostlist_coalesce + collapse of sorted, overlapping runs, kept only where it
    keeps the hosts. Where runs of different widths overlap, Slurm's split loses hosts
    (22.05: ``n9 n10 n00 n9 n10`` gives ``n[9,9-10,10]``, without n00) and a literal copy of
    it invents some; then the hosts are sorted one by one and pushed in that order, which
    writes exactly the input's hosts, sorted."""
    if fast:
        grouped = _coalesce_by_group(runs)
        if grouped is not None:
            return _ranged_string(grouped)
    coalesced = _collapse(_coalesce([list(run) for run in runs]))
    if Counter(_run_hosts(coalesced)) == Counter(hosts):
        return _ranged_string(coalesced)
    found = host_columns(hosts, "\n".join(hosts)) if fast else None
    if found is not None and found[0] is not None and found[2] is None:
        # every host has a numeric tail: sort the hosts column-wise
        return compress(list(map(hosts.__getitem__, columns_order(found[0]))))
    singles = [_runs([host])[0] for host in hosts]
    ranks = prefix_ranks(run[_PREFIX] for run in singles)
    order = sorted(range(len(hosts)), key=lambda i: _sort_key(singles[i], ranks))
    return _ranged_string(_runs([hosts[i] for i in order]))


def _names_among_numbered(pushed: _Pushed) -> str:
    """Unsorted compress of hosts of which some have no numeric tail: each name written as
    it is, where it stands, and the runs between them bracketed per prefix as Slurm's
    hostlist_ranged_string does (a name ends a bracket)."""
    columns = pushed.columns
    assert columns is not None
    first_at, last_at = pushed.first_at, pushed.last_at
    gaps = list(map(operator.ne, map(operator.add, last_at, itertools.repeat(1)), first_at[1:]))
    starts, parts = _columns_parts(columns, gaps)
    at = pushed.name_at + list(map(first_at.__getitem__, starts))
    texts = pushed.names + parts
    return ",".join(map(texts.__getitem__, sorted(range(len(texts)), key=at.__getitem__)))


def _sorted_names_beside_numbered(pushed: _Pushed) -> str | None:
    """Sorted compress of hosts of which some have no numeric tail; None where the
    numbered hosts' runs overlap (the host-by-host path splits them).

    Why it is the same as the host-by-host path: a name without a number is a run of its
    own that nothing joins, overlaps or brackets with (Slurm's singlehost ranges), and it
    sorts before the numbered runs of the prefix it equals. So the numbered hosts are
    sorted and collapsed apart (pushed as Slurm pushes the whole list: a name between
    two hosts keeps them apart), written one text per prefix, and those texts sorted
    among the names by their prefixes.
    """
    columns = pushed.columns
    assert columns is not None
    names = pushed.names
    keyed = row_sort_keys(pushed) if _many_prefixes(columns) else None
    if keyed is not None:
        row_keys, name_keys = keyed
        rows = sorted(range(len(row_keys)), key=row_keys.__getitem__)
        ordered = columns.take(rows)
        merged = _columns_collapse(ordered) if len(rows) > 1 else ordered
        if merged is None:
            return None
        # one text per prefix; it sorts among the names by the key of its first row
        firsts = [
            0,
            *itertools.compress(itertools.count(1), map(operator.ne, ordered.prefixes, ordered.prefixes[1:])),
        ]
        keys = name_keys + list(map(row_keys.__getitem__, map(rows.__getitem__, firsts)))
        texts = names + _columns_parts(merged)[1]
        return ",".join(map(texts.__getitem__, sorted(range(len(keys)), key=keys.__getitem__)))
    # Few prefixes: one natural sort of the names and the prefixes together ranks them;
    # the stable sort keeps a name before the prefix it equals.
    items = names + list(set(columns.prefixes))
    order = natural_order(items)
    ranks = dict(zip(map(items.__getitem__, order), range(len(order)), strict=True))
    if len(columns.lows) > 1:
        merged = _columns_collapse(_columns_sort(columns, ranks))
        if merged is None:
            return None
        columns = merged
    starts, parts = _columns_parts(columns)  # sorted: one part per prefix
    part_of = dict(zip(map(columns.prefixes.__getitem__, starts), parts, strict=True))
    texts = names + list(map(part_of.__getitem__, items[len(names) :]))
    return ",".join(map(texts.__getitem__, order))


def compress(hosts: Iterable[str], sort: bool = False) -> str:
    """The hostlist string ``scontrol show hostlist`` prints for these hosts.

    Order and duplicates are kept and only neighbouring hosts of one prefix are merged
    (``["n2", "n1", "n3"]`` gives ``"n[2,1,3]"``). ``sort=True`` gives what
    ``scontrol show hostlistsorted`` prints (sorted, duplicates still kept). Host names
    must be non-empty and free of blanks, commas and brackets, since the result would
    not read back as the same hosts otherwise.
    """
    hosts, joined = _check_hosts(hosts)
    text = _compress(hosts, joined, sort)
    if TOP in joined:  # a range of several hosts ending at 2**64 - 1 would crash Slurm
        top = top_of_run(plan(text, check_top=False))
        if isinstance(top, str):
            raise HostlistError(f"bad host name {show(top)}: {AT_64_BITS}")
    return text


def _compress(hosts: list[str], joined: str, sort: bool) -> str:
    found = host_columns(hosts, joined)
    if sort and found is not None and found[0] is not None and found[2] is None and len(hosts) > 1:
        text = _sorted_one_prefix(found[0])
        if text is not None:
            return text
    pushed = push_hosts(hosts, found)
    if pushed is None:
        return compress_by_host(hosts, sort, fast=True)
    columns = pushed.columns
    if columns is None:
        # No host has a number: every host is a run of its own, and sorting them is all
        # that hostlist_sort does (nothing overlaps or joins).
        return ",".join(natural_sorted(hosts) if sort else hosts)
    if pushed.names:
        if not sort:
            return _names_among_numbered(pushed)
        text = _sorted_names_beside_numbered(pushed)
        return text if text is not None else compress_by_host(hosts, sort, fast=True)
    if sort and len(columns.lows) > 1:
        keyed = row_sort_keys(pushed) if _many_prefixes(columns) else None
        columns = _columns_sort(columns, row_keys=None if keyed is None else keyed[0])
        merged = _columns_collapse(columns)
        if merged is None:
            return _coalesced_string(_columns_to_runs(columns), hosts, fast=True)
        columns = merged
    return _columns_string(columns)


def compress_counts(counts: Iterable[int]) -> str:
    """Write counts as Slurm does: runs of two or more as ``N(xK)``, never ``(x1)``.

    ``compress_counts([2, 2, 2, 1])`` is ``"2(x3),1"``; ``[]`` gives ``""``.
    """
    parts: list[str] = []
    previous: int | None = None
    run = 0
    for value in counts:
        if not is_int_in(value, 0):
            raise HostlistError(f"bad count {clip(repr(value))}: counts must be non-negative integers")
        if value == previous:
            run += 1
            continue
        if previous is not None:
            parts.append(f"{previous}(x{run})" if run > 1 else str(previous))
        previous, run = value, 1
    if previous is not None:
        parts.append(f"{previous}(x{run})" if run > 1 else str(previous))
    return ",".join(parts)
