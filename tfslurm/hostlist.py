"""Slurm hostlists and task-count lists, parsed and written exactly as Slurm does.

Every Slurm variable tfslurm reads (``SLURM_STEP_NODELIST``, ``SLURM_JOB_NODELIST``,
``SLURM_STEP_TASKS_PER_NODE``, ...) is written by Slurm's own ``hostlist.c``, so this
module reproduces that code's results rather than a "nicer" set-like reading: order and
duplicates are kept, widths come from the text of the low bound, and several bracket
groups expand in Slurm's own (odd) order.

Grammar accepted by :func:`expand` (``docs/hostlist.md`` has the full description)::

    expr   := item ( SEP+ item )*         SEP is ',', ' ' or '\\t'; empty items skipped
    item   := text ( '[' ranges ']' text )*
    ranges := range ( ',' range )*
    range  := DIGITS | DIGITS '-' DIGITS  low <= high, at most 65,536 hosts
    text   := any characters except SEP, '[' and ']'

Where Slurm 22.05 (Debian 12) and newer Slurm differ, newer Slurm is followed:

* text after the last ``]`` (``node[1-2]-ib``) is a shared suffix (Slurm >= 23.11;
  22.05 rejects it);
* an unclosed ``[`` (``n[1-3``) is an error (Slurm >= 23.02; 22.05 tacks on a ``]``).

A newline is an error (Slurm keeps it in a host name), and so is a host name ending in a
number past 2**64 - 1 (Slurm saturates it), in expand, count and compress alike.

tfslurm is also stricter than Slurm in a few places where Slurm's C parser accepts
garbage by accident (``strtoul`` skipping blanks and ``+``, ``n[1-]`` meaning ``n1``,
stray or nested brackets becoming part of host names): those are errors here.

Everything this module raises for bad input is :class:`HostlistError`, with a one-line
message naming the input and the offending part. Sizes are checked before anything is
allocated: see :data:`MAX_RANGE_HOSTS`, :data:`MAX_HOSTS` and :data:`MAX_CHARS`.
"""

from __future__ import annotations

import itertools
import math
import operator
import re
from collections import Counter
from collections.abc import Iterable, Iterator

from tfslurm.errors import HostlistError, clip

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the TaskProlog path)
if TYPE_CHECKING:
    from typing import Any, TypeAlias

    # A run of hosts as the compressors keep it: [prefix, low, high, width], changed in place.
    _Run: TypeAlias = list[Any]

__all__ = [
    "MAX_CHARS",
    "MAX_HOSTS",
    "MAX_RANGE_HOSTS",
    "HostlistError",
    "compress",
    "compress_counts",
    "count",
    "expand",
    "expand_counts",
    "index_of",
    "nth",
]

#: Hosts in one ``lo-hi`` range, and in one non-final bracket group: Slurm's own caps
#: (``MAX_RANGE`` and ``MAX_PREFIX_CNT`` in ``hostlist.c``, both 64K).
MAX_RANGE_HOSTS = 65_536
#: Hosts one expression (or one task-count list) may expand to: 16 times the largest
#: cluster Slurm supports, far above any real allocation, small enough to stay in memory.
MAX_HOSTS = 1 << 20
#: Characters all expanded host names of one expression may take together (64 Mi).
MAX_CHARS = 1 << 26

_DIGITS = frozenset("0123456789")
_ULONG_MAX = (1 << 64) - 1
# Longest numeric tail (zero padding included) the column-wise compress reads with int();
# longer ones take the host-by-host path (Python refuses int() of 4,300+ digits).
_COLUMN_DIGITS = 64


def _show(text: str, limit: int = 60) -> str:
    """repr() of user text, clipped so that an error message stays one short line."""
    return clip(repr(text[:limit]) + ("..." if len(text) > limit else ""), limit + 6)


def _fail(expr: str, what: str) -> HostlistError:
    return HostlistError(f"bad hostlist {_show(expr)}: {what}")


# A range list is kept as tuples (low, high, width): the hosts low..high, each number
# zero-padded to width digits (the length of the low bound's text, as Slurm does).
_Range = tuple[int, int, int]


_LOW_OF, _HIGH_OF, _WIDTH_OF = (operator.itemgetter(i) for i in range(3))
# N or N-M, numbers of at most 19 significant digits (always below 2**64) after at most
# 45 zeros (so at most 64 digits: int() takes them): parsed in bulk. Possessive (no
# backtracking): sre keeps no mark per range (the greedy form took 1.1 s and 258 MB for a
# bracket of a million numbers, this one 60 ms and nothing).
_PLAIN_NUMBER = r"(?:0{0,45}+[1-9][0-9]{0,18}+|0{1,64}+)"
_PLAIN_RANGES = rf"{_PLAIN_NUMBER}(?:-{_PLAIN_NUMBER})?+(?:,{_PLAIN_NUMBER}(?:-{_PLAIN_NUMBER})?+)*+"


