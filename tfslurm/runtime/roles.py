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
from typing import TYPE_CHECKING

from tfslurm.cluster import Cluster
from tfslurm.errors import RoleError, bare, shown
from tfslurm.numbers import ascii_int, is_int_in
from tfslurm.plan import Plan, TaskPlan, resolve_plan
from tfslurm.settings import DESCRIPTOR_VARIABLE, Settings
from tfslurm.step import Step

if TYPE_CHECKING:
    from typing import Final


TRAINING_JOBS = ("chief", "worker", "ps")
KNOWN_JOBS = ("chief", "worker", "ps", "evaluator")


class Role:
    """This task's job and index in its TF cluster (:class:`tfslurm.cluster.Cluster`), and
    where that came from; a view of the cluster, as a plan is for the hook."""

    __slots__ = ("cluster", "env", "gpu_warnings", "index", "job", "plan", "source")

    def __init__(
        self,
        cluster: Cluster,
        job: str,
        index: int,
        source: str,
        *,
        plan: Plan | None = None,
        env: Mapping[str, str] | None = None,
        gpu_warnings: tuple[str, ...] = (),
    ) -> None:
        self.cluster: Final = cluster
        self.job: Final = job
        self.index: Final = index
        self.source: Final = source
        #: The plan the role was read from (None for a TF_CONFIG's), for :attr:`plan_table`.
        self.plan: Final = plan
        #: Variables to set before TF starts (this task's GPUs, when tfslurm made the plan).
        self.env: Final[Mapping[str, str]] = {} if env is None else env
        #: One-line warnings about this task's GPUs (tfslurm.gpus.gpu_warnings), for stderr.
        self.gpu_warnings: Final = gpu_warnings

    @property
    def plan_table(self) -> str | None:
        """The plan's table (``Plan.table``), made when asked: O(tasks), which only the task
        that shows it pays. None when the role did not come from a plan."""
        return None if self.plan is None else self.plan.table()

    @property
    def rank(self) -> int:
        return self.cluster.rank_of(self.job, self.index)

    @property
    def rpc_layer(self) -> str:
        return self.cluster.rpc_layer or "grpc"

    @property
    def strategy(self) -> str:
        """``"ps"`` (ParameterServerStrategy) when the cluster has parameter servers, else
        ``"mwms"`` (MultiWorkerMirroredStrategy)."""
        return "ps" if self.cluster.count_of("ps") else "mwms"

    @property
    def is_chief(self) -> bool:
        """The task that writes checkpoints and summaries: chief 0, or worker 0 without one."""
        if self.cluster.count_of("chief"):
            return self.job == "chief"
        return self.job == "worker" and self.index == 0

    @property
    def is_server(self) -> bool:
        """ps and (under ParameterServerStrategy) worker tasks only run a TF server."""
        return self.job == "ps" or (self.job == "worker" and self.strategy == "ps")

    def address(self, job: str | None = None, index: int | None = None) -> TaskPlan:
        """Task ``job``:``index`` (default: this task) as its plan's record, GPUs as far as
        known here: one builder for every record, so records of one task compare equal."""
        job = self.job if job is None else job
        index = self.index if index is None else index
        return self._view().task_of(self.cluster.rank_of(job, index))

    def addresses(self, jobs: tuple[str, ...] = TRAINING_JOBS) -> list[TaskPlan]:
        view, rank_of = self._view(), self.cluster.rank_of
        return [view.task_of(rank_of(job, i)) for job in jobs for i in range(self.cluster.count_of(job))]

    def _view(self) -> Plan:
        """The plan the records come from: the role's own, else one of its cluster (no GPUs)."""
        return Plan(self.cluster) if self.plan is None else self.plan

    @property
    def chief(self) -> TaskPlan:
        """The coordinator (PSS) or the MWMS leader."""
        if self.cluster.count_of("chief"):
            return self.address("chief", 0)
        return self.address("worker", 0)

    def training_cluster(self) -> dict[str, list[str]]:
        """The cluster training tasks see: without the evaluator and empty jobs."""
        return self.cluster.cluster_spec(include_evaluator=False)

    def tf_config(self) -> str:
        """The TF_CONFIG this task's TensorFlow should see (compact JSON), written by the
        cluster's one writer, so that ``tfslurm run`` and the hook follow one evaluator rule."""
        return self.cluster.tf_config(self.rank)

    def describe(self) -> str:
        return f"{self.job}:{self.index} ({self.strategy}, from {self.source})"


def parse_address(rank: int, job: str, index: int, text: str) -> TaskPlan:
    """``host:port`` text (from TF_CONFIG) of ``job`` task ``index``, rank ``rank``, as the
    record a TF_CONFIG's cluster gives it: its node is its host, its GPUs not known here."""
    host, sep, digits = text.rpartition(":")
    port = ascii_int(digits, 5)
    if not (sep and host and port is not None and 0 < port < 65536):
        raise RoleError(f"cluster address {shown(text)} of {bare(job)}:{index} is not host:port")
    return TaskPlan(rank, job, index, host, host, port, None)


