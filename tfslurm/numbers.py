"""The one test for a number written in the environment or on a command line, and for
an integer argument.

``str.isdigit`` and ``int()`` accept other scripts' digits (``²``, ``٣``) and blanks, which
no Slurm or tfslurm variable ever holds; every reader uses this check instead, so a hostile
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
