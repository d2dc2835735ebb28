"""The bracket syntax: parsing and size-checking one hostlist expression, and the wording
of its errors.

:func:`plan` splits an expression into items (their texts and :mod:`groups` of ranges)
with each item's host count, and refuses everything Slurm would reject, and everything
past tfslurm's bounds (:data:`MAX_RANGE_HOSTS`, :data:`MAX_HOSTS`, :data:`MAX_CHARS`, and
numbers past 2**64 - 1), before a single host is written. ``expand``, ``count``, ``nth``
and ``index_of`` all start from that plan, and every :class:`HostlistError` about an
expression is worded here (:func:`_fail`, :func:`show`), so all of them name the input
and the offending part the same way. The bounds live here because they are part of what
the grammar accepts; the package re-exports them.

Expressions of up to :data:`SMALL_EXPR` characters (every node list a TaskProlog reads,
in practice) are read with string methods; longer ones with regular expressions, which
find and split long runs of items in C (both in :mod:`scanning`). ``re`` is imported on the
first long expression: a TaskProlog, which runs at every task start, never pays for it.
"""

from __future__ import annotations

import itertools
import operator

from tfslurm.errors import HostlistError, clip
from tfslurm.hostlist.groups import Group, Range, item_prefixes, item_text, written_maxima
from tfslurm.hostlist.scanning import (
    BALANCED,
    ITEM_REST,
    PLAIN_RANGES,
    SIMPLE_RUN_ITEMS,
    SIMPLE_RUNS,
    balanced,
    item_end,
    pattern,
    plain_ranges,
    simple_parts,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the TaskProlog path)
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import TypeAlias

#: Hosts in one ``lo-hi`` range, and in one non-final bracket group: Slurm's own caps
#: (``MAX_RANGE`` and ``MAX_PREFIX_CNT`` in ``hostlist.c``, both 64K).
MAX_RANGE_HOSTS = 65_536
#: Hosts one expression (or one task-count list) may expand to: 16 times the largest
#: cluster Slurm supports, far above any real allocation, small enough to stay in memory.
MAX_HOSTS = 1 << 20
#: Characters all expanded host names of one expression may take together (64 Mi).
MAX_CHARS = 1 << 26

ULONG_MAX = (1 << 64) - 1

#: The longest expression read without regular expressions (see the module's docstring).
#: Both readings give the same plan and the same errors (tests/test_hostlist.py forces each).
SMALL_EXPR = 2048


def show(text: str, limit: int = 60) -> str:
    """repr() of user text, clipped so that an error message stays one short line."""
    return clip(repr(text[:limit]) + ("..." if len(text) > limit else ""), limit + 6)


def _fail(expr: str, what: str) -> HostlistError:
    return HostlistError(f"bad hostlist {show(expr)}: {what}")


def parse_ranges(expr: str, body: str) -> Group:
    if not body:
        raise _fail(expr, "empty brackets '[]'")
    if plain_ranges(body) if len(expr) <= SMALL_EXPR else pattern(PLAIN_RANGES).fullmatch(body):
        if "-" not in body:
            return Group(None, [], body=body)
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
            return Group(parts, list(zip(indexes, lows, highs, map(len, low_texts), strict=True)))
        # else: the slow path below names the reversed or oversized range
    # Range by range, to name the bad one.
    ranges: list[Range] = []
    parts = body.split(",")
    for index, part in enumerate(parts):
        if part.isdigit() and len(part) <= 19 and part.isascii():  # a plain number
            number = int(part)
            ranges.append((number, number, len(part)))
            continue
        low_text, dash, high_text = part.partition("-")
        # ASCII digits only (isdigit alone takes other scripts' digits)
        if not (low_text.isdigit() and part.isascii() and (not dash or high_text.isdigit())):
            raise _fail(
                expr,
                f"range {show(part, 40)} in {show('[' + body + ']', 40)} must be N or N-M with digits only",
            )
        low = _number(expr, low_text)
        high = _number(expr, high_text) if dash else low
        if high < low:
            raise _fail(expr, f"reversed range {show(part, 40)} in {show('[' + body + ']', 40)}")
        if high - low + 1 > MAX_RANGE_HOSTS:
            raise _fail(
                expr,
                f"range {show(part, 60)} has {high - low + 1} hosts, over Slurm's {MAX_RANGE_HOSTS}",
            )
        ranges.append((low, high, len(low_text)))
        parts[index] = low_text
    spans = [(i, low, high, width) for i, (low, high, width) in enumerate(ranges) if high > low]
    return Group(parts, spans, ranges)


