"""The TF cluster of a step: every rank's job, task index, node, host and port.

One :class:`Cluster` is what every task of a step agrees on: it holds nothing about a
particular task (that is :class:`tfslurm.plan.Plan`, a task's view of a cluster), so the
per-node hook builds it once per node and every task's view shares it, with everything
derived from it (hosts, addresses, the cluster's JSON, the descriptor) computed once.

A cluster is a step's layout (:class:`tfslurm.layout.Layout`, the one home of the rank ->
node columns) with jobs, ports and hosts. It is made from a step's layout and port rule
(:func:`tfslurm.plan.plan_for`), from a
plan descriptor (:meth:`Cluster.from_descriptor`), or from the ``host:port`` lists of a
``TF_CONFIG`` (:meth:`Cluster.from_addresses`), where every rank has its own port.

Choices, and why:

* **Columns, not objects.** The layout's tuples are kept as they are and per-rank objects are
  made only when asked, so 100,000 tasks plan in a few tens of milliseconds.
* **Host = the node's NodeName** unless a host template (``{node}-ib``) or an interface's
  addresses (``host_names``, ``tfslurm.iface``) say otherwise.
* **The evaluator rule** (TF's convention, docs/ps.md): the evaluator sees the whole cluster;
  training tasks do not see the evaluator, which runs no server and joins no collective
  (MultiWorkerMirroredStrategy would otherwise wait for it).

Only the standard library is used: this runs in the TaskProlog of every task.
"""

from __future__ import annotations

from tfslurm.errors import PlanError
from tfslurm.errors import clip as _clip
from tfslurm.layout import Layout
from tfslurm.ports import PortRule
from tfslurm.value import Value, cached

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Final

__all__ = ["EVALUATOR", "NODE", "Cluster"]

#: The job that sees the whole cluster and is seen by no training task.
EVALUATOR = "evaluator"
#: The placeholder of a host template: ``{node}-ib``.
NODE = "{node}"


