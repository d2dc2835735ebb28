"""``tfslurm demo``: train with TF across a throwaway local Slurm cluster (root).

Exit status: 0 when the training finished with identical weights on every worker, 1 when
it did not, 2 when the demo cannot run here (not root, Slurm or TensorFlow missing).
"""

from __future__ import annotations

import argparse

from tfslurm.demo import DemoOptions, run_demo
from tfslurm.errors import TfslurmError
from tfslurm.localcluster.config import ClusterConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=2, help="Slurm nodes = TF workers (default 2)")
    parser.add_argument("--steps", type=int, default=200, help="training steps (default 200)")
    parser.add_argument(
        "--gpus-per-node",
        type=int,
        default=2,
        help="fake GPUs per node, shown in the plan (default 2; 0 = none)",
    )
    parser.add_argument(
        "--timeout", type=float, default=180, help="give up on the job after this many seconds (default 180)"
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the job's log directory")
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help="the cluster's state directory, an absolute path (default: a new one under /tmp, "
        "removed afterwards; a given one is kept)",
    )
    parser.add_argument(
        "--ctld-port",
        metavar="PORT",
        type=int,
        help="slurmctld's port (default: a free one); slurmd ports follow it",
    )
    parser.add_argument(
        "--resv-ports",
        metavar="LO-HI",
        default="20000-20100",
        help="MpiParams=ports= of the cluster, the ports steps reserve "
        "(default 20000-20100; 'none': no MpiParams, ports are derived)",
    )


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.nodes <= 16:
        raise TfslurmError(f"--nodes {args.nodes}: choose 1 to 16")
    if not 1 <= args.steps <= 100_000:
        raise TfslurmError(f"--steps {args.steps}: choose 1 to 100000")
    if not 0 <= args.gpus_per_node <= 8:
        raise TfslurmError(f"--gpus-per-node {args.gpus_per_node}: choose 0 to 8")
    if not args.timeout > 0:  # NaN too: the job would be given up at once
        raise TfslurmError(f"--timeout {args.timeout}: choose a positive number of seconds")
    resv_ports = None if args.resv_ports == "none" else args.resv_ports
    # checked before anything starts: a bad value is one line naming the option
    try:
        ClusterConfig(
            num_nodes=args.nodes, state_dir=args.state_dir, ctld_port=args.ctld_port, resv_ports=resv_ports
        )
    except TfslurmError as exc:
        option = str(exc).split("=", 1)[0].replace("_", "-")
        raise TfslurmError(f"--{option} {str(exc).split('=', 1)[1]}") from None
    options = DemoOptions(
        nodes=args.nodes,
        steps=args.steps,
        gpus_per_node=args.gpus_per_node,
        timeout=args.timeout,
        keep_logs=args.keep_logs,
        state_dir=args.state_dir,
        ctld_port=args.ctld_port,
        resv_ports=resv_ports,
    )
    return run_demo(options)
