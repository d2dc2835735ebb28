"""The runtime without Slurm: role resolution, program parsing, signals, port watching,
and (with tensorflow-cpu) the ps/worker server lifecycle and the missing-peer error."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import STOPPABLE, started, tfslurm_run
from tfslurm.errors import PreemptionError
from tfslurm.plan import TaskPlan
from tfslurm.runtime import preemption
from tfslurm.runtime.launch import PythonProgram, parse_program, program_environ
from tfslurm.runtime.life import RunConfig, jobs_spec
from tfslurm.runtime.parent import Process
from tfslurm.runtime.peers import ChiefWatch, PeerWatch, is_listening, is_refused, watch_spec
from tfslurm.runtime.roles import RoleError, parse_address, resolve_role, role_from_tf_config
from tfslurm.runtime.templates import TEMPLATES, template_path
from tfslurm.settings import Settings, signal_number

# Uses nothing of the installed Slurm (fake sruns, recorded or written environments).
pytestmark = pytest.mark.pure

HAVE_TF = importlib.util.find_spec("tensorflow") is not None


def tf_config(cluster: dict, job: str, index: int) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": job, "index": index}})


PS_CLUSTER = {"chief": ["c:1"], "ps": ["p:2"], "worker": ["w:3", "w:4"], "evaluator": ["e:5"]}


# ---------------------------------------------------------------- roles
def test_tf_config_roles_and_strategy():
    chief = role_from_tf_config(tf_config(PS_CLUSTER, "chief", 0))
    assert chief.strategy == "ps" and chief.is_chief and not chief.is_server
    worker = role_from_tf_config(tf_config(PS_CLUSTER, "worker", 1))
    assert worker.is_server and worker.address() == TaskPlan(3, "worker", 1, "w", "w", 4, None)
    assert worker.address("worker", 1) == worker.addresses(("worker",))[1]  # one task, one record
    assert str(worker.chief) == "chief:0 at c:1" and worker.chief == parse_address(0, "chief", 0, "c:1")
    assert role_from_tf_config(tf_config(PS_CLUSTER, "ps", 0)).is_server
    mwms = role_from_tf_config(tf_config({"worker": ["a:1", "b:2"]}, "worker", 0))
    assert mwms.strategy == "mwms" and mwms.is_chief and not mwms.is_server
    assert mwms.chief == TaskPlan(0, "worker", 0, "a", "a", 1, None)


def test_training_tasks_miss_the_evaluator_but_it_sees_them():
    worker = role_from_tf_config(tf_config(PS_CLUSTER, "worker", 0))
    assert "evaluator" not in json.loads(worker.tf_config())["cluster"]
    evaluator = role_from_tf_config(tf_config(PS_CLUSTER, "evaluator", 0))
    seen = json.loads(evaluator.tf_config())
    assert seen["cluster"] == PS_CLUSTER and seen["task"] == {"type": "evaluator", "index": 0}


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("{", "TF_CONFIG is not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"task": {"type": "worker"}}', "has no 'cluster'"),
        ('{"cluster": {"worker": ["a:1"]}}', "has no 'task'"),
        (tf_config({"worker": ["a:1"]}, "ps", 0), "task type 'ps' is not a job"),
        (tf_config({"worker": ["a:1"]}, "worker", 1), "task index 1 is out of range"),
        (tf_config({"worker": ["a"]}, "worker", 0), "'a' of worker:0 is not host:port"),
        (tf_config({"worker": ["a:99999"]}, "worker", 0), "is not host:port"),
        (tf_config({"ps": ["a:1"], "worker": ["b:2"]}, "ps", 0), "needs a chief"),
        (tf_config({"chief": ["a:1"], "ps": ["b:2"]}, "ps", 0), "at least one worker"),
        (tf_config({"master": ["a:1"]}, "master", 0), "job 'master' is not one TF knows"),
        (tf_config({"chief": ["a:1", "b:2"]}, "chief", 0), "at most one chief"),
    ],
)
def test_bad_tf_config_is_one_line(text, fragment):
    with pytest.raises(RoleError) as info:
        role_from_tf_config(text)
    assert fragment in str(info.value) and "\n" not in str(info.value)


@settings(max_examples=60, deadline=None)
@given(
    workers=st.integers(1, 6),
    ps=st.integers(0, 3),
    evaluator=st.booleans(),
    data=st.data(),
)
def test_tf_config_round_trip(workers, ps, evaluator, data):
    cluster = {"chief": ["h0:10"]} if ps else {}
    cluster["worker"] = [f"w{i}:{2000 + i}" for i in range(workers)]
    if ps:
        cluster["ps"] = [f"p{i}:{3000 + i}" for i in range(ps)]
    if evaluator:
        cluster["evaluator"] = ["ev:4000"]
    job = data.draw(st.sampled_from(sorted(cluster)))
    index = data.draw(st.integers(0, len(cluster[job]) - 1))
    role = role_from_tf_config(tf_config(cluster, job, index))
    again = role_from_tf_config(role.tf_config())
    assert (again.job, again.index) == (job, index)
    expected = {j: tuple(v) for j, v in cluster.items() if job == "evaluator" or j != "evaluator"}
    assert {job: tuple(tasks) for job, tasks in again.cluster.cluster_spec().items()} == expected
    peers, own = watch_spec(role)
    assert role.address() not in peers
    if job == "evaluator":
        assert peers == []  # the evaluator waits for nobody (the chief may be done)
    elif job == "ps" or (job == "worker" and ps):
        assert peers == [role.chief] and own is None  # TF servers wait for their chief
    elif ps:
        assert {p.job for p in peers} == {"ps", "worker"} and own is None
    else:
        assert {p.job for p in peers} <= {"worker"} and own == role.address().port


def test_resolve_prefers_tf_config_and_needs_a_step_otherwise():
    env = {"TF_CONFIG": tf_config({"worker": ["a:1"]}, "worker", 0), "TFSLURM_TF_DIST": "ps:1"}
    assert resolve_role(env).source == "TF_CONFIG"
    with pytest.raises(Exception) as info:
        resolve_role({"PATH": "/bin"})
    assert "SLURM" in str(info.value)


STEP_ENV = {
    "SLURM_JOB_ID": "7",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "1",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "0",
    "SLURMD_NODENAME": "n1",
    "SLURM_STEP_NODELIST": "n[1-2]",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_STEP_NUM_NODES": "2",
    "SLURM_GTIDS": "0,1",
    "TFSLURM_PORT_BASE": "30000",
}


def test_resolve_from_a_step_plan():
    env = dict(STEP_ENV)
    role = resolve_role(env, jobs="chief:1,ps:1,worker:*")
    assert (role.job, role.index, role.strategy) == ("ps", 0, "ps")
    spec = role.cluster.cluster_spec()
    assert spec["chief"] == ["n1:30000"] and len(spec["worker"]) == 2
    assert role.plan_table and "RANK" in role.plan_table


def test_resolve_from_the_descriptor_matches_the_plan():
    from tfslurm.plan import resolve_plan
    from tfslurm.step import Step

    env = {**STEP_ENV, "TFSLURM_TF_DIST": "chief:1,ps:1,worker:*"}
    planned = resolve_role(env)
    descriptor = resolve_plan(Step.from_environ(env)).cluster.descriptor()
    env = {**STEP_ENV, "TFSLURM_DESCRIPTOR": descriptor, "TFSLURM_TF_DIST": "worker:*"}
    role = resolve_role(env, jobs="worker:*")  # the descriptor wins over any jobs spec
    assert role.source == "TFSLURM_DESCRIPTOR"
    assert (role.job, role.index, role.cluster) == (planned.job, planned.index, planned.cluster)


# ---------------------------------------------------------------- programs and signals
@pytest.mark.parametrize(
    "argv, expected",
    [
        (["python", "train.py", "-x"], PythonProgram("train.py", None, ["-x"])),
        (["python3.11", "-u", "train.py"], PythonProgram("train.py", None, [])),
        (["python", "-m", "pkg.mod", "a"], PythonProgram(None, "pkg.mod", ["a"])),
        (["train.py", "b"], PythonProgram("train.py", None, ["b"])),
        ([sys.executable, "t.py"], PythonProgram("t.py", None, [])),
        (["python", "-c", "print(1)"], None),
        (["python"], None),
        (["./train.sh"], None),
        ([], None),
    ],
)
def test_parse_program(argv, expected):
    assert parse_program(argv) == expected


def test_signal_names():
    assert signal_number("USR1") == signal.SIGUSR1
    assert signal_number("sigusr2") == signal.SIGUSR2
    assert signal_number(str(int(signal.SIGTERM))) == signal.SIGTERM
    for bad in ("NOPE", "KILL", "99999", str(int(signal.SIGKILL)), int(signal.SIGSTOP)):
        with pytest.raises(PreemptionError):
            signal_number(bad)


def test_the_preemption_flag_is_found_in_the_signal_table():
    """No module state: the flag installed for a signal is its handler's owner."""
    previous = signal.getsignal(signal.SIGUSR2)
    try:
        flag = preemption.install(signal.SIGUSR2)
        assert preemption.installed(signal.SIGUSR2) is flag and preemption.install(signal.SIGUSR2) is flag
        assert not preemption.requested()
        os.kill(os.getpid(), signal.SIGUSR2)
        assert flag.requested and preemption.requested()
        wider = preemption.install(signal.SIGUSR2, also=(signal.SIGTERM,))
        assert wider is not flag and wider.requested  # a new flag keeps the request
    finally:
        signal.signal(signal.SIGUSR2, previous)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_preemption_flag_survives_a_signal_storm():
    flag = preemption.Preemption(signal.SIGUSR2).install()
    try:
        for _ in range(200):  # a re-entrant handler must not deadlock
            os.kill(os.getpid(), signal.SIGUSR2)
        assert flag.requested and flag.received_at is not None
    finally:
        signal.signal(signal.SIGUSR2, signal.SIG_DFL)


