"""The package's shape, read from its sources: where the environment is read, one class per
name, one definition per exit status.

(a) ``Settings.from_environ`` and ``Step.from_environ`` read the environment: only entry
    points call them (:data:`ENTRY_POINTS`), and hand what they read down as typed data.
(b) A class name is defined in one module of the package only: one name per concept.
(c) Each ``EXIT_*`` status is defined once (``tfslurm/runtime/exits.py``); everything else
    imports it.

Each rule is a function of a package directory, so that a test can plant a violation in a
package of its own and see the rule catch it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

PACKAGE = Path(__file__).resolve().parents[1] / "tfslurm"
READERS = ("Settings", "Step")

#: (module, function) pairs, shell patterns, that may call ``Settings.from_environ`` or
#: ``Step.from_environ``; a method is ``Class.method``, a nested function ``outer.inner``.
ENTRY_POINTS = (
    ("tfslurm.commands.*", "*"),  # the commands
    ("tfslurm.prolog", "[!_]*"),  # the hook: main and its public modes (task, --node, --container)
    ("tfslurm.prolog", "_task_step"),  # ... whose one read of the step they share
    ("tfslurm.controller", "controller"),  # the controller factory, public
    ("tfslurm.resolver", "*"),  # the cluster resolver
    ("tfslurm.jax", "[!_]*"),  # the framework helpers' public functions
    ("tfslurm.keras", "[!_]*"),
    ("tfslurm.torch", "[!_]*"),
    ("tfslurm.adapters", "[!_]*"),
    ("tfslurm.frameworks", "[!_]*"),
    ("tfslurm.runtime.api", "run"),  # the in-program API's entry
    ("tfslurm.runtime.termination", "termination_config"),  # ... and its TF preemption hook
    ("tfslurm.runtime.roles", "resolve_role"),
    ("tfslurm.settings", "*"),  # the classmethods' own modules
    ("tfslurm.step", "*"),
)


def _modules(package: Path) -> Iterator[tuple[str, ast.Module]]:
    """(dotted name, parsed source) of every module under ``package``."""
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, ast.parse(path.read_text(encoding="utf-8"))


def _calls_in(node: ast.AST, scope: str) -> Iterator[tuple[str, ast.Call]]:
    """(enclosing function's qualified name, call) of every call under ``node``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            inner = f"{scope}.{child.name}" if scope else child.name
            yield from _calls_in(child, inner)
            continue
        if isinstance(child, ast.Call):
            yield scope or "<module>", child
        yield from _calls_in(child, scope)


def _reads_environ(call: ast.Call) -> str | None:
    """``Settings`` or ``Step`` when ``call`` is that class's ``from_environ``."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "from_environ"):
        return None
    owner = func.value
    name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
    return name if name in READERS else None


def environ_readers(package: Path = PACKAGE) -> list[str]:
    """``module:function: Class.from_environ`` of every call outside :data:`ENTRY_POINTS`."""
    found = []
    for module, tree in _modules(package):
        for scope, call in _calls_in(tree, ""):
            reader = _reads_environ(call)
            allowed = any(fnmatchcase(module, m) and fnmatchcase(scope, f) for m, f in ENTRY_POINTS)
            if reader and not allowed:
                found.append(f"{module}:{scope}: {reader}.from_environ (line {call.lineno})")
    return found


def duplicate_classes(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Class names defined in more than one module: name -> the modules."""
    where: dict[str, set[str]] = {}
    for module, tree in _modules(package):
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, set()).add(module)
    return {name: sorted(modules) for name, modules in where.items() if len(modules) > 1}


def exit_definitions(package: Path = PACKAGE) -> dict[str, list[str]]:
    """``EXIT_*`` names bound by an assignment in more than one place: name -> where."""
    where: dict[str, list[str]] = {}
    for module, tree in _modules(package):
        for node in ast.walk(tree):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            for target in targets:
                if isinstance(target, ast.Name) and target.id.startswith("EXIT_"):
                    where.setdefault(target.id, []).append(f"{module}:{node.lineno}")
    return {name: places for name, places in where.items() if len(places) > 1}


# ------------------------------------------------------------------ the rules, on tfslurm
def test_only_entry_points_read_the_environment() -> None:
    assert environ_readers() == []


def test_no_class_name_is_defined_twice() -> None:
    assert duplicate_classes() == {}


def test_each_exit_status_is_defined_once() -> None:
    assert exit_definitions() == {}
    assert {"EXIT_PEER_TIMEOUT", "EXIT_PS_FAILED", "EXIT_STOPPED", "EXIT_RESTART_CAP"} <= {
        target.id
        for node in ast.parse((PACKAGE / "runtime" / "exits.py").read_text()).body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


# ------------------------------------------------------------------ each rule catches its violation
def _plant(root: Path, files: dict[str, str]) -> Path:
    package = root / "tfslurm"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_a_helper_reading_the_environment_is_named(tmp_path: Path) -> None:
    package = _plant(
        tmp_path,
        {
            "__init__.py": "",
            "commands/run.py": "def run(args):\n    return Settings.from_environ()\n",
            "runtime/api.py": "def run(main):\n    return Settings.from_environ()\n",
            "runtime/peers.py": (
                "from tfslurm import settings\n"
                "class Watch:\n"
                "    def timeout(self):\n"
                "        return settings.Settings.from_environ().peer_timeout()\n"
            ),
            "jax.py": "def _private():\n    return Step.from_environ()\n",
            "plan.py": "STEP = Step.from_environ()\n",
        },
    )
    assert environ_readers(package) == [
        "tfslurm.jax:_private: Step.from_environ (line 2)",
        "tfslurm.plan:<module>: Step.from_environ (line 1)",
        "tfslurm.runtime.peers:Watch.timeout: Settings.from_environ (line 4)",
    ]


def test_a_class_defined_twice_is_named(tmp_path: Path) -> None:
    package = _plant(
        tmp_path,
        {
            "runtime/parent.py": "class Supervisor:\n    pass\n",
            "runtime/nodeloss.py": "class Supervisor:\n    pass\nclass Recovery:\n    pass\n",
        },
    )
    assert duplicate_classes(package) == {
        "Supervisor": ["tfslurm.runtime.nodeloss", "tfslurm.runtime.parent"]
    }


def test_an_exit_status_defined_twice_is_named(tmp_path: Path) -> None:
    package = _plant(
        tmp_path,
        {
            "runtime/exits.py": "EXIT_STOPPED = 85\nEXIT_PS_FAILED = 75\n",
            "runtime/api.py": "from tfslurm.runtime.exits import EXIT_PS_FAILED\nEXIT_STOPPED: int = 85\n",
        },
    )
    assert exit_definitions(package) == {"EXIT_STOPPED": ["tfslurm.runtime.api:2", "tfslurm.runtime.exits:1"]}
