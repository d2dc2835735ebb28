"""Where every rank of the current step runs: the full rank -> (node, local id) map.

Slurm lays out a step's tasks with one of a few algorithms (``slurm_step_layout.c``) over
the step's nodes in node-index order, which is the order of ``SLURM_STEP_NODELIST`` —
not name order, so hosts are never re-sorted here. Most layouts can be rebuilt from the
per-node task counts alone:

* block: node 0 gets ranks ``0..c0-1``, node 1 the next ``c1``, ...
* cyclic: round ``j`` gives one rank to each node (in node order) with more than ``j`` tasks;
* plane=P: round ``j`` gives each node up to ``P`` more ranks, capped by its count;
* arbitrary: rank ``r`` runs on entry ``r`` of the hostfile (``SLURM_HOSTFILE`` or
  ``SLURM_ARBITRARY_NODELIST``); ``SLURM_STEP_NODELIST`` is then sorted and deduplicated;
* heterogeneous steps (``srun A : B``, ``--het-group=0,1``): component 0's ranks come first,
  each component laid out block-wise over its own nodes, while ``SLURM_STEP_NODELIST``
  is the sorted union of all components' nodes.

Every computed map is checked against what this task can see of reality (its
``SLURMD_NODENAME``, ``SLURM_NODEID``, ``SLURM_LOCALID`` and the ranks on its node in
``SLURM_GTIDS``). Where the environment does not determine the map — an unknown
distribution, Slurm >= 26.05 ordering tasks by topology when no ``-m`` was given, a het
component laid out with ``-m`` — the check fails and :class:`LayoutError` says which shape
it is and how to launch it instead, rather than returning a wrong map.
"""

from __future__ import annotations

import operator
from itertools import compress, repeat

from tfslurm import hostlist
from tfslurm.errors import HostlistError, LayoutError, PlanError, SlurmEnvError, bare
from tfslurm.errors import clip as _clip
from tfslurm.numbers import ascii_int, is_int_in
from tfslurm.step import MAX_TASKS, Step
from tfslurm.value import Value, cached, one_of

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the TaskProlog path)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Final, Literal

    #: How a layout's map was made: a Slurm node distribution ("plane" with Layout.plane_size,
    #: "arbitrary" a hostfile's order, "default" no -m, laid out as block, "het" each component
    #: block over its own nodes) or "given" rank by rank (a descriptor, a test).
    Distribution = Literal["block", "cyclic", "plane", "arbitrary", "default", "het", "given"]

__all__ = [
    "DISTRIBUTIONS",
    "MAX_TASKS",
    "Layout",
    "LayoutError",
    "arbitrary_layout",
    "block_layout",
    "cyclic_layout",
    "layout_for",
    "plane_layout",
]


#: Every Distribution.
DISTRIBUTIONS: Final[tuple[Distribution, ...]] = (
    "block", "cyclic", "plane", "arbitrary", "default", "het", "given"
)  # fmt: skip


