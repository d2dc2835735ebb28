"""One network, UTS and mount namespace per node, joined by a private bridge.

Why: on a real cluster every node has its own hostname, address and port space. Tests of
port assignment and of TF servers talking to each other are only meaningful if two tasks
on different "nodes" can bind the same port, so every slurmd runs in namespaces of its own.

Names and places (everything derived from the state dir, so two clusters never share a name):

* ``STATE/ns/<node>.{net,uts,mnt}``: the namespaces, kept alive by bind mounts (no
  ``/run/netns`` entries, no holder processes). ``STATE/ns`` is bind-mounted onto itself and
  made private, which the kernel requires before a mount namespace can be pinned there.
* a bridge ``tfl<hash>b`` with ``SUBNET.1/24`` in the namespace of the caller (where
  slurmctld and the client commands run), and per node a veth pair: ``eth0`` with
  ``SUBNET.<10+i>`` inside, ``tfl<hash>v<i>`` enslaved to the bridge outside.
* a second network for tests of ``--iface``: a bridge ``tfl<hash>c`` without an address
  (nodes reach each other over it, the host does not) and per node ``eth1`` with
  ``SECOND.<10+i>``, where ``SECOND`` is ``10.214.X`` for the cluster's ``10.213.X``; the
  hosts file names it ``<node>-eth1``, the per-interface name ``tfslurm.iface`` resolves.
* inside each node's mount namespace only: ``STATE/etc/hosts`` bound over ``/etc/hosts``.

No routes beyond the /24, no forwarding, no NAT: traffic stays on our own bridge.
"""

from __future__ import annotations

import ctypes
import hashlib
import ipaddress
import os
import shlex
import subprocess
from typing import Final

from tfslurm.errors import ClusterError
from tfslurm.value import Value

# Subnets we derive automatically come from 10.213.100-254 so that they stay clear of
# hand-picked ones (people and scripts tend to use small third octets).
AUTO_OCTETS = range(100, 255)
ROUTE_TYPES = {
    "local",
    "broadcast",
    "unicast",
    "anycast",
    "multicast",
    "blackhole",
    "unreachable",
    "prohibit",
    "throw",
}

_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
_MNT_DETACH = 2


def name_hash(state_dir: str) -> str:
    return hashlib.sha1(os.path.normpath(state_dir).encode()).hexdigest()[:6]


def choose_tag(state_dir: str) -> str:
    """A 6-hex-digit interface tag no link of this host's network namespace uses yet.

    Derived from the state dir, then probed onwards: two clusters whose state dirs have the
    same path in different mount namespaces (the versions matrix runs the suite in several
    roots at once, all in the host's network namespace) must not share a bridge, or one's
    teardown deletes the other's links. Call it under the host lock, like choose_subnet.
    """
    start = int(name_hash(state_dir), 16)
    for k in range(4096):
        tag = f"{(start + k) % 0x1000000:06x}"
        if not any(os.path.exists(f"/sys/class/net/tfl{tag}{kind}") for kind in ("b", "c")):
            return tag
    raise ClusterError("no free tfl<tag>b interface name left for a test cluster bridge")


def used_networks() -> list[ipaddress.IPv4Network]:
    """IPv4 networks this host already routes or has addresses in (any routing table)."""
    nets: list[ipaddress.IPv4Network] = []
    out = subprocess.run(
        ["ip", "-4", "-o", "route", "show", "table", "all"], capture_output=True, text=True, check=False
    ).stdout
    for line in out.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] in ROUTE_TYPES:
            words = words[1:]
        if not words or words[0] == "default":
            continue
        try:
            nets.append(ipaddress.ip_network(words[0], strict=False))  # type: ignore[arg-type]
        except ValueError:
            continue
    return nets


def subnet_free(subnet: str, used: list[ipaddress.IPv4Network] | None = None) -> bool:
    net = ipaddress.ip_network(f"{subnet}.0/24")
    return not any(net.overlaps(other) for other in (used_networks() if used is None else used))


def choose_subnet(state_dir: str) -> str:
    """A free ``10.213.X`` derived from the state dir (probing onwards if it is taken)."""
    used = used_networks()
    start = int(name_hash(state_dir), 16)
    for k in range(len(AUTO_OCTETS)):
        octet = AUTO_OCTETS[(start + k) % len(AUTO_OCTETS)]
        if subnet_free(f"10.213.{octet}", used):
            return f"10.213.{octet}"
    raise ClusterError("no free /24 left in 10.213.100.0-10.213.254.0 for a test cluster bridge")


def mounts_under(prefix: str) -> list[str]:
    """Mount points at or below ``prefix`` in our mount namespace, deepest first."""
    prefix = os.path.normpath(prefix)
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            point = _unescape(line.split()[4])
            if point == prefix or point.startswith(prefix + "/"):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def _unescape(path: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    return path.encode("latin-1").decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")


_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, flags: int) -> None:
    rc = _libc.mount(source.encode() if source else None, target.encode(), None, ctypes.c_ulong(flags), None)
    if rc != 0:
        err = ctypes.get_errno()
        raise ClusterError(f"mount {source or ''} {target} failed: {os.strerror(err)}")


