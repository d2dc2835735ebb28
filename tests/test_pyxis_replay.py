"""Replay of task environments recorded inside pyxis + enroot containers.

``tests/data/containers/pyxis/`` holds what ``tests/record_pyxis.py`` saw on a local Slurm
22.05 cluster with pyxis and enroot built by hand (docs/containers.md): for each task the
environment the hook got inside the container (``## hook env N``), the step's environment on
the host that the plugin's helper passed on its stdin (``## hook stdin N``, set-up A after
pyxis only) and the environment the task's program saw (``## task N``), plus srun's stderr.
These tests check that tfslurm's own logic, fed the recorded inputs, decides what the real
run did: the variables it set, the one line it wrote to stderr, the wrong plugstack order.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tfslurm.container_env import gpu_overrides, replaced, warning
from tfslurm.prolog import CONTAINER_ARG, container_lines, main, read_environ, task_changes

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

PYXIS = Path(__file__).parent / "data" / "containers" / "pyxis"
_BLOCK = re.compile(r"^## (hook env|hook stdin|task) (\d+)$")
WRONG_ORDER = (
    "tfslurm: plugstack.conf lists tfslurm before pyxis, so the container's environment replaces what "
    "--tf-dist sets; list tfslurm after pyxis (tfslurm's admin guide)"
)
#: enroot's 50-slurm-pytorch.sh: MASTER_PORT = job id % 4536 + 61000.
ENROOT_PYTORCH_VARIABLES = (
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMP_NUM_THREADS",
    "RANK",
    "WORLD_SIZE",
)


class Record:
    """One recorded experiment: header fields, stderr lines and the per-task blocks."""

    __slots__ = ("blocks", "header", "stderr")

    def __init__(self, path: Path) -> None:
        self.header: dict[str, str] = {}
        self.stderr: list[str] = []
        self.blocks: dict[tuple[str, int], dict[str, str]] = {}
        current: dict[str, str] | None = None
        for line in path.read_text().splitlines():
            block = _BLOCK.match(line)
            if block:
                current = self.blocks.setdefault((block[1], int(block[2])), {})
            elif line.startswith("# stderr: "):
                self.stderr.append(line.removeprefix("# stderr: "))
            elif line.startswith("# ") and current is None:
                key, _, value = line[2:].partition(": ")
                self.header[key] = value
            elif line and current is not None:
                name, _, value = line.partition("=")
                current[name] = value

    def tasks(self, kind: str) -> dict[int, dict[str, str]]:
        return {rank: env for (k, rank), env in sorted(self.blocks.items()) if k == kind}


def record(name: str) -> Record:
    return Record(PYXIS / f"{name}.txt")


def after_pyxis() -> list[str]:
    return sorted(p.stem for p in PYXIS.glob("A_after_*.txt"))


def test_recordings_cover_every_case_the_docs_name() -> None:
    names = {p.stem for p in PYXIS.glob("*.txt")}
    assert names == {
        "A_after_plain",
        "A_after_pytorch",
        "A_after_cuda",
        "A_before_plain",
        "A_before_pytorch",
        "B_plain",
        "B_py",
    }
    for name in names:
        assert record(name).header["cluster"].startswith("slurm 22.05, "), name


@pytest.mark.parametrize("name", after_pyxis())
def test_after_pyxis_hook_lines_are_what_the_task_saw(name: str) -> None:
    rec = record(name)
    assert rec.header["exit code"] == "0"
    hooks, outside, tasks = rec.tasks("hook env"), rec.tasks("hook stdin"), rec.tasks("task")
    assert sorted(hooks) == sorted(outside) == sorted(tasks) == [0, 1, 2, 3]
    for rank, env in hooks.items():
        lines = container_lines(env, outside[rank])
        exports = dict(
            line.removeprefix("export ").split("=", 1) for line in lines if line.startswith("export ")
        )
        assert exports, name
        assert {k: tasks[rank].get(k) for k in exports} == exports, (name, rank)
        assert "TF_CONFIG" in exports and "MASTER_ADDR" in exports


@pytest.mark.parametrize("name", after_pyxis())
def test_after_pyxis_warn_line_is_the_recorded_stderr(name: str) -> None:
    rec = record(name)
    hooks, outside = rec.tasks("hook env"), rec.tasks("hook stdin")
    warned = []
    for rank, env in hooks.items():
        warned += [
            line.removeprefix("warn ")
            for line in container_lines(env, outside[rank])
            if line.startswith("warn ")
        ]
    assert sorted(warned) == sorted(line for line in rec.stderr if line.startswith("tfslurm:"))


def test_plain_image_runs_the_hook_on_the_host_without_a_word() -> None:
    rec = record("A_after_plain")
    assert rec.stderr == []
    task = rec.tasks("task")[1]
    assert task["TF_CONFIG"].endswith('"task":{"type":"worker","index":1}}')
    assert task["CUDA_VISIBLE_DEVICES"] == "1"


def test_enroot_pytorch_hook_values_are_replaced_and_said() -> None:
    rec = record("A_after_pytorch")
    hooks, outside, tasks = rec.tasks("hook env"), rec.tasks("hook stdin"), rec.tasks("task")
    for rank, env in hooks.items():
        job = int(env["SLURM_JOB_ID"])
        assert env["MASTER_PORT"] == str(job % 4536 + 61000)  # what enroot's hook wrote
        assert env["RANK"] == str(rank) and env["PYTORCH_VERSION"] == "2.3.0"
        changes = task_changes(env)
        assert replaced(outside[rank], env, changes) == ["MASTER_PORT"]
        assert tasks[rank]["MASTER_PORT"] == changes["MASTER_PORT"] != env["MASTER_PORT"]
    assert (
        rec.stderr
        == ["tfslurm: --tf-dist's values replace MASTER_PORT set by the container image or an enroot hook"]
        * 4
    )


def test_image_cuda_visible_devices_wins_and_is_said() -> None:
    rec = record("A_after_cuda")
    hooks, outside, tasks = rec.tasks("hook env"), rec.tasks("hook stdin"), rec.tasks("task")
    for rank, env in hooks.items():
        assert gpu_overrides(outside[rank], env) == [("CUDA_VISIBLE_DEVICES", "0", "0,1")]
        assert tasks[rank]["CUDA_VISIBLE_DEVICES"] == "0"
    assert (
        rec.stderr
        == ["tfslurm: the container's CUDA_VISIBLE_DEVICES=0 replaces Slurm's 0,1 and is what the task uses"]
        * 4
    )


@pytest.mark.parametrize("name", ["A_before_plain", "A_before_pytorch"])
def test_wrong_order_is_said_once_per_task(name: str) -> None:
    rec = record(name)
    assert rec.stderr == [WRONG_ORDER] * 4
    assert rec.tasks("hook stdin") == {}  # the hook ran in the host's namespaces, as a plain task


def test_wrong_order_lets_enroot_replace_the_plan() -> None:
    tasks = record("A_before_pytorch").tasks("task")
    for env in tasks.values():
        changes = task_changes(env)
        differ = sorted(k for k, v in changes.items() if v is not None and env.get(k) != v)
        assert differ == ["MASTER_PORT"]
        assert env["MASTER_PORT"] == str(int(env["SLURM_JOB_ID"]) % 4536 + 61000)
    assert all(tasks[r]["OMP_NUM_THREADS"] == "1" for r in tasks)


def test_wrong_order_with_plain_image_keeps_the_plan() -> None:
    for env in record("A_before_plain").tasks("task").values():
        changes = task_changes(env)
        assert all(env.get(k) == v for k, v in changes.items() if v is not None)


def test_setup_b_needs_tfslurm_in_the_image() -> None:
    plain, py = record("B_plain"), record("B_py")
    assert plain.header["exit code"] == "1" and plain.tasks("task") == {}
    assert sum("TaskProlog failed status=1" in line for line in plain.stderr) == 4
    assert py.header["exit code"] == "0"
    for env in py.tasks("task").values():
        changes = task_changes(env)
        assert all(env.get(k) == v for k, v in changes.items() if v is not None)
        assert "TF_CONFIG" in changes


def test_container_mode_main_reads_the_host_environment_on_stdin() -> None:
    rec = record("A_after_pytorch")
    env, outside = rec.tasks("hook env")[2], rec.tasks("hook stdin")[2]
    stdin = b"".join(f"{k}={v}".encode() + b"\0" for k, v in outside.items())
    from io import StringIO

    out = StringIO()
    assert main(env, out, argv=[CONTAINER_ARG], stdin=stdin) == 0
    assert out.getvalue().splitlines() == container_lines(env, outside)
    assert read_environ(stdin) == outside


def test_no_warning_when_the_container_changed_nothing() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "MASTER_PORT": "20005"}
    assert warning(env, env, {"MASTER_PORT": "20005"}) is None


def test_per_task_binding_is_not_taken_for_the_image() -> None:
    outside = {"CUDA_VISIBLE_DEVICES": "0,1"}
    inside = {"CUDA_VISIBLE_DEVICES": "1", "SLURMD_TRES_BIND": "gpu:per_task:1"}
    assert gpu_overrides(outside, inside) == []
    inside["CUDA_VISIBLE_DEVICES"] = "3"
    assert gpu_overrides(outside, inside) == [("CUDA_VISIBLE_DEVICES", "3", "0,1")]


def test_read_environ_keeps_undecodable_bytes() -> None:
    assert read_environ(b"A=1\0B=x=y\0\xff=z\0junk\0") == {"A": "1", "B": "x=y", "\udcff": "z"}
