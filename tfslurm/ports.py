"""The TCP port of every task: reserved by Slurm, derived from the job and step, or explicit.

Every task of a step must compute the same port for every other task, without talking to
them, and two steps sharing a node must not pick the same port. In order of preference:

1. **explicit** — ``port_base`` (TF's argument) or ``TFSLURM_PORT_BASE``: local task ``i``
   gets ``port_base + i``, like TF's ``SlurmClusterResolver``. Always wins.
2. **reserved** — ``SLURM_STEP_RESV_PORTS`` (``MpiParams=ports=lo-hi`` in slurm.conf, or
   ``srun --resv-ports=N``): Slurm reserves the same ports on every node of the step and
   gives them to no overlapping step, so local task ``i`` gets the ``i``-th listed port.
   With ``MpiParams`` every step reserves max-tasks-per-node + 1 ports on its own. Not used
   for a heterogeneous step spanning several components: each component reserves its own
   ports on its own nodes, but every task is shown the union (observed: 20007-20008 on node1
   and 20009-20011 on node2, each task sees ``20007-20011``), so a task cannot tell which
   ports are reserved on its node.
3. **derived** — otherwise: from the job id, the step id and the local id, in a window
   outside the kernel's ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``), where
   the kernel never hands out ports on its own.

The derived formula (``W`` = the window ``[lo, hi]``, ``C = 512``, ``G = 64``)::

    M      = (hi - lo + 1) - max(C, max_tasks_per_node)
    offset = (mix(job_id) + step_id * G) mod M         mix(j) = (j * 2654435761) mod 2**32
    port(i) = lo + offset + i                           i = local id

Window: ``10000..min(e_lo, 32768)-1`` when that holds at least 4096 ports (with Linux's
default ephemeral range ``32768-60999``: ``10000-32767``, so M = 22256), else
``max(e_hi + 1, 61000)..65535`` when that holds at least 2048, else PortError. A
heterogeneous step on a site with ``MpiParams=ports`` (it sees reserved ports it cannot use)
takes ``13000..min(e_lo, 20000)-1`` instead (M = 6488), clear of the usual MpiParams ranges
(Slurm's documented ``12000-12999``, Cray's ``20000-32767``) and of every port it was shown;
else the high window. Nodes whose
ephemeral range starts at or above 32768 all compute the same window; if nodes of one step
differ below that, pass ``port_base``.

Collision odds: steps of the *same job* whose ids differ by 1 to ``(M - G) // G`` (346 with
the default window) and that run at most ``G`` tasks per node never overlap. Steps of two
*different jobs* on one node with ``a`` and ``b`` tasks there overlap with probability about
``(a + b - 1) / M`` — 7 / 22256 ≈ 0.03 % for 4 + 4 tasks (measured over 1.1 million pairs of
random job ids: 0.0305 %) — since ``mix`` (Knuth's multiplicative hash) spreads job ids
evenly; jobs with nearby ids land far apart. Another
program listening on a port in the window is not detected: use ``MpiParams`` (reserved
ports) where that matters.
"""

from __future__ import annotations

from tfslurm import hostlist
from tfslurm.errors import PortError
from tfslurm.errors import clip as _clip
from tfslurm.numbers import ascii_int, is_int_in
from tfslurm.settings import PORT_BASE_VARIABLE
from tfslurm.value import Value, one_of

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # type hints only: keep the TaskProlog path light
    from collections.abc import Sequence
    from typing import Final, Literal

    from tfslurm.layout import Layout
    from tfslurm.step import Step

    #: Where a step's ports come from, the name messages and PortRule.describe show:
    #: ``"reserved"`` (Slurm's reservation: MpiParams=ports, --resv-ports), ``"derived"`` (a
    #: base derived from job and step id), ``"explicit"`` (port_base= or TFSLURM_PORT_BASE).
    PortKind = Literal["reserved", "derived", "explicit"]

__all__ = [
    "DEFAULT_EPHEMERAL_RANGE",
    "PORT_KINDS",
    "PortError",
    "PortRule",
    "check_port_base",
    "derived_base",
    "derived_window",
    "format_port_list",
    "parse_port_list",
    "port_rule",
    "read_ephemeral_range",
]

