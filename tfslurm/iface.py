"""Each node's address on a chosen network interface (``--iface`` / ``TFSLURM_IFACE``).

A task can read only its own node's interfaces. The other nodes' addresses on that
interface come from **name resolution of a per-interface host name**: the node name
through the host template, which defaults to ``{node}-IFACE`` (``node7-ib0``) when an
interface is named. That is the convention sites already keep in ``/etc/hosts`` or DNS for
a second network, and it needs no message between tasks, so every task still computes the
same plan on its own. Each task then checks what it can: that its own node has the
interface, and that its own per-interface name resolves to the address the interface
really has, so a stale hosts file is a one-line error on every node where it is wrong,
not a hang at connection time.

Chosen over a rendezvous (the coordinator's address is exactly what is not yet known) and
over parsing ``scontrol`` (an RPC per task, and NodeAddr names one interface only).

Only the standard library is used, and only when an interface is asked for.
"""

from __future__ import annotations

import socket

from tfslurm.errors import IfaceError
from tfslurm.settings import IFACE_VARIABLE

# typing.TYPE_CHECKING without importing typing: the hook imports this module
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["IFACE_VARIABLE", "IfaceError", "IfaceHosts", "check_iface_name", "interface_address"]

_SIOCGIFADDR = 0x8915
_IFNAMSIZ = 16


def check_iface_name(name: str) -> str:
    """The interface name, or IfaceError naming it (Linux: 1-15 bytes, no '/' or blanks)."""
    if (
        not isinstance(name, str)
        or not 0 < len(name.encode()) < _IFNAMSIZ
        or any(c in name for c in "/:, \t\n")
        or name in (".", "..")
    ):
        raise IfaceError(
            f"network interface name {name!r} is not valid (1-15 characters, no '/', ':', ',' or blanks)"
        )
    return name


def interface_address(iface: str, node: str | None = None) -> str | None:
    """This node's address on ``iface`` (IPv4 first, else global IPv6), or None if it has none.

    Raises IfaceError naming ``node`` (default: the host name) when the node has no
    interface of that name at all.
    """
    check_iface_name(iface)
    try:
        socket.if_nametoindex(iface)
    except OSError:
        raise IfaceError(
            f"node {node or socket.gethostname()} has no network interface {iface!r} (--iface/{IFACE_VARIABLE})"
        ) from None
    import fcntl
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            raw = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, struct.pack("256s", iface.encode()))
            return socket.inet_ntoa(raw[20:24])
        except OSError:
            pass  # no IPv4 address: look for IPv6
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as f:
            for line in f:
                words = line.split()
                # address, index, prefix length, scope (00 = global), flags, name
                if len(words) == 6 and words[5] == iface and words[3] == "00":
                    packed = bytes.fromhex(words[0])
                    return socket.inet_ntop(socket.AF_INET6, packed)
    except OSError:
        pass
    return None


class IfaceHosts:
    """Addresses of nodes on one interface: resolved from ``template``, checked on this node.

    ``own_node`` is the node this process runs on (SLURMD_NODENAME), or None away from a
    step (then nothing can be checked locally).
    """

    def __init__(self, iface: str, template: str | None = None, own_node: str | None = None) -> None:
        self.iface = check_iface_name(iface)
        self.template = template or "{node}-" + iface
        self.own_node = own_node
        self._cache: dict[str, str] = {}
        self._own: str | None = None
        if own_node is not None:
            address = interface_address(iface, own_node)
            if address is None:
                raise IfaceError(
                    f"node {own_node} has no address on network interface {iface!r} (--iface/{IFACE_VARIABLE})"
                )
            self._own = address
            self._check_own(own_node, address)

    def name_of(self, node: str) -> str:
        return self.template.replace("{node}", node)

    def address(self, node: str) -> str:
        """The address of ``node`` on the interface (IPv6 without brackets)."""
        cached = self._cache.get(node)
        if cached is not None:
            return cached
        name = self.name_of(node)
        family = socket.AF_INET6 if self._own is not None and ":" in self._own else socket.AF_INET
        try:
            infos = socket.getaddrinfo(name, None, family, socket.SOCK_STREAM)
        except OSError as exc:
            raise IfaceError(
                f"cannot find node {node}'s address on {self.iface!r}: {name!r} does not resolve "
                f"({exc.strerror or exc}); list it in /etc/hosts or DNS, or set the host template"
            ) from None
        address = str(infos[0][4][0])
        self._cache[node] = address
        return address

    def addresses(self, nodes: Iterable[str]) -> tuple[str, ...]:
        """Each node's address as a host for ``host:port`` (IPv6 in brackets)."""
        return tuple(_as_host(self.address(node)) for node in nodes)

    def _check_own(self, node: str, address: str) -> None:
        resolved = self.address(node)
        if resolved != address:
            raise IfaceError(
                f"node {node}: {self.name_of(node)!r} resolves to {resolved}, but its interface "
                f"{self.iface!r} has {address}; fix /etc/hosts or DNS, or the host template"
            )

    def socket_env(self) -> dict[str, str]:
        """The variables that make NCCL and Gloo use this interface too."""
        return {"NCCL_SOCKET_IFNAME": self.iface, "GLOO_SOCKET_IFNAME": self.iface}


def _as_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address
