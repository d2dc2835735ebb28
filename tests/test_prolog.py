"""The TaskProlog hook and its shell wrapper, over recorded task environments.

Ground truth is what Slurm really did (``tests/data/observed``: where each rank ran, which
GPUs it got) and Slurm's own TaskProlog line protocol (``_proc_stdout`` in slurmstepd's
``task.c``), modelled below. The real-cluster runs are in ``test_site_cluster.py``.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import observed
from hook_modules import HOOK_MODULES, HOOK_VALUES
from importcost import added_by
from taskprolog import apply_taskprolog_output
from tfslurm import __version__, prolog
from tfslurm.errors import LayoutError, TfslurmError
from tfslurm.jobspec import split_spec
from tfslurm.plan import TF_CONFIG_MAX_BYTES, Plan, plan_for
from tfslurm.settings import TF_DIST_VARIABLE
from tfslurm.step import GPU_VARIABLES, Step
from tfslurm.value import Value

PACKAGE_PARENT = str(Path(prolog.__file__).resolve().parent.parent)


# --- Slurm's side of the protocol -----------------------------------------------------


def run_main(env: dict[str, str]) -> tuple[int, str]:
    out = io.StringIO()
    rc = prolog.main(env, out)
    return rc, out.getvalue()


# --- recorded steps -------------------------------------------------------------------


def step_cases() -> list[tuple[str, str, list[observed.Task]]]:
    cases = []
    for path in observed.all_paths():
        fixture = observed.load(path)
        for label, tasks in fixture.steps.items():
            cases.append((f"{observed.fixture_id(path)}:{label}", label, tasks))
    return cases


STEP_CASES = step_cases()


# The hook's GPU warnings (``print`` lines), by (case id, rank): only --gpus=3 over two
# nodes of 2 tasks is uneven (node2 has 1 GPU for 2 tasks); every other task prints nothing.
# From 24.11 on the tasks also see SLURM_GPUS=3, so rank 0 (first on node1) says node2 got fewer.
PRINTED = {
    (f"{version}{prefix}13c_gpus_total_3:s0", rank): [line.format(node=node, first=first) for line in lines]
    for version in ("", "24.11/", "26.05/")
    for prefix, first, node in (("", "node1", "node2"), ("padded/", "tf-gpu001", "tf-gpu002"))
    for rank, lines in (
        (
            2,
            [
                "tfslurm: warning: node {node} has 1 GPU(s) for 2 tasks",
                "tfslurm: warning: tasks get unequal GPU counts (1, 0 on node {node})",
            ],
        ),
        (3, ["tfslurm: warning: task 3 on {node} gets 0 GPUs while other tasks"]),
        *(
            [
                (
                    0,
                    [
                        "tfslurm: warning: tasks get unequal GPU counts (1 per task on node {first}, but SLURM_GPUS=3 "
                        "for 4 tasks)"
                    ],
                )
            ]
            if version
            else []
        ),
    )
}


def spec_for(num_tasks: int) -> str:
    return "chief:1,worker:*" if num_tasks > 1 else "worker:*"


def expected_jobs(spec: str, num_tasks: int) -> list[tuple[str, int]]:
    """(job, index) of each rank, from the spec alone."""
    entries = split_spec(spec)
    fixed = sum(count or 0 for _, count in entries)
    out = []
    for name, count in entries:
        n = num_tasks - fixed if count is None else count
        out += [(name, i) for i in range(n)]
    return out


@pytest.mark.parametrize("case", STEP_CASES, ids=[c[0] for c in STEP_CASES])
def test_every_recorded_task_gets_a_consistent_tf_config(case) -> None:
    """Each task's exported TF_CONFIG, as Slurm would apply it, names the node the rank
    really ran on (the fixture's SLURMD_NODENAME of that rank), gives each rank its job in
    written order, and is the same cluster in every task."""
    case_id, _, tasks = case
    num_tasks = len(tasks)
    spec = spec_for(num_tasks)
    node_of_rank = {t.procid: t.env["SLURMD_NODENAME"] for t in tasks}
    jobs = expected_jobs(spec, num_tasks)
    clusters = set()
    for task in tasks:
        env = dict(task.env, **{TF_DIST_VARIABLE: spec})
        try:
            lines = prolog.prolog_lines(env)
        except LayoutError as exc:
            # tfslurm refuses layouts it cannot verify from this task's variables; the
            # hook must then fail the task with that message, not guess
            rc, text = run_main(env)
            assert rc != 0 and text.startswith("print tfslurm prolog") and str(exc)[:30] in text
            return
        new_env, printed = apply_taskprolog_output(env, "\n".join(lines) + "\n")
        wanted = PRINTED.get((case_id, task.procid), [])
        assert len(printed) == len(wanted) and all(
            p.startswith(w) for p, w in zip(printed, wanted, strict=True)
        ), printed
        config = json.loads(new_env["TF_CONFIG"])
        clusters.add(json.dumps(config["cluster"], sort_keys=True))
        flat = [addr for name, _ in split_spec(spec) for addr in config["cluster"].get(name, [])]
        assert len(flat) == num_tasks and len(set(flat)) == num_tasks
        for rank, address in enumerate(flat):
            assert address.rsplit(":", 1)[0] == node_of_rank[rank]
        assert (config["task"]["type"], config["task"]["index"]) == jobs[task.procid]
        # the wrapper unsets Slurm's SLURM_SCRIPT_CONTEXT (tfslurm/data/taskprolog.sh.in), not the hook
        assert "SLURM_SCRIPT_CONTEXT" not in [line.split()[-1] for line in lines if line.startswith("unset")]
    assert len(clusters) == 1


GPU_CASES = [c for c in STEP_CASES if any("CUDA_VISIBLE_DEVICES" in t.env for t in c[2])]


@pytest.mark.parametrize("case", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_devices_are_the_tasks_own_and_never_shared_on_a_node(case) -> None:
    _, _, tasks = case
    spec = spec_for(len(tasks))
    per_node: dict[str, list[str]] = {}
    for task in tasks:
        env = dict(task.env, **{TF_DIST_VARIABLE: spec})
        new_env, _ = apply_taskprolog_output(env, "\n".join(prolog.prolog_lines(env)) + "\n")
        given_by_slurm = set(filter(None, task.env["CUDA_VISIBLE_DEVICES"].split(",")))
        mine = [d for d in new_env["CUDA_VISIBLE_DEVICES"].split(",") if d]
        assert set(mine) <= given_by_slurm
        per_node.setdefault(task.env["SLURMD_NODENAME"], []).extend(mine)
    for node, devices in per_node.items():
        assert len(devices) == len(set(devices)), (node, devices)


# --- when the hook does nothing ---------------------------------------------------------


def test_without_the_marker_nothing_is_printed_and_nothing_fails() -> None:
    task = observed.load(observed.DATA / "11_gres_gpu2.txt").steps["s0"][0]
    assert prolog.prolog_lines(task.env) == []
    assert run_main(dict(task.env)) == (0, "")
    assert run_main(dict(task.env, **{TF_DIST_VARIABLE: "  "})) == (0, "")
    # even an environment tfslurm cannot read is no reason to fail a job that did not ask
    assert run_main({"SLURM_JOB_ID": "x", "SLURM_PROCID": "-3"}) == (0, "")


def test_batch_script_and_outside_slurm_get_nothing() -> None:
    batch = observed.load(observed.DATA / "20_sbatch_steps.txt").batch
    assert batch is not None
    assert run_main(dict(batch.env, **{TF_DIST_VARIABLE: "worker:*"})) == (0, "")
    assert run_main({TF_DIST_VARIABLE: "worker:*"}) == (0, "")


# --- errors reach the user as one print line --------------------------------------------


def fixture_env(name: str = "11_gres_gpu2.txt", rank: int = 0, **extra: str) -> dict[str, str]:
    task = observed.load(observed.DATA / name).steps["s0"][rank]
    return dict(task.env, **extra)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [("ps:1,worker:1", "asks for 2 tasks but the step has 4"),
     ("bogus", "jobs spec 'bogus': job 'bogus' has no count; write bogus:N or bogus:*"),
     ("chief:*,worker:1", "at most one")],
)  # fmt: skip
def test_bad_spec_prints_one_line_and_fails_the_task(spec: str, needle: str) -> None:
    rc, text = run_main(fixture_env(**{TF_DIST_VARIABLE: spec}))
    assert rc == 2
    _, printed = apply_taskprolog_output({}, text)
    assert len(printed) == 1 and text.count("\n") == 1
    assert printed[0].startswith(f"tfslurm prolog ({TF_DIST_VARIABLE}=") and needle in printed[0]


def test_internal_errors_are_reported_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    import tfslurm.plan

    def broken(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(tfslurm.plan, "plan_for", broken)
    rc, text = run_main(fixture_env(**{TF_DIST_VARIABLE: "worker:*"}))
    assert (
        rc == 1
        and text
        == f"print tfslurm prolog ({TF_DIST_VARIABLE}=worker:*): internal error: RuntimeError: boom second line\n"
    )
    assert run_main(fixture_env()) == (0, "")


def test_a_newline_in_a_value_is_refused_never_passed_on() -> None:
    with pytest.raises(prolog.PrologError, match="contains a newline"):
        prolog.format_lines({"CUDA_VISIBLE_DEVICES": "0\nexport LD_PRELOAD=/tmp/x.so"})
    with pytest.raises(prolog.PrologError, match="NUL"):
        prolog.format_lines({"A": "x\0y"})
    with pytest.raises(prolog.PrologError, match="not a valid variable name"):
        prolog.format_lines({"A B": "x"})
    with pytest.raises(prolog.PrologError, match="Slurm drops"):
        prolog.format_lines({"TF_CONFIG": "x" * (prolog.SLURM_ENV_STRLEN_MAX - len("TF_CONFIG") - 2)})
    # one byte less fits, exactly as slurmstepd decides
    value = "x" * (prolog.SLURM_ENV_STRLEN_MAX - len("TF_CONFIG") - 3)
    assert prolog.format_lines({"TF_CONFIG": value}) == [f"export TF_CONFIG={value}"]
    assert prolog.format_lines({"X": "a\rb", "Y": None}) == ["export X=a\rb", "unset Y"]


def test_a_newline_from_the_environment_fails_the_task_saying_so() -> None:
    env = fixture_env(**{TF_DIST_VARIABLE: "worker:*", "CUDA_VISIBLE_DEVICES": "0,1\nexport EVIL=1"})
    rc, text = run_main(env)
    assert rc != 0
    new_env, printed = apply_taskprolog_output(env, text)
    assert "EVIL" not in new_env and len(printed) == 1
    assert "CUDA_VISIBLE_DEVICES" in printed[0]


NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)
VALUES = st.text(st.characters(blacklist_categories=["Cs"]), max_size=200)


@settings(max_examples=300, deadline=None)
@given(changes=st.dictionaries(NAMES, st.one_of(st.none(), VALUES), max_size=6))
def test_lines_mean_exactly_the_changes_to_slurm_or_are_refused(changes) -> None:
    start = {name: "old" for name in changes}
    try:
        lines = prolog.format_lines(changes)
    except prolog.PrologError:
        assert any(v is not None and ("\n" in v or "\0" in v) for v in changes.values())
        return
    env, printed = apply_taskprolog_output(start, "\n".join(lines) + "\n")
    assert printed == []
    expected = {name: value for name, value in changes.items() if value is not None}
    assert env == expected


# --- TF_CONFIG too big for the environment: the descriptor ------------------------------


def test_oversized_tf_config_is_replaced_by_the_descriptor() -> None:
    template = "{node}." + "d" * 40_000  # 4 tasks x 40 kB hosts > 131,060 bytes
    rank_envs = [
        dict(t.env, **{TF_DIST_VARIABLE: "chief:1,worker:*", "TFSLURM_HOST_TEMPLATE": template,
                       "TF_CONFIG": '{"stale": true}'})
        for t in observed.load(observed.DATA / "11_gres_gpu2.txt").steps["s0"]
    ]  # fmt: skip
    for rank, env in enumerate(rank_envs):
        lines = prolog.prolog_lines(env)
        new_env, _ = apply_taskprolog_output(env, "\n".join(lines) + "\n")
        assert "TF_CONFIG" not in new_env, "a stale TF_CONFIG must not survive"
        text = new_env["TFSLURM_DESCRIPTOR"]
        assert len(text) < 2_000 + len(template)
        plan = Plan.from_descriptor(text, rank=rank)
        config = json.loads(plan.tf_config())
        assert len(plan.tf_config().encode()) > TF_CONFIG_MAX_BYTES
        assert config["task"] == {"type": "chief" if rank == 0 else "worker", "index": max(rank - 1, 0)}
        hosts = [a.rsplit(":", 1)[0] for a in config["cluster"]["chief"] + config["cluster"]["worker"]]
        assert hosts == [rank_envs[r]["SLURMD_NODENAME"] + template[6:] for r in range(4)]
        assert new_env["CUDA_VISIBLE_DEVICES"]  # devices are still set the normal way


def test_the_hook_and_tfslurm_env_agree_on_a_descriptor() -> None:
    """A task with TFSLURM_DESCRIPTOR gets the plan it describes from the hook, as from
    ``tfslurm env``: here one written for another jobs spec than the task's TF_DIST."""
    described = plan_for(Step.from_environ(fixture_env(**{TF_DIST_VARIABLE: "chief:1,worker:*"})))
    env = fixture_env(**{TF_DIST_VARIABLE: "worker:*", "TFSLURM_DESCRIPTOR": described.cluster.descriptor()})
    lines = prolog.prolog_lines(env)
    assert "unset TFSLURM_DESCRIPTOR" in lines  # a TF_CONFIG that fits replaces it
    exported = dict(line[len("export ") :].split("=", 1) for line in lines if line.startswith("export "))
    assert json.loads(exported["TF_CONFIG"])["task"] == {"type": "chief", "index": 0}
    root = str(Path(__file__).parent.parent)
    done = subprocess.run([sys.executable, "-m", "tfslurm", "env", "--format", "json"],
                          env={**env, "PYTHONPATH": root}, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == exported
    # a descriptor that is not one fails both alike, in one line naming it
    env["TFSLURM_DESCRIPTOR"] = "stale"
    rc, text = run_main(env)
    assert rc == 2 and "plan descriptor 'stale' does not start with" in text
    done = subprocess.run([sys.executable, "-m", "tfslurm", "env"],
                          env={**env, "PYTHONPATH": root}, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "plan descriptor 'stale' does not start with" in done.stderr


# --- the shell wrapper -----------------------------------------------------------------


@pytest.fixture()
def wrapper(tmp_path: Path) -> Path:
    return prolog.write_wrapper(tmp_path / "tfslurm-taskprolog")


def run_wrapper(
    path: Path, env: dict[str, str], shell: str | None = None
) -> subprocess.CompletedProcess[str]:
    argv = [shell, str(path)] if shell else [str(path)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def test_wrapper_file(wrapper: Path) -> None:
    assert wrapper.stat().st_mode & 0o777 == 0o755
    text = wrapper.read_text()
    assert text.startswith("#!/bin/sh\n")
    assert f"exec {sys.executable} -I -S -c" in text or f"exec '{sys.executable}' -I -S -c" in text
    assert json.dumps(PACKAGE_PARENT) in text
    assert not list(wrapper.parent.glob(".*.tmp"))
    assert subprocess.run(["sh", "-n", str(wrapper)]).returncode == 0


def test_wrapper_without_marker_starts_no_python(tmp_path: Path) -> None:
    path = tmp_path / "hook"  # write_wrapper refuses a missing python: write the text itself
    path.write_text(prolog.wrapper_script(python="/nonexistent/python"))
    path.chmod(0o755)
    env = {"PATH": os.environ["PATH"], **fixture_env()}
    done = run_wrapper(path, env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "unset SLURM_SCRIPT_CONTEXT\n", "")
    # with the marker it would have to start Python: that one fails (proving the other did not)
    done = run_wrapper(path, dict(env, **{TF_DIST_VARIABLE: "worker:*"}))
    assert done.returncode != 0


@pytest.mark.parametrize("shell", [None, "dash", "bash", "busybox"])
def test_wrapper_output_equals_the_hook(wrapper: Path, shell: str | None) -> None:
    if shell and shutil.which(shell) is None:
        pytest.skip(f"{shell} not installed")
    argv_shell = f"{shell} sh" if shell == "busybox" else shell
    env = fixture_env(rank=3, **{TF_DIST_VARIABLE: "ps:1,worker:*"})
    cmd = [*(argv_shell.split() if argv_shell else []), str(wrapper)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "unset SLURM_SCRIPT_CONTEXT\n" + "".join(
        line + "\n" for line in prolog.prolog_lines(env)
    )


def test_wrapper_ignores_the_jobs_python_settings(wrapper: Path, tmp_path: Path) -> None:
    """-I -S: a job's PYTHONPATH, PYTHONHOME-free startup and a shadowing tfslurm package
    cannot change what the hook runs."""
    fake = tmp_path / "shadow" / "tfslurm"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise SystemExit('shadow tfslurm imported')\n")
    env = fixture_env(**{TF_DIST_VARIABLE: "worker:*", "PYTHONPATH": str(fake.parent),
                         "PYTHONSTARTUP": str(fake / "__init__.py"), "PYTHONWARNINGS": "error"})  # fmt: skip
    done = run_wrapper(wrapper, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "export TF_CONFIG=" in done.stdout


def test_wrapper_reports_errors_as_print_lines(wrapper: Path) -> None:
    env = fixture_env(**{TF_DIST_VARIABLE: "ps:9,worker:*"})
    done = run_wrapper(wrapper, env)
    assert done.returncode == 2
    _, printed = apply_taskprolog_output({}, done.stdout)
    assert printed and "asks for 9 tasks but the step has 4" in printed[0]


def test_write_wrapper_errors(tmp_path: Path) -> None:
    with pytest.raises(prolog.PrologError, match="cannot write the TaskProlog wrapper"):
        prolog.write_wrapper(tmp_path / "missing-dir" / "hook")
    with pytest.raises(prolog.PrologError, match="not absolute"):
        prolog.wrapper_script(python="/usr/bin/python3", package_parent="relative/dir")
    with pytest.raises(prolog.PrologError, match="newline"):
        prolog.wrapper_script(python="/usr/bin/py\nthon3")
    # a wrapper naming a python that is not there would fail every --tf-dist task (127)
    for python in ("/nonexistent/python", str(tmp_path)):
        with pytest.raises(prolog.PrologError, match="is not an executable file"):
            prolog.write_wrapper(tmp_path / "hook", python=python)
    assert not (tmp_path / "hook").exists()
    done = subprocess.run(
        [sys.executable, "-m", "tfslurm", "prolog", "--write-wrapper", str(tmp_path / "hook"), "--python", "/nonexistent"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.splitlines()) == 1
    assert "'/nonexistent' is not an executable file" in done.stderr
    assert isinstance(prolog.PrologError("x"), TfslurmError)


def test_cli_writes_the_wrapper(tmp_path: Path) -> None:
    target = tmp_path / "hook.sh"
    done = subprocess.run(
        [sys.executable, "-m", "tfslurm", "prolog", "--write-wrapper", str(target)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"TaskProlog={target}" in done.stdout and f"--task-prolog={target}" in done.stdout
    assert f"spank_tfslurm.so prolog={target}" in done.stdout
    assert target.read_text() == prolog.wrapper_script()
    shown = subprocess.run(
        [sys.executable, "-m", "tfslurm", "prolog", "--print-wrapper", "--python", "/opt/py/bin/python"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert shown.returncode == 0 and "exec /opt/py/bin/python -I -S" in shown.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "tfslurm", "prolog", "--write-wrapper", str(tmp_path / "no" / "x")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("tfslurm prolog: error: cannot write")
    assert "Traceback" not in bad.stderr


def test_the_wrapper_is_named_by_absolute_paths(tmp_path: Path) -> None:
    """Slurm refuses a relative TaskProlog= or plugstack.conf path, and a wrapper runs with
    the task's working directory: every path it is named by, and names, is absolute."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "work").mkdir()
    python = tmp_path / "bin" / "python-site"  # a command name nothing else on PATH has
    python.symlink_to(sys.executable)  # kept as a link: a venv's python is one
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tfslurm", "prolog", *args],
            cwd=tmp_path / "work", env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    done = cli("--write-wrapper", "hook.sh")
    assert done.returncode == 0, done.stderr
    target = tmp_path / "work" / "hook.sh"
    assert f"spank_tfslurm.so prolog={target}\n" in done.stdout
    assert f"TaskProlog={target}\n" in done.stdout and f"--task-prolog={target} " in done.stdout
    assert target.read_text() == prolog.wrapper_script()
    # a bare name is looked up on PATH, a name with a slash is taken from the working directory
    for name in ("python-site", "../bin/python-site"):
        done = cli("--print-wrapper", "--python", name)
        assert done.returncode == 0, done.stderr
        assert done.stdout == prolog.wrapper_script(str(python)), name
    done = cli("--write-wrapper", "hook2.sh", "--python", "python-site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "work" / "hook2.sh").read_text() == prolog.wrapper_script(str(python))
    for args in (("--print-wrapper",), ("--write-wrapper", "hook3.sh")):
        done = cli(*args, "--python", "python-not-installed-anywhere")
        assert done.returncode == 2 and done.stdout == "", done.stdout
        assert done.stderr == (
            "tfslurm prolog: error: python 'python-not-installed-anywhere' is not found on PATH; "
            "give --python the path of the interpreter tfslurm is installed for\n"
        )
    assert not (tmp_path / "work" / "hook3.sh").exists()


def test_find_python_and_the_wrapper_refuse_what_is_no_interpreter_path(tmp_path: Path) -> None:
    exe = tmp_path / "py"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    (tmp_path / "not-executable").write_text("")
    assert prolog.find_python("py", str(tmp_path)) == str(exe)
    assert prolog.find_python("rel/py", "") == os.path.join(os.getcwd(), "rel", "py")
    for name, search_path in (("not-executable", str(tmp_path)), ("py", ""), ("", str(tmp_path))):
        with pytest.raises(prolog.PrologError, match="is not found on PATH"):
            prolog.find_python(name, search_path)
    with pytest.raises(prolog.PrologError, match="'python3' is not a path"):
        prolog.wrapper_script(python="python3")


def test_cli_hook_prints_export_lines() -> None:
    env = fixture_env(rank=1, **{TF_DIST_VARIABLE: "worker:*", "PATH": os.environ.get("PATH", "")})
    done = subprocess.run(
        [sys.executable, "-m", "tfslurm", "prolog"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == prolog.prolog_lines(env)
    done = subprocess.run([sys.executable, "-m", "tfslurm", "prolog", "--node"], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == prolog.node_output(env) and done.stdout.startswith(prolog.NODE_HEADER + "\n")


def _tfslurm_modules() -> list[str]:
    root = Path(PACKAGE_PARENT)
    names = (".".join(path.relative_to(root).with_suffix("").parts) for path in root.glob("tfslurm/**/*.py"))
    return sorted(name.removesuffix(".__init__") for name in names)


@pytest.mark.parametrize("argv", [[], ["--node"]], ids=["task", "node"])
def test_hook_imports_only_its_own_modules(argv: list[str]) -> None:
    """The hook as the wrapper runs it (``-I -S``, the task's environment) imports no
    TensorFlow, none of these standard modules and of tfslurm only HOOK_MODULES."""
    env = fixture_env(**{TF_DIST_VARIABLE: "worker:*"})  # GPUs: the GPU code runs too
    assert any(line.startswith("export TF_CONFIG=") for line in prolog.prolog_lines(env))
    code = (
        f"import os, sys; os.environ.clear(); os.environ.update({env!r})\n"
        f"sys.path.insert(0, {PACKAGE_PARENT!r}); from tfslurm.prolog import main\n"
        f"assert main(argv={argv!r}) == 0\n"
    )
    others = [name for name in _tfslurm_modules() if name not in HOOK_MODULES]
    assert "tfslurm.descriptor" in others and "tfslurm.frameworks" in others
    stdlib = ("typing", "json", "subprocess", "socket", "signal", "pathlib", "shlex", "argparse", "zlib")
    stdlib += ("dataclasses", "inspect", "ast", "dis", "tokenize", "math")
    stdlib += ("re", "enum", "functools", "collections")  # re alone imports the other three
    assert added_by(code, (*stdlib, "tensorflow", *others)) == []


def test_hook_modules_do_not_import_enum() -> None:
    """Named cases on the hook path are str values typed as Literals (tfslurm.value), not
    enums: importing enum and building the classes costs more than the hook's own work."""
    sources = {name: Path(importlib.import_module(name).__file__ or "").read_text() for name in HOOK_MODULES}
    assert len(sources) == len(HOOK_MODULES)
    assert [
        name for name, text in sorted(sources.items()) if "import enum" in text or "from enum" in text
    ] == []


def test_hook_path_defines_values_and_no_dataclasses() -> None:
    classes = [
        value
        for name in HOOK_MODULES
        for value in vars(importlib.import_module(name)).values()
        if isinstance(value, type) and value.__module__ == name
    ]
    assert [c for c in classes if dataclasses.is_dataclass(c)] == []
    assert (
        tuple(
            sorted(f"{c.__module__}.{c.__name__}" for c in classes if issubclass(c, Value) and c is not Value)
        )
        == HOOK_VALUES
    )


# --- --node: every task of a node in one run (the plugin's prolog= mode) ----------------


def node_blocks(text: str) -> dict[int, tuple[int, dict[str, str], str]]:
    """Parse ``--node`` output as plugin/src/node.c does: the header line, then per task
    (status, input values, the task's own lines); ``end`` closes it."""
    lines = text.split("\n")
    assert lines[0] == prolog.NODE_HEADER and lines[-2:] == ["end", ""]
    blocks: dict[int, tuple[int, dict[str, str], str]] = {}
    current = None
    for line in lines[1:-2]:
        if line.startswith("task "):
            _, local, status = line.split(" ")
            current = int(local)
            assert current not in blocks
            blocks[current] = (int(status), {}, "")
        elif line.startswith("input "):
            name, _, value = line[6:].partition("=")
            blocks[current][1][name] = value
        else:
            status, inputs, own = blocks[current]
            blocks[current] = (status, inputs, own + line + "\n")
    return blocks


# Per-task variables the blocks do not predict: the pid (never read by the hook), and FOO,
# TF_DIST, TF_DIST_RANK, which the recording cluster's own TaskProlog and test plugin set
# per task (the plugin would see those differ and run the hook in the task; the hook
# reads only SLURM*, TFSLURM* and GPU variables, so the blocks hold for them anyway).
NOT_PREDICTED = {"SLURM_TASK_PID", "FOO", "TF_DIST", "TF_DIST_RANK"}


@pytest.mark.parametrize("case", STEP_CASES, ids=[c[0] for c in STEP_CASES])
def test_node_output_gives_each_task_exactly_its_own_lines(case) -> None:
    """For every node of every recorded step, --node run in the node's first task holds a
    block per local task; the block's input values make the first task's environment into
    that task's, and its lines and status are exactly what the hook prints in that task."""
    _, _, tasks = case
    spec = spec_for(len(tasks))
    per_node: dict[tuple[str, str], list[observed.Task]] = {}
    for task in tasks:
        per_node.setdefault((task.env["SLURMD_NODENAME"], task.env["SLURM_GTIDS"]), []).append(task)
    for (node, _), on_node in per_node.items():
        on_node.sort(key=lambda t: int(t.env["SLURM_LOCALID"]))
        first = dict(on_node[0].env, **{TF_DIST_VARIABLE: spec})
        assert first["SLURM_LOCALID"] == "0"
        rc = io.StringIO()
        assert prolog.main(first, rc, ["--node"]) == 0
        blocks = node_blocks(rc.getvalue())
        assert sorted(blocks) == list(range(len(on_node))), node
        for task in on_node:
            status, inputs, own = blocks[int(task.env["SLURM_LOCALID"])]
            actual = dict(task.env, **{TF_DIST_VARIABLE: spec})
            assert inputs == {
                "SLURM_PROCID": actual["SLURM_PROCID"],
                "SLURM_LOCALID": actual["SLURM_LOCALID"],
            }
            predicted = dict(first, **inputs)
            differ = {k for k in set(predicted) | set(actual) if predicted.get(k) != actual.get(k)}
            if differ - NOT_PREDICTED:
                # GPUs bound per task: the plugin sees the difference and runs the hook in the task
                assert differ - NOT_PREDICTED <= set(GPU_VARIABLES) | {"SLURM_STEP_GPUS"}, differ
                continue
            assert (status, own) == run_main(actual), (node, task.procid)


def test_node_output_does_not_depend_on_the_task_pid() -> None:
    """The pid is the one per-task variable the plugin does not compare: nothing reads it."""
    env = fixture_env(**{TF_DIST_VARIABLE: "chief:1,worker:*"})
    outputs = set()
    for pid in ("1", "987654", "not-a-pid", ""):
        out = io.StringIO()
        assert prolog.main(dict(env, SLURM_TASK_PID=pid), out, ["--node"]) == 0
        outputs.add(out.getvalue())
        outputs.add(run_main(dict(env, SLURM_TASK_PID=pid)))
    assert len(outputs) == 2


@pytest.mark.parametrize("gtids", ["", "0,,1", "0,x", "-1", "0," * 5000 + "0", "\u0661"])
def test_node_mode_gives_up_silently_on_odd_task_ids(gtids: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 3 and no output: the plugin then runs the hook in every task, which reports."""
    out = io.StringIO()
    env = fixture_env(**{TF_DIST_VARIABLE: "worker:*", "SLURM_GTIDS": gtids})
    assert prolog.main(env, out, ["--node"]) == 3
    assert out.getvalue() == "" and capsys.readouterr().err == ""


def test_hook_refuses_unknown_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    assert prolog.main(fixture_env(), out, ["--nodes"]) == 2
    assert out.getvalue() == "" and "--nodes" in capsys.readouterr().err


def test_node_mode_reports_a_bad_spec_in_every_block() -> None:
    env = fixture_env(**{TF_DIST_VARIABLE: "ps:1,worker:7"})
    out = io.StringIO()
    assert prolog.main(env, out, ["--node"]) == 0
    blocks = node_blocks(out.getvalue())
    assert len(blocks) == len(env["SLURM_GTIDS"].split(","))
    for status, _, own in blocks.values():
        assert status == 2 and own.startswith("print tfslurm prolog (TFSLURM_TF_DIST=ps:1,worker:7): error: ")


def test_wrapper_passes_node_mode_on(wrapper: Path) -> None:
    env = fixture_env(**{TF_DIST_VARIABLE: "chief:1,worker:*"})
    done = run_wrapper_args(wrapper, env, "--node")
    assert done.returncode == 0, done.stderr
    out = io.StringIO()
    prolog.main(env, out, ["--node"])
    assert done.stdout == f"unset SLURM_SCRIPT_CONTEXT\n{prolog.VERSION_LINE}{__version__}\n" + out.getvalue()


def run_wrapper_args(path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(path), *args], env=env, capture_output=True, text=True, timeout=120)
