"""What the framework adapters (``tfslurm.jax``, ``tfslurm.torch``, ``tfslurm.keras``) share.

Each adapter starts from this task's plan on the chosen network interface
(:func:`task_plan`, the plan every entry resolves) and, with an interface, exports the
socket variables NCCL and Gloo read (``tfslurm.frameworks.socket_env``). JAX's CPU collectives use Gloo but read neither
variable, so the adapters that start JAX give Gloo the interface in code (:func:`gloo_on`).
Kept in one module so the three adapters start from the same plan the same way.

No framework is imported here at import time.
"""

from __future__ import annotations

import functools

from tfslurm.plan import Plan, PlanOptions, resolve_plan
from tfslurm.settings import Settings
from tfslurm.step import Step

__all__ = ["gloo_on", "task_plan"]


def task_plan(plan: Plan | None = None, iface: str | None = None) -> Plan:
    """The plan a framework adapter starts from: ``plan`` (default: this task's,
    :func:`tfslurm.plan.resolve_plan` from one read of the environment) on the interface
    ``iface`` (default ``TFSLURM_IFACE``).

    A plan already on an interface is kept as it is.
    """
    if plan is None:
        return resolve_plan(Step.from_environ(), options=PlanOptions(iface=iface))
    if plan.cluster.iface is not None:
        return plan
    settings = Settings.from_environ()
    return plan.on_iface(iface if iface is not None else settings.iface or "", settings)


def gloo_on(iface: str) -> None:
    """Make JAX's CPU collectives (Gloo) bind ``iface``.

    JAX 0.10 creates its Gloo collectives with neither a host name nor an interface, so
    Gloo takes the address of the node's host name; the factory is given the interface
    before JAX's CPU backend starts. A JAX without that factory is left as it is.
    """
    from jax._src import xla_bridge

    jaxlib = getattr(xla_bridge, "_jax", None)
    make = getattr(jaxlib, "make_gloo_tcp_collectives", None)
    if jaxlib is None or make is None or isinstance(make, functools.partial):
        return  # another JAX layout, or given the interface already
    jaxlib.make_gloo_tcp_collectives = functools.partial(make, interface=iface)