class _Group:
    """One bracket group: the text of each range, the ranges that span several numbers,
    its host count and how many digits all its numbers take together.

    Expanding mostly copies the texts (Slurm writes scattered hosts as long lists of
    single numbers): a group of single numbers keeps its bracket's text and splits it only
    when asked for its parts; the (low, high, width) tuples are built only for nth/index_of.
    """

    __slots__ = ("_body", "_cuts", "_parts", "_ranges", "_widest", "digits", "size", "spans")

    def __init__(
        self,
        parts: list[str] | None,  # each range's text; a span's part is its low number's text
        spans: list[tuple[int, int, int, int]],  # (index, low, high, width) if low < high
        ranges: list[_Range] | None = None,
        body: str | None = None,  # instead of parts: the bracket's text
        cuts: list[tuple[int, int]] | None = None,  # with body: where each span's text is
    ) -> None:
        self._parts = parts
        self._body = body
        self._cuts = cuts or []
        self.spans = spans
        self._ranges = ranges
        self._widest: int | None = None
        if parts is None:
            assert body is not None
            commas = body.count(",")
            self.size = commas + 1 + sum(high - low for _, low, high, _ in spans)
            self.digits = (
                len(body)
                - commas
                - sum(end - start for start, end in self._cuts)
                + sum(_span_digits(low, high, width) for _, low, high, width in spans)
            )
        else:
            self.size = len(parts) + sum(high - low for _, low, high, _ in spans)
            # a span adds its numbers' digits less its low's text, counted in parts
            self.digits = sum(map(len, parts)) + _spans_digits(spans) - sum(len(parts[s[0]]) for s in spans)

    @property
    def parts(self) -> list[str]:
        if self._parts is None:
            assert self._body is not None
            parts = self._body.split(",")
            for index, _, _, _ in self.spans:
                parts[index] = parts[index].partition("-")[0]
            self._parts = parts
        return self._parts

    @property
    def widest(self) -> int:
        """Digits of the group's longest number (parts hold the low numbers' texts)."""
        if self._widest is None:
            self._widest = max([*map(len, self.parts), *(len(str(high)) for _, _, high, _ in self.spans)])
        return self._widest

    @property
    def ranges(self) -> list[_Range]:
        if self._ranges is None:  # only plain groups: numbers of at most 19 digits
            parts = self.parts
            numbers = list(map(int, parts))
            ranges = list(zip(numbers, numbers, map(len, parts), strict=False))
            for index, low, high, width in self.spans:
                ranges[index] = (low, high, width)
            self._ranges = ranges
        return self._ranges

    def numbers(self) -> list[str]:
        """Every number of the group as written, in order."""
        if not self.spans:
            return self.parts
        return self.joined().split(",")

    def joined(self) -> str:
        """Every number of the group as written, joined by ','."""
        if not self.spans:
            return self._body if self._body is not None else ",".join(self.parts)
        if self._body is not None:  # the bracket's text with each span written out
            pieces: list[str] = []
            done = 0
            for (start, end), (_, low, high, width) in zip(self._cuts, self.spans, strict=False):
                pieces += self._body[done:start], _range_text("", "", low, high, width)[1:]
                done = end
            pieces.append(self._body[done:])
            return "".join(pieces)
        pieces = list(self.parts)
        for index, low, high, width in self.spans:
            pieces[index] = _range_text("", "", low, high, width)[1:]
        return ",".join(pieces)


def _spans_digits(spans: list[tuple[int, int, int, int]]) -> int:
    """_span_digits summed over many spans: C-level for those whose numbers are all
    written ``width`` wide (zero-padded ones, and most others), one call each otherwise."""
    if len(spans) < 64:
        return sum(_span_digits(low, high, width) for _, low, high, width in spans)
    _, lows, highs, widths = zip(*spans, strict=True)
    wide = list(map(operator.ge, widths, map(len, map(str, highs))))
    counts = map(operator.sub, map(operator.add, highs, itertools.repeat(1)), lows)
    total: int = sum(itertools.compress(map(operator.mul, counts, widths), wide))
    for index in itertools.compress(range(len(spans)), map(operator.not_, wide)):
        _, low, high, width = spans[index]
        total += _span_digits(low, high, width)
    return total


def _span_digits(low: int, high: int, width: int) -> int:
    """Characters of the numbers low..high written zero-padded to width, together."""
    high_digits = len(str(high))
    if width >= high_digits:  # all written width wide (most spans: one call per span)
        return (high - low + 1) * width
    total = 0
    digits = len(str(low))
    if digits == high_digits:
        return (high - low + 1) * digits
    start = low
    while start <= high:
        stop = min(high, 10**digits - 1)
        total += (stop - start + 1) * max(width, digits)
        start = stop + 1
        digits += 1
    return total


def _parse_ranges(expr: str, body: str) -> _Group:
    if not body:
        raise _fail(expr, "empty brackets '[]'")
    if re.fullmatch(_PLAIN_RANGES, body):
        if "-" not in body:
            return _Group(None, [], body=body)
        if body.count("-") <= 64:  # a few spans among many numbers: keep the text
            group = _few_spans(body)
            if group is not None:
                return group
        parts = body.split(",")
        indexes = list(
            itertools.compress(range(len(parts)), map(operator.contains, parts, itertools.repeat("-")))
        )
        pieces = list(map(str.partition, map(parts.__getitem__, indexes), itertools.repeat("-")))
        low_texts = list(map(operator.itemgetter(0), pieces))
        lows = list(map(int, low_texts))
        highs = list(map(int, map(operator.itemgetter(2), pieces)))
        if all(map(operator.le, lows, highs)) and all(
            map(operator.lt, highs, map(operator.add, lows, itertools.repeat(MAX_RANGE_HOSTS)))
        ):
            for index, low_text in zip(indexes, low_texts, strict=True):
                parts[index] = low_text
            return _Group(parts, list(zip(indexes, lows, highs, map(len, low_texts), strict=True)))
        # else: the slow path below names the reversed or oversized range
    # Range by range, to name the bad one.
    ranges: list[_Range] = []
    for part in body.split(","):
        if part.isdigit() and len(part) <= 19 and part.isascii():  # a plain number
            number = int(part)
            ranges.append((number, number, len(part)))
            continue
        low_text, dash, high_text = part.partition("-")
        numbers = (low_text, high_text) if dash else (low_text,)
        if not all(text and set(text) <= _DIGITS for text in numbers):
            raise _fail(
                expr,
                f"range {_show(part, 40)} in {_show('[' + body + ']', 40)} must be N or N-M with digits only",
            )
        low = _number(expr, low_text)
        high = _number(expr, high_text) if dash else low
        if high < low:
            raise _fail(expr, f"reversed range {_show(part, 40)} in {_show('[' + body + ']', 40)}")
        if high - low + 1 > MAX_RANGE_HOSTS:
            raise _fail(
                expr,
                f"range {_show(part, 60)} has {high - low + 1} hosts, over Slurm's {MAX_RANGE_HOSTS}",
            )
        ranges.append((low, high, len(low_text)))
    parts = [part.partition("-")[0] for part in body.split(",")]
    spans = [(i, low, high, width) for i, (low, high, width) in enumerate(ranges) if high > low]
    return _Group(parts, spans, ranges)


