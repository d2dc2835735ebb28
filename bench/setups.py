"""Shared by the cluster benches (bench/prolog.py, bench/scale.py): the plugin and the hook's
wrapper built for a run, the two site set-ups as local-cluster options, and timed steps.

Set-up A: the plugin runs the hook (``prolog=`` on its plugstack line), once per node and
step. Set-up B: the hook is slurm.conf's ``TaskProlog=``, run in every task; the plugin only
provides ``--tf-dist``. See docs/admin-guide.md.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tfslurm import prolog
from tfslurm.localcluster import LocalCluster

PLUGIN_DIR = Path(__file__).resolve().parent.parent / "plugin"


def build(work: Path, snapshot: bool) -> tuple[Path, Path]:
    """Build the plugin and write the TaskProlog wrapper into ``work``.

    ``snapshot``: run the hook from a copy of the committed package (git HEAD), so edits
    in the working tree while the benchmark runs cannot break or slow it."""
    done = subprocess.run(
        ["make", "-C", str(PLUGIN_DIR), f"O={work / 'build'}", "all"], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"plugin build failed:\n{done.stdout}{done.stderr}")
    parent = None
    if snapshot:
        parent = work / "snapshot"
        parent.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(PLUGIN_DIR.parent), "archive", "HEAD", "tfslurm"],
            capture_output=True,
            check=True,
        )
        subprocess.run(["tar", "-x", "-C", str(parent)], input=archive.stdout, check=True)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(parent)], check=True)
        parent.chmod(0o755)
    wrapper = prolog.write_wrapper(
        work / "tfslurm-taskprolog", package_parent=str(parent) if parent else None
    )
    return work / "build" / "spank_tfslurm.so", wrapper


def setup_a(plugin: Path, hook: Path) -> dict[str, Any]:
    """LocalCluster options of set-up A: the plugin runs ``hook`` once per node and step."""
    return {"plugstack_lines": [f"optional {plugin} prolog={hook}"]}


def setup_b(plugin: Path, wrapper: Path) -> dict[str, Any]:
    """LocalCluster options of set-up B: the wrapper is the TaskProlog of every task."""
    return {"task_prolog": str(wrapper), "plugstack_lines": [f"optional {plugin}"]}


def timed(cluster: LocalCluster, *args: str, timeout: float = 120) -> float:
    """Seconds ``srun ARGS`` takes on ``cluster``; a failed step ends the bench."""
    t0 = time.perf_counter()
    done = cluster.srun(*args, timeout=timeout)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"srun {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return elapsed
