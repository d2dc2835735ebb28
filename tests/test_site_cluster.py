"""Site integration on a real Slurm cluster: the SPANK plugin loaded through plugstack.conf
plus the TaskProlog wrapper, exactly as docs/admin-guide.md installs them.

Expectations are derived from what Slurm itself told each task (its node name, reserved
ports and GPUs), never by calling tfslurm's planner, and the addresses are checked by
letting every task listen on its port and connect to every other task.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from test_plugin import PLUGIN_NAME, build_plugin, build_tools_missing
from tfslurm import prolog
from tfslurm.localcluster import LocalCluster, slurm_version

pytestmark = pytest.mark.cluster

# A 4-task step over 2 nodes with 2 GPUs each, ps:1,worker:3 by the plugin's option.
PS_STEP = ("--tf-dist=ps:1,worker:3", "-N2", "-n4", "--ntasks-per-node=2", "--gres=gpu:2")
SITE_ARGS = "default_spec=chief:1,worker:* host_template={node}"
HOOK_TIMEOUT = 20  # hook_cluster's hook_timeout=: generous for a loaded machine, short for a test

# Run in every task: report what the task sees; with --connect, also prove the addresses
# in TF_CONFIG are right by listening on our own and reaching every other task's.
DUMP = r"""
import json, os, socket, sys, time
keys = ("TF_CONFIG", "TFSLURM_TF_DIST", "TFSLURM_DESCRIPTOR", "TFSLURM_HOST_TEMPLATE",
        "CUDA_VISIBLE_DEVICES", "SLURM_PROCID", "SLURM_LOCALID", "SLURMD_NODENAME",
        "SLURM_STEP_GPUS", "SLURM_STEP_RESV_PORTS", "SLURM_SCRIPT_CONTEXT", "SLURM_STEP_NUM_TASKS")
out = {k: os.environ.get(k) for k in keys}
if "--plan" in sys.argv:
    sys.path.insert(0, sys.argv[sys.argv.index("--plan") + 1])
    from tfslurm.plan import plan_from_environ
    out["rebuilt_tf_config"] = plan_from_environ().tf_config()
if "--connect" in sys.argv and out["TF_CONFIG"]:
    config = json.loads(out["TF_CONFIG"])
    mine = config["cluster"][config["task"]["type"]][config["task"]["index"]]
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", int(mine.rsplit(":", 1)[1])))
    server.listen(64)
    server.settimeout(0.05)
    reached, deadline = set(), time.time() + 30
    others = [a for job in config["cluster"].values() for a in job if a != mine]
    while len(reached) < len(others) and time.time() < deadline:
        for address in others:
            if address in reached:
                continue
            host, port = address.rsplit(":", 1)
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                reached.add(address)
            except OSError:
                pass
        try:
            server.accept()[0].close()
        except OSError:
            pass
        time.sleep(0.05)
    out["reached"] = sorted(reached)
    # keep listening a moment so slower tasks can still reach us
    end = time.time() + 2
    while time.time() < end:
        try:
            server.accept()[0].close()
        except OSError:
            pass
emit(out)
"""

# Long lines from several tasks can be split and interleaved on srun's stdout, so each task
# writes its record to DIR/<rank>.json (--out DIR) instead of printing it.
EMIT = r"""
import json, os, sys
def emit(record):
    if "--out" in sys.argv:
        target = os.path.join(sys.argv[sys.argv.index("--out") + 1], os.environ.get("SLURM_PROCID", "batch") + ".json")
        with open(target, "w") as f:
            json.dump(record, f)
    else:
        sys.exit("dump: --out DIR is required")
