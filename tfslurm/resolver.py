"""``tfslurm.SlurmClusterResolver``: a drop-in for TF's resolver that is right on every shape.

Same constructor and methods as ``tf.distribute.cluster_resolver.SlurmClusterResolver``,
and the same answers where TF's are right. Where TF is wrong this one follows Slurm: hosts
in ``SLURM_STEP_NODELIST`` order (TF sorts them as strings), every layout Slurm has (TF
assumes block), CPU-only steps and Slurm's per-task GPU binding (TF crashes), ports that do
not collide between concurrent steps (TF: 8888 + local index), ``task_type``/``task_id`` set
at construction (TF: only inside ``cluster_spec()``), and ``CUDA_VISIBLE_DEVICES`` written
once, at construction, idempotently (TF rewrites it on every ``cluster_spec()`` and drifts).
docs/migrating.md lists every difference; ``tfslurm.tfcompat`` holds the rules of TF's that
this class keeps and tfslurm's own plan does not (job order, ``tasks_per_node``, port 8888).

TensorFlow is imported only when the class is first used: ``tfslurm.resolver`` builds it
on first attribute access, as a subclass of TF's ``ClusterResolver`` (which MWMS requires)
when TF is importable, and of ``object`` otherwise (``cluster_spec()`` then returns a dict).
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

from tfslurm import tfcompat
from tfslurm.errors import GpuError, PlanError
from tfslurm.layout import layout_for
from tfslurm.numbers import is_int_in
from tfslurm.plan import Plan, PlanOptions, plan_for
from tfslurm.step import Step
from tfslurm.tfcompat import TF_PORT_BASE

if TYPE_CHECKING:
    from tfslurm.jobspec import JobsSpec

# SlurmClusterResolver is built on first access (module __getattr__).
__all__ = ["TF_PORT_BASE", "SlurmClusterResolver", "SlurmResolverMixin", "cuda_initialised"]  # noqa: F822


def __getattr__(name: str) -> Any:
    if name == "SlurmClusterResolver":
        return _resolver_class()
    raise AttributeError(f"module 'tfslurm.resolver' has no attribute {name!r}")


@functools.cache
def _resolver_class() -> type:
    """Build the public class once: TF's ClusterResolver as base when TF is importable."""
    namespace: dict[str, Any] = {"__module__": __name__, "__doc__": SlurmResolverMixin.__doc__}
    try:
        import tensorflow as tf
    except ImportError:
        bases: tuple[type, ...] = (SlurmResolverMixin,)
    else:
        bases = (SlurmResolverMixin, tf.distribute.cluster_resolver.ClusterResolver)
        namespace["_cluster_spec_type"] = staticmethod(_cluster_spec_maker(tf))
    cls = type("SlurmClusterResolver", bases, namespace)
    cls.__qualname__ = "SlurmClusterResolver"
    return cls


def _cluster_spec_maker(tf: Any) -> Any:
    """``spec -> tf.train.ClusterSpec``, built from a ClusterDef filled map by map: the
    same ClusterSpec as ``tf.train.ClusterSpec(spec)`` (jobs sorted by name, tasks by
    index) at half the cost, which is most of a resolver's time at 1,000 tasks."""
    from tensorflow.core.protobuf import cluster_pb2

    def make(spec: dict[str, list[str]]) -> Any:
        cluster = cluster_pb2.ClusterDef()
        for name in sorted(spec):
            cluster.job.add(name=name).tasks.update(dict(enumerate(spec[name])))
        return tf.train.ClusterSpec(cluster)

    return make


