"""A node of a local test cluster fails and comes back, as a node-failure test needs.

The functions reach into the cluster's own records (its slurmd processes, the node
namespaces) that only this package touches."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import TYPE_CHECKING

from tfslurm.errors import ClusterError, ClusterTimeout
from tfslurm.localcluster import procs

if TYPE_CHECKING:
    from tfslurm.localcluster.cluster import LocalCluster


def kill_node(cluster: LocalCluster, node: str) -> list[int]:
    """What a node that loses its power looks like to Slurm: SIGKILL to ``node``'s slurmd
    and to every process in its network namespace (slurmstepds, tasks), nothing said to
    the controller, which notices after ``slurmd_timeout``. Returns the PIDs killed."""
    if not cluster._network:
        raise ClusterError("cluster not started")
    cluster.node_address(node)  # names an unknown node
    inode = os.stat(cluster._network.ns_file(node, "net")).st_ino
    daemons = [r.pid for r in cluster._records if r.name == "slurmd" and r.node == node]
    pids = daemons + [p for p in procs.pids_in_netns([inode]) if p not in daemons]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in daemons:
        child = cluster._children.get(pid)
        if child is not None:
            child.wait()
            cluster._reap(pid)
    cluster._records = [r for r in cluster._records if r.pid not in daemons]
    cluster._write_record()
    return pids


def silence_node(cluster: LocalCluster, node: str) -> list[int]:
    """What a node that loses its power looks like to its peers: its links go down (the
    bridge drops every packet to and from it, nothing answers, nothing refuses), then
    :func:`kill_node`. :func:`restore_node` brings it back. Returns the PIDs killed."""
    _set_links(cluster, node, "down")
    return kill_node(cluster, node)


def partition_node(cluster: LocalCluster, node: str) -> None:
    """A network partition: ``node``'s links go down with every process on it alive (they
    go on, cut off). :func:`heal_node` brings the links back, :func:`restore_node` too."""
    _set_links(cluster, node, "down")


def heal_node(cluster: LocalCluster, node: str) -> None:
    """The links of a :func:`partition_node` back up."""
    _set_links(cluster, node, "up")


def restore_node(cluster: LocalCluster, node: str, timeout: float = 30) -> None:
    """Bring a node back after :func:`silence_node` (or any loss): links up, then
    :func:`revive_node`."""
    _set_links(cluster, node, "up")
    revive_node(cluster, node, timeout)


def set_second_link(cluster: LocalCluster, node: str, up: bool) -> None:
    """``node``'s second network (``eth1``, its ``<node>-eth1`` names) down or up: Slurm
    still reaches the node on the first, and nothing reaches it on the second."""
    if not cluster._network:
        raise ClusterError("cluster not started")
    cluster.node_address(node)  # names an unknown node
    net = next(n for n in cluster._network.nodes if n.name == node)
    state = "up" if up else "down"
    done = subprocess.run(
        ["ip", "link", "set", net.veth2, state], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise ClusterError(f"ip link set {net.veth2} {state}: {done.stderr.strip()}")


def _set_links(cluster: LocalCluster, node: str, state: str) -> None:
    """Set the host side of ``node``'s veths (both networks) ``up`` or ``down``."""
    if not cluster._network:
        raise ClusterError("cluster not started")
    cluster.node_address(node)  # names an unknown node
    net = next(n for n in cluster._network.nodes if n.name == node)
    for veth in (net.veth, net.veth2):
        if not veth:
            continue
        done = subprocess.run(["ip", "link", "set", veth, state], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ClusterError(f"ip link set {veth} {state}: {done.stderr.strip()}")


def revive_node(cluster: LocalCluster, node: str, timeout: float = 30) -> None:
    """Start ``node``'s slurmd again after :func:`kill_node`, or resume a node set DOWN
    by ``scontrol update``; returns once the controller lists it up (idle, or running
    jobs) again."""
    if not any(r.name == "slurmd" and r.node == node and procs.alive(r.pid) for r in cluster._records):
        assert cluster._network is not None
        cluster._spawn("slurmd", [*cluster._network.enter_argv(node), "slurmd", "-D", "-N", node], node=node)
    deadline = time.monotonic() + timeout
    while True:
        out = cluster.run(["sinfo", "-h", "-n", node, "-o", "%T"], timeout=10).stdout.strip()
        if (
            out
            and not out.startswith(("down", "drain", "fail", "unknown", "not_responding"))
            and "*" not in out
        ):
            return
        if out.startswith(("down", "drain", "fail")):
            cluster.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], timeout=10)
        if time.monotonic() > deadline:
            raise ClusterTimeout(f"{node} still {out or 'unknown'} {timeout:g} s after revive_node")
        time.sleep(0.2)
