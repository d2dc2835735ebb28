"""The Slurm environment of the current process, as one typed, immutable snapshot.

Everything else in tfslurm reads Slurm through a :class:`Step`, so the rules for which
variable means what (step vs. job variables, ``*_HET_GROUP_n`` vs. the legacy
``*_PACK_GROUP_n`` names, what a batch script lacks) live in one place, and a missing
variable becomes a one-line :class:`~tfslurm.errors.SlurmEnvError` that says *why* it is
missing (batch script, salloc shell, outside Slurm) instead of a ``KeyError``.

Only the standard library is used: this runs in the TaskProlog of every task at a site.
"""

from __future__ import annotations

import os
from types import MappingProxyType

from tfslurm.errors import SlurmEnvError
from tfslurm.errors import clip as _clip
from tfslurm.numbers import ascii_int
from tfslurm.settings import ASSIGNED_VARIABLE, Settings
from tfslurm.value import Value

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the TaskProlog path)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Final, Literal

    #: Where the process runs, which decides what Slurm told it: ``"step"`` (a task launched
    #: by srun: SLURM_STEP_* and SLURM_PROCID are set), ``"batch"`` (the sbatch script itself:
    #: job variables only), ``"allocation"`` (an salloc shell on the submit host),
    #: ``"outside"`` (no SLURM_JOB_ID at all).
    Context = Literal["step", "batch", "allocation", "outside"]

__all__ = ["CONTEXT_TEXT", "GpuVariables", "HetComponent", "Settings", "Step"]

# GPU variables Slurm (gres/gpu) may set for a task; kept in Step.env for the GPU code.
GPU_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "ZE_AFFINITY_MASK",
)

#: Tasks one step may have before tfslurm refuses to expand it (Slurm's own limits are
#: far lower in practice; this bounds memory when a variable is garbage).
MAX_TASKS = 1 << 22

#: Variables that restrict which devices a GPU runtime sees, in the order tfslurm picks the
#: primary one (CUDA first; Slurm's default gres.conf flags set CUDA, ROCR and GPU_DEVICE_ORDINAL).
VISIBLE_DEVICE_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",
    "GPU_DEVICE_ORDINAL",
)


#: How Step.describe names a context other than "step".
CONTEXT_TEXT: Final[dict[Context, str]] = {
    "step": "task of a step",
    "batch": "batch script",
    "allocation": "salloc shell",
    "outside": "outside Slurm",
}


# Step field -> the variable it comes from, for error messages.
FIELD_VARIABLES: dict[str, str] = {
    "job_id": "SLURM_JOB_ID",
    "step_id": "SLURM_STEP_ID",
    "restart_count": "SLURM_RESTART_COUNT",
    "procid": "SLURM_PROCID",
    "localid": "SLURM_LOCALID",
    "nodeid": "SLURM_NODEID",
    "node_name": "SLURMD_NODENAME",
    "nodelist": "SLURM_STEP_NODELIST",
    "tasks_per_node": "SLURM_STEP_TASKS_PER_NODE",
    "num_tasks": "SLURM_STEP_NUM_TASKS",
    "num_nodes": "SLURM_STEP_NUM_NODES",
    "distribution": "SLURM_DISTRIBUTION",
    "plane_size": "SLURM_DIST_PLANESIZE",
    "het": "SLURM_HET_SIZE",
    "hostfile": "SLURM_HOSTFILE",
    "arbitrary_nodelist": "SLURM_ARBITRARY_NODELIST",
    "gtids": "SLURM_GTIDS",
    "resv_ports": "SLURM_STEP_RESV_PORTS",
}