#: Linux's default ``ip_local_port_range``, used when /proc cannot be read.
DEFAULT_EPHEMERAL_RANGE = (32768, 60999)
EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
#: Ports kept free at the top of the window, so a step of up to this many tasks per node
#: fits without moving the window (G steps of one job keep their guarantee).
SPAN_RESERVE = 512
#: Spacing between consecutive steps of one job.
STEP_STRIDE = 64
#: Knuth's multiplicative hashing constant (2**32 / golden ratio).
_MIX = 2654435761
_LOW_WINDOW = (10000, 32767)
# For a heterogeneous step on a site with MpiParams=ports: clear of the ranges sites use for
# it (Slurm's documented 12000-12999, Cray's 20000-32767, and the like).
_MPI_CLEAR_WINDOW = (13000, 19999)
_HIGH_FLOOR = 61000
_MAX_PORT = 65535


#: Every PortKind.
PORT_KINDS: Final[tuple[PortKind, ...]] = ("reserved", "derived", "explicit")

# One letter per kind in the plan descriptor (PortRule.encode).
_CODES: Final[dict[PortKind, str]] = {"reserved": "r", "derived": "d", "explicit": "e"}
_KINDS_BY_CODE: Final[dict[str, PortKind]] = {code: kind for kind, code in _CODES.items()}


class PortRule(Value):
    """How a task's port follows from its local id; the same rule for every task of a step.

    ``kind`` is ``"reserved"`` (``ports`` lists Slurm's reservation, indexed by local id),
    ``"derived"`` or ``"explicit"`` (``base`` is the port of local id 0; local id ``i`` gets
    ``base + i``).
    """

    __match_args__ = ("kind", "ports", "base")
    __slots__ = __match_args__

    def __init__(self, kind: PortKind, ports: tuple[int, ...] = (), base: int | None = None) -> None:
        self.kind: Final = _port_kind(kind)
        self.ports: Final = ports
        self.base: Final = base
        if self.kind == "reserved":
            if not ports or any(not 1 <= p <= _MAX_PORT for p in ports):
                raise PortError(f"reserved ports {ports!r} must be a non-empty list of ports")
        elif not is_int_in(base, 1, _MAX_PORT):
            raise PortError(f"{self.kind} port base {base!r} is not a port (1..65535)")

    def port(self, local_id: int) -> int:
        """The port of local task ``local_id``; PortError if the rule gives it none."""
        if not is_int_in(local_id, 0):
            raise PortError(f"local id {local_id!r} must be a non-negative integer")
        if self.kind == "reserved":
            if local_id >= len(self.ports):
                raise PortError(
                    f"local id {local_id} has no port: Slurm reserved {len(self.ports)} "
                    f"(SLURM_STEP_RESV_PORTS={format_port_list(self.ports)})"
                )
            return self.ports[local_id]
        assert self.base is not None
        port = self.base + local_id
        if port > _MAX_PORT:
            raise PortError(f"{self.kind} port base {self.base} + local id {local_id} is past 65535")
        return port

    def capacity(self) -> int:
        """How many local ids (0..capacity-1) have a port."""
        if self.kind == "reserved":
            return len(self.ports)
        assert self.base is not None
        return _MAX_PORT - self.base + 1

    def encode(self) -> str:
        """Short text for the plan descriptor: ``r20000-20003``, ``d23456``, ``e8888``."""
        if self.kind == "reserved":
            return "r" + format_port_list(self.ports)
        return _CODES[self.kind] + str(self.base)

    @classmethod
    def decode(cls, text: str) -> PortRule:
        """Inverse of :meth:`encode`; PortError naming the text if it is not one."""
        if not isinstance(text, str) or len(text) < 2 or len(text) > 400_000:
            raise PortError(f"port rule {_clip(str(text))!r} is not an encoded port rule")
        code, body = text[0], text[1:]
        kind = _KINDS_BY_CODE.get(code)
        if kind == "reserved":
            return cls(kind, ports=parse_port_list(body, f"port rule {_clip(text)!r}"))
        base = ascii_int(body, 5)
        if kind is None or base is None:
            raise PortError(f"port rule {_clip(text)!r} is not an encoded port rule")
        return cls(kind, base=base)

    def describe(self) -> str:
        if self.kind == "reserved":
            return f"reserved by Slurm: {format_port_list(self.ports)} by local id"
        return f"{self.kind}: {self.base} + local id"


