"""One plan, every runtime: the variables TF, Keras 3, JAX and PyTorch read, from one Plan.

The rank -> node layout, the ports and each task's GPUs are decided once, in
:class:`tfslurm.plan.Plan`; this module only spells that plan in each runtime's words, so
every runtime sees the same ranks on every layout Slurm makes (block, cyclic, plane,
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
* **Network interface** (``tfslurm.iface``): every host becomes the node's address on the
  interface, and ``NCCL_SOCKET_IFNAME`` / ``GLOO_SOCKET_IFNAME`` name it.

Runtimes are named as ``--for tf,jax`` (CLI) or ``TFSLURM_FOR`` (TaskProlog; default
``tf``). Only the standard library is used, and this module is imported only when a
runtime other than TF, or an interface, is asked for.
"""

from __future__ import annotations

import dataclasses

from tfslurm.errors import RuntimeListError
from tfslurm.plan import TF_CONFIG_MAX_BYTES  # the longest value one variable can carry
from tfslurm.settings import FOR_VARIABLE, IFACE_VARIABLE, Settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from tfslurm.plan import Plan

__all__ = [
    "FOR_VARIABLE",
    "IFACE_VARIABLE",
    "RUNTIMES",
    "Coordinator",
    "RuntimeListError",
    "apply_iface",
    "coordinator",
    "jax_env",
    "keras_env",
    "parse_runtimes",
    "plan_with_iface",
    "runtime_env",
    "torch_env",
]

RUNTIMES = ("tf", "keras", "jax", "torch")


@dataclasses.dataclass(frozen=True)
class Coordinator:
    """Where rank 0 listens for the others (JAX's coordinator, torch's store)."""

    host: str  # IPv6 without brackets
    port: int

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


def apply_iface(plan: Plan, iface: str, own_node: str | None = None, template: str | None = None) -> Plan:
    """``plan`` with every node advertised by its address on ``iface`` (see tfslurm.iface).

    ``template`` is the per-interface host name to resolve (default ``{node}-IFACE``);
    ``own_node`` (this task's node) is checked to have the interface and that address.
    """
    from tfslurm.iface import IfaceHosts  # socket, fcntl: only when an interface is named

    hosts = IfaceHosts(iface, template, own_node)
    return plan.on_hosts(hosts.addresses(plan.cluster.nodes), iface)


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
    ids = local_device_ids(plan) if rank == plan.rank else None
    if ids:
        out["JAX_LOCAL_DEVICE_IDS"] = ",".join(map(str, ids))
    return out


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
    ids = local_device_ids(plan) if rank == plan.rank else None
    if ids:
        out["JAX_LOCAL_DEVICE_IDS"] = ",".join(map(str, ids))
    return out


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


def runtime_env(plan: Plan, runtimes: tuple[str, ...] = ("tf",)) -> dict[str, str]:
    """Every variable this task needs for ``runtimes``: TF's (TF_CONFIG or descriptor) and
    the GPUs as :meth:`Plan.task_env` gives them, then each other runtime's, then the
    interface variables when the plan has an interface."""
    out: dict[str, str] = {}
    if "tf" in runtimes:
        out.update(plan.task_env())
    elif plan.gpus is not None:
        out.update(plan.gpus.env)
    if "keras" in runtimes:
        out.update(keras_env(plan))
    if "jax" in runtimes:
        out.update(jax_env(plan))
    if "torch" in runtimes:
        out.update(torch_env(plan))
    if plan.cluster.iface is not None:
        out.update({"NCCL_SOCKET_IFNAME": plan.cluster.iface, "GLOO_SOCKET_IFNAME": plan.cluster.iface})
    return out


def plan_with_iface(plan: Plan, env: Mapping[str, str] | Settings, iface: str | None = None) -> Plan:
    """``plan`` with the interface ``iface`` (default: ``TFSLURM_IFACE`` of ``env``, the
    task's :class:`~tfslurm.settings.Settings` or a mapping of variables) applied.

    The plan's own host template, when it has one, is the per-interface name to resolve;
    the task's own node (from the plan) is checked. No interface: the plan as it is.
    """
    if iface is not None:
        name = iface
    else:
        name = (env if isinstance(env, Settings) else Settings.from_environ(env)).iface or ""
    if not name:
        return plan
    template = None if plan.cluster.host_template == "{node}" else plan.cluster.host_template
    own = None if plan.rank is None else plan.cluster.nodes[plan.cluster.rank_node[plan.rank]]
    return apply_iface(plan, name, own, template)


def _rank(plan: Plan, rank: int | None) -> int:
    if rank is None:
        return plan.require_rank("a runtime's variables")
    return plan.cluster.check_rank(rank)