class Layout(Value):
    """The rank -> node map of a step. Node indices refer to ``nodes``.

    ``distribution`` says how the map was made, with ``plane_size`` for
    ``"plane"`` and ``source`` naming where a map came from (a hostfile, the
    caller's per-node counts; shown by :attr:`method`). ``component_sizes`` is the task count
    of each component of a heterogeneous step (ranks of component 0 first), empty for an
    ordinary step. Derived tables are cached on first use (``__dict__``).
    """

    __match_args__ = (
        "nodes",
        "rank_node",
        "rank_local",
        "distribution",
        "component_sizes",
        "plane_size",
        "source",
    )
    __slots__ = (*__match_args__, "__dict__")

    def __init__(
        self,
        nodes: tuple[str, ...],
        rank_node: tuple[int, ...],
        rank_local: tuple[int, ...],
        distribution: Distribution,
        component_sizes: tuple[int, ...] = (),
        plane_size: int | None = None,
        source: str | None = None,
    ) -> None:
        if distribution not in DISTRIBUTIONS:
            raise TypeError(f"Layout distribution {distribution!r} is not a layout.Distribution")
        self.nodes: Final = nodes
        self.rank_node: Final = rank_node
        self.rank_local: Final = rank_local
        self.distribution: Final = distribution
        self.component_sizes: Final = component_sizes
        self.plane_size: Final = plane_size
        self.source: Final = source

    @property
    def method(self) -> str:
        """The layout for people: ``block``, ``plane=2``, ``default (block)``,
        ``arbitrary (SLURM_HOSTFILE /path)``, ``het(block : block)``, ..."""
        kind = self.distribution
        if kind == "plane":
            return f"plane={self.plane_size}"
        if kind == "default":
            return "default (block)"
        if kind == "het":
            return "het(" + " : ".join("block" for _ in self.component_sizes) + ")"
        if kind == "given":
            return self.source or kind
        return kind if self.source is None else f"{kind} ({self.source})"

    @property
    def num_tasks(self) -> int:
        return len(self.rank_node)

    @property
    def rank_to_node(self) -> list[str]:
        """Element ``r`` is the node name of rank ``r``."""
        nodes = self.nodes
        return [nodes[i] for i in self.rank_node]

    def local_id(self, rank: int) -> int:
        return self.rank_local[self.check_rank(rank)]

    def ranks_on(self, node_index: int) -> tuple[int, ...]:
        """The ranks on node ``node_index``, in local-id order (like ``SLURM_GTIDS``)."""
        node_index = self._check_node(node_index)
        if "_ranks_by_node" in self.__dict__:  # every node's, already made
            return self._ranks_by_node[node_index]
        # one node's (what a task checks of its own node): a C-level pass over the ranks
        return tuple(
            compress(range(len(self.rank_node)), map(operator.eq, self.rank_node, repeat(node_index)))
        )

    def tasks_on(self, node_index: int) -> int:
        return self.task_counts[self._check_node(node_index)]

    @cached
    def task_counts(self) -> tuple[int, ...]:
        """How many tasks each node runs (indices as in ``nodes``)."""
        tally = [0] * len(self.nodes)
        for node in self.rank_node:  # 100k ranks in a few ms
            tally[node] += 1
        return tuple(tally)

    def index_of(self, node_name: str) -> int:
        """Index of ``node_name`` in ``nodes``. Use this (or ``rank_node[SLURM_PROCID]``),
        not SLURM_NODEID: in a het step SLURM_NODEID counts nodes in component order."""
        index = self._node_index.get(node_name)
        if index is None:
            raise LayoutError(f"node {node_name!r} is not one of this step's nodes")
        return index

    @cached
    def _node_index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.nodes)}

    @cached
    def _ranks_by_node(self) -> tuple[tuple[int, ...], ...]:
        by_node: list[list[int]] = [[] for _ in self.nodes]
        for rank, node in enumerate(self.rank_node):
            by_node[node].append(rank)
        return tuple(tuple(ranks) for ranks in by_node)

    def check_rank(self, rank: object) -> int:
        """``rank`` if it is a rank of this layout; else a PlanError naming it (the one
        check of a rank, which a cluster and a plan make through their layout)."""
        if not is_int_in(rank, 0, len(self.rank_node) - 1):
            raise PlanError(f"rank {rank!r} is not in 0..{len(self.rank_node) - 1}")
        assert isinstance(rank, int)
        return rank

    def _check_node(self, node_index: int) -> int:
        if not 0 <= node_index < len(self.nodes):
            raise LayoutError(f"node index {node_index} is outside this step's {len(self.nodes)} nodes")
        return node_index

    def table(self) -> str:
        """An aligned ``rank node local`` table for people."""
        names = self.rank_to_node
        rank_w = max(len("rank"), len(str(len(names) - 1)))
        node_w = max([len("node")] + [len(n) for n in self.nodes])
        lines = [f"{'rank':>{rank_w}}  {'node':<{node_w}}  local"]
        for rank, (name, local) in enumerate(zip(names, self.rank_local, strict=True)):
            lines.append(f"{rank:>{rank_w}}  {name:<{node_w}}  {local:>5}")
        return "\n".join(lines)


# --- layouts from per-node counts -------------------------------------------------------


def _check_counts(nodes: Sequence[str], counts: Sequence[int]) -> int:
    if len(nodes) != len(counts):
        raise LayoutError(
            f"{len(nodes)} nodes but {len(counts)} per-node task counts: "
            "SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE disagree"
        )
    total = sum(counts)
    if total > MAX_TASKS:
        raise LayoutError(f"{total} tasks is more than tfslurm handles ({MAX_TASKS})")
    return total