class Cluster(Value):
    """Which rank runs which job where, for every task of a step alike.

    ``layout`` is the step's rank -> node map (:class:`tfslurm.layout.Layout`: ``nodes``,
    ``rank_node``, ``rank_local`` and the per-node counts are its, read through here),
    ``jobs`` ``((name, count), ...)`` in rank order. A rank's port is
    ``ports.port(local id)``, or ``rank_port[r]`` where every rank was given its own (a
    TF_CONFIG). ``nodelist`` and ``tasks_per_node`` are Slurm's own compact forms of
    ``nodes`` and ``counts`` when known (the descriptor uses them instead of compressing).
    Derived values are computed on first use and kept (``__dict__``).
    """

    # Identified by the layout's columns, not by how the layout was made (a descriptor's
    # cluster equals the step's it describes).
    __match_args__ = (
        "nodes",
        "rank_node",
        "rank_local",
        "jobs",
        "ports",
        "rank_port",
        "host_template",
        "host_names",
        "iface",
        "rpc_layer",
    )
    __slots__ = ("layout", *__match_args__[3:], "nodelist", "tasks_per_node", "__dict__")

    def __init__(
        self,
        layout: Layout,
        jobs: tuple[tuple[str, int], ...],
        ports: PortRule | None,
        *,
        rank_port: tuple[int, ...] | None = None,
        host_template: str = NODE,
        host_names: tuple[str, ...] | None = None,
        iface: str | None = None,
        rpc_layer: str | None = None,
        nodelist: str | None = None,
        tasks_per_node: str | None = None,
    ) -> None:
        if (ports is None) == (rank_port is None):
            raise PlanError("a cluster takes a port rule or a port for every rank, not both")
        self.layout: Final = layout
        self.jobs: Final = jobs
        self.ports: Final = ports
        self.rank_port: Final = rank_port
        self.host_template: Final = host_template
        self.host_names: Final = host_names  # each node's address on ``iface`` (tfslurm.iface)
        self.iface: Final = iface
        self.rpc_layer: Final = rpc_layer
        self.nodelist: Final = nodelist
        self.tasks_per_node: Final = tasks_per_node
        if ports is not None and ports.capacity() < max(layout.task_counts):
            most = max(layout.task_counts)
            raise PlanError(
                f"port rule {ports.encode()!r} gives fewer than {most} ports, but a node runs {most} tasks"
            )

    @classmethod
    def from_addresses(
        cls, jobs: Sequence[tuple[str, Sequence[tuple[str, int]]]], rpc_layer: str | None = None
    ) -> Cluster:
        """The cluster of ``(job, [(host, port), ...])`` lists (a TF_CONFIG's), in rank order."""
        nodes: dict[str, int] = {}
        on_node: list[int] = []  # ranks placed on each node so far
        rank_node: list[int] = []
        rank_local: list[int] = []
        rank_port: list[int] = []
        for _, tasks in jobs:
            for host, port in tasks:
                node = nodes.setdefault(host, len(nodes))
                if node == len(on_node):
                    on_node.append(0)
                rank_local.append(on_node[node])
                on_node[node] += 1
                rank_node.append(node)
                rank_port.append(port)
        layout = Layout(tuple(nodes), tuple(rank_node), tuple(rank_local), "given", source="TF_CONFIG")
        return cls(
            layout,
            tuple((name, len(tasks)) for name, tasks in jobs),
            None,
            rank_port=tuple(rank_port),
            rpc_layer=rpc_layer,
        )

    @classmethod
    def from_descriptor(cls, text: str) -> Cluster:
        """The cluster a :meth:`descriptor` text describes."""
        # lazy: the descriptor is read only where a TF_CONFIG was too large to export
        from tfslurm.descriptor import Descriptor

        fields = Descriptor.decode(text)
        try:
            ports = PortRule.decode(fields.ports)
        except ValueError as exc:
            raise PlanError(f"plan descriptor: bad port rule {fields.ports!r}: {exc}") from None
        layout = Layout(fields.nodes, fields.rank_node, fields.rank_local, "given", source="descriptor")
        return cls(layout, fields.jobs, ports, host_template=fields.host_template)

    def on_hosts(self, hosts: tuple[str, ...], iface: str) -> Cluster:
        """This cluster with each node reached at ``hosts`` (its address on ``iface``)."""
        return Cluster(
            self.layout,
            self.jobs,
            self.ports,
            rank_port=self.rank_port,
            host_template=self.host_template,
            host_names=hosts,
            iface=iface,
            rpc_layer=self.rpc_layer,
            nodelist=self.nodelist,
            tasks_per_node=self.tasks_per_node,
        )

    # -- ranks (the layout's columns) ------------------------------------------------------
    @property
    def nodes(self) -> tuple[str, ...]:
        return self.layout.nodes

    @property
    def rank_node(self) -> tuple[int, ...]:
        return self.layout.rank_node

    @property
    def rank_local(self) -> tuple[int, ...]:
        return self.layout.rank_local

    @property
    def counts(self) -> tuple[int, ...]:
        """Tasks on each node, in node order."""
        return self.layout.task_counts

    @property
    def num_tasks(self) -> int:
        return len(self.layout.rank_node)

    def check_rank(self, rank: object) -> int:
        """``rank`` if it is a rank of this cluster; else a PlanError naming it."""
        return self.layout.check_rank(rank)

    def job_of(self, rank: int) -> tuple[str, int]:
        """``(job, index)`` of a rank."""
        start = 0
        self.check_rank(rank)
        for name, count in self.jobs:
            if rank < start + count:
                return name, rank - start
            start += count
        raise AssertionError("jobs do not cover every rank")  # checked when the jobs were parsed

    def rank_of(self, job: str, index: int) -> int:
        """The rank that plays ``job`` task ``index``."""
        start = 0
        for name, count in self.jobs:
            if name == job:
                if not 0 <= index < count:
                    raise PlanError(f"job {job!r} has tasks 0..{count - 1}, not {index}")
                return start + index
            start += count
        raise PlanError(f"the plan has no job {job!r} (jobs: {', '.join(n for n, _ in self.jobs)})")

    def count_of(self, job: str) -> int:
        """How many tasks ``job`` has (0 for a job the cluster does not have)."""
        return next((count for name, count in self.jobs if name == job), 0)

    # -- where ---------------------------------------------------------------------------
    @cached
    def hosts(self) -> tuple[str, ...]:
        """The host name of each node (the node name through the host template)."""
        if self.host_names is not None:
            return self.host_names
        if self.host_template == NODE:
            return self.nodes
        return tuple(self.host_template.replace(NODE, node) for node in self.nodes)

    def host_of(self, rank: int) -> str:
        return self.hosts[self.rank_node[self.check_rank(rank)]]

    def port_of(self, rank: int) -> int:
        if self.rank_port is not None:
            return self.rank_port[self.check_rank(rank)]
        assert self.ports is not None
        return self.ports.port(self.rank_local[self.check_rank(rank)])

    @cached
    def addresses(self) -> tuple[str, ...]:
        """``host:port`` of every rank, in rank order."""
        hosts = [host + ":" for host in self.hosts]
        if self.rank_port is not None:
            return tuple([hosts[n] + str(p) for n, p in zip(self.rank_node, self.rank_port, strict=True)])
        assert self.ports is not None
        ports = [str(self.ports.port(local)) for local in range(max(self.counts))]
        return tuple(
            [hosts[n] + ports[local] for n, local in zip(self.rank_node, self.rank_local, strict=True)]
        )

    def cluster_spec(self, include_evaluator: bool = True) -> dict[str, list[str]]:
        """``{job: [host:port, ...]}`` in rank order (a new dict each call); without the
        evaluator and empty jobs when ``include_evaluator`` is false (what training sees)."""
        out: dict[str, list[str]] = {}
        start = 0
        addresses = self.addresses
        for name, count in self.jobs:
            if include_evaluator or _seen_in_training(name, count):
                out[name] = list(addresses[start : start + count])
            start += count
        return out

    # -- TF_CONFIG -----------------------------------------------------------------------
    def tf_config(self, rank: int) -> str:
        """TF_CONFIG of ``rank`` as compact JSON, the evaluator rule applied."""
        job, index = self.job_of(rank)
        cluster = self._cluster_json if job == EVALUATOR else self._training_cluster_json
        task = '{"type":' + json_string(job) + ',"index":' + str(index) + "}"
        extra = "" if self.rpc_layer is None else ',"rpc_layer":' + json_string(self.rpc_layer)
        return '{"cluster":' + cluster + ',"task":' + task + extra + "}"

    @cached
    def json_floor(self) -> int:
        """A lower bound of the cluster JSON's size, in O(nodes): ``"host:port",`` per rank."""
        if self.rank_port is not None:
            return len(self._cluster_json)
        assert self.ports is not None
        digits = min(len(str(self.ports.port(local))) for local in range(max(self.counts)))
        return sum(
            count * (len(host) + digits + 4) for host, count in zip(self.hosts, self.counts, strict=True)
        )

    @cached
    def _cluster_json(self) -> str:
        return self._json_of(include_evaluator=True)

    @cached
    def _training_cluster_json(self) -> str:
        return self._json_of(include_evaluator=False)

    def _json_of(self, include_evaluator: bool) -> str:
        """The cluster as JSON: the one writer of TF_CONFIG's ``cluster``. Host names are
        checked once; where all are plain ASCII the addresses are joined as they are, several
        times faster than ``json.dumps`` for 100k addresses and the same text."""
        plain = all(map(json_plain, self.hosts))
        if not plain:
            self.require_text_hosts("TF_CONFIG")
        parts = []
        start = 0
        addresses = self.addresses
        for name, count in self.jobs:
            if include_evaluator or _seen_in_training(name, count):
                chunk = addresses[start : start + count]
                body = (
                    ('"' + '","'.join(chunk) + '"' if count else "")
                    if plain
                    else ",".join(map(json_string, chunk))
                )
                parts.append(json_string(name) + ":[" + body + "]")
            start += count
        return "{" + ",".join(parts) + "}"

    def require_text_hosts(self, what: str) -> None:
        """PlanError when a host name is not UTF-8 text (a node name is bytes to Slurm; it
        reaches Python as surrogates), which ``what`` (JSON, a ClusterSpec) cannot carry."""
        for host in self.hosts:
            if not host.isascii():
                try:
                    host.encode("utf-8")
                except UnicodeEncodeError:
                    shown = host.encode("utf-8", "surrogateescape")
                    raise PlanError(
                        f"host {_clip(repr(shown))} is not UTF-8 text, which {what} needs; set "
                        "TFSLURM_HOST_TEMPLATE (or host_template=) to a name of the node that is"
                    ) from None

    # -- descriptor ----------------------------------------------------------------------
    def descriptor(self) -> str:
        """Compact text from which :meth:`from_descriptor` rebuilds this cluster."""
        return self._descriptor

    @cached
    def _descriptor(self) -> str:
        # lazy: only a TF_CONFIG too large to export needs the descriptor
        from tfslurm.descriptor import Descriptor

        if self.ports is None:
            raise PlanError("a cluster with a port for every rank (a TF_CONFIG's) has no descriptor")
        return Descriptor(
            nodes=self.nodes,
            counts=self.counts,
            rank_node=self.rank_node,
            rank_local=self.rank_local,
            ports=self.ports.encode(),
            jobs=self.jobs,
            host_template=self.host_template,
        ).encode(nodelist=self.nodelist, tasks_per_node=self.tasks_per_node)


def _seen_in_training(name: str, count: int) -> bool:
    return name != EVALUATOR and count > 0


def json_plain(text: str) -> bool:
    """True if ``json.dumps`` would write ``text`` unchanged between quotes."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def json_string(text: str) -> str:
    """``json.dumps(text)``, without importing json for the plain names of nearly every plan."""
    if json_plain(text):
        return '"' + text + '"'
    import json

    return json.dumps(text)
