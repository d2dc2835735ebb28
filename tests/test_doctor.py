"""``tfslurm doctor``'s parsing and decisions, without Slurm: the texts the Slurm commands
print, the hook's wrappers as real files, and the decisions over the nodes' replies.
The real cluster's faults are in test_doctor_cluster.py."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tfslurm import __version__, prolog
from tfslurm.doctor import site
from tfslurm.doctor.findings import EXIT_FINDING, EXIT_HEALTHY, Finding, Report
from tfslurm.doctor.gather import (
    Gathering,
    Reply,
    clock_findings,
    cwd_findings,
    name_findings,
    reach_findings,
    step_report,
)
from tfslurm.doctor.node import device_ids, gpu_findings, missing_variables, reaches
from tfslurm.step import GpuVariables

pytestmark = pytest.mark.pure

NODES = ["node1", "node2", "node3", "node4"]


# --- the site's texts -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("slurm 22.05.8\n", "22.05.8"),
        ("slurm-wlm 24.11.5\n", "24.11.5"),
        ("slurm 26.05.0-0rc1", "26.05.0-0rc1"),
        ("sinfo: fatal", None),
    ],
)
def test_slurm_version(text: str, version: str | None) -> None:
    assert site.slurm_version(text) == version


# srun --help wraps a plugin's help text over lines of its own
HELP = """Usage: srun [OPTIONS(0)... [executable(0) [args(0)...]]]
      --tf-dist[=spec]        TensorFlow cluster: JOB:COUNT[,...], e.g.
                              ps:1,worker:* (bare --tf-dist: site default).
                              Sets TF_CONFIG and CUDA_VISIBLE_DEVICES for every
                              task (docs/tf-dist.md; tfslurm
                              0.2.0+site).
      --other                 (docs/x; tfslurm 9.9.9)
