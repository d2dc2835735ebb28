"""The hook's import economies stay inside the hook's own modules.

The TaskProlog hook runs for every task at a site, so the modules it imports (HOOK_MODULES,
and HOOK_OPTIONAL_MODULES on some tasks' paths)
spare it what they can: ``TYPE_CHECKING = False`` instead of importing typing, and a lazy
import for a module it needs only on a rare path. Every other module imports at its top, as
usual; these checks keep the economies from spreading, and keep each remaining lazy import of
a tfslurm module explained (test_prolog.py checks what the hook really imports).
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections import Counter
from pathlib import Path

import pytest

from hook_modules import HOOK_MODULES, HOOK_OPTIONAL_MODULES

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

ROOT = Path(__file__).resolve().parents[1]
#: Function-level imports of tfslurm modules allowed in the whole package: each keeps a heavy
#: or optional dependency (TensorFlow, pyslurm) or an off-path module out of a cheap start-up.
MAX_LAZY_IMPORTS = 15


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``: dotted name -> file."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _sets_type_checking_false(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "TYPE_CHECKING" for t in node.targets)
        and isinstance(node.value, ast.Constant)
        and node.value.value is False
        for node in ast.walk(tree)
    )


def stand_in_offenders(root: Path, package: str, allowed: frozenset[str]) -> list[str]:
    """Modules outside ``allowed`` that write ``TYPE_CHECKING = False``."""
    return [
        name
        for name, path in module_files(root, package).items()
        if name not in allowed and _sets_type_checking_false(ast.parse(path.read_text(encoding="utf-8")))
    ]


def _of_package(node: ast.Import | ast.ImportFrom, package: str) -> bool:
    def inside(name: str) -> bool:
        return name == package or name.startswith(package + ".")

    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or inside(node.module or "")
    return any(inside(alias.name) for alias in node.names)


def _names_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def function_level_imports(tree: ast.Module, package: str) -> list[ast.Import | ast.ImportFrom]:
    """Imports of ``package``'s modules (or relative ones) inside a function body, leaving
    out those under ``if TYPE_CHECKING:``, which never run."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        in_function = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        if in_function and isinstance(node, (ast.Import, ast.ImportFrom)) and _of_package(node, package):
            found.append(node)
        guarded = isinstance(node, ast.If) and _names_type_checking(node.test)
        for child in node.orelse if isinstance(node, ast.If) and guarded else ast.iter_child_nodes(node):
            visit(child, in_function)

    visit(tree, False)
    return found


def _comment_lines(source: str) -> set[int]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {token.start[0] for token in tokens if token.type == tokenize.COMMENT}


def lazy_import_problems(root: Path, package: str, budget: int) -> list[str]:
    """Function-level imports of ``package`` with no ``#`` comment on their line or the line
    above, then one line if there are more than ``budget`` of them, counted by file."""
    problems = []
    per_file: Counter[str] = Counter()
    for path in module_files(root, package).values():
        source = path.read_text(encoding="utf-8")
        comments = _comment_lines(source)
        where = str(path.relative_to(root))
        for node in function_level_imports(ast.parse(source), package):
            per_file[where] += 1
            if not comments & {node.lineno - 1, node.lineno}:
                problems.append(f"{where}:{node.lineno}: a function-level import with no comment saying why")
    total = sum(per_file.values())
    if total > budget:
        counts = ", ".join(f"{where} {n}" for where, n in sorted(per_file.items()))
        problems.append(f"{total} function-level imports, over the budget of {budget}: {counts}")
    return problems


# --- the package --------------------------------------------------------------------------


def test_only_hook_modules_stand_in_for_typing() -> None:
    assert stand_in_offenders(ROOT, "tfslurm", HOOK_MODULES | HOOK_OPTIONAL_MODULES) == []


def test_function_level_imports_are_few_and_explained() -> None:
    assert lazy_import_problems(ROOT, "tfslurm", MAX_LAZY_IMPORTS) == []


def test_hook_modules_are_modules_of_the_package() -> None:
    assert set(module_files(ROOT, "tfslurm")) >= HOOK_MODULES | HOOK_OPTIONAL_MODULES


# --- the checks catch what they are for -----------------------------------------------------


def plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_stand_in_outside_the_hook_is_caught(tmp_path: Path) -> None:
    stand_in = "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import typing\n"
    root = plant(
        tmp_path,
        {
            "fake/__init__.py": stand_in,
            "fake/hook.py": stand_in,
            "fake/sub/__init__.py": "",
            "fake/sub/off.py": f'"""Off the hook."""\n\n{stand_in}',
            "fake/plain.py": "from typing import TYPE_CHECKING\nTYPE_CHECKING = True\n",
        },
    )
    assert stand_in_offenders(root, "fake", frozenset({"fake", "fake.hook"})) == ["fake.sub.off"]
    assert stand_in_offenders(root, "fake", frozenset({"fake", "fake.hook", "fake.sub.off"})) == []


LAZY = """\
import json
from fake import top


def explained():
    # the dependency is heavy
    from fake import heavy

    from . import sibling  # an error path only
    return heavy, sibling


def unexplained():
    x = 1
    import fake.other
    from .sub import thing
    import os
    return x, fake.other, thing, os


async def typed():
    from typing import TYPE_CHECKING

    if TYPE_CHECKING:
        from fake import only_types
    else:
        from fake import at_run_time  # needed on this path only
    return None


class Holder:
    def method(self):
        return lambda: __import__("fake")
"""


def test_unexplained_function_level_imports_are_caught(tmp_path: Path) -> None:
    root = plant(tmp_path, {"fake/__init__.py": "", "fake/mod.py": LAZY})
    assert lazy_import_problems(root, "fake", budget=5) == [
        "fake/mod.py:15: a function-level import with no comment saying why",
        "fake/mod.py:16: a function-level import with no comment saying why",
    ]
    found = function_level_imports(ast.parse(LAZY), "fake")
    assert [node.lineno for node in found] == [7, 9, 15, 16, 27]


def test_imports_over_the_budget_are_caught(tmp_path: Path) -> None:
    lazy = "def f():\n    from fake import a  # why\n    from fake import b  # why\n"
    root = plant(tmp_path, {"fake/__init__.py": lazy, "fake/one.py": lazy, "fake/two.py": "import fake\n"})
    assert lazy_import_problems(root, "fake", budget=4) == []
    assert lazy_import_problems(root, "fake", budget=3) == [
        "4 function-level imports, over the budget of 3: fake/__init__.py 2, fake/one.py 2"
    ]
