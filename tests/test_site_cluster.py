"""Site integration on a real Slurm cluster: the SPANK plugin loaded through plugstack.conf
plus the TaskProlog wrapper, exactly as docs/admin-guide.md installs them (the plugin
running the hook itself, prolog=, is in test_site_hook_cluster.py).

Expectations are derived from what Slurm itself told each task (its node name, reserved
ports and GPUs), never by calling tfslurm's planner, and the addresses are checked by
letting every task listen on its port and connect to every other task.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from plugin_build import PLUGIN_NAME
from site_install import (  # noqa: F401  (built_site_files, started_*: fixtures)
    PS_STEP,
    batch_env,
    built_site_files,
    check_step,
    dump_dir,
    hook_runs,
    out_dir,
    py,
    read_dumps,
    srun_dump,
    started_hook_cluster,
    started_site_cluster,
    step_envs,
    unhealthy_nodes,
)
from tfslurm import prolog
from tfslurm.errors import JobSpecError
from tfslurm.jobspec import split_spec
from tfslurm.localcluster import LocalCluster, slurm_version

pytestmark = pytest.mark.cluster


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
        # the line tfslurm itself writes for the spec (one table of messages)
        with pytest.raises(JobSpecError) as refused:
            split_spec(spec)
        assert first == f"{command}: error: invalid --tf-dist: {refused.value}", done.stderr
        assert "Submitted" not in done.stdout and "Granted" not in done.stderr
        assert "\x1b" not in done.stderr
    after = site_cluster.run(["squeue", "-h", "-o", "%i"], timeout=30).stdout.split()
    assert set(after) <= set(before)  # nothing new was queued (an earlier test's job may end)


def test_spec_slipping_past_srun_fails_the_task_not_the_node(site_cluster: LocalCluster) -> None:
    """Setting Slurm's internal option variable by hand skips srun's check; the plugin
    checks again in slurmstepd and fails that step only (the node is not drained)."""
    done = site_cluster.srun("-N1", "-n2", "true", env_extra={"_SLURM_SPANK_OPTION_tfslurm_tf_dist": "bad;x"})
    assert done.returncode != 0
    assert (
        "tfslurm: invalid --tf-dist: jobs spec 'bad;x': unexpected ';' at byte 3 after job 'bad'"
        in done.stderr
    )
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
    from plugin_build import make

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
