"""The TF runtime: run a program as this task's role, with server lifecycle, missing-peer
errors, preemption and parameter-server failure handling.

Importing this package does not import TensorFlow; strategies and servers are created only
when ``run`` (or ``tfslurm run``) needs them.
"""

from __future__ import annotations

from tfslurm.errors import ParameterServerFailure, PreemptionError, RoleError
from tfslurm.runtime.api import RunContext, run
from tfslurm.runtime.exits import EXIT_PEER_TIMEOUT, EXIT_PS_FAILED
from tfslurm.runtime.preemption import requested
from tfslurm.runtime.roles import Role, resolve_role

__all__ = [
    "EXIT_PEER_TIMEOUT",
    "EXIT_PS_FAILED",
    "ParameterServerFailure",
    "PreemptionError",
    "Role",
    "RoleError",
    "RunContext",
    "requested",
    "resolve_role",
    "run",
]
