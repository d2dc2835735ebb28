"""Site integration on a real Slurm cluster with plugstack.conf's prolog=: the SPANK plugin
runs the hook itself, once per node where it can, with no TaskProlog (hook_timeout=, a
FIFO or relative SLURM_HOSTFILE, and older wrappers without the per-node run).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from site_install import (  # noqa: F401  (built_site_files, started_*: fixtures)
    HOOK_TIMEOUT,
    PS_STEP,
    batch_env,
    built_site_files,
    check_step,
    comparable,
    hook_runs,
    installed_deb,
    out_dir,
    py,
    read_dumps,
    srun_dump,
    started_hook_cluster,
    started_site_cluster,
    step_envs,
    unhealthy_nodes,
)
from tfslurm.localcluster import LocalCluster

pytestmark = pytest.mark.cluster


# --- prolog=: the plugin runs the hook, no TaskProlog ------------------------------------


def test_plugin_prolog_mode_gives_the_same_cluster(
    hook_cluster: LocalCluster, site_files, tmp_path: Path
) -> None:
    """... and runs the hook once per node, in the node's first task (local id 0)."""
    hook_runs(site_files, clear=True)
    rows = srun_dump(hook_cluster, site_files, tmp_path, *PS_STEP, connect=True)
    check_step(rows, "ps:1,worker:3", 4)
    assert all(len(r["reached"]) == 3 for r in rows)
    first_on_node = {}
    for row in rows:
        if row["SLURM_LOCALID"] == "0":
            first_on_node[row["SLURMD_NODENAME"]] = int(row["SLURM_PROCID"])
    assert sorted(hook_runs(site_files)) == sorted((n, p, True) for n, p in first_on_node.items())


def test_plugin_prolog_mode_reports_errors_and_fails_the_tasks(
    hook_cluster: LocalCluster, site_files
) -> None:
    hook_runs(site_files, clear=True)
    done = hook_cluster.srun("--tf-dist=ps:1,worker:1", "-N2", "-n4", "true", timeout=120)
    assert done.returncode != 0
    printed = [line for line in done.stdout.splitlines() if "asks for 2 tasks but the step has 4" in line]
    assert len(printed) == 4 and all(line.startswith("tfslurm prolog (TFSLURM_TF_DIST=") for line in printed)
    assert "the hook" in done.stderr and "exit status 2" in done.stderr
    assert "Exited with exit code 2" in done.stderr  # as under a TaskProlog= (docs/tf-dist.md)
    assert not unhealthy_nodes(hook_cluster)
    assert [once for _, _, once in hook_runs(site_files)] == [True, True]  # one run per node


def test_hostfile_that_is_a_fifo_fails_the_step_with_one_line(
    hook_cluster: LocalCluster, tmp_path: Path
) -> None:
    """srun reads SLURM_HOSTFILE once; a FIFO is then empty, and a hook that opened it
    again would wait for a writer until scancel: every task fails at once, saying why."""
    tmp_path.chmod(0o755)
    fifo = tmp_path / "hosts"
    os.mkfifo(fifo)
    fifo.chmod(0o666)
    writer = subprocess.Popen(["sh", "-c", f"printf 'node1\\nnode1\\n' > {fifo}"])
    try:
        done = hook_cluster.srun("-m", "arbitrary", "-n2", "--tf-dist=worker:*", "true", timeout=HOOK_TIMEOUT * 3,
                                 env_extra={"SLURM_HOSTFILE": str(fifo)})  # fmt: skip
    finally:
        writer.kill()
        writer.wait()
    assert done.returncode != 0
    reasons = [line for line in done.stdout.splitlines() if "is not a regular file" in line]
    assert len(reasons) == 2, done.stdout + done.stderr
    assert "hook_timeout=" not in done.stderr, "refused at once, not by the time limit"
    assert not unhealthy_nodes(hook_cluster)


def test_relative_hostfile_with_chdir_names_the_cause(site_cluster: LocalCluster, tmp_path: Path) -> None:
    """srun reads a relative SLURM_HOSTFILE from where it runs; --chdir moves the tasks, so
    they cannot find it. The message names --chdir, not the shared file system."""
    tmp_path.chmod(0o755)
    (tmp_path / "hosts").write_text("node1\nnode1\n")
    done = site_cluster.srun("-m", "arbitrary", "-n2", "--chdir=/tmp", "--tf-dist=worker:*", "true", timeout=120,
                             cwd=str(tmp_path), env_extra={"SLURM_HOSTFILE": "hosts"})  # fmt: skip
    assert done.returncode != 0
    lines = [line for line in done.stdout.splitlines() if "SLURM_HOSTFILE='hosts' is a relative path" in line]
    assert len(lines) == 2, done.stdout + done.stderr
    assert all("'/tmp'" in line and "--chdir" in line and "absolute path" in line for line in lines)
    assert "shared file system" not in done.stdout


