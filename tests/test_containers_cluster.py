"""Tasks in containers (Charliecloud's ch-run, podman) on the real local cluster: every task
sees inside its container what the same step gives it without one (docs/containers.md).

Four ways a task gets its plan, each on block, cyclic, uneven and heterogeneous steps with
the fake GPUs bound per node (--gres) or per task (--gpus-per-task):

* ``A``: set-up A, the SPANK plugin runs the hook (``srun --tf-dist``), the task is the
  container command;
* ``B``: set-up B, the TaskProlog (``TFSLURM_TF_DIST`` set by hand), the same;
* ``outside``: ``tfslurm run`` outside, starting the program through TFSLURM_CONTAINER;
* ``inside``: the container command starts ``tfslurm run`` inside the image;
* ``plain``: as ``outside``, in the image without tfslurm (no ``tfslurm env`` there).

Each task writes its TF_CONFIG, TFSLURM_ROLE, GPU variables and what ``tfslurm env --for
torch,jax,keras`` prints there; the records of the container runs must equal the bare
run's, task by task. The image: tests/images.sh (built once, cached).
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from containers import (
    RUNTIMES,
    image_root,  # noqa: F401  (the `root` fixture)
    prefix,
    user_env,
)
from jobs import tfslurm_command
from tfslurm.localcluster import LocalCluster

pytestmark = [pytest.mark.cluster]

SPEC = "chief:1,worker:*"
SHAPES: dict[str, tuple[tuple[str, ...], ...]] = {  # srun options, one tuple per het component
    "block": (("-N2", "-n4", "--ntasks-per-node=2", "--gres=gpu:2"),),
    "cyclic": (("-N2", "-n4", "-m", "cyclic", "--gpus-per-task=1"),),
    "uneven": (("-N2", "-n3", "--gres=gpu:2"),),
    "het": (("-N1", "-n1", "--gres=gpu:1"), ("-N2", "-n2", "--gpus-per-task=1")),
}
GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ZE_AFFINITY_MASK",
                 "GPU_DEVICE_ORDINAL", "NVIDIA_VISIBLE_DEVICES", "TFSLURM_ASSIGNED_GPUS")  # fmt: skip

# Run in every task, bare or in the image: what the task sees, one file per task.
DUMP = r"""
import json, os, subprocess, sys
names = ("TF_CONFIG", "TFSLURM_ROLE", "TFSLURM_DESCRIPTOR", "SLURM_PROCID") + tuple(sys.argv[2].split(","))
record = {name: os.environ.get(name) for name in names}
plain = sys.argv[3:] == ["plain"]  # the image without tfslurm: no tfslurm env there
if not plain:
    frameworks = subprocess.run([sys.executable, "-m", "tfslurm", "env", "--for", "torch,jax,keras", "--format", "json"],
                                capture_output=True, text=True)
    record["frameworks"] = json.loads(frameworks.stdout) if frameworks.returncode == 0 else frameworks.stderr.strip()
import importlib.util
record["where"] = {"prefix": sys.prefix, "cwd": os.getcwd(), "tfslurm": importlib.util.find_spec("tfslurm") is not None}
with open(os.path.join(sys.argv[1], os.environ["SLURM_PROCID"] + ".json"), "w") as out:
    json.dump(record, out)
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("containers")
    path.chmod(0o755)
    (path / "dump.py").write_text(DUMP)
    return path


@pytest.fixture(scope="module")
def clusters(slurm_cluster_factory: Any, work: Path, root: Path) -> dict[str, LocalCluster]:
    """Set-up A (the plugin runs the hook) and set-up B (TaskProlog), 4 nodes of 4 GPUs."""
    from plugin_build import build_plugin, build_tools_missing
    from tfslurm import prolog

    missing = build_tools_missing()
    if missing:
        pytest.skip(f"cannot build the plugin: {missing}")
    plugin = build_plugin(work / "build")
    wrapper = prolog.write_wrapper(work / "tfslurm-taskprolog")
    return {
        "A": slurm_cluster_factory(plugstack_lines=[f"optional {plugin} prolog={wrapper}"]),
        "B": slurm_cluster_factory(task_prolog=str(wrapper)),
    }