# ---------------------------------------------------------------- port watching
def _listener() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_probe_listening_and_refused():
    s = _listener()
    port = s.getsockname()[1]
    assert is_listening("127.0.0.1", port) and not is_refused("127.0.0.1", port)
    s.close()
    assert is_refused("127.0.0.1", port) and not is_listening("127.0.0.1", port)


def test_probes_take_tf_bracketed_ipv6_addresses():
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    s.listen()
    port = s.getsockname()[1]
    assert is_listening("[::1]", port) and not is_refused("[::1]", port)
    s.close()
    assert is_refused("[::1]", port) and not is_listening("[::1]", port)


def test_peer_watch_reports_only_missing_peers():
    up = _listener()
    down = _listener()
    down_port = down.getsockname()[1]
    down.close()
    reported = []
    peers = [
        parse_address(1, "worker", 1, f"127.0.0.1:{up.getsockname()[1]}"),
        parse_address(2, "worker", 2, f"127.0.0.1:{down_port}"),
    ]
    watch = PeerWatch(peers, 0.5, lambda missing, waited: reported.append(missing), interval=0.05)
    watch.start()
    deadline = time.monotonic() + 5
    while not reported and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reported == [[peers[1]]]
    up.close()


def test_peer_watch_clock_starts_with_own_server():
    own = _listener()
    own_port = own.getsockname()[1]
    own.close()  # our own server is not up yet: no timeout however long we wait
    reported = []
    watch = PeerWatch(
        [parse_address(1, "worker", 1, f"127.0.0.1:{own_port}")],
        0.1,
        lambda m, w: reported.append(m),
        own_port=own_port,
        interval=0.05,
    ).start()
    time.sleep(0.5)
    assert not reported
    watch.stop()