def test_hook_past_its_time_limit_is_killed_and_the_step_fails(
    hook_cluster: LocalCluster, site_files
) -> None:
    """plugstack hook_timeout=: a hook that hangs (here: sleeps) is killed after the limit,
    and each task fails with one line naming the limit; no second wait per task."""
    hook_runs(site_files, clear=True)
    # a sleep only this run starts: other clusters on the machine (tests/matrix.sh runs
    # versions side by side) share the process table
    sleep = f"601.{os.getpid()}{int(time.time() * 1000) % 100000}"
    started = time.monotonic()
    done = hook_cluster.srun("--tf-dist=worker:*", "-N2", "-n4", "true", timeout=HOOK_TIMEOUT * 4,
                             env_extra={"TEST_HOOK_SLEEP": sleep})  # fmt: skip
    print(
        f"\nhook past hook_timeout={HOOK_TIMEOUT}: the step failed after {time.monotonic() - started:.1f} s"
    )
    assert done.returncode != 0
    assert f"did not finish within {HOOK_TIMEOUT} s and was killed" in done.stderr, done.stderr
    assert "hook_timeout=" in done.stderr
    assert [once for _, _, once in hook_runs(site_files)] == [True, True]  # one run per node, killed
    assert not unhealthy_nodes(hook_cluster)
    for node in ("node1", "node2"):  # the killed hook left nothing running
        left = hook_cluster.on_node(node, ["pgrep", "-f", f"sleep {sleep}"])
        assert left.stdout.strip() == "", left.stdout


# Shapes for the per-node run. In the last, tasks on a node differ in more than their ids
# (GPUs bound per task): all but the node's first must fall back to their own hook run.
# Nodes are named, so that both runs of a shape land on the same ones.
NODE_SHAPES = {
    "block": ["-w", "node[1-2]", "-N2", "-n5", "--gres=gpu:3"],
    "cyclic": ["-w", "node[2-3]", "-N2", "-n5", "-m", "cyclic", "--gres=gpu:3"],
    "plane": ["-w", "node[1-2]", "-N2", "-n6", "-m", "plane=2"],
    "nodelist": ["-w", "node[1,3-4]", "-N3", "-n7"],
    "het": ["-w", "node4", "-N1", "-n2", ":", "-w", "node[1-2]", "-N2", "-n3"],
    "gpus-per-task": ["-w", "node[3-4]", "-N2", "-n4", "--gpus-per-task=1"],
}


def normalized(env: dict[str, str]) -> dict[str, str]:
    """A task's environment without what differs between two jobs of the same shape."""
    out = comparable(env)
    out.pop("TEST_HOOK_PER_TASK", None)
    for key in list(out):
        if "JOB_ID" in key or "JOBID" in key:
            out[key] = "<job>"
    if "TFSLURM_ASSIGNED_GPUS" in out:  # JOB.STEP.RANK:VARIABLE=value
        out["TFSLURM_ASSIGNED_GPUS"] = out["TFSLURM_ASSIGNED_GPUS"].split(".", 1)[1]
    return out