class HetComponent(Value):
    """One component of a heterogeneous job, from its ``*_HET_GROUP_n`` variables.

    These are *job* (allocation) values of the component: a step may use fewer tasks.
    Raw hostlist / task-count strings are kept unexpanded; ``tfslurm.hostlist`` expands them.
    """

    __match_args__ = (
        "index",
        "job_id",
        "nodelist",
        "num_nodes",
        "num_tasks",
        "tasks_per_node",
        "cpus_per_node",
    )
    __slots__ = __match_args__

    def __init__(
        self,
        index: int,
        job_id: int | None,
        nodelist: str | None,
        num_nodes: int | None,
        num_tasks: int | None,
        tasks_per_node: str | None,
        cpus_per_node: str | None,
    ) -> None:
        self.index: Final = index
        self.job_id: Final = job_id
        self.nodelist: Final = nodelist  # SLURM_JOB_NODELIST_HET_GROUP_n
        self.num_nodes: Final = num_nodes  # SLURM_JOB_NUM_NODES_HET_GROUP_n
        self.num_tasks: Final = num_tasks  # SLURM_NTASKS_HET_GROUP_n (sbatch/salloc het jobs only)
        self.tasks_per_node: Final = tasks_per_node  # SLURM_TASKS_PER_NODE_HET_GROUP_n (sbatch/salloc)
        self.cpus_per_node: Final = cpus_per_node  # SLURM_JOB_CPUS_PER_NODE_HET_GROUP_n


class GpuVariables(Value):
    """What Slurm (or the user) set about this task's GPUs, as set; ``tfslurm.gpus`` reads it.

    Texts are kept as they were (None: unset), since which of them is set, and how, decides
    the binding, and a malformed one is an error only where ``tfslurm.gpus`` needs it.
    """

    __match_args__ = (
        "visible",
        "gpus_on_node",
        "step_gpus",
        "job_gpus",
        "tres_bind",
        "tres_per_task",
        "gpus_per_task",
        "gpus_total",
        "assigned",
        "task_key",
    )
    __slots__ = __match_args__

    def __init__(
        self,
        *,
        visible: tuple[tuple[str, str], ...] = (),
        gpus_on_node: str | None = None,
        step_gpus: str | None = None,
        job_gpus: str | None = None,
        tres_bind: str = "",
        tres_per_task: str = "",
        gpus_per_task: str = "",
        gpus_total: str = "",
        assigned: str = "",
        task_key: str | None = None,
    ) -> None:
        self.visible: Final = visible  # (name, value) of each VISIBLE_DEVICE_VARIABLES set
        self.gpus_on_node: Final = gpus_on_node  # SLURM_GPUS_ON_NODE
        self.step_gpus: Final = step_gpus  # SLURM_STEP_GPUS (global ids)
        self.job_gpus: Final = job_gpus  # SLURM_JOB_GPUS (global ids; the batch script's)
        self.tres_bind: Final = tres_bind  # SLURMD_TRES_BIND
        self.tres_per_task: Final = tres_per_task  # SLURM_TRES_PER_TASK
        self.gpus_per_task: Final = gpus_per_task  # SLURM_GPUS_PER_TASK
        self.gpus_total: Final = gpus_total  # SLURM_GPUS, stripped
        self.assigned: Final = assigned  # TFSLURM_ASSIGNED_GPUS (tfslurm.gpus.ASSIGNED_VARIABLE)
        self.task_key: Final = task_key  # ``job.step.procid`` of this task; None outside a step

    @classmethod
    def from_environ(cls, env: Mapping[str, str] | None = None) -> GpuVariables:
        """Read the GPU variables from ``env`` (default: ``os.environ``); never raises."""
        source = os.environ if env is None else env
        return cls(
            visible=tuple((name, source[name]) for name in VISIBLE_DEVICE_VARIABLES if name in source),
            gpus_on_node=source.get("SLURM_GPUS_ON_NODE"),
            step_gpus=source.get("SLURM_STEP_GPUS"),
            job_gpus=source.get("SLURM_JOB_GPUS"),
            tres_bind=source.get("SLURMD_TRES_BIND", ""),
            tres_per_task=source.get("SLURM_TRES_PER_TASK", ""),
            gpus_per_task=source.get("SLURM_GPUS_PER_TASK", ""),
            gpus_total=source.get("SLURM_GPUS", "").strip(),
            assigned=source.get(ASSIGNED_VARIABLE, ""),
            task_key=_task_key(source),
        )

    @property
    def slurm_manages(self) -> bool:
        """One of SLURM_STEP_GPUS, SLURM_JOB_GPUS, SLURM_GPUS_ON_NODE is set: Slurm manages
        GPUs for this job."""
        return self.step_gpus is not None or self.job_gpus is not None or self.gpus_on_node is not None

    def value(self, name: str) -> str | None:
        """The value of the visible-device variable ``name``; None when it is not set."""
        return next((value for variable, value in self.visible if variable == name), None)


