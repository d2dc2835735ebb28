"""The local test cluster itself: config rendering (no root) and the real thing (root)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tfslurm.errors import ClusterError, TfslurmError
from tfslurm.localcluster import (
    ClusterConfig,
    ClusterConfigError,
    LocalCluster,
    clean_environ,
    procs,
)
from tfslurm.localcluster.netns import Network, mounts_under
from tfslurm.localcluster.slurmconf import StateFiles, gres_conf, plugstack_conf, slurm_conf


# ---------------------------------------------------------------------------- no root needed
def render(config: ClusterConfig, state: str = "/tmp/tfs-x") -> str:
    net = Network.plan(state, "10.213.150", config.node_names())
    return slurm_conf(
        config,
        StateFiles(state),
        controller_host="ctl",
        controller_addr=net.gateway,
        ctld_port=21000,
        slurmd_port=21001,
        node_addrs={n.name: n.address for n in net.nodes},
    )


def conf_values(text: str) -> dict[str, str]:
    return dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith(("#", "NodeName="))
    )


def test_node_names_plain_and_padded() -> None:
    assert ClusterConfig().node_names() == ["node1", "node2", "node3", "node4"]
    assert ClusterConfig(node_prefix="tf-gpu", node_digits=3).node_names() == [
        "tf-gpu001", "tf-gpu002", "tf-gpu003", "tf-gpu004",
    ]  # fmt: skip
    assert ClusterConfig(num_nodes=12).node_names()[9:] == ["node10", "node11", "node12"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"num_nodes": 0}, "num_nodes=0"),
        ({"num_nodes": 500}, "num_nodes=500"),
        ({"gpus": -1}, "gpus=-1"),
        ({"node_prefix": "node1"}, "node_prefix='node1'"),
        ({"node_prefix": "a b"}, "node_prefix='a b'"),
        ({"node_prefix": "n" * 41}, "longer than 40"),
        ({"num_nodes": 12, "node_digits": 1}, "node_digits=1"),
        ({"task_prolog": "relative/prolog"}, "task_prolog='relative/prolog'"),
        ({"plugstack_lines": "required /x.so"}, "plugstack_lines"),
        ({"plugstack_lines": ["a\nb"]}, "plugstack_lines"),
        ({"resv_ports": "200-100"}, "resv_ports='200-100'"),
        ({"resv_ports": ""}, "resv_ports=''"),
        ({"subnet": "192.168.1"}, "subnet='192.168.1'"),
        ({"state_dir": "/"}, "state_dir='/'"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_bad_options_raise_one_line_error_naming_the_option(options: dict, named: str) -> None:
    with pytest.raises(ClusterConfigError) as info:
        ClusterConfig.from_options(**options)
    message = str(info.value)
    assert named in message and "\n" not in message
    assert isinstance(info.value, TfslurmError)
    # the field it names, for `cluster up` to say its option instead
    field = {"longer than 40": "node_prefix", "bogus": None}.get(named, named.split("=")[0])
    assert info.value.field == field, info.value.field


def test_slurm_conf_keeps_everything_in_the_state_dir() -> None:
    text = render(ClusterConfig(task_prolog="/opt/prolog", plugstack_lines=["required /x.so a=1"]))
    values = conf_values(text)
    assert values["AuthType"] == "auth/none" and values["CredType"] == "cred/none"
    assert values["PlugStackConfig"] == "/tmp/tfs-x/etc/plugstack.conf"
    assert values["MpiParams"] == "ports=20000-20100"
    assert values["SchedulerParameters"] == "bf_interval=1"
    assert values["TreeWidth"] == "200"  # every node contacted directly, none forwards
    assert values["TCPTimeout"] == "20"
    assert values["TaskProlog"] == "/opt/prolog"
    assert values["GresTypes"] == "gpu"
    paths = [v for k, v in values.items() if k.endswith(("Location", "Dir", "File", "Config"))]
    assert paths and all(p.startswith("/tmp/tfs-x/") for p in paths), paths
    assert "/etc/slurm" not in text
    nodes = [line for line in text.splitlines() if line.startswith("NodeName=")]
    assert nodes[0].startswith("NodeName=node1 NodeAddr=10.213.150.11 CPUs=4") and "Gres=gpu:4" in nodes[0]
    assert len(nodes) == 4


def test_gpu_less_hookless_config_has_no_gres_empty_plugstack() -> None:
    config = ClusterConfig(gpus=0)
    values = conf_values(render(config))
    assert "GresTypes" not in values and "TaskProlog" not in values
    assert "Gres=" not in render(config)
    assert gres_conf(config, StateFiles("/tmp/tfs-x")) is None
    assert plugstack_conf(config) == ""
    assert (
        gres_conf(ClusterConfig(gpus=2), StateFiles("/s")).splitlines()[1]
        == "NodeName=node1 Name=gpu File=/s/dev/nvidia[0-1]"
    )


def test_resv_ports_none_leaves_out_mpiparams() -> None:
    assert "MpiParams" not in conf_values(render(ClusterConfig(resv_ports=None)))
    assert ClusterConfig(resv_ports=None).cache_key() != ClusterConfig().cache_key()


def test_preempt_grace_adds_preemption_and_its_partitions() -> None:
    assert "Preempt" not in render(ClusterConfig())
    text = render(ClusterConfig(preempt_grace=8))
    values = conf_values(text)
    assert values["PreemptType"] == "preempt/partition_prio" and values["PreemptMode"] == "REQUEUE"
    parts = [line for line in text.splitlines() if line.startswith("PartitionName=")]
    assert parts == [
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        "PartitionName=low Nodes=ALL PriorityTier=1 PreemptMode=REQUEUE GraceTime=8 State=UP",
        "PartitionName=low-cancel Nodes=ALL PriorityTier=1 PreemptMode=CANCEL GraceTime=8 State=UP",
        "PartitionName=high Nodes=ALL PriorityTier=10 PreemptMode=OFF State=UP",
    ]
    assert ClusterConfig(preempt_grace=8).cache_key() != ClusterConfig().cache_key()
    for bad in (-1, 3601, "8", True):
        with pytest.raises(ClusterConfigError, match=r"^preempt_grace="):
            ClusterConfig(preempt_grace=bad)


def test_names_differ_per_state_dir_and_fit_interface_limits() -> None:
    a = Network.plan("/tmp/tfslurm-cluster-aaaa", "10.213.150", [f"n{i}" for i in range(1, 201)])
    b = Network.plan("/tmp/tfslurm-cluster-bbbb", "10.213.151", ["n1"])
    assert a.bridge != b.bridge and a.nodes[0].veth != b.nodes[0].veth
    assert all(len(name) <= 15 for name in [a.bridge, *(n.veth for n in a.nodes)])
    assert a.nodes[-1].address == "10.213.150.210"


def test_clean_environ_drops_outer_slurm_sets_conf_and_no_proxy() -> None:
    outer = {"PATH": "/bin", "SLURM_JOB_ID": "7", "SLURMD_NODENAME": "x", "SBATCH_X": "1", "no_proxy": "corp"}
    env = clean_environ(outer, "/s/etc/slurm.conf", ["node1", "node2"])
    assert env["SLURM_CONF"] == "/s/etc/slurm.conf"
    assert not [k for k in env if k.startswith(("SLURM_J", "SLURMD", "SBATCH"))]
    assert env["no_proxy"].split(",")[:3] == ["corp", "127.0.0.1", "localhost"]
    assert "node2" in env["NO_PROXY"].split(",")
    assert env["PATH"] == "/bin"


def test_cli_rejects_bad_option_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from tfslurm.cli import main

    assert main(["cluster", "up", "--nodes", "0", "--state", "/tmp/tfs-never-started"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("tfslurm cluster up: error: --nodes 0: expected an integer in 1..") and "\n" not in err
    )
    assert not os.path.exists("/tmp/tfs-never-started")


# ---------------------------------------------------------------------------- real cluster
cluster = pytest.mark.cluster


@cluster
def test_four_nodes_idle_with_own_hostnames(slurm_cluster: LocalCluster) -> None:
    assert slurm_cluster.nodes == ["node1", "node2", "node3", "node4"]
    for _ in range(50):  # an earlier test's job may still be completing
        out = slurm_cluster.run(["sinfo", "-h", "-N", "-o", "%N %T %G"])
        assert out.returncode == 0, out.stderr
        rows = sorted(line.split() for line in out.stdout.splitlines())
        if rows == [[n, "idle", "gpu:4"] for n in slurm_cluster.nodes]:
            break
        time.sleep(0.2)
    assert rows == [[n, "idle", "gpu:4"] for n in slurm_cluster.nodes]
    out = slurm_cluster.srun("-N4", "--ntasks-per-node=2", "sh", "-c", 'echo "$(hostname) $SLURMD_NODENAME"')
    assert out.returncode == 0, out.stderr
    pairs = [line.split() for line in out.stdout.splitlines()]
    assert len(pairs) == 8 and all(host == name for host, name in pairs)
    assert sorted({host for host, _ in pairs}) == slurm_cluster.nodes


@cluster
def test_same_port_bound_on_two_nodes_at_once(slurm_cluster: LocalCluster) -> None:
    # Each task listens on the same port, then connects to the *other* node by name. Both
    # connections can only succeed if both listeners exist at the same time.
    script = textwrap.dedent(
        """
        import os, socket, time
        me = os.environ["SLURMD_NODENAME"]
        peer = {"node2": "node3", "node3": "node2"}[me]
        srv = socket.socket(); srv.bind(("0.0.0.0", 23456)); srv.listen(1)
        deadline = time.time() + 20
        while True:
            try:
                c = socket.create_connection((peer, 23456), timeout=1); break
            except OSError:
                if time.time() > deadline: raise
                time.sleep(0.05)
        conn, addr = srv.accept()
        c.sendall(me.encode()); got = conn.recv(64).decode()
        print(me, "got", got, "from", addr[0])
        """
    )
    out = slurm_cluster.srun(
        "-w", "node2,node3", "-N2", "--ntasks-per-node=1", sys.executable, "-c", script, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = sorted(out.stdout.splitlines())
    assert lines[0].startswith("node2 got node3 from " + slurm_cluster.node_address("node3"))
    assert lines[1].startswith("node3 got node2 from " + slurm_cluster.node_address("node2"))


@cluster
def test_fake_gpus_are_char_devices_and_reach_tasks(slurm_cluster: LocalCluster) -> None:
    for g in range(4):
        st = os.stat(f"{slurm_cluster.state_dir}/dev/nvidia{g}")
        assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 195 and os.minor(st.st_rdev) == g
    out = slurm_cluster.srun(
        "-N2",
        "--ntasks-per-node=2",
        "--gres=gpu:2",
        "sh",
        "-c",
        'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"',
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 4 and {line.split()[1] for line in lines} == {"0,1"}
    out = slurm_cluster.srun("-N1", "-n2", "--gpus-per-task=1", "printenv", "CUDA_VISIBLE_DEVICES")
    assert sorted(out.stdout.split()) == ["0", "1"], out.stderr


@cluster
def test_reserved_ports_and_het_steps(slurm_cluster: LocalCluster) -> None:
    out = slurm_cluster.srun(
        "-N2", "--ntasks-per-node=1", "--resv-ports=3", "printenv", "SLURM_STEP_RESV_PORTS"
    )
    assert out.returncode == 0, out.stderr
    ranges = set(out.stdout.split())
    assert len(ranges) == 1
    low, high = map(int, ranges.pop().split("-"))
    assert low >= 20000 and high == low + 2 <= 20100
    out = slurm_cluster.srun("-N1", "-n1", "hostname", ":", "-N2", "-n2", "hostname", timeout=30)
    assert out.returncode == 0 and len(out.stdout.split()) == 3, out.stderr


@cluster
def test_tasks_get_a_clean_env_and_can_run_tfslurm(
    slurm_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "999999")  # as if the tests themselves ran in a job
    assert "SLURM_JOB_ID" not in slurm_cluster.env
    out = slurm_cluster.srun("-N2", "--ntasks-per-node=1", sys.executable, "-m", "tfslurm", "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("usage: tfslurm") == 2
    out = slurm_cluster.srun("-n1", "printenv", "SLURM_JOB_ID", "no_proxy")
    job_id, no_proxy = out.stdout.split()
    assert job_id != "999999" and "127.0.0.1" in no_proxy.split(",")


@cluster
def test_sbatch_and_wait_job(slurm_cluster: LocalCluster, tmp_path) -> None:
    os.chmod(tmp_path, 0o755)
    job = slurm_cluster.sbatch(
        "#!/bin/sh\nsrun hostname\n", "-N2", "--ntasks-per-node=1", "-o", "out-%j.txt", cwd=str(tmp_path)
    )
    assert slurm_cluster.wait_job(job, timeout=60) == "COMPLETED"
    assert sorted((tmp_path / f"out-{job}.txt").read_text().split()) in (
        sorted(pair)
        for pair in [
            ("node1", "node2"),
            ("node1", "node3"),
            ("node1", "node4"),
            ("node2", "node3"),
            ("node2", "node4"),
            ("node3", "node4"),
        ]
    )
    failed = slurm_cluster.sbatch("#!/bin/sh\nexit 3\n", "-n1", "-o", "/dev/null")
    assert slurm_cluster.wait_job(failed, timeout=60) == "FAILED"


@cluster
def test_on_node_sees_own_hostname_and_resolves_peers(slurm_cluster: LocalCluster) -> None:
    out = slurm_cluster.on_node("node3", ["sh", "-c", "hostname; getent hosts node1"])
    assert out.returncode == 0, out.stderr
    host, address, name = out.stdout.split()
    assert (host, address, name) == ("node3", slurm_cluster.node_address("node1"), "node1")
    with pytest.raises(ClusterError, match="no node named 'node9'"):
        slurm_cluster.on_node("node9", ["true"])
    # /etc/hosts is replaced only inside the nodes
    with open("/etc/hosts") as f:
        assert "node1" not in f.read().split()


@cluster
def test_zero_padded_node_names(slurm_cluster_factory) -> None:
    padded = slurm_cluster_factory(node_prefix="tf-gpu", node_digits=3)
    assert padded.nodes == ["tf-gpu001", "tf-gpu002", "tf-gpu003", "tf-gpu004"]
    out = padded.srun("-N4", "--ntasks-per-node=1", "sh", "-c", 'echo "$(hostname) $SLURM_STEP_NODELIST"')
    assert out.returncode == 0, out.stderr
    rows = sorted(line.split() for line in out.stdout.splitlines())
    assert rows == [[n, "tf-gpu[001-004]"] for n in padded.nodes]
    out = padded.srun("-w", "tf-gpu002,tf-gpu004", "printenv", "SLURM_STEP_NODELIST")
    assert set(out.stdout.split()) == {"tf-gpu[002,004]"}


@cluster
def test_gpu_less_cluster_has_no_gres(slurm_cluster_factory, slurm_cluster: LocalCluster) -> None:
    cpu_only = slurm_cluster_factory(gpus=0)
    assert cpu_only is not slurm_cluster
    # two clusters side by side: nothing outside the state dirs is shared
    assert cpu_only.subnet != slurm_cluster.subnet and cpu_only.ctld_port != slurm_cluster.ctld_port
    assert not os.path.exists(f"{cpu_only.state_dir}/etc/gres.conf")
    out = cpu_only.run(["sinfo", "-h", "-N", "-o", "%N %G"])
    assert {line.split()[1] for line in out.stdout.splitlines()} == {"(null)"}
    out = cpu_only.srun("-N2", "--ntasks-per-node=1", "sh", "-c", 'echo "[$CUDA_VISIBLE_DEVICES]"')
    assert out.returncode == 0 and out.stdout.split() == ["[]", "[]"], out.stderr
    out = cpu_only.srun("-n1", "--gres=gpu:1", "true", timeout=20)
    assert out.returncode != 0 and "gres" in out.stderr.lower()


@cluster
def test_task_prolog_and_plugstack_hooks(slurm_cluster_factory, tmp_path_factory) -> None:
    gcc = shutil.which("gcc")
    if not gcc or not os.path.exists("/usr/include/slurm/spank.h"):
        pytest.skip("needs gcc and libslurm-dev to build a test SPANK plugin")
    work = tmp_path_factory.mktemp("hooks")
    os.chmod(work, 0o755)
    prolog = work / "prolog.sh"
    prolog.write_text('#!/bin/sh\necho "export HOOK_PROLOG=rank$SLURM_PROCID"\n')
    prolog.chmod(0o755)
    source = work / "hook.c"
    source.write_text(
        textwrap.dedent(
            """
            #include <slurm/spank.h>
            #include <string.h>
            SPANK_PLUGIN(tfs_test_hook, 1);
            int slurm_spank_task_init(spank_t sp, int ac, char **av) {
                const char *value = ac > 0 ? av[0] : "none";
                spank_setenv(sp, "HOOK_SPANK", value, 1);
                return 0;
            }
            """
        )
    )
    plugin = work / "hook.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(plugin), str(source)], check=True)
    hooked = slurm_cluster_factory(
        task_prolog=str(prolog), plugstack_lines=[f"required {plugin} from-plugstack"]
    )
    out = hooked.srun("-N2", "--ntasks-per-node=1", "sh", "-c", 'echo "$HOOK_PROLOG $HOOK_SPANK"')
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.splitlines()) == ["rank0 from-plugstack", "rank1 from-plugstack"]


@cluster
def test_failed_start_raises_cluster_error_with_log_tail(tmp_path_factory) -> None:
    broken = LocalCluster(num_nodes=1, gpus=0, extra_conf_lines=["NoSuchSlurmKey=1"], timeout=10)
    with pytest.raises(ClusterError) as info:
        broken.start()
    assert "NoSuchSlurmKey" in str(info.value)  # from slurmctld's own log
    assert not broken.running
    network = broken._network or Network.plan(broken.state_dir, "10.213.0", broken.nodes)
    assert not os.path.exists(f"/sys/class/net/{network.bridge}")
    assert not mounts_under(broken.state_dir)
    shutil.rmtree(broken.state_dir)


TWIN = """
import sys
from tfslurm.localcluster import LocalCluster
c = LocalCluster(num_nodes=1, gpus=0, state_dir=sys.argv[1]).start()
out = c.srun("-N1", "hostname")
print(c._network.bridge, out.returncode, out.stdout.strip(), flush=True)
c.stop()
"""


@cluster
def test_same_state_dir_in_another_mount_ns_gets_its_own_links(tmp_path) -> None:
    """The versions matrix runs the suite in several roots at once: equal /tmp paths, one netns."""
    state = str(tmp_path / "twin" / "state")
    here = LocalCluster(num_nodes=1, gpus=0, state_dir=state).start()
    try:
        # the same path, on a tmpfs that only the child's mount namespace sees
        child = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             'mount -t tmpfs none "$1" && exec "$2" -c "$3" "$4"', "sh",
             str(tmp_path / "twin"), sys.executable, TWIN, state],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert child.returncode == 0, child.stderr[-2000:]
        bridge, rc, host = child.stdout.split()
        assert (rc, host) == ("0", "node1")
        assert here._network is not None and bridge != here._network.bridge
        # the twin's teardown left this cluster's links alone: it still runs jobs
        assert here._network.leftovers() != [] and here.status()["healthy"]
        out = here.srun("-N1", "hostname")
        assert (out.returncode, out.stdout.strip()) == (0, "node1"), out.stderr
    finally:
        here.stop()


@cluster
def test_stop_leaves_no_processes_links_or_mounts() -> None:
    c = LocalCluster(num_nodes=2, gpus=1)
    c.start()
    try:
        daemons = c.live_daemons()
        assert sorted(r.name for r in daemons) == ["slurmctld", "slurmd", "slurmd"]
        # a job that would run for ever, plus a process started inside a node by hand
        job = c.sbatch("#!/bin/sh\nsrun sleep 600\n", "-N2", "-o", "/dev/null")
        stray = c.popen(c.node_argv("node2", ["sleep", "600"]))
        for _ in range(100):
            if c.job_states(job) == ["RUNNING"]:
                break
            time.sleep(0.1)
        assert c.job_states(job) == ["RUNNING"]
        family = procs.descendants(r.pid for r in daemons)
        assert "slurmscriptd" in {_comm(p) for p, _ in family}
        inodes = c._network.netns_inodes()
        assert len(inodes) == 2
        # slurmd double-forks slurmstepd, so steps are found by namespace, not by parent
        for _ in range(100):
            in_nodes = {_comm(p) for p in procs.pids_in_netns(inodes)}
            if {"slurmd", "slurmstepd", "sleep"} <= in_nodes:
                break
            time.sleep(0.1)
        assert {"slurmd", "slurmstepd", "sleep"} <= in_nodes, in_nodes
        network, state = c._network, c.state_dir
    finally:
        c.stop()
    stray.wait(timeout=10)
    assert not [r for r in daemons if procs.alive(r.pid)]
    assert not [p for p, started in family if procs.start_time(p) == started and not procs.is_zombie(p)]
    assert procs.pids_in_netns(inodes) == []
    assert network.leftovers() == []
    assert not os.path.exists(state)  # a temporary state dir is removed
    c.stop()  # idempotent


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


# ---------------------------------------------------------------------------- skip vs. CI
INNER_TEST = """
import pytest