"""


def test_plugin_help_names_the_release_across_a_line_break() -> None:
    assert site.plugin_help(HELP) == (True, "0.2.0+site")
    older = HELP.replace(
        "(docs/tf-dist.md; tfslurm\n                              0.2.0+site).", "(docs/tf-dist.md)."
    )
    assert site.plugin_help(older.replace("(docs/x; tfslurm 9.9.9)", "")) == (True, None)
    assert site.plugin_help("Usage: srun [OPTIONS]\n  --mpi=type\n") == (False, None)


def test_config_values() -> None:
    text = "Configuration data as of 2026-11-29T04:00:00\nTaskProlog              = (null)\nPlugStackConfig         = /etc/slurm/plugstack.conf\n"
    assert site.config_values(text) == {"TaskProlog": "", "PlugStackConfig": "/etc/slurm/plugstack.conf"}


def test_plugin_lines_follow_includes(tmp_path: Path) -> None:
    (tmp_path / "plugstack.conf.d").mkdir()
    (tmp_path / "plugstack.conf").write_text("required /x/spank_pyxis.so\ninclude plugstack.conf.d/*\n")
    (tmp_path / "plugstack.conf.d" / "tfslurm.conf").write_text(
        "# optional /old/spank_tfslurm.so\noptional /lib/spank_tfslurm.so default_spec=worker:* prolog=/etc/hook\n"
    )
    (tmp_path / "plugstack.conf.d" / "x.conf").write_text("optional /lib/spank_tfslurm.so\n")
    lines = site.plugin_lines(str(tmp_path / "plugstack.conf"), site.read_text)
    assert [(line.plugin, line.prolog) for line in lines] == [
        ("/lib/spank_tfslurm.so", "/etc/hook"),
        ("/lib/spank_tfslurm.so", None),
    ]
    assert lines[0].conf == str(tmp_path / "plugstack.conf.d" / "tfslurm.conf")
    assert site.plugin_lines(str(tmp_path / "missing.conf"), site.read_text) == []


def test_wrapper_parts_of_tfslurm_wrappers_only() -> None:
    text = prolog.wrapper_script(python="/opt/py 3/bin/python", package_parent='/opt/pkg "x"')
    assert site.wrapper_parts(text) == ("/opt/py 3/bin/python", '/opt/pkg "x"')
    assert site.wrapper_parts("#!/bin/sh\n/etc/slurm/tfslurm-taskprolog || exit $?\n") is None


# --- the hook's wrappers, as files ------------------------------------------------------------
def _wrapper(tmp: Path, text: str, mode: int = 0o755) -> str:
    path = tmp / "hook"
    path.write_text(text)
    path.chmod(mode)
    return str(path)


def test_a_working_wrapper_states_its_release(tmp_path: Path) -> None:
    path = str(prolog.write_wrapper(tmp_path / "hook"))
    report, release = site.wrapper_report(path, "TaskProlog=", site.Commands({}), "login")
    assert (report.findings, release) == ((), __version__)
    assert report.checked == (f"TaskProlog= {path} runs tfslurm {__version__}",)


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("missing", "does not exist"),
        ("not executable", "is not an executable file"),
        ("python gone", "runs Python /nonexistent/python, which is not here"),
        ("no tfslurm", "cannot import tfslurm from /nonexistent/pkg: ModuleNotFoundError"),
    ],
)
def test_a_broken_wrapper_is_one_finding(tmp_path: Path, case: str, said: str) -> None:
    if case == "missing":
        path = str(tmp_path / "nowhere")
    elif case == "not executable":
        path = _wrapper(tmp_path, prolog.wrapper_script(), 0o644)
    elif case == "python gone":
        path = _wrapper(tmp_path, prolog.wrapper_script(python="/nonexistent/python"))
    else:
        path = _wrapper(tmp_path, prolog.wrapper_script(package_parent="/nonexistent/pkg"))
    report, release = site.wrapper_report(path, "prolog=", site.Commands({}), "login")
    assert release is None and len(report.findings) == 1, report
    finding = report.findings[0]
    assert (finding.check, finding.nodes) == ("wrapper", ("login",))
    assert said in finding.message and path in finding.message and "--write-wrapper" in finding.fix


def test_a_site_script_is_not_checked_further(tmp_path: Path) -> None:
    path = _wrapper(tmp_path, "#!/bin/sh\nexit 0\n")
    report, release = site.wrapper_report(path, "TaskProlog=", site.Commands({}), "login")
    assert (report.findings, release) == ((), None) and "not a tfslurm wrapper" in report.checked[0]


def test_no_slurm_commands_is_one_finding() -> None:
    report = site.site_report(site.Commands({"PATH": "/nonexistent"}), __version__, "login")
    assert [f.check for f in report.findings] == ["slurm"]
    assert "sinfo is not on PATH" in report.findings[0].message


# --- one node's own checks --------------------------------------------------------------------
def _gpus(**values: str) -> GpuVariables:
    return GpuVariables.from_environ(values)


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({}, None),
        ({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, None),
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, "CUDA_VISIBLE_DEVICES=0,1 but Slurm gave this job no GPUs here"),
        ({"SLURM_STEP_GPUS": "2,3", "SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "2,3"}, None),
        ({"SLURM_STEP_GPUS": "2,3", "SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "0,1"}, None),
        (
            {"SLURM_STEP_GPUS": "2,3", "SLURM_GPUS_ON_NODE": "2"},
            "Slurm gave 2 GPU(s) here but CUDA_VISIBLE_DEVICES is unset",
        ),
        (
            {"SLURM_STEP_GPUS": "2,3", "SLURM_GPUS_ON_NODE": "2", "CUDA_VISIBLE_DEVICES": "0"},
            "CUDA_VISIBLE_DEVICES=0 but Slurm gave 2,3 here",
        ),
        ({"SLURM_JOB_GPUS": "0,1,2,3", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}, None),
        (
            {"SLURM_GPUS_ON_NODE": "0", "CUDA_VISIBLE_DEVICES": "1"},
            "CUDA_VISIBLE_DEVICES=1 but Slurm gave this job no GPUs",
        ),
    ],
)
def test_gpus_visible_against_slurms(env: dict[str, str], said: str | None) -> None:
    found, checked = gpu_findings("node1", _gpus(**env))
    assert checked.startswith("gpus")
    if said is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].message.startswith(said) and found[0].nodes == ("node1",)


def test_device_ids() -> None:
    assert (device_ids(None), device_ids(""), device_ids("0, 2")) == (None, (), ("0", "2"))


def test_missing_variables_reads_env_output() -> None:
    assert missing_variables(
        ["TF_CONFIG", "TFSLURM_ROLE"], "PATH=/bin\nTF_CONFIG={}\nX=TFSLURM_ROLE=1\n"
    ) == ["TFSLURM_ROLE"]


# --- the decisions over all nodes -------------------------------------------------------------
def _replies(**reports: dict[str, list[str]]) -> dict[str, Reply]:
    return {
        n: Reply(
            {"host": f"{n}-ib", "port": 20001, "cwd": "/work"},
            report={"unresolved": [], "unreached": [], "seen": NODES} | reports.get(n, {}),
        )
        for n in NODES
    }


def test_a_healthy_step_has_no_finding() -> None:
    report = step_report(NODES, _replies(), "login:4000")
    assert report.findings == () and report.status == EXIT_HEALTHY
    assert any("names resolve" in c and c.startswith("node[1-4]") for c in report.checked)


def test_a_node_that_never_reported_is_named_with_sruns_words() -> None:
    replies = _replies()
    del replies["node3"]
    report = step_report(NODES, replies, "login:4000", "srun: error: node3: task 2: Exited\n")
    (finding,) = report.findings
    assert finding.nodes == ("node3",) and "srun: error: node3: task 2: Exited" in finding.message


def test_names_no_node_resolves_are_one_line() -> None:
    replies = _replies(**{n: {"unresolved": [m for m in NODES if m != n]} for n in NODES})
    (finding,) = name_findings(NODES, replies)
    assert finding.nodes == tuple(NODES) and "resolve on no other node" in finding.message
    assert reach_findings(NODES, replies) == []  # unresolved pairs are not reach faults


def test_a_name_one_node_cannot_resolve_names_that_node() -> None:
    (finding,) = name_findings(NODES, _replies(node4={"unresolved": ["node1"]}))
    assert (
        finding.nodes == ("node4",)
        and "does not resolve node1-ib (the planned host of node1)" in finding.message
    )


def test_a_node_cut_off_is_one_line() -> None:
    replies = _replies(
        node2={"unreached": ["node1", "node3", "node4"]},
        **{n: {"unreached": ["node2"]} for n in ("node1", "node3", "node4")},
    )
    (finding,) = reach_findings(NODES, replies)
    assert finding.nodes == ("node2",) and "reaches no other node" in finding.message


def test_one_port_not_answering_names_its_node_and_who_tried() -> None:
    (finding,) = reach_findings(
        NODES, _replies(node1={"unreached": ["node3"]}, node2={"unreached": ["node3"]})
    )
    assert finding.nodes == ("node3",) and finding.message == "node3-ib:20001 does not answer from node[1-2]"


def test_no_pair_answering_is_one_line() -> None:
    replies = _replies(**{n: {"unreached": [m for m in NODES if m != n]} for n in NODES})
    (finding,) = reach_findings(NODES, replies)
    assert finding.nodes == tuple(NODES) and "no node reaches another" in finding.message


def test_a_port_taken_is_said_once_not_as_unreached() -> None:
    replies = _replies(node1={"unreached": ["node3"]})
    replies["node3"] = Reply(
        {"host": "node3-ib", "port": 20001, "port_error": "Address already in use", "cwd": "/work"},
        report=replies["node3"].report,
    )
    report = step_report(NODES, replies, "login:4000")
    assert [(f.check, f.nodes) for f in report.findings] == [("port", ("node3",))]
    assert "the planned port 20001 cannot be bound: Address already in use" in report.findings[0].message


def test_clocks_allow_for_the_round_trip() -> None:
    replies = _replies()
    replies["node1"].offset, replies["node1"].window = 1.05, 0.1  # within 1 s + the window
    replies["node2"].offset, replies["node2"].window = -2.5, 0.1
    (finding,) = clock_findings(NODES, replies, "login")
    assert finding.nodes == ("node2",) and finding.message == "the clock is 2.5 s behind login's"


def test_a_node_with_a_directory_of_its_own_is_named() -> None:
    replies = _replies(
        node2={"seen": ["node2"]},
        **{n: {"seen": ["node1", "node3", "node4"]} for n in ("node1", "node3", "node4")},
    )
    (finding,) = cwd_findings(NODES, replies)
    assert finding.nodes == ("node2",) and "not the one node[1,3-4] share" in finding.message


def test_no_directory_shared_at_all_names_every_node() -> None:
    replies = _replies(**{n: {"seen": [n]} for n in NODES})
    (finding,) = cwd_findings(NODES, replies)
    assert finding.nodes == tuple(NODES) and "is not shared" in finding.message


# --- the report -------------------------------------------------------------------------------
def test_the_same_finding_of_several_nodes_is_one_line() -> None:
    same = [
        Finding("framework", [n], "import jax fails", "install jax") for n in ("node2", "node10", "node1")
    ]
    report = Report([Finding("clock", ["node3"], "off", "sync"), *same], ["a", "a", "b"])
    assert [f.nodes for f in report.findings] == [("node1", "node2", "node10"), ("node3",)]  # CHECKS order
    assert report.text().splitlines() == [
        "framework: node[1-2,10]: import jax fails; fix: install jax",
        "clock: node3: off; fix: sync",
    ]
    assert report.status == EXIT_FINDING and report.checked == ("a", "b")
    again = Report.from_json(report.as_json())
    assert again == report
    assert json.loads(report.as_json())["findings"][0] == {
        "check": "framework", "nodes": ["node1", "node2", "node10"], "message": "import jax fails", "fix": "install jax"
    }  # fmt: skip


def test_a_healthy_report_is_one_line() -> None:
    assert Report(checked=["slurm 22.05.8", "plugin registered"]).text() == (
        "tfslurm doctor: healthy (2 checks: slurm 22.05.8; plugin registered)"
    )


def test_a_finding_line_is_escaped() -> None:
    assert Finding("cwd", ["n1"], "dir /x\ny", "fix").line() == "cwd: n1: dir /x\\ny; fix: fix"


# --- the gathering point and two nodes, on this machine's loopback ------------------------------
NODES_PROGRAM = """
import os, sys, threading
from tfslurm.doctor.node import NodeCheck, run_node
from tfslurm.step import GpuVariables

