"""What a local test cluster looks like: node names, GPUs, hooks, ports.

A ``ClusterConfig`` is plain, hashable data, so the test fixture can cache one running
cluster per distinct configuration. Validation happens here, before anything is started,
so a typo costs a one-line error instead of a half-started cluster.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any, Final

from tfslurm.errors import ClusterConfigError
from tfslurm.value import Value

MAX_NODES = 200  # node addresses are SUBNET.11 .. SUBNET.210 in one /24
_NAME_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_PORT_RANGE = re.compile(r"^(\d+)-(\d+)$")
_CONF_UNSAFE = "#%\\\"'"  # besides blanks: comment, Slurm's %n expansion, escapes, quotes


class ClusterConfig(Value):
    """Options of one throwaway cluster (defaults = the ``slurm_cluster`` test fixture).

    ``state_dir=None`` means "a fresh temporary directory under /tmp". ``ctld_port=None``
    and ``subnet=None`` mean "pick a free one" (derived from the state dir, then probed).
    ``node_digits`` is the zero-pad width of node numbers (3: ``node001``); ``cpus`` the
    CPUs advertised per node (may exceed the real core count); ``gpus`` the fake GPUs per
    node (char devices; 0: no gres at all); ``task_prolog`` the absolute path of a
    TaskProlog executable; ``plugstack_lines`` the lines of our own plugstack.conf and
    ``extra_conf_lines`` lines appended verbatim to slurm.conf (lists are accepted, kept as
    tuples so the config hashes); ``resv_ports`` is ``MpiParams=ports=`` (srun
    ``--resv-ports``; None: no MpiParams); ``subnet`` the first three octets (e.g.
    ``10.213.140``); ``timeout`` the seconds to wait for daemons, nodes and the smoke srun;
    ``smoke_test`` runs one srun over all nodes before the cluster counts as up.

    ``preempt_grace``: preemption (partition_prio) with this GraceTime in seconds; None =
    none. Partitions "low" (PreemptMode=REQUEUE), "low-cancel" (CANCEL), both
    PriorityTier=1 with the GraceTime, and "high" (PriorityTier=10), all over every node;
    "debug" stays the default.

    ``slurmd_timeout``: slurm.conf ``SlurmdTimeout`` in seconds, how long the controller
    waits for a node whose slurmd stopped answering before it sets the node DOWN (a
    node-failure test sets a few seconds).
    """

    __slots__ = (
        "cpus",
        "ctld_port",
        "extra_conf_lines",
        "gpus",
        "node_digits",
        "node_prefix",
        "num_nodes",
        "plugstack_lines",
        "preempt_grace",
        "resv_ports",
        "slurmd_timeout",
        "smoke_test",
        "state_dir",
        "subnet",
        "task_prolog",
        "timeout",
    )
    __match_args__ = (
        "num_nodes",
        "node_prefix",
        "node_digits",
        "cpus",
        "gpus",
        "task_prolog",
        "plugstack_lines",
        "extra_conf_lines",
        "resv_ports",
        "state_dir",
        "ctld_port",
        "subnet",
        "timeout",
        "smoke_test",
        "preempt_grace",
        "slurmd_timeout",
    )

    def __init__(
        self,
        num_nodes: int = 4,
        node_prefix: str = "node",
        node_digits: int = 0,
        cpus: int = 4,
        gpus: int = 4,
        task_prolog: str | None = None,
        plugstack_lines: Sequence[str] = (),
        extra_conf_lines: Sequence[str] = (),
        resv_ports: str | None = "20000-20100",
        state_dir: str | None = None,
        ctld_port: int | None = None,
        subnet: str | None = None,
        timeout: float = 30.0,
        smoke_test: bool = True,
        preempt_grace: int | None = None,
        slurmd_timeout: int = 60,
    ) -> None:
        self.num_nodes: Final = num_nodes
        self.node_prefix: Final = node_prefix
        self.node_digits: Final = node_digits
        self.cpus: Final = cpus
        self.gpus: Final = gpus
        self.task_prolog: Final = task_prolog
        self.plugstack_lines: Final = _lines("plugstack_lines", plugstack_lines)
        self.extra_conf_lines: Final = _lines("extra_conf_lines", extra_conf_lines)
        self.resv_ports: Final = resv_ports
        self.state_dir: Final = state_dir
        self.ctld_port: Final = ctld_port
        self.subnet: Final = subnet
        self.timeout: Final = timeout
        self.smoke_test: Final = smoke_test
        self.preempt_grace: Final = preempt_grace
        self.slurmd_timeout: Final = slurmd_timeout
        self._validate()

    def _validate(self) -> None:
        for name, lo, hi in (
            ("num_nodes", 1, MAX_NODES),
            ("node_digits", 0, 9),
            ("cpus", 1, 1024),
            ("gpus", 0, 64),
            ("slurmd_timeout", 2, 3600),
        ):
            _check_int(name, getattr(self, name), lo, hi)
        self._check_names()
        self._check_paths()
        for name in ("plugstack_lines", "extra_conf_lines"):
            for line in getattr(self, name):
                if not isinstance(line, str) or "\n" in line:
                    raise ClusterConfigError(name, None, f"{line!r} is not a single line of text")
        self._check_placement()
        if self.preempt_grace is not None:
            _check_int("preempt_grace", self.preempt_grace, 0, 3600)
        if not (isinstance(self.timeout, (int, float)) and self.timeout > 0):
            raise ClusterConfigError("timeout", repr(self.timeout), "expected a positive number of seconds")

    def _check_names(self) -> None:
        """The node names: a prefix slurm.conf and hostlists take, digits wide enough."""
        if not isinstance(self.node_prefix, str) or not _NAME_PREFIX.match(self.node_prefix):
            raise ClusterConfigError(
                "node_prefix",
                repr(self.node_prefix),
                "expected a letter followed by letters, digits, '-' or '_'",
            )
        if len(self.node_prefix) > 40:
            raise ClusterConfigError("node_prefix", repr(self.node_prefix), "longer than 40 characters")
        if self.node_prefix[-1].isdigit():
            raise ClusterConfigError("node_prefix", repr(self.node_prefix), "must not end in a digit")
        if self.node_digits and len(str(self.num_nodes)) > self.node_digits:
            raise ClusterConfigError(
                "node_digits", str(self.node_digits), f"too narrow for {self.num_nodes} nodes"
            )

    def _check_paths(self) -> None:
        """The paths written into slurm.conf: absolute, nothing it would misread."""
        if self.task_prolog is not None and not os.path.isabs(str(self.task_prolog)):
            raise ClusterConfigError("task_prolog", repr(self.task_prolog), "must be an absolute path")
        for name in ("task_prolog", "state_dir"):
            value = getattr(self, name)
            if value is not None and any(c.isspace() or c in _CONF_UNSAFE for c in str(value)):
                raise ClusterConfigError(
                    name, repr(value), "blanks, quotes, '#', '%' and '\\' cannot be written into slurm.conf"
                )

    def _check_placement(self) -> None:
        """Where the cluster lives: ports and subnet in the ranges it may use, a state dir."""
        m = _PORT_RANGE.match(str(self.resv_ports))
        if self.resv_ports is not None and (not m or not 1024 <= int(m[1]) <= int(m[2]) <= 65535):
            raise ClusterConfigError(
                "resv_ports", repr(self.resv_ports), "expected LOW-HIGH within 1024-65535"
            )
        if self.ctld_port is not None and not (
            isinstance(self.ctld_port, int) and 1024 <= self.ctld_port <= 65534
        ):
            raise ClusterConfigError("ctld_port", repr(self.ctld_port), "expected an integer in 1024..65534")
        if self.subnet is not None:
            parts = str(self.subnet).split(".")
            if (
                len(parts) != 3
                or parts[:2] != ["10", "213"]
                or not parts[2].isdigit()
                or not 0 <= int(parts[2]) <= 255
            ):
                raise ClusterConfigError(
                    "subnet", repr(self.subnet), "expected three octets inside 10.213.0.0/16, e.g. 10.213.140"
                )
        if self.state_dir is not None:
            path = str(self.state_dir)
            if not os.path.isabs(path) or os.path.normpath(path) == "/":
                raise ClusterConfigError("state_dir", repr(path), "must be an absolute path other than /")

    @classmethod
    def from_options(cls, **options: Any) -> ClusterConfig:
        """Build from keyword options, naming any unknown option (fixture/CLI input)."""
        known = set(cls.__match_args__)
        unknown = sorted(set(options) - known)
        if unknown:
            raise ClusterConfigError(
                None,
                None,
                f"unknown cluster option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}",
            )
        return cls(**options)

    def node_names(self) -> list[str]:
        """``node1..node4`` or, with ``node_digits=3``, ``node001..node004``."""
        width = self.node_digits
        return [f"{self.node_prefix}{i:0{width}d}" for i in range(1, self.num_nodes + 1)]

    def cache_key(self) -> tuple[Any, ...]:
        """Everything that shapes the cluster, excluding where it lives."""
        return tuple(
            getattr(self, name)
            for name in self.__match_args__
            if name not in ("state_dir", "ctld_port", "subnet", "timeout")
        )

    def with_options(self, **options: Any) -> ClusterConfig:
        """A copy with ``options`` changed (keyword names as :meth:`__init__` takes them)."""
        return ClusterConfig(**{**self.as_dict(), **options})

    def as_dict(self) -> dict[str, Any]:
        """The options by name, as :meth:`__init__` takes them (a cluster record stores it)."""
        return {name: getattr(self, name) for name in self.__match_args__}


def _lines(name: str, value: Sequence[str]) -> tuple[str, ...]:
    """Lines given as a list or tuple, kept as a tuple; one string is a mistake, not lines."""
    if isinstance(value, str):
        raise ClusterConfigError(name, None, f"expected a list of lines, got the string {value!r}")
    return tuple(value)


def _check_int(name: str, value: object, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ClusterConfigError(name, repr(value), f"expected an integer in {lo}..{hi}")
