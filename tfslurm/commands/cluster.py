"""``tfslurm cluster up|down|status``: a throwaway local Slurm cluster for people.

``up`` leaves the daemons running after the command exits; ``down`` stops them again (only
the PIDs recorded in the state dir). Both are idempotent. Needs root and Debian's slurm-wlm.
``status`` exits 0 when the cluster is healthy, 1 when not (or its record cannot be read),
2 when ``--state`` records no cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tfslurm.errors import ClusterConfigError, ClusterError
from tfslurm.localcluster import ClusterConfig, LocalCluster
from tfslurm.localcluster.slurmconf import StateFiles

DEFAULT_STATE = "/tmp/tfslurm-localcluster"

# ClusterConfig's errors name its fields; `cluster up` says the option the value came from.
_OPTIONS = {
    "num_nodes": "--nodes", "gpus": "--gpus", "cpus": "--cpus", "node_prefix": "--prefix",
    "node_digits": "--digits", "task_prolog": "--task-prolog", "plugstack_lines": "--plugstack-line",
    "extra_conf_lines": "--conf-line", "resv_ports": "--resv-ports", "preempt_grace": "--preempt-grace",
    "ctld_port": "--ctld-port", "subnet": "--subnet", "timeout": "--timeout", "state_dir": "--state",
}  # fmt: skip


def _named_by_option(error: ClusterConfigError) -> str:
    """``gpus=-1: expected ...`` as ``--gpus -1: expected ...``."""
    if error.field not in _OPTIONS:
        return str(error)
    return error.named(_OPTIONS[error.field], " ")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    up = sub.add_parser("up", help="start a cluster (restarts one already recorded in --state)")
    _state_arg(up)
    up.add_argument("--nodes", type=int, default=4, help="number of nodes (default 4)")
    up.add_argument("--gpus", type=int, default=4, help="fake GPUs per node, 0 = none (default 4)")
    up.add_argument("--cpus", type=int, default=4, help="CPUs per node (default 4)")
    up.add_argument("--prefix", default="node", help="node name prefix (default node)")
    up.add_argument("--digits", type=int, default=0, help="zero-pad node numbers to this width (3: node001)")
    up.add_argument("--task-prolog", metavar="PATH", help="TaskProlog executable (absolute path)")
    up.add_argument(
        "--plugstack-line", metavar="LINE", action="append", default=[],
        help="a plugstack.conf line, e.g. 'required /abs/plugin.so arg' (repeatable)",
    )  # fmt: skip
    up.add_argument(
        "--conf-line", metavar="LINE", action="append", default=[], help="extra slurm.conf line (repeatable)"
    )
    up.add_argument(
        "--resv-ports", default="20000-20100", help="MpiParams=ports= range (default 20000-20100)"
    )
    up.add_argument(
        "--preempt-grace",
        type=int,
        metavar="SECONDS",
        default=None,
        help="configure preemption: partitions low (PreemptMode=REQUEUE), low-cancel (CANCEL) "
        "with this GraceTime, and high (PriorityTier=10) that preempts them",
    )
    up.add_argument("--ctld-port", type=int, help="slurmctld port (default: a free one)")
    up.add_argument("--subnet", help="first three octets inside 10.213.0.0/16 (default: a free one)")
    up.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait for the daemons (default 30)"
    )
    down = sub.add_parser("down", help="stop the cluster recorded in --state (idempotent)")
    _state_arg(down)
    down.add_argument("--purge", action="store_true", help="also delete the state dir (logs included)")
    status = sub.add_parser("status", help="show daemons and node states")
    _state_arg(status)
    status.add_argument("--json", action="store_true", help="print JSON")


def _state_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state", default=DEFAULT_STATE, metavar="DIR", help=f"state dir (default {DEFAULT_STATE})"
    )


def run(args: argparse.Namespace) -> int:
    state = os.path.abspath(args.state)
    try:
        if args.action == "up":
            try:
                config = ClusterConfig(
                    num_nodes=args.nodes, node_prefix=args.prefix, node_digits=args.digits, cpus=args.cpus,
                    gpus=args.gpus, task_prolog=args.task_prolog, plugstack_lines=args.plugstack_line,
                    extra_conf_lines=args.conf_line, resv_ports=args.resv_ports, state_dir=state,
                    ctld_port=args.ctld_port, subnet=args.subnet, timeout=args.timeout,
                    preempt_grace=args.preempt_grace,
                )  # fmt: skip
            except ClusterConfigError as exc:
                print(f"tfslurm cluster up: error: {_named_by_option(exc)}", file=sys.stderr)
                return 2
            cluster = LocalCluster(config).start()
            cluster.detach()
            t = cluster.timings
            print(
                f"cluster up in {t.get('start', 0):.2f}s: nodes {','.join(cluster.nodes)}, "
                f"subnet {cluster.subnet}.0/24, slurmctld port {cluster.ctld_port}",
                file=sys.stderr,
            )
            print(
                f"use it:  export SLURM_CONF={cluster.slurm_conf}    (or: source {state}/env.sh)",
                file=sys.stderr,
            )
            print(
                f"inside a node:  nsenter --net={state}/ns/NODE.net --uts={state}/ns/NODE.uts "
                f"--mount={state}/ns/NODE.mnt CMD",
                file=sys.stderr,
            )
            print(f"stop:    tfslurm cluster down --state {state}", file=sys.stderr)
            print(f"export SLURM_CONF={cluster.slurm_conf}")
            return 0
        if args.action == "down":
            if not os.path.exists(StateFiles(state).record):
                print(f"no cluster recorded in {state}; nothing to do", file=sys.stderr)
                return 0
            cluster = LocalCluster.attach(state)  # an unreadable record is an error, not "nothing"
            cluster.stop(purge=args.purge)
            print(f"cluster in {state} stopped in {cluster.timings.get('stop', 0):.2f}s", file=sys.stderr)
            return 0
        if not os.path.isfile(StateFiles(state).record):  # a wrong --state: a usage error
            print(
                f"tfslurm cluster status: error: --state {state}: no local cluster recorded there; "
                "give the --state it was started with, or start one (tfslurm cluster up)",
                file=sys.stderr,
            )
            return 2
        cluster = LocalCluster.attach(state)
        info = cluster.status()
        if args.json:
            print(json.dumps(info, indent=1))
        else:
            print(f"state dir  {info['state_dir']}  ({'healthy' if info['healthy'] else 'NOT healthy'})")
            print(f"daemons    {len(info['daemons'])}/{info['expected_daemons']} running: "
                  + " ".join(f"{k}={v}" for k, v in info["daemons"].items()))  # fmt: skip
            print(f"network    {info['subnet']}.0/24, slurmctld port {info['ctld_port']}")
            for node in info["nodes"]:
                print(f"  {node:<16} {info['node_states'].get(node, '-')}")
        return 0 if info["healthy"] else 1
    except ClusterError as exc:
        print(f"tfslurm cluster {args.action}: error: {exc}", file=sys.stderr)
        return 1