def _port_kind(given: object) -> PortKind:
    kind = one_of(given, PORT_KINDS)
    if kind is None:
        raise PortError(f"port rule kind {given!r} is not one of {', '.join(PORT_KINDS)}")
    return kind


def parse_port_list(text: str, name: str = "SLURM_STEP_RESV_PORTS") -> tuple[int, ...]:
    """``"12005,12007-12009"`` -> (12005, 12007, 12008, 12009): Slurm's bracketless ranges."""
    ports: list[int] = []
    for item in text.strip().split(","):
        low, dash, high = item.partition("-")
        first, last = ascii_int(low, 5), ascii_int(high if dash else low, 5)
        if first is None or last is None:
            raise PortError(f"{name}={_clip(text)!r} is not a list of ports like 12000-12003,12007")
        if not 1 <= first <= last <= _MAX_PORT:
            raise PortError(f"{name}={_clip(text)!r}: {_clip(item)!r} is not a port range within 1-65535")
        ports.extend(range(first, last + 1))
        if len(ports) > _MAX_PORT:
            raise PortError(f"{name}={_clip(text)!r} lists more ports than exist")
    if len(set(ports)) != len(ports):
        raise PortError(f"{name}={_clip(text)!r} lists a port twice")
    return tuple(ports)


def format_port_list(ports: Sequence[int]) -> str:
    """(20000, 20001, 20002, 20007) -> ``20000-20002,20007`` (order kept)."""
    parts: list[str] = []
    i = 0
    while i < len(ports):
        j = i
        while j + 1 < len(ports) and ports[j + 1] == ports[j] + 1:
            j += 1
        parts.append(str(ports[i]) if i == j else f"{ports[i]}-{ports[j]}")
        i = j + 1
    return ",".join(parts)


