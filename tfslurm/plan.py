"""The cluster plan: every rank's TF job, task index, ``host:port`` and GPUs.

Built from the step (``tfslurm.step``), its rank -> node layout (``tfslurm.layout``), a jobs
spec (``tfslurm.jobspec``), the port rule (``tfslurm.ports``) and this task's GPU
assignment (``tfslurm.gpus``). Every task of a step computes the same plan from the same
Slurm variables, so no task has to talk to another to agree on the cluster.

Choices, and why:

* **Jobs in the order written.** ``"chief:1,worker:*"`` makes rank 0 the chief
  (``PlanOptions.job_order`` may ask for another; TF's resolver sorts job names, which
  ``SlurmClusterResolver`` keeps for compatibility: ``tfslurm.tfcompat``).
* **Host = the node's NodeName**, the name in ``SLURM_STEP_NODELIST`` and
  ``SLURMD_NODENAME``. Every task knows it without asking slurmctld (``NodeAddr`` needs an
  RPC per task, or slurm.conf, which configless sites do not have), and Slurm's defaults make
  NodeName the resolvable host name (NodeHostname defaults to NodeName, NodeAddr to
  NodeHostname). Sites whose NodeNames do not resolve, or that want another interface, set a
  host template such as ``{node}-ib`` or ``{node}.cluster.example.org``
  (``host_template=`` or ``TFSLURM_HOST_TEMPLATE``).
* **Columns, not objects.** A plan keeps the layout's tuples and builds ``TaskPlan`` objects
  only when asked, so 100,000 tasks plan in a few tens of milliseconds.
* **GPUs**: this task's own devices come from ``assign_gpus``. For another rank the plan
  shows what this task can know: ranks on its own node when the node's device list is split
  among its tasks, every rank when the device list was given for every node
  (``gpus_per_node=``); otherwise ``None`` ("not known here").

Only the standard library is used: this runs in the TaskProlog of every task.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import cached_property

from tfslurm import records
from tfslurm.errors import PlanError
from tfslurm.errors import clip as _clip
from tfslurm.jobspec import JobOrder, JobsSpec, parse_jobs
from tfslurm.numbers import is_int_in
from tfslurm.records import field, record
from tfslurm.settings import DESCRIPTOR_VARIABLE, HOST_TEMPLATE_VARIABLE, JOBS_VARIABLE

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # the modules below are imported when a plan is made, not at import
    from tfslurm.gpus import GpuAssignment
    from tfslurm.layout import Layout
    from tfslurm.ports import PortRule
    from tfslurm.step import Step

__all__ = [
    "DESCRIPTOR_VARIABLE",
    "HOST_TEMPLATE_VARIABLE",
    "JOBS_VARIABLE",
    "TF_CONFIG_MAX_BYTES",
    "GpuPlan",
    "GpuScope",
    "Plan",
    "PlanOptions",
    "TaskPlan",
    "gpu_plan_for",
    "plan_for",
    "plan_from_environ",
    "plan_from_step",
    "tf_config_json",
    "training_cluster",
]

#: Longest TF_CONFIG value that can pass through exec and Slurm's environment code:
#: ``TF_CONFIG=`` + value + NUL must fit in 131,072 bytes (slurm-facts §4.4).
TF_CONFIG_MAX_BYTES = 131_060
_NODE = "{node}"


@record
class TaskPlan:
    """One rank of the plan. ``gpus`` is None when this task cannot know that rank's GPUs."""

    rank: int
    job: str
    index: int
    node: str
    host: str
    port: int
    gpus: tuple[str, ...] | None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class GpuScope(enum.Enum):
    """The nodes whose device list :attr:`GpuPlan.node_devices` is."""

    NONE = "no node"  # no node's: only this task's own devices are known
    NODE = "one node"  # node GpuPlan.node's (this task's own node)
    EVERY_NODE = "every node"  # every node's (TF's gpus_per_node: devices 0..N-1 everywhere)


