"""``tfslurm.keras.initialize()``: ``keras.distribution.initialize()`` from tfslurm's plan.

Keras 3's multi-process mode (JAX backend) reads ``KERAS_DISTRIBUTION_JOB_ADDRESSES``,
``..._NUM_PROCESSES`` and ``..._PROCESS_ID`` and hands the first address to
``jax.distributed.initialize`` as coordinator; those come from the plan
(``tfslurm.runtimes.keras_env``). ``tfslurm env --for keras`` (or ``TFSLURM_FOR=keras``)
sets the same variables without this call.
"""

from __future__ import annotations

import os

from tfslurm.jax import _gloo_on, _task_plan
from tfslurm.runtimes import keras_env

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tfslurm.plan import Plan

__all__ = ["initialize"]


def initialize(plan: Plan | None = None, *, iface: str | None = None) -> Plan:
    """Set the ``KERAS_DISTRIBUTION_*`` variables, call Keras' initialize, return the plan."""
    plan = _task_plan(plan, iface)
    variables = keras_env(plan)
    if plan.cluster.iface is not None:
        variables.update(NCCL_SOCKET_IFNAME=plan.cluster.iface, GLOO_SOCKET_IFNAME=plan.cluster.iface)
    os.environ.update(variables)
    import keras

    if plan.cluster.iface is not None and keras.backend.backend() == "jax":
        _gloo_on(plan.cluster.iface)

    keras.distribution.initialize()
    return plan
