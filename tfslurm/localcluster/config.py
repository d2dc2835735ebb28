"""What a local test cluster looks like: node names, GPUs, hooks, ports.

A ``ClusterConfig`` is plain, hashable data, so the test fixture can cache one running
cluster per distinct configuration. Validation happens here, before anything is started,
so a typo costs a one-line error instead of a half-started cluster.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields
from typing import Any

from tfslurm.errors import ClusterConfigError

MAX_NODES = 200  # node addresses are SUBNET.11 .. SUBNET.210 in one /24
_NAME_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_PORT_RANGE = re.compile(r"^(\d+)-(\d+)$")
_CONF_UNSAFE = "#%\\\"'"  # besides blanks: comment, Slurm's %n expansion, escapes, quotes


@dataclass(frozen=True)
class ClusterConfig:
    """Options of one throwaway cluster (defaults = the ``slurm_cluster`` test fixture).

    ``state_dir=None`` means "a fresh temporary directory under /tmp". ``ctld_port=None``
    and ``subnet=None`` mean "pick a free one" (derived from the state dir, then probed).
    """

    num_nodes: int = 4
    node_prefix: str = "node"
    node_digits: int = 0  # zero-pad width: 3 -> node001
    cpus: int = 4  # CPUs advertised per node (may exceed the real core count)
    gpus: int = 4  # fake GPUs per node (char devices); 0 = no gres at all
    task_prolog: str | None = None  # absolute path of a TaskProlog executable
    plugstack_lines: tuple[str, ...] = ()  # lines of our own plugstack.conf
    extra_conf_lines: tuple[str, ...] = ()  # appended verbatim to slurm.conf
    resv_ports: str | None = "20000-20100"  # MpiParams=ports= (srun --resv-ports); None = no MpiParams
    state_dir: str | None = None
    ctld_port: int | None = None
    subnet: str | None = None  # first three octets, e.g. "10.213.140"
    timeout: float = 30.0  # seconds to wait for daemons / nodes / the smoke srun
    smoke_test: bool = True  # run one srun over all nodes before declaring the cluster up
    # Preemption (partition_prio) with this GraceTime in seconds; None = none. Partitions
    # "low" (PreemptMode=REQUEUE), "low-cancel" (CANCEL), both PriorityTier=1 with the
    # GraceTime, and "high" (PriorityTier=10), all over every node; "debug" stays the default.
    preempt_grace: int | None = None

    def __post_init__(self) -> None:
        # Lists are accepted for convenience but stored as tuples so the config hashes.
        for name in ("plugstack_lines", "extra_conf_lines"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise ClusterConfigError(f"{name}: expected a list of lines, got the string {value!r}")
            object.__setattr__(self, name, tuple(value))
        self._validate()

    def _validate(self) -> None:
        def int_in(name: str, lo: int, hi: int) -> None:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                raise ClusterConfigError(f"{name}={value!r}: expected an integer in {lo}..{hi}")

        int_in("num_nodes", 1, MAX_NODES)
        int_in("node_digits", 0, 9)
        int_in("cpus", 1, 1024)
        int_in("gpus", 0, 64)
        if not isinstance(self.node_prefix, str) or not _NAME_PREFIX.match(self.node_prefix):
            raise ClusterConfigError(
                f"node_prefix={self.node_prefix!r}: expected a letter followed by letters, digits, '-' or '_'"
            )
        if len(self.node_prefix) > 40:
            raise ClusterConfigError(f"node_prefix={self.node_prefix!r}: longer than 40 characters")
        if self.node_prefix[-1].isdigit():
            raise ClusterConfigError(f"node_prefix={self.node_prefix!r}: must not end in a digit")
        if self.node_digits and len(str(self.num_nodes)) > self.node_digits:
            raise ClusterConfigError(f"node_digits={self.node_digits}: too narrow for {self.num_nodes} nodes")
        if self.task_prolog is not None and not os.path.isabs(str(self.task_prolog)):
            raise ClusterConfigError(f"task_prolog={self.task_prolog!r}: must be an absolute path")
        for name in ("task_prolog", "state_dir"):
            value = getattr(self, name)
            if value is not None and any(c.isspace() or c in _CONF_UNSAFE for c in str(value)):
                raise ClusterConfigError(
                    f"{name}={value!r}: blanks, quotes, '#', '%' and '\\' cannot be written into slurm.conf"
                )
        for name in ("plugstack_lines", "extra_conf_lines"):
            for line in getattr(self, name):
                if not isinstance(line, str) or "\n" in line:
                    raise ClusterConfigError(f"{name}: {line!r} is not a single line of text")
        m = _PORT_RANGE.match(str(self.resv_ports))
        if self.resv_ports is not None and (not m or not 1024 <= int(m[1]) <= int(m[2]) <= 65535):
            raise ClusterConfigError(f"resv_ports={self.resv_ports!r}: expected LOW-HIGH within 1024-65535")
        if self.ctld_port is not None and not (
            isinstance(self.ctld_port, int) and 1024 <= self.ctld_port <= 65534
        ):
            raise ClusterConfigError(f"ctld_port={self.ctld_port!r}: expected an integer in 1024..65534")
        if self.subnet is not None:
            parts = str(self.subnet).split(".")
            if (
                len(parts) != 3
                or parts[:2] != ["10", "213"]
                or not parts[2].isdigit()
                or not 0 <= int(parts[2]) <= 255
            ):
                raise ClusterConfigError(
                    f"subnet={self.subnet!r}: expected three octets inside 10.213.0.0/16, e.g. 10.213.140"
                )
        if self.state_dir is not None:
            path = str(self.state_dir)
            if not os.path.isabs(path) or os.path.normpath(path) == "/":
                raise ClusterConfigError(f"state_dir={path!r}: must be an absolute path other than /")
        if self.preempt_grace is not None:
            int_in("preempt_grace", 0, 3600)
        if not (isinstance(self.timeout, (int, float)) and self.timeout > 0):
            raise ClusterConfigError(f"timeout={self.timeout!r}: expected a positive number of seconds")

    @classmethod
    def from_options(cls, **options: Any) -> ClusterConfig:
        """Build from keyword options, naming any unknown option (fixture/CLI input)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ClusterConfigError(
                f"unknown cluster option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        return cls(**options)

    def node_names(self) -> list[str]:
        """``node1..node4`` or, with ``node_digits=3``, ``node001..node004``."""
        width = self.node_digits
        return [f"{self.node_prefix}{i:0{width}d}" for i in range(1, self.num_nodes + 1)]

    def cache_key(self) -> tuple[Any, ...]:
        """Everything that shapes the cluster, excluding where it lives."""
        return tuple(
            getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("state_dir", "ctld_port", "subnet", "timeout")
        )
