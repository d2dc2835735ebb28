"""Slurm's natural order (``strnatcmp``), in which ``compress(sort=True)`` sorts prefixes
and names without a number.

``hostlist_sort`` ranks runs by prefix with Martin Pool's strnatcmp, which compares runs
of digits by value and reads other bytes as signed C chars. :func:`natural_key` is that
comparison transcribed as a sort key, one name at a time (the reference the tests check
against); :func:`natural_keys` builds string keys of the same order for many names in a
few C-level passes (falling back to the reference for digit runs of 4,096 digits or
more). It is a module of its own because it is a self-contained order with its own tests,
used by both compress paths.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Iterable
from typing import Any


def natural_key(name: str) -> tuple[Any, ...]:
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


_MARKED_DIGITS = 4096  # digit runs up to this long get a mark; longer: natural_key
_WIDE_MARKED_DIGITS = 127  # the same for names with other than ASCII (Latin-1 keys)
# The tables of marks (8,192 strings), built on the first sorted compress of names rather
# than at import, where they would be most of the import time every task's hook pays.
_MARKS: dict[bool, list[str]] = {}


def _marks(wide: bool) -> list[str]:
    """The mark of each digit-run length (0: of a run with a leading zero); ``wide``: for
    names with other than ASCII (see _WIDE_ORDER). Built on first use.

    A mark is '0' (ranking as any digit against other text) and a character ranking the
    run: without a leading zero, by its length; with one, first (compared as text then).
    Marks are only ever compared with marks."""
    if wide not in _MARKS:
        if wide:  # characters that stay in order in the non-ASCII part of _WIDE_ORDER
            _MARKS[wide] = ["0\x80", *("0" + chr(0x80 + n) for n in range(1, _WIDE_MARKED_DIGITS))]
        else:  # one byte per character while runs are short
            _MARKS[wide] = [
                "0\x01",
                *("0" + chr(0x80 + n if n < 0x80 else 0x100 + n) for n in range(1, _MARKED_DIGITS)),
            ]
    return _MARKS[wide]


# Keys of names with other than ASCII are made of their UTF-8 bytes (as Latin-1 text),
# whose order strnatcmp takes as signed C chars: bytes 0x80-0xFF first, then the end of
# a name (NUL), then ASCII. One bytes.translate maps them to characters of that order
# (every byte but the newline, which stays as it is, the separator between keys).
_WIDE_ORDER = bytes.maketrans(
    bytes([*range(0x80, 0x100), 0, *(c for c in range(1, 0x80) if c != 10), 10]),
    bytes([*(c for c in range(256) if c != 10), 10]),
)


def natural_keys(names: list[str], tails: bool = False) -> list[str] | None:
    """Keys that sort names as natural_key does, made in a few C-level passes over many
    names at once; None if a name has a number of 4,096 digits or more (127 or more in a
    list with a name of other than ASCII).

    Each run of digits becomes its mark (_marks) and its digits, and a run with a leading
    zero ends in U+0001 (below any digit, so a shorter run ends first). Other characters
    stay as they are; the end of a name sorts first, as its NUL does in strnatcmp. Names
    with other than ASCII are keyed by their UTF-8 bytes (_WIDE_ORDER), each ending in the
    end mark.

    ``tails``: order names that end in a number as hostrange_cmp orders hosts: by the
    name up to that number (the prefix), naturally, then by the number's width, zero-
    padded before unpadded, and value. The number is keyed as the end mark (below every
    other character of a key), the width as a character, '0' if padded or '1', and the
    digits (of that width, so they compare as the values do). A name without a number
    then sorts before the hosts of the prefix it equals, as hostrange_cmp puts a single
    host first. Names must not contain NUL or newlines.
    """
    keys: list[str] = []
    # One encoding for all names: keys of the two encodings do not compare with each other.
    wide = not all(map(str.isascii, names))
    marks = _marks(wide)
    ending = "\x00\n" if wide else "\n"  # what follows a name's last character
    for start in range(0, len(names), 1 << 13):  # bounds the memory of the pieces
        joined = ending.join(names[start : start + (1 << 13)])
        if wide:
            joined = joined.encode("utf-8", "surrogatepass").decode("latin-1") + "\x00"
        pieces = re.split("([0-9]+)", joined)  # text, digits, text, ..., text
        runs = pieces[1::2]
        if runs:
            lengths = list(map(len, runs))
            if max(lengths) >= len(marks):
                return None
            # runs with a leading zero are the digit strings below "1"
            padded = list(map(operator.lt, runs, itertools.repeat("1")))
            lengths_or_0 = map(operator.mul, lengths, map(operator.not_, padded))
            encoded = list(map(operator.add, map(marks.__getitem__, lengths_or_0), runs))
            at = list(itertools.compress(range(len(runs)), padded))
            put_at(encoded, at, map(operator.add, map(encoded.__getitem__, at), itertools.repeat("\x01")))
            if tails:  # the runs that end a name
                last = list(map(str.startswith, pieces[2::2], itertools.repeat(ending)))
                last[-1] = pieces[-1] == ending[:-1]
                at = list(itertools.compress(range(len(runs)), last))
                widths = list(map(lengths.__getitem__, at))
                # zero-padded: a leading zero and more than one digit
                flags = map(operator.and_, map(padded.__getitem__, at), map((1).__lt__, widths))
                heads = map(_tail_marks().__getitem__, map(operator.sub, map((2).__mul__, widths), flags))
                put_at(encoded, at, map(operator.add, heads, map(runs.__getitem__, at)))
            pieces[1::2] = encoded
        text = "".join(pieces)
        if wide:
            text = text.encode("latin-1").translate(_WIDE_ORDER).decode("latin-1")
        keys += text.split("\n")
    return keys


def put_at(values: list[str], at: list[int], new: Iterable[str]) -> None:
    """values[i] = the next of ``new`` for each i in ``at``, C-level (each assignment
    returns None, so any() runs them all)."""
    any(map(values.__setitem__, at, new))


_TAIL_MARKS: list[str] = []


def _tail_marks() -> list[str]:
    """For a trailing number of width w: at 2 * w, the mark of one without leading zeros;
    at 2 * w - 1, of a zero-padded one (sorting first). NUL first: the end of the prefix
    (the end mark in wide keys too, after _WIDE_ORDER); the width as U+0080 + w (in the
    part of _WIDE_ORDER that keeps its order). Built on first use."""
    if not _TAIL_MARKS:
        _TAIL_MARKS.extend(
            f"\x00{chr(0x80 + n // 2 + n % 2)}{'1' if n % 2 == 0 else '0'}" for n in range(2 * _MARKED_DIGITS)
        )
    return _TAIL_MARKS


def natural_order(names: list[str]) -> list[int]:
    """The names' positions in Slurm's natural (strnatcmp) order (stable)."""
    keys: list[str] | list[tuple[Any, ...]] | None = natural_keys(names)
    if keys is None:
        keys = list(map(natural_key, names))
    return sorted(range(len(names)), key=keys.__getitem__)


def natural_sorted(names: list[str]) -> list[str]:
    """The names in Slurm's natural (strnatcmp) order.

    Names of ASCII without digits are sorted as they are: strnatcmp then compares byte
    by byte, a name's end first, as str does; without keys and positions, the sort takes
    no memory beyond its list (700,000 such names: a third of what keys took).
    """
    text = "".join(names)
    if text.isascii() and not any(map(text.__contains__, "0123456789")):
        return sorted(names)
    del text
    return list(map(names.__getitem__, natural_order(names)))


def prefix_ranks(prefixes: Iterable[str]) -> dict[str, int]:
    """Each distinct prefix's position in Slurm's (natural) prefix order."""
    return {p: rank for rank, p in enumerate(natural_sorted(list(set(prefixes))))}
