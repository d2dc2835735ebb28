"""Slurm hostlists and task-count lists, parsed and written exactly as Slurm does.

Every Slurm variable tfslurm reads (``SLURM_STEP_NODELIST``, ``SLURM_JOB_NODELIST``,
``SLURM_STEP_TASKS_PER_NODE``, ...) is written by Slurm's own ``hostlist.c``, so this
module reproduces that code's results rather than a "nicer" set-like reading: order and
duplicates are kept, widths come from the text of the low bound, and several bracket
groups expand in Slurm's own (odd) order.

Grammar accepted by :func:`expand` (``docs/hostlist.md`` has the full description)::

    expr   := item ( SEP+ item )*         SEP is ',', ' ', '\\t' or '\\n'; empty items skipped
    item   := text ( '[' ranges ']' text )*
    ranges := range ( ',' range )*
    range  := DIGITS | DIGITS '-' DIGITS  low <= high, at most 65,536 hosts
    text   := any characters except SEP, '[' and ']'

Where Slurm 22.05 (Debian 12) and newer Slurm differ, newer Slurm is followed:

* text after the last ``]`` (``node[1-2]-ib``) is a shared suffix (Slurm >= 23.11;
  22.05 rejects it);
* an unclosed ``[`` (``n[1-3``) is an error (Slurm >= 23.02; 22.05 tacks on a ``]``).

tfslurm is also stricter than Slurm in a few places where Slurm's C parser accepts
garbage by accident (``strtoul`` skipping blanks and ``+``, ``n[1-]`` meaning ``n1``,
stray or nested brackets becoming part of host names): those are errors here.

Everything this module raises for bad input is :class:`HostlistError`, with a one-line
message naming the input and the offending part. Sizes are checked before anything is
allocated: see :data:`MAX_RANGE_HOSTS`, :data:`MAX_HOSTS` and :data:`MAX_CHARS`.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from tfslurm.errors import HostlistError

__all__ = [
    "HostlistError",
    "MAX_CHARS",
    "MAX_HOSTS",
    "MAX_RANGE_HOSTS",
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

_SEPARATORS = ",\t\n "
_DIGITS = frozenset("0123456789")
_ULONG_MAX = (1 << 64) - 1


def _show(text: str, limit: int = 120) -> str:
    """repr() of user text, shortened so an error message stays one readable line."""
    if len(text) > limit:
        return repr(text[: limit - 20]) + f"...(+{len(text) - limit + 20} chars)"
    return repr(text)


def _fail(expr: str, what: str) -> HostlistError:
    return HostlistError(f"bad hostlist {_show(expr)}: {what}")


# A range list is kept as tuples (low, high, width): the hosts low..high, each number
# zero-padded to width digits (the length of the low bound's text, as Slurm does).
_Range = tuple[int, int, int]


def _parse_ranges(expr: str, body: str) -> list[_Range]:
    if not body:
        raise _fail(expr, "empty brackets '[]'")
    ranges: list[_Range] = []
    for part in body.split(","):
        low_text, dash, high_text = part.partition("-")
        if not low_text or not set(low_text) <= _DIGITS:
            raise _fail(expr, f"range {part!r} in '[{body}]' must be N or N-M with digits only")
        if dash and (not high_text or not set(high_text) <= _DIGITS):
            raise _fail(expr, f"range {part!r} in '[{body}]' must be N or N-M with digits only")
        low = _number(expr, low_text)
        high = _number(expr, high_text) if dash else low
        if high < low:
            raise _fail(expr, f"reversed range {part!r} in '[{body}]'")
        if high - low + 1 > MAX_RANGE_HOSTS:
            raise _fail(
                expr, f"range {part!r} has {high - low + 1} hosts, over Slurm's {MAX_RANGE_HOSTS}"
            )
        ranges.append((low, high, len(low_text)))
    return ranges


def _number(expr: str, digits: str) -> int:
    # Slurm reads numbers as C unsigned longs; also keeps int() clear of Python's limit
    # on the length of digit strings.
    significant = digits.lstrip("0")
    if len(significant) > 20 or (significant and int(significant) > _ULONG_MAX):
        raise _fail(expr, f"number {_show(digits, 40)} is larger than Slurm's 64-bit limit")
    return int(significant or "0")


def _split_items(expr: str) -> list[str]:
    """Split at separators outside brackets; reject unbalanced or nested brackets."""
    items: list[str] = []
    start = 0
    depth = 0
    open_at = -1
    for pos, char in enumerate(expr):
        if char == "[":
            if depth:
                raise _fail(expr, f"nested '[' at offset {pos}")
            depth = 1
            open_at = pos
        elif char == "]":
            if not depth:
                raise _fail(expr, f"']' without '[' at offset {pos}")
            depth = 0
        elif not depth and char in _SEPARATORS:
            if pos > start:
                items.append(expr[start:pos])
            start = pos + 1
    if depth:
        raise _fail(expr, f"'[' at offset {open_at} is never closed")
    if len(expr) > start:
        items.append(expr[start:])
    return items


def _parse_item(expr: str, item: str) -> tuple[list[str], list[list[_Range]]]:
    """Split ``a[..]b[..]c`` into texts ``[a, b, c]`` and the groups' range lists."""
    texts: list[str] = []
    groups: list[list[_Range]] = []
    rest = item
    while True:
        head, bracket, tail = rest.partition("[")
        texts.append(head)
        if not bracket:
            return texts, groups
        body, _, rest = tail.partition("]")  # _split_items guarantees the ']'
        groups.append(_parse_ranges(expr, body))