"""

ENV_DUMP = "emit(dict(os.environ))\n"


@pytest.fixture(scope="module")
def site_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    missing = build_tools_missing()
    if missing:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes", "on"):
            pytest.fail(f"CI=true and the plugin cannot be built: {missing}")
        pytest.skip(f"cannot build the plugin: {missing}")
    work = tmp_path_factory.mktemp("site")
    work.chmod(0o755)
    plugin = build_plugin(work / "build")
    wrapper = prolog.write_wrapper(work / "tfslurm-taskprolog")
    (work / "dump.py").write_text(EMIT + DUMP)
    (work / "envdump.py").write_text(EMIT + ENV_DUMP)
    # prolog= points at this: it logs every run of the hook, then runs the real wrapper;
    # TEST_HOOK_PER_TASK makes the per-node run fail, so every task runs the hook itself;
    # TEST_HOOK_OLD_WRAPPER drops --node, as a wrapper from before the per-node run does.
    log = work / "hook.log"
    log.touch(mode=0o666)
    logged = work / "logged-hook"
    logged.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo "${{SLURMD_NODENAME:-?}} ${{SLURM_PROCID:-?}} $*" >> {log}
        if [ -n "${{TEST_HOOK_SLEEP:-}}" ]; then sleep "$TEST_HOOK_SLEEP"; fi
        if [ "$1" = --node ] && [ -n "${{TEST_HOOK_PER_TASK:-}}" ]; then exit 3; fi
        if [ -n "${{TEST_HOOK_OLD_WRAPPER:-}}" ]; then exec {wrapper}; fi
        exec {wrapper} "$@"
        """))  # fmt: skip
    logged.chmod(0o755)
    return {"work": work, "plugin": plugin, "wrapper": wrapper, "dump": work / "dump.py",
            "envdump": work / "envdump.py", "logged_hook": logged, "hook_log": log}  # fmt: skip


@pytest.fixture(scope="module")
def site_cluster(
    slurm_cluster_factory: Callable[..., LocalCluster], site_files: dict[str, Path]
) -> LocalCluster:
    """TaskProlog = the tfslurm wrapper, plugstack = the plugin with site defaults."""
    return slurm_cluster_factory(
        task_prolog=str(site_files["wrapper"]),
        plugstack_lines=[f"optional {site_files['plugin']} {SITE_ARGS}"],
    )


@pytest.fixture(scope="module")
def hook_cluster(
    slurm_cluster_factory: Callable[..., LocalCluster], site_files: dict[str, Path]
) -> LocalCluster:
    """No TaskProlog at all: the plugin runs the hook itself (prolog=) for --tf-dist tasks
    (through a script that logs each run, see site_files), HOOK_TIMEOUT s at most."""
    return slurm_cluster_factory(
        plugstack_lines=[
            f"optional {site_files['plugin']} prolog={site_files['logged_hook']} hook_timeout={HOOK_TIMEOUT}"
        ],
    )


def hook_runs(site_files, clear: bool = False) -> list[tuple[str, int | None, bool]]:
    """(node, SLURM_PROCID, whether it was the per-node run) of each hook run logged so far."""
    log = site_files["hook_log"]
    runs = []
    for line in log.read_text().splitlines():
        node, procid, *args = line.split()
        runs.append((node, None if procid == "?" else int(procid), args == ["--node"]))
    if clear:
        log.write_text("")
    return runs


def py(script: Path, *args: str) -> list[str]:
    return [sys.executable, "-S", str(script), *args]


def dump_dir(base: Path) -> Path:
    """A fresh directory under ``base`` (the test's tmp_path, so pytest removes it) that
    every task can write its record into (tasks may run as another user)."""
    base.chmod(0o755)
    path = Path(tempfile.mkdtemp(prefix="dump-", dir=base))
    path.chmod(0o777)
    return path


def read_dumps(directory: Path) -> list[dict[str, Any]]:
    rows = [json.loads(p.read_text()) for p in directory.glob("*.json")]
    return sorted(rows, key=lambda r: int(r.get("SLURM_PROCID") or 0))