def test_chief_watch_finishes_after_up_then_refused():
    chief = _listener()
    called = threading.Event()
    watch = ChiefWatch(
        parse_address(0, "chief", 0, f"127.0.0.1:{chief.getsockname()[1]}"),
        on_finished=called.set,
        interval=0.05,
    ).start()
    assert watch.seen.wait(2)
    chief.close()
    assert called.wait(10) and watch.finished.is_set()


def test_templates_are_found_and_every_line_is_commented():
    for name in TEMPLATES:
        path = template_path(name)
        with open(path) as f:
            lines = f.read().splitlines()
        assert lines[0] == "#!/bin/bash"
        subprocess.run(["bash", "-n", path], check=True)
        for number, line in enumerate(lines[1:], 2):
            code = line.strip()
            if not code or code.startswith("#"):
                continue
            # a code line carries its own comment, or the comment block right above it
            assert "#" in line or lines[number - 2].lstrip().startswith("#"), f"{name}:{number}: {line}"


# ---------------------------------------------------------------- with TensorFlow
def _free_ports(n: int) -> list[int]:
    socks = [_listener() for _ in range(n)]
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _local_ps_cluster() -> tuple[list[int], dict[str, list[str]]]:
    """Free ports for chief:0, ps:0 and worker:0 on 127.0.0.1, and that cluster."""
    ports = _free_ports(3)
    jobs = ("chief", "ps", "worker")
    return ports, {job: [f"127.0.0.1:{port}"] for job, port in zip(jobs, ports, strict=True)}


