"""The controller interface: the answers tfslurm reads and the calls it makes.

Backends (``commands``, and others where a site has them) implement :class:`Controller` and
return these values; ``tfslurm.controller.controller()`` picks one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from tfslurm.value import Value

__all__ = ["UNUSABLE", "Controller", "JobInfo", "NodeInfo", "StepInfo"]

# Node states and flags (as ``scontrol``/``sinfo`` spell them, upper case) on which no new
# step can start: a recovery must leave such a node out.
UNUSABLE = frozenset(
    {"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING", "FUTURE",
     "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN", "REBOOT_ISSUED", "UNKNOWN"}
)  # fmt: skip


class JobInfo(Value):
    """A job as the controller sees it now.

    ``nodes`` are the job's nodes in Slurm's order, expanded; empty while it is pending.
    ``state`` is the base state in upper case (``RUNNING``, ``PENDING``, ...), ``reason``
    the controller's reason text (``None`` when it gives none)."""

    __match_args__ = ("job_id", "state", "nodes", "batch_host", "restart_count", "reason")
    __slots__ = __match_args__

    def __init__(
        self,
        job_id: str,
        state: str,
        nodes: tuple[str, ...],
        batch_host: str | None,
        restart_count: int,
        reason: str | None = None,
    ) -> None:
        self.job_id: Final = job_id
        self.state: Final = state
        self.nodes: Final = nodes
        self.batch_host: Final = batch_host
        self.restart_count: Final = restart_count
        self.reason: Final = reason


class StepInfo(Value):
    """A running step of a job (``1234.0``, ``1234.batch``) and its nodes, expanded."""

    __match_args__ = ("step_id", "nodes")
    __slots__ = __match_args__

    def __init__(self, step_id: str, nodes: tuple[str, ...]) -> None:
        self.step_id: Final = step_id
        self.nodes: Final = nodes


class NodeInfo(Value):
    """A node's state: the base state and its flags, upper case (``DOWN``, ``{"DRAIN"}``)."""

    __match_args__ = ("name", "state", "flags")
    __slots__ = __match_args__

    def __init__(self, name: str, state: str, flags: frozenset[str] = frozenset()) -> None:
        self.name: Final = name
        self.state: Final = state
        self.flags: Final = flags

    @property
    def usable(self) -> bool:
        """Whether a new step may start on this node."""
        return self.state not in UNUSABLE and not (self.flags & UNUSABLE)


class Controller(Protocol):
    """The questions and actions tfslurm sends to ``slurmctld``.

    Every method raises :class:`ControllerError` when the controller cannot answer (the
    job is unknown, the command is missing, the call timed out)."""

    name: str

    def job(self, job_id: str) -> JobInfo: ...

    def steps(self, job_id: str) -> tuple[StepInfo, ...]: ...

    def nodes(self, names: Sequence[str] = ()) -> tuple[NodeInfo, ...]: ...

    def requeue(self, job_id: str, *, hold: bool = False) -> None: ...

    def release(self, job_id: str) -> None: ...

    def shrink(self, job_id: str, nodes: Sequence[str]) -> None:
        """Keep only ``nodes`` of the running job's nodes (Slurm refuses it once the job
        is completing)."""
        ...
