"""``tfslurm doctor`` on a real cluster: each fault, really done, is found with its own line,
and a healthy site and allocation give none.

One cluster (4 nodes, 4 fake GPUs each, the plugin running the hook: set-up A). The site's
faults are made by rewriting its plugstack.conf, which Slurm reads again at every srun: the
plugin missing, one of another release, a wrapper missing, one whose Python is gone, one
running another release of tfslurm, no hook at all, and no Slurm commands on PATH. The
allocation's faults are made all in one allocation, one per node where they concern one:
a program holding node3's planned port, node2's link on the plan's network down, node4's
/etc/hosts without node1's name on it, node1's working directory a file system of its own,
a framework that fails to import, and a container prefix that drops TF_CONFIG. GPUs that
Slurm did not give (a CUDA_VISIBLE_DEVICES of the submitting shell), and a node where
tfslurm is missing, are found on the suite's CPU-only cluster. Clocks cannot be skewed here: every node of the
local cluster shares this machine's clock (a time namespace shifts only the monotonic and
boot clocks); the clock decision is tested in test_doctor.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tfslurm
from plugin_build import build_plugin, make, plugin_work_dir
from tfslurm import __version__, prolog
from tfslurm.localcluster import LocalCluster, nodefail

pytestmark = pytest.mark.cluster

OTHER_RELEASE = "0.0.1+doctor"
PORT = 23456  # TFSLURM_PORT_BASE of the faulty allocation: node3's squatter holds it
SQUATTER = (
    "import signal, socket\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    f"s.bind(('0.0.0.0', {PORT}))\n"
    "s.listen(16)\n"
    "print('ready', flush=True)\n"
    "signal.pause()\n"
)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The plugin of this release and of another, and the wrappers the site's faults use."""
    work = plugin_work_dir(tmp_path_factory, "doctor")
    other = make(work / "other", "all", TFD_VERSION=OTHER_RELEASE)
    assert other.returncode == 0, other.stdout + other.stderr
    old = work / "old" / "tfslurm"
    old.mkdir(parents=True)
    (old / "__init__.py").write_text(f"__version__ = {OTHER_RELEASE!r}\n")
    gone = work / "gone-hook"
    gone.write_text(prolog.wrapper_script(python="/nonexistent/python"))
    gone.chmod(0o755)
    for name, body in (("good", ""), ("broken", "raise ImportError('seeded: jaxlib is missing')\n")):
        (work / name / "jax").mkdir(parents=True)
        (work / name / "jax" / "__init__.py").write_text(body)
    return {
        "work": work,
        "plugin": build_plugin(work / "same"),
        "other": work / "other" / "spank_tfslurm.so",
        "wrapper": prolog.write_wrapper(work / "hook"),
        "gone": gone,
        "old": prolog.write_wrapper(work / "old-hook", package_parent=str(work / "old")),
    }


@pytest.fixture(scope="module")
def cluster(
    slurm_cluster_factory: Callable[..., LocalCluster], files: dict[str, Path]
) -> Iterator[LocalCluster]:
    cluster = slurm_cluster_factory(plugstack_lines=[f"optional {files['plugin']} prolog={files['wrapper']}"])
    healthy = Path(cluster.files.plugstack_conf).read_text()
    yield cluster
    Path(cluster.files.plugstack_conf).write_text(healthy)


def doctor(
    cluster: LocalCluster, cwd: Path, *args: str, salloc: tuple[str, ...] = (), **env: str
) -> tuple[int, dict[str, Any], str]:
    """``tfslurm doctor --json ARGS`` (``salloc``: in ``salloc SALLOC``): status, report, stderr."""
    argv = [sys.executable, "-m", "tfslurm", "doctor", "--json", *args]
    if salloc:
        argv = ["salloc", *salloc, *argv]
    done = cluster.run(argv, timeout=240, env_extra=env, cwd=str(cwd))
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def lines(report: dict[str, Any]) -> dict[str, tuple[list[str], str]]:
    """check -> (nodes, message) of each finding; one finding per check, asserted."""
    checks = [f["check"] for f in report["findings"]]
    assert len(checks) == len(set(checks)), report["findings"]
    return {f["check"]: (f["nodes"], f["message"]) for f in report["findings"]}


def workdir(path: Path) -> Path:
    """A directory every node's task may write to (tasks may run as another user)."""
    path.mkdir(exist_ok=True)
    path.chmod(0o777)
    return path


