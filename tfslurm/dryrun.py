"""The plan a step would get, before it is queued: ``tfslurm plan --dry-run``.

From ``srun``/``sbatch`` options and the nodes the job may use, this module writes the Slurm
variables every task of that step would have (the names and forms Slurm 22.05-26.05 set,
as recorded in ``tests/data/observed``) and passes them through the same path a real task
takes (:class:`~tfslurm.step.Step`, :func:`~tfslurm.layout.layout_for`,
:func:`~tfslurm.plan.plan_for`), so the dry run and the real plan are one computation.

What Slurm decides, and how it is modelled (``cons_tres``, nodes that all look alike):

* **Nodes**: the step takes the nodes named by ``-w`` plus, up to ``-N``, the first other
  nodes of the given node list, in that list's order (Slurm's node order). A step inside a
  batch job inherits the job's options: give the job's options first, then the step's
  (later options win, as srun's own options win over what it inherits).
* **Tasks per node**: ``--ntasks-per-node`` gives each node that many CPUs of the job; else
  the job gets one CPU on each node and then fills the nodes in order up to their CPUs
  (``--cpus-per-node``, divided by ``-c``). The step then deals its tasks out over those
  CPUs as Slurm's step layout does: one (``-m plane=P``: P) per node and round.
* **Rank order**: the tasks per node and ``-m`` go to the layout engine unchanged; ``-m
  arbitrary`` takes the task order from ``-w`` (one entry per task, like a hostfile).
* **GPUs**: ``--gres=gpu:N`` and ``--gpus-per-node=N`` give every task of a node devices
  ``0..N-1``; ``--gpus-per-task=N`` gives local task ``i`` devices ``iN..iN+N-1``.

What cannot be modelled is never guessed: an option that could change the plan is named in
a note (:attr:`DryRun.notes`), and input that gives no plan is a :class:`PlanError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfslurm import hostlist
from tfslurm.errors import HostlistError, PlanError
from tfslurm.errors import clip as _clip
from tfslurm.layout import layout_for
from tfslurm.numbers import ascii_int
from tfslurm.plan import PlanOptions, gpu_plan_for, plan_for
from tfslurm.settings import TF_DIST_VARIABLE
from tfslurm.step import MAX_TASKS, Step
from tfslurm.value import Value

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Final

    from tfslurm.jobspec import JobsSpec
    from tfslurm.plan import GpuPlan, Plan

__all__ = ["DryRun", "SlurmOptions", "dry_run", "parse_options", "step_environments"]

# Options that change the plan, by every name srun and sbatch take: name -> field.
_MODELLED: Final[dict[str, str]] = {
    "-N": "nodes", "--nodes": "nodes",
    "-n": "ntasks", "--ntasks": "ntasks",
    "--ntasks-per-node": "ntasks_per_node",
    "-m": "distribution", "--distribution": "distribution",
    "-w": "nodelist", "--nodelist": "nodelist",
    "-c": "cpus_per_task", "--cpus-per-task": "cpus_per_task",
    "--gres": "gres",
    "--gpus-per-node": "gpus_per_node",
    "--gpus-per-task": "gpus_per_task",
    "--tf-dist": "tf_dist",
}  # fmt: skip

# Options that leave the rank -> node map, the jobs and the GPUs as they are.
_NO_EFFECT_VALUE: Final = frozenset((
    "-J", "--job-name", "-t", "--time", "-p", "--partition", "-A", "--account", "-q", "--qos", "-o",
    "--output", "-e", "--error", "-i", "--input", "-D", "--chdir", "--mem", "--mem-per-cpu",
    "--mem-per-gpu", "--mail-type", "--mail-user", "--comment", "--export", "--signal", "--begin",
    "--open-mode", "--time-min", "--wckey", "--nice",
))  # fmt: skip
_NO_EFFECT_FLAG: Final = frozenset((
    "-l", "--label", "-u", "--unbuffered", "-v", "--verbose", "-Q", "--quiet", "--requeue",
    "--no-requeue", "-H", "--hold", "-K", "--kill-on-bad-exit", "-k", "--no-kill",
))  # fmt: skip
# Options that may change the plan but take no value (the next word is the program).
_UNMODELLED_FLAG: Final = frozenset((
    "--exclusive", "-O", "--overcommit", "--spread-job", "--use-min-nodes", "--contiguous", "-s",
    "--oversubscribe", "-Z", "--no-allocate", "--whole",
))  # fmt: skip

# The job id of a modelled step. Ports derived from the job id are not part of a dry run's
# plan (the real id is known once the job is queued): :attr:`DryRun.ports` says so.
_JOB_ID = "0"


class SlurmOptions(Value):
    """The options of a step as far as the plan depends on them (None: not given)."""

    __match_args__ = (
        "nodes",
        "ntasks",
        "ntasks_per_node",
        "distribution",
        "plane_size",
        "nodelist",
        "cpus_per_task",
        "gpus_per_node",
        "gpus_per_task",
        "tf_dist",
        "resv_ports",
        "notes",
    )
    __slots__ = __match_args__

    def __init__(
        self,
        *,
        nodes: int | None = None,
        ntasks: int | None = None,
        ntasks_per_node: int | None = None,
        distribution: str | None = None,
        plane_size: int | None = None,
        nodelist: tuple[str, ...] | None = None,
        cpus_per_task: int | None = None,
        gpus_per_node: int | None = None,
        gpus_per_task: int | None = None,
        tf_dist: str | None = None,
        resv_ports: bool = False,
        notes: tuple[str, ...] = (),
    ) -> None:
        self.nodes: Final = nodes
        self.ntasks: Final = ntasks
        self.ntasks_per_node: Final = ntasks_per_node
        self.distribution: Final = distribution  # block, cyclic, plane, arbitrary; None: no -m
        self.plane_size: Final = plane_size
        self.nodelist: Final = nodelist  # -w, expanded, in the order written
        self.cpus_per_task: Final = cpus_per_task
        self.gpus_per_node: Final = gpus_per_node  # --gpus-per-node or --gres=gpu:N
        self.gpus_per_task: Final = gpus_per_task
        self.tf_dist: Final = tf_dist
        self.resv_ports: Final = resv_ports
        self.notes: Final = notes  # one line per option that is not modelled


def parse_options(args: Sequence[str]) -> SlurmOptions:
    """The plan-relevant part of srun/sbatch options ``args`` (later ones win); PlanError
    naming the option for a value that is not one. Parsing stops at the first word that is
    not an option (the program)."""
    values: dict[str, str] = {}
    notes: list[str] = []
    resv_ports = False
    if ":" in args:
        raise PlanError("heterogeneous steps (':') are not modelled: plan each component on its own")
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("-") or word in ("-", "--"):
            break
        name, value = _split(word)
        flag = name in _NO_EFFECT_FLAG or name in _UNMODELLED_FLAG or name == "--resv-ports"
        if flag and value is not None and not word.startswith("--"):
            args = [*args[:i], "-" + value, *args[i:]]  # short flags run together: -lN2
        if name in _UNMODELLED_FLAG:
            notes.append(f"{name}: not modelled; the plan is the step's without it")
        if flag:
            resv_ports = resv_ports or name == "--resv-ports"
            continue
        known = name in _MODELLED or name in _NO_EFFECT_VALUE
        if value is None and (known or (i < len(args) and not args[i].startswith("-"))):
            if i >= len(args):
                raise PlanError(f"srun option {name} needs a value")
            value = args[i]
            i += 1
        if name in _MODELLED:
            assert value is not None
            values[_MODELLED[name]] = value
        elif name not in _NO_EFFECT_VALUE:
            notes.append(f"{name}: not modelled; the plan is the step's without it")
    return _options(values, notes, resv_ports)


def _split(word: str) -> tuple[str, str | None]:
    """``--name=value`` / ``-Nvalue`` / a bare name -> (name, value or None)."""
    if word.startswith("--"):
        name, eq, value = word.partition("=")
        return name, (value if eq else None)
    if len(word) > 2:
        return word[:2], word[2:]
    return word, None


def _options(values: dict[str, str], notes: list[str], resv_ports: bool) -> SlurmOptions:
    distribution, plane = _distribution(values.get("distribution"), notes)
    nodelist = None
    if "nodelist" in values:
        text = values["nodelist"]
        if "/" in text:
            raise PlanError(
                f"-w {_clip(text)!r}: a node list read from a file is not modelled; list the nodes"
            )
        try:
            nodelist = tuple(hostlist.expand(text))
        except HostlistError as exc:
            raise PlanError(f"-w: {exc}") from None
    if "gres" in values and "gpus_per_node" in values:
        raise PlanError("--gres=gpu and --gpus-per-node both ask for GPUs per node: give one")
    per_node = _gres_gpus(values["gres"], notes) if "gres" in values else None
    if "gpus_per_node" in values:
        per_node = _gpu_count("--gpus-per-node", values["gpus_per_node"])
    per_task = _gpu_count("--gpus-per-task", values["gpus_per_task"]) if "gpus_per_task" in values else None
    if per_node is not None and per_task is not None:
        raise PlanError("GPUs per node and --gpus-per-task both given: the dry run models one of them")
    return SlurmOptions(
        nodes=_node_count(values["nodes"]) if "nodes" in values else None,
        ntasks=_count("-n", values["ntasks"]) if "ntasks" in values else None,
        ntasks_per_node=(
            _count("--ntasks-per-node", values["ntasks_per_node"]) if "ntasks_per_node" in values else None
        ),
        distribution=distribution,
        plane_size=plane,
        nodelist=nodelist,
        cpus_per_task=_count("-c", values["cpus_per_task"]) if "cpus_per_task" in values else None,
        gpus_per_node=per_node,
        gpus_per_task=per_task,
        tf_dist=values.get("tf_dist"),
        resv_ports=resv_ports,
        notes=tuple(notes),
    )


def _count(name: str, text: str) -> int:
    value = ascii_int(text.strip())
    if value is None or not 1 <= value <= MAX_TASKS:
        raise PlanError(f"{name} {_clip(text)!r} is not a positive count")
    return value


def _node_count(text: str) -> int:
    low, dash, high = text.partition("-")
    if dash and high != low:
        raise PlanError(f"-N {_clip(text)!r}: a range of node counts is not modelled; give one count")
    return _count("-N", low)


def _gpu_count(name: str, text: str) -> int:
    """``[type:]N`` as --gpus-per-node and --gpus-per-task take it."""
    count = text.rpartition(":")[2]
    value = ascii_int(count.strip())
    if value is None:
        raise PlanError(f"{name} {_clip(text)!r} is not a GPU count ([type:]N)")
    return value


def _gres_gpus(text: str, notes: list[str]) -> int | None:
    """The GPUs per node of ``--gres`` (``gpu``, ``gpu:N``, ``gpu:type:N``); others are noted."""
    gpus = None
    for item in text.split(","):
        parts = item.strip().split(":")
        if parts[0] != "gpu":
            notes.append(f"--gres={item}: not modelled (only gpu is)")
            continue
        gpus = 1 if len(parts) == 1 else _gpu_count("--gres", item)
    return gpus


def _distribution(text: str | None, notes: list[str]) -> tuple[str | None, int | None]:
    """The node level of ``-m`` (block, cyclic, plane, arbitrary; None: Slurm's default)."""
    if text is None:
        return None, None
    levels, _comma, extra = text.partition(",")
    if extra:
        notes.append(f"-m {text}: ',{extra}' is not modelled")
    first, colon, _rest = levels.partition(":")
    if colon:
        notes.append(f"-m {text}: the levels after ':' bind CPUs, not ranks to nodes; not modelled")
    if first in ("", "*"):
        return None, None
    if first.startswith("plane="):
        size = ascii_int(first[6:])
        if size is None or size < 1:
            raise PlanError(f"-m {_clip(text)!r}: the plane size must be a positive integer")
        return "plane", size
    if first not in ("block", "cyclic", "arbitrary"):
        raise PlanError(f"-m {_clip(text)!r}: the node level must be block, cyclic, plane=N or arbitrary")
    return first, None


# --- the step those options give ---------------------------------------------------------------


def step_environments(
    options: SlurmOptions,
    nodes: Sequence[str],
    *,
    cpus_per_node: int | None = None,
    gpus_available: int | None = None,
) -> list[dict[str, str]]:
    """Each task's Slurm variables (rank order) for a step with ``options`` on a job that may
    use ``nodes`` (Slurm's node order); ``cpus_per_node`` and ``gpus_available`` describe
    each node. PlanError when the options give no step there."""
    if len(set(nodes)) != len(nodes):
        raise PlanError("--nodelist names a node twice")
    if options.distribution == "arbitrary":
        step_nodes, counts, order = _arbitrary(options, nodes)
    else:
        step_nodes = _pick_nodes(options, nodes, cpus_per_node)
        counts = _task_counts(options, len(step_nodes), cpus_per_node)
        order = None
    nodelist = hostlist.compress(step_nodes)
    tasks_per_node = hostlist.compress_counts(counts)
    arbitrary = None if order is None else ",".join(order)
    shared = {
        "SLURM_JOB_ID": _JOB_ID,
        "SLURM_STEP_ID": "0",
        "SLURM_STEP_NODELIST": nodelist,
        "SLURM_STEP_TASKS_PER_NODE": tasks_per_node,
        "SLURM_STEP_NUM_TASKS": str(sum(counts)),
        "SLURM_STEP_NUM_NODES": str(len(step_nodes)),
    }
    if options.distribution is not None:
        shared["SLURM_DISTRIBUTION"] = options.distribution
    if options.plane_size is not None:
        shared["SLURM_DIST_PLANESIZE"] = str(options.plane_size)
    if arbitrary is not None:
        shared["SLURM_ARBITRARY_NODELIST"] = arbitrary
    if options.tf_dist is not None:
        shared[TF_DIST_VARIABLE] = options.tf_dist  # what the SPANK plugin's --tf-dist sets
    layout = layout_for(  # the layout engine, as every task runs it
        Step(
            "step",
            nodelist=nodelist,
            tasks_per_node=tasks_per_node,
            num_tasks=sum(counts),
            num_nodes=len(step_nodes),
            distribution=options.distribution,
            plane_size=options.plane_size,
            arbitrary_nodelist=arbitrary,
        )
    )
    _check_gpus(options, step_nodes, counts, gpus_available)
    by_node: list[list[str]] = [[] for _ in step_nodes]
    for rank, node in enumerate(layout.rank_node):
        by_node[node].append(str(rank))
    gtids = [",".join(ranks) for ranks in by_node]  # SLURM_GTIDS: the ranks on the node
    envs = []
    for rank, (node, local) in enumerate(zip(layout.rank_node, layout.rank_local, strict=True)):
        env = dict(shared)
        env.update(
            SLURM_PROCID=str(rank),
            SLURM_LOCALID=str(local),
            SLURM_NODEID=str(node),
            SLURMD_NODENAME=step_nodes[node],
            SLURM_GTIDS=gtids[node],
        )
        env.update(_gpu_variables(options, counts[node], local))
        envs.append(env)
    return envs


def _pick_nodes(options: SlurmOptions, nodes: Sequence[str], cpus_per_node: int | None) -> list[str]:
    named = list(options.nodelist or ())
    _check_named(named, nodes)
    count = options.nodes
    if count is None:
        count = len(named) or (1 if len(nodes) == 1 else _nodes_for_tasks(options, cpus_per_node))
    if count < len(named):
        raise PlanError(f"-w names {len(named)} nodes but -N asks for {count}")
    if count > len(nodes):
        raise PlanError(f"the step needs {count} nodes but --nodelist has {len(nodes)}")
    chosen = set(named)
    for name in nodes:
        if len(chosen) == count:
            break
        chosen.add(name)
    return [name for name in nodes if name in chosen]


def _check_named(named: Sequence[str], nodes: Sequence[str]) -> None:
    known = set(nodes)
    missing = [name for name in named if name not in known]
    if missing:
        raise PlanError(f"-w names {_clip(missing[0])}, which is not in --nodelist")
    if len(set(named)) != len(named) and named:
        raise PlanError("-w names a node twice (only -m arbitrary takes one entry per task)")


def _nodes_for_tasks(options: SlurmOptions, cpus_per_node: int | None) -> int:
    """How many nodes Slurm gives ``-n`` tasks when ``-N`` is not given."""
    if options.ntasks is None:
        return 1
    per_node = options.ntasks_per_node or _capacity(options, cpus_per_node)
    if per_node is None:
        raise PlanError(
            f"-n {options.ntasks} without -N: the nodes Slurm takes depend on their CPUs; "
            "give -N, --ntasks-per-node or --cpus-per-node"
        )
    return -(-options.ntasks // per_node)


def _capacity(options: SlurmOptions, cpus_per_node: int | None) -> int | None:
    """Tasks one node holds (its CPUs over -c); None when the CPUs are not given."""
    if cpus_per_node is None:
        return None
    per_task = options.cpus_per_task or 1
    if per_task > cpus_per_node:
        raise PlanError(f"-c {per_task} is more than the {cpus_per_node} CPUs of a node (--cpus-per-node)")
    return cpus_per_node // per_task


def _task_counts(options: SlurmOptions, num_nodes: int, cpus_per_node: int | None) -> list[int]:
    """Tasks per node: the job's CPUs per node (in tasks), then Slurm's step layout over them."""
    per_node = options.ntasks_per_node
    capacity = _capacity(options, cpus_per_node)
    if per_node is not None:
        if capacity is not None and per_node > capacity:
            raise PlanError(f"--ntasks-per-node={per_node} is more than a node holds ({capacity} tasks)")
        allocated = [per_node] * num_nodes
        ntasks = options.ntasks if options.ntasks is not None else per_node * num_nodes
        if ntasks > per_node * num_nodes:
            raise PlanError(f"-n {ntasks} is more than --ntasks-per-node={per_node} on {num_nodes} nodes")
    else:
        ntasks = options.ntasks if options.ntasks is not None else num_nodes
        allocated = _allocate(ntasks, num_nodes, capacity)
    if ntasks < num_nodes:
        raise PlanError(
            f"-n {ntasks} is fewer than the {num_nodes} nodes of the step: Slurm gives each a task"
        )
    return _deal(ntasks, allocated, options.plane_size or 1)


def _allocate(ntasks: int, num_nodes: int, capacity: int | None) -> list[int]:
    """The job's CPUs (in tasks) per node: one each, then the nodes filled in order."""
    if num_nodes == 1 or ntasks <= num_nodes:
        if capacity is not None and ntasks > capacity * num_nodes:
            raise PlanError(f"-n {ntasks} is more than {num_nodes} node(s) of {capacity} tasks hold")
        return [max(1, ntasks - num_nodes + 1)] + [1] * (num_nodes - 1)
    if capacity is None:
        raise PlanError(
            f"-n {ntasks} on -N {num_nodes}: how Slurm spreads the tasks depends on the CPUs per "
            "node; give --ntasks-per-node or --cpus-per-node"
        )
    if ntasks > capacity * num_nodes:
        raise PlanError(f"-n {ntasks} is more than {num_nodes} nodes of {capacity} tasks hold")
    allocated = [1] * num_nodes
    left = ntasks - num_nodes
    for index in range(num_nodes):
        take = min(capacity - 1, left)
        allocated[index] += take
        left -= take
    return allocated


def _deal(ntasks: int, allocated: list[int], size: int) -> list[int]:
    """Slurm's step layout counts: rounds of ``size`` tasks per node within the job's CPUs
    per node, and past them only once every node is full."""
    counts = [0] * len(allocated)
    placed = 0
    over = False
    while placed < ntasks:
        room = False
        for index, cpus in enumerate(allocated):
            take = min(size, ntasks - placed) if over else min(size, cpus - counts[index], ntasks - placed)
            counts[index] += max(0, take)
            placed += max(0, take)
            room = room or counts[index] < cpus
        over = over or not room
    return counts


def _arbitrary(options: SlurmOptions, nodes: Sequence[str]) -> tuple[list[str], list[int], list[str]]:
    """-m arbitrary: the step's nodes in node order, their task counts and the task order."""
    order = list(options.nodelist or ())
    if not order:
        raise PlanError("-m arbitrary needs -w with one node per task, in rank order")
    if options.ntasks is not None:
        if options.ntasks > len(order):
            raise PlanError(f"-m arbitrary: -n {options.ntasks} but -w lists {len(order)} tasks")
        order = order[: options.ntasks]
    _check_named(sorted(set(order)), nodes)
    step_nodes = [name for name in nodes if name in set(order)]
    if options.nodes is not None and options.nodes != len(step_nodes):
        raise PlanError(f"-m arbitrary: -w puts tasks on {len(step_nodes)} nodes but -N is {options.nodes}")
    if options.ntasks_per_node is not None:
        raise PlanError("-m arbitrary takes the tasks per node from -w, not --ntasks-per-node")
    return step_nodes, [order.count(name) for name in step_nodes], order


def _check_gpus(options: SlurmOptions, nodes: list[str], counts: list[int], available: int | None) -> None:
    if available is None:
        return
    for name, count in zip(nodes, counts, strict=True):
        wanted = _gpus_on_node(options, count)
        if wanted > available:
            raise PlanError(
                f"node {name} would need {wanted} GPUs but has {available} (--gpus-per-node-available)"
            )


def _gpus_on_node(options: SlurmOptions, tasks: int) -> int:
    if options.gpus_per_task is not None:
        return options.gpus_per_task * tasks
    return options.gpus_per_node or 0


def _gpu_variables(options: SlurmOptions, tasks: int, local: int) -> dict[str, str]:
    """What Slurm sets for a task's GPUs (node devices numbered from 0, as on an idle node)."""
    on_node = _gpus_on_node(options, tasks)
    if not on_node:
        return {}
    per_task = options.gpus_per_task
    if per_task is not None:
        own = ",".join(str(d) for d in range(local * per_task, (local + 1) * per_task))
        return {
            "CUDA_VISIBLE_DEVICES": own,
            "SLURM_STEP_GPUS": own,
            "SLURM_GPUS_ON_NODE": str(on_node),
            "SLURM_TRES_PER_TASK": f"gres/gpu={per_task}",
            "SLURMD_TRES_BIND": f"gres/gpu:per_task:{per_task}",
        }
    devices = ",".join(str(d) for d in range(on_node))
    return {"CUDA_VISIBLE_DEVICES": devices, "SLURM_STEP_GPUS": devices, "SLURM_GPUS_ON_NODE": str(on_node)}


# --- the plan ------------------------------------------------------------------------------------


class DryRun(Value):
    """A modelled step's plan: ``rows`` as :meth:`tfslurm.plan.Plan.row` gives them, each
    with that task's own GPUs; ``ports`` says how ports will be chosen; ``notes`` name what
    was not modelled."""

    __match_args__ = ("rows", "ports", "notes")
    __slots__ = __match_args__

    def __init__(self, rows: tuple[dict[str, object], ...], ports: str, notes: tuple[str, ...]) -> None:
        self.rows: Final = rows
        self.ports: Final = ports
        self.notes: Final = notes


def dry_run(
    steps: Sequence[Step], slurm: SlurmOptions, jobs: JobsSpec = None, options: PlanOptions | None = None
) -> DryRun:
    """The plan of a modelled step: ``steps`` are its tasks' snapshots, in rank order, read
    from :func:`step_environments` (by the entry point, as every task reads its own)."""
    options = options if options is not None else PlanOptions()
    plan = plan_for(steps[0], jobs, options)
    rows = []
    for rank, step in enumerate(steps):
        row = plan.row(rank)
        # each task's own GPUs, as that task computes them (rank 0's came with the plan)
        gpus = plan.gpus if rank == 0 else _gpus_of(step, plan, options)
        row["gpus"] = list(gpus.own) if gpus is not None else None
        rows.append(row)
    return DryRun(tuple(rows), _ports(slurm, plan, options), slurm.notes)


def _gpus_of(step: Step, plan: Plan, options: PlanOptions) -> GpuPlan | None:
    if not options.assign:
        return None
    return gpu_plan_for(
        step, plan.cluster.layout, gpus_per_task=options.gpus_per_task, gpus_per_node=options.gpus_per_node
    )


def _ports(slurm: SlurmOptions, plan: Plan, options: PlanOptions) -> str:
    rule = plan.cluster.ports
    if options.port_base is not None and rule is not None:
        return rule.describe()
    if slurm.resv_ports:
        return "reserved by Slurm when the step starts (--resv-ports), by local id"
    return (
        "reserved by Slurm when the step starts where slurm.conf sets MpiParams=ports, "
        "else derived from the job and step ids; by local id"
    )