@pytest.mark.cluster
def test_needs_cluster(slurm_cluster):
    assert slurm_cluster.nodes

@pytest.mark.cluster
def test_skips_itself():
    pytest.skip("no tensorflow here")

def test_plain():
    pytest.skip("not a cluster test")
"""


@pytest.mark.parametrize("ci", ["", "true"])
def test_cluster_tests_skip_outside_ci_and_fail_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    conftest = os.path.join(os.path.dirname(__file__), "conftest.py")
    pytester.makeconftest(Path(conftest).read_text())
    pytester.makeini("[pytest]\nmarkers =\n    cluster: real cluster\n")
    pytester.makepyfile(test_inner=INNER_TEST)
    monkeypatch.setenv("TFSLURM_NO_CLUSTER", "1")
    monkeypatch.setenv("CI", ci)
    result = pytester.runpytest_subprocess("-rA")
    if ci:
        result.assert_outcomes(failed=1, errors=1, skipped=1)
        result.stdout.fnmatch_lines(["*CI=true and the cluster tests cannot run: *TFSLURM_NO_CLUSTER*"])
        result.stdout.fnmatch_lines(["*CI=true: cluster test was skipped*no tensorflow here*"])
    else:
        result.assert_outcomes(skipped=3)
        result.stdout.fnmatch_lines(["*local Slurm cluster unavailable: disabled by TFSLURM_NO_CLUSTER*"])


@cluster
def test_orphaned_cluster_of_a_killed_session_is_reaped(slurm_cluster: LocalCluster) -> None:
    from tfslurm.localcluster import reap_orphans

    starter = subprocess.run(
        [sys.executable, "-c", (
            "import os\n"
            "from tfslurm.localcluster import LocalCluster\n"
            "c = LocalCluster(num_nodes=1, gpus=0).start()\n"
            "print(c.state_dir, flush=True)\n"
            "os.kill(os.getpid(), 9)\n"  # no atexit, no stop: as if the session was killed
        )],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    state = starter.stdout.strip()
    assert starter.returncode == -9 and state.startswith("/tmp/"), starter.stderr
    orphan = LocalCluster.attach(state)
    daemons = orphan.live_daemons()
    assert len(daemons) == 2 and not orphan.owner_alive()
    assert state in reap_orphans()
    assert not [r for r in daemons if procs.alive(r.pid)]
    assert not os.path.exists(state)
    assert slurm_cluster.state_dir not in reap_orphans()  # a live session's cluster is left alone
    assert slurm_cluster.status()["healthy"]


@cluster
def test_cli_up_status_down(tmp_path_factory) -> None:
    state = str(tmp_path_factory.mktemp("cli") / "state")
    tfslurm = [sys.executable, "-m", "tfslurm"]
    try:
        options = ["--state", state, "--nodes", "2", "--gpus", "0", "--prefix", "cli", "--digits", "2"]
        up = subprocess.run(
            [*tfslurm, "cluster", "up", *options], capture_output=True, text=True, timeout=120
        )
        assert up.returncode == 0, up.stderr
        assert up.stdout.strip() == f"export SLURM_CONF={state}/etc/slurm.conf"
        # the daemons outlive the `up` command
        status = subprocess.run(
            [*tfslurm, "cluster", "status", "--state", state], capture_output=True, text=True
        )
        assert status.returncode == 0 and "healthy" in status.stdout and "cli01" in status.stdout, (
            status.stdout
        )
        env = {**os.environ, "SLURM_CONF": f"{state}/etc/slurm.conf"}
        srun = subprocess.run(
            ["srun", "-N2", "hostname"], env=env, capture_output=True, text=True, timeout=60
        )
        assert sorted(srun.stdout.split()) == ["cli01", "cli02"], srun.stderr
    finally:
        down = subprocess.run([sys.executable, "-m", "tfslurm.localcluster", "down", "--state", state],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    assert down.returncode == 0, down.stderr
    assert not LocalCluster.attach(state).live_daemons()
    stale = subprocess.run(["srun", "hostname"], env=env, capture_output=True, text=True, timeout=20)
    assert stale.returncode != 0 and "TfslurmClusterStopped" in stale.stderr  # fails at once, no traffic
    again = subprocess.run(
        [*tfslurm, "cluster", "down", "--state", state, "--purge"], capture_output=True, text=True
    )
    assert again.returncode == 0 and not os.path.exists(state)


def test_the_second_network_has_its_own_names_and_subnet() -> None:
    net = Network.plan("/tmp/tfslurm-cluster-aaaa", "10.213.150", ["n1", "n2"])
    assert net.bridge2 != net.bridge and len(net.bridge2) <= 15
    assert [n.address2 for n in net.nodes] == ["10.214.150.11", "10.214.150.12"]
    assert all(len(n.veth2) <= 15 and n.veth2 != n.veth for n in net.nodes)
    hosts = net.hosts_file_text("ctl").splitlines()
    assert "10.214.150.12 n2-eth1" in hosts and "10.213.150.12 n2" in hosts