def _few_spans(body: str) -> _Group | None:
    """The group of a plain bracket text with a few spans, found without splitting it;
    None if a span is reversed or too long (the caller names the problem)."""
    spans = []
    cuts = []
    index = 0
    counted = 0
    dash = body.find("-")
    while dash >= 0:
        start = body.rfind(",", 0, dash) + 1
        end = body.find(",", dash)
        end = len(body) if end < 0 else end
        index += body.count(",", counted, start)
        counted = start
        low, high = int(body[start:dash]), int(body[dash + 1 : end])
        if not low <= high < low + MAX_RANGE_HOSTS:
            return None
        if high > low:
            spans.append((index, low, high, dash - start))
            cuts.append((start, end))
        else:  # N-N is the single number N, written as its low text
            return None
        dash = body.find("-", end)
    return _Group(None, spans, body=body, cuts=cuts)


def _number(expr: str, digits: str) -> int:
    # Slurm reads numbers as C unsigned longs; also keeps int() clear of Python's limit
    # on the length of digit strings.
    significant = digits.lstrip("0")
    if len(significant) > 20 or (significant and int(significant) > _ULONG_MAX):
        raise _fail(expr, f"number {_show(digits, 40)} is larger than Slurm's 64-bit limit")
    return int(significant or "0")


# Brackets that pair up without nesting, and the rest of an item from its first '['.
_BALANCED = r"[^\[\]]*+(?:\[[^\[\]]*+\][^\[\]]*+)*+"
_ITEM_REST = re.compile(r"(?:\[[^\[\]]*+\][^\[\],\t ]*+)++")


def _bracket_items(expr: str) -> Iterable[tuple[int, int]]:
    """(start, end) of each item with brackets, in order, for balanced brackets: found with
    C-level searches, each part of the text looked at once or twice."""
    pos = 0
    while True:
        bracket = expr.find("[", pos)
        if bracket < 0:
            return
        start = 1 + max(
            expr.rfind(",", pos, bracket),
            expr.rfind(" ", pos, bracket),
            expr.rfind("\t", pos, bracket),
            pos - 1,
        )
        match = _ITEM_REST.match(expr, bracket)
        assert match is not None  # brackets are balanced
        pos = match.end()
        yield start, pos


def _bracket_error(expr: str) -> HostlistError:
    """Name the first unbalanced or nested bracket of an expression that has one."""
    depth = 0
    open_at = -1
    for pos, char in enumerate(expr):
        if char == "[":
            if depth:
                return _fail(expr, f"nested '[' at offset {pos}")
            depth = 1
            open_at = pos
        elif char == "]":
            if not depth:
                return _fail(expr, f"']' without '[' at offset {pos}")
            depth = 0
    if depth:
        return _fail(expr, f"'[' at offset {open_at} is never closed")
    return _fail(expr, "unbalanced brackets")


def _plain_hosts(expr: str, text: str) -> list[str]:
    """The hosts of bracket-free text: one C-level split, bounded before it is made."""
    if len(text) > MAX_CHARS:
        raise _fail(expr, f"longer than {MAX_CHARS} characters (tfslurm's bound)")
    for blank in "\t ":  # only copy the text when it has other separators
        if blank in text:
            text = text.replace(blank, ",")
    if text.count(",") >= MAX_HOSTS:  # perhaps too many: count them before building them
        text = re.sub(",,+", ",", text).strip(",")
        if text.count(",") >= MAX_HOSTS:
            raise _fail(expr, f"has more than {MAX_HOSTS} hosts (tfslurm's bound)")
    hosts = text.split(",")
    if not text or ",," in text or text[0] == "," or text[-1] == ",":  # empty items
        hosts = list(filter(None, hosts))
    if hosts and max(map(len, hosts)) >= 20:
        _check_tails(expr, hosts)
    return hosts


def _no_newline(expr: str) -> None:
    """Refuse a newline: Slurm 22.05 does not separate hosts at one (``q1\\nb`` is one host,
    ``q[1]\\nb`` an invalid hostlist), and no node name holds one."""
    if "\n" in expr:
        raise _fail(
            expr,
            f"newline at offset {expr.index(chr(10))}: Slurm does not separate hosts at "
            "newlines; use ',' or blanks",
        )


def _over_64_bits(hosts: list[str]) -> str | None:
    """The first host whose trailing number is past 2**64 - 1 (Slurm saturates or mangles
    it, so no node has such a name), or None; only names of 20 characters or more are read,
    with C-level passes."""
    long = list(itertools.compress(hosts, map((19).__lt__, map(len, hosts))))
    if not long:
        return None
    cuts = map(len, map(str.rstrip, long, itertools.repeat("0123456789")))
    tails: Iterable[str] = map(operator.getitem, long, map(slice, cuts, itertools.repeat(None)))
    significant = list(map(str.lstrip, tails, itertools.repeat("0")))
    for index in itertools.compress(range(len(long)), map((19).__lt__, map(len, significant))):
        number = significant[index]
        if len(number) > 20 or int(number) > _ULONG_MAX:
            return long[index]
    return None


def _check_tails(expr: str, hosts: list[str]) -> None:
    host = _over_64_bits(hosts)
    if host is not None:
        raise _fail(expr, f"host {_show(host, 40)} {_OVER_64_BITS}")


_OVER_64_BITS = "ends in a number larger than Slurm's 64-bit limit"


def _tail_digits(texts: list[str], groups: list[_Group], exact: bool = False) -> int:
    """The most digits a host of this item can end in (the texts and numbers that form
    its trailing number), to find the items that need _tail_overflow. Numbers of a
    group kept as text have at most 19 digits; their exact widest is read only if that
    bound says 20 or more."""
    digits = 0
    for k in range(len(groups), -1, -1):
        text = texts[k]
        stripped = text.rstrip("0123456789")
        digits += len(text) - len(stripped)
        if stripped or not k:
            break
        group = groups[k - 1]
        digits += group.widest if exact or group._parts is not None else 19
    if digits >= 20 and not exact:
        return _tail_digits(texts, groups, exact=True)
    return digits


def _written_maxima(group: _Group) -> dict[int, int]:
    """For each length a number of the group is written with, its largest such number."""
    maxima: dict[int, int] = {}
    for _, low, high, width in group.spans:
        if width >= len(str(high)):  # every number written width wide: high is the largest
            if high > maxima.get(width, -1):
                maxima[width] = high
            continue
        for length in range(max(width, len(str(low))), max(width, len(str(high))) + 1):
            value = min(high, 10**length - 1)
            maxima[length] = max(maxima.get(length, value), value)
    parts = group.parts
    if group.spans:  # a span's part is its low number, counted above
        spanned = {index for index, _, _, _ in group.spans}
        parts = [text for index, text in enumerate(parts) if index not in spanned]
    # Numbers written with the same number of digits compare as their texts do, so each
    # length's largest is one C-level max() over the texts of that length.
    lengths = list(map(len, parts))
    for length in set(lengths):
        text = max(itertools.compress(parts, map(operator.eq, lengths, itertools.repeat(length))))
        value = int(text.lstrip("0") or "0")
        maxima[length] = max(maxima.get(length, value), value)
    return maxima