def block_layout(nodes: Sequence[str], counts: Sequence[int]) -> Layout:
    """Node 0 gets the first ``counts[0]`` ranks, node 1 the next ``counts[1]``, ..."""
    _check_counts(nodes, counts)
    rank_node: list[int] = []
    rank_local: list[int] = []
    for index, count in enumerate(counts):
        rank_node.extend(repeat(index, count))
        rank_local.extend(range(count))
    return Layout(tuple(nodes), tuple(rank_node), tuple(rank_local), "block")


def plane_layout(nodes: Sequence[str], counts: Sequence[int], size: int) -> Layout:
    """Round ``j`` gives each node, in node order, up to ``size`` more ranks (its count caps)."""
    if size < 1:
        raise LayoutError(f"plane size {size} must be at least 1")
    _check_counts(nodes, counts)
    if size == 1:
        return _cyclic(nodes, counts, "plane", 1)
    rank_node: list[int] = []
    rank_local: list[int] = []
    active = [i for i, c in enumerate(counts) if c > 0]
    start = 0  # ranks each still-active node already has: size * round
    while active:
        for index in active:
            take = min(size, counts[index] - start)
            rank_node.extend(repeat(index, take))
            rank_local.extend(range(start, start + take))
        start += size
        active = [i for i in active if counts[i] > start]
    return Layout(tuple(nodes), tuple(rank_node), tuple(rank_local), "plane", plane_size=size)


def cyclic_layout(nodes: Sequence[str], counts: Sequence[int]) -> Layout:
    """Round ``j`` gives one rank to each node, in node order, that has more than ``j``."""
    _check_counts(nodes, counts)
    return _cyclic(nodes, counts, "cyclic")


def _cyclic(
    nodes: Sequence[str], counts: Sequence[int], kind: Distribution, plane_size: int | None = None
) -> Layout:
    rank_node: list[int] = []
    rank_local: list[int] = []
    active = [i for i, c in enumerate(counts) if c > 0]
    round_ = 0
    while active:
        # The active set only changes when a node runs out: repeat it until the next one does.
        until = min(counts[i] for i in active)
        width = len(active)
        for local in range(round_, until):
            rank_node.extend(active)
            rank_local.extend(repeat(local, width))
        round_ = until
        active = [i for i in active if counts[i] > round_]
    return Layout(tuple(nodes), tuple(rank_node), tuple(rank_local), kind, plane_size=plane_size)


def arbitrary_layout(nodes: Sequence[str], hosts: Sequence[str], source: str | None = None) -> Layout:
    """Rank ``r`` runs on ``hosts[r]``; ``nodes`` is the step's node list (index order);
    ``source`` names where ``hosts`` came from (``Layout.source``)."""
    method = "arbitrary" if source is None else f"arbitrary ({source})"
    if len(hosts) > MAX_TASKS:
        raise LayoutError(f"{len(hosts)} tasks is more than tfslurm handles ({MAX_TASKS})")
    index_of = {name: i for i, name in enumerate(nodes)}
    try:
        rank_node = [index_of[host] for host in hosts]
    except KeyError:
        rank, host = next((r, h) for r, h in enumerate(hosts) if h not in index_of)
        raise LayoutError(
            f"{method}: rank {rank} is placed on {host!r}, which is not in the step's "
            f"node list {hostlist.compress(list(nodes))}"
        ) from None
    seen = [0] * len(nodes)
    rank_local = [0] * len(rank_node)
    for rank, index in enumerate(rank_node):
        rank_local[rank] = seen[index]
        seen[index] += 1
    return Layout(tuple(nodes), tuple(rank_node), tuple(rank_local), "arbitrary", source=source)


# --- the current step ---------------------------------------------------------------------