def _umount(target: str) -> bool:
    return bool(_libc.umount2(target.encode(), _MNT_DETACH) == 0)


class NodeNet(Value):
    """One node's addresses and host-side veths (``address2``/``veth2``: eth1, the second network)."""

    __slots__ = ("address", "address2", "name", "veth", "veth2")
    __match_args__ = ("name", "address", "veth", "address2", "veth2")

    def __init__(self, name: str, address: str, veth: str, address2: str = "", veth2: str = "") -> None:
        self.name: Final = name
        self.address: Final = address
        self.veth: Final = veth
        self.address2: Final = address2
        self.veth2: Final = veth2


class Network(Value):
    """The namespaces, bridge and veths of one cluster.

    ``tag`` names the bridges and veths (``tfl<tag>b``, ``tfl<tag>v1``, ...).
    """

    __slots__ = ("nodes", "state_dir", "subnet", "tag")
    __match_args__ = ("state_dir", "subnet", "nodes", "tag")

    def __init__(self, state_dir: str, subnet: str, nodes: tuple[NodeNet, ...], tag: str) -> None:
        self.state_dir: Final = state_dir
        self.subnet: Final = subnet
        self.nodes: Final = nodes
        self.tag: Final = tag

    @classmethod
    def plan(cls, state_dir: str, subnet: str, node_names: list[str], tag: str | None = None) -> Network:
        """``tag`` None (a cluster record that names none): derived from the state dir."""
        h = tag or name_hash(state_dir)
        second = "10.214." + subnet.rsplit(".", 1)[1]
        nodes = tuple(
            NodeNet(name, f"{subnet}.{10 + i}", f"tfl{h}v{i}", f"{second}.{10 + i}", f"tfl{h}w{i}")
            for i, name in enumerate(node_names, 1)
        )
        return cls(state_dir, subnet, nodes, h)

    @property
    def bridge(self) -> str:
        return f"tfl{self.tag}b"

    @property
    def bridge2(self) -> str:
        """The second network's bridge (``eth1`` of every node)."""
        return f"tfl{self.tag}c"

    @property
    def gateway(self) -> str:
        """Address of the bridge: where slurmctld is reached from inside the nodes."""
        return f"{self.subnet}.1"

    @property
    def ns_dir(self) -> str:
        return os.path.join(self.state_dir, "ns")

    def ns_file(self, node: str, kind: str) -> str:
        return os.path.join(self.ns_dir, f"{node}.{kind}")

    def enter_argv(self, node: str) -> list[str]:
        """Prefix that runs a command inside ``node``'s namespaces (nsenter execs, no fork)."""
        if node not in {n.name for n in self.nodes}:
            raise ClusterError(
                f"no node named {node!r} in this cluster ({', '.join(n.name for n in self.nodes)})"
            )
        return [
            "nsenter",
            f"--net={self.ns_file(node, 'net')}",
            f"--uts={self.ns_file(node, 'uts')}",
            f"--mount={self.ns_file(node, 'mnt')}",
            "--",
        ]

    def hosts_file_text(self, controller_host: str) -> str:
        lines = ["127.0.0.1 localhost", f"{self.gateway} {controller_host}"]
        lines += [f"{n.address} {n.name}" for n in self.nodes]
        lines += [f"{n.address2} {n.name}-eth1" for n in self.nodes]
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------ set up
    def setup(self, hosts_file: str) -> None:
        """Create namespaces, bridge and veths. Raises ClusterError (caller tears down)."""
        if os.path.exists(f"/sys/class/net/{self.bridge}"):
            raise ClusterError(
                f"network interface {self.bridge} already exists (taken by another cluster since its tag was chosen: start again)"
            )
        os.makedirs(self.ns_dir, exist_ok=True)
        _mount(self.ns_dir, self.ns_dir, _MS_BIND)
        _mount(None, self.ns_dir, _MS_PRIVATE)
        _ip_batch(
            [
                f"link add {self.bridge} type bridge",
                f"addr add {self.gateway}/24 dev {self.bridge}",
                f"link set {self.bridge} up",
                f"link add {self.bridge2} type bridge",
                f"link set {self.bridge2} up",
            ]
        )
        failures = self._make_namespaces(list(self.nodes), hosts_file)
        # Since Linux 6.18 namespace ids come from per-CPU batches, so a node namespace made on
        # another CPU than the one our own (nested) mount namespace was made on can get a
        # lower id, and pinning it in our namespace fails with EINVAL (the kernel's loop
        # check). Only inside a nested mount namespace (tests/matrix.sh); on one CPU the
        # ids grow: retry such nodes pinned to each CPU in turn.
        for cpu in sorted(os.sched_getaffinity(0)):
            retry = [n for n in self.nodes if "Invalid argument" in failures.get(n.name, "")]
            if not retry:
                break
            for node in retry:
                del failures[node.name]
                for kind in ("net", "uts", "mnt"):  # the kinds pinned before the one that failed
                    while _umount(self.ns_file(node.name, kind)):
                        pass
            failures.update(self._make_namespaces(retry, hosts_file, cpu=cpu))
        if failures:
            raise ClusterError(
                "namespace setup failed: " + "; ".join(f"{name}: {out}" for name, out in failures.items())
            )
        cmds = []
        for node in self.nodes:
            cmds += [f"link set {node.veth} master {self.bridge}", f"link set {node.veth} up"]
            cmds += [f"link set {node.veth2} master {self.bridge2}", f"link set {node.veth2} up"]
        _ip_batch(cmds)

    def _make_namespaces(
        self, nodes: list[NodeNet], hosts_file: str, cpu: int | None = None
    ) -> dict[str, str]:
        """Create and pin each node's namespaces; node name -> error text of those that failed."""
        me = os.getpid()  # our network namespace, where the bridge lives
        jobs = []
        for node in nodes:
            for kind in ("net", "uts", "mnt"):
                with open(self.ns_file(node.name, kind), "a"):
                    pass
            # Inside the new namespaces: hostname, lo, drop our copy of the ns dir (it would
            # pin the other nodes' namespaces), /etc/hosts, and eth0 whose peer goes to us.
            script = "; ".join(
                [
                    "set -e",
                    f"hostname {node.name}",
                    "ip link set lo up",
                    f"umount -l {shlex.quote(self.ns_dir)} 2>/dev/null || true",
                    f"mount --bind {shlex.quote(hosts_file)} /etc/hosts",
                    f"ip link add eth0 type veth peer name {node.veth} netns {me}",
                    f"ip addr add {node.address}/24 dev eth0",
                    "ip link set eth0 up",
                    f"ip link add eth1 type veth peer name {node.veth2} netns {me}",
                    f"ip addr add {node.address2}/24 dev eth1",
                    "ip link set eth1 up",
                ]
            )
            argv = [
                *(["taskset", "-c", str(cpu)] if cpu is not None else []),
                "unshare",
                f"--net={self.ns_file(node.name, 'net')}",
                f"--uts={self.ns_file(node.name, 'uts')}",
                f"--mount={self.ns_file(node.name, 'mnt')}",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
            ]
            jobs.append(
                (node, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            )
        failures = {}
        try:
            for node, proc in jobs:
                out, _ = proc.communicate(timeout=30)
                if proc.returncode != 0:
                    failures[node.name] = out.strip()
        finally:  # a hung or interrupted setup leaves none of our unshare children behind
            for _, proc in jobs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        return failures

    # ------------------------------------------------------------------ inspect
    def netns_inodes(self) -> list[int]:
        """Inodes of our nodes' network namespaces that are still pinned."""
        pinned = set(mounts_under(self.ns_dir))
        inodes = []
        for node in self.nodes:
            path = self.ns_file(node.name, "net")
            if path in pinned:
                try:
                    inodes.append(os.stat(path).st_ino)
                except OSError:
                    pass
        return inodes

    def leftovers(self) -> list[str]:
        """What of this network still exists (empty after a clean teardown)."""
        names = [self.bridge, self.bridge2, *(n.veth for n in self.nodes), *(n.veth2 for n in self.nodes)]
        left = [f"link {n}" for n in names if os.path.exists(f"/sys/class/net/{n}")]
        left += [f"mount {p}" for p in mounts_under(self.ns_dir)]
        return left

    # ------------------------------------------------------------------ tear down
    def teardown(self) -> None:
        """Remove veths, bridge and namespace pins. Idempotent, best effort, no raise."""
        veths = [n.veth for n in self.nodes] + [n.veth2 for n in self.nodes]
        cmds = [f"link del {v}" for v in veths if os.path.exists(f"/sys/class/net/{v}")]
        for bridge in (self.bridge, self.bridge2):
            if os.path.exists(f"/sys/class/net/{bridge}"):
                cmds.append(f"link del {bridge}")
        if cmds:
            try:
                _ip_batch(cmds, force=True)
            except ClusterError:
                pass
        for _ in range(3):  # a path can carry stacked mounts
            points = mounts_under(self.ns_dir)
            if not points:
                break
            for point in points:
                _umount(point)
        if os.path.isdir(self.ns_dir) and not mounts_under(self.ns_dir):
            for entry in os.listdir(self.ns_dir):
                try:
                    os.unlink(os.path.join(self.ns_dir, entry))
                except OSError:
                    pass
            try:
                os.rmdir(self.ns_dir)
            except OSError:
                pass


def _ip_batch(commands: list[str], force: bool = False) -> None:
    argv = ["ip", *(["-force"] if force else []), "-batch", "-"]
    proc = subprocess.run(argv, input="\n".join(commands) + "\n", capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ClusterError(f"ip {' / '.join(commands)}: {proc.stderr.strip()}")
