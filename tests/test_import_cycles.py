"""No import cycle between tfslurm's modules, counting every import at any level.

A lazy import (inside a function) is an edge too: it runs the other module's top level on
first use, so a cycle through one still makes each module's import order matter. ``from
PACKAGE import NAME`` is an edge to ``PACKAGE.NAME`` when that is a module, else to
``PACKAGE``; relative imports are resolved against the importing module's package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

ROOT = Path(__file__).resolve().parents[1]


def modules(root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, is a package's __init__)."""
    found = {}
    for path in (root / "tfslurm").rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(root)

    def module_of(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, (path, is_package) in known.items():
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            else:
                continue
            for target in targets:
                other = module_of(target) if target.startswith("tfslurm") else None
                if other is not None and other != name:
                    graph[name].add(other)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path back to its start) per module that reaches itself."""
    found: list[list[str]] = []
    seen_in_cycle: set[str] = set()
    for start in sorted(graph):
        if start in seen_in_cycle:
            continue
        stack = [(start, [start])]
        visited = {start}
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    found.append([*path, start])
                    seen_in_cycle.update(path)
                    stack.clear()
                    break
                if nxt not in visited:
                    visited.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    return found


def test_the_graph_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    package = tmp_path / "tfslurm"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from tfslurm import b\n")
    (package / "b.py").write_text("from .sub import c\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "c.py").write_text("from .. import a\nfrom tfslurm.a import f\n")
    graph = import_graph(tmp_path)
    assert graph["tfslurm.a"] == {"tfslurm.b"} and graph["tfslurm.b"] == {"tfslurm.sub.c"}
    assert graph["tfslurm.sub.c"] == {"tfslurm.a"}
    assert cycles(graph) == [["tfslurm.a", "tfslurm.b", "tfslurm.sub.c", "tfslurm.a"]]


def test_tfslurm_has_no_import_cycle() -> None:
    assert cycles(import_graph()) == []
