"""The project's own gates: ``ruff check``, ``ruff format --check`` and ``mypy``, each run
over the checkout with the configuration in ``pyproject.toml``; a finding fails the test
with the tool's own output.

Without ruff or mypy installed (``pip install -e '.[test]'`` brings both) the tests skip and
say so; with ``CI=true`` they fail instead, so CI cannot pass by not running them.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import in_ci

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

REPO = Path(__file__).resolve().parents[1]


def _tool(module: str) -> list[str]:
    """``python -m <module>`` for the tool installed next to this Python."""
    if importlib.util.find_spec(module) is None:
        reason = f"{module} is not installed for {sys.executable}: pip install -e '.[test]'"
        if in_ci():  # as for the cluster tests (conftest.skip_or_fail): CI cannot pass by skipping
            pytest.fail(f"CI=true and the lint gate cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    return [sys.executable, "-m", module]


def _run(argv: list[str], timeout: float) -> None:
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        shown = " ".join(argv[2:])
        pytest.fail(f"`{shown}` exited {done.returncode}:\n{done.stdout}{done.stderr}", pytrace=False)


def test_ruff_check() -> None:
    _run([*_tool("ruff"), "check", "--no-cache", "."], timeout=120)


def test_ruff_format() -> None:
    _run([*_tool("ruff"), "format", "--check", "--no-cache", "."], timeout=120)


def test_mypy() -> None:
    # The files, strictness and per-module settings are in pyproject.toml ([tool.mypy]).
    _run([*_tool("mypy")], timeout=600)


def test_every_error_class_is_in_errors_py() -> None:
    """One place lists what tfslurm raises: no exception class elsewhere (the
    example programs are users' code and keep their own)."""
    import ast

    from tfslurm import errors

    known = {name for name, value in vars(errors).items() if isinstance(value, type)}
    elsewhere = []
    for path in sorted((REPO / "tfslurm").rglob("*.py")):
        if path.name == "errors.py" or "examples" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {
                base.id if isinstance(base, ast.Name) else getattr(base, "attr", "") for base in node.bases
            }
            if bases & (known | {"Exception", "ValueError", "RuntimeError", "OSError"}):
                elsewhere.append(f"{path.relative_to(REPO)}: {node.name}")
    assert not elsewhere, elsewhere