def _tail_overflow(texts: list[str], groups: list[_Group]) -> str | None:
    """A host of the item whose trailing number is past 2**64 - 1, or None.

    A host's trailing number is the digits of the texts and numbers at its end; with each
    number's written length fixed, it is largest where each number is, so the largest
    number of every group at every length it is written with is all there is to try
    (the item's hosts are every combination). Many combinations: the hosts are read.
    """
    first = len(groups)  # groups from index `first` on are inside the trailing number
    while first and not texts[first].rstrip("0123456789"):
        first -= 1
    tail_groups = groups[first:]
    maxima = [sorted(_written_maxima(group).items()) for group in tail_groups]
    if math.prod(map(len, maxima)) > 4096:
        return _over_64_bits(_item_text(texts, groups)[1:].split(","))
    lead = texts[first][len(texts[first].rstrip("0123456789")) :]
    for choice in itertools.product(*maxima):
        digits = lead + "".join(
            f"{value:0{length}d}{texts[first + 1 + k]}" for k, (length, value) in enumerate(choice)
        )
        significant = digits.lstrip("0")
        if len(significant) > 20 or (len(significant) == 20 and int(significant) > _ULONG_MAX):
            parts = [texts[0]]
            for k, group in enumerate(groups):
                if k >= first:
                    length, value = choice[k - first]
                    parts.append(f"{value:0{length}d}")
                else:
                    parts.append(group.parts[0])
                parts.append(texts[k + 1])
            return "".join(parts)
    return None


def _parse_item(
    expr: str, item: str, seen: dict[str, _Group] | None = None
) -> tuple[list[str], list[_Group]]:
    """Split ``a[..]b[..]c`` into texts ``[a, b, c]`` and the groups' range lists; ``seen``
    holds the groups already parsed (Slurm writes the same bracket after many prefixes)."""
    pieces = re.split(r"\[([^\[\]]*)\]", item)  # text, body, text, ..., text
    if seen is None:
        return pieces[::2], [_parse_ranges(expr, body) for body in pieces[1::2]]
    groups = []
    for body in pieces[1::2]:
        group = seen.get(body)
        if group is None:
            group = seen[body] = _parse_ranges(expr, body)
        groups.append(group)
    return pieces[::2], groups