gather, ports = int(sys.argv[1]), {"a": int(sys.argv[2]), "b": int(sys.argv[3])}

def one(node):
    peers = [(m, "127.0.0.1", p) for m, p in ports.items() if m != node]
    check = NodeCheck(
        node=node, host="127.0.0.1", port=ports[node], peers=peers, gather=("127.0.0.1", gather),
        marker=".tfslurm-doctor-1.0-", gpus=GpuVariables.from_environ({}), cwd=os.getcwd(),
        python=sys.executable, env=dict(os.environ, TF_CONFIG="{}"),
        container="env -u TF_CONFIG" if node == "b" else None,
    )
    run_node(check, ["TF_CONFIG"], lambda: ([], ["the hook checked"]))

threads = [threading.Thread(target=one, args=(n,)) for n in ports]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_gathering_point_holds_real_nodes_in_step(tmp_path: Path) -> None:
    """Two nodes' tasks (threads of one process here) and the gathering point talk over
    TCP; b's port is taken, so a cannot be said to miss it; b's container drops TF_CONFIG;
    c never comes."""
    program = tmp_path / "nodes.py"
    program.write_text(NODES_PROGRAM)
    squatter = socket.socket()
    squatter.bind(("0.0.0.0", 0))
    squatter.listen(1)
    ports = (str(_free_port()), str(squatter.getsockname()[1]))
    gathering = Gathering(["a", "b", "c"], "127.0.0.1")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    argv = [sys.executable, str(program), str(gathering.port), *ports]
    with squatter:
        tail = _in(tmp_path, lambda: gathering.run(argv, env, hello_s=3, report_s=10))
    report = step_report(["a", "b", "c"], gathering.replies, f"127.0.0.1:{gathering.port}", tail)
    assert [(f.check, f.nodes) for f in report.findings] == [
        ("node", ("c",)),
        ("port", ("b",)),
        ("container", ("b",)),
    ], report.text()
    assert "a,b: the hook checked" in report.checked
    assert not list(tmp_path.glob(".tfslurm-doctor-*"))  # each node removed its marker


def _in(directory: Path, function: Callable[[], str]) -> str:
    here = os.getcwd()
    os.chdir(directory)
    try:
        return function()
    finally:
        os.chdir(here)


def test_a_connect_is_tried_until_its_deadline() -> None:
    port = _free_port()
    started = time.monotonic()
    assert not reaches("127.0.0.1", port, 0.5)  # refused every time
    assert 0.5 <= time.monotonic() - started < 3
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        assert reaches("127.0.0.1", server.getsockname()[1], 0.5)
