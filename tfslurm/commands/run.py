"""``tfslurm run [options] -- PROGRAM [ARGS...]``: run a TF program as this task's role.

Under srun, every task runs ``tfslurm run -- python train.py``. By role: chief/workers
(MWMS) and the evaluator run the program; under ParameterServerStrategy ps and worker
tasks run a standard TF server instead. This module is the command line only: the options,
resolved once into a ``RunConfig``, and the exit status and one line of a run the restart
cap refuses; the task's life is ``tfslurm.runtime.life``'s, launching, signals and the
program's parent ``tfslurm.runtime.launch``'s.
"""

from __future__ import annotations

import argparse
import os

from tfslurm.errors import RestartCapReached
from tfslurm.runtime import exits
from tfslurm.runtime.container import given_program
from tfslurm.runtime.launch import run_task
from tfslurm.runtime.life import RunConfig, TaskLife, cap_refusal
from tfslurm.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter  # the epilog's rows as they are
    parser.epilog = exits.help_epilog(
        [
            exits.EXIT_USAGE,
            exits.EXIT_PEER_TIMEOUT,
            exits.EXIT_PS_FAILED,
            exits.EXIT_STOPPED,
            exits.EXIT_RESTART_CAP,
        ],
        "the program's own status (0: it finished; 128+N: killed by signal N)",
    )
    parser.add_argument(
        "--jobs",
        metavar="SPEC",
        default=None,
        help="jobs spec, e.g. chief:1,ps:1,worker:* (used only when neither "
        "TF_CONFIG nor TFSLURM_DESCRIPTOR is set; default TFSLURM_TF_DIST, "
        "else every task a worker)",
    )
    parser.add_argument(
        "--peer-timeout",
        metavar="SECONDS",
        type=float,
        default=None,
        help="give up with an error when a peer is not up after this long "
        "(default TFSLURM_PEER_TIMEOUT or 300)",
    )
    parser.add_argument(
        "--preempt-signal",
        metavar="SIG",
        default=None,
        help="signal that asks the program to checkpoint and stop (default TFSLURM_PREEMPT_SIGNAL or USR1)",
    )
    parser.add_argument(
        "--stop-signals",
        metavar="SIGS",
        default=None,
        help="comma list of signals that mean checkpoint and stop (default "
        "TFSLURM_STOP_SIGNALS or TERM; the preemption signal always counts): "
        "the program is told through the preemption signal and a run stopped "
        f"early exits {exits.EXIT_STOPPED}, never 0",
    )
    parser.add_argument(
        "--stop-grace",
        metavar="SECONDS",
        default=None,
        help="SIGKILL the program this long after a stop signal (default "
        "TFSLURM_STOP_GRACE, else never: Slurm's SIGKILL after GraceTime or "
        "KillWait ends it)",
    )
    parser.add_argument(
        "--max-restarts",
        metavar="N",
        default=None,
        help=f"refuse to start (exit {exits.EXIT_RESTART_CAP}, one line) once the job was restarted "
        "more than N times (SLURM_RESTART_COUNT; default TFSLURM_MAX_RESTARTS, "
        "else no cap)",
    )
    parser.add_argument(
        "--cap-check",
        action="store_true",
        help=f"only check --max-restarts and exit 0 (go on) or {exits.EXIT_RESTART_CAP} with one "
        "line (the templates run this in the batch script, before srun)",
    )
    parser.add_argument(
        "--requeue-on-ps-failure",
        action="store_true",
        help=f"when a parameter server fails, the chief requeues its job (as 'tfslurm requeue' does) before exiting {exits.EXIT_PS_FAILED}",
    )
    parser.add_argument(
        "--show-plan",
        action="store_true",
        help="rank 0 prints the plan table (rank, job, host:port, GPUs) first",
    )
    parser.add_argument(
        "program",
        nargs=argparse.REMAINDER,
        help="the program and its arguments, after --; in a container: ch-run IMAGE -- python train.py "
        "or podman run IMAGE python train.py (as with TFSLURM_CONTAINER)",
    )


def run(args: argparse.Namespace) -> int:
    program = list(args.program)
    if program and program[0] == "--":
        program = program[1:]
    settings = Settings.from_environ()  # tfslurm's settings, read once for this process
    given = given_program(program)  # a container command typed before the program
    try:
        config = RunConfig.for_command(
            settings,
            os.environ,
            jobs=args.jobs,
            peer_timeout=args.peer_timeout,
            preempt_signal=args.preempt_signal,
            stop_signals_text=args.stop_signals,
            stop_grace=args.stop_grace,
            max_restarts=args.max_restarts,
            requeue_on_ps_failure=args.requeue_on_ps_failure,
            container=given.container,
        )
        life = TaskLife(config, settings, os.environ)
        return run_task(life, given.program, cap_check=args.cap_check, show_plan=args.show_plan)
    except RestartCapReached as reached:
        return cap_refusal(reached)
