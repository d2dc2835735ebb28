"""The one test for a number written in the environment or on a command line.

``str.isdigit`` and ``int()`` accept other scripts' digits (``²``, ``٣``) and blanks, which
no Slurm or tfslurm variable ever holds; every reader uses this check instead, so a hostile
value is refused by the reader's own one-line error rather than by a traceback further on.
"""

from __future__ import annotations


def is_ascii_number(text: str, max_digits: int) -> bool:
    """True when ``text`` is 1 to ``max_digits`` ASCII digits (no sign, no blanks)."""
    return 0 < len(text) <= max_digits and text.isascii() and text.isdigit()
