"""Which task am I? The role of this task in the TF cluster, from wherever it was given.

Resolution order (first that is present wins):

1. ``TF_CONFIG`` (set by the SPANK plugin, the TaskProlog hook, ``tfslurm env`` or the user);
2. ``TFSLURM_DESCRIPTOR`` (the compact plan exported when TF_CONFIG was too large), with this
   task's rank from ``SLURM_PROCID``;
3. the plan computed from the Slurm step, with the jobs spec given as ``--jobs`` (or the
   ``jobs`` argument) or else ``TFSLURM_TF_DIST`` (or else every task a worker).

Only the standard library is imported here: the ps/worker/chief decision is made before
TensorFlow is loaded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from tfslurm.errors import RoleError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from tfslurm.plan import Plan
    from tfslurm.settings import Settings


TRAINING_JOBS = ("chief", "worker", "ps")
KNOWN_JOBS = ("chief", "worker", "ps", "evaluator")


@dataclass(frozen=True)
class Address:
    """One task's ``host:port``."""

    job: str
    index: int
    host: str
    port: int

    @classmethod
    def parse(cls, job: str, index: int, text: str) -> Address:
        host, sep, port = text.rpartition(":")
        if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
            raise RoleError(f"cluster address {text!r} of {job}:{index} is not host:port")
        return cls(job, index, host, int(port))

    def __str__(self) -> str:
        return f"{self.job}:{self.index} at {self.host}:{self.port}"


@dataclass(frozen=True)
class Role:
    """This task's job and index plus the whole cluster (job -> list of ``host:port``)."""

    job: str
    index: int
    cluster: Mapping[str, tuple[str, ...]]
    source: str
    rpc_layer: str = "grpc"
    plan_table: str | None = field(default=None, compare=False)
    # Variables to set before TF starts (this task's GPUs, when tfslurm made the plan).
    env: Mapping[str, str] = field(default_factory=dict, compare=False)
    # One-line warnings about this task's GPUs (tfslurm.gpus.gpu_warnings), for stderr.
    gpu_warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def strategy(self) -> str:
        """``"ps"`` (ParameterServerStrategy) when the cluster has parameter servers, else
        ``"mwms"`` (MultiWorkerMirroredStrategy)."""
        return "ps" if self.cluster.get("ps") else "mwms"

    @property
    def is_chief(self) -> bool:
        """The task that writes checkpoints and summaries: chief 0, or worker 0 without one."""
        if self.cluster.get("chief"):
            return self.job == "chief"
        return self.job == "worker" and self.index == 0

    @property
    def is_server(self) -> bool:
        """ps and (under ParameterServerStrategy) worker tasks only run a TF server."""
        return self.job == "ps" or (self.job == "worker" and self.strategy == "ps")

    def address(self, job: str | None = None, index: int | None = None) -> Address:
        job = self.job if job is None else job
        index = self.index if index is None else index
        return Address.parse(job, index, self.cluster[job][index])

    def addresses(self, jobs: tuple[str, ...] = TRAINING_JOBS) -> list[Address]:
        return [
            Address.parse(job, i, text) for job in jobs for i, text in enumerate(self.cluster.get(job, ()))
        ]

    @property
    def chief(self) -> Address:
        """The coordinator (PSS) or the MWMS leader."""
        if self.cluster.get("chief"):
            return self.address("chief", 0)
        return self.address("worker", 0)

    def training_cluster(self) -> dict[str, list[str]]:
        """The cluster without the evaluator (plan.training_cluster: the one rule)."""
        from tfslurm.plan import training_cluster

        return training_cluster(self.cluster)

    def tf_config(self) -> str:
        """The TF_CONFIG this task's TensorFlow should see (compact JSON), written by the
        plan's writer, so that ``tfslurm run`` and the hook follow one evaluator rule."""
        from tfslurm.plan import tf_config_json

        return tf_config_json(self.cluster, self.job, self.index)

    def describe(self) -> str:
        return f"{self.job}:{self.index} ({self.strategy}, from {self.source})"


def _validate(job: str, index: int, cluster: dict[str, tuple[str, ...]], source: str) -> None:
    for name in cluster:
        if name not in KNOWN_JOBS:
            raise RoleError(f"{source}: job {name!r} is not one TF knows (chief, worker, ps, evaluator)")
    if job not in cluster:
        raise RoleError(f"{source}: task type {job!r} is not a job of the cluster {sorted(cluster)}")
    if not 0 <= index < len(cluster[job]):
        raise RoleError(
            f"{source}: task index {index} is out of range for job {job!r} ({len(cluster[job])} tasks)"
        )
    if len(cluster.get("chief", ())) > 1:
        raise RoleError(f"{source}: TF allows at most one chief, got {len(cluster['chief'])}")
    if len(cluster.get("evaluator", ())) > 1:
        raise RoleError(f"{source}: TF allows at most one evaluator")
    if cluster.get("ps"):
        if not cluster.get("chief"):
            raise RoleError(
                f"{source}: ParameterServerStrategy needs a chief (the coordinator): "
                "add chief:1 to the jobs spec, e.g. chief:1,ps:1,worker:*"
            )
        if not cluster.get("worker"):
            raise RoleError(f"{source}: ParameterServerStrategy needs at least one worker")
    elif not cluster.get("worker") and not cluster.get("chief"):
        raise RoleError(f"{source}: the cluster has no chief and no worker to train")
    for name, tasks in cluster.items():
        for i, text in enumerate(tasks):
            Address.parse(name, i, text)


