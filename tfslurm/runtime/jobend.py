"""The end of a job that lost a node silently: the supervisor drops the node from the job.

Slurm keeps a job whose node died silently COMPLETING after its batch script ended, until
it sets the node DOWN (about 470 s on 22.05), and ``sbatch --wait`` and ``afterok``
dependencies wait with it. The job's user may shrink the job's node list while it runs
(``scontrol update JobId=N NodeList=...``; refused once it is completing): without the
silent node, the job ends COMPLETED with its batch script.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tfslurm import hostlist
from tfslurm.errors import ControllerError
from tfslurm.runtime.nodeloss import ask_until

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


def nodes_kept(job_nodes: Sequence[str], silent: Sequence[str]) -> tuple[str, ...] | None:
    """The job's nodes to keep when ``silent`` nodes are dropped from it; None when none of
    them is the job's (nothing to drop) or none of the job's would be left."""
    kept = tuple(n for n in job_nodes if n not in silent)
    return kept if kept and len(kept) < len(job_nodes) else None


def _listed_up(silent: Sequence[str], job_nodes: Sequence[str], usable: Sequence[str]) -> list[str]:
    """The silent nodes still in the job that the controller lists usable."""
    return [n for n in silent if n in job_nodes and n in usable]


#: Seconds the supervisor waits, after the training, for Slurm to list the silent nodes
#: unusable before it drops them (Slurm flags a node NOT_RESPONDING 10-25 s after its
#: death, at the first message to it that fails).
FLAG_WAIT_S = 25.0


def drop_silent(
    ask: Callable[[], tuple[tuple[str, ...], tuple[str, ...]]],
    drop: Callable[[Sequence[str]], None] | None,
    silent: Sequence[str],
    job_id: int | None,
    wait: float = FLAG_WAIT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Drop the ``silent`` nodes from the running job: the job's nodes now (``ask()``, as
    the supervisor's view) less those, kept with ``drop``. The line that says it, a warning
    line when the controller refused (the job then ends when Slurm sets them DOWN), None
    when there was nothing to drop.

    A node leaves the job only once the controller lists it unusable (NOT_RESPONDING,
    DOWN): one it still lists up would go back to Slurm's pool as idle, and the next job
    given it would hang. The controller is asked every second for up to ``wait`` seconds;
    after that the nodes stay in the job, in one line."""
    if drop is None:
        return None
    try:
        job_nodes, usable = ask_until(ask, lambda view: not _listed_up(silent, *view), wait, sleep=sleep)
        listed_up = _listed_up(silent, job_nodes, usable)
        if listed_up:
            return (
                f"node {','.join(listed_up)} still listed up by Slurm {wait:g} s on: kept in job {job_id} "
                "so that no other job is given it; the job ends when Slurm sets it DOWN"
            )
        if not any(n in job_nodes for n in silent):  # Slurm took them out itself (DOWN by now)
            return f"node {','.join(silent)} no longer in job {job_id} (Slurm took it out): the job can end with its script"
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