def _group_size(ranges: list[_Range]) -> int:
    return sum(high - low + 1 for low, high, _ in ranges)


def _group_numbers(ranges: list[_Range]) -> list[str]:
    return [f"{n:0{width}d}" for low, high, width in ranges for n in range(low, high + 1)]


def _item_plan(expr: str, item: str) -> tuple[list[str], list[list[_Range]], int, int]:
    """Parse one item and return (texts, groups, host count, total name length)."""
    texts, groups = _parse_item(expr, item)
    hosts = 1
    chars = sum(len(t) for t in texts)  # length of every name, without the numbers
    for index, ranges in enumerate(groups):
        size = _group_size(ranges)
        if index < len(groups) - 1 and size > MAX_RANGE_HOSTS:
            raise _fail(
                expr,
                f"bracket group {index + 1} of {_show(item, 60)} has {size} hosts, "
                f"over Slurm's {MAX_RANGE_HOSTS} for a non-final group",
            )
        hosts *= size
    if not groups:
        return texts, groups, 1, chars
    # Every host carries one number from each group; bound the longest possible name.
    widest = sum(max(max(w, len(str(high))) for _, high, w in ranges) for ranges in groups)
    return texts, groups, hosts, hosts * (chars + widest)


def _expand_item(texts: list[str], groups: list[list[_Range]]) -> list[str]:
    if not groups:
        return [texts[0]]
    # Slurm's order (``_push_range_list`` recursing on the prefix): the last group is the
    # innermost loop, the second-to-last the outermost, then the third-to-last, ...,
    # the first group. Each earlier group is therefore folded in as a new *outer* loop.
    prefixes = [texts[0]]
    for index in range(len(groups) - 1):
        glue = texts[index + 1]
        numbers = _group_numbers(groups[index])
        prefixes = [p + n + glue for n in numbers for p in prefixes]
    tail = texts[-1]
    out: list[str] = []
    for prefix in prefixes:
        for low, high, width in groups[-1]:
            if width <= len(str(low)):  # numbers only grow: no padding needed
                out.extend([f"{prefix}{n}{tail}" for n in range(low, high + 1)])
            else:
                out.extend([f"{prefix}{n:0{width}d}{tail}" for n in range(low, high + 1)])
    return out


def _plan(expr: str) -> list[tuple[list[str], list[list[_Range]], int]]:
    """Parse and size-check a whole expression without expanding it."""
    if not isinstance(expr, str):
        raise HostlistError(f"bad hostlist {expr!r}: expected a string, got {type(expr).__name__}")
    plans = []
    hosts = 0
    chars = 0
    for item in _split_items(expr):
        texts, groups, item_hosts, item_chars = _item_plan(expr, item)
        hosts += item_hosts
        chars += item_chars
        if hosts > MAX_HOSTS:
            raise _fail(expr, f"expands to more than {MAX_HOSTS} hosts (tfslurm's bound)")
        if chars > MAX_CHARS:
            raise _fail(expr, f"expands to more than {MAX_CHARS} characters (tfslurm's bound)")
        plans.append((texts, groups, item_hosts))
    return plans


def expand(expr: str) -> list[str]:
    """Every host of a Slurm hostlist, in Slurm's order, duplicates kept.

    ``expand("n[1-2],m[01-02]-ib")`` is ``['n1', 'n2', 'm01-ib', 'm02-ib']``.
    """
    if isinstance(expr, str) and "[" not in expr and "]" not in expr:
        if len(expr) > MAX_CHARS:
            raise _fail(expr, f"longer than {MAX_CHARS} characters (tfslurm's bound)")
        hosts = expr.replace("\t", ",").replace("\n", ",").replace(" ", ",").split(",")
        if "" in hosts:
            hosts = [h for h in hosts if h]
        if len(hosts) > MAX_HOSTS:
            raise _fail(expr, f"has more than {MAX_HOSTS} hosts (tfslurm's bound)")
        return hosts
    out: list[str] = []
    for texts, groups, _ in _plan(expr):
        out.extend(_expand_item(texts, groups))
    return out


