"""Hostile task environments found by fuzzing (tests/fuzz_env.py): each gives a one-line
error and exit status 2, or the right answer, never a traceback or a wrong map."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tfslurm.errors import TfslurmError

# The smallest environment of a task of a one-node, one-task step.
S = {
    "SLURM_JOB_ID": "1",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "0",
    "SLURM_STEP_NODELIST": "n1",
    "SLURM_STEP_TASKS_PER_NODE": "1",
}


def tfslurm(
    args: list[str], env: dict[str, str], encoding: str = "utf-8"
) -> subprocess.CompletedProcess[bytes]:
    """Run the CLI in exactly ``env`` (plus what Python needs to find tfslurm)."""
    base = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PYTHONIOENCODING": f"{encoding}:strict"}
    environ = {**base, **env}
    return subprocess.run(
        [sys.executable, "-m", "tfslurm", *args],
        env={k: v for k, v in environ.items() if v},
        capture_output=True,
        timeout=60,
    )


def one_line_error(done: subprocess.CompletedProcess[bytes], *needles: str) -> str:
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, (done.returncode, err)
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def test_t1_non_ascii_digits_in_a_gpu_count_are_refused() -> None:
    done = tfslurm(["env"], {**S, "SLURM_GPUS_ON_NODE": "²"})
    one_line_error(done, "SLURM_GPUS_ON_NODE", "²")


@pytest.mark.parametrize(
    "gpu_variables",
    [
        # found by tests/fuzz_env.py (300k run): a per-task binding whose node count is '¹'
        {"SLURMD_TRES_BIND": "gpu:per_task:1", "SLURM_GPUS_ON_NODE": "¹", "SLURM_STEP_GPUS": "0,1"},
        {"SLURMD_TRES_BIND": "gpu:per_task:²", "SLURM_STEP_GPUS": "0,1"},
        {"SLURM_GPUS_PER_TASK": "٣", "SLURM_STEP_GPUS": "0,1"},
        {"SLURM_TRES_PER_TASK": "gres/gpu:²", "SLURM_STEP_GPUS": "0,1"},
        {"SLURM_GPUS": "²", "SLURM_STEP_GPUS": "0,1"},
    ],
)
def test_t1_non_ascii_digits_in_gpu_variables_never_reach_int(gpu_variables: dict[str, str]) -> None:
    from tfslurm.plan import PlanOptions, plan_for
    from tfslurm.step import Step

    env = {
        **S,
        "SLURM_STEP_NODELIST": "n[1-2]",
        "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
        "SLURM_STEP_NUM_TASKS": "4",
        "SLURMD_NODENAME": "n1",
        "SLURM_GTIDS": "0,1",
        "SLURM_LOCALID": "0",
        "CUDA_VISIBLE_DEVICES": "0,1",
        **gpu_variables,
    }
    try:
        plan_for(Step.from_environ(env), options=PlanOptions(assign=True))
    except TfslurmError as exc:  # a one-line refusal is fine; int()'s ValueError is not
        assert "\n" not in str(exc) and "invalid literal" not in str(exc)


@pytest.mark.parametrize("variable", ["SLURM_PROCID", "SLURM_JOB_ID", "SLURM_NODEID", "SLURM_LOCALID"])
@pytest.mark.parametrize("value", ["²", "٣", " 1 2", "+1", "1e3"])
def test_t1_non_ascii_or_signed_step_numbers_are_refused(variable: str, value: str) -> None:
    one_line_error(tfslurm(["tf-config"], {**S, variable: value}), variable)


@pytest.mark.parametrize("command", [["plan"], ["layout"]])
@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_t2_non_utf8_node_name_passes_through_as_its_bytes(command: list[str], encoding: str) -> None:
    name = os.fsdecode(b"n\xff1")
    done = tfslurm(command, {**S, "SLURM_STEP_NODELIST": name, "SLURMD_NODENAME": name}, encoding)
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    assert b"n\xff1" in done.stdout


@pytest.mark.parametrize("command", [["tf-config"], ["env"]])
@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_t2_tf_config_cannot_carry_a_name_that_is_not_utf8(command: list[str], encoding: str) -> None:
    # JSON is Unicode text: escaping the byte as "\udcff" would hand TF a name no resolver
    # knows, so the export is refused in one line naming the host and the fix.
    name = os.fsdecode(b"n\xff1")
    done = tfslurm(command, {**S, "SLURM_STEP_NODELIST": name, "SLURMD_NODENAME": name}, encoding)
    one_line_error(done, "is not UTF-8 text", "TFSLURM_HOST_TEMPLATE")


@pytest.mark.tf
def test_t3_resolver_refuses_a_host_tf_cannot_carry_in_one_line() -> None:
    pytest.importorskip("tensorflow")
    from tfslurm import SlurmClusterResolver

    name = os.fsdecode(b"n\xff1")
    resolver = SlurmClusterResolver(env={**S, "SLURM_STEP_NODELIST": name, "SLURMD_NODENAME": name})
    with pytest.raises(TfslurmError, match=r"is not UTF-8 text.*TFSLURM_HOST_TEMPLATE") as caught:
        resolver.cluster_spec()
    assert "\n" not in str(caught.value)
    assert resolver.plan.cluster.addresses[0].startswith(name)  # the plan itself keeps the name


def test_t8_a_node_with_no_task_is_refused_not_divided_by() -> None:
    from tfslurm.resolver import __getattr__ as resolver_attr

    env = {**S, "SLURM_STEP_TASKS_PER_NODE": "0", "CUDA_VISIBLE_DEVICES": "0,1"}
    with pytest.raises(TfslurmError, match=r"SLURM_STEP_TASKS_PER_NODE='0' gives node n1 no task"):
        resolver_attr("SlurmClusterResolver")(env=env)
    one_line_error(tfslurm(["plan"], env), "SLURM_STEP_TASKS_PER_NODE")


S1 = {
    "SLURM_JOB_ID": "1",
    "SLURM_STEP_ID": "0",
    "SLURM_STEP_NODELIST": "n[1-2]",
    "SLURM_STEP_TASKS_PER_NODE": "2,2",
}


def test_s1_without_nodeid_the_node_name_still_checks_placement() -> None:
    # rank 1 is on n1 in a block layout: a task on n2 claiming it is refused, not mapped.
    env = {**S1, "SLURM_PROCID": "1", "SLURMD_NODENAME": "n2", "SLURM_GTIDS": "2,3"}
    one_line_error(tfslurm(["tf-config"], env), "SLURM_PROCID=1", "SLURM_GTIDS=2,3")
    env = {**S1, "SLURM_PROCID": "1", "SLURMD_NODENAME": "n2"}
    one_line_error(tfslurm(["tf-config"], env), "n2", "predicts 2,3")
    env = {**S1, "SLURM_PROCID": "0", "SLURMD_NODENAME": "n9"}
    one_line_error(tfslurm(["tf-config"], env), "SLURMD_NODENAME='n9'")


def test_s1_without_nodeid_or_node_name_gtids_check_placement() -> None:
    env = {**S1, "SLURM_PROCID": "1", "SLURM_GTIDS": "1,3"}
    one_line_error(tfslurm(["tf-config"], env), "SLURM_GTIDS=1,3")


def test_s1_a_consistent_task_without_nodeid_gets_its_own_rank() -> None:
    env = {**S1, "SLURM_PROCID": "3", "SLURMD_NODENAME": "n2", "SLURM_GTIDS": "2,3"}
    done = tfslurm(["tf-config"], env)
    assert done.returncode == 0, done.stderr
    assert b'"index":3' in done.stdout
    assert b'"n2:' in done.stdout


def _arbitrary(hostfile: str) -> dict[str, str]:
    return {**S1, "SLURM_PROCID": "0", "SLURM_DISTRIBUTION": "arbitrary", "SLURM_HOSTFILE": hostfile}


def test_a_hostfile_that_is_a_fifo_is_refused_not_waited_on(tmp_path) -> None:
    fifo = tmp_path / "hosts"
    os.mkfifo(fifo)  # nobody writes it: reading would block forever
    one_line_error(tfslurm(["tf-config"], _arbitrary(str(fifo))), "is not a regular file")
    one_line_error(tfslurm(["tf-config"], _arbitrary("/dev/zero")), "is not a regular file")


def test_a_hostfile_name_with_a_nul_byte_is_refused() -> None:
    from tfslurm.layout import layout_for
    from tfslurm.step import Step

    with pytest.raises(TfslurmError, match="holds a NUL byte"):
        layout_for(Step.from_environ(_arbitrary("/tmp/x\x00y")))


@pytest.mark.parametrize(
    ("value", "low", "high", "expected"),
    [
        (3, None, None, True),
        (True, None, None, False),  # a bool is an int in Python, never a count here
        (False, 0, 1, False),
        (3.0, None, None, False),
        ("3", None, None, False),
        (None, None, None, False),
        (0, 1, None, False),
        (1, 1, None, True),
        (65535, 1, 65535, True),
        (65536, 1, 65535, False),
        (-1, None, 0, True),
    ],
)
def test_is_int_in_is_the_one_integer_argument_check(
    value: object, low: int | None, high: int | None, expected: bool
) -> None:
    from tfslurm.numbers import is_int_in

    assert is_int_in(value, low, high) is expected