@record
class GpuPlan:
    """What this task knows about the step's GPUs (see the module docstring).

    ``node_devices`` is the device list of the node(s) ``scope`` says (for
    :attr:`GpuScope.NODE`, node index ``node``), shared out among each node's tasks with
    ``split_devices``; ``split=False`` means no other rank's devices can be known (e.g.
    Slurm bound devices per task).
    """

    own: tuple[str, ...]
    variable: str
    source: str
    node_devices: tuple[str, ...] = ()
    scope: GpuScope = GpuScope.NONE
    node: int | None = None
    gpus_per_task: int | None = None
    split: bool = False
    env: Mapping[str, str] = field(default_factory=dict, compare=False)
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def knows(self, node: int) -> bool:
        """Whether the GPUs of the ranks on node index ``node`` follow from ``node_devices``."""
        if not self.split:
            return False
        return self.scope is GpuScope.EVERY_NODE or (self.scope is GpuScope.NODE and node == self.node)


@record(eq=False)
class Plan:
    """The plan of one step. Build it with :func:`plan_for` or :meth:`from_descriptor`.

    ``jobs`` is ``((name, count), ...)`` in rank order; ``rank`` is this task's rank (None
    when the plan was not made by a task of the step).
    """

    nodes: tuple[str, ...]
    rank_node: tuple[int, ...]
    rank_local: tuple[int, ...]
    jobs: tuple[tuple[str, int], ...]
    ports: PortRule
    host_template: str = _NODE
    rank: int | None = None
    gpus: GpuPlan | None = None
    rpc_layer: str | None = None
    # Slurm's own compact forms of ``nodes`` and ``counts`` when known (saves compressing).
    nodelist: str | None = field(default=None, compare=False, repr=False)
    tasks_per_node: str | None = field(default=None, compare=False, repr=False)
    # Each node's host when not from the template: its address on ``iface`` (tfslurm.iface).
    host_names: tuple[str, ...] | None = None
    iface: str | None = None

    # -- shape ---------------------------------------------------------------------------
    @property
    def num_tasks(self) -> int:
        return len(self.rank_node)

    @cached_property
    def counts(self) -> tuple[int, ...]:
        """Tasks on each node, in node order."""
        return _count_per_node(self.rank_node, len(self.nodes))

    @cached_property
    def hosts(self) -> tuple[str, ...]:
        """The host name of each node (the node name through the host template)."""
        if self.host_names is not None:
            return self.host_names
        if self.host_template == _NODE:
            return self.nodes
        return tuple(self.host_template.replace(_NODE, node) for node in self.nodes)

    def host_of(self, rank: int) -> str:
        return self.hosts[self.rank_node[self._check_rank(rank)]]

    def port_of(self, rank: int) -> int:
        return self.ports.port(self.rank_local[self._check_rank(rank)])

    def job_of(self, rank: int) -> tuple[str, int]:
        """``(job, index)`` of a rank."""
        start = 0
        self._check_rank(rank)
        for name, count in self.jobs:
            if rank < start + count:
                return name, rank - start
            start += count
        raise AssertionError("jobs do not cover every rank")  # checked when built

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

    def gpus_of(self, rank: int) -> tuple[str, ...] | None:
        """A rank's devices as far as this task can know them (None: not known here)."""
        self._check_rank(rank)
        gpus = self.gpus
        if gpus is None:
            return None
        if rank == self.rank:
            return gpus.own
        node = self.rank_node[rank]
        if not gpus.knows(node):
            return None
        from tfslurm.gpus import split_devices

        return split_devices(gpus.node_devices, self.counts[node], self.rank_local[rank], gpus.gpus_per_task)

    # -- TF views ------------------------------------------------------------------------
    @cached_property
    def addresses(self) -> tuple[str, ...]:
        """``host:port`` of every rank, in rank order."""
        hosts = [host + ":" for host in self.hosts]
        ports = [str(self.ports.port(local)) for local in range(max(self.counts))]
        return tuple(
            [hosts[n] + ports[local] for n, local in zip(self.rank_node, self.rank_local, strict=True)]
        )

    def cluster_spec(self) -> dict[str, list[str]]:
        """``{job: [host:port, ...]}`` in rank order (a new dict each call)."""
        out: dict[str, list[str]] = {}
        start = 0
        addresses = self.addresses
        for name, count in self.jobs:
            out[name] = list(addresses[start : start + count])
            start += count
        return out

    @cached_property
    def _cluster_json_floor(self) -> int:
        """A lower bound of the cluster JSON's size, in O(nodes): ``"host:port",`` per rank."""
        digits = min(len(str(self.ports.port(local))) for local in range(max(self.counts)))
        return sum(
            count * (len(host) + digits + 4) for host, count in zip(self.hosts, self.counts, strict=True)
        )

    @cached_property
    def _cluster_json(self) -> str:
        return self._cluster_json_of(include_evaluator=True)

    @cached_property
    def _training_cluster_json(self) -> str:
        return self._cluster_json_of(include_evaluator=False)

    def _cluster_json_of(self, include_evaluator: bool) -> str:
        names = [name for name, _ in self.jobs]
        if not all(map(_json_plain, names)) or not all(map(_json_plain, self.hosts)):
            import json  # only names that need escaping pay for json

            self.require_text_hosts("TF_CONFIG")
            cluster = self.cluster_spec()
            return json.dumps(
                cluster if include_evaluator else training_cluster(cluster), separators=(",", ":")
            )
        # Plain ASCII needs no escaping: joining is several times faster than json.dumps
        # for 100k addresses, and gives the same text.
        parts = []
        start = 0
        addresses = self.addresses
        for name, count in self.jobs:
            body = '"' + '","'.join(addresses[start : start + count]) + '"' if count else ""
            if include_evaluator or _seen_in_training(name, count):
                parts.append(f'"{name}":[{body}]')
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

    def tf_config(self, rank: int | None = None) -> str:
        """TF_CONFIG of a rank (default: this task) as compact JSON; the evaluator rule of
        :func:`tf_config_json` (training tasks do not see the evaluator)."""
        rank = self._own_rank("TF_CONFIG") if rank is None else rank
        job, index = self.job_of(rank)
        cluster = self._cluster_json if job == EVALUATOR else self._training_cluster_json
        return _tf_config_text(cluster, job, index, self.rpc_layer)

    def task_env(self) -> dict[str, str]:
        """The variables this task needs: TF_CONFIG (or the descriptor if it is too big), GPUs."""
        out: dict[str, str] = {}
        if self._cluster_json_floor > TF_CONFIG_MAX_BYTES:
            out[DESCRIPTOR_VARIABLE] = self.descriptor()  # clearly too big: skip building it
        else:
            config = self.tf_config()
            if len(config.encode()) <= TF_CONFIG_MAX_BYTES:
                out["TF_CONFIG"] = config
            else:
                out[DESCRIPTOR_VARIABLE] = self.descriptor()
        if self.gpus is not None:
            out.update(self.gpus.env)
        return out

    def for_task(self, rank: int, gpus: GpuPlan | None) -> Plan:
        """The plan another task of the same step sees (its rank, its GPUs), sharing what is
        the same for every task — node counts, hosts, addresses, the cluster's JSON — so the
        per-node hook (``tfslurm prolog --node``) builds the step's plan once per node."""
        other = records.replace(self, rank=self._check_rank(rank), gpus=gpus)
        for name in _STEP_WIDE_CACHES:
            if name in self.__dict__:
                other.__dict__[name] = self.__dict__[name]
        return other

    # -- tasks ---------------------------------------------------------------------------
    def task_of(self, rank: int) -> TaskPlan:
        job, index = self.job_of(rank)
        node = self.rank_node[rank]
        return TaskPlan(  # every field, in order: the quickest way a record is made
            rank, job, index, self.nodes[node], self.hosts[node], self.port_of(rank), self.gpus_of(rank)
        )

    @cached_property
    def tasks(self) -> tuple[TaskPlan, ...]:
        """Every rank as a TaskPlan (built on first use: large plans never need it)."""
        return tuple(self.task_of(rank) for rank in range(self.num_tasks))

    @property
    def own(self) -> TaskPlan:
        """This task's TaskPlan."""
        return self.task_of(self._own_rank("its own task"))

    def table(self) -> str:
        """An aligned text table: rank, job, task, host:port, GPUs ('?' = not known here)."""
        rows = [("RANK", "JOB", "TASK", "HOST:PORT", "GPUS")]
        addresses = self.addresses
        for rank in range(self.num_tasks):
            job, index = self.job_of(rank)
            gpus = self.gpus_of(rank)
            shown = "?" if gpus is None else (",".join(gpus) or "-")
            mark = " *" if rank == self.rank else ""
            rows.append((str(rank), job, str(index), addresses[rank], shown + mark))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        return "\n".join(
            "  ".join(
                [
                    row[0].rjust(widths[0]),
                    row[1].ljust(widths[1]),
                    row[2].rjust(widths[2]),
                    row[3].ljust(widths[3]),
                    row[4],
                ]
            ).rstrip()
            for row in rows
        )

    # -- descriptor ----------------------------------------------------------------------
    def descriptor(self) -> str:
        """Compact text from which :meth:`from_descriptor` rebuilds this plan (no GPUs)."""
        return self._descriptor

    @cached_property
    def _descriptor(self) -> str:
        from tfslurm.descriptor import Descriptor  # only a too-large TF_CONFIG needs it

        return Descriptor(
            nodes=self.nodes,
            counts=self.counts,
            rank_node=self.rank_node,
            rank_local=self.rank_local,
            ports=self.ports.encode(),
            jobs=self.jobs,
            host_template=self.host_template,
        ).encode(nodelist=self.nodelist, tasks_per_node=self.tasks_per_node)

    @classmethod
    def from_descriptor(cls, text: str, rank: int | None = None) -> Plan:
        """Rebuild a plan from :meth:`descriptor` text; ``rank`` = the calling task's rank.

        GPUs are not part of a descriptor (each task gets its own in CUDA_VISIBLE_DEVICES).
        """
        from tfslurm.descriptor import Descriptor
        from tfslurm.ports import PortRule

        fields = Descriptor.decode(text)
        try:
            ports = PortRule.decode(fields.ports)
        except ValueError as exc:
            raise PlanError(f"plan descriptor: bad port rule {fields.ports!r}: {exc}") from None
        plan = cls(
            nodes=fields.nodes,
            rank_node=fields.rank_node,
            rank_local=fields.rank_local,
            jobs=fields.jobs,
            ports=ports,
            host_template=fields.host_template,
        )
        plan._check_ports()
        if rank is not None:
            plan._check_rank(rank)
            plan = records.replace(plan, rank=rank)
        return plan

    def require_rank(self, what: str) -> int:
        """This task's rank; PlanError naming ``what`` when the plan was not made by a task."""
        return self._own_rank(what)

    def on_hosts(self, hosts: tuple[str, ...], iface: str) -> Plan:
        """This plan with each node reached at ``hosts`` (its address on ``iface``)."""
        return records.replace(self, host_names=hosts, iface=iface)

    # -- internals -----------------------------------------------------------------------
    def _check_rank(self, rank: int) -> int:
        if not is_int_in(rank, 0, len(self.rank_node) - 1):
            raise PlanError(f"rank {rank!r} is not in 0..{len(self.rank_node) - 1}")
        return rank

    def _own_rank(self, what: str) -> int:
        if self.rank is None:
            raise PlanError(f"cannot give {what}: this plan was not made by a task of the step")
        return self.rank

    def _check_ports(self) -> None:
        """Every task on a node must get its own port (the rule decides how many it has)."""
        most = max(self.counts)
        if self.ports.capacity() < most:
            raise PlanError(
                f"port rule {self.ports.encode()!r} gives fewer than {most} ports, "
                f"but a node runs {most} tasks"
            )