def expand_counts(expr: str) -> list[int]:
    """Expand a Slurm task-count list: ``"2(x3),1"`` is ``[2, 2, 2, 1]``.

    This is the format of ``SLURM_STEP_TASKS_PER_NODE`` and ``SLURM_JOB_CPUS_PER_NODE``:
    comma-separated ``N`` or ``N(xK)`` (N repeated K times). Blanks around items are
    ignored; empty items are errors (Slurm never writes them).
    """
    if not isinstance(expr, str):
        raise HostlistError(f"bad count list {expr!r}: expected a string, got {type(expr).__name__}")
    if not expr.strip():
        return []
    parsed: list[tuple[int, int]] = []
    total = 0
    for raw in expr.split(","):
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
            raise HostlistError(f"bad count list {_show(expr)}: number too large in {item!r}")
        repeat = int(repeat_text)
        if repeat < 1:
            raise HostlistError(f"bad count list {_show(expr)}: repeat count of {item!r} must be >= 1")
        total += repeat
        if total > MAX_HOSTS:
            raise HostlistError(
                f"bad count list {_show(expr)}: expands to more than {MAX_HOSTS} entries"
            )
        parsed.append((int(value_text), repeat))
    out: list[int] = []
    for value, repeat in parsed:
        out.extend([value] * repeat)
    return out


def _count_fail(expr: str, item: str) -> HostlistError:
    return HostlistError(
        f"bad count list {_show(expr)}: item {_show(item, 40)} is not N or N(xK)"
    )


def compress_counts(counts: Iterable[int]) -> str:
    """Write counts as Slurm does: runs of two or more as ``N(xK)``, never ``(x1)``.

    ``compress_counts([2, 2, 2, 1])`` is ``"2(x3),1"``; ``[]`` gives ``""``.
    """
    parts: list[str] = []
    previous: int | None = None
    run = 0
    for value in counts:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise HostlistError(f"bad count {value!r}: counts must be non-negative integers")
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
    """How many hosts ``expand(expr)`` returns, without building them."""
    return sum(size for _, _, size in _plan(expr))


def _pick(expr: str, groups: list[list[_Range]], texts: list[str], index: int) -> str:
    """The host at ``index`` of one item, by Slurm's loop nesting (see _expand_item)."""
    sizes = [_group_size(g) for g in groups]
    index, last = divmod(index, sizes[-1])
    chosen = [0] * len(groups)
    chosen[-1] = last
    for g in range(len(groups) - 1):  # group 1 varies fastest after the last group
        index, chosen[g] = divmod(index, sizes[g])
    parts = [texts[0]]
    for g, ranges in enumerate(groups):
        offset = chosen[g]
        for low, high, width in ranges:
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
        raise HostlistError(f"bad host index {index!r} for {_show(expr)}: not an integer")
    position = index + total if index < 0 else index
    if not 0 <= position < total:
        raise HostlistError(f"host index {index} is out of range for {_show(expr)} ({total} hosts)")
    for texts, groups, size in plans:
        if position < size:
            return texts[0] if not groups else _pick(expr, groups, texts, position)
        position -= size
    raise AssertionError("unreachable: position was checked against the total")


def index_of(expr: str, host: str) -> int:
    """Index of the first occurrence of ``host`` in ``expand(expr)``.

    Items with at most one bracket group are searched arithmetically; items with
    several groups (rare, user-written) are expanded one at a time.
    """
    start = 0
    for texts, groups, size in _plan(expr):
        found = _index_in_item(texts, groups, host)
        if found is not None:
            return start + found
        start += size
    raise HostlistError(f"host {_show(host, 60)} is not in {_show(expr)}")


def _index_in_item(texts: list[str], groups: list[list[_Range]], host: str) -> int | None:
    if not groups:
        return 0 if host == texts[0] else None
    if len(groups) > 1:
        hosts = _expand_item(texts, groups)
        return hosts.index(host) if host in hosts else None
    head, tail = texts
    if len(host) <= len(head) + len(tail) or not host.startswith(head) or not host.endswith(tail):
        return None
    digits = host[len(head) : len(host) - len(tail)]
    if not (digits.isascii() and digits.isdigit()) or len(digits.lstrip("0")) > 20:
        return None
    value = int(digits)
    offset = 0
    for low, high, width in groups[0]:
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
_BAD_HOST_CHARS = ",\t\n []"


def _digits_of(number: int) -> int:
    return len(str(number))


def _width_equiv(a: list, b: list) -> bool:
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