@pytest.mark.tf
@pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not installed")
def test_ps_server_exits_0_soon_after_the_chief_and_on_sigterm():
    (chief_port, ps_port, w_port), cluster = _local_ps_cluster()
    chief = socket.socket()  # stands in for the chief's server
    chief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    chief.bind(("127.0.0.1", chief_port))
    chief.listen()
    ps = tfslurm_run(tf_config=tf_config(cluster, "ps", 0))
    worker = tfslurm_run(tf_config=tf_config(cluster, "worker", 0))
    try:
        deadline = time.monotonic() + 90
        while not (is_listening("127.0.0.1", ps_port) and is_listening("127.0.0.1", w_port)):
            assert time.monotonic() < deadline, "servers did not start"
            assert ps.poll() is None and worker.poll() is None, ps.communicate()
            time.sleep(0.1)
        worker.send_signal(signal.SIGINT)  # stop by SIGINT: status 0, at once
        assert worker.wait(10) == 0
        ps.send_signal(signal.SIGTERM)  # preemption: stay up while the chief checkpoints
        with pytest.raises(subprocess.TimeoutExpired):
            ps.wait(0.8)
        chief.close()  # the chief finished
        assert ps.wait(10) == 0
        err = ps.communicate()[1]
        assert "SIGTERM received: staying up until the chief has checkpointed" in err
        assert "chief finished, exiting 0" in err
    finally:
        for p in (ps, worker):
            if p.poll() is None:
                p.kill()
        chief.close()


@pytest.mark.tf
@pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not installed")
def test_missing_ps_is_a_clear_error_on_the_chief():
    (_, ps_port, w_port), cluster = _local_ps_cluster()
    program = ("python", "-m", "tfslurm.examples.ps", "--steps", "3")
    chief = tfslurm_run("--peer-timeout", "2", "--", *program, tf_config=tf_config(cluster, "chief", 0))
    _, err = chief.communicate(timeout=90)
    assert chief.returncode == 3, err
    assert f"peer ps:0 at 127.0.0.1:{ps_port}, worker:0 at 127.0.0.1:{w_port} did not come up within" in err


