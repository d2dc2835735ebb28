"""What a piece of tfslurm code imports beyond what the standard library pulls in by itself.

The TaskProlog path runs in every task of a --tf-dist job, so tests pin which modules it
must not import (typing, json, TensorFlow...). Some Python releases import such a module from
the standard library's own modules (3.13.18's ``dataclasses`` imports ``inspect``, which
imports ``typing``); that cost is Python's, not ours. :func:`added_by` runs the code in a
fresh ``python -I -S``, then imports only the standard-library modules it ended up with in
another, and returns the watched modules the first has and the second has not.
"""

from __future__ import annotations

import ast
import subprocess
import sys


def _run(code: str, watched: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(watched modules present, top-level stdlib modules present) after ``code``; the report
    uses builtins only, so it imports nothing itself."""
    report = (
        "import sys as _s\n"
        f"print('IMPORTCOST', repr([sorted(m for m in {watched!r} if m in _s.modules), "
        "sorted(m for m in _s.modules if '.' not in m and m in _s.stdlib_module_names)]))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-S", "-c", f"{code}\n{report}"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    line = [x for x in done.stdout.splitlines() if x.startswith("IMPORTCOST ")][-1]
    seen, stdlib = ast.literal_eval(line.split(" ", 1)[1])
    return seen, stdlib


def added_by(code: str, watched: tuple[str, ...]) -> list[str]:
    """The ``watched`` modules ``code`` imports that its standard-library modules alone do not."""
    seen, stdlib = _run(code, watched)
    # os first: importing genericpath before os (alphabetical order) fails on a circular import
    first = [m for m in stdlib if m == "os"]
    rest = [m for m in stdlib if m not in watched and m != "os"]
    baseline, _ = _run("\n".join(f"import {m}" for m in (*first, *rest)), watched)
    return sorted(set(seen) - set(baseline))
