"""The one reading of a number written in the environment, a descriptor, JSON or on a
command line, and the one check of an integer argument.

``str.isdigit`` and ``int()`` accept other scripts' digits (``²``, ``٣``) and blanks, which
no Slurm or tfslurm variable ever holds, and ``int()`` raises its own ValueError for more
than 4,300 digits (CPython's limit on converting text to integers). Every reader converts
through :func:`ascii_int`, which bounds the digits before ``int()`` sees them, so a hostile
value is refused by the reader's own one-line error rather than by a traceback further on.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a TaskProlog imports this)
if TYPE_CHECKING:
    from typing import TypeGuard


def is_int_in(value: object, low: int | None = None, high: int | None = None) -> TypeGuard[int]:
    """True when ``value`` is an ``int`` (not a ``bool``, which is one in Python) within
    ``low``..``high`` (either bound optional): the one check of an integer argument."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return (low is None or value >= low) and (high is None or value <= high)


def is_ascii_number(text: str, max_digits: int) -> bool:
    """True when ``text`` is 1 to ``max_digits`` ASCII digits (no sign, no blanks)."""
    return 0 < len(text) <= max_digits and text.isascii() and text.isdigit()


def ascii_int(text: str, max_digits: int = 19) -> int | None:
    """``text`` as an integer when it is 1 to ``max_digits`` ASCII digits, else None (the
    caller raises its one-line error naming the input). 19 digits hold any 64-bit count."""
    return int(text) if is_ascii_number(text, max_digits) else None
