"""The end of a job that lost a node silently: the supervisor drops the node from the job.

Slurm keeps a job whose node died silently COMPLETING after its batch script ended, until
it sets the node DOWN (about 470 s on 22.05), and ``sbatch --wait`` and ``afterok``
dependencies wait with it. The job's user may shrink the job's node list while it runs
(``scontrol update JobId=N NodeList=...``; refused once it is completing): without the
silent node, the job ends COMPLETED with its batch script.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfslurm import hostlist
from tfslurm.errors import ControllerError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


def nodes_kept(job_nodes: Sequence[str], silent: Sequence[str]) -> tuple[str, ...] | None:
    """The job's nodes to keep when ``silent`` nodes are dropped from it; None when none of
    them is the job's (nothing to drop) or none of the job's would be left."""
    kept = tuple(n for n in job_nodes if n not in silent)
    return kept if kept and len(kept) < len(job_nodes) else None


def drop_silent(
    ask: Callable[[], tuple[tuple[str, ...], tuple[str, ...]]],
    drop: Callable[[Sequence[str]], None] | None,
    silent: Sequence[str],
    job_id: int | None,
) -> str | None:
    """Drop the ``silent`` nodes from the running job: the job's nodes now (``ask()``, as
    the supervisor's view) less those, kept with ``drop``. The line that says it, a warning
    line when the controller refused (the job then ends when Slurm sets them DOWN), None
    when there was nothing to drop."""
    if drop is None:
        return None
    try:
        job_nodes, _ = ask()
        kept = nodes_kept(job_nodes, silent)
        if kept is None:
            return None
        drop(kept)
    except ControllerError as exc:
        return (
            f"warning: could not drop the silent node(s) from job {job_id}: {exc}; "
            "the job ends when Slurm sets them DOWN"
        )
    dropped = ",".join(n for n in job_nodes if n not in kept)
    return (
        f"node {dropped} dropped from job {job_id} (scontrol update NodeList={hostlist.compress(kept)}): "
        "the job can end without waiting for Slurm to set it DOWN"
    )