def _check_hosts(hosts: Iterable[str]) -> list[str]:
    if isinstance(hosts, str):
        raise HostlistError(
            f"compress() takes a list of host names, not the string {_show(hosts, 60)}: "
            "use compress(expand(text))"
        )
    try:
        hosts = list(hosts)
        joined = "\n".join(hosts)
    except TypeError:
        bad = next((h for h in hosts if not isinstance(h, str)), None)
        raise HostlistError(f"bad host {bad!r}: host names must be strings") from None
    if hosts and (
        any(c in joined for c in ",\t []\x00")
        or joined.count("\n") != len(hosts) - 1
        or "" in hosts
    ):
        bad = next(h for h in hosts if not h or any(c in h for c in _BAD_HOST_CHARS + "\x00"))
        raise HostlistError(
            f"bad host name {bad!r}: names must be non-empty, without blanks, ',', '[' or ']'"
        )
    return hosts


def _runs(hosts: list[str]) -> list[list]:
    """Slurm's hostlist_push_host for each host: join onto the last run when consecutive."""
    runs: list[list] = []
    last: list | None = None
    for host in hosts:
        prefix = host.rstrip("0123456789")
        if len(prefix) == len(host):
            last = [host, -1, -1, 0]
            runs.append(last)
            continue
        digits = host[len(prefix) :]
        if len(digits) > 20 and len(digits.lstrip("0")) > 20:
            # Slurm mangles numbers over 64 bits; keep such a host intact as a name.
            last = [host, -1, -1, 0]
            runs.append(last)
            continue
        number = int(digits)
        if number > _ULONG_MAX:
            last = [host, -1, -1, 0]
            runs.append(last)
            continue
        run = [prefix, number, number, len(digits)]
        if (
            last is not None
            and last[_HI] + 1 == number
            and last[_LO] >= 0
            and last[_PREFIX] == prefix
            and _width_equiv(last, run)
        ):
            last[_HI] = number
        else:
            runs.append(run)
            last = run
    return runs


def _sort_key(run: list) -> tuple:
    """hostrange_cmp as a key: prefix, single hosts first, then by width class and number.

    Slurm compares runs of one prefix by low number when their widths are compatible and
    by width otherwise. For runs whose low numbers differ by less than 2**31 that is the
    total order below: a run whose low number is shorter than its width (zero-padded)
    ranks by (width, padded first, number); an unpadded one by (its digit count, number).
    """
    if run[_LO] < 0:
        return (run[_PREFIX], 0)
    digits = _digits_of(run[_LO])
    if digits < run[_WIDTH]:
        return (run[_PREFIX], 1, run[_WIDTH], 0, run[_LO])
    return (run[_PREFIX], 1, digits, 1, run[_LO])


def _coalesce(runs: list[list]) -> list[list]:
    """Slurm's hostlist_coalesce over sorted runs: split overlapping runs at the overlap.

    Slurm walks pairs right to left and restarts from the end after each split. Only the
    two split runs change, so every pair right of (right half, its right neighbour) was
    already checked and fails again: resuming at that pair (a stack instead of a
    restart) visits the same pairs in the same order, without Slurm's quadratic rescans.
    """
    left = runs
    right: list[list] = []  # processed runs, reversed: right[-1] is the leftmost
    if left:
        right.append(left.pop())
    while left:
        prev, nxt = left[-1], right[-1]
        if (
            prev[_LO] >= 0
            and nxt[_LO] >= 0
            and prev[_PREFIX] == nxt[_PREFIX]
            and prev[_HI] > nxt[_LO]
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


def _collapse(runs: list[list]) -> list[list]:
    """Slurm's hostlist_collapse: join neighbouring consecutive runs, right to left."""
    if not runs:
        return runs
    out: list[list] = []
    current = runs[-1]
    for run in reversed(runs[:-1]):
        if (
            run[_LO] >= 0
            and current[_LO] >= 0
            and run[_PREFIX] == current[_PREFIX]
            and run[_HI] + 1 == current[_LO]
            and _width_equiv(run, current)
        ):
            run[_HI] = current[_HI]
        else:
            out.append(current)
        current = run
    out.append(current)
    out.reverse()
    return out


def _ranged_string(runs: list[list]) -> str:
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
                numbers.append(f"{low:0{width}d}-{high:0{width}d}")
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


def compress(hosts: Iterable[str], sort: bool = False) -> str:
    """The hostlist string ``scontrol show hostlist`` prints for these hosts.

    Order and duplicates are kept and only neighbouring hosts of one prefix are merged
    (``["n2", "n1", "n3"]`` gives ``"n[2,1,3]"``). ``sort=True`` gives what
    ``scontrol show hostlistsorted`` prints (sorted, duplicates still kept). Host names
    must be non-empty and free of blanks, commas and brackets, since the result would
    not read back as the same hosts otherwise.
    """
    runs = _runs(_check_hosts(hosts))
    if sort and len(runs) > 1:
        runs.sort(key=_sort_key)
        runs = _collapse(_coalesce(runs))
    return _ranged_string(runs)
