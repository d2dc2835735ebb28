"""``tfslurm demo``: TF training across a throwaway multi-node Slurm cluster, in a minute.

Starts a local cluster (``tfslurm.localcluster``: one slurmctld and a slurmd per "node",
each node in its own network namespace), submits ``sbatch_templates/mwms.sbatch`` with the
shipped MWMS example, streams the job's log (the plan table printed by rank 0 and the
training's progress), checks that every worker ended with the same weights, and tears the
cluster down, also on Ctrl-C or failure.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Final, TextIO

from tfslurm.errors import DemoError
from tfslurm.localcluster import LocalCluster, missing_requirements
from tfslurm.runtime.templates import template_path
from tfslurm.value import Value


class DemoOptions(Value):
    """What ``tfslurm demo`` runs: the cluster's size, the training's length, where it lives.

    ``gpus_per_node`` fake GPUs show the plan's GPU column (tensorflow-cpu ignores them).
    ``state_dir``, ``ctld_port``, ``resv_ports``: where the cluster lives and which ports it
    takes (``state_dir`` and ``ctld_port`` None: a fresh temporary directory and a free
    slurmctld port; ``resv_ports`` None: no ``MpiParams``); see :mod:`tfslurm.localcluster`.
    """

    __slots__ = (
        "ctld_port",
        "gpus_per_node",
        "keep_logs",
        "nodes",
        "resv_ports",
        "state_dir",
        "steps",
        "timeout",
    )
    __match_args__ = (
        "nodes",
        "steps",
        "gpus_per_node",
        "timeout",
        "keep_logs",
        "state_dir",
        "ctld_port",
        "resv_ports",
    )

    def __init__(
        self,
        nodes: int = 2,
        steps: int = 200,
        gpus_per_node: int = 2,
        timeout: float = 180.0,
        keep_logs: bool = False,
        state_dir: str | None = None,
        ctld_port: int | None = None,
        resv_ports: str | None = "20000-20100",
    ) -> None:
        self.nodes: Final = nodes
        self.steps: Final = steps
        self.gpus_per_node: Final = gpus_per_node
        self.timeout: Final = timeout
        self.keep_logs: Final = keep_logs
        self.state_dir: Final = state_dir
        self.ctld_port: Final = ctld_port
        self.resv_ports: Final = resv_ports


_DEFAULT_OPTIONS = DemoOptions()


def check_requirements() -> None:
    """One clear line (DemoError) when the demo cannot run on this machine."""
    missing = missing_requirements()
    if missing:
        raise DemoError("cannot start a local Slurm cluster: " + "; ".join(missing))
    if importlib.util.find_spec("tensorflow") is None:
        if sys.version_info >= (3, 14):
            version = "{}.{}".format(*sys.version_info[:2])
            raise DemoError(
                f"TensorFlow has no stable release for Python {version}: run the demo from a venv "
                "made with Python 3.10-3.13 (e.g. PYTHON=python3.13 ./install.sh)"
            )
        raise DemoError("TensorFlow is not installed: pip install tensorflow-cpu")


def tfslurm_executable() -> str:
    beside = Path(sys.executable).with_name("tfslurm")
    if beside.exists():
        return str(beside)
    found = shutil.which("tfslurm")
    if found:
        return found
    raise DemoError("the tfslurm command is not on PATH nor next to this Python")


def _say(out: TextIO, text: str) -> None:
    print(text, file=out, flush=True)


_NOISE = re.compile(
    r"^\d+: (I0000|W0000|WARNING: All log messages|E0000)|cpu_feature_guard|"
    r"To enable the following instructions|^\d+: rebuild TensorFlow"
)


def _stream(path: Path, position: int, out: TextIO) -> int:
    """Print the new complete lines of ``path`` after ``position``; return the new position."""
    try:
        with open(path, "rb") as f:
            f.seek(position)
            data = f.read()
    except FileNotFoundError:
        return position
    end = data.rfind(b"\n")
    if end < 0:
        return position
    for line in data[: end + 1].decode(errors="replace").splitlines():
        if not _NOISE.search(line):
            _say(out, f"  | {line}")
    return position + end + 1


def run_demo(options: DemoOptions = _DEFAULT_OPTIONS, out: TextIO = sys.stdout) -> int:
    """Run the demo; 0 when the training finished with identical weights on every worker."""
    check_requirements()
    template = template_path("mwms.sbatch")
    tfslurm = tfslurm_executable()
    work = Path(tempfile.mkdtemp(prefix="tfslurm-demo-"))
    started = time.monotonic()
    _say(out, f"tfslurm demo: starting a throwaway Slurm cluster of {options.nodes} nodes ...")
    previous = signal.signal(signal.SIGTERM, _interrupt)
    ok = False
    try:
        with LocalCluster(
            num_nodes=options.nodes,
            gpus=options.gpus_per_node,
            state_dir=options.state_dir,
            ctld_port=options.ctld_port,
            resv_ports=options.resv_ports,
        ) as cluster:
            _say(
                out,
                f"tfslurm demo: cluster up in {time.monotonic() - started:.1f} s: "
                f"nodes {', '.join(cluster.nodes)}, one slurmd each (state {cluster.state_dir})",
            )
            ok = _train(cluster, options, template, tfslurm, work, out, started)
            _say(out, "tfslurm demo: stopping the cluster ...")
    except KeyboardInterrupt:
        _say(out, "tfslurm demo: interrupted; the cluster was stopped")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        if not options.keep_logs and ok:
            shutil.rmtree(work, ignore_errors=True)
    total = time.monotonic() - started
    if ok:
        _say(
            out,
            f"tfslurm demo: done in {total:.1f} s. Next: sbatch_templates/ "
            "(mwms.sbatch, ps.sbatch) and docs/user-guide.md",
        )
        return 0
    _say(out, f"tfslurm demo: FAILED after {total:.1f} s; the job's log is in {work}")
    return 1


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _train(
    cluster: LocalCluster,
    options: DemoOptions,
    template: str,
    tfslurm: str,
    work: Path,
    out: TextIO,
    started: float,
) -> bool:
    env = {
        "TFSLURM": tfslurm,
        "TFSLURM_CHECKPOINT_DIR": str(work / "checkpoints"),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "TF_ENABLE_ONEDNN_OPTS": "0",
    }
    argv = [
        "sbatch",
        "--parsable",
        f"--nodes={options.nodes}",
        "--ntasks-per-node=1",
        f"--output={work}/demo-%j.out",
    ]
    if options.gpus_per_node:
        argv.append(f"--gpus-per-node={options.gpus_per_node}")
    argv += [
        template,
        "python",
        "-m",
        "tfslurm.examples.mwms",
        f"--steps={options.steps}",
        "--log-every=20",
        "--step-delay=0.01",
    ]
    done = cluster.run(argv, env_extra=env, cwd=str(work))
    if done.returncode != 0:
        _say(out, f"tfslurm demo: sbatch failed: {done.stderr.strip()}")
        return False
    job = int(done.stdout.strip().split(";")[0])
    _say(
        out,
        f"tfslurm demo: submitted {os.path.basename(template)} as job {job}: "
        f"{options.nodes} TF workers (MultiWorkerMirroredStrategy), {options.steps} steps",
    )
    log = work / f"demo-{job}.out"
    position, state = 0, ""
    deadline = time.monotonic() + options.timeout
    while time.monotonic() < deadline:
        position = _stream(log, position, out)
        states = cluster.job_states(job)
        if states and all(s not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING") for s in states):
            state = states[0]
            break
        time.sleep(0.2)
    else:
        _say(out, f"tfslurm demo: job {job} did not finish within {options.timeout:.0f} s")
        cluster.run(["scancel", str(job)], timeout=10)
        return False
    position = _stream(log, position, out)
    text = log.read_text(errors="replace") if log.exists() else ""
    digests = dict(re.findall(r"\[(worker:\d+)\] final step \d+ weights (\w+)", text))
    if state != "COMPLETED" or len(digests) != options.nodes:
        _say(
            out,
            f"tfslurm demo: job {job} ended {state or 'UNKNOWN'}; "
            f"{len(digests)} of {options.nodes} workers finished",
        )
        return False
    same = len(set(digests.values())) == 1
    _say(
        out,
        f"tfslurm demo: job {job} COMPLETED {time.monotonic() - started:.1f} s after "
        f"start; final weights {'identical' if same else 'DIFFERENT'} on all "
        f"{options.nodes} workers ({next(iter(digests.values()))})",
    )
    return same
