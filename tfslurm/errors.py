"""The exceptions tfslurm raises for bad input.

Every error a user can cause is a ``ValueError`` subclass with a one-line message that
names the offending input and what is wrong with it, so scripts can catch one type and
the CLI can print one line and exit 2.
"""

from __future__ import annotations


class TfslurmError(ValueError):
    """Base class: bad input or an environment tfslurm cannot work with."""


class HostlistError(TfslurmError):
    """A hostlist or task-count expression that Slurm would reject."""


class SlurmEnvError(TfslurmError):
    """The Slurm environment lacks (or has malformed) what was asked for."""


class LayoutError(TfslurmError):
    """The rank -> node map cannot be determined (or does not match reality)."""


class JobSpecError(TfslurmError):
    """A jobs spec such as ``ps:1,worker:*`` that is malformed or does not add up."""


class GpuError(TfslurmError):
    """GPU settings that contradict what Slurm gave the task."""


class PortError(TfslurmError):
    """Port settings that cannot give every task a distinct port."""


class PlanError(TfslurmError):
    """A cluster plan that cannot be built or a descriptor that cannot be read."""


class ClusterError(RuntimeError):
    """The local test cluster could not be started or used (not bad user input)."""


def clip(text: str, limit: int = 60) -> str:
    """User text shortened for a one-line error message (the input may be megabytes)."""
    return text if len(text) <= limit else text[:limit] + "..."
