"""Reading hostlists: :func:`expand`, :func:`count`, :func:`nth`, :func:`index_of`, and
Slurm's task-count lists (:func:`expand_counts`).

Each of the first four starts from :func:`grammar.plan`, which has parsed and
size-checked the whole expression, so what is left here is writing the hosts (expand:
whole items as one text, split once) or finding them arithmetically without writing them
(count, nth, index_of). ``expand_counts`` reads Slurm's other list format (``2(x3),1``,
``SLURM_STEP_TASKS_PER_NODE``); it is the reading half of ``compress_counts``, which is
in :mod:`compression`.
"""

from __future__ import annotations

import itertools

from tfslurm.errors import HostlistError, clip
from tfslurm.hostlist.grammar import MAX_HOSTS, plain_expression, plan, show
from tfslurm.hostlist.groups import Group, item_prefixes, item_text, prefixed_text
from tfslurm.numbers import is_int_in

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the TaskProlog path)
if TYPE_CHECKING:
    from collections.abc import Sequence


def expand(expr: str) -> list[str]:
    """Every host of a Slurm hostlist, in Slurm's order, duplicates kept.

    ``expand("n[1-2],m[01-02]-ib")`` is ``['n1', 'n2', 'm01-ib', 'm02-ib']``.
    """
    if isinstance(expr, str) and "[" not in expr and "]" not in expr:
        return plain_expression(expr)
    parts: list[list[str]] = []
    texts_of_items: list[str] = []  # ",host,host" of neighbouring small items, split together
    templates: dict[tuple[Group, str], str] = {}
    for texts, groups, size in plan(expr):
        hosts: list[str] | None = None
        if not groups:
            assert isinstance(texts, list)  # bracket-free hosts, as plain_hosts made them
            hosts = texts
        elif size > 4096:
            hosts = _item_hosts(texts, groups)
        elif len(groups) == 1:
            # The hosts of each (group, tail) are written once, with a NUL where the
            # prefix goes (no number holds one: they are digits).
            key = (groups[0], texts[1])
            template = templates.get(key)
            if template is None:
                template = templates[key] = _hosts_template(*key)
            if template:
                texts_of_items.append(template.replace("\x00", texts[0]))
                continue
        if hosts is None:
            texts_of_items.append(item_text(texts, groups))
            continue
        if texts_of_items:
            parts.append(_split_hosts("".join(texts_of_items)))
            texts_of_items = []
        parts.append(hosts)
    del templates  # and with it the parsed groups (the plan is gone) before the hosts are split
    if texts_of_items:
        parts.append(_split_hosts("".join(texts_of_items)))
    if len(parts) == 1:
        return parts[0]
    return list(itertools.chain.from_iterable(parts))


def _hosts_template(group: Group, tail: str) -> str:
    """``",<NUL><n><tail>"`` for every number n of the group: item_text of an item of this
    group and tail, with its prefix put in place of each NUL; "" if the tail holds a NUL."""
    if "\x00" in tail:
        return ""
    return ",\x00" + group.joined().replace(",", f"{tail},\x00") + tail


def _item_hosts(texts: Sequence[str], groups: list[Group]) -> list[str] | None:
    """The hosts of a large item, split right out of its text with no copy between: one
    of several groups (``rack[1-25]-n[001-400]``), or one group that is a bracket of
    single numbers (what Slurm writes for scattered hosts); None for other items."""
    tail = texts[-1]
    group = groups[-1]
    prefixes = item_prefixes(texts, groups)
    if len(prefixes) > 1:
        return prefixed_text(prefixes, group.joined().split(","), tail).split(",")
    if group.parts_split or group.spans:
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


def count(expr: str) -> int:
    """How many hosts ``expand(expr)`` returns, without building the hosts of brackets."""
    if isinstance(expr, str) and "[" not in expr and "]" not in expr:
        return len(expand(expr))
    return sum(size for _, _, size in plan(expr))


def _pick(groups: list[Group], texts: Sequence[str], index: int) -> str:
    """The host at ``index`` of one item, by Slurm's loop nesting (see item_prefixes)."""
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
    plans = plan(expr)
    total = sum(size for _, _, size in plans)
    if not is_int_in(index):
        raise HostlistError(f"bad host index {clip(repr(index))} for {show(expr)}: not an integer")
    position = index + total if index < 0 else index
    if not 0 <= position < total:
        raise HostlistError(f"host index {index} is out of range for {show(expr)} ({total} hosts)")
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
    plans = plan(expr)
    if not isinstance(host, str):
        raise HostlistError(f"bad host {clip(repr(host))} for {show(expr)}: host names are strings")
    start = 0
    for texts, groups, size in plans:
        found = _index_in_item(texts, groups, host)
        if found is not None:
            return start + found
        start += size
    raise HostlistError(f"host {show(host, 60)} is not in {show(expr)}")


def _index_in_item(texts: Sequence[str], groups: list[Group], host: str) -> int | None:
    if not groups:
        return texts.index(host) if host in texts else None
    if len(groups) > 1:
        hosts = item_text(texts, groups)[1:].split(",")
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
            raise HostlistError(f"bad count list {show(expr)}: number too large in {show(item, 40)}")
        repeat = int(repeat_text.lstrip("0") or "0")  # no int() of huge digit strings
        if repeat < 1:
            raise HostlistError(f"bad count list {show(expr)}: repeat count of {show(item, 40)} must be >= 1")
        total += repeat
        if total > MAX_HOSTS:
            raise HostlistError(f"bad count list {show(expr)}: expands to more than {MAX_HOSTS} entries")
        parsed.append((int(value_text.lstrip("0") or "0"), repeat))
    out: list[int] = []
    for value, repeat in parsed:
        out.extend([value] * repeat)
    return out


def _count_fail(expr: str, item: str) -> HostlistError:
    return HostlistError(f"bad count list {show(expr)}: item {show(item, 40)} is not N or N(xK)")