@record
class PlanOptions:
    """How :func:`plan_for` makes a plan; each default is tfslurm's own choice. Checked when
    made (the errors :func:`plan_for` would raise for them).

    * ``port_base``: port of local id 0 on every node (default: ``TFSLURM_PORT_BASE``, else
      Slurm's reserved ports, else derived from job and step id: ``tfslurm.ports``).
    * ``gpus_per_task``, ``gpus_per_node``: as :func:`tfslurm.gpus.assign_gpus` takes them.
    * ``host_template``: a node's host name, e.g. ``"{node}-ib"`` (default:
      ``TFSLURM_HOST_TEMPLATE``, else the node name).
    * ``layout``: a rank -> node map to use instead of the step's (``layout_for``).
    * ``rpc_layer``: TF_CONFIG's ``rpc_layer`` (default: none written).
    * ``job_order``: the order in which jobs take ranks (default: as written).
    * ``assign``: ``False`` skips this task's GPU assignment (plans made away from the task).
    * ``gpu_plan``: this task's GPUs as made by :func:`gpu_plan_for` with other settings.
    """

    port_base: int | None = None
    gpus_per_task: int | None = None
    gpus_per_node: int | None = None
    host_template: str | None = None
    layout: Layout | None = None
    rpc_layer: str | None = None
    job_order: JobOrder = JobOrder.WRITTEN
    assign: bool = True
    gpu_plan: GpuPlan | None = None

    def __post_init__(self) -> None:
        if self.port_base is not None:
            from tfslurm.ports import check_port_base

            check_port_base(self.port_base, "port_base")
        if self.gpus_per_task is not None or self.gpus_per_node is not None:
            from tfslurm.gpus import check_gpu_count

            for name in ("gpus_per_task", "gpus_per_node"):
                if getattr(self, name) is not None:
                    check_gpu_count(name, getattr(self, name))
        if self.host_template is not None:
            _host_template(self.host_template, None)
        if not isinstance(self.job_order, JobOrder):
            raise PlanError(f"job_order {self.job_order!r} is not a tfslurm.jobspec.JobOrder")


