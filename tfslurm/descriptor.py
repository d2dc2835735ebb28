"""The plan descriptor: a whole cluster plan in a few hundred bytes of text.

TF_CONFIG lists every task's ``host:port``, ~16-40 bytes a task, and an environment
variable over 131,060 bytes cannot pass through ``exec`` (Linux ``MAX_ARG_STRLEN``) or
Slurm's TaskProlog/SPANK (``MAX_ENV_STRLEN``). The descriptor says the same thing the
way Slurm does (hostlist, task counts, layout, port rule, jobs spec), so
``Plan.from_descriptor`` rebuilds the identical plan inside the Python process, where
``os.environ`` has no size limit until a child is exec'd.

Format (version 1), ``;``-separated ``key=value`` fields after a ``tfslurm1`` tag::

    tfslurm1;nodes=nid[0001-0004];tasks=8(x4);map=block;ports=...;jobs=chief:1,worker:31;host={node}

``nodes`` is an order-preserving Slurm hostlist, ``tasks`` a Slurm task-count list (both as
in ``SLURM_STEP_*``), ``map`` is ``block``, ``cyclic`` or ``runs:`` + the rank -> node index
list in task-count form (``z:`` + base64 of its zlib form when that is shorter), ``local``
(only when local ids are not "order of rank on the node") the same for local ids, ``ports``
the port rule's own encoding, ``jobs`` the resolved jobs in rank order, ``host`` the
host-name template. Unknown keys are an error (a newer writer): better than a wrong plan.

Only the standard library is used.
"""

from __future__ import annotations

from itertools import chain

from tfslurm import hostlist
from tfslurm.errors import HostlistError, PlanError
from tfslurm.errors import shown as _show
from tfslurm.jobspec import is_job_name
from tfslurm.layout import MAX_TASKS, block_layout, cyclic_layout
from tfslurm.numbers import ascii_int
from tfslurm.value import Value

# typing.TYPE_CHECKING without importing typing: the hook imports this module
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

__all__ = ["TAG", "Descriptor", "block_map", "cyclic_map", "local_ids"]

TAG = "tfslurm1"
_KEYS = ("nodes", "tasks", "map", "local", "ports", "jobs", "host")
_REQUIRED = ("nodes", "tasks", "map", "ports", "jobs", "host")
# Longest rank -> node list spelled out before it is zlib-compressed.
_PLAIN_MAP_CHARS = 256
_MAX_DESCRIPTOR_CHARS = 1 << 26


class Descriptor(Value):
    """The fields of a descriptor, decoded (plain data; ``tfslurm.plan`` makes a Plan of it).

    ``ports`` is the port rule's own encoding (``PortRule.encode()``).
    """

    __slots__ = ("counts", "host_template", "jobs", "nodes", "ports", "rank_local", "rank_node")
    __match_args__ = ("nodes", "counts", "rank_node", "rank_local", "ports", "jobs", "host_template")

    def __init__(
        self,
        nodes: tuple[str, ...],
        counts: tuple[int, ...],
        rank_node: tuple[int, ...],
        rank_local: tuple[int, ...],
        ports: str,
        jobs: tuple[tuple[str, int], ...],
        host_template: str,
    ) -> None:
        self.nodes: Final = nodes
        self.counts: Final = counts
        self.rank_node: Final = rank_node
        self.rank_local: Final = rank_local
        self.ports: Final = ports
        self.jobs: Final = jobs
        self.host_template: Final = host_template

    def encode(self, nodelist: str | None = None, tasks_per_node: str | None = None) -> str:
        """The compact text form (see the module docstring).

        ``nodelist`` / ``tasks_per_node``: Slurm's own strings for ``nodes`` / ``counts``
        (``SLURM_STEP_NODELIST`` / ``SLURM_STEP_TASKS_PER_NODE``), used as they are.
        """
        counts = list(self.counts)
        is_block = list(self.rank_node) == sorted(self.rank_node)  # block = non-decreasing
        if is_block:
            layout = "block"
            natural_local = tuple(chain.from_iterable(map(range, counts)))
        else:
            layout = "cyclic" if self.rank_node == cyclic_map(counts) else _encode_list(self.rank_node)
            natural_local = local_ids(self.rank_node, len(self.nodes))
        fields = [
            TAG,
            "nodes=" + (nodelist if nodelist is not None else hostlist.compress(list(self.nodes))),
            "tasks=" + (tasks_per_node if tasks_per_node is not None else hostlist.compress_counts(counts)),
            "map=" + layout,
        ]
        if self.rank_local != natural_local:
            fields.append("local=" + _encode_list(self.rank_local))
        fields += [
            "ports=" + self.ports,
            "jobs=" + ",".join(f"{name}:{count}" for name, count in self.jobs),
            "host=" + self.host_template,
        ]
        for field in fields:
            if ";" in field:
                raise PlanError(f"cannot write a plan descriptor: field {field[:60]!r} contains ';'")
        return ";".join(fields)

    @classmethod
    def decode(cls, text: str) -> Descriptor:
        """Parse and check a descriptor; PlanError names what is wrong with it."""
        values = _fields(text)
        nodes, counts = _nodes_and_counts(text, values)
        num_tasks = sum(counts)
        rank_node, rank_local = _rank_maps(text, values, counts, num_tasks)
        jobs = _jobs(text, values["jobs"], num_tasks)
        if "{node}" not in values["host"]:
            raise PlanError(f"plan descriptor {_show(text)}: host template lacks '{{node}}'")
        return cls(
            nodes=nodes,
            counts=counts,
            rank_node=rank_node,
            rank_local=rank_local,
            ports=values["ports"],
            jobs=jobs,
            host_template=values["host"],
        )


