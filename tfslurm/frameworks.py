"""One plan, every framework: the variables TF, Keras 3, JAX and PyTorch read, from one Plan.

The rank -> node layout, the ports and each task's GPUs are decided once, in
:class:`tfslurm.plan.Plan`; this module only spells that plan in each framework's words, so
every framework sees the same ranks on every layout Slurm makes (block, cyclic, plane,
arbitrary, heterogeneous, uneven) and the same GPUs.

* **Coordinator** (JAX, Keras 3, PyTorch): rank 0's host, on the port the port rule gives
  the local id *after* the busiest node's tasks (``ports.port(max(counts))``). No task of
  the step owns that port on any node, so a TF server of the same step never collides with
  it; with ``MpiParams`` Slurm reserves exactly that one extra port. When the rule has no
  spare port (``srun --resv-ports=N`` with N = tasks per node), rank 0's own port is used.
* **GPUs**: each task's visible-device variables already list only its own devices
  (``tfslurm.gpus``), so inside the process its devices are ``0..n-1``: JAX gets those as
  ``local_device_ids`` and PyTorch uses ``cuda:0``. ``LOCAL_RANK`` keeps torchrun's meaning
  (the task's index on its node) and must not be used as a device index here.
* **Keras backend**: Keras 3 runs multi-process (``keras.distribution.initialize``, the
  reader of ``KERAS_DISTRIBUTION_*``) on its JAX backend only, so ``keras`` adds
  ``KERAS_BACKEND=jax`` to a task whose environment names no backend.
* **Network interface** (``tfslurm.iface``): the plan advertises every node by its address
  on the interface (``PlanOptions.iface``, ``Plan.on_iface``), and ``NCCL_SOCKET_IFNAME`` /
  ``GLOO_SOCKET_IFNAME`` name it here.

Frameworks are named as ``--for tf,jax`` (CLI) or ``TFSLURM_FOR`` (TaskProlog; default
``tf``). Only the standard library is used, and this module is imported only when a
framework other than TF, or an interface, is asked for.
"""

from __future__ import annotations

from tfslurm.errors import RuntimeListError
from tfslurm.plan import TF_CONFIG_MAX_BYTES  # the longest value one variable can carry
from tfslurm.settings import FOR_VARIABLE, IFACE_VARIABLE
from tfslurm.value import Value

# typing.TYPE_CHECKING without importing typing: the hook imports this module for --for
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Final

    from tfslurm.plan import Plan

__all__ = [
    "FOR_VARIABLE",
    "IFACE_VARIABLE",
    "KERAS_BACKEND",
    "RUNTIMES",
    "Coordinator",
    "RuntimeListError",
    "coordinator",
    "jax_env",
    "keras_backend_env",
    "keras_env",
    "local_device_ids",
    "parse_runtimes",
    "runtime_env",
    "socket_env",
    "torch_env",
]

RUNTIMES = ("tf", "keras", "jax", "torch")
#: The Keras backend ``keras`` sets where the task names none: the only backend with a
#: multi-process mode, which ``keras.distribution.initialize`` starts (Keras 3.15).
KERAS_BACKEND = "jax"


class Coordinator(Value):
    """Where rank 0 listens for the others (JAX's coordinator, torch's store)."""

    __slots__ = ("host", "port")
    __match_args__ = ("host", "port")

    def __init__(self, host: str, port: int) -> None:
        self.host: Final = host  # IPv6 without brackets
        self.port: Final = port

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_runtimes(text: str | None) -> tuple[str, ...]:
    """``"tf,jax"`` -> ``("tf", "jax")``; empty/None -> ``("tf",)``; unknown names are an error."""
    names = [word.strip().lower() for word in (text or "").split(",") if word.strip()]
    if not names:
        return ("tf",)
    unknown = [name for name in names if name not in RUNTIMES]
    if unknown:
        raise RuntimeListError(
            f"unknown runtime {unknown[0]!r} (--for/{FOR_VARIABLE}); choose from {', '.join(RUNTIMES)}"
        )
    return tuple(dict.fromkeys(names))


def coordinator(plan: Plan) -> Coordinator:
    """Rank 0's host and the coordinator port (module docstring)."""
    most = max(plan.cluster.counts)
    rule = plan.cluster.ports
    port = rule.port(most) if rule is not None and rule.capacity() > most else plan.cluster.port_of(0)
    return Coordinator(plan.cluster.host_of(0).strip("[]"), port)