def read_ephemeral_range(path: str = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range; Linux's default if the file cannot be read."""
    try:
        with open(path, encoding="ascii") as handle:
            words = handle.read(64).split()
        low, high = ascii_int(words[0], 5), ascii_int(words[1], 5)
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return DEFAULT_EPHEMERAL_RANGE
    if low is None or high is None or not 1 <= low <= high <= _MAX_PORT:
        return DEFAULT_EPHEMERAL_RANGE
    return low, high


def derived_window(ephemeral: tuple[int, int], reserved: Sequence[int] | None = None) -> tuple[int, int]:
    """The port window for derived ports: below the ephemeral range if room, else above.

    ``reserved`` (the ports Slurm showed a heterogeneous step, which cannot use them) says
    the site has ``MpiParams=ports``: then the window also keeps clear of the usual
    MpiParams ranges and of every port shown, so derived ports never land on a port Slurm
    may hand to another step.
    """
    e_lo, e_hi = ephemeral
    if reserved is not None:
        low = (_MPI_CLEAR_WINDOW[0], min(e_lo, _MPI_CLEAR_WINDOW[1] + 1) - 1)
        if low[1] - low[0] + 1 >= 4096 and not any(low[0] <= p <= low[1] for p in reserved):
            return low
    else:
        low = (_LOW_WINDOW[0], min(e_lo, _LOW_WINDOW[1] + 1) - 1)
        if low[1] - low[0] + 1 >= 4096:
            return low
    high = (max(e_hi + 1, _HIGH_FLOOR), _MAX_PORT)
    if high[1] - high[0] + 1 >= 2048 and not any(high[0] <= p <= high[1] for p in reserved or ()):
        return high
    raise PortError(
        f"the ephemeral port range {e_lo}-{e_hi} ({EPHEMERAL_RANGE_FILE})"
        + (" and the reserved ports" if reserved is not None else "")
        + (" leave" if reserved is not None else " leaves")
        + " no room for derived ports; pass port_base"
        + (
            " or set TFSLURM_PORT_BASE"
            if reserved is not None
            else ", set TFSLURM_PORT_BASE, or configure MpiParams=ports"
        )
    )


def derived_base(
    job_id: int,
    step_id: int,
    max_tasks_per_node: int,
    ephemeral: tuple[int, int] = DEFAULT_EPHEMERAL_RANGE,
    reserved: Sequence[int] | None = None,
) -> int:
    """The port of local id 0 for a step without usable reserved ports (formula in the
    module doc; ``reserved`` as in :func:`derived_window`)."""
    lo, hi = derived_window(ephemeral, reserved)
    positions = (hi - lo + 1) - max(SPAN_RESERVE, max_tasks_per_node)
    if positions < STEP_STRIDE:
        raise PortError(
            f"{max_tasks_per_node} tasks per node do not fit the derived port window {lo}-{hi}; "
            "pass port_base or configure MpiParams=ports"
        )
    mixed = (job_id * _MIX) % (1 << 32)
    return lo + (mixed + step_id * STEP_STRIDE) % positions


def port_rule(
    step: Step,
    max_tasks_per_node: int,
    *,
    port_base: int | None = None,
    ephemeral_range: tuple[int, int] | None = None,
    layout: Layout | None = None,
) -> PortRule:
    """The port rule of ``step`` (explicit > reserved > derived; see the module doc).

    ``max_tasks_per_node`` is the largest task count of any node of the step: every rule is
    checked to give each of them a port. ``ephemeral_range`` defaults to this node's
    ``ip_local_port_range``. ``layout`` (optional) tells a multi-component het step.
    """
    if not is_int_in(max_tasks_per_node, 1):
        raise PortError(f"max tasks per node {max_tasks_per_node!r} must be a positive integer")
    base, source = _explicit_base(step, port_base)
    if base is not None:
        rule = PortRule("explicit", base=base)
        if rule.capacity() < max_tasks_per_node:
            raise PortError(
                f"{source}={base} leaves ports for {rule.capacity()} tasks per node, "
                f"but a node runs {max_tasks_per_node}"
            )
        return rule
    spans_het = bool(step.resv_ports) and _spans_het_components(step, layout)
    if step.resv_ports and not spans_het:
        ports = parse_port_list(step.resv_ports)
        if len(ports) < max_tasks_per_node:
            raise PortError(
                f"SLURM_STEP_RESV_PORTS={_clip(step.resv_ports)} reserves {len(ports)} port(s) "
                f"but a node runs {max_tasks_per_node} tasks; use --resv-ports={max_tasks_per_node} "
                "or more, or pass port_base"
            )
        return PortRule("reserved", ports=ports)
    job_id = step.require_job_id()  # SlurmEnvError saying why it is missing
    step_id = step.step_id if step.step_id is not None else 0
    rng = ephemeral_range if ephemeral_range is not None else read_ephemeral_range()
    _check_range(rng)
    reserved: tuple[int, ...] | None = None
    if spans_het:  # MpiParams=ports is set: keep clear of its range (see derived_window)
        try:
            reserved = parse_port_list(step.resv_ports or "")
        except PortError:
            reserved = ()
    return PortRule("derived", base=derived_base(job_id, step_id, max_tasks_per_node, rng, reserved))


def check_port_base(port_base: object, name: str = "port_base") -> int:
    """``port_base`` if it is a port (1..65535), else PortError naming the argument ``name``."""
    if not is_int_in(port_base, 1, _MAX_PORT):
        raise PortError(f"{name}={port_base!r} is not a port (1..65535)")
    return port_base


def _explicit_base(step: Step, port_base: int | None) -> tuple[int | None, str]:
    if port_base is not None:
        return check_port_base(port_base), "port_base"
    base = step.settings.port_base()  # PortError for a TFSLURM_PORT_BASE that is not a port
    return (None, "") if base is None else (base, PORT_BASE_VARIABLE)


def _spans_het_components(step: Step, layout: Layout | None) -> bool:
    """True for a heterogeneous step that uses nodes of two or more components."""
    if layout is not None:
        return len(layout.component_sizes) > 1
    if len(step.het) < 2 or not step.nodelist:
        return False
    try:
        in_step = set(hostlist.expand(step.nodelist))
        used = 0
        for component in step.het:
            if component.nodelist and in_step.intersection(hostlist.expand(component.nodelist)):
                used += 1
    except ValueError:
        return True  # cannot tell: do not trust a reservation that may not cover this node
    return used > 1


def _check_range(rng: tuple[int, int]) -> None:
    if (
        not isinstance(rng, tuple)
        or len(rng) != 2
        or not all(map(is_int_in, rng))
        or not 1 <= rng[0] <= rng[1] <= _MAX_PORT
    ):
        raise PortError(f"ephemeral range {rng!r} is not a (low, high) pair of ports")
