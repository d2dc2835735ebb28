"""The snapshot of tfslurm's settings (``tfslurm.settings``) and of the task's GPU variables
and narrow Slurm reads (``tfslurm.step``): each setting parsed, each bad value a one-line
error of the class its reader raises, naming the variable."""

from __future__ import annotations

import signal

import pytest

from tfslurm.errors import GpuError, PortError, PreemptionError, RoleError, StopError, TfslurmError
from tfslurm.runtime.life import RunConfig
from tfslurm.settings import Settings
from tfslurm.step import (
    FIELD_VARIABLES,
    GpuVariables,
    Step,
    is_rank_zero,
    requeue_job_name,
    restart_count_from_environ,
)

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

EVERY = {
    "TFSLURM_TF_DIST": "ps:1,worker:*",
    "TFSLURM_DESCRIPTOR": "v1:abc",
    "TFSLURM_HOST_TEMPLATE": "{node}-ib",
    "TFSLURM_PORT_BASE": " 30000 ",
    "TFSLURM_FOR": "tf,jax",
    "TFSLURM_IFACE": " ib0 ",
    "TFSLURM_UNEVEN_GPUS": "Error",
    "TFSLURM_PEER_TIMEOUT": "2.5",
    "TFSLURM_PREEMPT_SIGNAL": "USR2",
    "TFSLURM_STOP_SIGNALS": "TERM,HUP",
    "TFSLURM_MAX_RESTARTS": "3",
    "TFSLURM_STOP_GRACE": "1.5",
    "TFSLURM_REQUEUE_ON_PS_FAILURE": "yes",
    "TFSLURM_WATCHED": "1",
}


def test_every_setting_is_read_and_parsed() -> None:
    settings = Settings.from_environ(EVERY | {"PATH": "/bin"})
    assert settings.tf_dist == "ps:1,worker:*" and settings.asked_for_cluster
    assert settings.descriptor == "v1:abc"
    assert settings.host_template == "{node}-ib"
    assert settings.port_base() == 30000
    assert settings.frameworks == "tf,jax"
    assert settings.iface == "ib0"
    assert settings.uneven_gpus() == "error"
    assert settings.peer_timeout() == 2.5
    assert settings.preempt_signal() == signal.SIGUSR2
    assert settings.stop_signals(signal.SIGUSR2) == (signal.SIGUSR2, signal.SIGTERM, signal.SIGHUP)
    assert settings.max_restarts() == 3
    assert settings.stop_grace() == 1.5
    assert settings.requeue_on_ps_failure and settings.watched


def test_unset_and_empty_settings_are_the_defaults() -> None:
    for env in ({}, dict.fromkeys(EVERY, "")):
        settings = Settings.from_environ(env)
        assert settings.tf_dist is None and not settings.asked_for_cluster
        assert settings.host_template is None and settings.iface is None
        assert settings.port_base() is None
        assert settings.uneven_gpus() == "warn"
        assert settings.peer_timeout() == 300.0
        assert settings.preempt_signal() == signal.SIGUSR1
        assert settings.stop_signals(signal.SIGUSR1) == (signal.SIGUSR1, signal.SIGTERM)
        assert settings.max_restarts() is None and settings.stop_grace() is None
        assert not settings.requeue_on_ps_failure and not settings.watched
    assert Settings.from_environ({}) == Settings()
    assert Settings.from_environ({"TFSLURM_TF_DIST": "  "}).asked_for_cluster is False
    assert Settings.from_environ({"TFSLURM_REQUEUE_ON_PS_FAILURE": "0"}).requeue_on_ps_failure is False


@pytest.mark.parametrize(
    "variable, value, error, message",
    [
        ("TFSLURM_PORT_BASE", "80a", PortError, "TFSLURM_PORT_BASE='80a' is not a port (1..65535)"),
        ("TFSLURM_PORT_BASE", "70000", PortError, "TFSLURM_PORT_BASE='70000' is not a port (1..65535)"),
        ("TFSLURM_UNEVEN_GPUS", "loud", GpuError, "TFSLURM_UNEVEN_GPUS='loud' must be 'warn' or 'error'"),
        ("TFSLURM_PEER_TIMEOUT", "soon", RoleError, "TFSLURM_PEER_TIMEOUT='soon' is not a positive number"),
        ("TFSLURM_PEER_TIMEOUT", "0", RoleError, "TFSLURM_PEER_TIMEOUT='0' is not a positive number"),
        ("TFSLURM_PREEMPT_SIGNAL", "NOPE", PreemptionError, "preemption signal 'NOPE' is not a signal name"),
        ("TFSLURM_PREEMPT_SIGNAL", "KILL", PreemptionError, "preemption signal 'KILL' cannot be caught"),
        ("TFSLURM_STOP_SIGNALS", "TERM,INT", StopError, "stop signal INT: SIGINT stays Ctrl-C"),
        ("TFSLURM_STOP_SIGNALS", "BOGUS", StopError, "stop signal 'BOGUS' is not a signal name"),
        ("TFSLURM_MAX_RESTARTS", "-1", StopError, "max restarts '-1' is not an integer >= 0 "),
        ("TFSLURM_STOP_GRACE", "nan", StopError, "stop grace 'nan' is not a number of seconds >= 0"),
    ],
)
def test_a_bad_setting_is_a_one_line_error_naming_it(variable, value, error, message) -> None:
    settings = Settings.from_environ({variable: value})  # reading never fails ...
    ask = {
        "TFSLURM_PORT_BASE": settings.port_base,
        "TFSLURM_UNEVEN_GPUS": settings.uneven_gpus,
        "TFSLURM_PEER_TIMEOUT": settings.peer_timeout,
        "TFSLURM_PREEMPT_SIGNAL": settings.preempt_signal,
        "TFSLURM_STOP_SIGNALS": lambda: settings.stop_signals(signal.SIGUSR1),
        "TFSLURM_MAX_RESTARTS": settings.max_restarts,
        "TFSLURM_STOP_GRACE": settings.stop_grace,
    }[variable]
    with pytest.raises(error) as caught:  # ... asking for the setting does
        ask()
    assert isinstance(caught.value, TfslurmError) and isinstance(caught.value, ValueError)
    text = str(caught.value)
    assert text.startswith(message) and "\n" not in text  # the messages tfslurm always gave


