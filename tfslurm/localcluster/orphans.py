"""Temporary clusters left behind by a process that is gone (a killed test run), found and
stopped; a cluster whose owner still runs is never touched."""

from __future__ import annotations

import os

from tfslurm.errors import ClusterError
from tfslurm.localcluster.cluster import TEMP_PREFIX, LocalCluster
from tfslurm.localcluster.slurmconf import StateFiles


def reap_orphans(parent: str = "/tmp") -> list[str]:
    """Stop temporary clusters whose starting process is gone (e.g. a killed test run).

    Only state dirs named like ours and marked temporary are considered; a cluster whose
    owner still runs is never touched. Returns the state dirs cleaned up.
    """
    cleaned: list[str] = []
    try:
        entries = os.listdir(parent)
    except OSError:
        return cleaned
    for entry in entries:
        path = os.path.join(parent, entry)
        if not entry.startswith(TEMP_PREFIX) or not os.path.exists(StateFiles(path).record):
            continue
        try:
            cluster = LocalCluster.attach(path)
        except ClusterError:
            continue
        if cluster.ephemeral and not cluster.owner_alive():
            cluster.stop(purge=True)
            cleaned.append(path)
    return cleaned