def srun_dump(
    cluster: LocalCluster,
    site_files: dict[str, Path],
    tmp: Path,
    *options: str,
    connect: bool = False,
    env_extra: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Every task of ``srun OPTIONS`` records its environment (and with ``connect``, which
    tasks it reached at the addresses its TF_CONFIG names): the records, by rank."""
    out = dump_dir(tmp)
    dump = py(site_files["dump"], *(["--connect"] if connect else []), "--out", str(out))
    done = cluster.srun(*options, *dump, timeout=120, env_extra=env_extra)
    assert done.returncode == 0, done.stderr
    return read_dumps(out)


def out_dir(base: Path, name: str) -> Path:
    path = base / name
    path.mkdir(mode=0o777, parents=True, exist_ok=True)
    path.chmod(0o777)
    return path


def expected_jobs(spec: str, num_tasks: int) -> list[tuple[str, int]]:
    entries = [(e.split(":")[0], e.split(":")[1]) for e in spec.split(",")]
    fixed = sum(int(c) for _, c in entries if c != "*")
    jobs: list[tuple[str, int]] = []
    for name, count in entries:
        n = num_tasks - fixed if count == "*" else int(count)
        jobs += [(name, i) for i in range(n)]
    return jobs


def check_step(
    rows: list[dict[str, Any]], spec: str, num_tasks: int, gpus: bool = True, reserved_ports: bool = True
) -> None:
    """Every task got the TF_CONFIG Slurm's own variables call for, and its own GPUs."""
    assert [int(r["SLURM_PROCID"]) for r in rows] == list(range(num_tasks))
    jobs = expected_jobs(spec, num_tasks)
    names = list(dict.fromkeys(name for name, _ in jobs))
    clusters = {json.dumps(json.loads(r["TF_CONFIG"])["cluster"]) for r in rows}
    assert len(clusters) == 1, "every task must see the same cluster"
    cluster = json.loads(clusters.pop())
    assert list(cluster) == names
    flat = [address for name in names for address in cluster[name]]
    assert len(flat) == num_tasks and len(set(flat)) == num_tasks
    devices_on_node: dict[str, list[str]] = {}
    for rank, row in enumerate(rows):
        assert row["TFSLURM_TF_DIST"] == spec
        assert row["SLURM_SCRIPT_CONTEXT"] is None
        config = json.loads(row["TF_CONFIG"])
        assert (config["task"]["type"], config["task"]["index"]) == jobs[rank]
        host, port = flat[rank].rsplit(":", 1)
        assert host == row["SLURMD_NODENAME"]
        if reserved_ports:
            assert int(port) in expand_ports(row["SLURM_STEP_RESV_PORTS"])
        if gpus:
            mine = [d for d in (row["CUDA_VISIBLE_DEVICES"] or "").split(",") if d]
            assert mine, f"rank {rank} got no GPU"
            assert set(mine) <= set(row["SLURM_STEP_GPUS"].split(","))
            devices_on_node.setdefault(row["SLURMD_NODENAME"], []).extend(mine)
    for node, devices in devices_on_node.items():
        assert len(devices) == len(set(devices)), f"GPUs shared on {node}: {devices}"


def expand_ports(text: str) -> set[int]:
    ports: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        ports.update(range(int(lo), int(hi or lo) + 1))
    return ports


def unhealthy_nodes(cluster: LocalCluster) -> list[str]:
    """Nodes drained, down or failed (a failing required SPANK plugin can drain a node)."""
    states = cluster.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=30).stdout.splitlines()
    assert states
    bad = ("DRAIN", "DOWN", "FAIL", "NOT_RESPONDING")
    return [line for line in states if any(word in line.upper() for word in bad)]


# --- the option is there ---------------------------------------------------------------


@pytest.mark.parametrize("command", ["srun", "sbatch", "salloc"])
def test_help_lists_tf_dist(site_cluster: LocalCluster, command: str) -> None:
    done = site_cluster.run([command, "--help"], timeout=30)
    assert done.returncode == 0
    assert "--tf-dist" in done.stdout and "ps:1,worker:*" in done.stdout
    assert "TaskProlog" not in done.stdout  # set-up A has none: the help must not claim one


# --- srun --------------------------------------------------------------------------------


def test_srun_gives_every_task_its_tf_config_and_gpus(
    site_cluster: LocalCluster, site_files, tmp_path: Path
) -> None:
    rows = srun_dump(site_cluster, site_files, tmp_path, *PS_STEP, connect=True)
    check_step(rows, "ps:1,worker:3", 4)
    assert len({r["SLURMD_NODENAME"] for r in rows}) == 2
    for row in rows:  # every task reached every other task at the address TF_CONFIG names
        assert len(row["reached"]) == 3, row


def test_bare_tf_dist_uses_the_site_default_and_host_template(
    site_cluster: LocalCluster, site_files, tmp_path: Path
) -> None:
    rows = srun_dump(site_cluster, site_files, tmp_path, "--tf-dist", "-N2", "-n3", "--gres=gpu:3")
    check_step(rows, "chief:1,worker:*", 3)
    assert {r["TFSLURM_HOST_TEMPLATE"] for r in rows} == {"{node}"}


def test_cpu_only_step(site_cluster: LocalCluster, site_files, tmp_path: Path) -> None:
    rows = srun_dump(site_cluster, site_files, tmp_path, "--tf-dist=worker:*", "-N3", "-n3")
    check_step(rows, "worker:*", 3, gpus=False)
    assert all(not r["CUDA_VISIBLE_DEVICES"] for r in rows)