_DEFAULT_OPTIONS = PlanOptions()


def plan_for(step: Step, jobs: JobsSpec = None, options: PlanOptions = _DEFAULT_OPTIONS) -> Plan:
    """The plan of ``step`` as seen by this task.

    ``jobs`` defaults to ``TFSLURM_TF_DIST`` (set by the SPANK plugin's ``--tf-dist``), else
    every task is a worker. ``options`` (:class:`PlanOptions`) changes ports, hosts, GPUs,
    the layout or the job order from tfslurm's own choices.
    """
    from tfslurm.layout import layout_for
    from tfslurm.ports import port_rule

    layout = options.layout
    from_step = layout is None  # then layout.nodes / counts are exactly Slurm's strings
    if layout is None:
        layout = layout_for(step)
    if jobs is None:
        jobs = step.settings.jobs
    resolved = options.job_order.apply(parse_jobs(jobs, layout.num_tasks))
    template = _host_template(options.host_template, step.settings.host_template)
    counts = _count_per_node(layout.rank_node, len(layout.nodes))
    rule = port_rule(step, max(counts), port_base=options.port_base, layout=layout)
    gpus = options.gpu_plan
    if gpus is None and options.assign and step.procid is not None:
        gpus = gpu_plan_for(
            step, layout, gpus_per_task=options.gpus_per_task, gpus_per_node=options.gpus_per_node
        )
    plan = Plan(
        nodes=tuple(layout.nodes),
        rank_node=tuple(layout.rank_node),
        rank_local=tuple(layout.rank_local),
        jobs=tuple(resolved.items()),
        ports=rule,
        host_template=template,
        rank=step.procid,
        gpus=gpus,
        rpc_layer=options.rpc_layer,
        nodelist=step.nodelist if from_step else None,
        tasks_per_node=step.tasks_per_node if from_step else None,
    )
    plan.__dict__["counts"] = counts  # the cached property, already counted above
    plan._check_ports()
    return plan