@pytest.mark.parametrize("shape", list(NODE_SHAPES))
def test_plugin_prolog_per_node_run_equals_the_per_task_hook(
    hook_cluster: LocalCluster, site_files, tmp_path: Path, shape: str
) -> None:
    """Every task ends up with exactly the environment the hook run in that task gives."""
    tmp_path.chmod(0o755)
    envs, runs = {}, {}
    for mode in ("per-node", "per-task"):
        out = out_dir(tmp_path, mode)
        extra = {"TFSLURM_PORT_BASE": "23000"}  # ports must not depend on the job
        if mode == "per-task":
            extra["TEST_HOOK_PER_TASK"] = "1"
        hook_runs(site_files, clear=True)
        done = hook_cluster.srun(
            "--tf-dist=chief:1,worker:*", *NODE_SHAPES[shape], *py(site_files["envdump"], "--out", str(out)),
            timeout=120, env_extra=extra,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        envs[mode] = [normalized(e) for e in read_dumps(out)]
        runs[mode] = hook_runs(site_files)
    node_env, task_env = envs["per-node"], envs["per-task"]
    assert len(node_env) == len(task_env) > 0
    for rank, (a, b) in enumerate(zip(node_env, task_env, strict=True)):
        assert a["TF_CONFIG"] and a.get("TFSLURM_TF_DIST") == "chief:1,worker:*"
        assert sorted(set(a) ^ set(b)) == [], f"rank {rank}: variables differ"
        assert a == b, f"rank {rank}: values differ: " + str({k: (a[k], b[k]) for k in a if a[k] != b[k]})
    tasks = len(node_env)
    firsts = {(e["SLURMD_NODENAME"], int(e["SLURM_PROCID"])) for e in node_env if e["SLURM_LOCALID"] == "0"}
    # forced per task: the per-node run fails at once, then every task runs the hook
    assert sorted(p for _, p, once in runs["per-task"] if not once) == list(range(tasks))
    if shape == "gpus-per-task":  # tasks differ in their GPUs: all but each node's first fall back
        assert {(n, p) for n, p, once in runs["per-node"] if once} == firsts
        assert len([r for r in runs["per-node"] if not r[2]]) == tasks - len(firsts)
    else:  # one run per node, in its first task, and no other (het: SLURM_GTIDS are step-wide)
        assert sorted((n, p) for n, p, once in runs["per-node"]) == sorted(firsts)
        assert all(once for _, _, once in runs["per-node"])


def test_plugin_prolog_mode_leaves_other_jobs_untouched(
    hook_cluster: LocalCluster, slurm_cluster: LocalCluster, site_files, tmp_path: Path
) -> None:
    tmp_path.chmod(0o755)
    hook_runs(site_files, clear=True)
    plain, hooked = (
        step_envs(slurm_cluster, site_files, tmp_path),
        step_envs(hook_cluster, site_files, tmp_path),
    )
    assert plain == hooked
    assert batch_env(slurm_cluster, site_files, tmp_path) == batch_env(hook_cluster, site_files, tmp_path)
    assert hook_runs(site_files) == []  # the hook never ran


def test_plugin_prolog_mode_with_a_wrapper_without_node_mode(
    hook_cluster: LocalCluster, site_files, tmp_path: Path
) -> None:
    """A wrapper from before the per-node run prints one task's lines for --node: no task
    takes them; every task runs the hook itself and gets its own cluster."""
    hook_runs(site_files, clear=True)
    rows = srun_dump(hook_cluster, site_files, tmp_path, *PS_STEP, env_extra={"TEST_HOOK_OLD_WRAPPER": "1"})
    check_step(rows, "ps:1,worker:3", 4)
    runs = hook_runs(site_files)
    assert sorted(p for _, p, once in runs if not once) == [0, 1, 2, 3]
    assert len([r for r in runs if r[2]]) == 2


# --- the .deb (make -C plugin deb), installed with dpkg --------------------------------


def test_installed_deb_gives_tf_dist_from_its_own_files(
    deb_install, slurm_cluster_factory: Callable[..., LocalCluster], site_files, tmp_path: Path
) -> None:
    """Slurm reads the package's plugstack.conf.d line through an include, as Debian's
    plugstack.conf does; the step then runs on the package's plugin and hook (its own copy
    of tfslurm, byte-compiled by postinst) alone. dpkg -r takes them away again and keeps
    the line (a configuration file): --tf-dist is then unknown, nothing else fails."""
    cluster = slurm_cluster_factory(
        num_nodes=2, plugstack_lines=[f"include {deb_install['conf_dir']}/*.conf"]
    )
    assert "--tf-dist" in cluster.run(["srun", "--help"], timeout=30).stdout
    rows = srun_dump(cluster, site_files, tmp_path, *PS_STEP, connect=True)
    check_step(rows, "ps:1,worker:3", 4)
    assert all(len(r["reached"]) == 3 for r in rows)
    assert list(deb_install["python"].glob("tfslurm/__pycache__/prolog.*.pyc"))

    done = subprocess.run(
        ["dpkg", f"--admindir={deb_install['admin']}", "-r", "tfslurm-spank"], capture_output=True, text=True, timeout=60
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert not deb_install["plugin"].exists() and not deb_install["hook"].exists()
    assert not deb_install["python"].exists()
    assert list(deb_install["conf_dir"].glob("*.conf"))
    done = cluster.srun("--tf-dist", "-n1", "true", timeout=60)
    assert done.returncode != 0 and "tf-dist" in done.stderr
    assert cluster.srun("-N2", "true", timeout=60).returncode == 0
