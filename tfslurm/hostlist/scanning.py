"""Where an expression's items and brackets are: found with string methods in a short
expression, with regular expressions in a long one.

:mod:`grammar` reads an expression of up to ``grammar.SMALL_EXPR`` characters (every node
list a TaskProlog reads, in practice) with :func:`balanced`, :func:`item_end` and
:func:`plain_ranges`, and a longer one with the patterns here (:data:`BALANCED`,
:data:`ITEM_REST`, :data:`PLAIN_RANGES`, :data:`SIMPLE_RUNS`), which find and split long
runs of items and brackets of many numbers in C. Each function says which pattern it
stands for. ``re`` is imported, and a pattern compiled, on first use (:func:`pattern`):
the TaskProlog, which runs at every task start, never pays for them.
"""

from __future__ import annotations

import itertools
import operator

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the TaskProlog path)
if TYPE_CHECKING:
    import re
    from collections.abc import Iterable


def pattern(source: str) -> re.Pattern[str]:
    """``re.compile(source)``: ``re`` is imported only for long expressions, and keeps
    what it compiled."""
    import re

    return re.compile(source)


# N or N-M, numbers of at most 19 significant digits (always below 2**64) after at most
# 45 zeros (so at most 64 digits: int() takes them): parsed in bulk. Possessive (no
# backtracking): sre keeps no mark per range (the greedy form took 1.1 s and 258 MB for a
# bracket of a million numbers, this one 60 ms and nothing).
_PLAIN_NUMBER = r"(?:0{0,45}+[1-9][0-9]{0,18}+|0{1,64}+)"
PLAIN_RANGES = rf"{_PLAIN_NUMBER}(?:-{_PLAIN_NUMBER})?+(?:,{_PLAIN_NUMBER}(?:-{_PLAIN_NUMBER})?+)*+"


def plain_ranges(body: str) -> bool:
    """Whether a bracket's text is N or N-M ranges of ASCII numbers of at most 19 digits:
    a part of what PLAIN_RANGES matches, found with string methods (the rest is read range
    by range, which gives the same group)."""
    if "," not in body:  # one range (most brackets of a short expression): no lists
        low, dash, high = body.partition("-")
        return (
            body.isascii()
            and low.isdigit()
            and len(low) <= 19
            and (not dash or (high.isdigit() and len(high) <= 19))
        )
    numbers = body.replace("-", ",").split(",")
    lengths = list(map(len, numbers))
    return (
        body.isascii()
        and min(lengths) > 0
        and max(lengths) <= 19
        and "".join(numbers).isdigit()
        and max(map(str.count, body.split(","), itertools.repeat("-"))) <= 1
    )


# Brackets that pair up without nesting, and the rest of an item from its first '['
# (balanced and item_end, for short expressions).
BALANCED = r"[^\[\]]*+(?:\[[^\[\]]*+\][^\[\]]*+)*+"
ITEM_REST = r"(?:\[[^\[\]]*+\][^\[\],\t ]*+)++"


def balanced(expr: str) -> bool:
    """Whether every '[' of the expression is closed by a ']' before the next '[', and
    every ']' closes one (what BALANCED matches): no ']' before the first '[', and one
    ']' after each '[' before the next."""
    pieces = expr.split("[")
    return (
        "]" not in pieces[0]
        and expr.count("]") == len(pieces) - 1
        and all(map(str.__contains__, itertools.islice(pieces, 1, None), itertools.repeat("]")))
    )


def item_end(expr: str, bracket: int) -> int:
    """Where the item whose first '[' is at ``bracket`` ends, in a balanced expression:
    the end of what ITEM_REST matches there."""
    pos = bracket
    while True:
        pos = expr.index("]", pos) + 1
        if pos == len(expr) or expr[pos] in ",\t ":  # most groups end their item
            return pos
        stop = len(expr)  # the text after the group ends at a separator or the next '['
        for char in ",\t [":
            found = expr.find(char, pos, stop)
            if found >= 0:
                stop = found
        if stop == len(expr) or expr[stop] != "[":
            return stop
        pos = stop


# An item with one bracket group, "prefix[body]tail" (what compress writes for hosts whose
# prefixes differ, tens of thousands of them): runs of them, separated by separators only,
# are found and split with C-level passes, and planned together by the grammar. A run is matched a bounded
# number of items at a time (fewer at first) in a bounded stretch of text (as long as the
# text before it), so that an expression past a bound stops soon after the item that
# crosses it, as one read item by item does: after at most twice the text.
_SIMPLE_ITEM = r"[^\[\],\t ]*+\[[^\[\]]*+\][^\[\],\t ]*+(?!\[)"
SIMPLE_RUN_ITEMS = (16, 256, 4096)
# The pattern of a run of up to SIMPLE_RUN_ITEMS[level] items, for each level.
SIMPLE_RUNS = tuple(
    rf"{_SIMPLE_ITEM}(?:[,\t ]++{_SIMPLE_ITEM}){{0,{items - 1}}}+" for items in SIMPLE_RUN_ITEMS
)

# (prefix, "body]tail") of each item of a run.
_SIMPLE_PARTS = r"([^\[\],\t ]*+)\[([^\[\]]*+\][^\[\],\t ]*+)"


def simple_parts(expr: str, start: int, end: int) -> Iterable[tuple[str, str]]:
    """(prefix, "body]tail") of each item of the run of one-group items from start to end.

    Where one ',' separates the items (what compress writes) the run's text is split at
    its '[' and each piece, "body]tail,prefix", at its last ',' (a prefix has none):
    C-level passes that make two strings an item, where findall makes them from a match.
    """
    if any(expr.find(other, start, end) >= 0 for other in (",,", " ", "\t")):
        return pattern(_SIMPLE_PARTS).findall(expr, start, end)
    pieces = expr[start:end].split("[")
    last = pieces.pop()
    cuts = list(map(str.rpartition, itertools.islice(pieces, 1, None), itertools.repeat(",")))
    prefixes = [pieces[0], *map(operator.itemgetter(2), cuts)]
    rests = [*map(operator.itemgetter(0), cuts), last]
    return zip(prefixes, rests, strict=True)
