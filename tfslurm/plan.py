"""A task's plan: the step's TF cluster seen from one task, with that task's GPUs.

Built from the step (``tfslurm.step``), its rank -> node layout (``tfslurm.layout``), a jobs
spec (``tfslurm.jobspec``), the port rule (``tfslurm.ports``) and this task's GPU
assignment (``tfslurm.gpus``). Every task of a step computes the same
:class:`~tfslurm.cluster.Cluster` from the same Slurm variables, so no task has to talk to
another to agree on it; a :class:`Plan` adds which rank this task is and its GPUs.

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
* **GPUs**: this task's own devices come from ``assign_gpus``. For another rank the plan
  shows what this task can know: ranks on its own node when the node's device list is split
  among its tasks, every rank when the device list was given for every node
  (``gpus_per_node=``); otherwise ``None`` ("not known here").

Only the standard library is used: this runs in the TaskProlog of every task.
"""

from __future__ import annotations

from tfslurm.cluster import EVALUATOR, NODE, Cluster
from tfslurm.errors import PlanError, bare
from tfslurm.errors import clip as _clip
from tfslurm.gpus import assign_gpus, check_gpu_count, gpu_warnings, split_devices
from tfslurm.jobspec import JOB_ORDERS, order_jobs, parse_jobs
from tfslurm.layout import Layout, layout_for
from tfslurm.ports import check_port_base, port_rule
from tfslurm.settings import DESCRIPTOR_VARIABLE, HOST_TEMPLATE_VARIABLE
from tfslurm.value import Value

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Final, Literal

    from tfslurm.gpus import GpuAssignment
    from tfslurm.jobspec import JobOrder, JobsSpec
    from tfslurm.settings import Settings
    from tfslurm.step import Step

    #: The nodes whose device list GpuPlan.node_devices is: ``"none"`` (no node's: only this
    #: task's own devices are known), ``"node"`` (node GpuPlan.node's, this task's own node),
    #: ``"every-node"`` (every node's: TF's gpus_per_node, devices 0..N-1 everywhere).
    GpuScope = Literal["none", "node", "every-node"]

__all__ = [
    "DESCRIPTOR_VARIABLE",
    "EVALUATOR",
    "HOST_TEMPLATE_VARIABLE",
    "TF_CONFIG_MAX_BYTES",
    "Cluster",
    "GpuPlan",
    "Plan",
    "PlanOptions",
    "TaskPlan",
    "gpu_plan_for",
    "plan_for",
    "resolve_plan",
]

#: Longest TF_CONFIG value that can pass through exec and Slurm's environment code:
#: ``TF_CONFIG=`` + value + NUL must fit in 131,072 bytes, the longest single string Linux
#: execve takes (MAX_ARG_STRLEN, 32 pages of 4 KiB) and the bound Slurm's env code keeps.
TF_CONFIG_MAX_BYTES = 131_060


class TaskPlan(Value):
    """One rank of a cluster: the one per-task record (the plan's rows, a role's peers).
    ``gpus`` is None when this task cannot know that rank's GPUs; ``node`` is the host where
    the cluster came from a TF_CONFIG, which names no nodes."""

    __match_args__ = ("rank", "job", "index", "node", "host", "port", "gpus")
    __slots__ = __match_args__

    def __init__(
        self, rank: int, job: str, index: int, node: str, host: str, port: int, gpus: tuple[str, ...] | None
    ) -> None:
        self.rank: Final = rank
        self.job: Final = job
        self.index: Final = index
        self.node: Final = node
        self.host: Final = host
        self.port: Final = port
        self.gpus: Final = gpus

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.job}:{self.index} at {self.host}:{self.port}"


class GpuPlan(Value):
    """What this task knows about the step's GPUs (see the module docstring).

    ``node_devices`` is the device list of the node(s) ``scope`` says (for
    ``"node"``, node index ``node``), shared out among each node's tasks with
    ``split_devices``; ``split=False`` means no other rank's devices can be known (e.g.
    Slurm bound devices per task). ``env`` (the variables to set) and ``warnings`` follow
    from the rest and are not compared.
    """

    __match_args__ = ("own", "variable", "source", "node_devices", "scope", "node", "gpus_per_task", "split")
    __slots__ = (*__match_args__, "env", "warnings")

    def __init__(
        self,
        own: tuple[str, ...],
        variable: str,
        source: str,
        node_devices: tuple[str, ...] = (),
        scope: GpuScope = "none",
        node: int | None = None,
        gpus_per_task: int | None = None,
        split: bool = False,
        env: Mapping[str, str] | None = None,
        warnings: tuple[str, ...] = (),
    ) -> None:
        self.own: Final = own
        self.variable: Final = variable
        self.source: Final = source
        self.node_devices: Final = node_devices
        self.scope: Final = scope
        self.node: Final = node
        self.gpus_per_task: Final = gpus_per_task
        self.split: Final = split
        self.env: Final[Mapping[str, str]] = {} if env is None else env
        self.warnings: Final = warnings

    def with_warning(self, line: str) -> GpuPlan:
        """This plan with one more warning line."""
        return GpuPlan(
            self.own,
            self.variable,
            self.source,
            self.node_devices,
            self.scope,
            self.node,
            self.gpus_per_task,
            self.split,
            self.env,
            (*self.warnings, line),
        )

    def knows(self, node: int) -> bool:
        """Whether the GPUs of the ranks on node index ``node`` follow from ``node_devices``."""
        if not self.split:
            return False
        return self.scope == "every-node" or (self.scope == "node" and node == self.node)