class Step(Value):
    """Immutable snapshot of what Slurm told this process; None where it told nothing.

    ``het`` is empty for a job that is not heterogeneous and ``gtids`` is None when
    ``SLURM_GTIDS`` is unset. Build it with :meth:`from_environ`. Two steps are equal when
    Slurm's variables are; ``gpus``, ``settings`` and ``env`` are carried along, not compared.
    """

    __match_args__ = (
        "context",
        "job_id",
        "step_id",
        "restart_count",
        "procid",
        "localid",
        "nodeid",
        "node_name",
        "nodelist",
        "tasks_per_node",
        "num_tasks",
        "num_nodes",
        "distribution",
        "plane_size",
        "het",
        "hostfile",
        "arbitrary_nodelist",
        "gtids",
        "resv_ports",
    )
    __slots__ = (*__match_args__, "gpus", "settings", "env")

    def __init__(
        self,
        context: Context,
        *,
        job_id: int | None = None,
        step_id: int | None = None,
        restart_count: int = 0,
        procid: int | None = None,
        localid: int | None = None,
        nodeid: int | None = None,
        node_name: str | None = None,
        nodelist: str | None = None,
        tasks_per_node: str | None = None,
        num_tasks: int | None = None,
        num_nodes: int | None = None,
        distribution: str | None = None,
        plane_size: int | None = None,
        het: tuple[HetComponent, ...] = (),
        hostfile: str | None = None,
        arbitrary_nodelist: str | None = None,
        gtids: tuple[int, ...] | None = None,
        resv_ports: str | None = None,
        gpus: GpuVariables | None = None,
        settings: Settings | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.context: Final = context
        self.job_id: Final = job_id
        self.step_id: Final = step_id
        self.restart_count: Final = restart_count
        self.procid: Final = procid
        self.localid: Final = localid
        self.nodeid: Final = nodeid
        self.node_name: Final = node_name
        self.nodelist: Final = nodelist
        self.tasks_per_node: Final = tasks_per_node
        self.num_tasks: Final = num_tasks
        self.num_nodes: Final = num_nodes
        self.distribution: Final = distribution
        self.plane_size: Final = plane_size
        self.het: Final = het
        self.hostfile: Final = hostfile
        self.arbitrary_nodelist: Final = arbitrary_nodelist
        self.gtids: Final = gtids
        self.resv_ports: Final = resv_ports
        self.gpus: Final = GpuVariables() if gpus is None else gpus
        self.settings: Final = Settings() if settings is None else settings
        self.env: Final[Mapping[str, str]] = MappingProxyType({}) if env is None else env

    @classmethod
    def from_environ(cls, env: Mapping[str, str] | None = None, *, settings: Settings | None = None) -> Step:
        """Read the Slurm variables from ``env`` (default: ``os.environ``), with this task's
        GPU variables (``gpus``) and tfslurm's settings (``settings``: read from ``env``
        unless an entry point that read them already passes them).

        Raises SlurmEnvError naming the variable when a number is malformed.
        """
        source = os.environ if env is None else env
        kept = {
            name: value
            for name, value in source.items()
            if name.startswith(("SLURM", "TFSLURM")) or name in GPU_VARIABLES
        }
        return cls(
            context=_context(kept),
            job_id=_int(kept, "SLURM_JOB_ID", "SLURM_JOBID"),
            step_id=_step_id(kept),
            restart_count=_int(kept, "SLURM_RESTART_COUNT") or 0,
            procid=_int(kept, "SLURM_PROCID"),
            localid=_int(kept, "SLURM_LOCALID"),
            nodeid=_int(kept, "SLURM_NODEID"),
            node_name=_str(kept, "SLURMD_NODENAME"),
            nodelist=_str(kept, "SLURM_STEP_NODELIST"),
            tasks_per_node=_str(kept, "SLURM_STEP_TASKS_PER_NODE"),
            num_tasks=_int(kept, "SLURM_STEP_NUM_TASKS"),
            num_nodes=_int(kept, "SLURM_STEP_NUM_NODES"),
            distribution=_str(kept, "SLURM_DISTRIBUTION"),
            plane_size=_int(kept, "SLURM_DIST_PLANESIZE", positive=True),
            het=_het_components(kept),
            hostfile=_str(kept, "SLURM_HOSTFILE"),
            arbitrary_nodelist=_str(kept, "SLURM_ARBITRARY_NODELIST"),
            gtids=_int_list(kept, "SLURM_GTIDS"),
            resv_ports=_str(kept, "SLURM_STEP_RESV_PORTS"),
            gpus=GpuVariables.from_environ(kept),
            settings=Settings.from_environ(kept) if settings is None else settings,
            env=MappingProxyType(kept),
        )

    def require(self, *fields: str) -> None:
        """Raise SlurmEnvError unless every named field is set, saying why one is not.

        ``step.require("nodelist", "procid")`` in a batch script raises "SLURM_STEP_NODELIST
        is not set: this is a batch script, not a task of a step; run it under srun".
        """
        for name in fields:
            if name not in FIELD_VARIABLES:
                raise ValueError(f"Step has no field {name!r}")  # programming error
            value = getattr(self, name)
            if value is None or (name == "het" and not value):
                raise SlurmEnvError(f"{FIELD_VARIABLES[name]} is not set: {self._why_missing()}")

    def _why_missing(self) -> str:
        if self.context == "outside":
            return "not running under Slurm (no SLURM_JOB_ID); run it as a task of a job step (srun)"
        if self.context == "batch":
            return "this is a batch script, not a task of a step; run it under srun"
        if self.context == "allocation":
            return "this is an salloc shell, not a task of a step; run it under srun"
        where = f"job {self.job_id} step {self.step_id}" if self.job_id is not None else "step"
        return f"Slurm did not set it for this task of {where}"

    def describe(self) -> str:
        """A short human label such as "task 3 of step 12.0 on node2"."""
        if self.context != "step":
            return CONTEXT_TEXT[self.context]
        return f"task {self.procid} of step {self.job_id}.{self.step_id} on {self.node_name}"

    # Typed forms of require(): the field's value, or the same SlurmEnvError.
    def require_job_id(self) -> int:
        """``job_id`` (SLURM_JOB_ID), or SlurmEnvError saying why it is not set."""
        if self.job_id is None:
            raise self._missing("job_id")
        return self.job_id

    def require_step_id(self) -> int:
        """``step_id`` (SLURM_STEP_ID), or SlurmEnvError saying why it is not set."""
        if self.step_id is None:
            raise self._missing("step_id")
        return self.step_id

    def require_procid(self) -> int:
        """``procid`` (SLURM_PROCID), or SlurmEnvError saying why it is not set."""
        if self.procid is None:
            raise self._missing("procid")
        return self.procid

    def require_nodelist(self) -> str:
        """``nodelist`` (SLURM_STEP_NODELIST), or SlurmEnvError saying why it is not set."""
        if self.nodelist is None:
            raise self._missing("nodelist")
        return self.nodelist

    def require_tasks_per_node(self) -> str:
        """``tasks_per_node`` (SLURM_STEP_TASKS_PER_NODE), or SlurmEnvError saying why not."""
        if self.tasks_per_node is None:
            raise self._missing("tasks_per_node")
        return self.tasks_per_node

    def _missing(self, name: str) -> SlurmEnvError:
        return SlurmEnvError(f"{FIELD_VARIABLES[name]} is not set: {self._why_missing()}")


def restart_count_from_environ(env: Mapping[str, str] | None = None) -> int:
    """``SLURM_RESTART_COUNT`` of ``env`` (default: ``os.environ``) alone, as
    :attr:`Step.restart_count`: the restart cap is checked before anything else, and a task
    whose role comes from TF_CONFIG must not fail on some other SLURM_* variable there."""
    source = os.environ if env is None else env
    return _int(source, "SLURM_RESTART_COUNT") or 0


def requeue_job_name(env: Mapping[str, str] | None = None) -> str:
    """The job ``scontrol requeue`` takes for this task (``<array>_<task>`` in an array
    job), from ``env`` (default: ``os.environ``); ``""`` outside a job. Never raises: it is
    asked after a failure, whatever else the environment holds."""
    source = os.environ if env is None else env
    array = source.get("SLURM_ARRAY_JOB_ID")
    if array:
        return f"{array}_{source.get('SLURM_ARRAY_TASK_ID', '')}"
    return source.get("SLURM_JOB_ID", "")


def slurm_conf_path(env: Mapping[str, str] | None = None) -> str | None:
    """``SLURM_CONF`` of ``env`` (default: ``os.environ``): the configuration Slurm's
    commands and libslurm read, None where it is unset or empty (their built-in path)."""
    source = os.environ if env is None else env
    return source.get("SLURM_CONF") or None


def is_rank_zero(env: Mapping[str, str] | None = None) -> bool:
    """``SLURM_PROCID`` of ``env`` (default: ``os.environ``) is 0 or unset: the one task
    that prints what is printed once. Never raises (a role may come from TF_CONFIG)."""
    source = os.environ if env is None else env
    return source.get("SLURM_PROCID", "0") == "0"


def _task_key(env: Mapping[str, str]) -> str | None:
    """``job.step.procid`` of this task as set, or None outside a step (lenient: the GPU
    marker compares texts, it does not parse them)."""
    parts = [
        (env.get(a) or env.get(b) or "").strip()
        for a, b in (
            ("SLURM_JOB_ID", "SLURM_JOBID"),
            ("SLURM_STEP_ID", "SLURM_STEPID"),
            ("SLURM_PROCID", "SLURM_PROCID"),
        )
    ]
    if not all(parts) or parts[1] in BATCH_STEP_IDS:
        return None  # outside a step, or 26.05's batch script (SLURM_STEP_ID=-5)
    return ".".join(parts)


# Slurm's special step ids as a task sees them. On 26.05 a batch script's SLURM_STEP_ID is its
# batch step's id as a signed number (SLURM_BATCH_SCRIPT, 0xfffffffb); 22.05 and 24.11 set none.
BATCH_STEP_IDS = frozenset({"-5", "4294967291"})


def _step_id(env: Mapping[str, str]) -> int | None:
    """The step's number; None outside a step and in a batch script (26.05's -5 included)."""
    if _str(env, "SLURM_STEP_ID", "SLURM_STEPID") in BATCH_STEP_IDS:
        return None
    return _int(env, "SLURM_STEP_ID", "SLURM_STEPID")


def _context(env: Mapping[str, str]) -> Context:
    if "SLURM_JOB_ID" not in env and "SLURM_JOBID" not in env:
        return "outside"
    step_id = _str(env, "SLURM_STEP_ID", "SLURM_STEPID")
    if step_id is not None and step_id not in BATCH_STEP_IDS and "SLURM_PROCID" in env:
        return "step"
    # The batch script is started by slurmstepd on the first node, which sets the per-task
    # variables (SLURMD_NODENAME, SLURM_PROCID=0 ...) but no step id; salloc's shell runs on
    # the submit host where no slurmstepd was involved.
    if "SLURMD_NODENAME" in env or "SLURM_PROCID" in env:
        return "batch"
    return "allocation"


def _str(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name)
        if value is not None and value.strip() != "":
            return value.strip()
    return None


def _int(env: Mapping[str, str], *names: str, positive: bool = False) -> int | None:
    for name in names:
        raw = env.get(name)
        if raw is None or raw.strip() == "":
            continue
        value = _parse_int(name, raw.strip())
        if positive and value == 0:
            raise SlurmEnvError(f"{name}={_clip(raw)!r} must be a positive integer")
        return value
    return None


def _parse_int(name: str, raw: str) -> int:
    value = ascii_int(raw)
    if value is None:
        raise SlurmEnvError(f"{name}={_clip(raw)!r} is not a non-negative integer")
    return value


def _int_list(env: Mapping[str, str], name: str) -> tuple[int, ...] | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    items = raw.strip().split(",")
    if len(items) > 1_000_000:
        raise SlurmEnvError(f"{name} lists {len(items)} ids, more than a node can hold")
    try:
        return tuple(_parse_int(name, item.strip()) for item in items)
    except SlurmEnvError:
        raise SlurmEnvError(f"{name}={_clip(raw)!r} is not a comma-separated list of task ids") from None


def _het_components(env: Mapping[str, str]) -> tuple[HetComponent, ...]:
    size = _int(env, "SLURM_HET_SIZE", "SLURM_PACK_SIZE")
    if size is None:
        return ()
    if size == 0 or size > 1024:
        name = "SLURM_HET_SIZE" if "SLURM_HET_SIZE" in env else "SLURM_PACK_SIZE"
        raise SlurmEnvError(f"{name}={size} is not a plausible number of het components")

    def names(stem: str, n: int) -> tuple[str, str]:
        return (f"{stem}_HET_GROUP_{n}", f"{stem}_PACK_GROUP_{n}")

    return tuple(
        HetComponent(
            index=n,
            job_id=_int(env, *names("SLURM_JOB_ID", n)),
            nodelist=_str(env, *names("SLURM_JOB_NODELIST", n)),
            num_nodes=_int(env, *names("SLURM_JOB_NUM_NODES", n)),
            num_tasks=_int(env, *names("SLURM_NTASKS", n)),
            tasks_per_node=_str(env, *names("SLURM_TASKS_PER_NODE", n)),
            cpus_per_node=_str(env, *names("SLURM_JOB_CPUS_PER_NODE", n)),
        )
        for n in range(size)
    )


def batch_job(env: Mapping[str, str] | None = None) -> tuple[int | None, int | None, int | None, bool]:
    """What ``tfslurm supervise`` reads of a batch script's environment
    (``tfslurm.runtime.nodeloss.BatchJob``): the job id, ``SLURM_NTASKS``,
    ``SLURM_NTASKS_PER_NODE``, and whether ``SBATCH_NO_KILL`` asked for --no-kill."""
    source = os.environ if env is None else env
    # sbatch takes "set" (on) or "off"/"no"; anything else it refused at submission
    no_kill = (source.get("SBATCH_NO_KILL") or "off").strip().lower() not in ("off", "no", "")
    return (
        _int(source, "SLURM_JOB_ID", "SLURM_JOBID"),
        _int(source, "SLURM_NTASKS", "SLURM_NPROCS", positive=True),
        _int(source, "SLURM_NTASKS_PER_NODE", positive=True),
        no_kill,
    )


def batch_host(env: Mapping[str, str] | None = None) -> str | None:
    """The node a batch script runs on (``SLURMD_NODENAME``), by the name the job's other
    nodes know it by; None outside Slurm."""
    source = os.environ if env is None else env
    return source.get("SLURMD_NODENAME") or None


def job_nodelist(env: Mapping[str, str] | None = None) -> str | None:
    """The job's nodes as Slurm gave them (``SLURM_JOB_NODELIST``), for ``tfslurm doctor``'s
    one step over every node of an allocation; None outside a job."""
    source = os.environ if env is None else env
    return source.get("SLURM_JOB_NODELIST") or source.get("SLURM_NODELIST") or None