def layout_for(step: Step) -> Layout:
    """The verified rank -> node map of ``step`` (a task of a step); LayoutError otherwise."""
    nodelist = step.require_nodelist()
    tasks_per_node = step.require_tasks_per_node()
    try:
        nodes = hostlist.expand(nodelist)
    except HostlistError as exc:
        raise SlurmEnvError(f"SLURM_STEP_NODELIST: {exc}") from None
    try:
        counts = hostlist.expand_counts(tasks_per_node)
    except HostlistError as exc:
        raise SlurmEnvError(f"SLURM_STEP_TASKS_PER_NODE: {exc}") from None
    _check_counts(nodes, counts)
    if 0 in counts:
        raise SlurmEnvError(
            f"SLURM_STEP_TASKS_PER_NODE={_clip(tasks_per_node)!r} gives node "
            f"{bare(nodes[counts.index(0)])} no task; Slurm starts at least one task on every node "
            "of a step: these are not a step's variables"
        )
    if len(set(nodes)) != len(nodes):
        raise LayoutError(f"SLURM_STEP_NODELIST={nodelist!r} names a node twice")

    het = _het_participants(step, nodes)
    if het is None:  # checked again by _verify; here before a layout of millions is built
        _check_num_tasks(step, sum(counts))
    if het is not None:
        layout = _het_layout(step, nodes, counts, het)
        # In a het step SLURM_NODEID counts nodes in component order (component 0's nodes
        # first), not in the sorted SLURM_STEP_NODELIST (observed on 22.05).
        node_order = [name for _component, comp_nodes in het for name in comp_nodes]
        _verify(step, layout, counts, het=True, node_order=node_order)
        return layout

    kind, plane = _node_distribution(step)
    if kind == "arbitrary":
        return _arbitrary_for(step, nodes, counts)
    if kind == "cyclic":
        layout = cyclic_layout(nodes, counts)
    elif kind == "plane":
        if plane is None:
            raise LayoutError(
                f"SLURM_DISTRIBUTION={_clip(step.distribution or '')!r} but SLURM_DIST_PLANESIZE is not set"
            )
        layout = plane_layout(nodes, counts, plane)
    elif kind == "block":
        layout = block_layout(nodes, counts)
    elif kind == "default":
        # Slurm <= 25.11 lays out a step without -m as block (cyclic when every node has
        # one task, which is the same map). Slurm >= 26.05 with a topology plugin orders
        # by topology instead, which the environment does not show: _verify catches it.
        layout = block_layout(nodes, counts)
        layout = Layout(layout.nodes, layout.rank_node, layout.rank_local, "default")
    else:
        raise LayoutError(
            f"SLURM_DISTRIBUTION={_clip(step.distribution or '')!r} is a distribution tfslurm cannot "
            "reproduce; launch the step with -m block, -m cyclic, -m plane=N or -m arbitrary"
        )
    _verify(step, layout, counts)
    return layout


def _node_distribution(step: Step) -> tuple[Distribution | None, int | None]:
    """The node-level part of SLURM_DISTRIBUTION (block, cyclic, plane, arbitrary, default)
    and the plane size; ``(None, None)`` for a distribution tfslurm does not know."""
    raw = step.distribution
    if raw is None:
        return "default", None
    first = raw.split(",", 1)[0].split(":", 1)[0].strip().lower()
    plane = step.plane_size
    if first.startswith("plane="):
        size = first.partition("=")[2]
        plane = ascii_int(size)
        if plane is None or plane < 1:
            raise SlurmEnvError(f"SLURM_DISTRIBUTION={_clip(raw)!r}: bad plane size")
        first = "plane"
    if first in ("", "*"):
        return "default", None
    kind = one_of(first, _NODE_DISTRIBUTIONS)
    return (kind, plane) if kind is not None else (None, None)


# SLURM_DISTRIBUTION's node-level words tfslurm lays out.
_NODE_DISTRIBUTIONS: Final[tuple[Distribution, ...]] = ("block", "cyclic", "plane", "arbitrary")


def _arbitrary_for(step: Step, nodes: list[str], counts: list[int]) -> Layout:
    """Try each hostfile source srun may have used; keep the one reality agrees with."""
    sources: list[tuple[str, list[str]]] = []
    errors: list[str] = []
    total = sum(counts)
    if step.hostfile:
        try:
            from tfslurm.hostfile import read_hostfile  # lazy: only -m arbitrary steps read one

            hosts = read_hostfile(step.hostfile, total)
            sources.append((f"SLURM_HOSTFILE {step.hostfile}", hosts))
        except LayoutError as exc:
            errors.append(str(exc))
    if step.arbitrary_nodelist:
        try:
            hosts = hostlist.expand(step.arbitrary_nodelist)
        except HostlistError as exc:
            errors.append(f"SLURM_ARBITRARY_NODELIST: {exc}")
        else:
            sources.append(("SLURM_ARBITRARY_NODELIST", hosts))
    if not sources:
        why = "; ".join(errors) or ("neither SLURM_HOSTFILE nor SLURM_ARBITRARY_NODELIST is set in this task")
        raise LayoutError(f"-m arbitrary step: the task order cannot be known: {why}")
    for source, hosts in sources:
        if len(hosts) < total:
            errors.append(f"arbitrary ({source}) lists {len(hosts)} hosts for {total} tasks")
            continue
        try:
            layout = arbitrary_layout(nodes, hosts[:total], source)
            _verify(step, layout, counts)
        except LayoutError as exc:
            errors.append(str(exc))
            continue
        return layout
    raise LayoutError("-m arbitrary step: " + "; ".join(errors))