def _few_spans(body: str) -> Group | None:
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
    return Group(None, spans, body=body, cuts=cuts)


def _number(expr: str, digits: str) -> int:
    # Slurm reads numbers as C unsigned longs; also keeps int() clear of Python's limit
    # on the length of digit strings.
    significant = digits.lstrip("0")
    if len(significant) > 20 or (significant and int(significant) > ULONG_MAX):
        raise _fail(expr, f"number {show(digits, 40)} is larger than Slurm's 64-bit limit")
    return int(significant or "0")


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


def plain_hosts(expr: str, text: str) -> list[str]:
    """The hosts of bracket-free text: one C-level split, bounded before it is made."""
    if len(text) > MAX_CHARS:
        raise _fail(expr, f"longer than {MAX_CHARS} characters (tfslurm's bound)")
    for blank in "\t ":  # only copy the text when it has other separators
        if blank in text:
            text = text.replace(blank, ",")
    if text.count(",") >= MAX_HOSTS:  # perhaps too many: count them before building them
        text = pattern(",,+").sub(",", text).strip(",")
        if text.count(",") >= MAX_HOSTS:
            raise _fail(expr, f"has more than {MAX_HOSTS} hosts (tfslurm's bound)")
    hosts = text.split(",")
    if not text or ",," in text or text[0] == "," or text[-1] == ",":  # empty items
        hosts = list(filter(None, hosts))
    if hosts and max(map(len, hosts)) >= 20:
        _check_tails(expr, hosts)
    return hosts


def refuse_newline(expr: str) -> None:
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
        if len(number) > 20 or int(number) > ULONG_MAX:
            return long[index]
    return None


def _check_tails(expr: str, hosts: list[str]) -> None:
    host = _over_64_bits(hosts)
    if host is not None:
        raise _fail(expr, f"host {show(host, 40)} {OVER_64_BITS}")


OVER_64_BITS = "ends in a number larger than Slurm's 64-bit limit"


def _tail_digits(texts: Sequence[str], groups: list[Group], exact: bool = False) -> int:
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
        digits += group.widest if exact or group.parts_split else 19
    if digits >= 20 and not exact:
        return _tail_digits(texts, groups, exact=True)
    return digits


def _tail_overflow(texts: Sequence[str], groups: list[Group]) -> str | None:
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
    maxima = [sorted(written_maxima(group).items()) for group in tail_groups]
    combinations = 1
    for lengths in maxima:
        combinations *= len(lengths)
    if combinations > 4096:
        return _over_64_bits(item_text(texts, groups)[1:].split(","))
    lead = texts[first][len(texts[first].rstrip("0123456789")) :]
    for choice in itertools.product(*maxima):
        digits = lead + "".join(
            f"{value:0{length}d}{texts[first + 1 + k]}" for k, (length, value) in enumerate(choice)
        )
        significant = digits.lstrip("0")
        if len(significant) > 20 or (len(significant) == 20 and int(significant) > ULONG_MAX):
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


def _parse_item(expr: str, item: str, seen: dict[str, Group] | None = None) -> tuple[list[str], list[Group]]:
    """Split ``a[..]b[..]c`` into texts ``[a, b, c]`` and the groups' range lists; ``seen``
    holds the groups already parsed (Slurm writes the same bracket after many prefixes)."""
    # text, body, text, ..., text: the item's brackets pair up without nesting
    pieces = item.replace("]", "[").split("[")
    if seen is None:
        return pieces[::2], [parse_ranges(expr, body) for body in pieces[1::2]]
    groups = []
    for body in pieces[1::2]:
        group = seen.get(body)
        if group is None:
            group = seen[body] = parse_ranges(expr, body)
        groups.append(group)
    return pieces[::2], groups


