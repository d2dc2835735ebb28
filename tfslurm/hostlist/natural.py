"""Slurm's natural order (``strnatcmp``), in which ``compress(sort=True)`` sorts prefixes
and names without a number.

``hostlist_sort`` ranks runs by prefix with Martin Pool's strnatcmp, which compares runs
of digits by value and reads other bytes as signed C chars. :func:`_natural_key` is that
comparison transcribed as a sort key, one name at a time (the reference the tests check
against); :func:`_natural_keys` builds string keys of the same order for many names in a
few C-level passes (falling back to the reference for digit runs of 4,096 digits or
more). It is a module of its own because it is a self-contained order with its own tests,
used by both compress paths.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Iterable

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the TaskProlog path)
if TYPE_CHECKING:
    from typing import Any


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


_MARKED_DIGITS = 4096  # digit runs up to this long get a mark; longer: _natural_key
_WIDE_TEXT = {c: 0x100 + c for c in range(0x80) if c != 10}  # NUL ranks as the end
# The two tables of marks (8,192 strings), built on the first sorted compress of names
# rather than at import: they were most of this package's import time, paid by every
# task's hook.
_MARKS: dict[bool, list[str]] = {}


def _marks(wide: bool) -> list[str]:
    """The mark of each digit-run length below _MARKED_DIGITS; ``wide``: for names with
    other than ASCII. Both tables are built on first use."""
    if len(_MARKS) < 2:
        # '0' and a character ranking a digit run without a leading zero by its length (above
        # U+0001, which marks runs with one); one byte per character while runs are short.
        run_marks = ["0" + chr(0x80 + n if n < 0x80 else 0x100 + n) for n in range(_MARKED_DIGITS)]
        # For names with other than ASCII, whose UTF-8 bytes sort as signed chars (before the end
        # of a name): those bytes stay U+0080-U+00FF, the end of a name becomes U+0100, and ASCII
        # characters (and the '0' a digit run starts with) move up to U+0101-U+017F.
        wide_marks = [chr(0x130) + mark[1:] for mark in run_marks]
        _MARKS.update({False: run_marks, True: wide_marks})
    return _MARKS[wide]


def _natural_keys(names: list[str], tails: bool = False) -> list[str] | None:
    """Keys that sort names as _natural_key does, made in a few C-level passes over many
    names at once; None if a name has a 4096-digit number.

    Each run of digits becomes '0' (where _natural_key's 48 stands), then a character
    ranking like _natural_key's next fields: for a run without a leading zero, one above
    U+0080 + its length, then the digits; for one with a leading zero, U+0001, the digits
    and U+0001 again (below any digit, so a shorter run ends first). Other characters
    stay as they are; the end of a name sorts first, as its NUL does in strnatcmp. Names
    with other than ASCII are keyed by their UTF-8 bytes (see _marks).

    ``tails``: order names that end in a number as hostrange_cmp orders hosts: by the
    name up to that number (the prefix), naturally, then by the number's width, zero-
    padded before unpadded, and value. The number is keyed as a mark of the prefix's end
    (NUL, or U+0100 for other than ASCII: below every other character of a key), the
    width as a character, '0' if padded or '1', and the digits (of that width, so they
    compare as the values do). A name without a number then sorts before the hosts of
    the prefix it equals, as hostrange_cmp puts a single host first. Names must not
    contain NUL.
    """
    keys: list[str] = []
    # One encoding for all names: keys of the two encodings do not compare with each other.
    wide = not all(map(str.isascii, names))
    end = "\u0100" if wide else "\x00"
    for start in range(0, len(names), 1 << 16):  # bounds the memory of the pieces
        joined = "\n".join(names[start : start + (1 << 16)])
        if wide:
            joined = joined.encode("utf-8", "surrogatepass").decode("latin-1")
        pieces = re.split("([0-9]+)", joined)  # text, digits, text, ..., text
        runs = pieces[1::2]
        if runs:
            lengths = list(map(len, runs))
            if max(lengths) >= _MARKED_DIGITS:
                return None
            marks = _marks(wide)
            encoded = list(map(operator.add, map(marks.__getitem__, lengths), runs))
            # runs with a leading zero are the digit strings below "1"
            padded = list(map(operator.lt, runs, itertools.repeat("1")))
            at = list(itertools.compress(range(len(runs)), padded))
            texts = map(runs.__getitem__, at)
            lead = marks[0][0] + "\x01"
            _put(
                encoded,
                at,
                map(operator.add, map(operator.add, itertools.repeat(lead), texts), itertools.repeat("\x01")),
            )
            if tails:  # the runs that end a name: the text after them starts a new one
                ending = list(map(str.startswith, pieces[2::2], itertools.repeat("\n")))
                ending[-1] = not pieces[-1]
                at = list(itertools.compress(range(len(runs)), ending))
                widths = list(map(lengths.__getitem__, at))
                # zero-padded: a leading zero and more than one digit
                flags = map(operator.and_, map(padded.__getitem__, at), map((1).__lt__, widths))
                heads = map(_tail_marks(end).__getitem__, map(operator.sub, map((2).__mul__, widths), flags))
                _put(encoded, at, map(operator.add, heads, map(runs.__getitem__, at)))
            pieces[1::2] = encoded
        if wide:
            pieces[::2] = [text.translate(_WIDE_TEXT) for text in pieces[::2]]
            keys += map(operator.add, "".join(pieces).split("\n"), itertools.repeat("\u0100"))
        else:
            keys += "".join(pieces).split("\n")
    return keys


def _put(values: list[str], at: list[int], new: Iterable[str]) -> None:
    """values[i] = the next of ``new`` for each i in ``at``, C-level (each assignment
    returns None, so any() runs them all)."""
    any(map(values.__setitem__, at, new))


_TAIL_MARKS: dict[str, list[str]] = {}


def _tail_marks(end: str) -> list[str]:
    """For a trailing number of width w: at 2 * w, the mark of one without leading zeros;
    at 2 * w - 1, of a zero-padded one (sorting first). Built on first use."""
    if end not in _TAIL_MARKS:
        _TAIL_MARKS[end] = [
            f"{end}{chr(0x30 + n // 2 + n % 2)}{'1' if n % 2 == 0 else '0'}"
            for n in range(2 * _MARKED_DIGITS)
        ]
    return _TAIL_MARKS[end]


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
