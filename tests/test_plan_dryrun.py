"""``tfslurm plan --dry-run``: the plan srun/sbatch options would give, without Slurm.

Ground truth is the recordings of real steps (``tests/data/observed``, Slurm 22.05, 24.11,
26.05): the dry run of the options that made a recorded step, on that job's nodes and the
recording cluster's nodes (CPUTot, Gres), must give the plan the recorded tasks compute,
row for row: each rank's node, local id, job, index and its own GPUs.
"""

from __future__ import annotations

import io
import json
import re
import shlex
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import observed
from tfslurm import cli
from tfslurm.dryrun import dry_run, parse_options, step_environments
from tfslurm.errors import PlanError, TfslurmError
from tfslurm.layout import block_layout, cyclic_layout, plane_layout
from tfslurm.plan import plan_for
from tfslurm.settings import TF_DIST_VARIABLE
from tfslurm.step import Step

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure


# --- the recorded steps ------------------------------------------------------------------------


def step_options(path: Path, fixture: observed.Fixture, label: str) -> list[str]:
    """The options that made step ``label``: srun's, or sbatch's then the script's srun line's
    (a step inherits the job's options; its own win)."""
    words = shlex.split(fixture.command.partition("<<")[0])
    while words and (words[0] == "env" or "=" in words[0] and not words[0].startswith("-")):
        words.pop(0)  # env VAR=value
    launcher, options = words[0], _options_of(words[1:])
    if launcher == "sbatch":
        script = [line[1:].strip() for line in path.read_text().splitlines() if line.startswith("#   srun ")]
        line = next(line for line in script if line.endswith((f'"$DUMP" {label}', f"dump.sh {label}")))
        options += _options_of(shlex.split(line)[1:])
    hosts = observed.hostfile_entries(fixture)
    if "arbitrary" in " ".join(options) and hosts:
        options += ["-w", ",".join(hosts)]  # the hostfile, one entry per task
    return options


def _options_of(words: list[str]) -> list[str]:
    """The options before the recording's program (``dump.sh``, ``"$DUMP"``), and ``:``
    after them where srun starts another component (a heterogeneous step)."""
    program = next((i for i, word in enumerate(words) if word.endswith(("dump.sh", "$DUMP"))), len(words))
    return words[:program] + ([":"] if ":" in words[program:] else [])


def node_resources(fixture: observed.Fixture) -> tuple[int, int]:
    """CPUs and GPUs of each node of the recording cluster (its header)."""
    cluster = fixture.header["cluster"]
    cpus = re.search(r"CPUTot=(\d+)", cluster)
    gpus = re.search(r"Gres=gpu:(\d+)", cluster)
    assert cpus and gpus, cluster
    return int(cpus.group(1)), int(gpus.group(1))


def recorded_rows(
    tasks: list[tuple[observed.Task, dict[str, str]]], tf_dist: bool = True
) -> list[dict[str, object]]:
    """Each recorded task's own row of the plan it computes (``Plan.row`` of its rank);
    ``tf_dist=False``: as if --tf-dist had not been given."""
    rows = []
    for task, env in tasks:
        env = dict(env)
        if "TF_DIST_SPEC" in env and tf_dist:  # the recording cluster's test plugin names --tf-dist so
            env[TF_DIST_VARIABLE] = env["TF_DIST_SPEC"]
        rows.append(plan_for(Step.from_environ(env)).row(task.procid))
    return rows


def modelled_rows(options: list[str], nodelist: str, cpus: int, gpus: int) -> tuple[list, tuple[str, ...]]:
    """The dry run's rows and notes, as ``tfslurm plan --dry-run`` makes them."""
    from tfslurm import hostlist

    slurm = parse_options(options)
    envs = step_environments(slurm, hostlist.expand(nodelist), cpus_per_node=cpus, gpus_available=gpus)
    result = dry_run([Step.from_environ(env) for env in envs], slurm)
    return list(result.rows), result.notes


def outcome(make):  # type: ignore[no-untyped-def]
    """What ``make()`` gives: its value, or the error it raises (type and message)."""
    try:
        return make()
    except TfslurmError as exc:
        return (type(exc).__name__, str(exc))


STEPS = [
    (path, label)
    for path in observed.all_paths()
    for label in observed.load(path).steps
]
IDS = [f"{observed.fixture_id(path)}:{label}" for path, label in STEPS]

# Options whose effect the dry run does not model: it must say so (tested below) rather
# than be compared.
UNMODELLED = ("--gpu-bind", "--gpus=", "--het-group")


@pytest.mark.parametrize(("path", "label"), STEPS, ids=IDS)
def test_dry_run_gives_the_recorded_plan(path: Path, label: str, tmp_path: Path) -> None:
    fixture = observed.load(path)
    options = step_options(path, fixture, label)
    tasks = observed.runnable_envs(fixture, tmp_path)[label]
    nodelist = tasks[0][1]["SLURM_JOB_NODELIST"]
    cpus, gpus = node_resources(fixture)
    if ":" in options:
        with pytest.raises(PlanError, match="heterogeneous"):
            modelled_rows(options, nodelist, cpus, gpus)
        return
    if any(option.startswith(UNMODELLED) for option in options):
        assert modelled_rows(options, nodelist, cpus, gpus)[1], options  # noted, not silent
        return
    real = outcome(lambda: recorded_rows(tasks))
    modelled = outcome(lambda: modelled_rows(options, nodelist, cpus, gpus))
    if isinstance(real, tuple):  # the recorded tasks refuse the plan: the dry run refuses it alike
        assert modelled == real
        assert real[0] == "JobSpecError", real  # a --tf-dist for another task count ...
        real = recorded_rows(tasks, tf_dist=False)  # ... and without it, the same rows
        modelled = modelled_rows([o for o in options if not o.startswith("--tf-dist")], nodelist, cpus, gpus)
    rows, notes = modelled
    assert notes == (), notes
    assert rows == real, (options, nodelist)


def test_every_version_and_shape_is_compared() -> None:
    """The comparison above covers each recorded version and each layout kind."""
    compared = {
        (observed.version_of(path), observed.load(path).steps[label][0].env.get("SLURM_DISTRIBUTION", "-"))
        for path, label in STEPS
    }
    for version in observed.VERSIONS:
        for kind in ("-", "block", "cyclic", "plane", "arbitrary"):
            assert (version, kind) in compared, (version, kind)
