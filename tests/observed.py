"""Load the recorded task environments in ``tests/data/observed/`` (real Slurm 22.05 runs).

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

DATA = Path(__file__).parent / "data" / "observed"

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


def all_paths() -> list[Path]:
    """Every fixture file: default names and the zero-padded ``padded/`` variants."""
    return sorted(DATA.glob("*.txt")) + sorted((DATA / "padded").glob("*.txt"))


def fixture_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}" if path.parent.name == "padded" else path.stem


def hostfile_entries(fixture: Fixture) -> list[str] | None:
    """The hostfile contents of the arbitrary-layout fixture, from its description."""
    match = re.search(r"one line per task\):\s*(.*)$", fixture.description)
    return match.group(1).split() if match else None


@functools.cache
def paths_by_id() -> dict[str, Path]:
    """Every fixture file by its :func:`fixture_id`."""
    return {fixture_id(p): p for p in all_paths()}


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