# Plan's cached properties that do not depend on the rank or the GPUs (see Plan.for_task).
_STEP_WIDE_CACHES = (
    "counts",
    "hosts",
    "addresses",
    "_cluster_json",
    "_training_cluster_json",
    "_cluster_json_floor",
    "_descriptor",
)


def plan_from_environ(
    env: Mapping[str, str] | None = None,
    jobs: JobsSpec = None,
    options: PlanOptions = _DEFAULT_OPTIONS,
) -> Plan:
    """This task's plan, from ``os.environ`` (or ``env``).

    When ``TFSLURM_DESCRIPTOR`` is set and nothing overrides it (no ``jobs``, ``options``
    the defaults but for ``assign``), the plan is rebuilt from it, so it is exactly the plan
    the task was started with; else from Slurm's variables (:func:`plan_for`).
    ``options.assign`` adds this task's GPUs.
    """
    from tfslurm.step import Step

    return plan_from_step(Step.from_environ(env), jobs, options)


def plan_from_step(step: Step, jobs: JobsSpec = None, options: PlanOptions = _DEFAULT_OPTIONS) -> Plan:
    """:func:`plan_from_environ` for a step an entry point has read already."""
    text = step.settings.descriptor
    overridden = options is not _DEFAULT_OPTIONS and (
        records.replace(options, assign=True) != _DEFAULT_OPTIONS
    )
    if not (text and jobs is None and not overridden):
        return plan_for(step, jobs, options)
    step.require_step_id()
    procid = step.require_procid()
    plan = Plan.from_descriptor(text, rank=procid)
    node = plan.nodes[plan.rank_node[procid]]
    if step.node_name is not None and node != step.node_name:
        raise PlanError(
            f"{DESCRIPTOR_VARIABLE} puts rank {procid} on {node}, "
            f"but it runs on {step.node_name}: the descriptor is from another step"
        )
    if not options.assign:
        return plan
    from tfslurm.layout import Distribution, Layout

    layout = Layout(plan.nodes, plan.rank_node, plan.rank_local, Distribution.GIVEN, source="descriptor")
    return records.replace(plan, gpus=gpu_plan_for(step, layout))