def test_heterogeneous_step_covers_every_component(
    site_cluster: LocalCluster, site_files, tmp_path: Path
) -> None:
    """The option given to either component reaches the tasks of all of them."""
    for argv in (["--tf-dist=chief:1,worker:*", "-N1", "-n1", ":", "-N2", "-n3"],
                 ["-N1", "-n1", ":", "--tf-dist=chief:1,worker:*", "-N2", "-n3"]):  # fmt: skip
        rows = srun_dump(site_cluster, site_files, tmp_path, *argv, connect=True)
        # ports of a het step are not taken from SLURM_STEP_RESV_PORTS (see gpus-and-ports.md)
        check_step(rows, "chief:1,worker:*", 4, gpus=False, reserved_ports=False)
        assert all(len(r["reached"]) == 3 for r in rows)


# --- sbatch ------------------------------------------------------------------------------


def test_sbatch_tf_dist_reaches_the_steps_in_the_script(
    site_cluster: LocalCluster, site_files, tmp_path: Path
) -> None:
    tmp_path.chmod(0o755)
    dump = " ".join(py(site_files["dump"]))
    dirs = {name: out_dir(tmp_path, name) for name in ("batch", "full", "half", "override")}
    script = textwrap.dedent(f"""\
        #!/bin/sh
        {dump} --out {dirs['batch']}
        srun --gres=gpu:2 {dump} --out {dirs['full']}
        srun -n2 --ntasks-per-node=1 {dump} --out {dirs['half']}
        srun -n1 -N1 --tf-dist=worker:1 {dump} --out {dirs['override']}
        """)  # fmt: skip
    job = site_cluster.sbatch(
        script, "--tf-dist=chief:1,worker:*", "-N2", "--ntasks-per-node=2", "--gres=gpu:2",
        "-o", str(tmp_path / "job.out"), cwd=str(tmp_path),
    )  # fmt: skip
    state = site_cluster.wait_job(job, timeout=180)
    assert state == "COMPLETED", (tmp_path / "job.out").read_text()
    (batch,) = read_dumps(dirs["batch"])
    # the batch script is not a TF task: no marker, no TF_CONFIG, no leaked prolog context
    assert batch["TFSLURM_TF_DIST"] is None and batch["TF_CONFIG"] is None
    assert batch["SLURM_SCRIPT_CONTEXT"] is None
    check_step(read_dumps(dirs["full"]), "chief:1,worker:*", 4)
    check_step(read_dumps(dirs["half"]), "chief:1,worker:*", 2, gpus=False)
    (alone,) = read_dumps(dirs["override"])
    assert alone["TFSLURM_TF_DIST"] == "worker:1"
    assert json.loads(alone["TF_CONFIG"])["task"] == {"type": "worker", "index": 0}


