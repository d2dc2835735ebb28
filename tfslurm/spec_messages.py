"""The jobs-spec error messages: one table, ``data/spec_messages.def``, that the SPANK
plugin compiles in (``plugin/src/spec.c``) and this module reads, so that a bad spec reads
the same in srun's error and in Python's. Each entry is ``TFD_SPEC_MESSAGE(KEY, "text")``
with ``%s`` placeholders only, which C and Python fill alike.

Loaded only when a spec is refused (``tfslurm.jobspec``): the TaskProlog hook of a valid
spec never imports it, nor ``re`` and ``importlib.resources``.
"""

from __future__ import annotations

import functools
import re
from importlib.resources import files

_ENTRY = re.compile(r'^TFD_SPEC_MESSAGE\((\w+), "([^"\\]*)"\)$', re.MULTILINE)


@functools.cache
def _table() -> dict[str, str]:
    text = files("tfslurm").joinpath("data", "spec_messages.def").read_text("ascii")
    return dict(_ENTRY.findall(text))


def message(key: str, *args: str) -> str:
    """Message ``key`` of the table, its ``%s`` filled with ``args`` in order."""
    return _table()[key] % args
