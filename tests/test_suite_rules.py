"""Rules the test suite keeps about itself, each with a test that plants a violation and
sees the rule catch it:

* no test waits for a state with a fixed ``time.sleep`` of a second or more (poll with a
  deadline; a child program that must run a long time waits on a primitive instead, such
  as ``signal.pause()``);
* no module under ``tests/`` imports from a ``test_*`` module (shared helpers live in
  helper modules named for their concept);
* no file under ``tests/`` is over 800 lines (split it by concept).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

import pytest

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

TESTS = Path(__file__).resolve().parent
MAX_LINES = 800
SLEEP = "time.sleep"  # spelt apart from its arguments below, so this file plants no violation
LONG_SLEEP = re.compile(r"\btime\.sleep\(\s*(\d+(?:\.\d*)?|\.\d+)\s*\)")

Rule = Callable[[str], list[str]]


def long_sleeps(source: str) -> list[str]:
    """Each ``time.sleep(N)`` with a literal N of one second or more."""
    return [found.group(0) for found in LONG_SLEEP.finditer(source) if float(found.group(1)) >= 1]


def imports_of_test_modules(source: str) -> list[str]:
    """Each import of a ``test_*`` module."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return [f"import of {name}" for name in names if name.split(".")[0].startswith("test_")]


def too_long(source: str) -> list[str]:
    lines = len(source.splitlines())
    return [f"{lines} lines (at most {MAX_LINES})"] if lines > MAX_LINES else []


def violations(root: Path, rule: Rule) -> dict[str, list[str]]:
    """File (relative to ``root``) -> what ``rule`` finds in it, for every Python file."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        hits = rule(path.read_text(encoding="utf-8"))
        if hits:
            found[str(path.relative_to(root))] = hits
    return found


def test_no_fixed_sleep_of_a_second_or_more() -> None:
    found = violations(TESTS, long_sleeps)
    assert found == {}, "wait for the state with a deadline instead of sleeping a fixed time"


def test_no_module_imports_a_test_module() -> None:
    assert violations(TESTS, imports_of_test_modules) == {}, "move the shared helper into a helper module"


def test_no_file_over_the_line_limit() -> None:
    assert violations(TESTS, too_long) == {}, "split the file by concept"


def test_the_sleep_rule_catches_a_planted_sleep(tmp_path: Path) -> None:
    (tmp_path / "test_planted.py").write_text(
        f"import time\n{SLEEP}(0.1)\n{SLEEP}(0.99)\n{SLEEP}(1)\n{SLEEP}( 2.5 )\n"
        f"child = 'import time; {SLEEP}(30)'\n"
    )
    (tmp_path / "test_clean.py").write_text(f"import time\n{SLEEP}(0.2)\nsleep = 'sleep 60'\n")
    assert violations(tmp_path, long_sleeps) == {
        "test_planted.py": [f"{SLEEP}(1)", f"{SLEEP}( 2.5 )", f"{SLEEP}(30)"]
    }


def test_the_import_rule_catches_a_planted_import(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("from test_b import helper\nimport jobs\n")
    (tmp_path / "test_c.py").write_text("def f():\n    import test_b.inner\n")
    (tmp_path / "helper.py").write_text("from jobs import submit\nfrom . import test_b\n")
    assert violations(tmp_path, imports_of_test_modules) == {
        "test_a.py": ["import of test_b"],
        "test_c.py": ["import of test_b.inner"],
    }


def test_the_length_rule_catches_a_planted_long_file(tmp_path: Path) -> None:
    (tmp_path / "test_long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "test_just_fits.py").write_text("x = 1\n" * MAX_LINES)
    assert violations(tmp_path, too_long) == {
        "test_long.py": [f"{MAX_LINES + 1} lines (at most {MAX_LINES})"]
    }