def _validate(job: str, index: int, counts: Mapping[str, int], source: str) -> None:
    for name in counts:
        if name not in KNOWN_JOBS:
            raise RoleError(f"{source}: job {shown(name)} is not one TF knows (chief, worker, ps, evaluator)")
    if job not in counts:
        jobs = ", ".join(map(shown, sorted(counts)))
        raise RoleError(f"{source}: task type {shown(job)} is not a job of the cluster [{jobs}]")
    if not 0 <= index < counts[job]:
        raise RoleError(
            f"{source}: task index {index} is out of range for job {shown(job)} ({counts[job]} tasks)"
        )
    if counts.get("chief", 0) > 1:
        raise RoleError(f"{source}: TF allows at most one chief, got {counts['chief']}")
    if counts.get("evaluator", 0) > 1:
        raise RoleError(f"{source}: TF allows at most one evaluator")
    if counts.get("ps"):
        if not counts.get("chief"):
            raise RoleError(
                f"{source}: ParameterServerStrategy needs a chief (the coordinator): "
                "add chief:1 to the jobs spec, e.g. chief:1,ps:1,worker:*"
            )
        if not counts.get("worker"):
            raise RoleError(f"{source}: ParameterServerStrategy needs at least one worker")
    elif not counts.get("worker") and not counts.get("chief"):
        raise RoleError(f"{source}: the cluster has no chief and no worker to train")


def role_from_tf_config(text: str) -> Role:
    """Parse TF_CONFIG; any defect is a one-line ``RoleError`` naming TF_CONFIG."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RoleError(f"TF_CONFIG is not valid JSON: {exc.msg} at position {exc.pos}") from None
    except RecursionError:
        raise RoleError("TF_CONFIG is nested too deeply to be a cluster description") from None
    except ValueError:  # an integer of more digits than Python converts
        raise RoleError("TF_CONFIG holds a number too long to be a task index or port") from None
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
            indices = {ascii_int(key.strip()): value for key, value in tasks.items()}
            if None in indices:
                raise RoleError(f"TF_CONFIG job {shown(job)} has non-integer task indices")
            tasks = [indices[k] for k in sorted(indices)]  # type: ignore[type-var]
        if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
            raise RoleError(f"TF_CONFIG job {shown(job)} must be a list of 'host:port' strings")
        cluster[str(job)] = tuple(tasks)
    raw_index = task.get("index", 0)
    # 1e400 is inf, 1.5 would truncate, "²" passes isdigit, a bool is an int: all refused
    index = raw_index if is_int_in(raw_index) else None
    if isinstance(raw_index, str):
        index = ascii_int(raw_index.strip())
    if index is None:
        raise RoleError(f"TF_CONFIG task index {shown(str(raw_index), 40)} is not an integer")
    job = str(task["type"])
    counts = {name: len(tasks) for name, tasks in cluster.items()}
    _validate(job, index, counts, "TF_CONFIG")
    addresses: list[tuple[str, list[tuple[str, int]]]] = []
    rank = 0
    for name, tasks in cluster.items():
        parsed = [parse_address(rank + i, name, i, text) for i, text in enumerate(tasks)]
        addresses.append((name, [(a.host, a.port) for a in parsed]))
        rank += len(tasks)
    rpc_layer = value.get("rpc_layer")
    return Role(
        Cluster.from_addresses(addresses, str(rpc_layer) if rpc_layer else None), job, index, "TF_CONFIG"
    )


def _role_from_plan(plan: Plan, rank: int, source: str) -> Role:
    try:
        task = plan.task_of(rank)
    except (IndexError, KeyError, ValueError):
        raise RoleError(f"{source}: rank {rank} is not in the plan") from None
    _validate(task.job, task.index, dict(plan.cluster.jobs), source)
    return Role(
        plan.cluster,
        task.job,
        task.index,
        source,
        plan=plan,
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
    step = Step.from_environ(env, settings=settings)
    procid = step.require_procid()
    step.require_nodelist()
    step.require_tasks_per_node()
    if (step.settings.descriptor or "").strip():
        return _role_from_plan(resolve_plan(step), procid, DESCRIPTOR_VARIABLE)
    spec = jobs or step.settings.tf_dist
    source = f"plan of the step, jobs {bare(spec)}" if spec else "plan of the step, all workers"
    # GPU assignment stays on (no assign=False): Role.env narrows this task's GPU variables
    # before TF starts. A list narrowed earlier (TaskProlog) is kept as it is.
    return _role_from_plan(resolve_plan(step, spec), procid, source)
