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
    while words and (words[0] == "env" or ("=" in words[0] and not words[0].startswith("-"))):
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


STEPS = [(path, label) for path in observed.all_paths() for label in observed.load(path).steps]
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


# --- shapes the recordings do not hold -----------------------------------------------------------

NODES = [f"gpu{i:02d}" for i in range(1, 9)]
LAYOUTS = {"block": block_layout, "cyclic": cyclic_layout}


def placement(rows: list) -> list[tuple[str, int]]:
    return [(row["node"], row["local_id"]) for row in rows]


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 8),
    st.integers(1, 4),
    st.sampled_from(["block", "cyclic", "plane=1", "plane=2", "plane=3", None]),
    st.integers(0, 2),
)
def test_tasks_per_node_lay_out_as_the_engine_says(nodes: int, per_node: int, dist, gpus: int) -> None:
    options = [f"-N{nodes}", f"--ntasks-per-node={per_node}"] + ([f"-m{dist}"] if dist else [])
    options += [f"--gpus-per-task={gpus}"] if gpus else []
    rows, notes = modelled_rows(options, "gpu[01-08]", 4, 8)
    counts = [per_node] * nodes
    if dist is None or dist == "block":
        layout = block_layout(NODES[:nodes], counts)
    elif dist == "cyclic":
        layout = cyclic_layout(NODES[:nodes], counts)
    else:
        layout = plane_layout(NODES[:nodes], counts, int(dist[6:]))
    assert notes == ()
    assert [row["rank"] for row in rows] == list(range(nodes * per_node))
    assert placement(rows) == list(zip(layout.rank_to_node, layout.rank_local, strict=True))
    for row in rows:  # --gpus-per-task: local task i gets devices i*N .. i*N+N-1 of its node
        local = row["local_id"]
        assert row["gpus"] == [str(d) for d in range(local * gpus, (local + 1) * gpus)]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 8), st.data())
def test_tasks_fill_the_nodes_cpus_in_order(nodes: int, cpus: int, data: st.DataObject) -> None:
    """-N -n: one task per node, then the nodes' CPUs filled in node order (as cons_tres)."""
    ntasks = data.draw(st.integers(nodes, nodes * cpus))
    rows, _ = modelled_rows([f"-N{nodes}", f"-n{ntasks}"], "gpu[01-08]", cpus, 0)
    counts = [sum(1 for row in rows if row["node"] == name) for name in NODES[:nodes]]
    assert sum(counts) == ntasks and all(1 <= c <= cpus for c in counts)
    full = [c for c in counts if c == cpus]
    assert counts[: len(full)] == full  # full nodes first, then one partly filled, then 1 each
    assert all(c == 1 for c in counts[len(full) + 1 :])
    assert placement(rows) == list(
        zip(
            *(lambda layout: (layout.rank_to_node, layout.rank_local))(block_layout(NODES[:nodes], counts)),
            strict=True,
        )
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(NODES[:4]), min_size=1, max_size=12))
def test_arbitrary_puts_each_rank_where_w_says(order: list[str]) -> None:
    rows, _ = modelled_rows(["-m", "arbitrary", "-w", ",".join(order)], "gpu[01-04]", 4, 0)
    assert [row["node"] for row in rows] == order
    assert [row["local_id"] for row in rows] == [order[:i].count(name) for i, name in enumerate(order)]


# --- the command ---------------------------------------------------------------------------------


