"""``tfslurm supervise [options] -- srun [SRUN OPTIONS] tfslurm run ... -- PROGRAM``: run the
training step from the batch script and relaunch it inside the allocation when it fails.

The templates run it in place of a bare srun. Without options it is that srun, run again
after a failed step up to ``TFSLURM_STEP_RESTARTS`` times (default 0). With spares
(``TFSLURM_SPARE_NODES``) or ``TFSLURM_ON_NODE_LOSS=shrink`` (the job submitted with
``SBATCH_NO_KILL=set``) it places the step itself and replaces a node the controller says
the job lost (``tfslurm.runtime.nodeloss``), or that does not answer on the network
(``tfslurm.runtime.probe``). Exit status: srun's, or 85 when the job should
be requeued (the templates' requeue path).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from functools import partial
from typing import TYPE_CHECKING

from tfslurm.controller import controller
from tfslurm.errors import NodeLossError
from tfslurm.runtime import exits
from tfslurm.runtime.nodeloss import BatchJob, Recovery, RecoverySettings
from tfslurm.runtime.probe import Prober, read_conf, slurmd_port
from tfslurm.runtime.progress import ProgressBoard
from tfslurm.runtime.supervisor import Supervisor
from tfslurm.settings import Settings
from tfslurm.step import batch_host, slurm_conf_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from tfslurm.controller import Controller

#: Where Slurm's commands read slurm.conf when SLURM_CONF does not say (Debian's and the
#: default build's path).
DEFAULT_CONF = "/etc/slurm/slurm.conf"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter  # the epilog's rows as they are
    parser.epilog = exits.help_epilog(
        [exits.EXIT_USAGE, exits.EXIT_STOPPED],
        "srun's status, that of the tasks' tfslurm run (tfslurm run --help), after the last relaunch",
    )
    parser.add_argument(
        "--batch-per-worker",
        metavar="N",
        type=int,
        default=None,
        help="the program's batch per worker: the shrink line then says the global batch before and after",
    )
    parser.add_argument("srun", nargs=argparse.REMAINDER, help="-- srun [OPTIONS] PROGRAM...")


def _controller_view(ctl: Controller, job_id: str) -> Callable[[], tuple[tuple[str, ...], tuple[str, ...]]]:

    def ask() -> tuple[tuple[str, ...], tuple[str, ...]]:
        nodes = tuple(ctl.job(job_id).nodes)
        usable = tuple(info.name for info in ctl.nodes(nodes) if info.usable) if nodes else ()
        return nodes, usable

    return ask


def run(args: argparse.Namespace) -> int:
    command = list(args.srun)
    if command and command[0] == "--":
        command = command[1:]
    env = dict(os.environ)  # the one read of the environment: everything below is handed it
    settings = Settings.from_environ(env)
    job = BatchJob.from_environ(env)
    recovery = Recovery.parse(RecoverySettings.from_environ(env), job)
    if args.batch_per_worker is not None and args.batch_per_worker < 1:
        raise NodeLossError(f"--batch-per-worker {args.batch_per_worker}: expected a positive integer")
    if not command:
        raise NodeLossError(
            "no command: give it after --, e.g. tfslurm supervise -- srun tfslurm run -- python train.py"
        )
    if command and os.path.basename(command[0]) != "srun" and recovery.places_nodes:
        raise NodeLossError(
            f"{command[0]!r}: with spares or shrink the command must be srun (tfslurm supervise -- srun ...), "
            "whose nodes the supervisor chooses"
        )
    if (recovery.places_nodes or job.no_kill) and job.job_id is None:
        raise NodeLossError("SLURM_JOB_ID is not set: run tfslurm supervise in a batch script")
    ctl = controller(settings, env) if job.job_id is not None else None
    ask = _controller_view(ctl, str(job.job_id)) if ctl is not None else _nothing
    # a node that dies silently is looked for only where it can be left out and the step
    # relaunched without it: a job that keeps its allocation, with relaunches asked for
    recovers = job.no_kill and (recovery.places_nodes or recovery.restarts > 0)
    prober = Prober(slurmd_port(read_conf(slurm_conf_path(env) or DEFAULT_CONF))) if recovers else None
    drop = partial(ctl.shrink, str(job.job_id)) if ctl is not None and prober is not None else None
    # where the ranks send heartbeats: the batch host, by the name the nodes know it by
    board = ProgressBoard() if recovers else None
    host = batch_host(env) or socket.gethostname()
    preempt = settings.preempt_signal()
    supervisor = Supervisor(
        command, recovery, ask, env, job=job, batch_per_worker=args.batch_per_worker, prober=prober,
        drop=drop, board=board, host=host, checkpoint_signal=preempt,
    )  # fmt: skip
    for signum in {preempt, *settings.stop_signals(preempt), signal.SIGINT}:
        # srun is in the batch step with this process and gets Slurm's SIGTERM itself (a
        # second one would reach every task twice); this process only stops relaunching
        signal.signal(signum, supervisor.stop if signum == signal.SIGTERM else supervisor.forward)
    sys.stdout.flush()
    return supervisor.run()


def _nothing() -> tuple[tuple[str, ...], tuple[str, ...]]:
    return (), ()