def _item_plan(
    expr: str, item: str, seen: dict[str, Group] | None = None
) -> tuple[list[str], list[Group], int, int]:
    """Parse one item and return (texts, groups, host count, total name length)."""
    texts, groups = _parse_item(expr, item, seen)
    hosts = 1
    chars = sum(map(len, texts))  # length of every name, without the numbers
    for index, group in enumerate(groups):
        size = group.size
        if index < len(groups) - 1 and size > MAX_RANGE_HOSTS:
            raise _fail(
                expr,
                f"bracket group {index + 1} of {show(item, 60)} has {size} hosts, "
                f"over Slurm's {MAX_RANGE_HOSTS} for a non-final group",
            )
        hosts *= size
    if not groups:
        return texts, groups, 1, chars
    # Every host carries one number from each group: each number of a group is written
    # once for every combination of the other groups' numbers.
    numbers = sum(group.digits * (hosts // group.size) for group in groups)
    return texts, groups, hosts, hosts * chars + numbers


# An item's texts (a list, or a tuple for a one-group item of a run: a tuple of strings is
# no work for the garbage collector), its groups and host count; or bracket-free hosts.
if TYPE_CHECKING:
    _Plan: TypeAlias = tuple[Sequence[str], list[Group], int]
# What _plan_simple knows of one "[body]tail" after a first item with it: the item's
# groups list (shared by the items), host count, tail, characters less the prefix's, and
# the fewest trailing digits of a prefix that make the 64-bit check worth doing.
_Simple = tuple[list[Group], int, str, int, int]


def plan(expr: str, check_top: bool = True) -> list[_Plan]:
    """Parse and size-check a whole expression without expanding it: one entry per item
    with brackets (its texts, groups and host count) and one per stretch of bracket-free
    items between them (its hosts, no groups, their count). ``check_top``: refuse what
    :func:`top_of_run` finds."""
    plans = _plan_items(expr)
    if check_top and TOP in expr:  # no number is 2**64 - 1 without these digits
        _check_top(expr, plans)
    return plans


def plain_expression(expr: str) -> list[str]:
    """The hosts of a bracket-free expression, checked as :func:`plan` checks them."""
    refuse_newline(expr)
    hosts = plain_hosts(expr, expr)
    if TOP in expr:
        _check_top(expr, [(hosts, [], len(hosts))])
    return hosts


def _plan_items(expr: str) -> list[_Plan]:
    """:func:`plan` without the check of ranges reaching 2**64 - 1."""
    if not isinstance(expr, str):
        raise HostlistError(f"bad hostlist {clip(repr(expr))}: expected a string, got {type(expr).__name__}")
    refuse_newline(expr)
    # A short expression is read item by item with string methods, a long one with
    # patterns that also take runs of one-group items at once.
    item_rest = None if len(expr) <= SMALL_EXPR else pattern(ITEM_REST)
    if not (balanced(expr) if item_rest is None else pattern(BALANCED).fullmatch(expr)):
        raise _bracket_error(expr)
    plans: list[_Plan] = []
    hosts = 0
    chars = 0
    pos = 0  # the end of the last item read
    seen: dict[str, Group] = {}
    simple: dict[str, _Simple] = {}
    runs = 0
    # Items one at a time: every item has a host, so a huge expression stops at the bound.
    while True:
        bracket = expr.find("[", pos)
        if bracket < 0:
            start = len(expr)
        else:  # the item holding the '[' starts after the last separator before it
            start = 1 + max(
                expr.rfind(",", pos, bracket),
                expr.rfind(" ", pos, bracket),
                expr.rfind("\t", pos, bracket),
                pos - 1,
            )
        if start > pos and expr[pos:start].strip(",\t "):
            plain = plain_hosts(expr, expr[pos:start])
            if plain:
                hosts += len(plain)
                chars += start - pos
                plans.append((plain, [], len(plain)))
        if bracket < 0:
            _check_bounds(expr, hosts, chars)
            return plans
        if item_rest is None:
            pos = item_end(expr, bracket)
        else:
            match = item_rest.match(expr, bracket)
            assert match is not None  # brackets are balanced
            pos = match.end()
        if expr.find("[", bracket + 1, pos) < 0:  # one group: a run of such items
            if item_rest is None:  # in a short expression, this item alone
                found: Iterable[tuple[str, str]] = ((expr[start:bracket], expr[bracket + 1 : pos]),)
            else:
                # to the first ',' past the stretch: a separator after an item, or one in a
                # body, which leaves that item without its ']' and ends the run before it
                stop = expr.find(",", start + max(start, 1 << 16))
                stop = len(expr) if stop < 0 else stop
                level = min(runs, len(SIMPLE_RUN_ITEMS) - 1)
                run = pattern(SIMPLE_RUNS[level]).match(expr, start, stop)
                runs += 1
                pos = pos if run is None else run.end()  # None: this item is longer
                found = simple_parts(expr, start, pos)
            hosts, chars = _plan_simple(expr, found, plans, hosts, chars, seen, simple)
            continue
        item = expr[start:pos]
        texts, groups, item_hosts, item_chars = _item_plan(expr, item, seen)
        hosts += item_hosts
        chars += item_chars
        if hosts > MAX_HOSTS or chars > MAX_CHARS:
            _check_bounds(expr, hosts, chars)
        if _tail_digits(texts, groups) >= 20:
            _check_overflow(expr, texts, groups)
        plans.append((texts, groups, item_hosts))


def _check_bounds(expr: str, hosts: int, chars: int) -> None:
    if hosts > MAX_HOSTS:
        raise _fail(expr, f"expands to more than {MAX_HOSTS} hosts (tfslurm's bound)")
    if chars > MAX_CHARS:
        raise _fail(expr, f"expands to more than {MAX_CHARS} characters (tfslurm's bound)")


def _check_overflow(expr: str, texts: Sequence[str], groups: list[Group]) -> None:
    host = _tail_overflow(texts, groups)
    if host is not None:
        raise _fail(expr, f"host {show(host, 40)} {OVER_64_BITS}")


# ---- ranges reaching 2**64 - 1 ------------------------------------------------------------
#
# Slurm keeps a range's bounds as C unsigned longs, and stepping past one that ends at
# 2**64 - 1 wraps around: a range of several hosts ending there crashes its hostlist code
# (22.05 segfaults on n[...614-...615], n[...614,...615], and the two host names in a row:
# hosts in a row join one range), and such a number in a group before the last loops
# forever. One host at 2**64 - 1 is read fine. A pushed host is Slurm's view: (text before the last group, text after it), its
# number, and the width it is written with; None after a name without a number.

TOP = str(ULONG_MAX)
#: Why the host ending such a range is refused (expand and compress alike).
AT_64_BITS = (
    "ends a range of several hosts at Slurm's 64-bit limit (2**64 - 1), which only one host may reach"
)
_Pushed = tuple[tuple[str, str], int, int] | None


def _check_top(expr: str, plans: list[_Plan]) -> None:
    found = top_of_run(plans)
    if isinstance(found, int):
        why = "Slurm's 64-bit limit (2**64 - 1), which only an item's last group may hold"
        raise _fail(expr, f"bracket group {found} holds {TOP}, {why}")
    if found is not None:
        raise _fail(expr, f"host {show(found, 40)} {AT_64_BITS}")


def top_of_run(plans: list[_Plan]) -> str | int | None:
    """The first host that ends a range of several hosts at 2**64 - 1, or the number of
    a group before the last that holds 2**64 - 1; None if there is neither."""
    last: _Pushed = None
    for texts, groups, _ in plans:
        found, last = _item_top(texts, groups, last) if groups else _plain_top(texts, last)
        if found is not None:
            return found
    return None


def _joins(last: _Pushed, key: tuple[str, str], width: int) -> bool:
    """Whether Slurm joins 2**64 - 1, written ``width`` wide after ``key``, onto the last
    range it pushed: one that ends one below, with the same key and a width that agrees
    (20-digit numbers agree unless one is zero-padded past 20 digits)."""
    return last is not None and last[:2] == (key, ULONG_MAX - 1) and max(last[2], 20) == max(width, 20)


def _pushed(host: str) -> _Pushed:
    prefix = host.rstrip("0123456789")
    digits = host[len(prefix) :]
    return ((prefix, ""), int(digits.lstrip("0") or "0"), len(digits)) if digits else None


def _plain_top(hosts: Sequence[str], last: _Pushed) -> tuple[str | None, _Pushed]:
    for index in itertools.compress(range(len(hosts)), map(str.endswith, hosts, itertools.repeat(TOP))):
        pushed = _pushed(hosts[index])  # (key, number, width)
        if (
            pushed
            and pushed[1] == ULONG_MAX
            and _joins(_pushed(hosts[index - 1]) if index else last, *pushed[::2])
        ):
            return hosts[index], None
    return None, _pushed(hosts[-1])


def _item_top(texts: Sequence[str], groups: list[Group], last: _Pushed) -> tuple[str | int | None, _Pushed]:
    for number, group in enumerate(groups[:-1], 1):
        if any(high == ULONG_MAX for _, high, _ in group.ranges):
            return number, None
    ranges = groups[-1].ranges
    tops = [index for index, (_, high, _) in enumerate(ranges) if high == ULONG_MAX]
    prefixes = item_prefixes(texts, groups)
    for prefix in prefixes if tops else prefixes[-1:]:  # without tops, the last host matters
        key = (prefix, texts[-1])
        for index in tops:
            low, high, width = ranges[index]
            if low < high or _joins((key, *ranges[index - 1][1:]) if index else last, key, width):
                return f"{prefix}{high:0{width}d}{texts[-1]}", None
        last = (key, *ranges[-1][1:])
    return None, last


def _plan_simple(
    expr: str,
    found: Iterable[tuple[str, str]],
    plans: list[_Plan],
    hosts: int,
    chars: int,
    seen: dict[str, Group],
    simple: dict[str, _Simple],
) -> tuple[int, int]:
    """Plan a run of one-group items, given as (prefix, "body]tail"), as _item_plan and
    plan's checks would one item at a time, in the same order (parsing, bounds, 64-bit
    tail), with each distinct "[body]tail" parsed and measured once: Slurm writes the
    same bracket after many prefixes. Returns the new host and character totals."""
    for prefix, rest in found:
        known = simple.get(rest)
        if known is None:
            known = simple[rest] = _simple_item(expr, rest, seen)
        groups, size, tail, tail_chars, tail_check = known
        hosts += size
        chars += size * len(prefix) + tail_chars
        if hosts > MAX_HOSTS or chars > MAX_CHARS:
            _check_bounds(expr, hosts, chars)
        texts = (prefix, tail)
        if (
            tail_check <= len(prefix)
            and tail_check <= len(prefix) - len(prefix.rstrip("0123456789"))
            and _tail_digits(texts, groups) >= 20
        ):
            _check_overflow(expr, texts, groups)
        plans.append((texts, groups, size))
    return hosts, chars


def _simple_item(expr: str, rest: str, seen: dict[str, Group]) -> _Simple:
    """What _plan_simple needs of the items ending in ``rest``, "body]tail"."""
    body, _, tail = rest.partition("]")
    group = seen.get(body)
    if group is None:
        group = seen[body] = parse_ranges(expr, body)
    size = group.size
    tail_digits = len(tail) - len(tail.rstrip("0123456789"))
    # _tail_digits of [prefix, tail], [group] is at least 20 exactly when the prefix ends
    # in this many digits or more (a tail with other characters ends the number: any
    # prefix or none); then _tail_digits decides, as for other items.
    if tail_digits < len(tail):
        tail_check = -1 if tail_digits >= 20 else len(expr) + 1
    else:
        tail_check = 20 - tail_digits - (group.widest if group.parts_split else 19)
    return [group], size, tail, size * len(tail) + group.digits, tail_check