def keras_env(plan: Plan, rank: int | None = None) -> dict[str, str]:
    """``KERAS_DISTRIBUTION_*`` for ``keras.distribution.initialize()``.

    The job addresses list every rank, the coordinator first (Keras takes the first entry as
    JAX's coordinator and checks the count). A list too long for one variable is cut to the
    coordinator alone, which Keras also accepts.
    """
    rank = _rank(plan, rank)
    first = coordinator(plan).address
    addresses = plan.cluster.addresses
    size = len(first) + sum(len(a) + 1 for a in addresses[1:])
    listed = first if size > TF_CONFIG_MAX_BYTES - 40 else ",".join([first, *addresses[1:]])
    out = {
        "KERAS_DISTRIBUTION_JOB_ADDRESSES": listed,
        "KERAS_DISTRIBUTION_NUM_PROCESSES": str(plan.cluster.num_tasks),
        "KERAS_DISTRIBUTION_PROCESS_ID": str(rank),
    }
    # Keras passes no device ids: JAX reads these, else guesses SLURM_LOCALID (wrong here).
    return out | _device_ids_env(plan, rank)


def local_device_ids(plan: Plan) -> tuple[int, ...] | None:
    """This task's GPUs as indices inside the process (its variable lists only its own)."""
    gpus = plan.gpus
    if gpus is None or not gpus.own:
        return None
    return tuple(range(len(gpus.own)))


def jax_env(plan: Plan, rank: int | None = None) -> dict[str, str]:
    """JAX's coordinator (``JAX_COORDINATOR_ADDRESS``, read by ``jax.distributed``) and the rest.

    JAX reads ``JAX_COORDINATOR_ADDRESS`` and ``JAX_LOCAL_DEVICE_IDS`` itself; it does not read
    ``JAX_NUM_PROCESSES`` / ``JAX_PROCESS_ID``, which are there to pass on
    (``tfslurm.jax.initialize()`` does).
    """
    rank = _rank(plan, rank)
    out = {
        "JAX_COORDINATOR_ADDRESS": coordinator(plan).address,
        "JAX_NUM_PROCESSES": str(plan.cluster.num_tasks),
        "JAX_PROCESS_ID": str(rank),
    }
    return out | _device_ids_env(plan, rank)


def _device_ids_env(plan: Plan, rank: int) -> dict[str, str]:
    """``JAX_LOCAL_DEVICE_IDS`` for this task's own rank when it has GPUs (other ranks'
    are not known here)."""
    ids = local_device_ids(plan) if rank == plan.rank else None
    return {"JAX_LOCAL_DEVICE_IDS": ",".join(map(str, ids))} if ids else {}


def torch_env(plan: Plan, rank: int | None = None) -> dict[str, str]:
    """torchrun's variables: ``MASTER_ADDR/PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_*``, ``GROUP_RANK``.

    ``LOCAL_WORLD_SIZE`` is this node's own task count (uneven steps differ per node) and
    ``GROUP_RANK`` the node's index in the step's node list.
    """
    rank = _rank(plan, rank)
    where = coordinator(plan)
    node = plan.cluster.rank_node[rank]
    return {
        "MASTER_ADDR": where.host,
        "MASTER_PORT": str(where.port),
        "RANK": str(rank),
        "WORLD_SIZE": str(plan.cluster.num_tasks),
        "LOCAL_RANK": str(plan.cluster.rank_local[rank]),
        "LOCAL_WORLD_SIZE": str(plan.cluster.counts[node]),
        "GROUP_RANK": str(node),
    }


def keras_backend_env(env: Mapping[str, str]) -> dict[str, str]:
    """``KERAS_BACKEND=jax`` unless ``env`` (the task's environment) names a backend already.

    Keras' own default is TensorFlow, whose backend has no multi-process mode, and Keras
    without TensorFlow installed does not import at all without a backend named.
    """
    return {} if env.get("KERAS_BACKEND") else {"KERAS_BACKEND": KERAS_BACKEND}


def socket_env(plan: Plan) -> dict[str, str]:
    """The variables that make NCCL and Gloo use the plan's interface (none without one)."""
    if plan.cluster.iface is None:
        return {}
    return {"NCCL_SOCKET_IFNAME": plan.cluster.iface, "GLOO_SOCKET_IFNAME": plan.cluster.iface}


def runtime_env(
    plan: Plan, runtimes: tuple[str, ...] = ("tf",), env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Every variable this task needs for ``runtimes``: TF's (TF_CONFIG or descriptor) and
    the GPUs as :meth:`Plan.task_env` gives them, then each other framework's, then the
    interface variables when the plan has an interface.

    ``env`` is the task's environment when the caller has it: with ``keras``, a task that
    names no Keras backend there gets ``KERAS_BACKEND=jax`` (:func:`keras_backend_env`);
    None leaves the backend to Keras.
    """
    out: dict[str, str] = {}
    if "tf" in runtimes:
        out.update(plan.task_env())
    elif plan.gpus is not None:
        out.update(plan.gpus.env)
    if "keras" in runtimes:
        out.update(keras_env(plan))
        if env is not None:
            out.update(keras_backend_env(env))
    if "jax" in runtimes:
        out.update(jax_env(plan))
    if "torch" in runtimes:
        out.update(torch_env(plan))
    out.update(socket_env(plan))
    return out


def _rank(plan: Plan, rank: int | None) -> int:
    if rank is None:
        return plan.require_rank("a runtime's variables")
    return plan.cluster.check_rank(rank)