class SlurmResolverMixin:
    """ClusterResolver for a Slurm step (a task launched by ``srun``).

    Args (as TF's, defaults differ where noted):
      jobs: ``{"ps": 1, "worker": 3}`` or ``"ps:1,worker:*"``. TF's alphabetical job order
        is kept for an explicit ``jobs``; the default is ``TFSLURM_TF_DIST`` (the
        ``--tf-dist`` spec, in the order written, as TF_CONFIG from tfslurm has it) or
        every task a worker.
      port_base: first port on each node; ``None`` (default; TF: 8888) uses the step's
        reserved ports or a base derived from job and step id (``tfslurm.ports``).
      gpus_per_node: GPUs on each node, numbered 0..n-1 (as TF). Default: what Slurm gave
        this task's node (never ``nvidia-smi`` unless Slurm said nothing).
      gpus_per_task: GPUs per task when a node's GPUs are shared out among its tasks.
      tasks_per_node: int or ``{node: n}``; overrides Slurm's counts (block layout).
      auto_set_gpu: write this task's devices to ``CUDA_VISIBLE_DEVICES`` now.
      rpc_layer: ``"grpc"``.
    tfslurm extras (keyword-only): ``env`` (a mapping to read instead of ``os.environ``;
    auto_set_gpu writes into it), ``host_template`` (e.g. ``"{node}-ib"``), ``job_order``
    (``"alphabetical"`` or ``"written"``).
    """

    def __init__(
        self,
        jobs: JobsSpec = None,
        port_base: int | None = None,
        gpus_per_node: int | None = None,
        gpus_per_task: int | None = None,
        tasks_per_node: int | Mapping[str, int] | None = None,
        auto_set_gpu: bool = True,
        rpc_layer: str | None = "grpc",
        *,
        env: Mapping[str, str] | None = None,
        host_template: str | None = None,
        job_order: str | None = None,
    ) -> None:
        step = Step.from_environ(env)  # the one read of the environment
        rank = step.require_procid()
        if tasks_per_node is not None:
            layout = tfcompat.tasks_per_node_layout(step, tasks_per_node)
        else:
            layout = layout_for(step)
        order = tfcompat.resolver_job_order(job_order, explicit_jobs=jobs is not None)
        spec: JobsSpec = step.settings.tf_dist if jobs is None else jobs
        _check_count("port_base", port_base, low=1, high=65535)
        port_base = tfcompat.fallback_port_base(step, port_base)
        _check_count("gpus_per_node", gpus_per_node)
        _check_count("gpus_per_task", gpus_per_task)
        gpus = tfcompat.tf_gpu_plan(step, layout, gpus_per_node, gpus_per_task)
        options = PlanOptions(
            port_base=port_base, host_template=host_template, layout=layout, job_order=order, gpu_plan=gpus
        )
        plan = plan_for(step, spec, options)
        self._plan = plan
        self._rank: int = rank
        self._task_type: str | None
        self._task_id: int | None
        self._task_type, self._task_id = plan.cluster.job_of(rank)
        self._rpc_layer = rpc_layer
        self._auto_set_gpu = auto_set_gpu
        for line in plan.gpus.warnings if plan.gpus is not None else ():
            print(line, file=sys.stderr, flush=True)
        if auto_set_gpu and plan.gpus is not None:
            target = os.environ if env is None else env
            if isinstance(target, MutableMapping):
                _set_gpu_env(target, plan.gpus.env, in_process=env is None)

    # -- TF's ClusterResolver API --------------------------------------------------------
    _cluster_spec_type: Any = None  # makes a tf.train.ClusterSpec when TF is importable

    def cluster_spec(self) -> Any:
        """The cluster as ``tf.train.ClusterSpec`` (a dict of lists without TF)."""
        spec = self._plan.cluster.cluster_spec()
        if self._cluster_spec_type is None:
            return spec
        self._plan.cluster.require_text_hosts("TensorFlow's ClusterSpec")
        return self._cluster_spec_type(spec)

    def master(
        self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None
    ) -> str:
        """``grpc://host:port`` of a task (default: this one); ``''`` when none is chosen."""
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        if task_type is None or task_id is None:
            return ""
        address = self._plan.cluster.addresses[self._plan.cluster.rank_of(task_type, int(task_id))]
        layer = rpc_layer or self.rpc_layer
        return f"{layer}://{address}" if layer else address

    def get_task_info(self) -> tuple[str | None, int | None]:
        """``(task_type, task_id)`` of this process (set since construction)."""
        return self.task_type, self.task_id

    def num_accelerators(
        self, task_type: str | None = None, task_id: int | None = None, config_proto: Any = None
    ) -> dict[str, int]:
        """``{"GPU": n}`` for a task's own GPUs (default: this task); ``{}`` with none.

        Returns ``{}`` rather than ``{"GPU": 0}`` for a GPU-less task, as TF's base class does,
        so MultiWorkerMirroredStrategy uses the CPU instead of looking for GPUs. For a task
        whose GPUs this process cannot know, this task's own count is returned (TF assumes
        every worker has the same).
        """
        del config_proto
        plan = self._plan
        gpus = None
        if task_type is not None and task_id is not None:
            gpus = plan.gpus_of(plan.cluster.rank_of(task_type, int(task_id)))
        if gpus is None:
            gpus = plan.gpus_of(self._rank) or ()
        return {"GPU": len(gpus)} if gpus else {}

    @property
    def environment(self) -> str:
        return ""

    @property
    def task_type(self) -> str | None:
        return getattr(self, "_task_type", None)

    @task_type.setter
    def task_type(self, task_type: str | None) -> None:
        self._task_type = task_type

    @property
    def task_id(self) -> int | None:
        return getattr(self, "_task_id", None)

    @task_id.setter
    def task_id(self, task_id: int | None) -> None:
        self._task_id = task_id

    @property
    def rpc_layer(self) -> str | None:
        return self._rpc_layer

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer: str | None) -> None:
        self._rpc_layer = rpc_layer

    # -- tfslurm extras ------------------------------------------------------------------
    @property
    def plan(self) -> Plan:
        """The full tfslurm plan (every rank's job, host:port and known GPUs)."""
        return self._plan

    @property
    def gpus(self) -> tuple[str, ...]:
        """This task's own devices (empty without GPUs)."""
        return self._plan.gpus_of(self._rank) or ()

    def tf_config(self) -> str:
        """This task's TF_CONFIG (compact JSON) for the same cluster."""
        return self._plan.tf_config()

    def __repr__(self) -> str:
        return (
            f"SlurmClusterResolver(rank={self._rank}, task={self.task_type}:{self.task_id}, "
            f"tasks={self._plan.cluster.num_tasks}, nodes={len(self._plan.cluster.nodes)})"
        )