def test_a_healthy_site_and_allocation_have_no_finding(
    cluster: LocalCluster, files: dict[str, Path], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    status, report, _ = doctor(cluster, cwd)
    assert (status, report["findings"]) == (0, [])
    assert f"plugin registered, tfslurm {__version__}" in report["checked"]
    assert any(c.endswith(f"{files['wrapper']} runs tfslurm {__version__}") for c in report["checked"])
    jax = {"PYTHONPATH": f"{files['work'] / 'good'}:{os.environ.get('PYTHONPATH', '')}"}
    status, report, err = doctor(cluster, cwd, "--framework", "jax", salloc=("-N4", "--gres=gpu:2"), **jax)
    assert (status, report["findings"]) == (0, []), err
    checked = " | ".join(report["checked"])
    assert "node[1-4]: names resolve, planned ports free and reached, clocks within 1 s" in checked
    assert "node[1-4]: gpus (2 per node, as Slurm gave)" in checked
    assert f"node[1-4]: the hook {files['wrapper']} runs tfslurm {__version__}" in checked
    done = cluster.run(
        [sys.executable, "-m", "tfslurm", "doctor", "--submit", "--", "-N2"], timeout=240, cwd=str(cwd)
    )
    assert done.returncode == 0 and done.stdout.startswith("tfslurm doctor: healthy ("), (
        done.stdout + done.stderr
    )
    assert "node[1-2]: names resolve" in done.stdout
    assert not list(cwd.glob(".tfslurm-doctor-*")), "the doctor leaves no file behind"


@pytest.mark.parametrize(
    ("seeded", "found"),
    [
        ("absent", {"plugin": "srun has no --tf-dist: no line of"}),
        ("other release", {"version": f"the plugin (srun --help) is tfslurm {OTHER_RELEASE} but this tfslurm is {__version__}",
                           "wrapper": "the hook's wrapper /nonexistent/hook (prolog= in"}),
        ("python gone", {"wrapper": "runs Python /nonexistent/python, which is not here"}),
        ("old wrapper", {"version": f"runs tfslurm {OTHER_RELEASE} but the plugin is {__version__}"}),
        ("no hook", {"wrapper": "srun offers --tf-dist but no hook gives its tasks TF_CONFIG"}),
        ("no slurm", {"slurm": "sinfo is not on PATH"}),
    ],
)  # fmt: skip
def test_each_site_fault_is_its_own_line(
    cluster: LocalCluster, files: dict[str, Path], tmp_path: Path, seeded: str, found: dict[str, str]
) -> None:
    plugstack = Path(cluster.files.plugstack_conf)
    healthy = plugstack.read_text()
    line = {
        "absent": "",
        "other release": f"optional {files['other']} prolog=/nonexistent/hook",
        "python gone": f"optional {files['plugin']} prolog={files['gone']}",
        "old wrapper": f"optional {files['plugin']} prolog={files['old']}",
        "no hook": f"optional {files['plugin']}",
    }.get(seeded)
    try:
        if line is not None:
            plugstack.write_text(line + "\n")
        env = {"PATH": "/nonexistent"} if seeded == "no slurm" else {}
        status, report, err = doctor(cluster, workdir(tmp_path), **env)
    finally:
        plugstack.write_text(healthy)
    assert status == 1, err
    shown = lines(report)
    assert sorted(shown) == sorted(found), report
    for check, said in found.items():
        assert said in shown[check][1] and shown[check][0] == [os.uname().nodename], shown[check]


@pytest.fixture
def faulty_nodes(cluster: LocalCluster, tmp_path: Path) -> Iterator[Path]:
    """node3's planned port taken, node2's eth1 down, node4 without node1-eth1 in its
    /etc/hosts, node1's working directory its own: undone afterwards."""
    cwd = workdir(tmp_path / "work")
    hosts = tmp_path / "hosts-node4"
    hosts.write_text(
        "".join(x for x in Path(cluster.files.hosts).read_text().splitlines(True) if "node1-eth1" not in x)
    )
    squatter = cluster.popen(
        cluster.node_argv("node3", [sys.executable, "-c", SQUATTER]), stdout=subprocess.PIPE, text=True
    )
    mounted: list[tuple[str, str]] = []
    try:
        assert squatter.stdout is not None and squatter.stdout.readline().strip() == "ready"
        nodefail.set_second_link(cluster, "node2", up=False)
        for node, argv in (
            ("node4", ["mount", "--bind", str(hosts), "/etc/hosts"]),
            ("node1", ["mount", "-t", "tmpfs", "doctor", str(cwd)]),
        ):
            done = cluster.on_node(node, argv, timeout=30)
            assert done.returncode == 0, done.stderr
            mounted.append((node, argv[-1]))
        yield cwd
    finally:
        for node, target in reversed(mounted):
            cluster.on_node(node, ["umount", target], timeout=30)
        nodefail.set_second_link(cluster, "node2", up=True)
        squatter.kill()
        squatter.wait()


def test_each_allocation_fault_is_its_own_line(
    cluster: LocalCluster, files: dict[str, Path], faulty_nodes: Path
) -> None:
    env = {
        "TFSLURM_PORT_BASE": str(PORT),
        "TFSLURM_HOST_TEMPLATE": "{node}-eth1",
        "PYTHONPATH": f"{files['work'] / 'broken'}:{os.environ.get('PYTHONPATH', '')}",
        "TFSLURM_CONTAINER": "env -u TF_CONFIG",
    }
    status, report, err = doctor(cluster, faulty_nodes, "--framework", "jax", salloc=("-N4",), **env)
    assert status == 1, err
    shown = lines(report)
    assert shown == {
        "port": (["node3"], f"the planned port {PORT} cannot be bound: Address already in use"),
        "name": (["node4"], "does not resolve node1-eth1 (the planned host of node1)"),
        "reach": (["node2"], "reaches no other node at its planned port, and no other node reaches it"),
        "framework": (["node1", "node2", "node3", "node4"], f"import jax fails in {sys.executable}: ImportError: seeded: jaxlib is missing"),
        "container": (["node1", "node2", "node3", "node4"], "TFSLURM_CONTAINER='env -u TF_CONFIG' does not pass TF_CONFIG into the container"),
        "cwd": (["node1"], f"the working directory {faulty_nodes} is not the one node[2-4] share: a file written there is not seen by the others"),
    }, report["findings"]  # fmt: skip
    for finding in report["findings"]:
        assert finding["fix"], finding


def test_gpus_slurm_did_not_give_are_found(
    slurm_cluster_factory: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    """On nodes where Slurm manages no GPUs (no gres) a CUDA_VISIBLE_DEVICES of the
    submitting shell reaches the tasks: they would use GPUs no one gave them. (Where Slurm
    manages GPUs it removes such a value from a step that asked for none: observed.)"""
    cpu_only = slurm_cluster_factory(gpus=0)  # the suite's CPU-only cluster, no plugin
    cwd = workdir(tmp_path)
    status, report, err = doctor(cpu_only, cwd, salloc=("-N2",), CUDA_VISIBLE_DEVICES="0,1")
    assert status == 1, err
    assert lines(report) == {
        "plugin": ([os.uname().nodename], f"srun has no --tf-dist: no line of {cpu_only.files.plugstack_conf} loads spank_tfslurm.so"),
        "gpus": (["node1", "node2"], "CUDA_VISIBLE_DEVICES=0,1 but Slurm gave this job no GPUs here (set by the submitting shell or the job script?)"),
    }  # fmt: skip
    status, report, err = doctor(cpu_only, cwd, salloc=("-N2",))
    assert [f["check"] for f in report["findings"]] == ["plugin"], err
    assert "node[1-2]: gpus (none given, none visible)" in report["checked"]


def test_a_node_without_tfslurm_is_named_at_once(
    slurm_cluster_factory: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    """tfslurm's package hidden on node2 (an empty file system over it there): its task
    fails, srun says so, and the doctor names node2 without waiting for its timeout."""
    cpu_only = slurm_cluster_factory(gpus=0)
    package = str(Path(tfslurm.__file__).resolve().parent)
    done = cpu_only.on_node("node2", ["mount", "-t", "tmpfs", "doctor", package], timeout=30)
    assert done.returncode == 0, done.stderr
    try:
        started = time.monotonic()
        status, report, err = doctor(cpu_only, workdir(tmp_path), "--timeout", "100", salloc=("-N2",))
        took = time.monotonic() - started
    finally:
        cpu_only.on_node("node2", ["umount", package], timeout=30)
    assert status == 1, err
    shown = lines(report)
    assert sorted(shown) == ["node", "plugin"], report
    assert shown["node"][0] == ["node2"] and shown["node"][1].startswith("its doctor task did not report"), (
        shown
    )
    # srun's output says why: the import error, or srun's own line for the task
    assert "(srun: " in shown["node"][1] and "rror" in shown["node"][1], shown
    assert took < 60, took  # not the 100 s the nodes had to say hello
