"""Only the snapshot modules read Slurm's and tfslurm's variables from an environment.

``tfslurm/step.py`` (Slurm's variables, the GPU variables) and ``tfslurm/settings.py``
(``TFSLURM_*``) read them; every other module of the package is handed the snapshot. The
check parses each module and reports every *read* of such a variable from a mapping:
``m.get(KEY)``, ``m.pop(KEY)``, ``os.getenv(KEY)``, ``m[KEY]`` (not as an assignment
target: writing a variable, e.g. for a child's environment, is fine) and ``KEY in m``, where
``KEY`` is a ``SLURM*``/``TFSLURM*`` string, an f-string starting so, or a name bound to
such a string anywhere in the package (``TF_DIST_VARIABLE``). ``tfslurm/localcluster/`` (the
test cluster harness) and ``tfslurm/examples/`` are not the library and are not checked.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

PACKAGE = Path(__file__).resolve().parents[1] / "tfslurm"
SNAPSHOT_MODULES = ("step.py", "settings.py")
SKIPPED = ("localcluster", "examples")
PREFIXES = ("SLURM", "TFSLURM")
READERS = ("get", "pop", "getenv")


def _modules(package: Path = PACKAGE) -> list[Path]:
    return sorted(
        path
        for path in package.rglob("*.py")
        if not any(part in SKIPPED for part in path.relative_to(package).parts[:-1])
    )


def _variable_constants(paths: list[Path]) -> set[str]:
    """Names bound (at any level) to a string naming a Slurm or tfslurm variable."""
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign | ast.AnnAssign) and _names_variable(node.value, set()):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _names_variable(node: ast.expr | None, constants: set[str]) -> bool:
    """``node`` is (or evidently builds) the name of a Slurm or tfslurm variable."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.startswith(PREFIXES)
    if isinstance(node, ast.JoinedStr):
        return bool(node.values) and _names_variable(node.values[0], constants)
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.Attribute):
        return node.attr in constants
    return False


def environ_reads(source: str, constants: set[str]) -> list[str]:
    """``line: code`` of every read of a Slurm/tfslurm variable from a mapping in ``source``."""
    found: list[ast.AST] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in READERS and node.args and _names_variable(node.args[0], constants):
                found.append(node)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if _names_variable(node.slice, constants):
                found.append(node)
        elif (
            isinstance(node, ast.Compare)
            and _names_variable(node.left, constants)
            and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
        ):
            found.append(node)
    lines = source.splitlines()
    return sorted({f"{n.lineno}: {lines[n.lineno - 1].strip()}" for n in found})  # type: ignore[attr-defined]


def offenders(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Module (relative path) -> its reads, for every module but the snapshot modules."""
    paths = _modules(package)
    constants = _variable_constants(paths)
    return {
        str(path.relative_to(package)): reads
        for path in paths
        if path.name not in SNAPSHOT_MODULES or path.parent != package
        for reads in [environ_reads(path.read_text(encoding="utf-8"), constants)]
        if reads
    }


def test_only_snapshot_modules_read_slurm_or_tfslurm_variables() -> None:
    assert {"TF_DIST_VARIABLE", "DESCRIPTOR_VARIABLE", "ASSIGNED_VARIABLE"} <= _variable_constants(_modules())
    assert offenders() == {}, "read Step / Settings instead of the environment"


def test_the_snapshot_modules_are_where_the_reads_are() -> None:
    """The check sees real reads: the snapshot modules are full of them."""
    constants = _variable_constants(_modules())
    for name in SNAPSHOT_MODULES:
        reads = environ_reads((PACKAGE / name).read_text(encoding="utf-8"), constants)
        assert len(reads) >= 5, (name, reads)


@pytest.mark.parametrize(
    "line",
    [
        'os.environ.get("SLURM_JOB_ID")',
        'env.get("SLURMD_NODENAME", "")',
        'os.getenv("TFSLURM_PEER_TIMEOUT")',
        'env["TFSLURM_IFACE"]',
        'x = os.environ["SLURM_PROCID"] == "0"',
        "env.get(TF_DIST_VARIABLE) or None",
        "plan.step.env.get(plan.DESCRIPTOR_VARIABLE)",
        '"SLURM_STEP_GPUS" in env',
        "UNEVEN_VARIABLE not in env",
        'env.get(f"SLURM_JOB_NODELIST_HET_GROUP_{n}")',
        'env.pop("TFSLURM_WATCHED", None)',
    ],
)
def test_a_planted_read_is_found(line: str) -> None:
    constants = {"TF_DIST_VARIABLE", "DESCRIPTOR_VARIABLE", "UNEVEN_VARIABLE"}
    source = f"import os\n\ndef f(env, plan, n):\n    {line}\n"
    assert environ_reads(source, constants) == [f"4: {line}"]


def test_a_planted_read_fails_the_package_check(tmp_path: Path) -> None:
    """The package check, run over a copy of the package with reads planted in it."""
    copy = tmp_path / "tfslurm"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert offenders(copy) == {}
    with open(copy / "runtime" / "api.py", "a", encoding="utf-8") as module:
        module.write('\n\ndef _grace():\n    return os.environ.get("TFSLURM_STOP_GRACE")\n')
    with open(copy / "plan.py", "a", encoding="utf-8") as module:
        module.write("\n\ndef _jobs(env):\n    return env[TF_DIST_VARIABLE]\n")
    (copy / "runtime" / "step.py").write_text('import os\nX = os.environ.get("SLURM_PROCID")\n')
    found = offenders(copy)
    assert sorted(found) == ["plan.py", "runtime/api.py", "runtime/step.py"]
    assert found["runtime/api.py"][0].endswith('return os.environ.get("TFSLURM_STOP_GRACE")')
    assert found["plan.py"][0].endswith("return env[TF_DIST_VARIABLE]")
    # the examples and the test cluster harness are not checked
    (copy / "examples" / "reads.py").write_text('import os\nX = os.environ["SLURM_PROCID"]\n')
    assert sorted(offenders(copy)) == sorted(found)


@pytest.mark.parametrize(
    "line",
    [
        'task_env["SLURM_PROCID"] = str(gtid)',  # writing a task's environment
        'os.environ["TFSLURM_WATCHED"] = "1"',
        'env.get("TF_CONFIG", "")',  # not a Slurm or tfslurm variable
        'os.environ.get("http_proxy")',
        'raise ValueError(f"SLURM_GTIDS={raw!r} is bad")',  # a message naming one
    ],
)
def test_writes_and_other_variables_are_not_reads(line: str) -> None:
    source = f"import os\n\ndef f(env, task_env, gtid, raw):\n    {line}\n"
    assert environ_reads(source, {"TF_DIST_VARIABLE"}) == []