# --- heterogeneous steps ------------------------------------------------------------------


def _het_participants(step: Step, nodes: list[str]) -> list[tuple[int, list[str]]] | None:
    """(component index, its nodes in the step) for a step spanning >= 2 components."""
    if len(step.het) < 2:
        return None
    in_step = set(nodes)
    owner: dict[str, int] = {}
    parts: list[tuple[int, list[str]]] = []
    for component in step.het:
        if not component.nodelist:
            continue
        try:
            comp_nodes = hostlist.expand(component.nodelist)
        except HostlistError as exc:
            raise SlurmEnvError(f"SLURM_JOB_NODELIST_HET_GROUP_{component.index}: {exc}") from None
        used = [n for n in comp_nodes if n in in_step]
        for name in used:
            if name in owner:
                raise LayoutError(
                    f"het components {owner[name]} and {component.index} share node {bare(name)}: "
                    "the per-node task counts cannot be split between them"
                )
            owner[name] = component.index
        if used:
            parts.append((component.index, used))
    if len(parts) < 2:
        return None  # a step of one component (--het-group=N): an ordinary step
    missing = [n for n in nodes if n not in owner]
    if missing:
        raise LayoutError(
            f"het step: node {bare(missing[0])} of SLURM_STEP_NODELIST belongs to no het component"
        )
    return parts


def _het_layout(
    step: Step, nodes: list[str], counts: list[int], parts: list[tuple[int, list[str]]]
) -> Layout:
    # srun numbers component 0's tasks first, then component 1's, ...; within a component
    # Slurm lays tasks out over the component's own nodes. SLURM_DISTRIBUTION cannot tell
    # how: in a het step every task sees one component's value (observed: whichever
    # component srun launched last), so the default (block) layout is assumed and verified.
    index_of = {name: i for i, name in enumerate(nodes)}
    rank_node: list[int] = []
    rank_local: list[int] = []
    sizes: list[int] = []
    for _component, comp_nodes in parts:
        before = len(rank_node)
        for name in comp_nodes:  # block over the component's nodes, in its own order
            index = index_of[name]
            rank_node.extend(repeat(index, counts[index]))
            rank_local.extend(range(counts[index]))
        sizes.append(len(rank_node) - before)
    return Layout(tuple(nodes), tuple(rank_node), tuple(rank_local), "het", tuple(sizes))


# --- verification -------------------------------------------------------------------------


def _check_num_tasks(step: Step, total: int) -> None:
    if step.num_tasks is not None and step.num_tasks != total:
        raise LayoutError(
            f"SLURM_STEP_NUM_TASKS={step.num_tasks} but SLURM_STEP_TASKS_PER_NODE="
            f"{step.tasks_per_node!r} adds up to {total}"
        )


