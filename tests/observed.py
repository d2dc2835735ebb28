"""Load the recorded task environments in ``tests/data/observed/<slurm version>/``.

One directory per Slurm release the recordings were made on (``22.05``, ``24.11``,
``26.05``), each with the same fixture names, and ``padded/`` beside them for the
zero-padded node names where that version has them.

Each fixture file holds a ``#`` header (name, description, command, ...) and one block per
task (``## step <label> task <procid>``) or for the batch script (``## batch``) with the
task's ``VAR=value`` lines. Tests use them as ground truth: what Slurm really set, and
where each rank really ran.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

OBSERVED = Path(__file__).parent / "data" / "observed"
VERSIONS = ("22.05", "24.11", "26.05")
BASE_VERSION = VERSIONS[0]
DATA = OBSERVED / BASE_VERSION  # the 22.05 recordings, which the older tests name directly

_BLOCK = re.compile(r"^## (?:(batch)|step (\S+) task (\d+))\s*$")


@dataclass(frozen=True)
class Task:
    """One process's recorded environment (a task of a step, or the batch script)."""

    step: str | None  # the step label, None for the batch script
    procid: int
    hostname: str
    env: dict[str, str]


@dataclass(frozen=True)
class Fixture:
    name: str
    header: dict[str, str]
    batch: Task | None
    steps: dict[str, list[Task]] = field(default_factory=dict)  # label -> tasks by procid

    @property
    def description(self) -> str:
        return self.header.get("description", "")

    @property
    def command(self) -> str:
        return self.header.get("command", "")


def load(path: Path) -> Fixture:
    header: dict[str, str] = {}
    batch: Task | None = None
    steps: dict[str, list[Task]] = {}
    current: tuple[str | None, int] | None = None
    env: dict[str, str] = {}

    def flush() -> None:
        nonlocal batch
        if current is None:
            return
        label, procid = current
        hostname = env.pop("hostname", "")
        task = Task(label, procid, hostname, dict(env))
        if label is None:
            batch = task
        else:
            steps.setdefault(label, []).append(task)

    for line in path.read_text().splitlines():
        match = _BLOCK.match(line)
        if match:
            flush()
            env = {}
            current = (None, 0) if match.group(1) else (match.group(2), int(match.group(3)))
        elif line.startswith("#") and current is None:
            key, _, value = line.lstrip("# ").partition(":")
            if key in header:  # multi-line values (stderr, sbatch scripts)
                header[key] += "\n" + value.strip()
            else:
                header[key] = value.strip()
        elif "=" in line and current is not None:
            name, _, value = line.partition("=")
            env[name] = value
    flush()
    for tasks in steps.values():
        tasks.sort(key=lambda t: t.procid)
    return Fixture(path.stem, header, batch, steps)


def version_dir(version: str) -> Path:
    return OBSERVED / version


def all_paths(versions: tuple[str, ...] = VERSIONS) -> list[Path]:
    """Every fixture file of ``versions``: default names and the zero-padded ``padded/``
    variants."""
    paths: list[Path] = []
    for version in versions:
        root = version_dir(version)
        paths += sorted(root.glob("*.txt")) + sorted((root / "padded").glob("*.txt"))
    return paths


def version_of(path: Path) -> str:
    """The Slurm version a fixture file was recorded on."""
    root = path.parent.parent if path.parent.name == "padded" else path.parent
    return root.name


def fixture_id(path: Path) -> str:
    """``01_block_N3_tpn2`` / ``padded/01_...`` for 22.05; ``24.11/01_...`` for later versions."""
    local = f"padded/{path.stem}" if path.parent.name == "padded" else path.stem
    version = version_of(path)
    return local if version == BASE_VERSION else f"{version}/{local}"


def hostfile_entries(fixture: Fixture) -> list[str] | None:
    """The hostfile contents of the arbitrary-layout fixture, from its description."""
    match = re.search(r"one line per task\):\s*(.*)$", fixture.description)
    return match.group(1).split() if match else None


def ids(versions: tuple[str, ...] = VERSIONS) -> list[str]:
    """The :func:`fixture_id` of every fixture of ``versions``."""
    return [fixture_id(p) for p in all_paths(versions)]


@functools.cache
def paths_by_id() -> dict[str, Path]:
    """Every fixture file of every version by its :func:`fixture_id`."""
    return {fixture_id(p): p for p in all_paths(VERSIONS)}


def runnable_envs(fixture: Fixture, tmp_path: Path) -> dict[str, list[tuple[Task, dict[str, str]]]]:
    """Each step's tasks with environments that work here: the arbitrary-layout fixture's
    hostfile (gone with the recorded cluster) is written again under ``tmp_path``."""
    hosts = hostfile_entries(fixture)
    out: dict[str, list[tuple[Task, dict[str, str]]]] = {}
    for label, tasks in fixture.steps.items():
        for task in tasks:
            env = dict(task.env)
            if "SLURM_HOSTFILE" in env:
                assert hosts, f"{fixture.name}: arbitrary fixture without hostfile description"
                hostfile = tmp_path / "hostfile"
                hostfile.write_text("\n".join(hosts) + "\n")
                env["SLURM_HOSTFILE"] = str(hostfile)
            out.setdefault(label, []).append((task, env))
    return out


def step_envs(fid: str, tmp_path: Path) -> dict[str, list[tuple[Task, dict[str, str]]]]:
    """:func:`runnable_envs` of the fixture named ``fid`` (see :func:`fixture_id`)."""
    return runnable_envs(load(paths_by_id()[fid]), tmp_path)