def _item_plan(
    expr: str, item: str, seen: dict[str, _Group] | None = None
) -> tuple[list[str], list[_Group], int, int]:
    """Parse one item and return (texts, groups, host count, total name length)."""
    texts, groups = _parse_item(expr, item, seen)
    hosts = 1
    chars = sum(map(len, texts))  # length of every name, without the numbers
    for index, group in enumerate(groups):
        size = group.size
        if index < len(groups) - 1 and size > MAX_RANGE_HOSTS:
            raise _fail(
                expr,
                f"bracket group {index + 1} of {_show(item, 60)} has {size} hosts, "
                f"over Slurm's {MAX_RANGE_HOSTS} for a non-final group",
            )
        hosts *= size
    if not groups:
        return texts, groups, 1, chars
    # Every host carries one number from each group: each number of a group is written
    # once for every combination of the other groups' numbers.
    numbers = sum(group.digits * (hosts // group.size) for group in groups)
    return texts, groups, hosts, hosts * chars + numbers


def _prefixes(texts: list[str], groups: list[_Group]) -> list[str]:
    """Every host's text up to the last group, in Slurm's order.

    Slurm (``_push_range_list`` recursing on the prefix) makes the last group the
    innermost loop, the second-to-last the outermost, then the third-to-last, ..., the
    first group: itertools.product over the earlier groups in reverse order. Each prefix
    is written in one formatting call, so many groups cost no more than their text.
    """
    if len(groups) == 1:
        return [texts[0]]
    template = "%s".join(text.replace("%", "%%") for text in texts[:-1])
    numbers = [group.numbers() for group in reversed(groups[:-1])]
    return [template % combo[::-1] for combo in itertools.product(*numbers)]


def _range_text(prefix: str, tail: str, low: int, high: int, width: int) -> str:
    """``",<prefix><n><tail>"`` for every n in low..high, zero-padded to width.

    Hosts are built as one text and split once (host names never contain ','), and
    long ranges are written a hundred numbers at a time from a template, which makes
    expanding about three times faster than formatting every host on its own.
    """
    # n = 100 * block + r is the block's digits then r as two digits; block 0 has that
    # form only when the width is at least 2.
    first = max(-(-low // 100), 0 if width >= 2 else 1)
    stop = (high + 1) // 100
    if stop - first < 3 or "\x00" in prefix or "\x00" in tail:
        if width <= len(str(low)):  # numbers only grow: no padding needed
            return "".join([f",{prefix}{n}{tail}" for n in range(low, high + 1)])
        return "".join([f",{prefix}{n:0{width}d}{tail}" for n in range(low, high + 1)])
    template = "".join([f",{prefix}\x00{r:02d}{tail}" for r in range(100)])
    pad = max(width - 2, 0)
    blocks = [
        template.replace("\x00", str(block).rjust(pad, "0") if block else "0" * pad)
        for block in range(first, stop)
    ]
    head = _range_text(prefix, tail, low, first * 100 - 1, width) if low < first * 100 else ""
    rest = _range_text(prefix, tail, stop * 100, high, width) if high >= stop * 100 else ""
    return head + "".join(blocks) + rest


def _item_text(texts: list[str], groups: list[_Group]) -> str:
    """``",host"`` for every host of one parsed item, in Slurm's order."""
    if not groups:
        return "," + ",".join(texts)
    tail = texts[-1]
    group = groups[-1]
    prefixes = _prefixes(texts, groups)
    if len(prefixes) > 1:
        # The last group's numbers are written once and copied between every prefix
        # and the tail.
        numbers = group.joined()
        return "".join([f",{p}{numbers.replace(',', f'{tail},{p}')}{tail}" for p in prefixes])
    prefix = prefixes[0]
    between = f"{tail},{prefix}"
    if group._parts is None:  # the bracket's text: plain stretches, and spans written out
        body = group._body
        assert body is not None
        pieces = []
        done = 0
        for (start, end), (_, low, high, width) in zip(group._cuts, group.spans, strict=False):
            if start > done:  # numbers, then the ',' before the span
                pieces.append(f",{prefix}{body[done : start - 1].replace(',', between)}{tail}")
            pieces.append(_range_text(prefix, tail, low, high, width))
            done = end + 1
        if done < len(body):
            pieces.append(f",{prefix}{body[done:].replace(',', between)}{tail}")
        return "".join(pieces)
    written = list(group.parts)
    # A span becomes all its numbers with the prefix and tail between them, so one join
    # writes every host.
    for index, low, high, width in group.spans:
        if high == low + 1:  # a pair (what Slurm writes most): its low is written already
            written[index] = f"{written[index]}{between}{high:0{width}d}"
        elif high - low < 16:  # other short spans: formatted in place
            spec = f"0{width}d"
            written[index] = between.join([format(n, spec) for n in range(low, high + 1)])
        else:
            span = _range_text(prefix, tail, low, high, width)
            written[index] = span[1 + len(prefix) : len(span) - len(tail)]
    return "," + prefix + between.join(written) + tail


def _plan(expr: str) -> list[tuple[list[str], list[_Group], int]]:
    """Parse and size-check a whole expression without expanding it: one entry per item
    with brackets (its texts, groups and host count) and one per stretch of bracket-free
    items between them (its hosts, no groups, their count)."""
    if not isinstance(expr, str):
        raise HostlistError(f"bad hostlist {clip(repr(expr))}: expected a string, got {type(expr).__name__}")
    _no_newline(expr)
    if not re.fullmatch(_BALANCED, expr):
        raise _bracket_error(expr)
    plans: list[tuple[list[str], list[_Group], int]] = []
    hosts = 0
    chars = 0
    start = 0
    seen: dict[str, _Group] = {}
    # Items one at a time: every item has a host, so a huge expression stops at the bound.
    for match in itertools.chain(_bracket_items(expr), [None]):
        end = len(expr) if match is None else match[0]
        if end > start and expr[start:end].strip(",\t "):
            plain = _plain_hosts(expr, expr[start:end])
            if plain:
                hosts += len(plain)
                chars += end - start
                plans.append((plain, [], len(plain)))
        if match is not None:
            item = expr[match[0] : match[1]]
            start = match[1]
            texts, groups, item_hosts, item_chars = _item_plan(expr, item, seen)
            hosts += item_hosts
            chars += item_chars
        if hosts > MAX_HOSTS:
            raise _fail(expr, f"expands to more than {MAX_HOSTS} hosts (tfslurm's bound)")
        if chars > MAX_CHARS:
            raise _fail(expr, f"expands to more than {MAX_CHARS} characters (tfslurm's bound)")
        if match is not None:
            if _tail_digits(texts, groups) >= 20:
                host = _tail_overflow(texts, groups)
                if host is not None:
                    raise _fail(expr, f"host {_show(host, 40)} {_OVER_64_BITS}")
            plans.append((texts, groups, item_hosts))
    return plans


def expand(expr: str) -> list[str]:
    """Every host of a Slurm hostlist, in Slurm's order, duplicates kept.

    ``expand("n[1-2],m[01-02]-ib")`` is ``['n1', 'n2', 'm01-ib', 'm02-ib']``.
    """
    if isinstance(expr, str) and "[" not in expr and "]" not in expr:
        _no_newline(expr)
        return _plain_hosts(expr, expr)
    parts: list[list[str]] = []
    texts_of_items: list[str] = []  # ",host,host" of neighbouring small items, split together
    for texts, groups, size in _plan(expr):
        hosts = texts if not groups else _item_hosts(texts, groups) if size > 4096 else None
        if hosts is None:
            texts_of_items.append(_item_text(texts, groups))
            continue
        if texts_of_items:
            parts.append(_split_hosts("".join(texts_of_items)))
            texts_of_items = []
        parts.append(hosts)
    if texts_of_items:
        parts.append(_split_hosts("".join(texts_of_items)))
    if len(parts) == 1:
        return parts[0]
    return list(itertools.chain.from_iterable(parts))


def _item_hosts(texts: list[str], groups: list[_Group]) -> list[str] | None:
    """The hosts of an item whose one group is a bracket of single numbers (what Slurm
    writes for scattered hosts), split right out of its text with no copy between; None
    for other items."""
    tail = texts[-1]
    group = groups[-1]
    prefixes = _prefixes(texts, groups)
    if len(prefixes) > 1 or group._parts is not None or group.spans:
        return None
    prefix = prefixes[0]
    hosts = group.joined().replace(",", f"{tail},{prefix}").split(",")
    if prefix:
        hosts[0] = prefix + hosts[0]
    if tail:
        hosts[-1] += tail
    return hosts


def _split_hosts(text: str) -> list[str]:
    """The hosts of ``",host,host..."`` (one split, without copying the text)."""
    hosts = text.split(",")
    del hosts[0]
    return hosts


def expand_counts(expr: str) -> list[int]:
    """Expand a Slurm task-count list: ``"2(x3),1"`` is ``[2, 2, 2, 1]``.

    This is the format of ``SLURM_STEP_TASKS_PER_NODE`` and ``SLURM_JOB_CPUS_PER_NODE``:
    comma-separated ``N`` or ``N(xK)`` (N repeated K times). Blanks around items are
    ignored; empty items are errors (Slurm never writes them).
    """
    if not isinstance(expr, str):
        raise HostlistError(
            f"bad count list {clip(repr(expr))}: expected a string, got {type(expr).__name__}"
        )
    if not expr.strip():
        return []
    parsed: list[tuple[int, int]] = []
    total = 0
    # Every item is at least one entry: the bound is reached before the unsplit rest.
    for raw in expr.split(",", MAX_HOSTS + 1):
        item = raw.strip()
        value_text, paren, repeat_text = item.partition("(x")
        if paren:
            if not repeat_text.endswith(")"):
                raise _count_fail(expr, item)
            repeat_text = repeat_text[:-1]
        else:
            repeat_text = "1"
        if not (value_text.isdecimal() and repeat_text.isdecimal()) or not (
            value_text.isascii() and repeat_text.isascii()
        ):
            raise _count_fail(expr, item)
        if len(value_text.lstrip("0")) > 20 or len(repeat_text.lstrip("0")) > 20:
            raise HostlistError(f"bad count list {_show(expr)}: number too large in {_show(item, 40)}")
        repeat = int(repeat_text.lstrip("0") or "0")  # no int() of huge digit strings
        if repeat < 1:
            raise HostlistError(
                f"bad count list {_show(expr)}: repeat count of {_show(item, 40)} must be >= 1"
            )
        total += repeat
        if total > MAX_HOSTS:
            raise HostlistError(f"bad count list {_show(expr)}: expands to more than {MAX_HOSTS} entries")
        parsed.append((int(value_text.lstrip("0") or "0"), repeat))
    out: list[int] = []
    for value, repeat in parsed:
        out.extend([value] * repeat)
    return out


def _count_fail(expr: str, item: str) -> HostlistError:
    return HostlistError(f"bad count list {_show(expr)}: item {_show(item, 40)} is not N or N(xK)")


def compress_counts(counts: Iterable[int]) -> str:
    """Write counts as Slurm does: runs of two or more as ``N(xK)``, never ``(x1)``.

    ``compress_counts([2, 2, 2, 1])`` is ``"2(x3),1"``; ``[]`` gives ``""``.
    """
    parts: list[str] = []
    previous: int | None = None
    run = 0
    for value in counts:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
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


def count(expr: str) -> int:
    """How many hosts ``expand(expr)`` returns, without building the hosts of brackets."""
    if isinstance(expr, str) and "[" not in expr and "]" not in expr:
        return len(expand(expr))
    return sum(size for _, _, size in _plan(expr))


def _pick(groups: list[_Group], texts: list[str], index: int) -> str:
    """The host at ``index`` of one item, by Slurm's loop nesting (see _prefixes)."""
    sizes = [g.size for g in groups]
    index, last = divmod(index, sizes[-1])
    chosen = [0] * len(groups)
    chosen[-1] = last
    for g in range(len(groups) - 1):  # group 1 varies fastest after the last group
        index, chosen[g] = divmod(index, sizes[g])
    parts = [texts[0]]
    for g, group in enumerate(groups):
        offset = chosen[g]
        for low, high, width in group.ranges:
            if offset <= high - low:
                parts.append(f"{low + offset:0{width}d}")
                break
            offset -= high - low + 1
        parts.append(texts[g + 1])
    return "".join(parts)


def nth(expr: str, index: int) -> str:
    """``expand(expr)[index]`` without expanding the whole list (negative counts from the end)."""
    plans = _plan(expr)
    total = sum(size for _, _, size in plans)
    if not isinstance(index, int) or isinstance(index, bool):
        raise HostlistError(f"bad host index {clip(repr(index))} for {_show(expr)}: not an integer")
    position = index + total if index < 0 else index
    if not 0 <= position < total:
        raise HostlistError(f"host index {index} is out of range for {_show(expr)} ({total} hosts)")
    for texts, groups, size in plans:
        if position < size:
            return texts[position] if not groups else _pick(groups, texts, position)
        position -= size
    raise AssertionError("unreachable: position was checked against the total")


def index_of(expr: str, host: str) -> int:
    """Index of the first occurrence of ``host`` in ``expand(expr)``.

    Items with at most one bracket group are searched arithmetically; items with
    several groups (rare, user-written) are expanded one at a time.
    """
    plans = _plan(expr)
    if not isinstance(host, str):
        raise HostlistError(f"bad host {clip(repr(host))} for {_show(expr)}: host names are strings")
    start = 0
    for texts, groups, size in plans:
        found = _index_in_item(texts, groups, host)
        if found is not None:
            return start + found
        start += size
    raise HostlistError(f"host {_show(host, 60)} is not in {_show(expr)}")


def _index_in_item(texts: list[str], groups: list[_Group], host: str) -> int | None:
    if not groups:
        return texts.index(host) if host in texts else None
    if len(groups) > 1:
        hosts = _item_text(texts, groups)[1:].split(",")
        return hosts.index(host) if host in hosts else None
    head, tail = texts
    if len(host) <= len(head) + len(tail) or not host.startswith(head) or not host.endswith(tail):
        return None
    digits = host[len(head) : len(host) - len(tail)]
    if not (digits.isascii() and digits.isdigit()) or len(digits.lstrip("0")) > 20:
        return None
    value = int(digits.lstrip("0") or "0")
    offset = 0
    for low, high, width in groups[0].ranges:
        if low <= value <= high and f"{value:0{width}d}" == digits:
            return offset + value - low
        offset += high - low + 1
    return None


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
            f"compress() takes a list of host names, not the string {_show(hosts, 60)}: "
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
            f"bad host name {_show(bad)}: names must be non-empty, without blanks, ',', '[' or ']'"
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
        if digits and (len(significant) > 20 or int(significant or "0") > _ULONG_MAX):
            raise HostlistError(f"bad host name {_show(host)}: {_OVER_64_BITS}")
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


def _natural_key(name: str) -> tuple[Any, ...]:
    """Slurm's strnatcmp (Martin Pool's natural order) as a key, for names without blanks.

    strnatcmp walks both names byte by byte as C ``char`` (signed: UTF-8 bytes of
    non-ASCII letters sort before everything, even before the end of a name); where both
    have digits it compares the two digit runs: as text if either starts with '0', else
    by length then text (by value). Runs at the same place are either identical or decide
    the comparison, so comparing token by token is the same order.
    """
    key: list[tuple[Any, ...]] = []
    for token in re.findall(rb"[0-9]+|[^0-9]", name.encode("utf-8", "surrogatepass")):
        first = token[0]
        if 48 <= first <= 57:
            key.append((48, 0, token) if first == 48 else (48, 1, len(token), token))
        else:
            key.append((first - 256 if first >= 128 else first,))
    key.append((0,))  # the terminating NUL, compared like a byte
    return tuple(key)


# '0' and a character ranking a digit run without a leading zero by its length (above
# U+0001, which marks runs with one); one byte per character while runs are short.
_RUN_MARKS = ["0" + chr(0x80 + n if n < 0x80 else 0x100 + n) for n in range(4096)]
# For names with other than ASCII, whose UTF-8 bytes sort as signed chars (before the end
# of a name): those bytes stay U+0080-U+00FF, the end of a name becomes U+0100, and ASCII
# characters (and the '0' a digit run starts with) move up to U+0101-U+017F.
_WIDE_MARKS = [chr(0x130) + mark[1:] for mark in _RUN_MARKS]
_WIDE_TEXT = {c: 0x100 + c for c in range(0x80) if c != 10}  # NUL ranks as the end


def _natural_keys(names: list[str]) -> list[str] | None:
    """Keys that sort names as _natural_key does, made in a few C-level passes over many
    names at once; None if a name has a 4096-digit number.

    Each run of digits becomes '0' (where _natural_key's 48 stands), then a character
    ranking like _natural_key's next fields: for a run without a leading zero, one above
    U+0080 + its length, then the digits; for one with a leading zero, U+0001, the digits
    and U+0001 again (below any digit, so a shorter run ends first). Other characters
    stay as they are; the end of a name sorts first, as its NUL does in strnatcmp. Names
    with other than ASCII are keyed by their UTF-8 bytes (see _WIDE_MARKS).
    """
    keys: list[str] = []
    for start in range(0, len(names), 1 << 16):  # bounds the memory of the pieces
        joined = "\n".join(names[start : start + (1 << 16)])
        wide = not joined.isascii()
        if wide:
            joined = joined.encode("utf-8", "surrogatepass").decode("latin-1")
        pieces = re.split("([0-9]+)", joined)  # text, digits, text, ..., text
        runs = pieces[1::2]
        if runs:
            lengths = list(map(len, runs))
            if max(lengths) >= len(_RUN_MARKS):
                return None
            marks = _WIDE_MARKS if wide else _RUN_MARKS
            encoded = list(map(operator.add, map(marks.__getitem__, lengths), runs))
            # runs with a leading zero are the digit strings below "1"
            for index in itertools.compress(range(len(runs)), map(operator.lt, runs, itertools.repeat("1"))):
                encoded[index] = f"{marks[0][0]}\x01{runs[index]}\x01"
            pieces[1::2] = encoded
        if wide:
            pieces[::2] = [text.translate(_WIDE_TEXT) for text in pieces[::2]]
            keys += map(operator.add, "".join(pieces).split("\n"), itertools.repeat("\u0100"))
        else:
            keys += "".join(pieces).split("\n")
    return keys


def _natural_order(names: list[str]) -> list[int]:
    """The names' positions in Slurm's natural (strnatcmp) order (stable)."""
    keys: list[str] | list[tuple[Any, ...]] | None = _natural_keys(names)
    if keys is None:
        keys = list(map(_natural_key, names))
    return sorted(range(len(names)), key=keys.__getitem__)


def _natural_sorted(names: list[str]) -> list[str]:
    """The names in Slurm's natural (strnatcmp) order."""
    return list(map(names.__getitem__, _natural_order(names)))


def _prefix_ranks(prefixes: Iterable[str]) -> dict[str, int]:
    """Each distinct prefix's position in Slurm's (natural) prefix order."""
    return {p: rank for rank, p in enumerate(_natural_sorted(list(set(prefixes))))}


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


# A numeric tail with a leading zero: a '0' after a non-digit (or at the start of a
# name) followed by more digits up to the end of the name.
_PADDED_TAIL = r"(?m)(?:^|[^0-9])0[0-9]+$"


def _host_columns(hosts: list[str], joined: str) -> tuple[_Columns, list[int]] | None:
    """One row per host (every run a single host), plus each host's digit count; None
    when a host lacks a numeric tail (or has more than _COLUMN_DIGITS digits, or a number
    over 64 bits)."""
    count_hosts = len(hosts)
    if not count_hosts:
        return None
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
        if not all(widths) or max(widths) > _COLUMN_DIGITS:
            return None
        tails = list(map(operator.getitem, hosts, map(slice, cuts, itertools.repeat(None))))
    numbers = list(map(int, tails))
    if max(widths) >= 20 and max(numbers) > _ULONG_MAX:
        return None  # the host-by-host path names the host in its error
    unpadded: list[bool] | None = None
    if re.search(_PADDED_TAIL, joined):
        # written without leading zeros: the first digit is not 0, or the number is 0
        unpadded = list(
            map(
                operator.or_,
                map(operator.ne, map(operator.itemgetter(0), tails), itertools.repeat("0")),
                map(operator.eq, widths, itertools.repeat(1)),
            )
        )
    columns = _Columns(
        prefixes,
        numbers,
        numbers,
        widths if unpadded is not None else None,
        unpadded,
        common is not None,
        tails,
    )
    return columns, widths


def _columns(hosts: list[str], joined: str, positions: list[int] | None = None) -> _Columns | None:
    """Push runs as columns, or None when a host lacks a numeric tail (or has more than
    _COLUMN_DIGITS digits, or a number over 64 bits). ``positions``: where each host
    stands in a longer list whose other hosts (names without a number) end every run."""
    found = _host_columns(hosts, joined)
    if found is None:
        return None
    columns, widths = found
    prefixes, numbers, unpadded = columns.prefixes, columns.lows, columns.unpadded
    count_hosts = len(numbers)
    # A host joins the run of the host before it when it has the same prefix, the next
    # number, and the same width or both numbers unpadded (then its text is exactly how
    # the run writes that number).
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
    if len(starts) == count_hosts - 1:  # no host joined another: every run is one host
        return columns
    starts.insert(0, 0)
    ends = [*map(operator.sub, starts[1:], itertools.repeat(1)), count_hosts - 1]
    merged = columns.take(starts)
    merged.highs = list(map(numbers.__getitem__, ends))
    return merged


def _columns_order(columns: _Columns, ranks: dict[str, int] | None = None) -> list[int]:
    """The rows in hostrange_cmp order (stable: equal rows keep their order); ``ranks``:
    the prefixes' natural order, if known."""
    order = list(range(len(columns.lows)))
    order.sort(key=columns.lows.__getitem__)
    if columns.unpadded is not None and columns.widths is not None:
        order.sort(key=columns.unpadded.__getitem__)
        order.sort(key=columns.widths.__getitem__)
    if not columns.one_prefix:
        ranks = ranks or _prefix_ranks(columns.prefixes)
        order.sort(key=list(map(ranks.__getitem__, columns.prefixes)).__getitem__)
    return order


def _columns_sort(columns: _Columns, ranks: dict[str, int] | None = None) -> _Columns:
    if columns.one_prefix and columns.unpadded is None and columns.highs is columns.lows:
        lows = sorted(columns.lows)  # single hosts with one order key: sort the numbers
        return _Columns(columns.prefixes, lows, lows, None, None, True)
    return columns.take(_columns_order(columns, ranks))


def _columns_collapse(columns: _Columns) -> _Columns | None:
    """hostlist_coalesce + hostlist_collapse; None if runs overlap (the slow path splits them)."""
    prefixes, lows, highs = columns.prefixes, columns.lows, columns.highs
    if columns.one_prefix:
        overlapping = map(operator.gt, highs, lows[1:])
    else:
        same = list(map(operator.eq, prefixes, prefixes[1:]))
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


def _columns_parts(columns: _Columns) -> tuple[list[str], list[str]]:
    """The text of each stretch of rows with one prefix, and that prefix."""
    prefixes, lows, highs, widths = (
        columns.prefixes,
        columns.lows,
        columns.highs,
        columns.widths,
    )
    total = len(lows)
    if columns.texts is not None:  # the low numbers as the hosts wrote them
        numbers = list(columns.texts)
        for row in itertools.compress(range(total), map(operator.lt, lows, highs)):
            numbers[row] = _span_text(lows[row], highs[row], 0 if widths is None else widths[row])
    elif widths is None:
        numbers = list(map(str, lows))
        for row in itertools.compress(range(total), map(operator.lt, lows, highs)):
            numbers[row] = _span_text(lows[row], highs[row], 0)
    else:
        numbers = list(map(format, lows, map("0{}d".format, widths)))
        for row in itertools.compress(range(total), map(operator.lt, lows, highs)):
            numbers[row] = _span_text(lows[row], highs[row], widths[row])
    if columns.one_prefix:
        bounds = [0, total]
    else:
        bounds = [
            0,
            *itertools.compress(range(1, total), map(operator.ne, prefixes, prefixes[1:])),
            total,
        ]
    parts = []
    for start, stop in itertools.pairwise(bounds):
        if stop - start == 1 and lows[start] == highs[start]:
            parts.append(prefixes[start] + numbers[start])
        else:
            parts.append(f"{prefixes[start]}[{','.join(numbers[start:stop])}]")
    return list(map(prefixes.__getitem__, bounds[:-1])), parts


def _columns_to_runs(columns: _Columns) -> list[_Run]:
    widths = columns.widths
    if widths is None:
        widths = list(map(len, map(str, columns.lows)))
    return [list(row) for row in zip(columns.prefixes, columns.lows, columns.highs, widths, strict=False)]


def _compress_by_host(hosts: list[str], sort: bool, fast: bool = False) -> str:
    """compress() host by host, following Slurm's code step by step (the reference);
    ``fast``: overlapping runs of one width class are merged as numbers, and hosts are
    sorted column-wise where the literal split loses some (the same text, tested)."""
    runs = _runs(hosts)
    if sort and len(runs) > 1:
        ranks = _prefix_ranks(run[_PREFIX] for run in runs)
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
    found = _host_columns(hosts, "\n".join(hosts)) if fast else None
    if found is not None:  # every host has a numeric tail: sort the hosts column-wise
        return compress(list(map(hosts.__getitem__, _columns_order(found[0]))))
    singles = [_runs([host])[0] for host in hosts]
    ranks = _prefix_ranks(run[_PREFIX] for run in singles)
    order = sorted(range(len(hosts)), key=lambda i: _sort_key(singles[i], ranks))
    return _ranged_string(_runs([hosts[i] for i in order]))


def _sorted_names_beside_numbered(hosts: list[str]) -> str | None:
    """Sorted compress of hosts of which some have no numeric tail; None where the hosts
    with one do not take the column path (or their runs overlap).

    Why it is the same as the host-by-host path: a name without a number is a run of its
    own that nothing joins, overlaps or brackets with (Slurm's singlehost ranges), and it
    sorts before the numbered runs of the prefix it equals. So the numbered hosts are
    sorted and collapsed apart, written one text per prefix, and those texts sorted
    among the names by their prefixes.
    """
    numbered_flags = list(map("0123456789".__contains__, map(operator.itemgetter(-1), hosts)))
    numbered = list(itertools.compress(hosts, numbered_flags))
    # pushed as Slurm pushes the whole list: a name between two hosts keeps them apart
    columns = _columns(
        numbered, "\n".join(numbered), list(itertools.compress(itertools.count(), numbered_flags))
    )
    if columns is None:
        return None
    names = list(itertools.compress(hosts, map(operator.not_, numbered_flags)))
    # One natural sort of the names and the prefixes together; the stable sort keeps a
    # name before the prefix it equals, as hostrange_cmp puts a single host first.
    items = names + list(set(columns.prefixes))
    order = _natural_order(items)
    ranks = dict(zip(map(items.__getitem__, order), range(len(order)), strict=True))
    if len(columns.lows) > 1:
        merged = _columns_collapse(_columns_sort(columns, ranks))
        if merged is None:
            return None
        columns = merged
    part_of = dict(zip(*_columns_parts(columns), strict=True))  # sorted: one part per prefix
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
    # a host without a numeric tail: the column path cannot take the list
    columns = None if re.search(r"(?m)(?<![0-9])$", joined) else _columns(hosts, joined)
    if columns is None:
        if not re.search("[0-9]$", joined, re.MULTILINE):
            # No host has a number: every host is a run of its own, and sorting them is
            # all that hostlist_sort does (nothing overlaps or joins).
            return ",".join(_natural_sorted(hosts) if sort else hosts)
        if sort:
            text = _sorted_names_beside_numbered(hosts)
            if text is not None:
                return text
        return _compress_by_host(hosts, sort, fast=True)
    if sort and len(columns.lows) > 1:
        columns = _columns_sort(columns)
        merged = _columns_collapse(columns)
        if merged is None:
            return _coalesced_string(_columns_to_runs(columns), hosts, fast=True)
        columns = merged
    return _columns_string(columns)