# ---------------------------------------------------------------- tfslurm run without TF
def test_python_program_runs_in_process_with_args_and_status(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "import json, os, sys\n"
        "import tfslurm.runtime.preemption as p\n"
        "print(json.loads(os.environ['TF_CONFIG'])['task'], sys.argv[1:], os.environ['TFSLURM_ROLE'],\n"
        "      p.installed().signum)\n"
        "sys.exit(7)\n"
    )
    proc = tfslurm_run("--", "python", str(script), "a", "--b")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 7, err
    assert out.strip() == f"{{'type': 'worker', 'index': 0}} ['a', '--b'] worker:0 {int(signal.SIGUSR1)}"
    assert "tfslurm run: worker:0: program finished, exit 7" in err


def test_other_commands_run_as_a_child_with_tf_config():
    proc = tfslurm_run("--", "sh", "-c", 'echo "$TF_CONFIG"; exit 5')
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 5, err
    assert json.loads(out)["task"] == {"type": "worker", "index": 0}


def test_a_command_gets_the_role_watched_and_requeue_variables():
    proc = tfslurm_run(
        "--requeue-on-ps-failure",
        "--",
        "sh",
        "-c",
        'echo "$TFSLURM_ROLE $TFSLURM_WATCHED $TFSLURM_REQUEUE_ON_PS_FAILURE"',
    )
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.strip() == "worker:0 1 1"