EVALUATOR = "evaluator"


def tf_config_json(
    cluster: Mapping[str, Sequence[str]], job: str, index: int, rpc_layer: str | None = None
) -> str:
    """The TF_CONFIG a task of ``job`` sees, as compact JSON: the one writer for the hook
    (:meth:`Plan.tf_config`) and ``tfslurm run`` alike.

    The evaluator rule (TF's convention, docs/ps.md): the evaluator sees the whole cluster;
    training tasks do not see the evaluator, which runs no server and joins no collective
    (MultiWorkerMirroredStrategy would otherwise wait for it). Empty jobs are left out.
    """
    import json

    full = {name: list(tasks) for name, tasks in cluster.items() if tasks}
    shown = full if job == EVALUATOR else training_cluster(full)
    return _tf_config_text(json.dumps(shown, separators=(",", ":")), job, index, rpc_layer)


def _seen_in_training(name: str, count: int) -> bool:
    return name != EVALUATOR and count > 0


def training_cluster(cluster: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """The cluster training tasks see: without the evaluator (TF's convention: the side-car
    evaluator runs no server and joins no collective) and without empty jobs. The one
    evaluator rule of TF_CONFIG, the hook and the runtime."""
    return {name: list(tasks) for name, tasks in cluster.items() if _seen_in_training(name, len(tasks))}


def _tf_config_text(cluster_json: str, job: str, index: int, rpc_layer: str | None) -> str:
    task = '{"type":' + _json_string(job) + ',"index":' + str(index) + "}"
    extra = "" if rpc_layer is None else ',"rpc_layer":' + _json_string(rpc_layer)
    return '{"cluster":' + cluster_json + ',"task":' + task + extra + "}"


def _json_plain(text: str) -> bool:
    """True if ``json.dumps`` would write ``text`` unchanged between quotes."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def _json_string(text: str) -> str:
    """``json.dumps(text)``, without importing json for the plain names of nearly every plan."""
    if _json_plain(text):
        return '"' + text + '"'
    import json

    return json.dumps(text)


def _count_per_node(rank_node: tuple[int, ...], num_nodes: int) -> tuple[int, ...]:
    tally = Counter(rank_node)  # counted in C: 100k ranks in a few ms
    return tuple(tally.get(node, 0) for node in range(num_nodes))


def _host_template(template: str | None, from_settings: str | None) -> str:
    source = "host template"
    if template is None:
        template = from_settings or _NODE
        source = HOST_TEMPLATE_VARIABLE
    rest = template.replace(_NODE, "")
    # the plugin's host_template= check (plugin/src/config.c) is the same rule
    if (
        template.count(_NODE) != 1
        or not (rest.isascii() and rest.isprintable())
        or set(rest) & set(";:,/{} ")
    ):
        raise PlanError(
            f"{source} {_clip(template)!r} must contain '{{node}}' once and otherwise only "
            "printable ASCII without braces, ':', ';', ',', '/' or blanks (e.g. '{node}-ib')"
        )
    return template


def gpu_plan_for(
    step: Step,
    layout: Layout,
    *,
    gpus_per_task: int | None = None,
    gpus_per_node: int | None = None,
    uniform: bool = False,
    assignment: GpuAssignment | None = None,
    assumed_devices: tuple[str, ...] | None = None,
) -> GpuPlan:
    """This task's GPUs (``assign_gpus``) and what they tell about the other ranks' GPUs.

    Another rank's devices follow from splitting the node's list only when that list is the
    node's: not when Slurm bound devices per task or the list was narrowed earlier (by a
    TaskProlog, an earlier resolver or the user; ``GpuAssignment.per_task``), since splitting
    this task's own list would hand other ranks devices they do not have. ``uniform`` says
    the node device list holds for every node (TF's ``gpus_per_node``); ``assignment`` is a
    ready ``assign_gpus`` result for this step; ``assumed_devices`` goes to ``assign_gpus``.
    """
    from tfslurm.gpus import assign_gpus, gpu_warnings

    rank = step.require_procid()
    if not 0 <= rank < layout.num_tasks:
        raise PlanError(f"SLURM_PROCID={rank} is not a rank of the layout (0..{layout.num_tasks - 1})")
    if assignment is None:
        assignment = assign_gpus(
            step,
            layout,
            gpus_per_task=gpus_per_task,
            gpus_per_node=gpus_per_node,
            assumed_devices=assumed_devices,
        )
    node_devices = assignment.node_devices
    if gpus_per_node is not None:
        node_devices = node_devices[:gpus_per_node]
    return GpuPlan(
        own=assignment.devices,
        variable=assignment.variable,
        source=assignment.source,
        node_devices=node_devices,
        scope=GpuScope.EVERY_NODE if uniform else GpuScope.NODE,
        node=None if uniform else layout.rank_node[rank],
        gpus_per_task=gpus_per_task if gpus_per_task is not None else assignment.split_per_task,
        split=bool(node_devices) and not assignment.per_task,
        env=assignment.env(),
        warnings=gpu_warnings(
            step, layout, assignment, gpus_per_task=gpus_per_task, gpus_per_node=gpus_per_node
        ),
    )