class Plan:
    """A task's view of its step's :class:`~tfslurm.cluster.Cluster`: which rank it is
    (``rank``; None when the plan was not made by a task of the step) and its GPUs.

    Build it with :func:`plan_for` or :meth:`from_descriptor`. Views of one cluster share it,
    with everything derived from it (:meth:`for_task`).
    """

    __slots__ = ("cluster", "gpus", "rank")

    def __init__(self, cluster: Cluster, rank: int | None = None, gpus: GpuPlan | None = None) -> None:
        self.cluster: Final = cluster
        self.rank: Final = None if rank is None else cluster.check_rank(rank)
        self.gpus: Final = gpus

    def __repr__(self) -> str:
        return f"Plan({self.cluster!r}, rank={self.rank!r}, gpus={self.gpus!r})"

    def for_task(self, rank: int, gpus: GpuPlan | None) -> Plan:
        """The plan another task of the same step sees (its rank, its GPUs), on the same
        cluster, so the per-node hook (``tfslurm prolog --node``) builds it once per node."""
        return Plan(self.cluster, rank, gpus)

    def on_iface(self, iface: str, settings: Settings, host_template: str | None = None) -> Plan:
        """This plan with every node advertised by its address on ``iface`` (``tfslurm.iface``);
        the plan as it is when ``iface`` is empty.

        A host template that was given is the per-interface name to resolve, ``{node}``
        included (a site whose node names resolve to the interface says so with it):
        ``host_template`` (the plan was made with it), else the plan's own when
        ``TFSLURM_HOST_TEMPLATE`` (``settings``) is set or the plan's is not ``{node}``. With
        none given, ``{node}-IFACE`` is resolved. The task's own node is checked.
        """
        if not iface:
            return self
        cluster = self.cluster
        template = host_template
        if template is None and (settings.host_template is not None or cluster.host_template != NODE):
            template = cluster.host_template
        own = None if self.rank is None else cluster.nodes[cluster.rank_node[self.rank]]
        # lazy: socket and fcntl, only for a plan on a named interface (never the plain hook)
        from tfslurm.iface import IfaceHosts

        hosts = IfaceHosts(iface, template, own)
        return Plan(cluster.on_hosts(hosts.addresses(cluster.nodes), iface), self.rank, self.gpus)

    def require_rank(self, what: str) -> int:
        """This task's rank; PlanError naming ``what`` when the plan was not made by a task."""
        if self.rank is None:
            raise PlanError(f"cannot give {what}: this plan was not made by a task of the step")
        return self.rank

    # -- this task -----------------------------------------------------------------------
    def gpus_of(self, rank: int) -> tuple[str, ...] | None:
        """A rank's devices as far as this task can know them (None: not known here)."""
        cluster = self.cluster
        cluster.check_rank(rank)
        gpus = self.gpus
        if gpus is None:
            return None
        if rank == self.rank:
            return gpus.own
        node = cluster.rank_node[rank]
        if not gpus.knows(node):
            return None
        return split_devices(
            gpus.node_devices, cluster.counts[node], cluster.rank_local[rank], gpus.gpus_per_task
        )

    def tf_config(self, rank: int | None = None) -> str:
        """TF_CONFIG of a rank (default: this task) as compact JSON (the evaluator rule:
        training tasks do not see the evaluator)."""
        return self.cluster.tf_config(self.require_rank("TF_CONFIG") if rank is None else rank)

    def task_env(self) -> dict[str, str]:
        """The variables this task needs: TF_CONFIG (or the descriptor if it is too big), GPUs."""
        out: dict[str, str] = {}
        if self.cluster.json_floor > TF_CONFIG_MAX_BYTES:
            out[DESCRIPTOR_VARIABLE] = self.cluster.descriptor()  # clearly too big: skip building it
        else:
            config = self.tf_config()
            if len(config.encode()) <= TF_CONFIG_MAX_BYTES:
                out["TF_CONFIG"] = config
            else:
                out[DESCRIPTOR_VARIABLE] = self.cluster.descriptor()
        if self.gpus is not None:
            out.update(self.gpus.env)
        return out

    def task_of(self, rank: int) -> TaskPlan:
        cluster = self.cluster
        job, index = cluster.job_of(rank)
        node = cluster.rank_node[rank]
        return TaskPlan(
            rank,
            job,
            index,
            cluster.nodes[node],
            cluster.hosts[node],
            cluster.port_of(rank),
            self.gpus_of(rank),
        )

    def row(self, rank: int) -> dict[str, object]:
        """A rank as ``tfslurm plan --json`` prints it: ``rank``, ``node``, ``local_id``,
        ``job``, ``index`` and ``gpus`` (a list; None when this task cannot know them)."""
        cluster = self.cluster
        job, index = cluster.job_of(rank)
        gpus = self.gpus_of(rank)
        return {
            "rank": rank,
            "node": cluster.nodes[cluster.rank_node[rank]],
            "local_id": cluster.rank_local[rank],
            "job": job,
            "index": index,
            "gpus": None if gpus is None else list(gpus),
        }

    @property
    def tasks(self) -> tuple[TaskPlan, ...]:
        """Every rank as a TaskPlan."""
        return tuple(self.task_of(rank) for rank in range(self.cluster.num_tasks))

    @property
    def own(self) -> TaskPlan:
        """This task's TaskPlan."""
        return self.task_of(self.require_rank("its own task"))

    def table(self) -> str:
        """An aligned text table: rank, job, task, host:port, GPUs ('?' = not known here)."""
        rows = [("RANK", "JOB", "TASK", "HOST:PORT", "GPUS")]
        addresses = self.cluster.addresses
        for rank in range(self.cluster.num_tasks):
            job, index = self.cluster.job_of(rank)
            gpus = self.gpus_of(rank)
            shown = "?" if gpus is None else (",".join(gpus) or "-")
            mark = " *" if rank == self.rank else ""
            rows.append((str(rank), job, str(index), addresses[rank], shown + mark))
        return aligned(rows, right=(True, False, True, False))

    @classmethod
    def from_descriptor(cls, text: str, rank: int | None = None) -> Plan:
        """Rebuild a plan from its cluster's descriptor text; ``rank`` = the calling task's.

        GPUs are not part of a descriptor (each task gets its own in CUDA_VISIBLE_DEVICES).
        """
        return cls(Cluster.from_descriptor(text), rank)