def test_salloc_tf_dist_reaches_the_steps_in_the_allocation(
    site_cluster: LocalCluster, site_files, tmp_path: Path
) -> None:
    out = dump_dir(tmp_path)
    done = site_cluster.run(
        ["salloc", "--tf-dist=chief:1,worker:*", "-N2", "--ntasks-per-node=2",
         "srun", *py(site_files["dump"], "--out", str(out))], timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    check_step(read_dumps(out), "chief:1,worker:*", 4, gpus=False)


@pytest.mark.parametrize("how", ["sbatch --tf-dist", "#SBATCH --tf-dist", "salloc --tf-dist"])
def test_bare_tf_dist_of_an_allocation_is_the_site_default(
    site_cluster: LocalCluster, site_files, tmp_path: Path, how: str
) -> None:
    """Slurm hands the steps of a bare `sbatch --tf-dist` the text "(null)"; the steps
    must get the site default (chief:1,worker:*), as a bare `srun --tf-dist` does."""
    tmp_path.chmod(0o755)
    out = out_dir(tmp_path, "steps")
    dump = " ".join(py(site_files["dump"]))
    if how.startswith("salloc"):
        done = site_cluster.run(
            ["salloc", "--tf-dist", "-N2", "--ntasks-per-node=2", "srun", *py(site_files["dump"], "--out", str(out))],
            timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    else:
        header = "#SBATCH --tf-dist\n" if how.startswith("#") else ""
        args = [] if header else ["--tf-dist"]
        job = site_cluster.sbatch(
            f"#!/bin/sh\n{header}srun {dump} --out {out}\n", *args, "-N2", "--ntasks-per-node=2",
            "-o", str(tmp_path / "job.out"), cwd=str(tmp_path),
        )  # fmt: skip
        assert site_cluster.wait_job(job, timeout=180) == "COMPLETED", (tmp_path / "job.out").read_text()
    rows = read_dumps(out)
    check_step(rows, "chief:1,worker:*", 4, gpus=False)
    assert {r["TFSLURM_TF_DIST"] for r in rows} == {"chief:1,worker:*"}


# --- bad specs fail at submit, and only the jobs that asked ----------------------------


BAD_SPECS = ["bogus", "worker:0", "chief:2,worker:*", "ps:1;worker:3", "worker:4\nps:1",
             "worker:*,ps:*", "w\u00f6rker:2", "worker:" + "9" * 30, "x" * 5000]  # fmt: skip


@pytest.mark.parametrize("command", ["srun", "sbatch", "salloc"])
def test_bad_spec_is_rejected_at_submit(site_cluster: LocalCluster, command: str) -> None:
    before = site_cluster.run(["squeue", "-h", "-o", "%i"], timeout=30).stdout.split()
    for spec in BAD_SPECS:
        argv = [command, f"--tf-dist={spec}", "-n1"]
        argv += ["--wrap", "true"] if command == "sbatch" else ["true"]
        done = site_cluster.run(argv, timeout=60)
        assert done.returncode != 0, (command, spec)
        first = done.stderr.splitlines()[0]
        assert f"{command}: error: invalid --tf-dist=" in first, done.stderr
        assert "Submitted" not in done.stdout and "Granted" not in done.stderr
        assert "\x1b" not in done.stderr
    after = site_cluster.run(["squeue", "-h", "-o", "%i"], timeout=30).stdout.split()
    assert set(after) <= set(before)  # nothing new was queued (an earlier test's job may end)


def test_spec_slipping_past_srun_fails_the_task_not_the_node(site_cluster: LocalCluster) -> None:
    """Setting Slurm's internal option variable by hand skips srun's check; the plugin
    checks again in slurmstepd and fails that step only (the node is not drained)."""
    done = site_cluster.srun("-N1", "-n2", "true", env_extra={"_SLURM_SPANK_OPTION_tfslurm_tf_dist": "bad;x"})
    assert done.returncode != 0
    assert "tfslurm: invalid --tf-dist=bad;x" in done.stderr
    assert not unhealthy_nodes(site_cluster)
    assert site_cluster.srun("-N4", "-n4", "true").returncode == 0


def test_spec_not_fitting_the_step_fails_every_task_saying_why(
    site_cluster: LocalCluster,
) -> None:
    done = site_cluster.srun("--tf-dist=ps:1,worker:1", "-N2", "-n4", "true", timeout=120)
    assert done.returncode != 0
    lines = [
        line
        for line in done.stdout.splitlines()
        if line.startswith("tfslurm prolog (TFSLURM_TF_DIST=ps:1,worker:1)")
    ]
    assert len(lines) == 4 and all("asks for 2 tasks but the step has 4" in line for line in lines)
    assert "Exited with exit code 2" in done.stderr


# --- jobs without --tf-dist see no trace of tfslurm -----------------------------------


VOLATILE = {  # differ between any two jobs, or between two clusters (ports, addresses, paths)
    "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_TASK_PID", "SLURM_SRUN_COMM_PORT", "SLURM_STEP_LAUNCHER_PORT",
    "SLURM_STEP_RESV_PORTS", "SLURM_CONF", "SLURM_WORKING_CLUSTER", "SLURM_LAUNCH_NODE_IPADDR",
    "SLURM_SRUN_COMM_HOST",
    # per job since 23.02 (start and end time) and 26.05 (the job's SLUID)
    "SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME", "SLURM_JOB_SLUID",
}  # fmt: skip


def comparable(env: dict[str, str]) -> dict[str, str]:
    return {k: ("<volatile>" if k in VOLATILE else v) for k, v in env.items()}


def step_envs(cluster: LocalCluster, site_files, cwd: Path) -> list[dict[str, str]]:
    out = out_dir(cwd, f"step-{cluster.ctld_port}")
    done = cluster.srun(
        "-w", "node[1-2]", "-N2", "--ntasks-per-node=2", "--gres=gpu:2",
        *py(site_files["envdump"], "--out", str(out)), timeout=120, cwd=str(cwd),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [comparable(e) for e in read_dumps(out)]


def batch_env(cluster: LocalCluster, site_files, cwd: Path) -> dict[str, str]:
    out = out_dir(cwd, f"batch-{cluster.ctld_port}")
    job = cluster.sbatch(
        f"#!/bin/sh\n{sys.executable} -S {site_files['envdump']} --out {out}\n",
        "-w", "node1", "-N1", "-n1", "-J", "envdump", "-o", "/dev/null", cwd=str(cwd),
    )  # fmt: skip
    assert cluster.wait_job(job, timeout=120) == "COMPLETED"
    (env,) = read_dumps(out)
    return comparable(env)


def test_jobs_without_tf_dist_see_exactly_the_plain_environment(
    site_cluster: LocalCluster, slurm_cluster: LocalCluster, site_files, tmp_path: Path
) -> None:
    """Same step on a cluster with no plugin and no TaskProlog, and on one with both."""
    tmp_path.chmod(0o755)
    plain, site = (
        step_envs(slurm_cluster, site_files, tmp_path),
        step_envs(site_cluster, site_files, tmp_path),
    )
    assert len(plain) == len(site) == 4
    for rank, (a, b) in enumerate(zip(plain, site, strict=True)):
        assert sorted(set(a) ^ set(b)) == [], f"rank {rank}: variables differ"
        assert a == b, f"rank {rank}: values differ"
    a, b = batch_env(slurm_cluster, site_files, tmp_path), batch_env(site_cluster, site_files, tmp_path)
    assert sorted(set(a) ^ set(b)) == [] and a == b


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
        started = time.monotonic()
        done = hook_cluster.srun("-m", "arbitrary", "-n2", "--tf-dist=worker:*", "true", timeout=HOOK_TIMEOUT * 3,
                                 env_extra={"SLURM_HOSTFILE": str(fifo)})  # fmt: skip
        took = time.monotonic() - started
    finally:
        writer.kill()
        writer.wait()
    assert done.returncode != 0
    reasons = [line for line in done.stdout.splitlines() if "is not a regular file" in line]
    assert len(reasons) == 2, done.stdout + done.stderr
    assert took < HOOK_TIMEOUT, "refused at once, not by the time limit"
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
    took = time.monotonic() - started
    assert done.returncode != 0
    assert f"did not finish within {HOOK_TIMEOUT} s and was killed" in done.stderr, done.stderr
    assert "hook_timeout=" in done.stderr
    assert HOOK_TIMEOUT <= took < HOOK_TIMEOUT * 2.5, took
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


# --- TF_CONFIG too large for the environment ----------------------------------------------


@pytest.mark.parametrize("setup", ["TaskProlog", "prolog="])
def test_descriptor_replaces_a_tf_config_too_large_for_environ(
    request: pytest.FixtureRequest, site_files, tmp_path: Path, setup: str
) -> None:
    """Host names of 40 kB (a host template) make TF_CONFIG of 4 tasks ~160 kB, over the
    131,060 bytes Slurm can pass: the tasks get TFSLURM_DESCRIPTOR and rebuild it (with
    prolog=, from the per-node run)."""
    site_cluster = request.getfixturevalue("site_cluster" if setup == "TaskProlog" else "hook_cluster")
    hook_runs(site_files, clear=True)
    suffix = "." + "d" * 40_000
    parent = str(Path(prolog.__file__).resolve().parent.parent)
    out = out_dir(tmp_path, "dumps")
    done = site_cluster.srun(
        "--tf-dist=chief:1,worker:*", "-N2", "--ntasks-per-node=2",
        *py(site_files["dump"], "--plan", parent, "--out", str(out)), timeout=120,
        env_extra={"TFSLURM_HOST_TEMPLATE": "{node}" + suffix},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = read_dumps(out)
    assert len(rows) == 4
    for rank, row in enumerate(rows):
        assert row["TF_CONFIG"] is None and row["TFSLURM_DESCRIPTOR"]
        assert row["TFSLURM_HOST_TEMPLATE"] == "{node}" + suffix  # the user's value beat the site's
        rebuilt = row["rebuilt_tf_config"]
        assert len(rebuilt.encode()) > 131_060
        config = json.loads(rebuilt)
        assert config["task"] == {"type": "chief" if rank == 0 else "worker", "index": max(rank - 1, 0)}
        hosts = [a.rsplit(":", 1)[0] for a in config["cluster"]["chief"] + config["cluster"]["worker"]]
        assert hosts == [r["SLURMD_NODENAME"] + suffix for r in rows]
    if setup == "prolog=":
        assert [once for _, _, once in hook_runs(site_files)] == [True, True]


# --- no admin rights: srun --task-prolog on a plain cluster -----------------------------


def test_user_task_prolog_without_plugin_or_admin(
    slurm_cluster: LocalCluster, site_files, tmp_path: Path
) -> None:
    options = (f"--task-prolog={site_files['wrapper']}", "-N2", "-n4", "--ntasks-per-node=2", "--gres=gpu:2")
    rows = srun_dump(slurm_cluster, site_files, tmp_path, *options, connect=True,
                     env_extra={"TFSLURM_TF_DIST": "chief:1,worker:*"})  # fmt: skip
    check_step(rows, "chief:1,worker:*", 4)
    assert all(len(r["reached"]) == 3 for r in rows)


# --- a broken installation fails only --tf-dist ------------------------------------------


# How srun reports a plugin built for another Slurm release, by version.
INCOMPATIBLE = {"22.05": "Incompatible plugin version", "24.11": "Incompatible plugin version"}


def build_for_other_slurm(work: Path) -> Path:
    """The plugin built against headers claiming another Slurm release (as after an
    upgrade without a rebuild): Slurm refuses to load it."""
    include = work / "include" / "slurm"
    include.mkdir(parents=True)
    for header in Path("/usr/include/slurm").glob("*.h"):
        text = header.read_text()
        if header.name == "slurm_version.h":
            number = int(text.split("SLURM_VERSION_NUMBER")[1].split()[0], 16)
            # the previous major release: older than every Slurm we test, and never across the
            # 25.05 line where spank.h gained what the plugin then uses (ESPANK_JOB_FAILURE)
            text = text.replace(hex(number), hex(number - 0x010000))
        (include / header.name).write_text(text)
    from test_plugin import make

    done = make(work / "build", "all", SLURM_INCLUDE=str(work / "include"))
    assert done.returncode == 0, done.stdout + done.stderr
    return work / "build" / PLUGIN_NAME


def test_broken_installation_never_fails_other_jobs(
    slurm_cluster_factory: Callable[..., LocalCluster], site_files, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With the recommended "optional" lines, a missing .so, one built for another Slurm
    release, and bad plugin arguments all leave slurmd and ordinary jobs running; only
    --tf-dist is refused, with the reason."""
    other = build_for_other_slurm(tmp_path_factory.mktemp("other-slurm"))
    cluster = slurm_cluster_factory(
        num_nodes=2, gpus=0,
        plugstack_lines=[
            "optional /nonexistent/spank_tfslurm.so",
            f"optional {other}",
            f"optional {site_files['plugin']} default_spec=bogus",
        ],
    )  # fmt: skip
    work = tmp_path_factory.mktemp("broken")
    work.chmod(0o755)
    plain = cluster.srun("-N2", "-n2", "true")
    assert plain.returncode == 0
    job = cluster.sbatch("#!/bin/sh\nsrun true\n", "-N1", "-o", str(work / "job.out"), cwd=str(work))
    assert cluster.wait_job(job) == "COMPLETED"
    # the bad argument is the admins' business: no user who did not ask sees it
    salloc = cluster.run(["salloc", "-N1", "srun", "true"], timeout=60)
    assert salloc.returncode == 0
    submitted = cluster.run(["sbatch", "-N1", "-o", "/dev/null", "--wrap", "true"], cwd=str(work))
    for shown in (plain.stderr, salloc.stderr, submitted.stderr, (work / "job.out").read_text()):
        assert "default_spec" not in shown and "tfslurm:" not in shown, shown
    # ... it is in slurmd's log, where admins look
    logs = "".join(
        p.read_text(errors="replace") for p in Path(cluster.files.path("log")).glob("slurmd-*.log")
    )
    assert "tfslurm: plugstack.conf argument 'default_spec=bogus'" in logs
    done = cluster.srun("--tf-dist=worker:*", "-n1", "true")
    assert done.returncode != 0
    assert "misconfigured at this site" in done.stderr and "default_spec=bogus" in done.stderr
    # the stale build is reported, not loaded (Slurm words it differently from 26.05 on)
    assert INCOMPATIBLE.get(slurm_version(), "Incompatible Slurm plugin") in done.stderr, done.stderr
    assert not unhealthy_nodes(cluster)


def test_setup_b_missing_tfslurm_fails_tf_dist_tasks_only(
    slurm_cluster_factory: Callable[..., LocalCluster], site_files, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Set-up B (TaskProlog= the wrapper). The wrapper is safe: with its Python gone, plain
    jobs run and --tf-dist tasks fail with one line naming the fix. The wrapper file itself
    missing on a node is Slurm's business: Slurm 22.05 fails every task there (why
    docs/admin-guide.md recommends set-up A and says so)."""
    work = tmp_path_factory.mktemp("setup-b")
    work.chmod(0o755)
    gone = work / "wrapper-python-gone"
    gone.write_text(prolog.wrapper_script(python="/nonexistent/python"))
    gone.chmod(0o755)
    cluster = slurm_cluster_factory(
        num_nodes=2, gpus=0, task_prolog=str(gone),
        plugstack_lines=[f"optional {site_files['plugin']}"],
    )  # fmt: skip
    plain = cluster.srun("-N2", "-n2", "true")
    assert plain.returncode == 0, plain.stderr
    asked = cluster.srun("--tf-dist=worker:*", "-N2", "-n2", "true")
    assert asked.returncode != 0
    printed = [
        line for line in asked.stdout.splitlines() if line.startswith("tfslurm: Python /nonexistent/python")
    ]
    assert len(printed) == 2 and all("reinstall tfslurm" in line for line in printed), (
        asked.stdout + asked.stderr
    )
    lost = work / "wrapper-lost-later"
    lost.write_text(prolog.wrapper_script())
    lost.chmod(0o755)
    missing = slurm_cluster_factory(num_nodes=2, gpus=0, task_prolog=str(lost))
    lost.unlink()  # as on a node where the wrapper was never installed or got removed
    done = missing.srun("-N1", "-n1", "true")
    assert done.returncode != 0  # Slurm's own rule: a TaskProlog it cannot run fails the task


def test_failing_tf_dist_task_fails_even_with_an_optional_plugin(site_cluster: LocalCluster) -> None:
    """Slurm ignores an optional plugin's task_init failure; the plugin ends the task."""
    done = site_cluster.srun("-N2", "-n2", "printenv", "SLURM_PROCID",
                             env_extra={"_SLURM_SPANK_OPTION_tfslurm_tf_dist": "bad;x"})  # fmt: skip
    assert done.returncode != 0 and done.stdout == ""


def test_task_prolog_warns_about_gpus_exactly_for_uneven_tasks(
    slurm_cluster: LocalCluster, site_files
) -> None:
    # --gpus=3 over 2 nodes x 2 tasks: one node gets 1 GPU for 2 tasks. The hook says so with
    # the protocol's print lines, which Slurm writes to those tasks' output; even shapes: none.
    args = (f"--task-prolog={site_files['wrapper']}", "-l", "-N2", "--ntasks-per-node=2")
    env = {"TFSLURM_TF_DIST": "worker:*"}
    done = slurm_cluster.srun(
        *args, "--gpus=3", "sh", "-c", "echo cvd=$CUDA_VISIBLE_DEVICES", timeout=120, env_extra=env
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line]
    warned = {int(label): [] for label, text in rows if text.startswith("tfslurm: warning: ")}
    for label, text in rows:
        if text.startswith("tfslurm: warning: "):
            warned[int(label)].append(text)
    empty = [int(label) for label, text in rows if text == "cvd="]
    assert len(empty) == 1, done.stdout
    if slurm_version() != "22.05":  # 24.11+: SLURM_GPUS=3 also makes rank 0 say a node got fewer
        total = [
            (rank, line)
            for rank, lines in warned.items()
            for line in lines
            if ", but SLURM_GPUS=3 for 4 tasks)" in line
        ]
        assert [rank for rank, _ in total] == [0], done.stdout
        warned = {rank: [line for line in lines if line != total[0][1]] for rank, lines in warned.items()}
        warned = {rank: lines for rank, lines in warned.items() if lines}
    assert sorted(warned) == [empty[0] - 1, empty[0]], done.stdout
    assert warned[empty[0]][0].startswith(f"tfslurm: warning: task {empty[0]} on ")
    first, second = warned[empty[0] - 1]
    assert first.startswith("tfslurm: warning: node ") and " has 1 GPU(s) for 2 tasks" in first
    assert second.startswith("tfslurm: warning: tasks get unequal GPU counts (1, 0 on node ")
    done = slurm_cluster.srun(*args, "--gres=gpu:2", "true", timeout=120, env_extra=env)
    assert done.returncode == 0 and "tfslurm: warning" not in done.stdout + done.stderr, done.stdout