def _fields(text: str) -> dict[str, str]:
    """The ``key=value`` fields of a descriptor, each known and given once, none missing."""
    if not isinstance(text, str):
        raise PlanError(f"plan descriptor {_show(str(text))} is not a string")
    if len(text) > _MAX_DESCRIPTOR_CHARS:
        raise PlanError(f"plan descriptor is {len(text)} characters long, more than any plan needs")
    head, _, rest = text.strip().partition(";")
    if head != TAG:
        raise PlanError(
            f"plan descriptor {_show(text)} does not start with {TAG!r}; "
            "was it written by another tfslurm version?"
        )
    values: dict[str, str] = {}
    for part in rest.split(";"):
        key, sep, value = part.partition("=")
        if not sep or key not in _KEYS:
            raise PlanError(f"plan descriptor {_show(text)}: unknown field {_show(part, 40)}")
        if key in values:
            raise PlanError(f"plan descriptor {_show(text)}: field {key!r} given twice")
        values[key] = value
    missing = [key for key in _REQUIRED if key not in values]
    if missing:
        raise PlanError(f"plan descriptor {_show(text)} lacks {', '.join(missing)}")
    return values


def _nodes_and_counts(text: str, values: dict[str, str]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The node names and their task counts: as many of each, every node with a task."""
    try:
        nodes = tuple(hostlist.expand(values["nodes"]))
        counts = tuple(hostlist.expand_counts(values["tasks"]))
    except HostlistError as exc:
        raise PlanError(f"plan descriptor {_show(text)}: {exc}") from None
    if not nodes or len(nodes) != len(counts):
        raise PlanError(f"plan descriptor {_show(text)}: {len(nodes)} nodes but {len(counts)} task counts")
    if min(counts) < 1:
        raise PlanError(f"plan descriptor {_show(text)}: a node has no task")
    num_tasks = sum(counts)
    if num_tasks > MAX_TASKS:
        raise PlanError(f"plan descriptor {_show(text)}: {num_tasks} tasks, more than tfslurm handles")
    return nodes, counts


def _rank_maps(
    text: str, values: dict[str, str], counts: tuple[int, ...], num_tasks: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Rank -> node index and rank -> local id, checked against the task counts."""
    layout = values["map"]
    if layout == "block":
        rank_node = block_map(counts)
    elif layout == "cyclic":
        rank_node = cyclic_map(counts)
    else:
        rank_node = _decode_list(text, "map", layout, num_tasks)
        _check_map(text, rank_node, counts)
    if "local" not in values:
        return rank_node, local_ids(rank_node, len(counts))
    rank_local = _decode_list(text, "local", values["local"], num_tasks)
    _check_local(text, rank_node, rank_local, counts)
    return rank_node, rank_local


def _jobs(text: str, value: str, num_tasks: int) -> tuple[tuple[str, int], ...]:
    """The resolved jobs in rank order, adding up to the map's tasks."""
    jobs = []
    for part in value.split(","):
        name, _, digits = part.partition(":")
        count = ascii_int(digits)
        if not is_job_name(name) or count is None:
            raise PlanError(f"plan descriptor {_show(text)}: bad jobs entry {_show(part, 40)}")
        jobs.append((name, count))
    if sum(count for _, count in jobs) != num_tasks:
        raise PlanError(
            f"plan descriptor {_show(text)}: jobs add up to "
            f"{sum(count for _, count in jobs)} tasks, the map has {num_tasks}"
        )
    return tuple(jobs)


def block_map(counts: list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """Rank -> node index under Slurm's block layout (``tfslurm.layout.block_layout``)."""
    return block_layout([""] * len(counts), counts).rank_node


def cyclic_map(counts: list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """Rank -> node index under Slurm's cyclic layout (``tfslurm.layout.cyclic_layout``)."""
    return cyclic_layout([""] * len(counts), counts).rank_node


def local_ids(rank_node: tuple[int, ...], num_nodes: int) -> tuple[int, ...]:
    """Local id of every rank when local ids follow rank order on each node (Slurm's rule)."""
    seen = [0] * num_nodes
    out: list[int] = []
    append = out.append
    for node in rank_node:
        append(seen[node])
        seen[node] += 1
    return tuple(out)


def _encode_list(values: tuple[int, ...]) -> str:
    plain = "runs:" + hostlist.compress_counts(values)
    if len(plain) <= _PLAIN_MAP_CHARS:
        return plain
    import base64  # only maps too irregular to spell out pay for base64 and zlib
    import zlib

    packed = "z:" + base64.b64encode(zlib.compress(plain.encode(), 9)).decode()
    return packed if len(packed) < len(plain) else plain


def _decode_list(text: str, key: str, value: str, length: int) -> tuple[int, ...]:
    if value.startswith("z:"):
        import base64
        import binascii
        import zlib

        try:
            # Bound the inflated size: a run list never needs more than ~20 bytes per rank.
            inflater = zlib.decompressobj()
            raw = inflater.decompress(base64.b64decode(value[2:], validate=True), 32 * length + 64)
            if inflater.unconsumed_tail:
                raise PlanError(f"plan descriptor {_show(text)}: field {key!r} inflates too far")
            value = raw.decode()
        except (binascii.Error, zlib.error, UnicodeDecodeError) as exc:
            raise PlanError(f"plan descriptor {_show(text)}: field {key!r} is corrupt ({exc})") from None
    if not value.startswith("runs:"):
        raise PlanError(f"plan descriptor {_show(text)}: field {key!r} is {_show(value, 30)}")
    try:
        values = tuple(hostlist.expand_counts(value[5:]))
    except HostlistError as exc:
        raise PlanError(f"plan descriptor {_show(text)}: field {key!r}: {exc}") from None
    if len(values) != length:
        raise PlanError(
            f"plan descriptor {_show(text)}: field {key!r} lists {len(values)} ranks, expected {length}"
        )
    return values


def _check_map(text: str, rank_node: tuple[int, ...], counts: tuple[int, ...]) -> None:
    seen = [0] * len(counts)
    for node in rank_node:
        if node >= len(counts):
            raise PlanError(
                f"plan descriptor {_show(text)}: rank on node index {node}, only {len(counts)} nodes"
            )
        seen[node] += 1
    if tuple(seen) != counts:
        raise PlanError(f"plan descriptor {_show(text)}: the map does not match the task counts")


def _check_local(
    text: str, rank_node: tuple[int, ...], rank_local: tuple[int, ...], counts: tuple[int, ...]
) -> None:
    per_node: list[set[int]] = [set() for _ in counts]
    for node, local in zip(rank_node, rank_local, strict=True):
        per_node[node].add(local)
    for node, ids in enumerate(per_node):
        if ids != set(range(counts[node])):
            raise PlanError(
                f"plan descriptor {_show(text)}: local ids of node {node} are not 0..{counts[node] - 1}"
            )