class PlanOptions(Value):
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
    * ``iface``: advertise every node by its address on this network interface
      (``tfslurm.iface``; default: none for :func:`plan_for`, ``TFSLURM_IFACE`` for
      :func:`resolve_plan`). Like ``assign``, it does not override a descriptor.
    """

    __match_args__ = (
        "port_base",
        "gpus_per_task",
        "gpus_per_node",
        "host_template",
        "layout",
        "rpc_layer",
        "job_order",
        "assign",
        "gpu_plan",
        "iface",
    )
    __slots__ = __match_args__

    def __init__(
        self,
        *,
        port_base: int | None = None,
        gpus_per_task: int | None = None,
        gpus_per_node: int | None = None,
        host_template: str | None = None,
        layout: Layout | None = None,
        rpc_layer: str | None = None,
        job_order: JobOrder = "written",
        assign: bool = True,
        gpu_plan: GpuPlan | None = None,
        iface: str | None = None,
    ) -> None:
        self.port_base: Final = port_base
        self.gpus_per_task: Final = gpus_per_task
        self.gpus_per_node: Final = gpus_per_node
        self.host_template: Final = host_template
        self.layout: Final = layout
        self.rpc_layer: Final = rpc_layer
        self.job_order: Final = job_order
        self.assign: Final = assign
        self.gpu_plan: Final = gpu_plan
        self.iface: Final = iface
        self._check()

    @property
    def overrides(self) -> bool:
        """Whether anything but ``assign`` and ``iface`` differs from the defaults."""
        return any(
            getattr(self, name) != getattr(_DEFAULT_OPTIONS, name)
            for name in self.__match_args__
            if name not in ("assign", "iface")
        )

    def _check(self) -> None:
        if self.port_base is not None:
            check_port_base(self.port_base, "port_base")
        if self.gpus_per_task is not None or self.gpus_per_node is not None:
            for name in ("gpus_per_task", "gpus_per_node"):
                if getattr(self, name) is not None:
                    check_gpu_count(name, getattr(self, name))
        if self.host_template is not None:
            _host_template(self.host_template, None)
        if self.job_order not in JOB_ORDERS:
            raise PlanError(f"job_order {self.job_order!r} is not a tfslurm.jobspec.JobOrder")


_DEFAULT_OPTIONS = PlanOptions()


def plan_for(step: Step, jobs: JobsSpec = None, options: PlanOptions = _DEFAULT_OPTIONS) -> Plan:
    """The plan of ``step`` as seen by this task, from Slurm's variables.

    ``jobs`` defaults to ``TFSLURM_TF_DIST`` (set by the SPANK plugin's ``--tf-dist``), else
    every task is a worker. ``options`` (:class:`PlanOptions`) changes ports, hosts, GPUs,
    the layout, the job order or the interface from tfslurm's own choices.
    """
    layout = options.layout
    from_step = layout is None  # then layout.nodes / counts are exactly Slurm's strings
    if layout is None:
        layout = layout_for(step)
    if jobs is None:
        jobs = step.settings.tf_dist
    resolved = order_jobs(parse_jobs(jobs, layout.num_tasks), options.job_order)
    template = _host_template(options.host_template, step.settings.host_template)
    rule = port_rule(step, max(layout.task_counts), port_base=options.port_base, layout=layout)
    gpus = options.gpu_plan
    if gpus is None and options.assign and step.procid is not None:
        gpus = gpu_plan_for(
            step, layout, gpus_per_task=options.gpus_per_task, gpus_per_node=options.gpus_per_node
        )
    cluster = Cluster(
        layout,
        tuple(resolved.items()),
        rule,
        host_template=template,
        rpc_layer=options.rpc_layer,
        nodelist=step.nodelist if from_step else None,
        tasks_per_node=step.tasks_per_node if from_step else None,
    )
    plan = Plan(cluster, step.procid, gpus)
    return plan.on_iface(options.iface, step.settings, options.host_template) if options.iface else plan


def resolve_plan(step: Step, jobs: JobsSpec = None, options: PlanOptions = _DEFAULT_OPTIONS) -> Plan:
    """The plan this task runs with: what the hook, ``tfslurm env``, the framework adapters
    and :func:`tfslurm.runtime.roles.resolve_role` all start from.

    When ``TFSLURM_DESCRIPTOR`` is set and nothing overrides it (no ``jobs``, ``options``
    the defaults but for ``assign`` and ``iface``), the plan is rebuilt from it, so it is
    exactly the plan the task was started with; else from Slurm's variables
    (:func:`plan_for`). ``options.assign`` adds this task's GPUs. The plan is then put on
    the interface ``options.iface``, else ``TFSLURM_IFACE``, if any.
    """
    settings = step.settings
    text = settings.descriptor
    if text and jobs is None and not options.overrides:
        plan = _described_plan(step, text, options.assign)
    else:
        plan = plan_for(step, jobs, options)
    iface = options.iface if options.iface is not None else settings.iface
    if not iface or plan.cluster.iface is not None:
        return plan
    return plan.on_iface(iface, settings, options.host_template)


def _described_plan(step: Step, text: str, assign: bool) -> Plan:
    """This task's plan rebuilt from the descriptor ``text``, checked against the task."""
    step.require_step_id()
    procid = step.require_procid()
    cluster = Cluster.from_descriptor(text)
    cluster.check_rank(procid)
    node = cluster.nodes[cluster.rank_node[procid]]
    if step.node_name is not None and node != step.node_name:
        raise PlanError(
            f"{DESCRIPTOR_VARIABLE} puts rank {procid} on {bare(node)}, "
            f"but it runs on {bare(step.node_name)}: the descriptor is from another step"
        )
    if not assign:
        return Plan(cluster, procid)
    return Plan(cluster, procid, gpu_plan_for(step, cluster.layout))


def _host_template(template: str | None, from_settings: str | None) -> str:
    source = "host template"
    if template is None:
        template = from_settings or NODE
        source = HOST_TEMPLATE_VARIABLE
    rest = template.replace(NODE, "")
    # the plugin's host_template= check (plugin/src/config.c) is the same rule
    if template.count(NODE) != 1 or not (rest.isascii() and rest.isprintable()) or set(rest) & set(";:,/{} "):
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
        scope="every-node" if uniform else "node",
        node=None if uniform else layout.rank_node[rank],
        gpus_per_task=gpus_per_task if gpus_per_task is not None else assignment.split_per_task,
        split=bool(node_devices) and not assignment.per_task,
        env=assignment.env(),
        warnings=gpu_warnings(
            step, layout, assignment, gpus_per_task=gpus_per_task, gpus_per_node=gpus_per_node
        ),
    )


def aligned(rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    """``rows`` of cells as text for people: two spaces between columns, column ``i``
    right-aligned where ``right[i]``, else left; the last column (past ``right``) unpadded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(right))]
    return "\n".join(
        "  ".join(
            [
                *(
                    cell.rjust(w) if r else cell.ljust(w)
                    for cell, w, r in zip(row[: len(right)], widths, right, strict=True)
                ),
                row[len(right)],
            ]
        ).rstrip()
        for row in rows
    )