def variant(mode: str, runtime: str | None, root: Path, work: Path, out: Path) -> str:
    """The shell command that records the task's view the ``mode`` way, in ``runtime``'s
    container (None: bare), into ``out``."""
    out.mkdir(mode=0o777)
    python = "python" if runtime else sys.executable
    dump = [
        python,
        str(work / "dump.py"),
        str(out),
        ",".join(GPU_VARIABLES),
        *(["plain"] if mode == "plain" else []),
    ]
    # podman passes only what it is told: the whole environment here (--env-host), as
    # docs/containers.md says to where the plan is set before the container starts
    outside = mode in ("outside", "plain")
    container = (
        prefix(runtime, root, work, with_tfslurm=mode != "plain", env_host=not outside) if runtime else []
    )
    if outside:
        command = [tfslurm_command(), "run", "--", "python", *dump[1:]]
        if runtime:
            return f"TFSLURM_CONTAINER={shlex.quote(shlex.join(container))} {shlex.join(command)}"
    elif mode == "inside":
        command = [*container, "tfslurm" if runtime else tfslurm_command(), "run", "--", "python", *dump[1:]]
    else:
        command = [*container, *dump]
    return shlex.join(command)


def records(out: Path) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in out.glob("*.json")]
    return sorted(found, key=lambda r: int(r["SLURM_PROCID"]))


def same_step(
    cluster: LocalCluster, work: Path, root: Path, mode: str, shape: str
) -> dict[str, list[dict[str, Any]]]:
    """One step of ``shape``: every task records its view bare, then in each runtime's
    container, one after the other (the same task, so the same plan); records by rank."""
    base = Path(tempfile.mkdtemp(prefix=f"{mode}-{shape}-", dir=work))
    base.chmod(0o755)
    runs = {name: variant(mode, runtime, root, work, base / name)
            for name, runtime in [("bare", None), *((r, r) for r in RUNTIMES)]}  # fmt: skip
    command = ["sh", "-c", " && ".join(runs.values())]
    env = dict(user_env(), PATH=f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin")
    if mode != "A":
        env["TFSLURM_TF_DIST"] = SPEC  # B: the TaskProlog acts on it; tfslurm run plans from it
    argv: list[str] = [f"--tf-dist={SPEC}"] if mode == "A" else []
    for component in SHAPES[shape]:
        argv += [":"] if len(argv) > (mode == "A") else []
        argv += [*component, *command]
    done = cluster.srun(*argv, timeout=240, env_extra=env, cwd=str(work))
    assert done.returncode == 0, f"{mode} {shape}: {done.stderr[-3000:]}"
    return {name: records(base / name) for name in runs}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("mode", ["A", "B", "outside", "inside", "plain"])
def test_task_variables_in_containers_equal_bare(clusters, work, root, mode, shape):
    started = time.monotonic()
    seen = same_step(clusters["B" if mode == "B" else "A"], work, root, mode, shape)
    bare = seen["bare"]
    tasks = sum(int(next(o for o in c if o.startswith("-n"))[2:]) for c in SHAPES[shape])
    assert len(bare) == tasks and all(r["TF_CONFIG"] for r in bare), bare
    assert mode == "plain" or all(isinstance(r["frameworks"], dict) and r["frameworks"] for r in bare), bare
    assert all(r["CUDA_VISIBLE_DEVICES"] for r in bare), bare
    compared = 0
    for runtime in RUNTIMES:
        inside = seen[runtime]
        assert all(r["where"]["prefix"] == "/opt/venv" for r in inside), (runtime, inside)
        assert {r["where"]["tfslurm"] for r in inside} == {mode != "plain"}, (runtime, inside)
        if mode in ("outside", "plain"):  # tfslurm run starts the container in the task's directory
            assert {r["where"]["cwd"] for r in inside} == {str(work)}, (runtime, inside)
        assert len(inside) == tasks, (runtime, inside)
        for mine, theirs in zip(inside, bare, strict=True):
            assert {k: v for k, v in mine.items() if k != "where"} == {
                k: v for k, v in theirs.items() if k != "where"
            }, (runtime, mine["SLURM_PROCID"])
            compared += len(mine) - 1 + (len(mine["frameworks"]) - 1 if "frameworks" in mine else 0)
    print(f"\n{mode} {shape}: {compared} values equal inside and outside ({', '.join(RUNTIMES)}), "
          f"{time.monotonic() - started:.1f} s")  # fmt: skip