def cuda_initialised(maps: str = "/proc/self/maps") -> bool:
    """Whether this process already fixed its GPU list, so CUDA_VISIBLE_DEVICES is ignored.

    Being loaded is not being initialised: frameworks map libcuda at import or when counting
    devices without calling ``cuInit``, and CUDA reads CUDA_VISIBLE_DEVICES only in ``cuInit``.
    So where libcuda is mapped (``maps``), the driver itself is asked, without loading or
    initialising anything: ``dlopen(RTLD_NOLOAD)`` and ``cuDeviceGetCount``, which answers
    ``CUDA_ERROR_NOT_INITIALIZED`` (3) until ``cuInit`` has run. A mapped ROCm runtime
    (libamdhip64) counts as initialised (no such cheap question there), as does TensorFlow's
    initialised eager context. ``maps`` is a parameter for tests.
    """
    cuda: list[str] = []
    hip = False
    try:
        with open(maps, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if "libcuda.so" in line:
                    path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
                    if path and path not in cuda:
                        cuda.append(path)
                elif "libamdhip64.so" in line:
                    hip = True
    except OSError:
        pass
    if hip or any(_cuda_driver_initialised(path) for path in cuda):
        return True
    import sys

    context_module = sys.modules.get("tensorflow.python.eager.context")
    if context_module is None:
        return False
    try:
        ctx = context_module.context_safe()
        return bool(ctx is not None and getattr(ctx, "_initialized", False))
    except Exception:  # a private TF API; never let the check itself fail
        return False


#: CUresult of a driver call made before cuInit.
CUDA_ERROR_NOT_INITIALIZED = 3


def _cuda_driver_initialised(path: str) -> bool:
    """Whether the libcuda already mapped at ``path`` has run cuInit (True when unsure)."""
    import ctypes

    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        count = ctypes.c_int(0)
        result = lib.cuDeviceGetCount(ctypes.byref(count))
    except (OSError, AttributeError):
        return True  # mapped but not askable: assume the worst (initialised)
    return bool(result != CUDA_ERROR_NOT_INITIALIZED)


def _set_gpu_env(target: MutableMapping[str, str], wanted: Mapping[str, str], in_process: bool) -> None:
    """Write the GPU variables; warn if the process can no longer see the change."""
    changed = {name: value for name, value in wanted.items() if target.get(name) != value}
    if not changed:
        return
    if in_process and cuda_initialised():
        shown = ", ".join(f"{name}={value!r}" for name, value in changed.items())
        warnings.warn(
            f"tfslurm.SlurmClusterResolver: setting {shown} has no effect, the GPUs of this "
            "process are already initialised; create the resolver before any TensorFlow op, "
            "or let Slurm set the variables before Python starts (tfslurm prolog / srun --tf-dist)",
            RuntimeWarning,
            stacklevel=3,
        )
    for name, value in changed.items():
        target[name] = value


def _check_count(name: str, value: Any, low: int = 0, high: int | None = None) -> None:
    if value is None:
        return
    if not is_int_in(value, low, high):
        error = GpuError if name.startswith("gpus") else PlanError
        upper = f"..{high}" if high is not None else " or more"
        raise error(f"{name}={value!r} must be an integer {low}{upper}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"SlurmClusterResolver"})
