"""The site installation the site cluster tests run against: the SPANK plugin built and
loaded through plugstack.conf, the TaskProlog wrapper (``site_cluster``) or the plugin
running the hook itself (``hook_cluster``), and what every task reports of its environment.
Test modules import the fixtures from here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from plugin_build import build_plugin, make, plugin_work_dir
from tfslurm import prolog
from tfslurm.localcluster import LocalCluster

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
    from tfslurm.plan import resolve_plan
    from tfslurm.step import Step
    out["rebuilt_tf_config"] = resolve_plan(Step.from_environ()).tf_config()
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


@pytest.fixture(scope="module", name="site_files")
def built_site_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = plugin_work_dir(tmp_path_factory, "site")
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


@pytest.fixture(scope="module", name="deb_install")
def installed_deb(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``make deb`` with every path under a directory of this test run, installed by dpkg
    itself (its own database there, not the host's; Slurm's Debian packages it depends on
    are not in that database, hence --force-depends): the files a site's nodes get, where
    the site's would be. The hook runs this test's Python (the package's default,
    /usr/bin/python3, is checked in test_plugin.py; here it may be absent or too old)."""
    work = plugin_work_dir(tmp_path_factory, "deb", None if shutil.which("dpkg") else "dpkg not found")
    inst = work / "inst"
    done = make(
        work / "build", "deb", DEB_LIBDIR=f"{inst}/lib/slurm", DEB_SYSCONFDIR=f"{inst}/etc/slurm",
        DEB_DATADIR=f"{inst}/share/tfslurm", DEB_PKGLIBDIR=f"{inst}/lib/tfslurm", DEB_HOOK_PYTHON=sys.executable,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (deb,) = (work / "build").glob("*.deb")
    admin = work / "dpkg"
    for sub in ("info", "updates", "triggers"):
        (admin / sub).mkdir(parents=True)
    (admin / "status").touch()
    (admin / "available").touch()
    done = subprocess.run(
        ["dpkg", f"--admindir={admin}", "--force-depends", "-i", str(deb)], capture_output=True, text=True, timeout=120
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return {"admin": admin, "conf_dir": inst / "etc/slurm/plugstack.conf.d", "plugin": inst / "lib/slurm/spank_tfslurm.so",
            "hook": inst / "lib/tfslurm/tfslurm-taskprolog", "python": inst / "lib/tfslurm/python"}  # fmt: skip


@pytest.fixture(scope="module", name="site_cluster")
def started_site_cluster(
    slurm_cluster_factory: Callable[..., LocalCluster], site_files: dict[str, Path]
) -> LocalCluster:
    """TaskProlog = the tfslurm wrapper, plugstack = the plugin with site defaults."""
    return slurm_cluster_factory(
        task_prolog=str(site_files["wrapper"]),
        plugstack_lines=[f"optional {site_files['plugin']} {SITE_ARGS}"],
    )


@pytest.fixture(scope="module", name="hook_cluster")
def started_hook_cluster(
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