def _verify(
    step: Step,
    layout: Layout,
    counts: list[int],
    het: bool = False,
    node_order: list[str] | None = None,
) -> None:
    """Check the map against this task's own view; LayoutError naming the shape if off.

    ``node_order`` lists node names by SLURM_NODEID where that is not the order of
    ``layout.nodes`` (heterogeneous steps).
    """
    _check_num_tasks(step, layout.num_tasks)
    if step.num_nodes is not None and step.num_nodes != len(layout.nodes):
        raise LayoutError(
            f"SLURM_STEP_NUM_NODES={step.num_nodes} but SLURM_STEP_NODELIST="
            f"{step.nodelist!r} has {len(layout.nodes)} nodes"
        )
    per_node = list(layout.task_counts)
    if per_node != list(counts):
        raise LayoutError(
            f"{layout.method} puts {hostlist.compress_counts(per_node)} tasks per node but "
            f"SLURM_STEP_TASKS_PER_NODE={step.tasks_per_node!r}"
        )
    name = _own_node(step, layout, node_order)
    if name is None:
        return  # nothing of this task's own placement to check against (not in a task)
    nodeid = layout.index_of(name)
    expected = layout.ranks_on(nodeid)
    seen = step.gtids
    if seen is not None and step.procid is not None and step.procid not in seen:
        raise LayoutError(
            f"SLURM_PROCID={step.procid} is not among this node's SLURM_GTIDS="
            f"{_clip(','.join(map(str, seen)))}: the task's Slurm variables contradict each other"
        )
    mine_ok = True
    if step.procid is not None:
        mine_ok = step.procid < layout.num_tasks and layout.rank_node[step.procid] == nodeid
        if mine_ok and step.localid is not None:
            mine_ok = layout.rank_local[step.procid] == step.localid
    if (seen is None or tuple(seen) == expected) and mine_ok:
        return
    shown = ",".join(map(str, seen)) if seen is not None else f"{step.procid} (local {step.localid})"
    predicted = _clip(",".join(map(str, expected)))
    raise LayoutError(
        f"{_shape(step, layout, het)}: Slurm placed ranks {_clip(shown)} on {name} "
        f"but {layout.method} layout predicts {predicted}; {_fix(step, layout, het)}"
    )


def _own_node(step: Step, layout: Layout, node_order: list[str] | None) -> str | None:
    """The node this task runs on, from SLURM_NODEID (checked against SLURMD_NODENAME), else
    from SLURMD_NODENAME alone, else the node whose ranks are SLURM_GTIDS; None when the
    task says nothing of where it runs. Without SLURM_NODEID the placement is still checked
    with what the task does have, never skipped."""
    nodeid = step.nodeid
    if nodeid is not None:
        by_nodeid = list(layout.nodes) if node_order is None else node_order
        if nodeid >= len(by_nodeid):
            raise LayoutError(
                f"SLURM_NODEID={nodeid} is outside SLURM_STEP_NODELIST={_clip(step.nodelist or '')!r}"
            )
        name = by_nodeid[nodeid]
        if step.node_name is not None and step.node_name != name:
            where = "SLURM_STEP_NODELIST" if node_order is None else "the het components' node lists"
            raise LayoutError(
                f"SLURM_NODEID={nodeid} names {_clip(name)!r} in {where} ({_clip(step.nodelist or '')!r}), "
                f"but this task runs on SLURMD_NODENAME={_clip(step.node_name)!r}"
            )
        return name
    if step.node_name is not None:
        if step.node_name not in layout._node_index:
            raise LayoutError(
                f"SLURMD_NODENAME={_clip(step.node_name)!r} is not in SLURM_STEP_NODELIST="
                f"{_clip(step.nodelist or '')!r}: the task's Slurm variables contradict each other"
            )
        return step.node_name
    if step.gtids is not None:
        wanted = tuple(step.gtids)
        for index, name in enumerate(layout.nodes):
            if layout._ranks_by_node[index] == wanted:
                return name
        raise LayoutError(
            f"no node of the {layout.method} layout has ranks SLURM_GTIDS="
            f"{_clip(','.join(map(str, wanted)))}; {_fix(step, layout, node_order is not None)}"
        )
    return None


def _shape(step: Step, layout: Layout, het: bool) -> str:
    dist = f"-m {bare(step.distribution)}" if step.distribution else "no -m"
    kind = "heterogeneous step" if het else "step"
    return (
        f"{kind} {step.job_id}.{step.step_id} ({dist}, nodes {bare(step.nodelist or '')}, "
        f"tasks per node {bare(step.tasks_per_node or '')})"
    )


def _fix(step: Step, layout: Layout, het: bool) -> str:
    if het:
        return (
            "Slurm does not export each het component's distribution, so tfslurm supports "
            "het steps whose components use the default (block) layout: drop -m from them"
        )
    if step.distribution is None:
        return (
            "without -m this Slurm orders tasks in a way the environment does not show "
            "(Slurm >= 26.05 follows the network topology); launch with -m block"
        )
    return "the environment does not match Slurm's documented layout; launch with -m block"
