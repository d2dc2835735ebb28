"""The package's shape, held by checks: module size, one idiom for plain data, no private
name used across modules. (Import cycles: test_import_cycles.py; complexity: ruff's C901,
run by test_lint.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

PACKAGE = Path(__file__).resolve().parents[1] / "tfslurm"
MAX_LINES = 600
#: Over MAX_LINES on purpose: its two paths (by prefix and width, and host by host, Slurm's
#: own) are documented at its top and tested against each other.
LONG_MODULES = {"hostlist/compression.py"}


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def name(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


def test_no_module_is_over_600_lines() -> None:
    long = {name(p): n for p in sources() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert set(long) <= LONG_MODULES, long


def test_no_module_uses_dataclasses() -> None:
    """Plain data is written out (tfslurm.value), so there is one idiom for it."""
    users = [name(p) for p in sources() if _imports(p, "dataclasses")]
    assert users == []


def _imports(path: Path, module: str) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name == module for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == module:
            return True
    return False


def private_uses(source: str) -> list[str]:
    """``line: name`` of every private (``_name``, not dunder) name taken from a tfslurm module:
    imported from one, or read as an attribute of a module imported under a name."""
    tree = ast.parse(source)
    modules: set[str] = set()  # local names bound to tfslurm modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tfslurm"):
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.lineno}: {alias.name}")
                else:
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tfslurm"):
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and _private(node.attr)
        ):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return sorted(found)


def _private(text: str) -> bool:
    return text.startswith("_") and not text.startswith("__")


def test_no_private_name_is_taken_from_another_module() -> None:
    taken = {name(p): uses for p in sources() if (uses := private_uses(p.read_text()))}
    assert taken == {}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("from tfslurm.plan import _helper", ["1: _helper"]),
        ("from tfslurm import plan\nplan._own_rank(1)", ["2: plan._own_rank"]),
        ("from tfslurm.errors import clip as _clip", []),  # a public name, kept private here
        ("import os\nos._exit(0)", []),
        ("from tfslurm import __version__", []),
    ],
)
def test_the_private_name_check_sees_what_it_must(line: str, expected: list[str]) -> None:
    assert private_uses(line) == expected