def role_from_tf_config(text: str) -> Role:
    """Parse TF_CONFIG; any defect is a one-line ``RoleError`` naming TF_CONFIG."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RoleError(f"TF_CONFIG is not valid JSON: {exc.msg} at position {exc.pos}") from None
    except RecursionError:
        raise RoleError("TF_CONFIG is nested too deeply to be a cluster description") from None
    if not isinstance(value, dict):
        raise RoleError("TF_CONFIG must be a JSON object with 'cluster' and 'task'")
    cluster_raw, task = value.get("cluster"), value.get("task")
    if not isinstance(cluster_raw, dict) or not cluster_raw:
        raise RoleError("TF_CONFIG has no 'cluster' object (job -> list of host:port)")
    if not isinstance(task, dict) or "type" not in task:
        raise RoleError("TF_CONFIG has no 'task' object with 'type' and 'index'")
    cluster: dict[str, tuple[str, ...]] = {}
    for job, tasks in cluster_raw.items():
        if isinstance(tasks, dict):  # TF also accepts {index: address}
            try:
                tasks = [tasks[k] for k in sorted(tasks, key=int)]
            except (TypeError, ValueError):
                raise RoleError(f"TF_CONFIG job {job!r} has non-integer task indices") from None
        if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
            raise RoleError(f"TF_CONFIG job {job!r} must be a list of 'host:port' strings")
        cluster[str(job)] = tuple(tasks)
    raw_index = task.get("index", 0)
    text_index = str(raw_index).strip()
    if isinstance(raw_index, bool) or not (
        isinstance(raw_index, int)
        or (isinstance(raw_index, str) and text_index.isascii() and text_index.isdigit())
    ):  # 1e400 is inf, 1.5 would truncate, "²" passes isdigit: all refused
        raise RoleError(f"TF_CONFIG task index {str(raw_index)[:40]!r} is not an integer")
    index = int(raw_index)
    job = str(task["type"])
    _validate(job, index, cluster, "TF_CONFIG")
    return Role(job, index, cluster, "TF_CONFIG", str(value.get("rpc_layer") or "grpc"))


def _role_from_plan(plan: Plan, rank: int, source: str) -> Role:
    try:
        task = plan.task_of(rank)
    except (IndexError, KeyError, ValueError):
        raise RoleError(f"{source}: rank {rank} is not in the plan") from None
    cluster = {job: tuple(addrs) for job, addrs in plan.cluster_spec().items()}
    _validate(task.job, task.index, cluster, source)
    return Role(
        task.job,
        task.index,
        cluster,
        source,
        plan_table=plan.table(),
        env=dict(plan.gpus.env) if plan.gpus is not None else {},
        gpu_warnings=plan.gpus.warnings if plan.gpus is not None else (),
    )


def resolve_role(
    env: Mapping[str, str] | None = None, jobs: str | None = None, *, settings: Settings | None = None
) -> Role:
    """This task's role: TF_CONFIG, else TFSLURM_DESCRIPTOR, else the step's plan (which
    also narrows this task's GPU variables: ``Role.env``). ``settings`` are ``env``'s, when
    the caller read them already."""
    env = os.environ if env is None else env
    text = env.get("TF_CONFIG", "")
    if text.strip():
        return role_from_tf_config(text)
    from tfslurm.plan import DESCRIPTOR_VARIABLE, plan_from_step
    from tfslurm.step import Step

    step = Step.from_environ(env, settings=settings)
    procid = step.require_procid()
    step.require_nodelist()
    step.require_tasks_per_node()
    if (step.settings.descriptor or "").strip():
        return _role_from_plan(_on_iface(plan_from_step(step), step.settings), procid, DESCRIPTOR_VARIABLE)
    spec = jobs or step.settings.jobs
    source = f"plan of the step, jobs {spec}" if spec else "plan of the step, all workers"
    # GPU assignment stays on (no assign=False): Role.env narrows this task's GPU variables
    # before TF starts. A list narrowed earlier (TaskProlog) is kept as it is.
    return _role_from_plan(_on_iface(plan_from_step(step, spec), step.settings), procid, source)


def _on_iface(plan: Plan, settings: Settings) -> Plan:
    """``plan`` on the interface ``TFSLURM_IFACE`` names, if any (tfslurm.frameworks)."""
    if not settings.iface:
        return plan
    from tfslurm.frameworks import plan_with_iface

    return plan_with_iface(plan, settings)