def test_the_runtime_takes_the_snapshot() -> None:
    settings = Settings.from_environ(EVERY)
    given = RunConfig.for_command(settings, {})
    assert (given.max_restarts, given.stop_grace, given.peer_timeout) == (3, 1.5, 2.5)
    assert given.preempt == signal.SIGUSR2
    options = RunConfig.for_command(settings, {}, max_restarts="5", peer_timeout=4, preempt_signal="TERM")
    assert (options.max_restarts, options.peer_timeout, options.preempt) == (5, 4.0, signal.SIGTERM)
    assert RunConfig.for_command(Settings.from_environ({"TFSLURM_MAX_RESTARTS": "7"}), {}).max_restarts == 7
    assert RunConfig.for_command(Settings.from_environ({}), {}).stop_grace is None


def test_step_carries_the_settings_and_gpu_variables() -> None:
    env = {
        "SLURM_JOB_ID": "7",
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "1",
        "SLURM_GPUS_ON_NODE": "2",
        "SLURM_STEP_GPUS": "4,5",
        "SLURMD_TRES_BIND": "gres/gpu:per_task:1",
        "SLURM_TRES_PER_TASK": "gres/gpu=1",
        "SLURM_GPUS": " 4 ",
        "ROCR_VISIBLE_DEVICES": "0,1",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "TFSLURM_ASSIGNED_GPUS": "7.0.1:CUDA_VISIBLE_DEVICES=1",
        "TFSLURM_IFACE": "ib0",
        "HOME": "/root",
    }
    step = Step.from_environ(env)
    assert step.settings == Settings.from_environ(env) and step.settings.iface == "ib0"
    gpus = step.gpus
    assert gpus == GpuVariables.from_environ(env)
    assert gpus.visible == (("CUDA_VISIBLE_DEVICES", "0,1"), ("ROCR_VISIBLE_DEVICES", "0,1"))
    assert gpus.value("ROCR_VISIBLE_DEVICES") == "0,1" and gpus.value("ZE_AFFINITY_MASK") is None
    assert (gpus.gpus_on_node, gpus.step_gpus, gpus.job_gpus) == ("2", "4,5", None)
    assert gpus.tres_bind == "gres/gpu:per_task:1" and gpus.tres_per_task == "gres/gpu=1"
    assert gpus.gpus_total == "4" and gpus.slurm_manages
    assert gpus.assigned == "7.0.1:CUDA_VISIBLE_DEVICES=1" and gpus.task_key == "7.0.1"
    # given settings are used as they are, not read again
    given = Settings(tf_dist="worker:*")
    assert Step.from_environ(env, settings=given).settings is given
    # a Step made by hand has empty ones; neither takes part in equality
    assert Step(step.context).gpus == GpuVariables() and Step(step.context).settings == Settings()
    fields = {name: getattr(step, name) for name in FIELD_VARIABLES}
    assert Step(step.context, **fields, settings=given) == step


def test_gpu_variables_never_fail_and_have_no_task_off_step() -> None:
    gpus = GpuVariables.from_environ({"SLURM_GPUS_ON_NODE": "two", "CUDA_VISIBLE_DEVICES": "junk!"})
    assert gpus.gpus_on_node == "two" and gpus.task_key is None and gpus.slurm_manages
    batch = {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "-5", "SLURM_PROCID": "0"}
    assert GpuVariables.from_environ(batch).task_key is None  # 26.05's batch script
    old_names = {"SLURM_JOBID": "7", "SLURM_STEPID": "2", "SLURM_PROCID": "3"}
    assert GpuVariables.from_environ(old_names).task_key == "7.2.3"
    assert not GpuVariables.from_environ({"CUDA_VISIBLE_DEVICES": "0"}).slurm_manages


def test_the_narrow_reads() -> None:
    assert restart_count_from_environ({"SLURM_RESTART_COUNT": "4", "SLURM_PROCID": "x"}) == 4
    assert restart_count_from_environ({}) == 0
    with pytest.raises(TfslurmError, match=r"^SLURM_RESTART_COUNT='x' is not a non-negative integer$"):
        restart_count_from_environ({"SLURM_RESTART_COUNT": "x"})
    assert requeue_job_name({"SLURM_JOB_ID": "12"}) == "12"
    array = {"SLURM_JOB_ID": "13", "SLURM_ARRAY_JOB_ID": "12", "SLURM_ARRAY_TASK_ID": "1"}
    assert requeue_job_name(array) == "12_1"
    assert requeue_job_name({"SLURM_JOB_ID": "junk"}) == "junk"  # never fails
    assert requeue_job_name({}) == ""
    assert is_rank_zero({}) and is_rank_zero({"SLURM_PROCID": "0"})
    assert not is_rank_zero({"SLURM_PROCID": "3"}) and not is_rank_zero({"SLURM_PROCID": "x"})