def run_plan(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            status = cli.main(["plan", *args])
        except SystemExit as exc:  # argparse's own usage errors
            status = int(exc.code or 0)
    return status, out.getvalue(), err.getvalue()


def test_json_rows_are_the_table_rows() -> None:
    status, out, err = run_plan(
        "--dry-run", "--nodelist", "gpu[01-04]", "--cpus-per-node", "4", "--json",
        "--", "-N2", "-n3", "--gres=gpu:2", "--tf-dist=ps:1,worker:2",
    )  # fmt: skip
    assert (status, err) == (0, "")
    plan = json.loads(out)
    assert plan["ranks"] == [
        {"rank": 0, "node": "gpu01", "local_id": 0, "job": "ps", "index": 0, "gpus": ["0"]},
        {"rank": 1, "node": "gpu01", "local_id": 1, "job": "worker", "index": 0, "gpus": ["1"]},
        {"rank": 2, "node": "gpu02", "local_id": 0, "job": "worker", "index": 1, "gpus": ["0", "1"]},
    ]
    assert "derived from the job and step ids" in plan["ports"]
    status, table, _ = run_plan(
        "--dry-run", "--nodelist", "gpu[01-04]", "--cpus-per-node", "4",
        "--", "-N2", "-n3", "--gres=gpu:2", "--tf-dist=ps:1,worker:2",
    )  # fmt: skip
    assert table.splitlines()[:4] == [
        "RANK  JOB     TASK  NODE   LOCAL  GPUS",
        "   0  ps         0  gpu01      0  0",
        "   1  worker     0  gpu01      1  1",
        "   2  worker     1  gpu02      0  0,1",
    ]
    status, table, _ = run_plan("--dry-run", "--nodelist", "gpu[01-04]", "--port-base", "9000", "--", "-N1")
    assert table.splitlines()[1:] == [
        "   0  worker     0  gpu01      0  -",
        "ports: explicit: 9000 + local id",
        "(- = no GPUs)",
    ]


def test_real_step_json_is_its_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """In a step, --json prints rank 0's rows: other nodes' GPUs unknown there (null)."""
    tasks = observed.step_envs("24.11/11_gres_gpu2", tmp_path)["s0"]
    for name in [n for n in __import__("os").environ if n.startswith(("SLURM", "TFSLURM"))]:
        monkeypatch.delenv(name)
    for name, value in tasks[0][1].items():
        monkeypatch.setenv(name, value)
    status, out, err = run_plan("--json")
    assert status == 0, err
    plan = json.loads(out)
    assert [row["gpus"] for row in plan["ranks"]] == [["0"], ["1"], None, None]
    assert [(row["node"], row["local_id"]) for row in plan["ranks"]] == [
        ("node1", 0),
        ("node1", 1),
        ("node2", 0),
        ("node2", 1),
    ]
    assert plan["ports"] == "reserved by Slurm: 20045-20047 by local id"


@pytest.mark.parametrize(
    ("option", "named"),
    [
        (["--exclusive"], "--exclusive"),
        (["-m", "block:cyclic"], "block:cyclic"),
        (["--gpus=3"], "--gpus"),
        (["--gpu-bind=none"], "--gpu-bind"),
        (["--gres=gpu:1,nvme:1"], "nvme"),
        (["-O"], "-O"),
    ],
)
def test_what_is_not_modelled_is_said_in_one_line(option: list[str], named: str) -> None:
    status, out, err = run_plan("--dry-run", "--nodelist", "gpu[01-04]", "--", "-N2", *option)
    assert status == 0 and "gpu02" in out
    assert err.count("\n") == 1 and named in err and "not modelled" in err, err


BAD = {
    "no nodelist": (["--dry-run", "--", "-N2"], "--nodelist"),
    "bad nodelist": (["--dry-run", "--nodelist", "gpu[01-"], "--nodelist"),
    "options without --dry-run": (["--nodelist", "gpu01"], "--dry-run"),
    "no value": (["--dry-run", "--nodelist", "gpu01", "--", "-N"], "-N"),
    "not a count": (["--dry-run", "--nodelist", "gpu01", "--", "-n", "two"], "-n"),
    "node range": (["--dry-run", "--nodelist", "gpu01", "--", "-N1-2"], "range"),
    "unknown -m": (["--dry-run", "--nodelist", "gpu01", "--", "-m", "fcyclic"], "-m"),
    "plane=0": (["--dry-run", "--nodelist", "gpu01", "--", "-m", "plane=0"], "plane"),
    "het": (["--dry-run", "--nodelist", "gpu[01-02]", "--", "-N1", ":", "-N1"], "heterogeneous"),
    "-w elsewhere": (["--dry-run", "--nodelist", "gpu[01-02]", "--", "-w", "gpu07"], "gpu07"),
    "-w file": (["--dry-run", "--nodelist", "gpu[01-02]", "--", "-w", "./hosts"], "file"),
    "too many nodes": (["--dry-run", "--nodelist", "gpu[01-02]", "--", "-N3"], "3 nodes"),
    "spread unknown": (["--dry-run", "--nodelist", "gpu[01-02]", "--", "-N2", "-n5"], "--cpus-per-node"),
    "too many tasks": (
        ["--dry-run", "--nodelist", "gpu[01-02]", "--cpus-per-node", "2", "--", "-N2", "-n5"],
        "-n 5",
    ),
    "fewer tasks than nodes": (["--dry-run", "--nodelist", "gpu[01-02]", "--", "-N2", "-n1"], "fewer"),
    "too many GPUs": (
        [
            "--dry-run",
            "--nodelist",
            "gpu01",
            "--gpus-per-node-available",
            "4",
            "--",
            "-n3",
            "-N1",
            "--gpus-per-task=2",
        ],
        "6 GPUs",
    ),
    "arbitrary without -w": (["--dry-run", "--nodelist", "gpu01", "--", "-m", "arbitrary", "-n2"], "-w"),
    "jobs do not add up": (["--dry-run", "--nodelist", "gpu01", "--", "-n2", "--tf-dist=ps:1,worker:3"], "4"),
    "zero cpus": (["--dry-run", "--nodelist", "gpu01", "--cpus-per-node", "0"], "--cpus-per-node"),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_input_is_one_line_and_exit_2(case: str) -> None:
    args, named = BAD[case]
    status, out, err = run_plan(*args)
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and named in err, err


@pytest.mark.parametrize(
    ("words", "nodes", "noted"),
    [
        (["-lN2"], 2, ()),  # short flags run together
        (["--constraint", "a100", "-N2"], 2, ("--constraint",)),  # an unknown option's value
        (["--foo", "-N2"], 2, ("--foo",)),  # ... or none, when an option follows
        (["-N2", "train.py", "-N3"], 2, ()),  # the program's own arguments are not srun's
        (["--nodes", "3", "--nodes=2"], 2, ()),  # later options win, as in srun
        (["--exclusive=user", "-N2"], 2, ("--exclusive",)),
    ],
)
def test_options_are_read_as_srun_reads_them(words: list[str], nodes: int, noted: tuple[str, ...]) -> None:
    options = parse_options(words)
    assert options.nodes == nodes
    assert [note.split(":")[0] for note in options.notes] == list(noted)
