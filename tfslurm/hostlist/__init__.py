"""Slurm hostlists and task-count lists, parsed and written exactly as Slurm does.

Every Slurm variable tfslurm reads (``SLURM_STEP_NODELIST``, ``SLURM_JOB_NODELIST``,
``SLURM_STEP_TASKS_PER_NODE``, ...) is written by Slurm's own ``hostlist.c``, so this
package reproduces that code's results rather than a "nicer" set-like reading: order and
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
number past 2**64 - 1 (Slurm saturates it), and a range of several hosts ending at
2**64 - 1 (Slurm crashes on it), in expand, count and compress alike.

tfslurm is also stricter than Slurm in a few places where Slurm's C parser accepts
garbage by accident (``strtoul`` skipping blanks and ``+``, ``n[1-]`` meaning ``n1``,
stray or nested brackets becoming part of host names): those are errors here.

Everything this package raises for bad input is :class:`HostlistError`, with a one-line
message naming the input and the offending part. Sizes are checked before anything is
allocated: see :data:`MAX_RANGE_HOSTS`, :data:`MAX_HOSTS` and :data:`MAX_CHARS`.

The public API is what this module exports; the modules behind it, each importing only
those above it in this list:

* ``groups``: a parsed bracket group, and writing the hosts of a parsed item;
* ``scanning``: where an expression's items and brackets are (string methods for a short
  expression, regular expressions, compiled on first use, for a long one);
* ``grammar``: parsing and size-checking an expression (the bounds, the error wording);
* ``expansion``: expand, count, nth, index_of, expand_counts;
* ``natural``: Slurm's natural (strnatcmp) order, for sorted compress;
* ``compression``: compress (Slurm's code transcribed host by host, and the same
  algorithm column-wise) and compress_counts.

Names without a leading underscore in those modules are the package's internal API:
shared between its modules (and reached by its tests), not part of the public API, which
is ``__all__`` here. No module imports another's underscore name.

The modules are not named after the functions (``expand``, ``compress``) so that
``tfslurm.hostlist.expand`` is always the function.
"""

from __future__ import annotations

from tfslurm.errors import HostlistError
from tfslurm.hostlist.expansion import count, expand, expand_counts, index_of, nth
from tfslurm.hostlist.grammar import MAX_CHARS, MAX_HOSTS, MAX_RANGE_HOSTS

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from tfslurm.hostlist.compression import compress, compress_counts

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


def __getattr__(name: str) -> object:
    # compress is imported on first use: the TaskProlog only expands (Slurm gives the step's
    # node list compressed), and compression with the natural order is a third of the package.
    if name in ("compress", "compress_counts"):
        from tfslurm.hostlist import compression  # the hook compresses for an error message only

        return getattr(compression, name)
    raise AttributeError(f"module 'tfslurm.hostlist' has no attribute {name!r}")