def test_the_program_environment_is_a_new_dict_for_the_child():
    role = role_from_tf_config(tf_config({"worker": ["a:1", "b:2"]}, "worker", 1))
    base = {"PATH": "/bin", "http_proxy": "http://proxy:3128", "no_proxy": "example.org"}
    given = dict(base)
    env = program_environ(role, base, True, watched=True)
    assert base == given  # the caller's environment is left as it was
    assert json.loads(env["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}
    assert (env["TFSLURM_ROLE"], env["TFSLURM_WATCHED"], env["TFSLURM_REQUEUE_ON_PS_FAILURE"]) == (
        "worker:1",
        "1",
        "1",
    )
    assert env["no_proxy"] == env["NO_PROXY"] == "example.org,127.0.0.1,a,b,localhost"
    server = program_environ(role, {"PATH": "/bin"}, False, watched=False)
    assert not {"TFSLURM_WATCHED", "TFSLURM_REQUEUE_ON_PS_FAILURE", "no_proxy"} & set(server)


def test_missing_program_and_bad_tf_config_are_one_line_errors(tmp_path):
    proc = tfslurm_run()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and err.strip().endswith(
        "tfslurm run: error: no program given for worker:0: use tfslurm run -- python train.py"
    )
    proc = tfslurm_run("--", "true", tf_config="{nope")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert err.strip().splitlines() == [
        (
            "tfslurm run: error: TF_CONFIG is not valid JSON: "
            "Expecting property name enclosed in double quotes at position 1"
        )
    ]
    proc = tfslurm_run("--", "python", str(tmp_path / "absent.py"))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "absent.py' does not exist" in err


def test_sigterm_ends_a_program_that_ignores_it(tmp_path):
    """A stop signal reaches the program as the preemption signal (MWMS swallows SIGTERM);
    with --stop-grace tfslurm run's parent SIGKILLs it that long after (without, Slurm
    does): the program is still alive well into the grace, then killed."""
    stubborn = (
        "import os, signal, threading\n"
        # os.write, not print: a print in the handler can interrupt the main thread's own
        # print and die with "reentrant call inside BufferedWriter"
        "def ignore(*a):\n"
        "    os.write(1, b'ignored\\n')\n"
        "    threading.Timer(0.3, os.write, (1, b'alive\\n')).start()\n"
        "signal.signal(signal.SIGUSR1, ignore)\n"
        "print('ready', flush=True)\n"
        "while True: signal.pause()\n"
    )
    proc = started(tmp_path, stubborn, "--stop-grace", "3")
    proc.send_signal(signal.SIGTERM)
    rest, err = proc.communicate(timeout=30)
    assert rest.split() == ["ignored", "alive"], (proc.returncode, err)
    assert proc.returncode == 128 + signal.SIGKILL, err


def test_preemption_signal_reaches_program_and_never_kills_it(tmp_path):
    proc = started(tmp_path, STOPPABLE, "--preempt-signal", "USR2")
    proc.send_signal(signal.SIGUSR2)  # to the parent: it passes the signal on
    out, err = proc.communicate(timeout=30)
    # stopped early: never 0 (a job would end COMPLETED with training unfinished)
    assert proc.returncode == 85, err
    assert out.strip() == "stopped"


def test_evaluator_watch_ends_when_the_chief_never_shows_up():
    from tfslurm.runtime.api import watch_chief

    port = _free_ports(1)[0]
    role = role_from_tf_config(
        tf_config(
            {
                "chief": [f"127.0.0.1:{port}"],
                "ps": ["127.0.0.1:1"],
                "worker": ["127.0.0.1:2"],
                "evaluator": ["127.0.0.1:3"],
            },
            "evaluator",
            0,
        )
    )
    watch = watch_chief(role, timeout=0.3)
    assert watch.finished.wait(5)
    assert not watch.seen.is_set()


def test_server_without_tensorflow_is_one_line(tmp_path):
    (tmp_path / "tensorflow").mkdir()  # a package that fails to import shadows the real one
    (tmp_path / "tensorflow" / "__init__.py").write_text("raise ImportError('no TF here')\n")
    cluster = {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"], "worker": ["127.0.0.1:3"]}
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "TF_CONFIG": tf_config(cluster, "ps", 0)}
    done = subprocess.run(
        [sys.executable, "-m", "tfslurm", "run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith("tfslurm run: error: TensorFlow cannot be imported by")
    )


@pytest.mark.parametrize(
    "value, env", [(0.0, ""), (-1.0, ""), (float("nan"), ""), (None, "nan"), (None, "0"), (None, "soon")]
)
def test_peer_timeout_must_be_positive(value, env):
    settings = Settings.from_environ({"TFSLURM_PEER_TIMEOUT": env})
    with pytest.raises(RoleError, match="not a positive number of seconds"):
        RunConfig.for_command(settings, {}, peer_timeout=value)
    with pytest.raises(RoleError, match="not a positive number of seconds"):
        RunConfig.for_program(settings, {}, peer_timeout=value)
    settings = Settings.from_environ({"TFSLURM_PEER_TIMEOUT": "2.5"})
    assert RunConfig.for_command(settings, {}).peer_timeout == 2.5
    assert RunConfig.for_program(settings, {}, peer_timeout=7).peer_timeout == 7.0


def test_one_rule_picks_the_jobs_spec():
    """--jobs, else TFSLURM_TF_DIST, else the program's own default, else all workers."""
    dist = Settings.from_environ({"TFSLURM_TF_DIST": "ps:1,worker:*"})
    none = Settings.from_environ({})
    assert jobs_spec("worker:*", dist, "chief:1,worker:*") == "worker:*"
    assert jobs_spec(None, dist, "chief:1,worker:*") == "ps:1,worker:*"
    assert jobs_spec(None, none, "chief:1,worker:*") == "chief:1,worker:*"
    assert jobs_spec(None, none) is None
    assert RunConfig.for_command(dist, {}, jobs="worker:*").jobs == "worker:*"
    assert RunConfig.for_program(dist, {}, jobs="chief:1,worker:*").jobs == "ps:1,worker:*"


def test_settings_are_resolved_once_into_the_config():
    env = {
        "TFSLURM_PREEMPT_SIGNAL": "USR2",
        "TFSLURM_STOP_SIGNALS": "TERM,USR1",
        "TFSLURM_STOP_GRACE": "4",
        "TFSLURM_MAX_RESTARTS": "2",
        "TFSLURM_REQUEUE_ON_PS_FAILURE": "1",
        "TFSLURM_WATCHED": "1",
        "SLURM_RESTART_COUNT": "3",
        "SLURM_JOB_ID": "17",
    }
    settings = Settings.from_environ(env)
    usr1, usr2, term = signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM
    command = RunConfig.for_command(settings, env, preempt_signal="USR1", max_restarts="5")
    assert (command.preempt, command.stop_signals, command.stop_grace) == (usr1, (usr1, term), 4.0)
    assert (command.max_restarts, command.restarts, command.requeue_job) == (5, 3, "17")
    assert command.forwarded == (term, signal.SIGINT, usr1)
    program = RunConfig.for_program(settings, env, requeue_on_ps_failure=False)
    assert (program.preempt, program.stop_signals) == (usr2, (usr2, term, usr1))
    assert program.max_restarts is None and program.watched  # tfslurm run checked the cap
    assert (program.requeue, program.requeue_job) == (False, "")


def test_the_api_watcher_kills_the_program_when_a_peer_never_comes_up():
    """tfslurm.run's watcher process: the role from the TF_CONFIG it inherits, the one
    peer wait, one line, then SIGKILL of the training process."""
    ports = _free_ports(3)
    cluster = {job: [f"127.0.0.1:{port}"] for job, port in zip(("chief", "ps", "worker"), ports, strict=True)}
    program = (
        "import os, signal\n"
        "from tfslurm.runtime.roles import role_from_tf_config\n"
        "from tfslurm.runtime.watcher import start_watcher\n"
        "start_watcher(role_from_tf_config(os.environ['TF_CONFIG']), 0.3)\n"
        "signal.pause()\n"
    )
    env = {**os.environ, "TF_CONFIG": tf_config(cluster, "chief", 0)}
    done = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("tfslurm run: error: chief:0 (ps, from TF_CONFIG): peer ps:0 at 127.0.0.1:"), line
    assert "did not come up within" in line


def test_sigterm_reaches_a_command_run_as_a_child():
    """The command starts with SIGTERM unblocked and gets it from the watching parent."""
    proc = tfslurm_run(
        "--", "sh", "-c", 'trap "echo got TERM; exit 4" TERM; echo ready; while :; do sleep 0.1; done'
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 4, err
    assert out.strip() == "got TERM"


def test_a_command_run_as_a_child_starts_with_no_signal_blocked():
    proc = tfslurm_run("--", "grep", "SigBlk", "/proc/self/status")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    blocked = int(out.split()[1], 16)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        assert not blocked & (1 << (signum - 1)), (signum, out)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--log-every", "0"], "--log-every 0: must be at least 1"),
        (["--check-every", "-2"], "--check-every -2: must be at least 1"),
        (["--batch", "0"], "--batch 0: must be at least 1"),
        (["--checkpoint-every", "-1"], "--checkpoint-every -1: must be 0 (off) or more"),
    ],
)
def test_example_options_dividing_by_zero_are_usage_errors(capsys, argv, message):
    from tfslurm.examples import common

    with pytest.raises(SystemExit) as stopped:
        common.parse(common.parser("test"), argv)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f"error: {message}")


def test_training_cluster_drops_the_evaluator_and_empty_jobs() -> None:
    cluster = {"chief": ["c:1"], "worker": ["w:1", "w:2"], "ps": [], "evaluator": ["e:1"]}
    role = role_from_tf_config(tf_config(cluster, "worker", 1))
    assert role.training_cluster() == {"chief": ["c:1"], "worker": ["w:1", "w:2"]}


def test_process_handle_never_signals_a_reused_pid() -> None:
    """The parent's signals go through a pidfd: once its process is reaped, sending is a
    no-op, whatever now has that PID (pid_max is 32768 on many machines)."""
    sleeper = subprocess.Popen(["sleep", "30"])
    handle = Process(sleeper.pid)
    handle.send(0)  # alive: no error
    sleeper.kill()
    sleeper.wait()
    assert handle._fd is not None  # Linux >= 5.3: the handle names the process, not the number
    with pytest.raises(ProcessLookupError):
        signal.pidfd_send_signal(handle._fd, 0)
    handle.kill()  # reaped: nothing happens, no error
