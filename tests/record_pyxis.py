"""Record task environments inside pyxis + enroot containers into ``tests/data/containers/pyxis/``.

    sudo PATH=/opt/enroot/bin:$PATH .venv/bin/python tests/record_pyxis.py \\
        --pyxis /opt/pyxis/lib/slurm/spank_pyxis.so --images DIR [NAME ...]

pyxis and enroot are not installed by this project: build and install them by hand as
docs/containers.md says (enroot on slurmd's PATH, one enroot data and runtime path per node
in enroot.conf, 50-slurm-pytorch.sh in its hooks.d). ``--images`` holds the squashfs images
(mksquashfs of a root directory, docs/containers.md): ``plain.sqsh`` (a shell and coreutils,
no tfslurm), ``pytorch.sqsh`` (the same with ``PYTORCH_VERSION`` in /etc/environment),
``cuda.sqsh`` (``CUDA_VISIBLE_DEVICES=0`` there) and ``py.sqsh`` (Python and tfslurm at the
paths of this checkout, for the TaskProlog inside the container).

Three throwaway clusters (2 nodes, 4 fake GPUs each): the plugin in set-up A (``prolog=``)
listed after pyxis and before it, and set-up B (``TaskProlog=``). Every step is ``-N2
--ntasks-per-node=2 --gres=gpu:2`` with ``TFSLURM_FOR=tf,torch``. The hook named in
``prolog=`` is a recording wrapper: it keeps what the real hook got (its environment and, with
``--container``, the step's host environment on stdin) before running it. One file per
experiment, in the format ``tests/test_pyxis_replay.py`` reads.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from tfslurm.localcluster import ClusterConfig, LocalCluster, slurm_version
from tfslurm.prolog import write_wrapper

HERE = Path(__file__).resolve().parent
PLUGIN = HERE.parent / "plugin" / "build" / "spank_tfslurm.so"
OUT = HERE / "data" / "containers" / "pyxis"
#: The variables kept: what the plan reads and writes, and what pyxis and enroot add.
KEPT = re.compile(
    r"^(SLURM|SLURMD|TFSLURM|TF_CONFIG|CUDA_|NVIDIA_|ROCR_|HIP_|GPU_DEVICE|MASTER_|WORLD_SIZE|RANK|"
    r"LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|PYTORCH_|OMP_NUM_THREADS|PYXIS_|ENROOT_)"
)
#: Vary from run to run or machine to machine and say nothing about the container.
DROPPED = re.compile(
    r"^(SLURM_TASK_PID|SLURM_LAUNCH_NODE_IPADDR|SLURM_SRUN_COMM_(HOST|PORT)|SLURM_STEP_LAUNCHER_PORT)="
)
STEP = ("-N2", "--ntasks-per-node=2", "--gres=gpu:2")

HOOK = """#!/bin/sh
d="$DUMP_DIR/hook"; mkdir -p "$d"; n=$(printf %06d "${SLURM_PROCID:-0}")
env -0 >"$d/$n.env"
if [ "$1" = --container ]; then cat >"$d/$n.stdin"; exec REAL "$@" <"$d/$n.stdin"; fi
exec REAL "$@"
"""
TASK = 'mkdir -p "$DUMP_DIR/task"; env -0 >"$DUMP_DIR/task/$(printf %06d "$SLURM_PROCID")"'


class Experiment:
    """One srun step in a container: which cluster (``setup``), which image, why."""

    __slots__ = ("description", "image", "name", "setup")

    def __init__(self, name: str, setup: str, image: str, description: str) -> None:
        self.name = name
        self.setup = setup  # "A-after", "A-before" (plugstack order) or "B"
        self.image = image
        self.description = description


EXPERIMENTS = (
    Experiment("A_after_plain", "A-after", "plain", "set-up A, tfslurm after pyxis, image without tfslurm"),
    Experiment(
        "A_after_pytorch", "A-after", "pytorch", "set-up A, tfslurm after pyxis, PYTORCH_VERSION image"
    ),
    Experiment(
        "A_after_cuda", "A-after", "cuda", "set-up A, tfslurm after pyxis, image sets CUDA_VISIBLE_DEVICES=0"
    ),
    Experiment(
        "A_before_plain", "A-before", "plain", "set-up A, tfslurm listed BEFORE pyxis, image without tfslurm"
    ),
    Experiment(
        "A_before_pytorch", "A-before", "pytorch", "set-up A, tfslurm listed BEFORE pyxis, PYTORCH_VERSION"
    ),
    Experiment("B_plain", "B", "plain", "set-up B (TaskProlog), image without tfslurm"),
    Experiment("B_py", "B", "py", "set-up B (TaskProlog), image with Python and tfslurm"),
)


def start(setup: str, work: Path, pyxis: Path, plugin: Path) -> LocalCluster:
    wrapper = write_wrapper(work / "tfslurm-hook")
    hook = work / "record-hook"
    hook.write_text(HOOK.replace("REAL", shlex.quote(str(wrapper))))
    hook.chmod(0o755)
    pyxis_line = f"required {pyxis}"
    if setup == "B":
        lines: tuple[str, ...] = (pyxis_line, f"optional {plugin}")
    else:
        tf_line = f"optional {plugin} prolog={hook}"
        lines = (pyxis_line, tf_line) if setup == "A-after" else (tf_line, pyxis_line)
    config = ClusterConfig(
        num_nodes=2, gpus=4, cpus=4, plugstack_lines=lines, task_prolog=str(wrapper) if setup == "B" else None
    )
    return LocalCluster(config).start()


def environ(data: bytes) -> list[str]:
    entries = [os.fsdecode(e) for e in data.split(b"\0") if e]
    return sorted(e for e in entries if KEPT.match(e) and not DROPPED.match(e) and "\n" not in e)


def record(cluster: LocalCluster, exp: Experiment, work: Path, images: Path) -> Path:
    dumps = work / exp.name
    dumps.mkdir()
    image = images / f"{exp.image}.sqsh"
    args = [*STEP, "--tf-dist", f"--container-image={image}", f"--container-mounts={work}:{work}"]
    env = {"DUMP_DIR": str(dumps), "TFSLURM_FOR": "tf,torch", "ENROOT_ALLOW_SUPERUSER": "yes"}
    cluster.wait_idle()
    done = cluster.srun(*args, "/bin/sh", "-c", TASK, env_extra=env, cwd=str(work), timeout=180)
    shown = ["srun", *args[:-2], f"--container-image={exp.image}.sqsh", "--container-mounts=WORK:WORK", "..."]
    lines = [
        f"# fixture: {exp.name}",
        f"# description: {exp.description}",
        f"# setup: {exp.setup}",
        f"# command: {shlex.join(shown)}",
        f"# exit code: {done.returncode}",
        f"# cluster: slurm {slurm_version()}, tfslurm.localcluster, 2 nodes, Gres=gpu:4, {plugstack_text(exp.setup)}",
        f"# recorded: {datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} by tests/record_pyxis.py",
        *(f"# stderr: {line}" for line in done.stderr.splitlines() if "pyxis: child" not in line),
    ]
    for kind, suffix, heading in (
        ("hook", ".env", "hook env"),
        ("hook", ".stdin", "hook stdin"),
        ("task", "", "task"),
    ):
        folder = dumps / kind
        for path in sorted(folder.glob(f"*{suffix}")) if folder.exists() else []:
            if suffix == "" and "." in path.name:
                continue
            rank = int(path.name.split(".")[0])
            lines += ["", f"## {heading} {rank}", *environ(path.read_bytes())]
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"{exp.name}.txt"
    out.write_text("\n".join(lines) + "\n")
    return out


def plugstack_text(setup: str) -> str:
    return {
        "A-after": "plugstack: pyxis, tfslurm prolog=",
        "A-before": "plugstack: tfslurm prolog=, pyxis",
        "B": "plugstack: pyxis, tfslurm; TaskProlog=",
    }[setup]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="experiments to record (default: all)")
    parser.add_argument("--pyxis", type=Path, default=Path("/opt/pyxis/lib/slurm/spank_pyxis.so"))
    parser.add_argument("--images", type=Path, required=True, help="directory of the .sqsh images")
    parser.add_argument("--plugin", type=Path, default=PLUGIN)
    options = parser.parse_args(argv)
    chosen = [e for e in EXPERIMENTS if not options.names or e.name in options.names]
    with tempfile.TemporaryDirectory(prefix="tfslurm-pyxis-", dir="/tmp") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        for setup in dict.fromkeys(e.setup for e in chosen):
            cluster = (
                start(setup, work / setup, options.pyxis, options.plugin)
                if (work / setup).mkdir() is None
                else None
            )
            assert cluster is not None
            try:
                for exp in (e for e in chosen if e.setup == setup):
                    print(f"wrote {record(cluster, exp, work / setup, options.images)}")
            finally:
                cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
