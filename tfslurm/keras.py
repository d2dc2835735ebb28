"""``tfslurm.keras.initialize()``: ``keras.distribution.initialize()`` from tfslurm's plan.

Keras 3's multi-process mode (JAX backend) reads ``KERAS_DISTRIBUTION_JOB_ADDRESSES``,
``..._NUM_PROCESSES`` and ``..._PROCESS_ID`` and hands the first address to
``jax.distributed.initialize`` as coordinator; those come from the plan
(``tfslurm.frameworks.keras_env``), and so does ``KERAS_BACKEND=jax`` where the task names
no backend (multi-process Keras runs on JAX only). ``tfslurm env --for keras`` (or
``TFSLURM_FOR=keras``) sets the same variables without this call.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from tfslurm.adapters import gloo_on, task_plan
from tfslurm.frameworks import keras_backend_env, keras_env, socket_env

if TYPE_CHECKING:
    from tfslurm.plan import Plan

__all__ = ["initialize"]


def initialize(plan: Plan | None = None, *, iface: str | None = None) -> Plan:
    """Set the ``KERAS_DISTRIBUTION_*`` variables (and ``KERAS_BACKEND`` where none is
    set), call Keras' initialize, return the plan.

    The backend counts only when Keras is not imported yet: Keras reads it on import.
    """
    plan = task_plan(plan, iface)
    variables = keras_env(plan)
    variables.update(keras_backend_env(os.environ))
    variables.update(socket_env(plan))
    os.environ.update(variables)
    import keras

    if plan.cluster.iface is not None and keras.backend.backend() == "jax":
        gloo_on(plan.cluster.iface)

    keras.distribution.initialize()
    return plan
